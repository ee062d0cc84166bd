"""What a DRAM byte written costs next to a byte read: streams of reads and writes in known proportions, each
far larger than the L2, timed as the product times a launch.

The DRAM floor charges every compulsory byte at the read probe's rate (`advisor calibrate`'s `dram_read_tbs`);
the copy probe (torch's `copy_`, `dram_copy_tbs`) runs 0.78x (H100) / 0.63x (H200) of it, and `advisor
diagnose`'s "DRAM writes" cause read that as the cost of a written byte until RESULTS 64. The corpus's own
read/write mixes ran at 0.93-0.99 of the read rate (benchmarks/RESULTS.md section 63,
`benchmarks/corpus/dram_write_cost.py`), so the copy probe is slow, not the writes; this probe is the controlled
measurement (run on an H100 in RESULTS 64: `benchmarks/data/h100_dram_rw_probe{,2}.json`; its (1, 1) mix is what
`advisor calibrate`'s `dram_rw_tbs` probe times). One Triton kernel per (inputs, outputs) mix: NIN fp32 input
streams summed, NOUT output streams each written with that sum plus its index (no input: a value from the
offsets), one tile of BLOCK elements per program; with no output, one partial sum per program (4 bytes per
BLOCK * 4 * NIN read). Several tile shapes and store
hints per mix; the fastest stands for the mix. Torch's own kernels (sum, fill, copy, add) next to them.

Per mix, with R bytes read and W written at time t, the cost of a written byte that the read rate B_r
(the fastest read-only mix) leaves: (t - R / B_r) / W. A floor t >= R / B_r + W / B_w holds for every mix
measured where B_w is at least the largest W / (t - R / B_r) of them.

    python3 benchmarks/dram_rw_probe.py --out $OUT/rw                   # GPU: writes dram_rw_probe.json
    TRITON_INTERPRET=1 python benchmarks/dram_rw_probe.py --dry-run --out /tmp/rw   # CPU: tiny, same code
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

MIXES = [(1, 0), (2, 0), (0, 1), (0, 2), (1, 1), (2, 1), (3, 1), (1, 2), (1, 3), (2, 2)]
SHAPES = [(1024, 4), (2048, 8), (4096, 8)]  # (BLOCK, num_warps)
HINTS = ["", ".cs"]  # store cache modifier: default, streaming (evict first)


@triton.jit
def stream_kernel(i0, i1, i2, o0, o1, o2, part_ptr, NIN: tl.constexpr, NOUT: tl.constexpr, BLOCK: tl.constexpr,
                  HINT: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    if NIN == 0:
        acc = offs.to(tl.float32) * 0.5
    else:
        acc = tl.load(i0 + offs)
        if NIN > 1:
            acc += tl.load(i1 + offs)
        if NIN > 2:
            acc += tl.load(i2 + offs)
    if NOUT == 0:
        tl.store(part_ptr + pid, tl.sum(acc, axis=0))
    else:
        tl.store(o0 + offs, acc, cache_modifier=HINT)
        if NOUT > 1:
            tl.store(o1 + offs, acc + 1.0, cache_modifier=HINT)
        if NOUT > 2:
            tl.store(o2 + offs, acc + 2.0, cache_modifier=HINT)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    from advisor.measure.timing import time_launch

    device = "cpu" if args.dry_run else "cuda"
    n = (1 << 14) if args.dry_run else (1 << 27)  # fp32 elements a stream: 512 MiB, 10x the L2
    gen = torch.Generator(device=device).manual_seed(0)
    ins = [torch.randn(n, generator=gen, device=device) for _ in range(3)]
    outs = [torch.empty(n, device=device) for _ in range(3)]
    part = torch.empty(n // 1024, device=device)
    rows = []

    def timed(fn):
        return None if args.dry_run else time_launch(fn, launches_per_graph=5, replays=20).us

    for nin, nout in MIXES:
        ref = sum(ins[:nin]) if nin else torch.arange(n, device=device, dtype=torch.float32) * 0.5
        for block, warps in SHAPES:
            for hint in HINTS if nout else [""]:
                if args.dry_run and (block, warps, hint) != SHAPES[0] + ("",):
                    continue
                grid = (n // block,)

                def run(nin=nin, nout=nout, block=block, warps=warps, hint=hint, grid=grid):
                    stream_kernel[grid](*ins, *outs, part, NIN=nin, NOUT=nout, BLOCK=block, HINT=hint,
                                        num_warps=warps)

                for o in outs:
                    o.fill_(float("nan"))
                run()
                if nout:
                    right = all(bool(torch.allclose(outs[j], ref + j, rtol=1e-5, atol=1e-5)) for j in range(nout))
                else:
                    want = ref.view(-1, block).sum(dim=1)
                    right = bool(torch.allclose(part[: n // block], want, rtol=1e-4, atol=1e-3))
                us = timed(run)
                rows.append({"mix": [nin, nout], "kernel": "triton", "block": block, "warps": warps, "hint": hint,
                             "read_bytes": 4 * n * nin + (0 if nout else 4 * (n // block)),
                             "write_bytes": 4 * n * nout + (0 if nout else 4 * (n // block)), "right": right,
                             "us": us})
                print(json.dumps(rows[-1]), flush=True)
    torch_ops = {"sum (1, 0)": ((1, 0), lambda: torch.sum(ins[0], dim=0, keepdim=True, out=part[:1])),
                 "fill_ (0, 1)": ((0, 1), lambda: outs[0].fill_(1.0)),
                 "copy_ (1, 1)": ((1, 1), lambda: outs[0].copy_(ins[0])),
                 "add out= (2, 1)": ((2, 1), lambda: torch.add(ins[0], ins[1], out=outs[0]))}
    for name, ((nin, nout), fn) in torch_ops.items():
        rows.append({"mix": [nin, nout], "kernel": f"torch {name}", "read_bytes": 4 * n * nin,
                     "write_bytes": 4 * n * nout, "right": True, "us": timed(fn)})
        print(json.dumps(rows[-1]), flush=True)

    env = {"gpu": torch.cuda.get_device_name() if device == "cuda" else "cpu", "torch": torch.__version__,
           "triton": triton.__version__, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    (out / "dram_rw_probe.json").write_text(json.dumps({"env": env, "rows": rows}, indent=1))
    if args.dry_run:
        print("right:", all(r["right"] for r in rows))
        return 0 if all(r["right"] for r in rows) else 1
    summarize(rows)
    return 0


def summarize(rows: list[dict]) -> None:
    """The fastest right variant per mix, and the written byte's cost the read rate leaves."""
    best: dict[tuple, dict] = {}
    for r in rows:
        if r["right"] and r["us"]:
            key = tuple(r["mix"])
            if key not in best or r["us"] < best[key]["us"]:
                best[key] = r
    read_rate = max((r["read_bytes"] / r["us"] / 1e6 for k, r in best.items() if k[1] == 0), default=None)
    write_rate = max((r["write_bytes"] / r["us"] / 1e6 for k, r in best.items() if k[0] == 0), default=None)
    print(f"read rate (fastest read-only mix): {read_rate:.3f} TB/s; write rate (fastest write-only): {write_rate:.3f}")
    print("| mix (in, out) | fastest | us | (R + W) / t TB/s | written byte's rate W / (t - R / B_r) TB/s "
          "| t / (R / B_r + W / B_w) |")
    print("|---|---|---|---|---|---|")
    for key in sorted(best):
        r = best[key]
        total = (r["read_bytes"] + r["write_bytes"]) / r["us"] / 1e6
        left = r["us"] - r["read_bytes"] / read_rate / 1e6
        w_rate = r["write_bytes"] / left / 1e6 if key[1] and left > 0 else float("nan")
        linear = r["read_bytes"] / read_rate / 1e6 + r["write_bytes"] / write_rate / 1e6
        what = r["kernel"] if r["kernel"] != "triton" else f"B{r['block']} w{r['warps']} {r['hint'] or '-'}"
        print(f"| {key} | {what} | {r['us']:.1f} | {total:.3f} | {w_rate:.3f} | {r['us'] / linear:.3f} |")


if __name__ == "__main__":
    sys.exit(main())
