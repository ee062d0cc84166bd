"""GEMM1 of the fused-MoE layer (SiLU-and-mul fused, gate/up-interleaved w1) with the options tried against
issue 16's GEMM1 target; measured in RESULTS 29, where none beat `kernels.fused_moe_fused`'s *fused-il* across
cases, so the layer keeps that kernel and this module is what the experiment ran, kept with its tests.

The base tile is *fused-il*'s (interleaved gate/up columns, SiLU in float32 in the epilogue, weights through
a TMA descriptor, A rows gathered by pointer loads, grouped tile order). Options (constexpr):
- **PAIRED**: the routing is aligned at half the M block (HALF = BLOCK_SIZE_M / 2), so an expert pads by at
  most HALF - 1 rows (the *padding* cause the diagnosis names: 81 us of Mixtral TP2 M=1024's gap). The grid
  runs over pairs of half blocks: a pair inside one expert is one full tile; a pair straddling two experts
  is two HALF tiles done one after the other by the same program. Measured slower everywhere: the
  straddling pairs serialise two tiles in one program at half the rows per weight tile.
- **A_TMA**: A read through a TMA descriptor over `gather_rows`'s copy of its rows in sorted order (Hopper's
  copy engine has no row gather); the copy costs EM x K x 2 bytes, too many for top-8 routings.
- **PERSISTENT** (programs = SMs x CTAs per SM over the real tiles), **FLATTEN** (tile and K loops pipelined
  as one), **WARP_SPECIALIZE** (`tl.range(..., warp_specialize=True)` on the K loop; Triton 3.6 fails to
  compile it on Hopper for the large 4-warp tiles).
The caller aligns the routing at `align_block(config, paired)`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ceilings.errors import AdvisorError
from ceilings.launch import Config
from kernels import fused_moe as fm
from kernels import fused_moe_fused as ff


@triton.jit
def _gated_tile(a_ptr, a_desc, b_desc, b_ptr, c_ptr, sorted_token_ids_ptr, row0, expert, pid_n,
                N, K, num_valid_tokens, top_k,
                stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
                BM: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                WARP_SPECIALIZE: tl.constexpr, EVEN_K: tl.constexpr, A_TMA: tl.constexpr, B_TMA: tl.constexpr,
                compute_type: tl.constexpr):
    # One BM x BLOCK_SIZE_N tile of interleaved w1 (column 2j gate j, 2j + 1 up j) for the BM sorted
    # rows from row0, all of `expert`; writes BM x BLOCK_SIZE_N / 2 columns of silu(gate) * up.
    BN_OUT: tl.constexpr = BLOCK_SIZE_N // 2
    offs_m = row0 + tl.arange(0, BM)
    pair = tl.load(sorted_token_ids_ptr + offs_m)
    token_mask = pair < num_valid_tokens
    a_row = (pair // top_k).to(tl.int64)  # 32-bit division, 64-bit offsets
    c_row = pair.to(tl.int64)
    # Rows past the expert's 2N wrap to valid ones (pointer path); their columns are never stored.
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % (2 * N)
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + a_row[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + expert.to(tl.int64) * stride_be + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    b_row = (expert * 2 * N + pid_n * BLOCK_SIZE_N).to(tl.int32)
    acc = tl.zeros((BM, BLOCK_SIZE_N), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BLOCK_SIZE_K), warp_specialize=WARP_SPECIALIZE):
        if A_TMA:
            # A pre-gathered in sorted order (`gather_rows`): the tile is rows row0.. of a dense matrix.
            a = a_desc.load([row0, k * BLOCK_SIZE_K])
        elif EVEN_K:
            a = tl.load(a_ptrs + k * BLOCK_SIZE_K * stride_ak, mask=token_mask[:, None], other=0.0)
        else:
            a = tl.load(a_ptrs + k * BLOCK_SIZE_K * stride_ak,
                        mask=token_mask[:, None] & (offs_k[None, :] < K - k * BLOCK_SIZE_K), other=0.0)
        if B_TMA:
            b = b_desc.load([b_row, k * BLOCK_SIZE_K]).T
        elif EVEN_K:
            b = tl.load(b_ptrs + k * BLOCK_SIZE_K * stride_bk)
        else:
            b = tl.load(b_ptrs + k * BLOCK_SIZE_K * stride_bk,
                        mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        acc = tl.dot(a, b, acc)
    gate, up = tl.split(tl.reshape(acc, (BM, BN_OUT, 2)))
    out = gate / (1.0 + tl.exp(-gate)) * up
    offs_cn = pid_n * BN_OUT + tl.arange(0, BN_OUT)
    c_ptrs = c_ptr + c_row[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    tl.store(c_ptrs, out.to(compute_type), mask=token_mask[:, None] & (offs_cn[None, :] < N))


@triton.jit
def _unit(a_ptr, a_desc, b_desc, b_ptr, c_ptr, sorted_token_ids_ptr, expert_ids_ptr, pid_m, pid_n, real_blocks,
          N, K, num_valid_tokens, top_k,
          stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
          BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
          PAIRED: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, EVEN_K: tl.constexpr, A_TMA: tl.constexpr,
          B_TMA: tl.constexpr, compute_type: tl.constexpr):
    # Unit pid_m of the M axis: an M block, or (PAIRED) the pair of aligned half blocks 2 pid_m, 2 pid_m + 1.
    if PAIRED:
        HALF: tl.constexpr = BLOCK_SIZE_M // 2
        first = 2 * pid_m
        expert0 = tl.load(expert_ids_ptr + first)
        has_second = first + 1 < real_blocks
        expert1 = tl.load(expert_ids_ptr + first + 1, mask=has_second, other=-1)
        if expert1 == expert0:
            _gated_tile(a_ptr, a_desc, b_desc, b_ptr, c_ptr, sorted_token_ids_ptr, first * HALF, expert0, pid_n,
                        N, K, num_valid_tokens, top_k,
                        stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
                        BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, WARP_SPECIALIZE, EVEN_K, A_TMA, B_TMA, compute_type)
        else:
            # An expert boundary (or the routing's end) inside the pair: one half tile per expert.
            _gated_tile(a_ptr, a_desc, b_desc, b_ptr, c_ptr, sorted_token_ids_ptr, first * HALF, expert0, pid_n,
                        N, K, num_valid_tokens, top_k,
                        stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
                        HALF, BLOCK_SIZE_N, BLOCK_SIZE_K, WARP_SPECIALIZE, EVEN_K, A_TMA, B_TMA, compute_type)
            if has_second:
                _gated_tile(a_ptr, a_desc, b_desc, b_ptr, c_ptr, sorted_token_ids_ptr, (first + 1) * HALF, expert1,
                            pid_n, N, K, num_valid_tokens, top_k,
                            stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
                            HALF, BLOCK_SIZE_N, BLOCK_SIZE_K, WARP_SPECIALIZE, EVEN_K, A_TMA, B_TMA, compute_type)
    else:
        expert = tl.load(expert_ids_ptr + pid_m)
        _gated_tile(a_ptr, a_desc, b_desc, b_ptr, c_ptr, sorted_token_ids_ptr, pid_m * BLOCK_SIZE_M, expert, pid_n,
                    N, K, num_valid_tokens, top_k,
                    stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
                    BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, WARP_SPECIALIZE, EVEN_K, A_TMA, B_TMA, compute_type)


@triton.jit(do_not_specialize=["EM", "num_valid_tokens", "num_programs"])
def gemm1_gated_kernel(
    # A [M, K] hidden rows gathered through sorted_token_ids; w1 interleaved [E, 2N, K] (b_desc: its TMA
    # descriptor over [E * 2N, K] when B_TMA, else None); C [M * top_k, N].
    # a_desc: TMA descriptor of A gathered in sorted order ([EM, K], `gather_rows`) when A_TMA, else None.
    a_ptr, a_desc, b_ptr, b_desc, c_ptr, sorted_token_ids_ptr, expert_ids_ptr, num_tokens_post_padded_ptr,
    # N = I (output columns); EM = length of sorted_token_ids; num_valid_tokens = M * top_k.
    N, K, EM, num_valid_tokens, top_k, num_programs,
    stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr, PAIRED: tl.constexpr, PERSISTENT: tl.constexpr, FLATTEN: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr, EVEN_K: tl.constexpr, A_TMA: tl.constexpr, B_TMA: tl.constexpr,
    compute_type: tl.constexpr,
):
    # The routing is aligned at ALIGN rows (half the M block when PAIRED); an M unit is 2 or 1 aligned blocks.
    ALIGN: tl.constexpr = BLOCK_SIZE_M // 2 if PAIRED else BLOCK_SIZE_M
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N // 2)
    real_blocks = tl.load(num_tokens_post_padded_ptr) // ALIGN
    if PERSISTENT:
        num_pid_m = tl.cdiv(real_blocks * ALIGN, BLOCK_SIZE_M)  # the real units only
        # FLATTEN: the tile loop and the K loop software-pipelined as one, so the next tile's loads overlap
        # this tile's epilogue.
        for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n, num_programs, flatten=FLATTEN):
            pid_m, pid_n = ff._tile_coords(tile, num_pid_m, num_pid_n, GROUP_SIZE_M)
            _unit(a_ptr, a_desc, b_desc, b_ptr, c_ptr, sorted_token_ids_ptr, expert_ids_ptr, pid_m, pid_n, real_blocks,
                  N, K, num_valid_tokens, top_k,
                  stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
                  BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, PAIRED, WARP_SPECIALIZE, EVEN_K, A_TMA, B_TMA, compute_type)
    else:
        # The grid is sized for the worst routing; units past the real padded count exit.
        pid_m, pid_n = ff._tile_coords(tl.program_id(0), tl.cdiv(EM, BLOCK_SIZE_M), num_pid_n, GROUP_SIZE_M)
        if pid_m * BLOCK_SIZE_M < real_blocks * ALIGN:
            _unit(a_ptr, a_desc, b_desc, b_ptr, c_ptr, sorted_token_ids_ptr, expert_ids_ptr, pid_m, pid_n, real_blocks,
                  N, K, num_valid_tokens, top_k,
                  stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
                  BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, PAIRED, WARP_SPECIALIZE, EVEN_K, A_TMA, B_TMA, compute_type)


@triton.jit(do_not_specialize=["num_valid_tokens"])
def _gather_rows_kernel(a_ptr, out_ptr, sorted_token_ids_ptr, num_tokens_post_padded_ptr, num_valid_tokens, top_k,
                        K, stride_am, stride_om, BLOCK_ROWS: tl.constexpr, BLOCK_K: tl.constexpr):
    # out[i] = A[sorted_token_ids[i] // top_k] for the real padded rows; padding rows get zeros.
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    if tl.program_id(0) * BLOCK_ROWS < tl.load(num_tokens_post_padded_ptr):
        pair = tl.load(sorted_token_ids_ptr + rows)
        valid = pair < num_valid_tokens
        src = (pair // top_k).to(tl.int64)
        for k0 in range(0, K, BLOCK_K):
            cols = k0 + tl.arange(0, BLOCK_K)
            col_ok = cols[None, :] < K
            x = tl.load(a_ptr + src[:, None] * stride_am + cols[None, :], mask=valid[:, None] & col_ok, other=0.0)
            tl.store(out_ptr + rows[:, None].to(tl.int64) * stride_om + cols[None, :], x, mask=col_ok)


def gather_rows(a: torch.Tensor, sorted_token_ids: torch.Tensor, num_tokens_post_padded: torch.Tensor,
                top_k: int) -> torch.Tensor:
    """A's rows in sorted order, [EM, K] (EM = len(sorted_token_ids)): row i = A[sorted_token_ids[i] // top_k],
    zeros in padding rows, rows past the padded total left unwritten (no tile reads them). What lets GEMM1
    read A through a TMA descriptor (Hopper's copy engine has no row gather); it costs EM x K x 2 bytes
    written and the rows read."""
    if a.stride(1) != 1:
        raise AdvisorError(f"A has column stride {a.stride(1)}; gather_rows needs rows contiguous in K")
    em, k = sorted_token_ids.shape[0], a.shape[1]
    out = torch.empty((em, k), dtype=a.dtype, device=a.device)
    rows = 32
    _gather_rows_kernel[(triton.cdiv(em, rows),)](
        a, out, sorted_token_ids, num_tokens_post_padded, a.shape[0] * top_k, top_k, k, a.stride(0), out.stride(0),
        BLOCK_ROWS=rows, BLOCK_K=min(256, triton.next_power_of_2(k)), num_warps=4)
    return out


def align_block(config: Config, paired: bool) -> int:
    """The M block the routing must be aligned at for this kernel: half the tile's when paired."""
    bm = config["BLOCK_SIZE_M"]
    if paired and bm < 32:
        raise AdvisorError(f"paired M blocks need BLOCK_SIZE_M >= 32 (two halves of >= 16 rows); got {bm}")
    return bm // 2 if paired else bm


def grid(em: int, n_out: int, config: Config, persistent: bool, num_sms: int) -> tuple[int]:
    """Programs: one per (M unit, N block) of the worst routing, or the persistent grid."""
    if persistent:
        return ff.persistent_grid(em, n_out, config, True, num_sms)
    return ff.gemm_grid(em, n_out, config, True)


def invoke_gemm1(a, w1_interleaved, c, sorted_token_ids, expert_ids, num_tokens_post_padded, top_k: int,
                 config: Config, paired: bool = True, persistent: bool = False, warp_specialize: bool = False,
                 b_tma: bool | None = None, a_sorted: torch.Tensor | None = None, flatten: bool = False):
    """C [M * top_k, I] = silu(gate) * up of A [M, K] x w1 for each (token, k) pair, on interleaved w1
    (`kernels.fused_moe_fused.interleave_gate_up`) and a routing aligned at `align_block(config, paired)`.
    a_sorted: `gather_rows(a, ...)` of this routing; then A is read through a TMA descriptor over it.
    flatten (with persistent): the tile and K loops pipelined as one loop."""
    w = w1_interleaved
    if a.dtype not in fm._TL_DTYPES or w.dtype != a.dtype or c.dtype != a.dtype:
        raise AdvisorError(f"GEMM1 takes bf16 or fp16 A, w1 and C of one dtype; got {a.dtype}, {w.dtype}, {c.dtype}")
    if a.shape[1] != w.shape[2] or w.shape[1] % 2:
        raise AdvisorError(f"A is {tuple(a.shape)} and w1 {tuple(w.shape)}; w1 must be [E, 2I, K] with A's K")
    if config["BLOCK_SIZE_N"] < 32:
        raise AdvisorError(f"BLOCK_SIZE_N={config['BLOCK_SIZE_N']} splits into gate and up columns under 16; "
                           "use BLOCK_SIZE_N >= 32")
    n_out, k = w.shape[1] // 2, w.shape[2]
    if c.shape[-1] != n_out:
        raise AdvisorError(f"C has {c.shape[-1]} columns but this GEMM gives {n_out}")
    align = align_block(config, paired)
    em = sorted_token_ids.shape[0]
    if em % align or expert_ids.shape[0] != em // align:
        raise AdvisorError(f"the routing is aligned at {em // max(expert_ids.shape[0], 1)} rows; this config "
                           f"needs {align} (align_block(config, paired={paired}))")
    a_desc = None
    if a_sorted is not None:
        if paired:
            raise AdvisorError("a pre-gathered A is read in whole M blocks; pass paired=False with a_sorted")
        if a_sorted.shape != (em, k) or a_sorted.dtype != a.dtype or a_sorted.stride(1) != 1:
            raise AdvisorError(f"a_sorted is {tuple(a_sorted.shape)} {a_sorted.dtype}; expected gather_rows's "
                               f"({em}, {k}) {a.dtype}")
        a_desc = fm.TensorDescriptor(a_sorted, [em, k], [a_sorted.stride(0), 1],
                                     [config["BLOCK_SIZE_M"], config["BLOCK_SIZE_K"]])
    if b_tma is None:
        b_tma = fm.tma_supported(w)
    b_desc = None
    if b_tma:
        b_desc = fm.TensorDescriptor(w, [w.shape[0] * w.shape[1], k], [w.stride(1), 1],
                                     [config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"]])
    programs = grid(em, n_out, config, persistent, ff._num_sms(a.device))
    gemm1_gated_kernel[programs](
        a, a_desc, w, b_desc, c, sorted_token_ids, expert_ids, num_tokens_post_padded,
        n_out, k, em, c.shape[0], top_k, programs[0],
        a.stride(0), a.stride(1), w.stride(0), w.stride(1), w.stride(2), c.stride(0), c.stride(1),
        PAIRED=paired, PERSISTENT=persistent, FLATTEN=flatten and persistent, WARP_SPECIALIZE=warp_specialize,
        EVEN_K=k % config["BLOCK_SIZE_K"] == 0, A_TMA=a_desc is not None, B_TMA=b_tma,
        compute_type=fm._TL_DTYPES[a.dtype],
        num_warps=config.num_warps, num_stages=config.num_stages, **config.params,
    )
    return c


def padded_rows(expert_counts: list[int], block: int) -> int:
    """Rows the GEMM multiplies when each expert's pairs are padded to `block`: what pairing saves."""
    return sum(-(-c // block) * block for c in expert_counts)


def reference(a: torch.Tensor, w1: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
    """[pairs, I] float32 silu(gate) * up from w1 as it comes ([E, 2I, K], gate rows then up rows)."""
    full = fm.fused_moe_gemm_reference(a, w1, topk_ids, topk_ids.shape[1])
    half = w1.shape[1] // 2
    return torch.nn.functional.silu(full[:, :half]) * full[:, half:]
