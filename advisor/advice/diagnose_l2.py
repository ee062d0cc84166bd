"""The L2 re-read cause of `advisor diagnose`: weight tiles read again from DRAM because the CTAs that
share them run too far apart in launch order for L2 to keep them.

**Launch order.** A tiled GEMM (and the fused-MoE GEMM) maps program ids to (M block, N block) in
grouped order: GROUP_M consecutive M blocks sweep the N blocks together, M fastest (the Triton
tutorial's ordering, which both shipped kernels use; `grouped_order` replays it). Each active CTA
reads one B slab (BLOCK_N x K of the weight matrix its M block uses: one matrix for a GEMM, its
expert's for the MoE GEMM), one A tile (BLOCK_M x K) and writes one C tile.

**Waves.** The first `resident` CTAs (SMs x CTAs per SM) start together and, doing equal work, end
together; the next `resident` start then (lockstep waves: the wave view the tail cause also takes).
Two reads of one slab in one wave are one DRAM read (the second is an L2 hit or joins the miss in
flight). Between a read in wave w1 and the next in wave w2 > w1, L2 takes in the unique bytes of the
waves between (slabs, A tiles, C tiles), plus the part of w1 after and of w2 before the K step in
question: D(x) = S(w1+1 .. w2-1) + (1 - x) U(w1) + x U(w2) for the K step at fraction x of the loop.
Where D(x) passes the L2 size the slab's K steps come from DRAM again (reuse distance against
capacity under least-recently-used replacement, the usual model of a cache's misses; the L2 size is
the GPU spec's: all of it taken as one LRU cache, an assumption noted on the diagnosis).

**Time.** The re-read bytes are counted at the calibrated DRAM rate on top of the loop, not hidden
under the tensor work: a CTA whose B tile misses L2 waits for DRAM in its K loop, and where the
re-reads are large the DRAM pipe is near its roof, where queueing stretches every load. This is an
upper bound (perfect overlap would make it the DRAM time past the binding work instead); how often
it passes the gap left to it is reported (benchmarks/diagnose_check.py).
"""

from __future__ import annotations

import math

import numpy as np


