"""The `advisor` command: `advisor tui FILE` (or `advisor FILE`) opens the TUI; every other command is
advisor.cli's. The dispatch lives here, in the top layer, because `advisor` itself never imports `tui`
(nor textual: `advisor suggest` in CI loads neither)."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and (argv[0] == "tui" or (argv[0].endswith(".py") and not argv[0].startswith("-"))):
        from tui.__main__ import main as tui_main

        return tui_main(argv[1:] if argv[0] == "tui" else argv)
    from advisor.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
