"""fp8 (e4m3) GEMMs of the fused-MoE layer (issue 16's fp8 candidate): w8a8 or weight-only, two scaling schemes.

"block" is the one DeepSeek-V3's checkpoints ship (ANCHORS section 1): each weight matrix [rows, K] has one
float32 scale per 128 x 128 block, each activation row one per 128 columns (quantised on the fly,
`quantize_rows`). A K step of BLOCK_SIZE_K (dividing 128) meets one activation scale per row and one weight
scale per weight row, so the kernel multiplies each step's fp8 product by a_scale[m] * w_scale[n] before
adding it to the float32 accumulator: that product is a second accumulator-sized tile in registers, which
is what made tiles over 64 x 128 per warpgroup slow on the H100 (RESULTS 40). "channel" has one scale per
weight row and one per token, constant over K, so they multiply the sum once in the epilogue and the K loop
is the bf16 kernel's with fp8 operands.

The tile walk is `kernels.fused_moe_fused`'s (grouped order, optional persistent programs over the real
tiles); two forms: GATED (GEMM1 on interleaved w1, SiLU-and-mul in the epilogue, bf16 out) and ACCUMULATE
(GEMM2, router weight and top-k sum fused by float32 atomics). Weight scales stay in the layout of w1 as it
comes (gate rows, then up rows), so a checkpoint's scales are used as they are; the kernel maps an
interleaved row 2j + u back to row j + u * I to find its scale.

Weight-only (w8a16): A stays bf16/fp16 (a_scales None) and the fp8 weights widen to A's type in registers
before a 16-bit MMA: no activation quantiser. The layer (`fused_moe_fp8`) runs one of three forms (FORMS):
w8a8, w8a16 on these tiles, or the decode-time GEMVs of `kernels.fused_moe_fp8_gemv`; `choose_form` picks
from the tuned files.
"""

from __future__ import annotations

from pathlib import Path

import torch
import triton
import triton.language as tl

from ceilings.errors import AdvisorError
from ceilings.launch import Config
from kernels import fused_moe as fm
from kernels import fused_moe_fused as ff

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # largest finite e4m3fn value
SCALE_BLOCK = 128
# Scaling schemes: (weight rows per scale, columns per scale; None = the whole K), activations scaled per row
# over the same columns. "block": DeepSeek-V3's checkpoints (128 x 128 weight blocks, 1 x 128 activation
# groups): the scales change every 128 columns of K, so each K step's product is scaled before it is added.
# "channel": one scale per weight row and per token: constant over K, so applied once in the epilogue.
SCALINGS = {"block": (SCALE_BLOCK, SCALE_BLOCK), "channel": (1, None)}
_MIN_AMAX = 1e-12  # an all-zero group gets a tiny scale instead of a division by zero


@triton.jit
def quantize_rows_kernel(x_ptr, q_ptr, s_ptr, M, K, group, stride_xm, stride_qm, stride_sm,
                         BLOCK_ROWS: tl.constexpr, CHUNK: tl.constexpr, EXACT_DIV: tl.constexpr):
    # One program: BLOCK_ROWS rows x one group of `group` columns -> fp8 values and one scale per row.
    # Two passes over the group in CHUNK columns: its largest magnitude, then the scaled values.
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    start = tl.program_id(1) * group
    end = tl.minimum(start + group, K)
    x_rows = x_ptr + rows[:, None].to(tl.int64) * stride_xm
    q_rows = q_ptr + rows[:, None].to(tl.int64) * stride_qm
    amax = tl.zeros((BLOCK_ROWS,), dtype=tl.float32)
    for c in range(start, end, CHUNK):
        cols = c + tl.arange(0, CHUNK)
        mask = (rows[:, None] < M) & (cols[None, :] < end)
        x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.max(tl.abs(x), axis=1))
    scale = tl.maximum(amax, 1e-12) / 448.0
    for c in range(start, end, CHUNK):
        cols = c + tl.arange(0, CHUNK)
        mask = (rows[:, None] < M) & (cols[None, :] < end)
        x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        # EXACT_DIV: IEEE division, as torch divides (a called routine); `/` is the GPU's approximate one.
        if EXACT_DIV:
            q = tl.math.div_rn(x, tl.broadcast_to(scale[:, None], x.shape))
        else:
            q = x / scale[:, None]
        tl.store(q_rows + cols[None, :], q.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + rows * stride_sm + tl.program_id(1), scale, mask=rows < M)


