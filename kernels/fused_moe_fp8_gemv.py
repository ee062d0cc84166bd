"""Decode-time fp8 MoE: the layer's two GEMMs as weight-only GEMVs over (token, expert) pairs (issue 16).

At one token the tiled fp8 GEMM1 lost to the engine's bf16 kernel (RESULTS 40-41: Qwen3-MoE 7.6-8.3 us
against 6.8 on the H100): each expert sees one row, padded to a 16-row MMA tile, the routing is sorted and
padded by two align launches first, and w8a8 adds an activation quantiser. Here no tile is padded and
nothing is aligned: a GEMM1 program takes one pair (token t, expert e) and BLOCK_ROWS interleaved rows of
w1 (gate j, up j, ...), multiplies the fp8 weights, widened to float32 in registers, by t's 16-bit hidden
state on the CUDA cores, scales the sums (per weight row, or per 128 x 128 block and 128-column step) and
writes silu(gate) * up. A GEMM2 program takes one token and BLOCK_ROWS rows of w2 of all the token's top_k
experts at once, adding the weighted products in registers: the top-k sum is fused without atomics, without
zeroing an output and without a cast kernel. The weights are read once per pair: right while pairs seldom
share an expert (a few tokens); `benchmarks/moe_fp8_gemv.py` measured where it beats the tiled kernels.

Weights are `kernels.fused_moe_fp8.Fp8Weights` (w1 interleaved, scales in w1's own row order), imported here
so that `advisor ceiling|suggest kernels/fused_moe_fp8_gemv.py --call "gemv_gemm1(..., Fp8Weights(...), ...)"`
can build them (the call's `f8` helper is the fp8 dtype, which hides this module's `f8`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ceilings.errors import AdvisorError
from ceilings.launch import Config
from kernels import fused_moe_fp8 as f8
from kernels.fused_moe_fp8 import Fp8Weights

# A program's tile in the engines' config terms: one pair (BLOCK_SIZE_M 1) x BLOCK_SIZE_N weight rows
# (GEMM1: interleaved rows, BLOCK_SIZE_N / 2 outputs) x BLOCK_SIZE_K columns per step; GROUP_SIZE_M 1
# (nothing to group). Block scales need BLOCK_SIZE_K a multiple of their 128-column group.
DEFAULT_CONFIG = Config({"BLOCK_SIZE_M": 1, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 512, "GROUP_SIZE_M": 1},
                        num_warps=4, num_stages=1)


@triton.jit
def _dot_rows(a_ptrs, w_ptrs, s_ptrs, K, a_ok, w_ok, SLOTS: tl.constexpr, BLOCK_ROWS: tl.constexpr,
              BLOCK_K: tl.constexpr, BLOCK_SCALED: tl.constexpr, EVEN_K: tl.constexpr):
    # [SLOTS, BLOCK_ROWS] float32: sum_k w[s, r, k] * a[s, k], one [SLOTS, BLOCK_ROWS, BLOCK_K] tile per step
    # (a loop over the slots would wait for DRAM once per slot: 9 us for Qwen3-MoE's one token with a cold L2,
    # against 1 us of bytes). a_ptrs [SLOTS] and w_ptrs [SLOTS, BLOCK_ROWS] point at the rows' first column;
    # s_ptrs [SLOTS, BLOCK_ROWS] at each row's scales: block scales applied per 128-column group on the way,
    # a row's one scale on the sum.
    GROUPS: tl.constexpr = BLOCK_K // 128 if BLOCK_SCALED else 1
    offs_k = tl.arange(0, BLOCK_K)
    sums = tl.zeros((SLOTS, BLOCK_ROWS), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs[:, None] + offs_k[None, :], mask=a_ok[:, None], other=0.0)
            w = tl.load(w_ptrs[:, :, None] + offs_k[None, None, :], mask=w_ok[:, :, None], other=0.0)
        else:
            in_k = offs_k < K - k * BLOCK_K
            a = tl.load(a_ptrs[:, None] + offs_k[None, :], mask=a_ok[:, None] & in_k[None, :], other=0.0)
            w = tl.load(w_ptrs[:, :, None] + offs_k[None, None, :], mask=w_ok[:, :, None] & in_k[None, None, :],
                        other=0.0)
        prod = w.to(tl.float32) * a.to(tl.float32)[:, None, :]
        if BLOCK_SCALED:
            groups = (k * BLOCK_K) // 128 + tl.arange(0, GROUPS)
            s = tl.load(s_ptrs[:, :, None] + groups[None, None, :],
                        mask=w_ok[:, :, None] & (groups[None, None, :] * 128 < K), other=0.0)
            sums += tl.sum(tl.sum(tl.reshape(prod, (SLOTS, BLOCK_ROWS, GROUPS, 128)), axis=3) * s, axis=2)
        else:
            sums += tl.sum(prod, axis=2)
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    if not BLOCK_SCALED:
        sums = sums * tl.load(s_ptrs, mask=w_ok, other=0.0)
    return sums


@triton.jit
def gemv_gate_up_kernel(a_ptr, w_ptr, w_scale_ptr, c_ptr, topk_ids_ptr, inter, K, top_k,
                        stride_am, stride_we, stride_wn, stride_wse, stride_wsn, stride_cm,
                        BLOCK_ROWS: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_SCALED: tl.constexpr,
                        EVEN_K: tl.constexpr):
    # Program (row block, pair): interleaved rows 2j + u of w1[expert] against hidden[token], one slot.
    pair = tl.program_id(1)
    expert = tl.load(topk_ids_ptr + pair).to(tl.int64)
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    rows_ok = rows < 2 * inter
    ROW_GROUP: tl.constexpr = 128 if BLOCK_SCALED else 1
    # The scale of interleaved row 2j + u is that of row j + u * inter of w1 as it comes.
    s_ptrs = w_scale_ptr + expert * stride_wse + ((rows // 2 + (rows % 2) * inter) // ROW_GROUP) * stride_wsn
    w_ptrs = w_ptr + expert * stride_we + rows.to(tl.int64) * stride_wn
    one = tl.zeros((1,), dtype=tl.int64)
    a_ptrs = a_ptr + (pair // top_k).to(tl.int64) * stride_am + one
    sums = _dot_rows(a_ptrs, w_ptrs[None, :], s_ptrs[None, :], K, one == 0, rows_ok[None, :], 1, BLOCK_ROWS,
                     BLOCK_K, BLOCK_SCALED, EVEN_K)
    gate, up = tl.split(tl.reshape(sums, (BLOCK_ROWS // 2, 2)))
    out = gate / (1.0 + tl.exp(-gate)) * up
    cols = tl.program_id(0) * (BLOCK_ROWS // 2) + tl.arange(0, BLOCK_ROWS // 2)
    tl.store(c_ptr + pair.to(tl.int64) * stride_cm + cols, out.to(c_ptr.dtype.element_ty), mask=cols < inter)


@triton.jit
def gemv_down_sum_kernel(a_ptr, w_ptr, w_scale_ptr, out_ptr, topk_ids_ptr, topk_weights_ptr, H, K,
                         stride_am, stride_we, stride_wn, stride_wse, stride_wsn, stride_om,
                         TOP_K: tl.constexpr, KP: tl.constexpr, BLOCK_ROWS: tl.constexpr,
                         BLOCK_K: tl.constexpr, BLOCK_SCALED: tl.constexpr, EVEN_K: tl.constexpr):
    # Program (row block, token): BLOCK_ROWS rows of w2 for all the token's top_k experts at once (one slot
    # each), weighted and summed in registers.
    token = tl.program_id(1)
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    rows_ok = rows < H
    slot = tl.arange(0, KP)  # KP: TOP_K rounded up to a power of two
    slot_ok = slot < TOP_K
    pair = token * TOP_K + slot
    expert = tl.load(topk_ids_ptr + pair, mask=slot_ok, other=0).to(tl.int64)
    ok = slot_ok[:, None] & rows_ok[None, :]
    ROW_GROUP: tl.constexpr = 128 if BLOCK_SCALED else 1
    s_ptrs = w_scale_ptr + expert[:, None] * stride_wse + (rows // ROW_GROUP)[None, :] * stride_wsn
    w_ptrs = w_ptr + expert[:, None] * stride_we + rows[None, :].to(tl.int64) * stride_wn
    a_ptrs = a_ptr + pair.to(tl.int64) * stride_am
    sums = _dot_rows(a_ptrs, w_ptrs, s_ptrs, K, slot_ok, ok, KP, BLOCK_ROWS, BLOCK_K, BLOCK_SCALED, EVEN_K)
    router = tl.load(topk_weights_ptr + pair, mask=slot_ok, other=0.0)
    total = tl.sum(sums * router[:, None], axis=0)
    tl.store(out_ptr + token.to(tl.int64) * stride_om + rows, total.to(out_ptr.dtype.element_ty), mask=rows_ok)


def check_config(config: Config, scaling: str) -> None:
    if config.get("BLOCK_SIZE_M", 1) != 1:
        raise AdvisorError(f"a GEMV config has BLOCK_SIZE_M=1 (one pair per program); got {config.label()}")
    rows, bk = config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"]
    if rows < 2 or rows & (rows - 1) or bk < 16 or bk & (bk - 1):
        raise AdvisorError(f"GEMV tile {rows} x {bk}: BLOCK_SIZE_N (>= 2) and BLOCK_SIZE_K (>= 16) must be powers "
                           "of two")
    if f8._groups(scaling)[1] and bk % f8.SCALE_BLOCK:
        raise AdvisorError(f"BLOCK_SIZE_K={bk} does not fit {f8.SCALE_BLOCK}-column block scales; use a multiple "
                           f"of {f8.SCALE_BLOCK} (128, 256, 512, ...)")


def _tile(config: Config, k: int) -> dict:
    return {"BLOCK_ROWS": config["BLOCK_SIZE_N"], "BLOCK_K": config["BLOCK_SIZE_K"],
            "EVEN_K": k % config["BLOCK_SIZE_K"] == 0, "num_warps": config.num_warps,
            "num_stages": config.num_stages}


def _check_inputs(hidden, weights: Fp8Weights, topk_ids):
    if hidden.dtype not in (torch.bfloat16, torch.float16):
        raise AdvisorError(f"the fp8 GEMV takes bf16 or fp16 hidden states; got {hidden.dtype} (cast them)")
    if hidden.dim() != 2 or hidden.shape[1] != weights.hidden:
        raise AdvisorError(f"hidden is {tuple(hidden.shape)}; the weights take [M, {weights.hidden}]")
    if topk_ids.dim() != 2 or topk_ids.shape[0] != hidden.shape[0]:
        raise AdvisorError(f"topk_ids is {tuple(topk_ids.shape)}; expected [M={hidden.shape[0]}, top_k]")


def gemv_gemm1(hidden, weights: Fp8Weights, topk_ids, config: Config = DEFAULT_CONFIG) -> torch.Tensor:
    """[M * top_k, I] in hidden's dtype: silu(gate) * up of each (token, expert) pair, pair t * top_k + k."""
    _check_inputs(hidden, weights, topk_ids)
    check_config(config, weights.scaling)
    hidden = hidden if hidden.stride(1) == 1 else hidden.contiguous()
    ids = topk_ids.to(torch.int32).contiguous()
    pairs, inter, k = ids.numel(), weights.two_i // 2, weights.hidden
    w, s = weights.w1_il, weights.w1_scales
    act = torch.empty((pairs, inter), dtype=hidden.dtype, device=hidden.device)
    grid = (triton.cdiv(2 * inter, config["BLOCK_SIZE_N"]), pairs)
    gemv_gate_up_kernel[grid](hidden, w, s, act, ids, inter, k, ids.shape[1], hidden.stride(0), w.stride(0),
                              w.stride(1), s.stride(0), s.stride(1), act.stride(0),
                              BLOCK_SCALED=weights.scaling == "block", **_tile(config, k))
    return act


