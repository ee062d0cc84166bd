"""Wall time of `advisor record --no-gpu -- python driver.py` on each kernel-file style fixture (issue 13).

For every fixture of tests/fixtures/styles/ (Triton tutorials 01-06, Liger-style, FlagGems-style) a
driver script is written to a temporary folder: it imports the fixture by path and calls its host
function on "cuda" tensors, as a user's script would. Each driver is recorded in a fresh process
(`python -m advisor.cli record --no-gpu --out ... -- python driver.py`), so imports, the stand-in
driver and the capture are counted. Prints per fixture the wall time, the CPU time of the recorder and
its children, the launches recorded and the machine's load average before (a shared machine's figure
means little without it), then the versions.

    python benchmarks/record_speed.py                  # every fixture once
    python benchmarks/record_speed.py --repeat 2 --json
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
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STYLES = REPO / "tests" / "fixtures" / "styles"

# fixture -> the driver's body: `mod` is the fixture module, `rand(*shape, dtype)` makes a CUDA tensor.
DRIVERS = {
    "tut01_vector_add.py": "mod.add(rand(98432), rand(98432))",
    "tut02_fused_softmax.py": "mod.softmax(rand(4096, 781))",
    "tut03_matmul.py": "mod.matmul(rand(4096, 4096, dtype=torch.float16), rand(4096, 4096, dtype=torch.float16))",
    "tut04_dropout.py": "mod.seeded_dropout(rand(1 << 20), 0.5, 123)",
    "tut05_layer_norm.py": "mod.layer_norm_fwd(rand(4096, 8192, dtype=torch.float16), (8192,), "
                           "rand(8192, dtype=torch.float16), rand(8192, dtype=torch.float16))",
    "tut06_fused_attention.py": "q, k, v = (rand(2, 8, 1024, 64, dtype=torch.float16) for _ in range(3))\n"
                                "mod.attention(q, k, v, True, 0.125)",
    "liger_style.py": "mod.rms_norm_forward(rand(8, 4096, dtype=torch.bfloat16), rand(4096, dtype=torch.bfloat16), "
                      "1e-6)\nmod.swiglu_forward(rand(8, 14336, dtype=torch.bfloat16), "
                      "rand(8, 14336, dtype=torch.bfloat16))",
    "flaggems_style.py": "mod.sum_dim(rand(1024, 4096))",
}

PREAMBLE = """\
import importlib.util
import torch

def rand(*shape, dtype=torch.float32):
    return torch.randn(*shape, device="cuda", dtype=dtype)

spec = importlib.util.spec_from_file_location("fixture", {path!r})
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
"""


def record(fixture: str, body: str, tmp: Path) -> dict:
    driver = tmp / f"drive_{Path(fixture).stem}.py"
    driver.write_text(PREAMBLE.format(path=str(STYLES / fixture)) + textwrap.dedent(body) + "\n")
    out = tmp / f"{Path(fixture).stem}.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRITON_CACHE_DIR": str(tmp / "triton")}
    env.pop("TRITON_INTERPRET", None)
    load = os.getloadavg()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "advisor.cli", "record", "--no-gpu", "--out", str(out), "--",
                           sys.executable, str(driver)], cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if not out.exists():
        raise SystemExit(f"record of {fixture} wrote no trace (exit {done.returncode}):\n{done.stderr[-2000:]}")
    launches = json.loads(out.read_text())["launches"]
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {"fixture": fixture, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "launches": len(launches), "kernels": sorted({launch["kernel"] for launch in launches}),
            "load_before": [round(x, 2) for x in load], "exit": done.returncode,
            # a fixture's own top-level self-check needs data: the program stops there, the trace keeps
            # what it launched before (docs/trace.md); its last line says where
            "stopped": _stopped_at(done.stderr) if done.returncode else ""}


def _stopped_at(stderr: str) -> str:
    """The program's own last error line: the one before the recorder's 'the program exited' line."""
    lines = stderr.strip().splitlines()
    ends = [i for i, line in enumerate(lines) if "the program exited" in line]
    return lines[ends[-1] - 1] if ends and ends[-1] > 0 else lines[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--only", help="comma-separated fixture names")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(DRIVERS)
    with tempfile.TemporaryDirectory(prefix="record_speed_") as tmp:
        runs = [record(name, DRIVERS[name], Path(tmp)) for _ in range(args.repeat) for name in names]
    import torch
    import triton

    report = {"date": dt.datetime.now().isoformat(timespec="minutes"), "host": platform.node(),
              "cores": len(os.sched_getaffinity(0)), "triton": triton.__version__, "torch": torch.__version__,
              "python": platform.python_version(), "runs": runs}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{'fixture':28} {'wall s':>7} {'CPU s':>7} {'launches':>8} {'exit':>4}  load before")
    for run in runs:
        print(f"{run['fixture']:28} {run['wall_s']:7.1f} {run['cpu_s']:7.1f} {run['launches']:8d} {run['exit']:4d}  "
              f"{run['load_before']}")
    print(f"{report['date']} {report['host']}: {report['cores']} cores, Python {report['python']}, "
          f"Triton {report['triton']}, torch {report['torch']}")


if __name__ == "__main__":
    main()