def grouped_order(grid_m: int, num_pid_n: int, group_m: int) -> tuple[np.ndarray, np.ndarray]:
    """(pid_m, pid_n) of every program id in launch order, grouped ordering with `group_m` rows."""
    pid = np.arange(grid_m * num_pid_n, dtype=np.int64)
    group_m = max(1, int(group_m))
    in_group = group_m * num_pid_n
    first = (pid // in_group) * group_m
    rows = np.minimum(grid_m - first, group_m)
    return first + (pid % in_group) % rows, (pid % in_group) // rows


def _unique_per_wave(wave: np.ndarray, ids: np.ndarray, waves: int) -> np.ndarray:
    """How many distinct `ids` each wave holds."""
    width = int(ids.max()) + 1
    return np.bincount(np.unique(wave * width + ids) // width, minlength=waves).astype(float)


def reread_bytes(m_runs: list[int], grid_m: int, num_pid_n: int, group_m: int, resident: int,
                 slab_bytes: float, a_tile_bytes: float, c_tile_bytes: float, l2_bytes: float) -> tuple[float, int]:
    """(bytes of B slabs read from DRAM past their first read, waves) for active M blocks in `m_runs`
    (M blocks per weight matrix, in M order) of a grid of `grid_m` x `num_pid_n` programs."""
    total_m = int(sum(m_runs))
    if total_m == 0 or num_pid_n <= 0 or resident <= 0:
        return 0.0, 0
    pid_m, pid_n = grouped_order(max(grid_m, total_m), num_pid_n, group_m)
    keep = pid_m < total_m                   # blocks past the padded count only exit
    pid_m, pid_n = pid_m[keep], pid_n[keep]
    matrix = np.repeat(np.arange(len(m_runs)), m_runs)[pid_m]
    slab = matrix * num_pid_n + pid_n
    wave = np.arange(len(slab)) // resident
    waves = int(wave[-1]) + 1
    unique = (_unique_per_wave(wave, slab, waves) * slab_bytes + _unique_per_wave(wave, pid_m, waves) * a_tile_bytes
              + np.bincount(wave, minlength=waves) * c_tile_bytes)
    before = np.concatenate([[0.0], np.cumsum(unique)])
    # One read per (slab, wave); consecutive reads of one slab in different waves.
    pairs = np.unique(slab * waves + wave)   # sorted by slab, then wave
    s, w = pairs // waves, pairs % waves
    again = s[1:] == s[:-1]
    w1, w2 = w[:-1][again], w[1:][again]
    between = before[w2] - before[w1 + 1]
    at_start, at_end = between + unique[w1], between + unique[w2]   # D at x = 0 and x = 1
    lo, hi = np.minimum(at_start, at_end), np.maximum(at_start, at_end)
    span = np.maximum(hi - lo, 1e-30)
    missed = np.where(lo > l2_bytes, 1.0, np.where(hi <= l2_bytes, 0.0, (hi - l2_bytes) / span))
    return float(missed.sum() * slab_bytes), waves


def even_runs(active_m: int, matrices: int) -> list[int]:
    """`active_m` M blocks spread as evenly as whole blocks go over `matrices` weight matrices."""
    matrices = max(1, min(int(matrices), int(active_m)))
    base, extra = divmod(int(active_m), matrices)
    return [base + (i < extra) for i in range(matrices)]


def l2_rereads(m_runs: list[int], grid_m: int, num_pid_n: int, group_m: int, resident: int,
               tiles: tuple[int, int, int], k_padded: float, size: int, l2_bytes: float,
               dram_rate: float, c_tile_bytes: float | None = None) -> tuple[float, str]:
    """(estimate in us, reason) of the B slabs re-read from DRAM, at `dram_rate` bytes/s; `c_tile_bytes`:
    what one tile's epilogue writes (default BLOCK_M x BLOCK_N elements)."""
    bm, bn, _ = (int(t) for t in tiles)
    slab = bn * k_padded * size
    c_tile = bm * bn * size if c_tile_bytes is None else c_tile_bytes
    extra, waves = reread_bytes(m_runs, grid_m, num_pid_n, group_m, resident, slab, bm * k_padded * size,
                                c_tile, l2_bytes)
    us = extra / dram_rate * 1e6
    why = (f"GROUP_M {group_m}: {len(m_runs)} weight matrix(es) in {sum(m_runs)} M block(s) x {num_pid_n} N "
           f"block(s), {waves} wave(s) of {resident} CTAs; {extra / 1e6:.0f} MB of {slab / 1e6:.2f} MB weight slabs "
           f"read again from DRAM (the bytes streamed between two reads pass the {l2_bytes / 1e6:.0f} MB L2) at "
           f"{dram_rate / 1e12:.2f} TB/s")
    return (us if math.isfinite(us) else 0.0), why


def weight_reuse(shape, config, tiles: tuple[int, int, int] | None, active_ctas: int, ctas: int,
                 m_runs: list[int] | None) -> tuple[list[int], int, int, int] | None:
    """(M blocks per weight matrix, grid M blocks, N blocks, GROUP_M) of a tiled launch in grouped order
    whose shape names its N (and, for a grouped GEMM, its `num_experts` weight matrices), else None.
    Without `m_runs` (a routing's per-expert M blocks) the active M blocks are spread evenly."""
    from advisor.model.features import tile_sizes

    n = getattr(shape, "n", None)
    if not tiles or not isinstance(n, int) or not active_ctas:
        return None
    num_pid_n = math.ceil(n / tiles[1])
    if m_runs is None:
        m_runs = even_runs(round(active_ctas / num_pid_n), getattr(shape, "num_experts", 1))
    group_m = int(tile_sizes(config)["group_m"] or 1)
    # A persistent kernel (shape.persistent) orders its tiles over the real M blocks only.
    grid_m = sum(m_runs) if getattr(shape, "persistent", False) else max(1, ctas // num_pid_n)
    return list(m_runs), grid_m, num_pid_n, group_m
