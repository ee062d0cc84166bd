"""Why set 13's pixel shuffle (benchmarks/user_kernels/pixel_shuffle_nhwc.py, 8 x 128^2 x 1,024 bf16, r = 2) runs
2.4-14x over its ceiling and 1.8x apart between configs moving the same bytes: the user's kernel unchanged, launched
directly at set 13's shape with configs of its space, each output checked bit-exact against torch's pixel_shuffle
(a copy: no rounding), timed with `advisor.measure.timing.time_launch` (CUDA graph, median of 20 replays after
warm-up). With `--ncu`, the same launches once each under Nsight Compute (run by the caller:
`ncu --clock-control none --metrics ... python3 benchmarks/pixel_shuffle_sectors.py --out X --ncu`): global load and
store requests and sectors at L1, the L1 data-pipe wavefronts, DRAM bytes, to tell sector traffic from DRAM traffic.

    python3 benchmarks/pixel_shuffle_sectors.py --out $OUT
    TRITON_INTERPRET=1 python benchmarks/pixel_shuffle_sectors.py --dry-run --out /tmp/x   # CPU: tiny, same code

Writes OUT/pixel_shuffle_sectors.json and prints a table last.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks" / "user_kernels")]

# (BLOCK_P, BLOCK_C, num_warps): the user's config, the three-timing run's pick, the sample's fastest, its slowest
CONFIGS = [(64, 128, 4), (16, 128, 2), (128, 64, 8), (32, 64, 4), (16, 64, 2), (128, 256, 2)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--dry-run", action="store_true", help="CPU interpreter, a tiny shape")
    ap.add_argument("--ncu", action="store_true", help="one launch per config, no timing (under Nsight Compute)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import torch
    import triton
    from pixel_shuffle_nhwc import pixel_shuffle_nhwc_kernel

    device = "cpu" if args.dry_run else "cuda"
    shape, r = ((2, 4, 6, 32), 2) if args.dry_run else ((8, 128, 128, 1024), 2)
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(shape, generator=gen, device=device).to(torch.bfloat16)
    n, h, w, cin = shape
    c = cin // (r * r)
    ref = torch.nn.functional.pixel_shuffle(x.permute(0, 3, 1, 2), r).permute(0, 2, 3, 1).contiguous()
    y = torch.empty((n, h * r, w * r, c), device=device, dtype=x.dtype)
    p = n * h * r * w * r
    rows = []
    for block_p, block_c, warps in CONFIGS:
        block_c = min(block_c, triton.next_power_of_2(c))
        grid = (triton.cdiv(p, block_p), triton.cdiv(c, block_c))

        def run(block_p=block_p, block_c=block_c, warps=warps, grid=grid):
            pixel_shuffle_nhwc_kernel[grid](x, y, p, c, h * r, w * r, *x.stride(), R=r, BLOCK_P=block_p,
                                            BLOCK_C=block_c, num_warps=warps)

        y.fill_(float("nan"))
        run()
        ok = bool(torch.equal(y, ref))
        us = None
        if not args.ncu and not args.dry_run:
            from advisor.measure.timing import time_launch

            us = time_launch(run).us
        nbytes = 2 * x.numel() * x.element_size()
        rows.append({"BLOCK_P": block_p, "BLOCK_C": block_c, "num_warps": warps, "grid": list(grid), "ok": ok,
                     "us": us, "tbs": nbytes / (us * 1e-6) / 1e12 if us else None})
    doc = {"shape": shape, "r": r, "rows": rows,
           "env": {"torch": torch.__version__, "triton": triton.__version__,
                   "gpu": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                   "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}}
    (out / ("pixel_shuffle_sectors_ncu.json" if args.ncu else "pixel_shuffle_sectors.json")).write_text(
        json.dumps(doc, indent=1))
    print(json.dumps(doc["env"]))
    print("| BLOCK_P | BLOCK_C | warps | grid | right | us | bytes moved once / time TB/s |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        us = f"{row['us']:.1f}" if row["us"] else "-"
        tbs = f"{row['tbs']:.2f}" if row["tbs"] else "-"
        print(f"| {row['BLOCK_P']} | {row['BLOCK_C']} | {row['num_warps']} | {row['grid']} | {row['ok']} | {us} "
              f"| {tbs} |")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
