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
tiles); GATED (GEMM1 on interleaved w1, SiLU-and-mul in the epilogue, bf16 out) or GEMM2 with the router
weight fused, in two forms as the bf16 layer's: ACCUMULATE (the top-k sum fused by float32 atomics into a
zeroed [M, H]) or stores of the weighted rows [M * top_k, H] in bf16 summed by one torch sum after it.
Weight scales stay in the layout of w1 as it comes (gate rows, then up rows), so a checkpoint's scales are
used as they are; the kernel maps an interleaved row 2j + u back to row j + u * I to find its scale.

Weight-only (w8a16): A stays bf16/fp16 (a_scales None) and the fp8 weights widen to A's type in registers
before a 16-bit MMA: no activation quantiser. The layer (`fused_moe_fp8`) runs one of three forms (FORMS):
w8a8, w8a16 on these tiles, or the decode-time GEMVs of `kernels.fused_moe_fp8_gemv`; `choose_form` picks
from the tuned files.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch
import triton
import triton.language as tl

from ceilings.errors import AdvisorError
from ceilings.launch import Config
from kernels import fused_moe as fm
from kernels import fused_moe_fused as ff

# The quantisers live in kernels.fp8_quant; their names are this module's too (the layer calls them from here,
# so a test or a dry run can put the torch quantiser in the Triton one's place).
from kernels.fp8_quant import (  # noqa: E402, F401
    FP8,
    FP8_MAX,
    SCALE_BLOCK,
    SCALINGS,
    _groups,
    dequantize_rows,
    dequantize_weights,
    quantize_rows,
    quantize_rows_kernel,
    quantize_rows_reference,
    quantize_weights,
)


def interleave_fp8(w_q: torch.Tensor) -> torch.Tensor:
    """`kernels.fused_moe_fused.interleave_gate_up` on fp8 weights (moved as bytes); scales are not moved."""
    return ff.interleave_gate_up(w_q.view(torch.uint8)).view(FP8)


