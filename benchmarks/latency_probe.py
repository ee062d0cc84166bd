"""Constants of the latency floors (ceilings/latency_floor.py), measured on a GPU (benchmarks/RESULTS.md 25).

1. `latency_probe.cu`: the least cycles between a variable-latency instruction and the next one that waits
   on its result (global loads hitting L1 / L2 / DRAM, predicated off, shared loads, shuffles, MUFU, CTA
   barriers), clock64 around dependent chains in one warp; its SASS is written beside the numbers.
2. An empty Triton kernel launched with grids of 1 to ~1M CTAs and 1 to 32 warps per CTA, timed as the
   corpus times a launch (`advisor.measure.timing.time_launch`: CUDA graph of 20 launches, median of 20
   replays), so the floor on how fast the GPU can start and retire a grid is in the product's own units.

    python benchmarks/latency_probe.py OUT_DIR      # on the GPU machine; writes OUT_DIR/latency_probe_GPU.json
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

GRIDS = sorted({1, 2, 8, 33, 66} | {round(132 * 2 ** (k / 2)) for k in range(0, 28)})  # up to ~1.08 M CTAs
WARPS = (1, 2, 4, 8, 16, 32)


def latencies(out: Path) -> dict:
    exe = out / "latency_probe"
    subprocess.run(["nvcc", "-O3", "-arch=sm_90a", "-o", str(exe), str(HERE / "latency_probe.cu")], check=True)
    sass = subprocess.run(["cuobjdump", "-sass", str(exe)], capture_output=True, text=True, check=True).stdout
    (out / "latency_probe.sass").write_text(sass)
    run = subprocess.run([str(exe)], capture_output=True, text=True, check=True, timeout=120)
    exe.unlink()
    return json.loads(run.stdout)


def empty_kernel_times() -> dict[str, list[list[float]]]:
    import torch
    import triton

    from advisor.measure.timing import time_launch

    @triton.jit
    def empty(x_ptr):
        pass

    x = torch.empty(1, device="cuda")
    table: dict[str, list[list[float]]] = {}
    for warps in WARPS:
        rows = []
        for grid in GRIDS:
            t = time_launch(lambda g=grid, w=warps: empty[(g,)](x, num_warps=w), launches_per_graph=20,
                            replays=20, warmup=3)
            rows.append([grid, round(t.us, 4)])
        table[str(warps)] = rows
    return table


def main(argv: list[str]) -> int:
    import torch
    import triton

    out = Path(argv[0]) if argv else Path(".")
    out.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.get_device_name()
    began = time.time()
    doc = {"gpu": gpu, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "torch": torch.__version__,
           "triton": triton.__version__, "cycles": latencies(out)}
    doc["empty_kernel_us"] = empty_kernel_times()
    doc["wall_s"] = round(time.time() - began, 1)
    (out / f"latency_probe_{gpu.replace(' ', '_')}.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc["cycles"]))
    print("grid  " + " ".join(f"w{w:<8}" for w in WARPS))
    for k, grid in enumerate(GRIDS):
        print(f"{grid:<7}" + " ".join(f"{doc['empty_kernel_us'][str(w)][k][1]:<9.3f}" for w in WARPS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