def _groups(scaling: str) -> tuple[int | None, int | None]:
    """(weight rows per scale, columns per scale; None = the whole K) of a scaling scheme."""
    if scaling not in SCALINGS:
        raise AdvisorError(f"scaling={scaling!r} is not an fp8 scaling scheme; use one of {', '.join(SCALINGS)}")
    return SCALINGS[scaling]


def quantize_rows(x: torch.Tensor, scaling: str = "block", exact: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] (bf16/fp16/fp32) -> (fp8 [M, K], float32 scales [M, groups]): each group of a row (128
    columns for "block", the whole row for "channel") scaled so that its largest magnitude maps to 448.
    exact: IEEE division, bit for bit what `quantize_rows_reference` gives; the default, the GPU's fast
    division, put 0-2 values per case one e4m3 step off it and took 1.0-1.9 us less at small M, up to 8.5 us
    for the per-token scheme (RESULTS 40, H100 run 5)."""
    if x.dim() != 2:
        raise AdvisorError(f"quantize_rows takes a 2-D [M, K] tensor; got shape {tuple(x.shape)}")
    x = x if x.stride(1) == 1 else x.contiguous()
    m, k = x.shape
    group = _groups(scaling)[1] or max(k, 1)
    groups = triton.cdiv(k, group)
    q = torch.empty((m, k), dtype=FP8, device=x.device)
    scales = torch.empty((m, groups), dtype=torch.float32, device=x.device)
    # A whole-row group is walked in chunks of up to 1024 columns, a row or two per program: 128-column
    # chunks of 16 rows took 6-12 us at M = 1 on the H100 (64 dependent loads), against 2 us for blocks.
    chunk = min(1024, triton.next_power_of_2(group))
    block_rows = max(1, 2048 // chunk)
    quantize_rows_kernel[(triton.cdiv(m, block_rows), groups)](
        x, q, scales, m, k, group, x.stride(0), q.stride(0), scales.stride(0), BLOCK_ROWS=block_rows, CHUNK=chunk,
        EXACT_DIV=exact)
    return q, scales


def quantize_rows_reference(x: torch.Tensor, scaling: str = "block") -> tuple[torch.Tensor, torch.Tensor]:
    """`quantize_rows` in torch (the check for the Triton quantiser)."""
    q, scales = _quantize_blocks(x[None], 1, _groups(scaling)[1])
    return q[0], scales[0]


def _quantize_blocks(w: torch.Tensor, row_group: int, col_group: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    e, r, k = w.shape
    col_group = col_group or max(k, 1)
    rb, kb = triton.cdiv(r, row_group), triton.cdiv(k, col_group)
    q = torch.empty((e, r, k), dtype=FP8, device=w.device)
    scales = torch.empty((e, rb, kb), dtype=torch.float32, device=w.device)
    for i in range(e):  # one expert at a time, to bound the float32 copy
        padded = torch.zeros((rb * row_group, kb * col_group), dtype=torch.float32, device=w.device)
        padded[:r, :k] = w[i].float()
        blocks = padded.view(rb, row_group, kb, col_group)
        scales[i] = blocks.abs().amax(dim=(1, 3)).clamp_min(_MIN_AMAX) / FP8_MAX
        q[i] = (blocks / scales[i][:, None, :, None]).view(rb * row_group, -1)[:r, :k].to(FP8)
    return q, scales


def quantize_weights(w: torch.Tensor, scaling: str = "block") -> tuple[torch.Tensor, torch.Tensor]:
    """w [E, R, K] -> (fp8 [E, R, K], float32 scales [E, row groups, column groups]): "block": one scale per
    128 x 128 block (an edge block covers what is left); "channel": one per row."""
    if w.dim() != 3:
        raise AdvisorError(f"quantize_weights takes [E, R, K] weights; got shape {tuple(w.shape)}")
    return _quantize_blocks(w, *_groups(scaling))


def _expand(scales: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Scales [..., rb, kb] of either scheme spread over [..., rows, cols] (each scale over its block): one
    scale per row or per 128 rows; per 128 columns or for all of them (the two agree where they coincide)."""
    rb, kb = scales.shape[-2:]
    row_group = 1 if rb == rows else SCALE_BLOCK
    col_group = SCALE_BLOCK if kb == triton.cdiv(cols, SCALE_BLOCK) else max(cols, 1)
    full = scales.repeat_interleave(row_group, dim=-2).repeat_interleave(col_group, dim=-1)
    return full[..., :rows, :cols]