def deinterleave_fp8(w_il: torch.Tensor) -> torch.Tensor:
    """`interleave_fp8` undone: [E, 2I, H] with gate rows, then up rows, as w1 comes."""
    e, two_i, h = w_il.shape
    return w_il.view(torch.uint8).view(e, two_i // 2, 2, h).transpose(1, 2).reshape(e, two_i, h).view(FP8)


@triton.jit
def _tile_fp8(a_ptr, a_scale_ptr, b_ptr, b_desc, b_scale_ptr, c_ptr, topk_weights_ptr, sorted_token_ids_ptr,
              expert_ids_ptr, pid_m, pid_n, N, K, num_valid_tokens, a_div, c_div,
              stride_am, stride_asm, stride_be, stride_bn, stride_bse, stride_bsn, stride_cm,
              BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
              GATED: tl.constexpr, ACCUMULATE: tl.constexpr, EVEN_K: tl.constexpr, B_TMA: tl.constexpr,
              BLOCK_SCALED: tl.constexpr, A_FP8: tl.constexpr, compute_type: tl.constexpr,
              TILE_SCALES: tl.constexpr = False):
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
    if BLOCK_SCALED and TILE_SCALES:  # per-row (channel) scales have no per-step scale: the flag means nothing
        # The tile's weight rows lie in one 128-row scale group (GATED: one for its gate half, one for its up
        # half; `tile_scales_fit` says when), so a step's scale is one number per A row: the step's product is
        # scaled by a row vector, one FFMA an element, where per-column scales cost an FMUL more each (their
        # outer product with A's scales) on the FMA pipe the MMA's promotion already loads.
        first = pid_n * BN_OUT
        gate_scales = b_scale_ptr + expert * stride_bse + (first // 128) * stride_bsn
        up_scales = b_scale_ptr + expert * stride_bse + ((first + N) // 128) * stride_bsn
        acc_gate = tl.zeros((BLOCK_SIZE_M, BN_OUT), dtype=tl.float32)
        acc_up = tl.zeros((BLOCK_SIZE_M, BN_OUT), dtype=tl.float32)
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
        if BLOCK_SCALED and TILE_SCALES:
            group = (k * BLOCK_SIZE_K) // 128
            step = tl.dot(a, b)
            # the weights' scale of the step (a number), times A's row scales where A is fp8 (a column)
            gate_s = tl.load(gate_scales + group)
            up_s = tl.load(up_scales + group)
            if A_FP8:
                a_s = tl.load(a_scale_ptrs + group, mask=token_mask, other=0.0)
                gate_s = (a_s * gate_s)[:, None]
                up_s = (a_s * up_s)[:, None]
            if GATED:
                gate, up = tl.split(tl.reshape(step, (BLOCK_SIZE_M, BN_OUT, 2)))
                acc_gate += gate * gate_s
                acc_up += up * up_s
            else:
                acc += step * gate_s
        elif BLOCK_SCALED:
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

    if GATED and BLOCK_SCALED and TILE_SCALES:
        out = acc_gate / (1.0 + tl.exp(-acc_gate)) * acc_up
    elif GATED:
        gate, up = tl.split(tl.reshape(acc, (BLOCK_SIZE_M, BN_OUT, 2)))
        out = gate / (1.0 + tl.exp(-gate)) * up
    else:
        out = acc
    offs_cn = pid_n * BN_OUT + tl.arange(0, BN_OUT)
    c_ptrs = c_ptr + c_row[:, None] * stride_cm + offs_cn[None, :]
    c_mask = token_mask[:, None] & (offs_cn[None, :] < N)
    if not GATED:  # GEMM2: the router weight, whether its rows are added (atomics) or stored
        weight = tl.load(topk_weights_ptr + pair, mask=token_mask, other=0.0)
        out = out * weight[:, None]
    if ACCUMULATE:
        tl.atomic_add(c_ptrs, out, mask=c_mask, sem="relaxed")
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
    compute_type: tl.constexpr, TILE_SCALES: tl.constexpr = False,
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
                      A_FP8, compute_type, TILE_SCALES)
    else:
        pid_m, pid_n = ff._tile_coords(tl.program_id(0), tl.cdiv(EM, BLOCK_SIZE_M), num_pid_n, GROUP_SIZE_M)
        if pid_m * BLOCK_SIZE_M < num_tokens_post_padded:
            _tile_fp8(a_ptr, a_scale_ptr, b_ptr, b_desc, b_scale_ptr, c_ptr, topk_weights_ptr, sorted_token_ids_ptr,
                      expert_ids_ptr, pid_m, pid_n, N, K, num_valid_tokens, a_div, c_div,
                      stride_am, stride_asm, stride_be, stride_bn, stride_bse, stride_bsn, stride_cm,
                      BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GATED, ACCUMULATE, EVEN_K, B_TMA, BLOCK_SCALED,
                      A_FP8, compute_type, TILE_SCALES)


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


# Tile scales pay where Triton runs the tile as warpgroup MMAs (64 rows or more on Hopper): there the per-column
# form's extra FMUL an element competes with the MMAs' promotion; 16-row tiles (few tokens) are bound by memory
# and latency, and the form's scalar scale loads cost 0-12% there (H100, every shipped count: RESULTS 47).
TILE_SCALES_MIN_M = 64


def tile_scales_fit(config: Config, gated: bool, n_out: int, scaling: str) -> bool:
    """Whether every tile's weight rows lie in one 128-row block-scale group (GATED: its gate rows in one and its
    up rows in one): its BN_OUT output columns divide 128 and the output width (tiles start at multiples of
    BN_OUT, the up half N rows further, and no tile wraps past the last row)."""
    bn_out = config["BLOCK_SIZE_N"] // (2 if gated else 1)
    return scaling == "block" and bn_out > 0 and SCALE_BLOCK % bn_out == 0 and n_out % bn_out == 0


def tile_scales_default(config: Config, gated: bool, n_out: int, scaling: str) -> bool:
    """Whether a launch takes tile scales when not told: where they fit and the tile has TILE_SCALES_MIN_M rows."""
    return tile_scales_fit(config, gated, n_out, scaling) and config["BLOCK_SIZE_M"] >= TILE_SCALES_MIN_M


def invoke_fp8_gemm(a_q, a_scales, w_q, w_scales, c, topk_weights, sorted_token_ids, expert_ids,
                    num_tokens_post_padded, top_k: int, config: Config, gated: bool, persistent: bool = False,
                    b_tma: bool | None = None, scaling: str = "block", sum_topk: bool = True,
                    tile_scales: bool | None = None):
    """One GEMM of the layer in fp8, its operands quantised by `quantize_rows` / `quantize_weights` with
    `scaling` ("block" or "channel"). Weight-only (w8a16): a_q is the bf16/fp16 activation itself and
    a_scales None; the weights widen to 16 bits in registers and the MMA runs in 16 bits.

    gated (GEMM1): a_q [M, K] hidden, w_q = interleave_fp8(w1_q) [E, 2I, K] with w1's scales, c [M * top_k, I]
    bf16/fp16 = silu(gate) * up. Else (GEMM2): a_q [M * top_k, K] activation, w_q [E, H, K]; sum_topk: c [M, H]
    float32 zeroed by the caller, c[t] += weight[t, k] * a[t * top_k + k] @ w[expert]^T; else c [M * top_k, H]
    bf16/fp16, c[p] = weight[p] * a[p] @ w[expert]^T for each (token, expert) pair p, summed by the caller.
    tile_scales: scale each K step by one number per A row, which needs the tile's weight rows to share a scale
    group (`tile_scales_fit`); None: `tile_scales_default`.
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
    accumulate = not gated and sum_topk
    if c.shape[-1] != n_out or (accumulate and c.dtype != torch.float32):
        raise AdvisorError(f"C is {tuple(c.shape)} {c.dtype}; this GEMM writes {n_out} columns"
                           + (" of float32 (the top-k sum by atomics)" if accumulate else ""))
    if not accumulate and c.dtype not in fm._TL_DTYPES:
        raise AdvisorError(f"{'GEMM1' if gated else 'GEMM2 with sum_topk=False'} writes bf16 or fp16; C is {c.dtype}")
    rows_c = topk_weights.numel() if not accumulate else topk_weights.numel() // max(top_k, 1)
    if c.dim() != 2 or c.shape[0] != rows_c:
        raise AdvisorError(f"C is {tuple(c.shape)}; this GEMM writes [{rows_c}, {n_out}]")
    if b_tma is None:
        b_tma = fm.tma_supported(w_q)
    b_desc = None
    if b_tma:
        b_desc = fm.TensorDescriptor(w_q, [e * rows_b, k], [w_q.stride(1), 1],
                                     [config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"]])
    if tile_scales is None:
        tile_scales = tile_scales_default(config, gated, n_out, scaling)
    elif tile_scales and not tile_scales_fit(config, gated, n_out, scaling):
        raise AdvisorError(f"tile_scales with {config.label()}: the tile's {config['BLOCK_SIZE_N']} weight rows do not "
                           f"share a 128-row scale group ({n_out} output columns); pass tile_scales=None")
    em = sorted_token_ids.shape[0]
    if persistent:
        grid = ff.persistent_grid(em, n_out, config, gated, ff._num_sms(a_q.device))
    else:
        grid = ff.gemm_grid(em, n_out, config, gated)
    fused_moe_fp8_kernel[grid](
        a_q, a_scales, w_q, b_desc, w_scales, c, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
        n_out, k, em, topk_weights.numel(), top_k if gated else 1, top_k if accumulate else 1, grid[0],
        a_q.stride(0), a_scales.stride(0) if a_fp8 else 0, w_q.stride(0), w_q.stride(1), w_scales.stride(0),
        w_scales.stride(1), c.stride(0),
        GATED=gated, ACCUMULATE=accumulate, PERSISTENT=persistent, EVEN_K=k % config["BLOCK_SIZE_K"] == 0,
        B_TMA=b_tma, BLOCK_SCALED=scaling == "block", A_FP8=a_fp8, compute_type=fm._TL_DTYPES.get(c.dtype, tl.bfloat16),
        TILE_SCALES=bool(tile_scales),
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
        return (dequantize_weights(deinterleave_fp8(self.w1_il), self.w1_scales),
                dequantize_weights(self.w2, self.w2_scales))


# The layer's forms: "w8a8" (activations quantised, fp8 MMA), "w8a16" (weight-only: 16-bit activations,
# weights widened in registers, 16-bit MMA) and "gemv" (`kernels.fused_moe_fp8_gemv`: weight-only GEMVs
# per (token, expert) pair, no align, for a few tokens).
FORMS = ("w8a8", "w8a16", "gemv")


def _check_form(form: str) -> None:
    if form not in FORMS:
        raise AdvisorError(f"form={form!r} is not an fp8 layer form; use one of {', '.join(FORMS)}")


# GEMM2's folders by its form, as the bf16 layer's (`kernels.fused_moe_fused.GEMM2_FOLDERS`): the top-k sum fused
# by float32 atomics, or bf16 stores of the weighted rows and a sum after. Their side files time GEMM2 with its
# zeroing and cast, or with its sum, so the two compare.
GEMM2_FOLDERS = {True: "gemm2", False: "gemm2_stores"}
# The stored-rows form replaces the atomics only where its GEMM2 was timed faster by more than one timing's
# noise (4%: RESULTS 21, as advisor.advice.timed_pick.RETIME_WITHIN): within it, the layer timings of RESULTS 42
# went either way (the H200's Mixtral channel layer at M=1024 was 5% slower with a GEMM2 2% faster alone).
FORM_NOISE = 1.04


def config_path(num_experts: int, inter: int, device_name: str, scaling: str, gemm: int, form: str = "w8a8",
                fuse_sum: bool = True) -> Path:
    """Where the tuned fp8 configs of a shape, GPU and form live: `kernels/configs/fp8/<scaling>/[gemv/]`
    (GEMM1) and, for GEMM2, its `gemm2/` folder (the sum by atomics) or `gemm2_stores/` (not fuse_sum), in
    the engines' names and format (`dtype=fp8_w8a8`, or `fp8_w8a16` for the weight-only forms;
    `block_shape=[128,128]` for blocks)."""
    from kernels import moe_configs  # late: moe_configs imports kernels.fused_moe

    return _config_path(moe_configs.SHIPPED_DIR, num_experts, inter, device_name, scaling, gemm, form, fuse_sum)


@functools.lru_cache(maxsize=256)  # a layer call asks for its paths every time; building one took ~10 us
def _config_path(shipped: Path, num_experts: int, inter: int, device_name: str, scaling: str, gemm: int, form: str,
                 fuse_sum: bool) -> Path:
    from kernels import moe_configs

    _check_form(form)
    folder = shipped / "fp8" / scaling / ("gemv" if form == "gemv" else "")
    folder = folder / (GEMM2_FOLDERS[fuse_sum] if gemm == 2 else "")
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
    table = moe_configs.cached_config_file(config_path(num_experts, inter, device_name, scaling, 1, "gemv"))
    if table is not None and m <= max(table.configs):
        return "gemv"
    return "w8a8"


def choose_fuse_sum(m: int, num_experts: int, inter: int, device_name: str | None, scaling: str,
                    form: str = "w8a8") -> bool:
    """Whether the tiled GEMM2 adds its rows into the top-k sum by atomics (True) or stores them for a sum
    after: stores where the tuned files' side files timed GEMM2 with its sum more than FORM_NOISE faster than
    with its atomics, zeroing and cast at the token count nearest M; True where either file or its times are
    missing."""
    from kernels import moe_configs

    if not device_name:
        return True
    faster = moe_configs.faster_form({fused: config_path(num_experts, inter, device_name, scaling, 2, form, fused)
                                      for fused in (True, False)}, m, FORM_NOISE)
    return faster is not False


def layer_configs(m: int, num_experts: int, inter: int, top_k: int, device_name: str | None, scaling: str,
                  form: str = "w8a8", fuse_sum: bool = True) -> tuple[tuple[Config, str], tuple[Config, str]]:
    """(config, where it came from) of the fp8 GEMM1 and GEMM2 of a form (GEMM2's: its fuse_sum form) for M
    tokens: the tuned files for this GPU, else the default: the GEMV's
    (`kernels.fused_moe_fp8_gemv.DEFAULT_CONFIG`), or the bf16 kernel's rule (its BLOCK_SIZE_K, 64 or 128,
    divides the 128-column group)."""
    from kernels import moe_configs
    from kernels.fused_moe_fp8_gemv import DEFAULT_CONFIG

    found = []
    for gemm in (1, 2):
        path = config_path(num_experts, inter, device_name, scaling, gemm, form, fuse_sum) if device_name else None
        table = moe_configs.cached_config_file(path) if path is not None else None
        if table is not None:
            found.append((table.lookup(m), str(path)))
        elif form == "gemv":
            found.append((DEFAULT_CONFIG, "default GEMV tile"))
        else:
            found.append((moe_configs.default_config(m, num_experts, top_k), "default rule"))
    return found[0], found[1]


def fused_moe_fp8(hidden, weights: Fp8Weights, topk_weights, topk_ids, config: Config | None = None,
                  config2: Config | None = None, persistent: bool = False, b_tma: bool | None = None,
                  form: str | None = None, fuse_sum: bool | None = None,
                  tile_scales: bool | None = None) -> torch.Tensor:
    """The layer in fp8, [M, H] in hidden's dtype. form "w8a8": quantise hidden, align, GEMM1 (SiLU-and-mul
    fused) -> 16-bit activation, quantise it, GEMM2 with the router weight fused and (fuse_sum) the top-k sum
    by float32 atomics, cast; or (not fuse_sum) weighted rows stored in hidden's dtype and one torch sum.
    "w8a16": the same with no quantiser (16-bit activations into both GEMMs). "gemv": the two GEMVs of
    `kernels.fused_moe_fp8_gemv` (no align, no fuse_sum). form None: `choose_form` for this GPU; fuse_sum
    None: `choose_fuse_sum`. config None: `layer_configs` for this GPU, form and GEMM2 form; config2 None: the
    tuned GEMM2 config when config is None too, else config. tile_scales: as `invoke_fp8_gemm`'s, both GEMMs."""
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
    _check_form(form)
    if form != "w8a8" and hidden.dtype not in (torch.bfloat16, torch.float16):
        raise AdvisorError(f"the {form} form takes bf16 or fp16 hidden states; got {hidden.dtype} (cast them, "
                           "or pass form='w8a8')")
    if fuse_sum is None:
        fuse_sum = form == "gemv" or choose_fuse_sum(m, weights.num_experts, inter, device_name, weights.scaling,
                                                     form)
    if config is None:
        (config, _), (tuned2, _) = layer_configs(m, weights.num_experts, inter, top_k, device_name,
                                                 weights.scaling, form, fuse_sum)
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
                    config=config, gated=True, persistent=persistent, b_tma=b_tma, scaling=weights.scaling,
                    tile_scales=tile_scales)
    act_q, act_s = (act, None) if weight_only else quantize_rows(act, weights.scaling)
    if not fuse_sum:
        rows = torch.empty((m * top_k, h), dtype=hidden.dtype, device=hidden.device)
        invoke_fp8_gemm(act_q, act_s, weights.w2, weights.w2_scales, rows, topk_weights, *aligned[-1], top_k=top_k,
                        config=config2, gated=False, persistent=persistent, b_tma=b_tma, scaling=weights.scaling,
                        sum_topk=False, tile_scales=tile_scales)
        # One kernel: torch sums bf16 in float32 and rounds once (as the bf16 layer's unfused GEMM2 form).
        return rows.view(m, top_k, h).sum(dim=1)
    out = torch.zeros((m, h), dtype=torch.float32, device=hidden.device)
    invoke_fp8_gemm(act_q, act_s, weights.w2, weights.w2_scales, out, topk_weights, *aligned[-1], top_k=top_k,
                    config=config2, gated=False, persistent=persistent, b_tma=b_tma, scaling=weights.scaling,
                    tile_scales=tile_scales)
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
