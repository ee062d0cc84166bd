"""The launch rule's grid per config against the grid the library's host code gives it (issue 15, point 4).

For every corpus launch with an autotune list (`capture_extras` kept, per config of the list, the grid
the library's own grid function gives it), each config that changes an integer meta-parameter of the
recorded one is put through `advisor.advice.launch_rule` built from the recorded launch alone, as
`suggest` builds it, and its grid compared with the captured one:

- right: the rule's grid is the host's;
- wrong: the rule changed an axis to another value than the host's;
- kept: every axis where the rule's grid differs from the host's is the recorded one (a tile it could
  not follow, or an axis it refused to explain because two sizes or tiles explained it equally);

(a config whose host grid equals the recorded one counts as right when the rule keeps it). Reads only the
traces and extras in data/traces: nothing is imported from the libraries.

    python benchmarks/corpus/check_grid_rule.py                     # the rule of this tree
    python benchmarks/corpus/check_grid_rule.py --rule-from cb29037 # the rule as committed there (before)
    python benchmarks/corpus/check_grid_rule.py --list wrong,kept   # and each such config

Prints a table per library and writes the rows as JSON with --json PATH.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT)]

from replay import LIBRARIES, NON_CONFIG, _grid3, load_cases  # noqa: E402

from ceilings.launch import Config, Launch  # noqa: E402

RULE = "advisor/advice/launch_rule.py"


def rule_module(commit: str | None):
    """advisor.advice.launch_rule of this tree, or the file as committed at `commit`."""
    if commit is None:
        from advisor.advice import launch_rule

        return launch_rule
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{RULE}"], check=True, capture_output=True,
                          text=True).stdout
    path = Path(tempfile.mkdtemp()) / f"launch_rule_{commit}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def _changes_a_meta_parameter(config: dict, recorded: dict) -> bool:
    return any(isinstance(v, int) and not isinstance(v, bool) and recorded.get(k) != v
               for k, v in config.items() if k not in NON_CONFIG)


def check(module, libraries=LIBRARIES) -> list[dict]:
    """One row per (launch, config of its autotune list that changes a meta-parameter)."""
    rows = []
    for library in libraries:
        for case in load_cases(library):
            if len(case.extras.get("variants") or []) < 2:
                continue
            launch = Launch.from_dict(case.entry, f"{library} launch {case.index}")
            try:
                rule = module.launch_rule(launch)
            except Exception as exc:  # noqa: BLE001 - counted: a rule that raises is a finding
                rule, error = None, f"{type(exc).__name__}: {exc}"
            recorded_grid = _grid3(launch.grid)
            variants = case.variants(limit=10_000)
            recorded = variants[0].config
            for v in variants[1:]:
                if not _changes_a_meta_parameter(v.config, recorded):
                    continue
                host = _grid3(v.grid)
                if rule is None:
                    predicted, outcome = None, "error"
                else:
                    try:
                        predicted = _grid3(rule.grid(Config.from_dict(v.config)))
                    except Exception as exc:  # noqa: BLE001
                        predicted, error = None, f"{type(exc).__name__}: {exc}"
                    if predicted is None:
                        outcome = "error"
                    elif predicted == host:
                        outcome = "right"
                    elif all(p in (h, r) for p, h, r in zip(predicted, host, recorded_grid, strict=True)):
                        outcome = "kept"
                    else:
                        outcome = "wrong"
                rows.append({"library": library, "launch": case.index, "kernel": case.kernel,
                             "config": {k: x for k, x in v.config.items() if recorded.get(k) != x},
                             "recorded_grid": recorded_grid, "host_grid": host, "predicted_grid": predicted,
                             "host_changes": host != recorded_grid, "outcome": outcome,
                             **({"error": error} if outcome == "error" else {}),
                             "notes": [] if rule is None else list(getattr(rule, "notes", lambda: [])())})
    return rows


def table(rows: list[dict]) -> str:
    out = ["| library | launches | configs | host grid changes | right (grid changes) | wrong | kept as recorded "
           "(with a note) | error |", "|---|---|---|---|---|---|---|---|"]
    for library in [*LIBRARIES, "all"]:
        group = [r for r in rows if library in ("all", r["library"])]
        if not group:
            continue
        n = Counter(r["outcome"] for r in group)
        changes = sum(r["host_changes"] for r in group)
        right_changes = sum(r["host_changes"] and r["outcome"] == "right" for r in group)
        launches = len({(r["library"], r["launch"]) for r in group})
        noted = sum(r["outcome"] == "kept" and any("kept as recorded" in x for x in r["notes"]) for r in group)
        out.append(f"| {library} | {launches} | {len(group)} | {changes} | {n['right']} ({right_changes}) "
                   f"| {n['wrong']} | {n['kept']} ({noted}) | {n['error']} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rule-from", metavar="COMMIT", help="check the launch rule as committed there")
    parser.add_argument("--list", default="", help="comma-separated outcomes whose configs to print per kernel")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    rows = check(rule_module(args.rule_from))
    print(table(rows))
    wanted = {w for w in args.list.split(",") if w}
    if wanted:
        per_kernel = Counter((r["library"], r["kernel"], r["outcome"]) for r in rows if r["outcome"] in wanted)
        for (library, kernel, outcome), count in sorted(per_kernel.items()):
            first = next(r for r in rows if (r["library"], r["kernel"], r["outcome"]) == (library, kernel, outcome))
            print(f"{outcome:5} {count:4} {library}/{kernel}: e.g. {first['config']} recorded "
                  f"{first['recorded_grid']} host {first['host_grid']} rule {first['predicted_grid']}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
