"""How fast DRAM takes rows written in pieces at scattered rows, as a GEMM that stores one output row per (token,
expert) pair writes them (the fp8 GEMM2 storing its rows, RESULTS 48: a 134 MB output in 256 B pieces, rows in
expert order, not in the output's order), against the same bytes written whole (issue 16).

    python benchmarks/dram_row_write_probe.py --out $OUT
    TRITON_INTERPRET=1 python benchmarks/dram_row_write_probe.py --dry-run --out /tmp/x   # CPU: tiny, same code

A bf16 matrix C [R, 2048] (512 MiB on a GPU; rows of 4 KB, as Qwen3-MoE's hidden size) is written by programs of 64
rows x PIECE columns, each row's values a random per-row number times the column index (nothing read but that
number). Row order: the output's own (`rows in order`) or a random permutation (`rows scattered`, a routing's sorted
order); program order: a row block's pieces one after another (`pieces first`) or a column of pieces down all row
blocks first (`rows first`, as GROUP_SIZE_M groups walk M). Pieces of 128, 256 and 512 B. Every output is checked
against the expected matrix (every element written, within bf16's rounding). Timing: CUDA graph of 2 launches after
1 warm-up, median of 20 replays (the sweeps' timer), written bytes over time. Writes OUT/dram_row_write_probe.json
and prints a table last.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import moe_fusion  # noqa: E402

ROWS_BLOCK = 64


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--dry-run", action="store_true", help="CPU interpreter, a tiny matrix")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch
    import triton
    import triton.language as tl

    from advisor.measure.timing import versions

    @triton.jit
    def write_rows(c_ptr, row_ptr, scale_ptr, n_row_blocks, n_pieces, stride_c,
                   PIECE: tl.constexpr, ROWS: tl.constexpr, ROWS_FIRST: tl.constexpr):
        pid = tl.program_id(0)
        if ROWS_FIRST:
            block, piece = pid % n_row_blocks, pid // n_row_blocks
        else:
            block, piece = pid // n_pieces, pid % n_pieces
        rows = tl.load(row_ptr + block * ROWS + tl.arange(0, ROWS)).to(tl.int64)
        cols = piece * PIECE + tl.arange(0, PIECE)
        values = tl.load(scale_ptr + rows)[:, None] * cols[None, :].to(tl.float32)
        tl.store(c_ptr + rows[:, None] * stride_c + cols[None, :], values.to(tl.bfloat16))

    device = "cpu" if args.dry_run else "cuda"
    rows_total, width = (256, 512) if args.dry_run else (131072, 2048)
    gen = torch.Generator().manual_seed(0)
    scale = torch.rand(rows_total, generator=gen).add_(0.5).to(device)
    orders = {"rows in order": torch.arange(rows_total, dtype=torch.int32),
              "rows scattered": torch.randperm(rows_total, generator=gen).to(torch.int32)}
    c = torch.empty(rows_total, width, dtype=torch.bfloat16, device=device)
    expected = scale[:, None] * torch.arange(width, device=device, dtype=torch.float32)[None, :]
    time_it = moe_fusion._timer(args.dry_run, launches_per_graph=2, warmup=1)
    rows = []
    for order, perm in orders.items():
        perm = perm.to(device)
        for rows_first in (False, True):
            for piece in (64, 128, 256):  # bf16 elements: 128, 256, 512 B
                n_blocks, n_pieces = rows_total // ROWS_BLOCK, width // piece

                def run(perm=perm, piece=piece, rows_first=rows_first, n_blocks=n_blocks, n_pieces=n_pieces):
                    write_rows[(n_blocks * n_pieces,)](c, perm, scale, n_blocks, n_pieces, c.stride(0), PIECE=piece,
                                                       ROWS=ROWS_BLOCK, ROWS_FIRST=rows_first, num_warps=4)
                c.fill_(float("nan"))
                run()
                # every element written (no NaN left) and within bf16's rounding of the expected value
                ok = bool(torch.allclose(c.float(), expected, rtol=1e-2, atol=0.0))
                us = time_it(run)
                rows.append({"rows": order, "programs": "rows first" if rows_first else "pieces first",
                             "piece_bytes": piece * 2, "bytes": c.numel() * 2, "us": round(us, 3),
                             "tbs": round(c.numel() * 2 / us / 1e6, 3), "output_ok": ok})
                print("write:", json.dumps(rows[-1]), flush=True)
    doc = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": " ".join(sys.argv),
           "gpu": "cpu" if args.dry_run else torch.cuda.get_device_name(), **versions(), "rows": rows}
    (out / "dram_row_write_probe.json").write_text(json.dumps(doc, indent=1))
    print(f"\n{doc['gpu']}: {rows_total} x {width} bf16 ({c.numel() * 2 / 2**20:.0f} MiB), {ROWS_BLOCK}-row programs")
    print("| rows | programs | piece B | us | TB/s | output |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['rows']} | {r['programs']} | {r['piece_bytes']} | {r['us']} | {r['tbs']} | "
              f"{'ok' if r['output_ok'] else 'WRONG'} |")
    return 0 if all(r["output_ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
