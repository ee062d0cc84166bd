"""The `advisor` command: `advisor tui FILE` (or `advisor FILE`) opens the TUI; every other command is
advisor.cli's. The dispatch lives here, in the top layer, because `advisor` itself never imports `tui`
(nor textual: `advisor suggest` in CI loads neither)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

# The top-level packages this project installs. Their names are common: another distribution may install one
# too (cuda-triton-multiarch installs a `kernels`), and the one earlier on sys.path is what `import` finds.
OWN_PACKAGES = ("advisor", "ceilings", "kernels", "tui")


def shadowed_packages() -> list[str]:
    """One line per own package that Python would import from somewhere other than beside this file (no
    package is imported to find out: `importlib.util.find_spec` of a top-level name only searches sys.path)."""
    import importlib.util
    from pathlib import Path

    home = Path(__file__).resolve().parents[1]
    problems = []
    for name in OWN_PACKAGES:
        spec = importlib.util.find_spec(name)
        origin = Path(spec.origin).resolve() if spec is not None and spec.origin else None
        if origin is not None and origin.parent == home / name:
            continue
        found = origin.parent if origin is not None else "nowhere"
        problems.append(f"Python finds the package `{name}` at {found}, not triton-advisor's {home / name}"
                        f"{_owners(name)}: take that folder off PYTHONPATH, or install triton-advisor in a "
                        "virtual environment of its own")
    return problems


def _owners(name: str) -> str:
    from importlib.metadata import packages_distributions

    others = sorted({d for d in packages_distributions().get(name, []) if d.replace("_", "-") != "triton-advisor"})
    return f" (installed by {', '.join(others)})" if others else ""


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    problems = shadowed_packages()
    if problems:
        for line in problems:
            print(f"advisor: error: {line}", file=sys.stderr)
        return 2
    if argv and (argv[0] == "tui" or (argv[0].endswith(".py") and not argv[0].startswith("-"))):
        from tui.__main__ import main as tui_main

        return tui_main(argv[1:] if argv[0] == "tui" else argv)
    from advisor.cli import main as cli_main

    return cli_main(argv)


def program() -> int:
    """The `advisor` program (its console script and `python -m tui.entry`): `main` in a process of its own, with a
    TRITON_INTERPRET of the shell left off (advisor.cli.leave_interpreter_off; `main` itself, which tests call in a
    process that interprets its kernels, leaves the environment alone)."""
    from advisor.cli import leave_interpreter_off

    leave_interpreter_off()
    return main()


if __name__ == "__main__":
    raise SystemExit(program())