def gemv_gemm2(act, weights: Fp8Weights, topk_weights, topk_ids, out_dtype=None,
               config: Config = DEFAULT_CONFIG) -> torch.Tensor:
    """[M, H]: sum over k of topk_weights[t, k] * act[t * top_k + k] @ w2[topk_ids[t, k]]^T, in out_dtype
    (act's by default), accumulated in float32."""
    check_config(config, weights.scaling)
    ids = topk_ids.to(torch.int32).contiguous()
    m, top_k = ids.shape
    inter = weights.two_i // 2
    if act.dim() != 2 or tuple(act.shape) != (m * top_k, inter):
        raise AdvisorError(f"act is {tuple(act.shape)}; GEMM2 takes [M * top_k, I] = [{m * top_k}, {inter}]")
    act = act if act.stride(1) == 1 else act.contiguous()
    router = topk_weights.to(torch.float32).contiguous()
    w, s = weights.w2, weights.w2_scales
    out = torch.empty((m, weights.hidden), dtype=out_dtype or act.dtype, device=act.device)
    grid = (triton.cdiv(weights.hidden, config["BLOCK_SIZE_N"]), m)
    gemv_down_sum_kernel[grid](act, w, s, out, ids, router, weights.hidden, inter, act.stride(0),
                               w.stride(0), w.stride(1), s.stride(0), s.stride(1), out.stride(0), TOP_K=top_k,
                               KP=triton.next_power_of_2(top_k),
                               BLOCK_SCALED=weights.scaling == "block", **_tile(config, inter))
    return out


def fused_moe_fp8_gemv(hidden, weights: Fp8Weights, topk_weights, topk_ids, config: Config = DEFAULT_CONFIG,
                       config2: Config | None = None) -> torch.Tensor:
    """The weight-only fp8 layer in two launches (no align, no quantiser, no sum kernel): [M, H] in hidden's
    dtype; `kernels.fused_moe_fp8.layer_reference(..., weight_only=True)` is its float32 reference."""
    if topk_weights.shape != topk_ids.shape:
        raise AdvisorError(f"topk_weights {tuple(topk_weights.shape)} and topk_ids {tuple(topk_ids.shape)} differ")
    act = gemv_gemm1(hidden, weights, topk_ids, config)
    return gemv_gemm2(act, weights, topk_weights, topk_ids, hidden.dtype, config2 or config)
