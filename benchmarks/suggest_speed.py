"""Cold `advisor suggest` of one new launch: the wall time a user waits the first time.

Runs `python -m advisor.cli suggest FILE --call CALL --format json` in a fresh process with empty
compile caches (TRITON_CACHE_DIR and TRITON_ADVISOR_HOME pointed at a new temporary folder), so every
import, the capture of the call and every compile of the candidates is counted. Prints the wall time,
the CPU time of the process and its children, the machine's load average before and after (the
machine may be shared: a figure means little without it), the machine and the versions.

    python benchmarks/suggest_speed.py                    # the tutorial matmul's 4-config autotune list
    python benchmarks/suggest_speed.py --workers 1        # the same, compiles in the process (no pool)
    python benchmarks/suggest_speed.py --repeat 3 --json  # three cold runs, machine-readable
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "styles" / "tut03_matmul.py"
CALL = "matmul(randn(4096, 4096, f16), randn(4096, 4096, f16))"


def cold_suggest(file: Path, call: str, workers: int | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="suggest_speed_") as tmp:
        env = {**os.environ, "TRITON_CACHE_DIR": str(Path(tmp) / "triton"),
               "TRITON_ADVISOR_HOME": str(Path(tmp) / "advisor"), "PYTHONPATH": str(REPO)}
        env.pop("TRITON_INTERPRET", None)
        if workers:
            env["TRITON_ADVISOR_WORKERS"] = str(workers)
        before_load = os.getloadavg()
        before_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "advisor.cli", "suggest", str(file), "--call", call,
                               "--format", "json"], cwd=REPO, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        after_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        after_load = os.getloadavg()
    if done.returncode not in (0, 1):
        raise SystemExit(f"suggest failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    launches = json.loads(done.stdout)["launches"]
    cpu = (after_cpu.ru_utime - before_cpu.ru_utime) + (after_cpu.ru_stime - before_cpu.ru_stime)
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "load_before": [round(x, 2) for x in before_load],
            "load_after": [round(x, 2) for x in after_load], "launches": len(launches),
            "configs": [a["considered"] for a in launches], "best": [a["best"]["label"] for a in launches]}


def versions() -> dict:
    import torch
    import triton

    return {"triton": triton.__version__, "torch": torch.__version__, "python": platform.python_version(),
            "cores": len(os.sched_getaffinity(0)), "cpu": platform.processor() or platform.machine(),
            "host": platform.node()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=FIXTURE)
    parser.add_argument("--call", default=CALL)
    parser.add_argument("--workers", type=int,
                        help="compile workers (TRITON_ADVISOR_WORKERS; default: one per core with 4+ compiles each)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs = [cold_suggest(args.file, args.call, args.workers) for _ in range(args.repeat)]
    report = {"date": dt.datetime.now().isoformat(timespec="minutes"), **versions(),
              "file": str(args.file.relative_to(REPO) if args.file.is_relative_to(REPO) else args.file),
              "call": args.call, "workers": args.workers or "cores", "runs": runs}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{report['date']} {report['host']}: {report['cores']} cores, Triton {report['triton']}, "
          f"torch {report['torch']}, workers {report['workers']}")
    for run in runs:
        print(f"cold suggest {report['file']} --call {args.call!r}: {run['wall_s']} s wall, {run['cpu_s']} s CPU, "
              f"{run['configs']} configs, best {run['best']}; load average {run['load_before']} before, "
              f"{run['load_after']} after")


if __name__ == "__main__":
    main()
