"""Whether the advice evaluates real libraries' `@triton.heuristics` as Triton does (advisor.advice.heuristics).

For every corpus launch whose kernel carries heuristics (the four fitted libraries and the held-out one),
their values are evaluated without data (meta tensors, the launch's scalars and constexprs, the config) and
compared with what the library's own run gave: at the recorded config, and at every other config of its
autotune list that the capture ran (the extras' variants, each with the constexprs Triton gave it). A
mismatch would be a config the advice compiles, costs and times as another program.

Needs the corpus libraries at /tmp/site (benchmarks/corpus/README.md).

    PYTHONPATH=/tmp/site:. GEMS_VENDOR=nvidia python benchmarks/corpus/check_heuristics.py [--list]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT)]

from replay import HELD_OUT, LIBRARIES, load_cases  # noqa: E402

from advisor.advice.heuristics import LAUNCH_OPTIONS, heuristic_values, overridden_knobs  # noqa: E402
from ceilings.compile import kernel_heuristics  # noqa: E402
from ceilings.launch import Config, Launch  # noqa: E402


def _points(case, launch: Launch):
    """(config, the constexprs the library's run gave it): the recorded launch, then its captured variants."""
    yield launch.config, dict(launch.constexprs), "recorded"
    for v in case.extras.get("variants") or []:
        cfg = dict(v["config"])
        params = {k: x for k, x in cfg.items() if k not in ("num_warps", "num_stages", "num_ctas", "maxnreg")}
        given = {**dict(launch.constexprs), **v.get("constexprs", {})}
        # the recorder files a tile a heuristic sets under the variant's constexprs: the tuned ones are the config's
        config = Config({**{k: given.get(k, x) for k, x in launch.config.params.items()}, **params},
                        cfg.get("num_warps", launch.config.num_warps), cfg.get("num_stages", launch.config.num_stages))
        yield config, given, "variant"


def search_effect(launch: Launch, gpu) -> tuple[int, int, int] | None:
    """For `suggest`'s search on this launch (its space before the heuristics filter: the autotune list it
    was recorded with, else the neighbours of its config): (configs, configs launched with other
    constexprs than the recorded ones, configs whose knobs a heuristic overrides)."""
    from advisor.advice.config_space import around
    from advisor.advice.subjects import LaunchSubject

    subject = LaunchSubject(launch, gpu)
    if not subject.heuristics:
        return None
    configs = subject._space if subject._space is not None else around(subject.current, subject._covering_tiles())
    moved = overridden = 0
    for config in configs:
        if config == subject.current:
            continue
        try:
            values = heuristic_values(subject.heuristics, launch, config)
        except Exception:  # noqa: BLE001
            continue
        knobs = {*config.params, *LAUNCH_OPTIONS}
        moved += any(dict(launch.constexprs).get(k) != v for k, v in values.items() if k not in knobs)
        overridden += bool(overridden_knobs(values, config))
    return len(configs), moved, overridden


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print every mismatch and failure")
    args = parser.parse_args()
    from ceilings.hardware import resolve_gpu

    gpu = resolve_gpu("h100")
    counts: Counter = Counter()
    kernels: dict[str, set] = {}
    for library in (*LIBRARIES, *HELD_OUT):
        for case in load_cases(library):
            launch = Launch.from_dict(case.entry, f"{library} launch {case.index}")
            try:
                heur = kernel_heuristics(launch.source, launch.kernel)
            except Exception as exc:  # noqa: BLE001 - a file that cannot be opened is counted, not fatal
                counts[(library, "unreadable")] += 1
                if args.list:
                    print(f"{library} {case.index} {launch.kernel}: {type(exc).__name__}: {exc}")
                continue
            if not heur:
                continue
            kernels.setdefault(library, set()).add(launch.kernel)
            counts[(library, "launches")] += 1
            try:
                effect = search_effect(launch, gpu)
            except Exception as exc:  # noqa: BLE001 - a launch the advice cannot open is counted, not fatal
                effect = None
                counts[(library, "search unreadable")] += 1
                if args.list:
                    print(f"{library} {case.index} {launch.kernel} search: {type(exc).__name__}: {exc}")
            if effect:
                counts[(library, "searched launches")] += 1
                for key, n in zip(("space", "space moved", "space overridden"), effect):
                    counts[(library, key)] += n
                if args.list and (effect[1] or effect[2]):
                    print(f"{library} {case.index} {launch.kernel} search: {effect[0]} configs, {effect[1]} with "
                          f"other constexprs, {effect[2]} overridden")
            for config, given, what in _points(case, launch):
                try:
                    got = heuristic_values(heur, launch, config)
                except Exception as exc:  # noqa: BLE001 - a user's lambda: counted as not evaluable
                    counts[(library, "failed")] += 1
                    if args.list:
                        print(f"{library} {case.index} {launch.kernel} {what}: {type(exc).__name__}: {exc}")
                    continue
                launched = {**given, **config.params, "num_warps": config.num_warps,
                            "num_stages": config.num_stages}
                wrong = {k: (v, launched.get(k)) for k, v in got.items() if launched.get(k) != v}
                counts[(library, "points")] += 1
                knobs = {*config.params, *LAUNCH_OPTIONS}
                recorded = dict(launch.constexprs)
                counts[(library, "moved")] += any(recorded.get(k) != v for k, v in got.items() if k not in knobs)
                counts[(library, "overridden")] += bool(overridden_knobs(got, config))
                counts[(library, "values")] += len(got)
                if wrong:
                    counts[(library, "mismatch")] += 1
                    if args.list:
                        print(f"{library} {case.index} {launch.kernel} {what} {config.label()}: "
                              f"evaluated vs the library's run {wrong}")
    print("| library | kernels with heuristics | launches | (launch, config) points | values compared | "
          "equal to the library's run | configs whose heuristic constexprs differ from the recorded launch's | "
          "configs a heuristic overrides a knob of | not evaluable without data |")
    print("|---|---|---|---|---|---|---|---|---|")
    for lib in (*LIBRARIES, *HELD_OUT):
        pts = counts[(lib, "points")]
        print(f"| {lib} | {len(kernels.get(lib, ()))} | {counts[(lib, 'launches')]} | {pts + counts[(lib, 'failed')]} "
              f"| {counts[(lib, 'values')]} | {pts - counts[(lib, 'mismatch')]} of {pts} | {counts[(lib, 'moved')]} "
              f"| {counts[(lib, 'overridden')]} | {counts[(lib, 'failed')]} |")
    print("\n`suggest`'s search over these launches (the space before the heuristics filter):")
    print("| library | launches searched | configs | launched with other heuristic constexprs than recorded "
          "(stale before) | with a knob a heuristic overrides (not searched now) |")
    print("|---|---|---|---|---|")
    for lib in (*LIBRARIES, *HELD_OUT):
        print(f"| {lib} | {counts[(lib, 'searched launches')]} | {counts[(lib, 'space')]} | "
              f"{counts[(lib, 'space moved')]} | {counts[(lib, 'space overridden')]} |")


if __name__ == "__main__":
    main()
