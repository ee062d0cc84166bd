"""The Textual face of the advisor (`advisor tui FILE`): it shows what `advisor`'s functions compute and holds
no advice logic of its own.

- __main__: the command line's options, checked before the screen opens (`run`)
- app: AdvisorApp, the composition, key bindings and the workers that call the advisor
- launches: what the screen lists and shows, gathered through the advisor's calls (no textual here)
- widgets/: the panes, one module each, with the messages they post
- screens: the dialogs (explain a suggestion, apply one, pick a GPU, the keys)
- app.tcss: every style
"""
