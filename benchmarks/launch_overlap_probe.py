"""Does a launch's own work add to the launch floor, or overlap it? (issue 14: set 11's one config under the floor)

The ceiling is the binding work plus the calibrated launch time (`ceilings.roofline`: an empty kernel's time per
launch in a CUDA graph of back-to-back launches). Set 11's batch-norm finalize (8 CTAs, about 1 us) ran at 0.92 x
that sum: its dependency path (0.15 us) seemed to overlap the launch. Here a kernel whose one warp per CTA runs a
dependent FFMA chain of `n` steps (`n` a runtime argument: one compile) is timed as the product times a launch
(`advisor.measure.timing.time_launch`) for n from 0 up and grids of 1, 8 and 132 CTAs; on this machine afterwards,
the product's ceiling of each launch (`report`), so measured / (launch + chain) is read against n.

    python3 benchmarks/launch_overlap_probe.py time OUT_DIR      # GPU: OUT_DIR/launch_overlap_GPU.json
    python benchmarks/launch_overlap_probe.py report ROWS.json --gpu h200    # CPU: the product's ceilings
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STEPS = (0, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
GRIDS = (1, 8, 132)


@triton.jit
def ffma_chain_kernel(x_ptr, n, a, b, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    for _ in range(n):  # each step waits on the last: the chain's length is n x the FFMA latency
        x = x * a + b
    tl.store(x_ptr + offs, x)


def ffma_chain(x, n: int, grid: int):
    """One warp per CTA, `grid` CTAs, each lane a chain of `n` dependent FFMAs on its element of x."""
    ffma_chain_kernel[(grid,)](x, n, 0.999, 0.001, BLOCK=32, num_warps=1)
    return x


def time_all(out: Path) -> None:
    from advisor.measure.timing import time_launch, versions

    rows = []
    x = torch.randn(32 * max(GRIDS), device="cuda")
    for grid in GRIDS:
        for n in STEPS:
            ref = x.clone()
            for _ in range(n):
                ref = ref * 0.999 + 0.001
            got = ffma_chain(x.clone(), n, grid)
            ok = torch.allclose(got[:32 * grid], ref[:32 * grid], rtol=1e-4, atol=1e-5)
            y = x.clone()
            timing = time_launch(lambda y=y, n=n, grid=grid: ffma_chain(y, n, grid))
            us = timing.us
            rows.append({"grid": grid, "n": n, "us": us, "min_us": timing.min_us, "max_us": timing.max_us,
                         "correct": bool(ok)})
            print(f"grid {grid:4d}  n {n:5d}  {us:8.3f} us  {'ok' if ok else 'WRONG'}", flush=True)
    env = {"gpu": torch.cuda.get_device_name(), **versions(), "date": time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                                                                      time.gmtime())}
    name = env["gpu"].replace(" ", "_")
    (out / f"launch_overlap_{name}.json").write_text(json.dumps({"env": env, "rows": rows}, indent=1))
    print(json.dumps(env))


def report(path: Path, gpu: str) -> None:
    from advisor.advice.suggest import subjects_for
    from ceilings.hardware import resolve_gpu

    doc = json.loads(path.read_text())
    spec = resolve_gpu(gpu)
    print(f"{doc['env']}\n| grid | n | measured us | launch us | chain us | ceiling us | measured / ceiling | "
          "measured - launch - chain us |\n|---|---|---|---|---|---|---|---|")
    for r in doc["rows"]:
        call = f"ffma_chain(randn({32 * r['grid']}, f32), {r['n']}, {r['grid']})"
        subject = next(iter(subjects_for(__file__, call=call, gpu=spec)))
        ceiling = subject.predict([subject.current])[0].ceiling
        chain = ceiling.pipelines.get("chain") or 0.0
        launch = spec.rates.launch_us
        print(f"| {r['grid']} | {r['n']} | {r['us']:.3f} | {launch:.3f} | {chain:.3f} | {ceiling.ceiling_us:.3f} | "
              f"{r['us'] / ceiling.ceiling_us:.3f} | {r['us'] - launch - chain:+.3f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("time")
    t.add_argument("out", type=Path)
    r = sub.add_parser("report")
    r.add_argument("rows", type=Path)
    r.add_argument("--gpu", default="h200")
    args = parser.parse_args(argv)
    if args.cmd == "time":
        args.out.mkdir(parents=True, exist_ok=True)
        time_all(args.out)
    else:
        report(args.rows, args.gpu)
    return 0


if __name__ == "__main__":
    sys.exit(main())
