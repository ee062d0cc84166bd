"""The panes of the advisor's main screen, one module each; the app (tui.app) composes them and ties their
messages to the advisor's calls (tui.launches). Their styles live in tui/app.tcss.

- launch_list: LaunchList, the file's kernels and their launches (posts KernelHighlighted, LaunchChosen)
- launch_form: LaunchForm, a launch typed in (posts Typed)
- source: SourceView, the source at a kernel with its config lines marked
- ceiling: CeilingView, one candidate's ceiling per pipeline beside its latencies
- suggestions: SuggestionTable, the ranked suggestions (posts Highlighted, Selected)
- status: StatusLine (what runs, or the chosen launch's summary), CompileProgress and MeasureProgress
"""

from tui.widgets.ceiling import CeilingView
from tui.widgets.launch_form import LaunchForm
from tui.widgets.launch_list import LaunchList
from tui.widgets.source import SourceView
from tui.widgets.status import CompileProgress, MeasureProgress, StatusLine
from tui.widgets.suggestions import SuggestionTable

__all__ = ["CeilingView", "CompileProgress", "LaunchForm", "LaunchList", "MeasureProgress", "SourceView", "StatusLine",
           "SuggestionTable"]
