"""Real library calls through `advisor suggest --call ... --measure K`, as a user runs them on a GPU.

For each line `FILE|CALL` of the calls file (paths under /tmp/site: the corpus wheels, benchmarks/corpus/
README.md), runs `python -m tui.entry suggest FILE --call CALL --measure K --format json` in its own process
(time limit per call), keeps the JSON and prints per launch: the current config's measured time, the config
the model ranked first without timings and its measured time (when it was among the timed), and the config
`--measure` names with its time. The product checks every timed config's outputs against the current's.

    PYTHONPATH=/tmp/site GEMS_VENDOR=nvidia python3 benchmarks/user_calls.py --calls benchmarks/data/user_calls.txt \
        --out $OUT [--measure 4] [--limit 150]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", required=True)
    parser.add_argument("--out", default=".")
    parser.add_argument("--measure", type=int, default=4)
    parser.add_argument("--limit", type=int, default=150, help="seconds per call")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for line in Path(args.calls).read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        path, call = line.split("|", 1)
        t0 = time.time()
        try:
            proc = subprocess.run([sys.executable, "-m", "tui.entry", "suggest", path, "--call", call, "--measure",
                                   str(args.measure), "--format", "json"], capture_output=True, text=True, cwd=ROOT,
                                  timeout=args.limit, env={**os.environ, "COLUMNS": "200"})
            rc, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired:
            rc, stdout, stderr = "timeout", "", ""
        row = {"file": path, "call": call, "rc": rc, "s": round(time.time() - t0, 1), "stderr": stderr[-600:]}
        try:
            row["advice"] = json.loads(stdout)
        except json.JSONDecodeError:
            row["advice"] = None
        rows.append(row)
        (out / "user_calls.json").write_text(json.dumps(rows, indent=1))
    import torch
    import triton

    env = {"gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None, "torch": torch.__version__,
           "triton": triton.__version__, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    (out / "user_calls_env.json").write_text(json.dumps(env))
    print(json.dumps(env))
    print("| call | kernel | current (measured us) | first without timings (measured us) | named by --measure "
          "(measured us) | gain measured |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        name = f"{Path(row['file']).stem}: {row['call'][:40]}"
        if not row["advice"]:
            print(f"| {name} | - | rc {row['rc']} | {row['stderr'][-120:]!r} | | |")
            continue
        for launch in row["advice"]["launches"]:
            cur = launch["current"]
            ranked = launch.get("ranked") or []
            by_pred = sorted((r for r in ranked if r.get("predicted_us")), key=lambda r: r["predicted_us"])
            first = by_pred[0] if by_pred else None
            best = launch.get("best") or cur
            timed = cur.get("measured_us") and best.get("measured_us")
            gain = cur["measured_us"] / best["measured_us"] if timed else None
            fmt = lambda r: f"{r['label']} ({r.get('measured_us') or '-'})" if r else "-"  # noqa: E731
            print(f"| {name} | {launch['kernel']} | {fmt(cur)} | {fmt(first)} | {fmt(best)} | "
                  f"{f'{gain:.2f}x' if gain else '-'} |")


if __name__ == "__main__":
    main()
