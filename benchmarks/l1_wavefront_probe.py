"""How many L1 data-pipe wavefronts a warp's global load or store costs, by the lines and sectors its 32 lanes
touch (issue 14's L1 term; RESULTS 61 measured the pixel shuffle binding there). Each variant is one Triton
kernel whose warps issue the same access pattern many times over a small window (L1 hits after the first pass,
so no DRAM or L2 limit binds): lane l of a warp addresses element (l // GROUP) * STRIDE + (l % GROUP) * VEC + v,
v < VEC contiguous in the thread (one vector instruction). The pattern's sectors and 128-byte lines per request
follow from that; the run gives time per request, and with `--ncu` (run by the caller under Nsight Compute) the
wavefronts and sectors per request the L1 counted.

Loads sum into an accumulator checked against torch (the same sum on the same random data); stores write a value
checked afterwards. Eight independent requests per loop iteration keep each warp's requests in flight, 64 warps
an SM.

    python3 benchmarks/l1_wavefront_probe.py --out $OUT/l1            # timed, writes l1_wavefront_probe.json
    python3 benchmarks/l1_wavefront_probe.py --out $OUT/l1 --ncu      # one launch each (under ncu)
    TRITON_INTERPRET=1 python benchmarks/l1_wavefront_probe.py --dry-run --out /tmp/l1   # CPU: tiny, same code
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

UNROLL = 8  # independent requests per warp per iteration


@triton.jit
def probe_kernel(x_ptr, out_ptr, iters, zero, STORE: tl.constexpr, ROWS: tl.constexpr, GROUP: tl.constexpr,
                 STRIDE: tl.constexpr, VEC: tl.constexpr, SHIFT: tl.constexpr):
    pid = tl.program_id(0)
    r = tl.arange(0, ROWS)[:, None]
    v = tl.arange(0, VEC)[None, :]
    lane_off = (r % 32 // GROUP) * STRIDE + (r % 32 % GROUP) * VEC + v + (r // 32) * SHIFT
    acc = tl.zeros((ROWS, VEC), dtype=tl.float32)
    for it in range(iters):
        for u in tl.static_range(8):
            # `it & zero` (zero = 0 at run time): the same addresses, but not loop-invariant, so not hoisted
            ptrs = x_ptr + lane_off + u * 4 * SHIFT + (it & zero)
            if STORE:
                tl.store(ptrs, acc + it)
            else:
                acc += tl.load(ptrs)
    if not STORE:
        tl.store(out_ptr + pid * ROWS * VEC + tl.arange(0, ROWS)[:, None] * VEC + v, acc)


# (name, elem dtype, GROUP, STRIDE elements, VEC, store)
PATTERNS = [
    ("coalesced 4B", "float32", 32, 0, 1, False),
    ("coalesced 8B vec", "float32", 32, 0, 2, False),
    ("coalesced 16B vec", "float32", 32, 0, 4, False),
    ("stride 8B", "float32", 1, 2, 1, False),
    ("stride 16B", "float32", 1, 4, 1, False),
    ("stride 32B", "float32", 1, 8, 1, False),
    ("stride 64B", "float32", 1, 16, 1, False),
    ("stride 128B", "float32", 1, 32, 1, False),
    ("stride 1152B", "float32", 1, 288, 1, False),
    ("pairs, 2048B apart (bf16 2x2B)", "bfloat16", 2, 1024, 1, False),
    ("4 lanes x 4B, 1152B apart", "float32", 4, 288, 1, False),
    ("8 lanes x 4B, 1152B apart", "float32", 8, 288, 1, False),
    ("16 lanes x 4B, 1152B apart", "float32", 16, 288, 1, False),
    ("16B vec, 1152B apart", "float32", 1, 288, 4, False),
    ("2 lanes x 16B, 1152B apart", "float32", 2, 288, 4, False),
    ("bf16 coalesced 2B", "bfloat16", 32, 0, 1, False),
    ("bf16 stride 8B", "bfloat16", 1, 4, 1, False),
    # stores: every CTA writes the same lines, so the L2 serialises them; their wavefronts come from ncu
    ("store coalesced 4B", "float32", 32, 0, 1, True),
    ("store stride 32B", "float32", 1, 8, 1, True),
    ("store stride 1152B", "float32", 1, 288, 1, True),
    ("store 16B vec coalesced", "float32", 32, 0, 4, True),
]


def pattern_geometry(group: int, stride: int, vec: int, elem: int) -> tuple[int, int]:
    """Sectors and 128-byte lines one warp request touches (base aligned to 128 bytes)."""
    addrs = [((lane // group) * stride + (lane % group) * vec + v) * elem for lane in range(32) for v in range(vec)]
    return len({a // 32 for a in addrs}), len({a // 128 for a in addrs})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--ncu", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    from advisor.measure.timing import time_launch

    device = "cpu" if args.dry_run else "cuda"
    warps = 4
    rows_per_cta = 32 * warps
    ctas = 8 if args.dry_run else 132 * 16
    iters = 2 if args.dry_run else (1 if args.ncu else 200)
    results = []
    for name, dtype_name, group, stride, vec, store in PATTERNS:
        dtype = getattr(torch, dtype_name)
        elem = torch.tensor([], dtype=dtype).element_size()
        stride_el = stride if group < 32 else 0
        span = (32 // group) * max(stride_el, group * vec) if group < 32 else 32 * vec
        # warps and unrolled requests move by whole 128-byte lines (the same sectors and lines a request), and
        # every CTA reads the same few lines: the L1 serves them all, no L2 or DRAM limit binds
        shift = 128 // elem
        gen = torch.Generator(device=device).manual_seed(0)
        x = torch.randn(span + shift * (32 + warps), generator=gen, device=device).to(dtype)
        outb = torch.empty(ctas * rows_per_cta * vec, device=device, dtype=torch.float32)
        sectors, lines = pattern_geometry(group, max(stride_el, 1), vec, elem)

        def run(x=x, outb=outb, store=store, group=group, stride_el=stride_el, vec=vec, shift=shift):
            probe_kernel[(ctas,)](x, outb, iters, 0, STORE=store, ROWS=rows_per_cta, GROUP=group,
                                  STRIDE=stride_el, VEC=vec, SHIFT=shift, num_warps=warps)

        run()
        lane = torch.arange(rows_per_cta, device=device)[:, None]
        v = torch.arange(vec, device=device)[None, :]
        off = (lane % 32 // group) * stride_el + (lane % 32 % group) * vec + v + (lane // 32) * shift
        if store:  # the last iteration's value (acc is zero: it + 0) at every address written
            written = torch.stack([x[off + u * 4 * shift].float() for u in range(8)])
            ok = bool(torch.all(written == iters - 1))
        else:  # the same sums on the host: each iteration adds the 8 unrolled tiles, every CTA the same
            xf = x.float()
            ref = sum(xf[off + u * 4 * shift] for u in range(8)) * iters
            got = outb.view(ctas, rows_per_cta, vec)
            ok = bool(torch.allclose(got, ref.expand_as(got), rtol=1e-3, atol=1e-2 * iters))
        requests = ctas * warps * iters * 8
        us = None
        if not args.ncu and not args.dry_run:
            us = time_launch(run).us
        row = {"pattern": name, "dtype": dtype_name, "group": group, "stride_el": stride_el, "vec": vec,
               "store": store, "sectors_per_request": sectors, "lines_per_request": lines, "requests": requests,
               "right": ok, "us": us,
               "cycles_per_request_per_sm": None if us is None else us * 1e-6 * 1.98e9 * 132 / requests}
        results.append(row)
        print(json.dumps(row), flush=True)
    (out / "l1_wavefront_probe.json").write_text(json.dumps({"stamp": time.strftime("%H:%M:%S", time.gmtime()),
                                                             "rows": results}, indent=1))
    print("| pattern | sectors | lines | right | us | cycles / request / SM at 1.98 GHz |")
    print("|---|---|---|---|---|---|")
    for r in results:
        c = r["cycles_per_request_per_sm"]
        print(f"| {r['pattern']} | {r['sectors_per_request']} | {r['lines_per_request']} | {r['right']} | "
              f"{r['us'] if r['us'] is None else round(r['us'], 1)} | {c if c is None else round(c, 2)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
