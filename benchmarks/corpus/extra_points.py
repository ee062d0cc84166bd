"""More configs of launches already evaluated (issue 15): per-kernel calibration and the advice check need
launches with several evaluated configs, and the first pass of check_points stopped at about 5 per launch.

Evaluates (with check_points.evaluate, one worker) the timed configs not yet in data/ceilings.jsonl of
launches that have some there and >= 5 timed configs, launches with the fewest missing first, at most
`--points`; results go to data/ceilings_extra.jsonl (resumable), which check_model.py reads too.

    python benchmarks/corpus/extra_points.py --points 100 --budget-s 2400
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_points import DATA, done_keys, evaluate_all, timed_points  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=100)
    parser.add_argument("--budget-s", type=float, default=2400.0, help="start no point after this many seconds")
    args = parser.parse_args(argv)
    done = done_keys()
    by_launch = defaultdict(list)
    for p in timed_points():
        by_launch[(p.library, p.launch_id)].append(p)
    todo = []
    for group in by_launch.values():
        evaluated = [p for p in group if p.key in done]
        if evaluated and len(group) >= 5 and len(evaluated) < len(group):
            todo.append([p for p in group if p.key not in done])
    todo.sort(key=len)
    points = [p for group in todo for p in group][:args.points]
    print(f"{len(points)} points of {len(todo)} launches", flush=True)
    evaluate_all(points, workers=1, limit_s=240, budget_s=args.budget_s, path=DATA / "ceilings_extra.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
