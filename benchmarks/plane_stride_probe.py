"""Why set 12's bilinear resize (benchmarks/user_kernels/bilinear_resize.py, 8 x 64 planes of 256^2 -> 512^2 bf16)
ran 3.8x over its ceiling and 3.6x over its prediction on an H200: its grid puts the image plane on axis 0, so the
CTAs the GPU runs together touch one tile of 512 different planes, whose starts lie a power of two apart (input
128 KiB, output 512 KiB). This probe times the same traffic with the plane stride a power of two and padded off it,
and with the plane on the slow grid axis, to tell a stride (DRAM channel) effect from the kernel's own cost.

    python benchmarks/plane_stride_probe.py --out $OUT
    TRITON_INTERPRET=1 python benchmarks/plane_stride_probe.py --dry-run --out /tmp/x   # CPU: tiny, same code

Part 1, a plane copy (this project's own kernel): src [planes, S_in] -> dst [planes, S_out], each program copying
a 16 x 64 tile of one 512 x 512 bf16 plane; the plane on grid axis 0 (`plane fastest`) or axis 1 (`plane slowest`);
plane strides exactly 512 KiB or padded by PAD elements. Part 2, the user's kernel unchanged, launched directly at
set 12's shape with its host's layout and with the output's and both tensors' plane strides padded (its grid
fixes the plane on axis 0, so part 1 alone moves it to the slow axis). Every output is checked (part 1
bit-exact; part 2 against torch's bilinear interpolate in float32, relative error < 1e-2). Timing:
`advisor.measure.timing.time_launch` (CUDA graph of 2 launches, median of 20 replays after warm-up).
Writes OUT/plane_stride_probe.json and prints a table last.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PAD = 256  # elements added to a padded plane stride: 512 B, off every power of two above it


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--dry-run", action="store_true", help="CPU interpreter, tiny planes")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch
    import triton
    import triton.language as tl

    sys.path.insert(0, str(ROOT / "benchmarks" / "user_kernels"))
    from bilinear_resize import bilinear_resize_kernel

    from advisor.measure.timing import time_launch, versions

    @triton.jit
    def copy_planes(src, dst, width, stride_src, stride_dst, tiles_w,
                    PLANE_FASTEST: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr):
        if PLANE_FASTEST:
            plane, tile = tl.program_id(0), tl.program_id(1)
        else:
            tile, plane = tl.program_id(0), tl.program_id(1)
        th, tw = tile // tiles_w, tile % tiles_w
        rows = th * BH + tl.arange(0, BH)
        cols = tw * BW + tl.arange(0, BW)
        offs = rows[:, None] * width + cols[None, :]
        v = tl.load(src + plane.to(tl.int64) * stride_src + offs)
        tl.store(dst + plane.to(tl.int64) * stride_dst + offs, v)

    dev = "cpu" if args.dry_run else "cuda"
    planes, side = (4, 64) if args.dry_run else (512, 512)
    bh, bw = 16, 64
    gen = torch.Generator().manual_seed(0)
    rows = []

    def record(part, variant, us, nbytes, ok, **extra):
        rows.append({"part": part, "variant": variant, "us": round(us, 3), "bytes": nbytes,
                     "tbs": round(nbytes / us / 1e6, 3), "output_ok": ok, **extra})
        print(json.dumps(rows[-1]), flush=True)

    def timed(fn):
        if args.dry_run:
            fn()
            return 1.0
        return time_launch(fn, launches_per_graph=2).us

    # Part 1: the copy, strides exact or padded, plane on the fast or the slow grid axis.
    plane_elems = side * side
    tiles_w, tiles = side // bw, (side // bh) * (side // bw)
    for pad in (0, PAD):
        stride = plane_elems + pad
        src = torch.randn(planes * stride, generator=gen).to(torch.bfloat16).to(dev)
        dst = torch.empty(planes * stride, dtype=torch.bfloat16, device=dev)
        want = src.view(planes, stride)[:, :plane_elems]
        for plane_fastest in (True, False):
            grid = (planes, tiles) if plane_fastest else (tiles, planes)

            def run(src=src, dst=dst, stride=stride, grid=grid, pf=plane_fastest):
                copy_planes[grid](src, dst, side, stride, stride, tiles_w, PLANE_FASTEST=pf, BH=bh, BW=bw,
                                  num_warps=4)
            dst.fill_(float("nan"))
            run()
            ok = bool(torch.equal(dst.view(planes, stride)[:, :plane_elems], want))
            us = timed(run)
            record("copy", f"plane {'fastest' if plane_fastest else 'slowest'}, stride "
                           f"{'2^k' if pad == 0 else f'2^k + {pad}'}", us, 2 * planes * plane_elems * 2, ok,
                   plane_stride_bytes=stride * 2)
        del src, dst

    # Part 2: the user's kernel at set 12's shape (8 x 64 planes, 256^2 -> 512^2), layouts exact or padded.
    n_c, h, w, oh, ow = (4, 16, 16, 32, 32) if args.dry_run else (512, 256, 256, 512, 512)
    x = torch.randn(n_c, h, w, generator=gen).to(torch.bfloat16).to(dev)
    ref = torch.nn.functional.interpolate(x.float()[None], size=(oh, ow), mode="bilinear",
                                          align_corners=False)[0]
    for label, pad_x, pad_y in (("host layout (strides 2^k)", 0, 0), ("output plane stride padded", 0, PAD),
                                ("both plane strides padded", PAD, PAD)):
        xs, ys = h * w + pad_x, oh * ow + pad_y
        xbuf = torch.empty(n_c * xs, dtype=torch.bfloat16, device=dev)
        xbuf.view(n_c, xs)[:, :h * w] = x.reshape(n_c, h * w)
        ybuf = torch.empty(n_c * ys, dtype=torch.bfloat16, device=dev)
        for block_w in (64, 128):
            grid = (n_c, triton.cdiv(oh, 16), triton.cdiv(ow, block_w))

            def run(xbuf=xbuf, ybuf=ybuf, xs=xs, ys=ys, grid=grid, block_w=block_w):
                bilinear_resize_kernel[grid](xbuf, ybuf, h, w, oh, ow, h / oh, w / ow, xs, w, 1, ys, ow, 1,
                                             BLOCK_H=16, BLOCK_W=block_w, num_warps=4)
            ybuf.fill_(float("nan"))
            run()
            y = ybuf.view(n_c, ys)[:, :oh * ow].view(n_c, oh, ow).float()
            err = float(((y - ref).norm() / ref.norm()).item())
            us = timed(run)
            record("bilinear", f"{label}, BLOCK_W={block_w}", us, (n_c * h * w + n_c * oh * ow) * 2,
                   err < 1e-2, relative_error=round(err, 6))

    doc = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": " ".join(sys.argv),
           "gpu": "cpu" if args.dry_run else torch.cuda.get_device_name(), **versions(), "rows": rows}
    (out / "plane_stride_probe.json").write_text(json.dumps(doc, indent=1))
    print(f"\n{doc['gpu']} ({doc.get('triton')}, torch {doc.get('torch')})")
    print("| part | variant | us | TB/s (bytes moved once) | output |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['part']} | {r['variant']} | {r['us']} | {r['tbs']} | {'ok' if r['output_ok'] else 'WRONG'} |")
    return 0 if all(r["output_ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