def dequantize_weights(q: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """float32 [E, R, K] from `quantize_weights`'s pair."""
    return q.float() * _expand(scales, q.shape[1], q.shape[2])


def dequantize_rows(q: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    return q.float() * _expand(scales, q.shape[0], q.shape[1])


def interleave_fp8(w_q: torch.Tensor) -> torch.Tensor:
    """`kernels.fused_moe_fused.interleave_gate_up` on fp8 weights (moved as bytes); scales are not moved."""
    return ff.interleave_gate_up(w_q.view(torch.uint8)).view(FP8)


@triton.jit
def _tile_fp8(a_ptr, a_scale_ptr, b_ptr, b_desc, b_scale_ptr, c_ptr, topk_weights_ptr, sorted_token_ids_ptr,
              expert_ids_ptr, pid_m, pid_n, N, K, num_valid_tokens, a_div, c_div,
              stride_am, stride_asm, stride_be, stride_bn, stride_bse, stride_bsn, stride_cm,
              BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
              GATED: tl.constexpr, ACCUMULATE: tl.constexpr, EVEN_K: tl.constexpr, B_TMA: tl.constexpr,
              BLOCK_SCALED: tl.constexpr, A_FP8: tl.constexpr, compute_type: tl.constexpr):
    BN_OUT: tl.constexpr = BLOCK_SIZE_N // (1 + GATED)
    offs_m = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    pair = tl.load(sorted_token_ids_ptr + offs_m)
    token_mask = pair < num_valid_tokens
    a_row = (pair // a_div).to(tl.int64)
    c_row = (pair // c_div).to(tl.int64)
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)

    # Rows past the expert's wrap to valid ones (their columns are never stored). The scale of
    # interleaved row 2j + u is that of row j + u * N of w1 as it comes.
    rows_per_expert = 2 * N if GATED else N
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % rows_per_expert
    ROW_GROUP: tl.constexpr = 128 if BLOCK_SCALED else 1
    if GATED:
        scale_row = (offs_bn // 2 + (offs_bn % 2) * N) // ROW_GROUP
    else:
        scale_row = offs_bn // ROW_GROUP
    b_scale_ptrs = b_scale_ptr + expert * stride_bse + scale_row * stride_bsn
    if A_FP8:
        a_scale_ptrs = a_scale_ptr + a_row * stride_asm
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + a_row[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + expert * stride_be + offs_k[:, None] + offs_bn[None, :] * stride_bn
    b_row = (expert * rows_per_expert + pid_n * BLOCK_SIZE_N).to(tl.int32)

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        if EVEN_K:
            a = tl.load(a_ptrs, mask=token_mask[:, None], other=0.0)
        else:
            a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < K - k * BLOCK_SIZE_K), other=0.0)
        if B_TMA:
            b = b_desc.load([b_row, k * BLOCK_SIZE_K]).T
        elif EVEN_K:
            b = tl.load(b_ptrs)
        else:
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        if not A_FP8:
            # Weight-only: the fp8 weights widen to A's 16-bit type in registers (exact: e4m3 fits in bf16
            # and fp16) and the MMA runs in 16 bits; no activation is quantised.
            b = b.to(a.dtype)
        if BLOCK_SCALED:
            # BLOCK_SIZE_K divides the 128-column group, so one scale per row covers the whole step. The
            # step's product is a second accumulator-sized tile: twice the registers of a bf16 tile.
            group = (k * BLOCK_SIZE_K) // 128
            b_s = tl.load(b_scale_ptrs + group)
            if A_FP8:
                a_s = tl.load(a_scale_ptrs + group, mask=token_mask, other=0.0)
                acc += tl.dot(a, b) * (a_s[:, None] * b_s[None, :])
            else:
                acc += tl.dot(a, b) * b_s[None, :]
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_SIZE_K
        b_ptrs += BLOCK_SIZE_K
    if not BLOCK_SCALED:
        # Scales constant over K: once, on the sum.
        b_s = tl.load(b_scale_ptrs)
        if A_FP8:
            a_s = tl.load(a_scale_ptrs, mask=token_mask, other=0.0)
            acc = acc * (a_s[:, None] * b_s[None, :])
        else:
            acc = acc * b_s[None, :]

    if GATED:
        gate, up = tl.split(tl.reshape(acc, (BLOCK_SIZE_M, BN_OUT, 2)))
        out = gate / (1.0 + tl.exp(-gate)) * up
    else:
        out = acc
    offs_cn = pid_n * BN_OUT + tl.arange(0, BN_OUT)
    c_ptrs = c_ptr + c_row[:, None] * stride_cm + offs_cn[None, :]
    c_mask = token_mask[:, None] & (offs_cn[None, :] < N)
    if ACCUMULATE:
        weight = tl.load(topk_weights_ptr + pair, mask=token_mask, other=0.0)
        tl.atomic_add(c_ptrs, out * weight[:, None], mask=c_mask, sem="relaxed")
    else:
        tl.store(c_ptrs, out.to(compute_type), mask=c_mask)


@triton.jit(do_not_specialize=["EM", "num_valid_tokens", "num_programs"])
def fused_moe_fp8_kernel(
    # A fp8 [rows, K] with float32 scales [rows, k groups] (rows gathered through sorted_token_ids), or
    # (not A_FP8, weight-only) bf16/fp16 with no scales (a_scale_ptr None);
    # B fp8 [E, rows_b, K] (interleaved w1 when GATED) with scales [E, row groups, k groups] in w1's own
    # row order (BLOCK_SCALED: 128 x 128 blocks, else one per row and K whole); b_desc: TMA descriptor
    # of B as [E * rows_b, K] when B_TMA, else None.
    a_ptr, a_scale_ptr, b_ptr, b_desc, b_scale_ptr, c_ptr, topk_weights_ptr,
    sorted_token_ids_ptr, expert_ids_ptr, num_tokens_post_padded_ptr,
    N, K, EM, num_valid_tokens, a_div, c_div, num_programs,
    stride_am, stride_asm, stride_be, stride_bn, stride_bse, stride_bsn, stride_cm,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr, GATED: tl.constexpr, ACCUMULATE: tl.constexpr, PERSISTENT: tl.constexpr,
    EVEN_K: tl.constexpr, B_TMA: tl.constexpr, BLOCK_SCALED: tl.constexpr, A_FP8: tl.constexpr,
    compute_type: tl.constexpr,
):
    BN_OUT: tl.constexpr = BLOCK_SIZE_N // (1 + GATED)
    num_pid_n = tl.cdiv(N, BN_OUT)
    num_tokens_post_padded = tl.load(num_tokens_post_padded_ptr)
    if PERSISTENT:
        num_pid_m = tl.cdiv(num_tokens_post_padded, BLOCK_SIZE_M)
        for tile in range(tl.program_id(0), num_pid_m * num_pid_n, num_programs):
            pid_m, pid_n = ff._tile_coords(tile, num_pid_m, num_pid_n, GROUP_SIZE_M)
            _tile_fp8(a_ptr, a_scale_ptr, b_ptr, b_desc, b_scale_ptr, c_ptr, topk_weights_ptr, sorted_token_ids_ptr,
                      expert_ids_ptr, pid_m, pid_n, N, K, num_valid_tokens, a_div, c_div,
                      stride_am, stride_asm, stride_be, stride_bn, stride_bse, stride_bsn, stride_cm,
                      BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GATED, ACCUMULATE, EVEN_K, B_TMA, BLOCK_SCALED,
                      A_FP8, compute_type)
    else:
        pid_m, pid_n = ff._tile_coords(tl.program_id(0), tl.cdiv(EM, BLOCK_SIZE_M), num_pid_n, GROUP_SIZE_M)
        if pid_m * BLOCK_SIZE_M < num_tokens_post_padded:
            _tile_fp8(a_ptr, a_scale_ptr, b_ptr, b_desc, b_scale_ptr, c_ptr, topk_weights_ptr, sorted_token_ids_ptr,
                      expert_ids_ptr, pid_m, pid_n, N, K, num_valid_tokens, a_div, c_div,
                      stride_am, stride_asm, stride_be, stride_bn, stride_bse, stride_bsn, stride_cm,
                      BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GATED, ACCUMULATE, EVEN_K, B_TMA, BLOCK_SCALED,
                      A_FP8, compute_type)


def check_config(config: Config, gated: bool, scaling: str = "block") -> None:
    """A config the fp8 kernel can run: BLOCK_SIZE_K at least 32 (an fp8 MMA's K) and, for block scales, a
    divisor of the 128-column group (one scale per K step); gated tiles split into halves of >= 16 columns."""
    bk = config["BLOCK_SIZE_K"]
    if bk < 32 or (_groups(scaling)[1] and SCALE_BLOCK % bk):
        raise AdvisorError(f"BLOCK_SIZE_K={bk} does not fit fp8 block scales; use 32, 64 or 128 "
                           f"(a divisor of the {SCALE_BLOCK}-column scale group)")
    if gated and config["BLOCK_SIZE_N"] < 32:
        raise AdvisorError(f"BLOCK_SIZE_N={config['BLOCK_SIZE_N']} splits into gate and up halves under 16 "
                           "columns; use BLOCK_SIZE_N >= 32")


def invoke_fp8_gemm(a_q, a_scales, w_q, w_scales, c, topk_weights, sorted_token_ids, expert_ids,
                    num_tokens_post_padded, top_k: int, config: Config, gated: bool, persistent: bool = False,
                    b_tma: bool | None = None, scaling: str = "block"):
    """One GEMM of the layer in fp8, its operands quantised by `quantize_rows` / `quantize_weights` with
    `scaling` ("block" or "channel"). Weight-only (w8a16): a_q is the bf16/fp16 activation itself and
    a_scales None; the weights widen to 16 bits in registers and the MMA runs in 16 bits.

    gated (GEMM1): a_q [M, K] hidden, w_q = interleave_fp8(w1_q) [E, 2I, K] with w1's scales, c [M * top_k, I]
    bf16/fp16 = silu(gate) * up. Else (GEMM2): a_q [M * top_k, K] activation, w_q [E, H, K], c [M, H] float32
    zeroed by the caller; c[t] += weight[t, k] * a[t * top_k + k] @ w[expert]^T.
    """
    a_fp8 = a_q.dtype == FP8
    if w_q.dtype != FP8 or not (a_fp8 or a_q.dtype in (torch.bfloat16, torch.float16)):
        raise AdvisorError(f"the fp8 GEMM takes {FP8} W and {FP8} (w8a8) or bf16/fp16 (weight-only) A; got "
                           f"A {a_q.dtype}, W {w_q.dtype} (quantize with quantize_rows / quantize_weights)")
    if a_fp8 != (a_scales is not None):
        raise AdvisorError("fp8 A needs its scales and a bf16/fp16 A (weight-only) takes none; pass a_scales "
                           + ("from quantize_rows" if a_fp8 else "None"))
    if a_q.shape[1] != w_q.shape[2]:
        raise AdvisorError(f"A has K={a_q.shape[1]} but W is {tuple(w_q.shape)} ([E, N, K]); hidden sizes differ")
    e, rows_b, k = w_q.shape
    row_group, col_group = _groups(scaling)
    k_groups = triton.cdiv(k, col_group or max(k, 1))
    want_a, want_w = (a_q.shape[0], k_groups), (e, triton.cdiv(rows_b, row_group), k_groups)
    got_a = tuple(a_scales.shape) if a_fp8 else want_a
    if got_a != want_a or tuple(w_scales.shape) != want_w:
        raise AdvisorError(f"scales of shapes {got_a} (A) and {tuple(w_scales.shape)} (W); "
                           f"{scaling} scales here are {want_a} and {want_w} (quantize with scaling={scaling!r})")
    if (a_fp8 and a_scales.dtype != torch.float32) or w_scales.dtype != torch.float32:
        raise AdvisorError("fp8 scales are float32")
    check_config(config, gated, scaling)
    if gated and rows_b % 2:
        raise AdvisorError(f"w1 has {rows_b} rows per expert; the gated GEMM needs gate and up halves (2I)")
    n_out = rows_b // 2 if gated else rows_b
    if c.shape[-1] != n_out or (not gated and c.dtype != torch.float32):
        raise AdvisorError(f"C is {tuple(c.shape)} {c.dtype}; this GEMM writes {n_out} columns"
                           + ("" if gated else " of float32"))
    if gated and c.dtype not in fm._TL_DTYPES:
        raise AdvisorError(f"GEMM1 writes bf16 or fp16; C is {c.dtype}")
    if b_tma is None:
        b_tma = fm.tma_supported(w_q)
    b_desc = None
    if b_tma:
        b_desc = fm.TensorDescriptor(w_q, [e * rows_b, k], [w_q.stride(1), 1],
                                     [config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"]])
    em = sorted_token_ids.shape[0]
    if persistent:
        grid = ff.persistent_grid(em, n_out, config, gated, ff._num_sms(a_q.device))
    else:
        grid = ff.gemm_grid(em, n_out, config, gated)
    fused_moe_fp8_kernel[grid](
        a_q, a_scales, w_q, b_desc, w_scales, c, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
        n_out, k, em, topk_weights.numel(), top_k if gated else 1, 1 if gated else top_k, grid[0],
        a_q.stride(0), a_scales.stride(0) if a_fp8 else 0, w_q.stride(0), w_q.stride(1), w_scales.stride(0),
        w_scales.stride(1), c.stride(0),
        GATED=gated, ACCUMULATE=not gated, PERSISTENT=persistent, EVEN_K=k % config["BLOCK_SIZE_K"] == 0,
        B_TMA=b_tma, BLOCK_SCALED=scaling == "block", A_FP8=a_fp8, compute_type=fm._TL_DTYPES.get(c.dtype, tl.bfloat16),
        num_warps=config.num_warps, num_stages=config.num_stages, **config.params,
    )
    return c


class Fp8Weights:
    """A layer's weights in fp8, prepared once where they are loaded: w1 quantised in its own layout then
    interleaved (scales kept in w1's row order), w2 quantised as it is; `scaling` "block" or "channel"."""

    def __init__(self, w1: torch.Tensor, w2: torch.Tensor, scaling: str = "block"):
        self.scaling = scaling
        w1_q, self.w1_scales = quantize_weights(w1, scaling)
        self.w1_il = interleave_fp8(w1_q)
        self.w2, self.w2_scales = quantize_weights(w2, scaling)
        self.num_experts, self.two_i, self.hidden = w1.shape

    def dequantized(self) -> tuple[torch.Tensor, torch.Tensor]:
        """float32 w1 (gate rows then up rows) and w2, what the fp8 values stand for."""
        e, two_i, h = self.w1_il.shape
        w1_q = self.w1_il.view(torch.uint8).view(e, two_i // 2, 2, h).transpose(1, 2).reshape(e, two_i, h)
        return dequantize_weights(w1_q.view(FP8), self.w1_scales), dequantize_weights(self.w2, self.w2_scales)


# The layer's forms: "w8a8" (activations quantised, fp8 MMA), "w8a16" (weight-only: 16-bit activations,
# weights widened in registers, 16-bit MMA) and "gemv" (`kernels.fused_moe_fp8_gemv`: weight-only GEMVs
# per (token, expert) pair, no align, for a few tokens).
FORMS = ("w8a8", "w8a16", "gemv")


def config_path(num_experts: int, inter: int, device_name: str, scaling: str, gemm: int, form: str = "w8a8"
                ) -> Path:
    """Where the tuned fp8 configs of a shape, GPU and form live: `kernels/configs/fp8/<scaling>/[gemv/]`
    (GEMM1) and its `gemm2/` folder, in the engines' names and format (`dtype=fp8_w8a8`, or `fp8_w8a16`
    for the weight-only forms; `block_shape=[128,128]` for blocks)."""
    from kernels import moe_configs  # late: moe_configs imports kernels.fused_moe

    if form not in FORMS:
        raise AdvisorError(f"form={form!r} is not an fp8 layer form; use one of {', '.join(FORMS)}")
    folder = moe_configs.SHIPPED_DIR / "fp8" / scaling / ("gemv" if form == "gemv" else "")
    folder = folder / ("gemm2" if gemm == 2 else "")
    block = (SCALE_BLOCK, SCALE_BLOCK) if _groups(scaling)[0] > 1 else None
    dtype = "fp8_w8a8" if form == "w8a8" else "fp8_w8a16"
    return folder / moe_configs.config_file_name(num_experts, inter, device_name, dtype, block)


def choose_form(m: int, num_experts: int, inter: int, device_name: str | None, scaling: str) -> str:
    """The layer form for M tokens: "gemv" up to the largest token count of this shape and GPU's GEMV config
    file (`benchmarks/moe_fp8_gemv.py` writes the counts, from one up, where the GEMV layer was timed faster
    than the tiled fp8 layers), else "w8a8". "w8a16" is not chosen here and ships no files: measured on the
    H100 only, where the GEMV did not win it beat w8a8 by 0.2-5% with channel scales (Mixtral M = 4-16,
    Qwen2-MoE M = 16) and never with block scales (RESULTS 41); pass form="w8a16" (and configs) to run it."""
    from kernels import moe_configs

    if not device_name:
        return "w8a8"
    path = config_path(num_experts, inter, device_name, scaling, 1, "gemv")
    if path.exists() and m <= max(moe_configs.read_config_file(path).configs):
        return "gemv"
    return "w8a8"


def layer_configs(m: int, num_experts: int, inter: int, top_k: int, device_name: str | None, scaling: str,
                  form: str = "w8a8") -> tuple[tuple[Config, str], tuple[Config, str]]:
    """(config, where it came from) of the fp8 GEMM1 and GEMM2 of a form for M tokens: the tuned files for
    this GPU, else the default: the GEMV's (`kernels.fused_moe_fp8_gemv.DEFAULT_CONFIG`), or the bf16
    kernel's rule (its BLOCK_SIZE_K, 64 or 128, divides the 128-column group)."""
    from kernels import moe_configs
    from kernels.fused_moe_fp8_gemv import DEFAULT_CONFIG

    found = []
    for gemm in (1, 2):
        path = config_path(num_experts, inter, device_name, scaling, gemm, form) if device_name else None
        if path is not None and path.exists():
            found.append((moe_configs.read_config_file(path).lookup(m), str(path)))
        elif form == "gemv":
            found.append((DEFAULT_CONFIG, "default GEMV tile"))
        else:
            found.append((moe_configs.default_config(m, num_experts, top_k), "default rule"))
    return found[0], found[1]


def fused_moe_fp8(hidden, weights: Fp8Weights, topk_weights, topk_ids, config: Config | None = None,
                  config2: Config | None = None, persistent: bool = False, b_tma: bool | None = None,
                  form: str | None = None) -> torch.Tensor:
    """The layer in fp8, [M, H] in hidden's dtype. form "w8a8": quantise hidden, align, GEMM1 (SiLU-and-mul
    fused) -> 16-bit activation, quantise it, GEMM2 with the weighted top-k sum fused into float32, cast.
    "w8a16": the same with no quantiser (16-bit activations into both GEMMs). "gemv": the two GEMVs of
    `kernels.fused_moe_fp8_gemv` (no align). None: `choose_form` for this GPU. config None: `layer_configs`
    for this GPU and form; config2 None: the tuned GEMM2 config when config is None too, else config."""
    from kernels.moe_align import moe_align_triton  # late: kernels.moe_align imports kernels.fused_moe

    if hidden.dim() != 2 or hidden.shape[1] != weights.hidden:
        raise AdvisorError(f"hidden is {tuple(hidden.shape)}; the weights take [M, {weights.hidden}]")
    if topk_ids.shape != topk_weights.shape or topk_ids.shape[0] != hidden.shape[0]:
        raise AdvisorError(f"topk_ids {tuple(topk_ids.shape)} and topk_weights {tuple(topk_weights.shape)} "
                           f"must both be [M={hidden.shape[0]}, top_k]")
    m, h = hidden.shape
    top_k = topk_ids.shape[1]
    device_name = torch.cuda.get_device_name(hidden.device) if hidden.is_cuda else None
    inter = weights.two_i // 2
    if form is None:
        form = choose_form(m, weights.num_experts, inter, device_name, weights.scaling)
    if form not in FORMS:
        raise AdvisorError(f"form={form!r} is not an fp8 layer form; use one of {', '.join(FORMS)}")
    if form != "w8a8" and hidden.dtype not in (torch.bfloat16, torch.float16):
        raise AdvisorError(f"the {form} form takes bf16 or fp16 hidden states; got {hidden.dtype} (cast them, "
                           "or pass form='w8a8')")
    if config is None:
        (config, _), (tuned2, _) = layer_configs(m, weights.num_experts, inter, top_k, device_name,
                                                 weights.scaling, form)
        config2 = config2 or tuned2
    config2 = config2 or config
    if form == "gemv":
        from kernels.fused_moe_fp8_gemv import fused_moe_fp8_gemv

        return fused_moe_fp8_gemv(hidden, weights, topk_weights, topk_ids, config, config2)
    weight_only = form == "w8a16"
    topk_weights = topk_weights.to(torch.float32).contiguous()
    aligned = moe_align_triton(topk_ids, (config["BLOCK_SIZE_M"], config2["BLOCK_SIZE_M"]), weights.num_experts)
    a_q, a_s = (hidden, None) if weight_only else quantize_rows(hidden, weights.scaling)
    act = torch.empty((m * top_k, inter), dtype=hidden.dtype, device=hidden.device)
    invoke_fp8_gemm(a_q, a_s, weights.w1_il, weights.w1_scales, act, topk_weights, *aligned[0], top_k=top_k,
                    config=config, gated=True, persistent=persistent, b_tma=b_tma, scaling=weights.scaling)
    act_q, act_s = (act, None) if weight_only else quantize_rows(act, weights.scaling)
    out = torch.zeros((m, h), dtype=torch.float32, device=hidden.device)
    invoke_fp8_gemm(act_q, act_s, weights.w2, weights.w2_scales, out, topk_weights, *aligned[-1], top_k=top_k,
                    config=config2, gated=False, persistent=persistent, b_tma=b_tma, scaling=weights.scaling)
    return out.to(hidden.dtype)


def gemm1_reference(a_q, a_scales, w1_dq, topk_ids) -> torch.Tensor:
    """[pairs, I] float32 silu(gate) * up over the values the fp8 operands stand for (w1_dq: float32 w1 as
    it comes, from `Fp8Weights.dequantized`); a_scales None: a_q is the 16-bit A of the weight-only form."""
    a = a_q.float() if a_scales is None else dequantize_rows(a_q, a_scales)
    full = fm.fused_moe_gemm_reference(a, w1_dq, topk_ids, topk_ids.shape[1])
    half = w1_dq.shape[1] // 2
    return torch.nn.functional.silu(full[:, :half]) * full[:, half:]


def layer_reference(hidden, weights: Fp8Weights, topk_weights, topk_ids, weight_only: bool = False
                    ) -> torch.Tensor:
    """float32 [M, H] of the fp8 layer: both GEMMs over the dequantised operands, the activation rounded to
    hidden's dtype and (unless weight_only) quantised as the kernel path does (so only rounding order differs)."""
    w1_dq, w2_dq = weights.dequantized()
    quantise = (lambda x: (x, None)) if weight_only else (lambda x: quantize_rows_reference(x, weights.scaling))
    act = gemm1_reference(*quantise(hidden), w1_dq, topk_ids).to(hidden.dtype)
    act_q, act_s = quantise(act)
    top_k = topk_ids.shape[1]
    rows = fm.fused_moe_gemm_reference(act_q.float() if act_s is None else dequantize_rows(act_q, act_s), w2_dq,
                                       topk_ids, 1)
    return (rows.view(hidden.shape[0], top_k, -1) * topk_weights.float()[:, :, None]).sum(dim=1)
