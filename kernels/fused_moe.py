"""The shipped target: a fused Mixture-of-Experts layer in the serving-engine design (ANCHORS section 2).

One layer is align -> GEMM1 (w1: [E, 2I, H]) -> SiLU-and-mul -> GEMM2 (w2: [E, H, I], router weight
applied) -> sum over the top-k experts of each token.

`moe_align_block_size` sorts the (token, k) pairs by expert and pads each expert's run to a multiple
of BLOCK_SIZE_M, so that every M block of the GEMM belongs to one expert. The GEMM kernel gathers
the rows of its A operand through the sorted ids and multiplies them by that expert's weights.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

try:  # host-side TMA descriptors: Triton 3.4 and later
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older Triton
    TensorDescriptor = None

from ceilings.errors import AdvisorError
from ceilings.launch import Config, expand_space

# The tuners' search space (ANCHORS section 2): 5 x 4 x 3 x 4 x 2 x 4 = 1,920 configs.
CONFIG_SPACE: dict[str, tuple[int, ...]] = {
    "BLOCK_SIZE_M": (16, 32, 64, 128, 256),
    "BLOCK_SIZE_N": (32, 64, 128, 256),
    "BLOCK_SIZE_K": (64, 128, 256),
    "GROUP_SIZE_M": (1, 16, 32, 64),
    "num_warps": (4, 8),
    "num_stages": (2, 3, 4, 5),
}

_TL_DTYPES = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}


def config_space() -> list[Config]:
    """Every config of CONFIG_SPACE, in a fixed order."""
    return expand_space(CONFIG_SPACE)


def resource_precheck(config: Config, max_shared_bytes: int, dtype_bytes: int = 2,
                      max_regs_per_thread: int = 255) -> str | None:
    """Why `config` cannot run well on a GPU with these limits, from the tile sizes alone, or None.

    Only certain failures are reported: the fp32 accumulator alone overflowing the per-thread
    register limit (it would spill on every K step), or the A and B tiles of even a two-deep
    software pipeline overflowing shared memory. Everything else is left to the compiler.
    """
    bm, bn, bk = config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"]
    acc_regs = bm * bn // (32 * config.num_warps)
    if acc_regs > max_regs_per_thread:
        return (f"accumulator needs {acc_regs} registers per thread, over the limit of {max_regs_per_thread}; "
                "use smaller tiles or more warps")
    stage_bytes = (bm * bk + bk * bn) * dtype_bytes
    buffers = max(config.num_stages - 1, 1)
    if stage_bytes * buffers > max_shared_bytes:
        return (f"{buffers} pipeline buffers of {stage_bytes} B need {stage_bytes * buffers} B of shared memory, "
                f"over {max_shared_bytes} B; use fewer stages or smaller tiles")
    return None


# ------------------------------------------------------------------------------------------------
# Align: token ids sorted by expert, padded per expert to the M block.
# ------------------------------------------------------------------------------------------------
def max_padded_tokens(num_pairs: int, num_experts: int, block_m: int) -> int:
    """An upper bound on the padded length, known on the host without reading the routing.

    Each expert that receives c pairs pads to at most c + block_m - 1 rows, and at most
    min(E, pairs) experts receive any.
    """
    return num_pairs + min(num_experts, num_pairs) * (block_m - 1)


def moe_align_block_size(topk_ids: torch.Tensor, block_m: int, num_experts: int):
    """Sort (token, k) pairs by expert and pad each expert's run to a multiple of `block_m`.

    topk_ids: [M, top_k] integer expert ids in [0, num_experts).
    Returns (sorted_token_ids [P] int32, expert_ids [P / block_m] int32, num_tokens_post_padded [1] int32)
    where P = max_padded_tokens(...) rounded up to block_m. sorted_token_ids holds the flat pair index
    token * top_k + k, or the sentinel M * top_k in padding rows. Only device-side ops with sizes known
    on the host: no host synchronisation, so it can be captured in a CUDA graph.
    """
    if topk_ids.dim() != 2:
        raise AdvisorError(f"topk_ids has shape {tuple(topk_ids.shape)}; expected [tokens, top_k]")
    device = topk_ids.device
    flat = topk_ids.reshape(-1).to(torch.int64)
    pairs = flat.numel()
    padded_len = triton.cdiv(max(max_padded_tokens(pairs, num_experts, block_m), 1), block_m) * block_m

    counts = torch.zeros(num_experts, dtype=torch.int64, device=device)
    counts.scatter_add_(0, flat, torch.ones_like(flat))
    padded = (counts + block_m - 1) // block_m * block_m
    padded_end = torch.cumsum(padded, 0)
    padded_start = padded_end - padded
    count_start = torch.cumsum(counts, 0) - counts

    # A stable sort keeps pairs of one expert in token order, so each pair's rank within its
    # expert is its sorted position minus the expert's first sorted position.
    order = torch.sort(flat, stable=True).indices
    sorted_experts = flat[order]
    rank = torch.arange(pairs, device=device) - count_start[sorted_experts]
    dest = padded_start[sorted_experts] + rank

    sorted_token_ids = torch.full((padded_len,), pairs, dtype=torch.int32, device=device)
    sorted_token_ids.scatter_(0, dest, order.to(torch.int32))
    block_starts = torch.arange(0, padded_len, block_m, device=device)
    expert_ids = torch.searchsorted(padded_end, block_starts, right=True)
    expert_ids = expert_ids.clamp_(max=num_experts - 1).to(torch.int32)
    num_tokens_post_padded = padded_end[-1:].to(torch.int32)
    return sorted_token_ids, expert_ids, num_tokens_post_padded


# ------------------------------------------------------------------------------------------------
# The GEMM kernel.
# ------------------------------------------------------------------------------------------------
@triton.jit(do_not_specialize=["EM", "num_valid_tokens"])
def fused_moe_kernel(
    # Pointers: A rows are gathered through sorted_token_ids; B is [E, N, K]; C is [pairs, N].
    # b_desc is a TMA descriptor of B viewed as [E * N, K] when B_TMA, else unused (None).
    a_ptr, b_ptr, b_desc, c_ptr, topk_weights_ptr,
    sorted_token_ids_ptr, expert_ids_ptr, num_tokens_post_padded_ptr,
    # Sizes: EM = length of sorted_token_ids; num_valid_tokens = M * top_k (the sentinel value).
    N, K, EM, num_valid_tokens, top_k,
    # Strides, in elements.
    stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
    # Meta-parameters.
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    MUL_ROUTED_WEIGHT: tl.constexpr, EVEN_K: tl.constexpr, B_TMA: tl.constexpr, compute_type: tl.constexpr,
):
    # Grouped ordering: GROUP_SIZE_M consecutive M blocks sweep the N blocks together, so the
    # B tiles they share are read from L2 rather than DRAM.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(EM, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # The grid is sized for the worst routing; blocks past the real padded count have no work.
    num_tokens_post_padded = tl.load(num_tokens_post_padded_ptr)
    if pid_m * BLOCK_SIZE_M >= num_tokens_post_padded:
        return

    offs_m = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    pair = tl.load(sorted_token_ids_ptr + offs_m)
    token_mask = pair < num_valid_tokens
    # Divide in 32 bits (pair ids are below 2^31); a 64-bit division is a called software routine.
    # Offsets into A and C go 64-bit, since rows x strides can pass 2^31.
    a_row = (pair // top_k).to(tl.int64)
    offs_token = pair.to(tl.int64)
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)

    # Columns past N wrap to valid ones so B loads need no mask; those columns are never stored.
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + a_row[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + expert * stride_be + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    # Row of this tile's first weight in the [E * N, K] view. Rows past N belong to the next expert
    # (or lie past the end, which TMA fills with zeros); their columns are never stored.
    b_row = (expert * N + pid_n * BLOCK_SIZE_N).to(tl.int32)

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        # No K mask when BLOCK_SIZE_K divides K: unpredicated loads pipeline better.
        if EVEN_K:
            a = tl.load(a_ptrs, mask=token_mask[:, None], other=0.0)
        else:
            a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < K - k * BLOCK_SIZE_K), other=0.0)
        if B_TMA:
            # The weight tile comes by the bulk tensor copy engine: no per-element addresses.
            b = b_desc.load([b_row, k * BLOCK_SIZE_K]).T
        elif EVEN_K:
            b = tl.load(b_ptrs)
        else:
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    if MUL_ROUTED_WEIGHT:
        weight = tl.load(topk_weights_ptr + offs_token, mask=token_mask, other=0.0)
        acc = acc * weight[:, None]

    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + offs_token[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(compute_type), mask=token_mask[:, None] & (offs_cn[None, :] < N))


def gemm_grid(em: int, n: int, config: Config) -> tuple[int]:
    return (triton.cdiv(em, config["BLOCK_SIZE_M"]) * triton.cdiv(n, config["BLOCK_SIZE_N"]),)


def tma_supported(w: torch.Tensor) -> bool:
    """Whether B can be read through a TMA descriptor: a Hopper-or-newer GPU, and W [E, N, K] laid out
    so that [E * N, K] is a view with 16-byte aligned rows (the copy engine's requirements)."""
    if TensorDescriptor is None or not w.is_cuda or torch.cuda.get_device_capability(w.device)[0] < 9:
        return False
    return (w.stride(2) == 1 and w.stride(0) == w.shape[1] * w.stride(1)
            and (w.stride(1) * w.element_size()) % 16 == 0 and w.data_ptr() % 16 == 0)


def weight_descriptor(w: torch.Tensor, config: Config):
    e, n, k = w.shape
    return TensorDescriptor(w, [e * n, k], [w.stride(1), 1], [config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"]])


def invoke_fused_moe_gemm(a, w, c, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
                          top_k: int, mul_routed_weight: bool, config: Config, b_tma: bool | None = None):
    """C[pair, :] = A[pair // top_k] @ W[expert(pair)]^T (times the pair's router weight if asked).

    a: [rows, K]; w: [E, N, K]; c: [M * top_k, N] or [M, top_k, N] contiguous; topk_weights: [M, top_k].
    b_tma: read W through a TMA descriptor; None chooses it wherever `tma_supported(w)`.
    """
    if a.dtype not in _TL_DTYPES or w.dtype != a.dtype or c.dtype != a.dtype:
        raise AdvisorError(f"fused MoE GEMM takes bf16 or fp16 tensors of one dtype; got A {a.dtype}, "
                           f"W {w.dtype}, C {c.dtype}")
    if a.shape[1] != w.shape[2]:
        raise AdvisorError(f"A has K={a.shape[1]} but W is {tuple(w.shape)} ([E, N, K]); hidden sizes differ")
    c2 = c.view(-1, c.shape[-1])
    n, k = w.shape[1], w.shape[2]
    if c2.shape[1] != n:
        raise AdvisorError(f"C has {c2.shape[1]} columns but W gives N={n}")
    em = sorted_token_ids.shape[0]
    if b_tma is None:
        b_tma = tma_supported(w)
    b_desc = weight_descriptor(w, config) if b_tma else None
    fused_moe_kernel[gemm_grid(em, n, config)](
        a, w, b_desc, c2, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
        n, k, em, topk_weights.numel(), top_k,
        a.stride(0), a.stride(1), w.stride(0), w.stride(1), w.stride(2), c2.stride(0), c2.stride(1),
        MUL_ROUTED_WEIGHT=mul_routed_weight,
        EVEN_K=k % config["BLOCK_SIZE_K"] == 0,
        B_TMA=b_tma,
        compute_type=_TL_DTYPES[a.dtype],
        num_warps=config.num_warps, num_stages=config.num_stages,
        **config.params,
    )
    return c


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """SiLU of the first half (gate) times the second half (up), computed in float32."""
    half = x.shape[-1] // 2
    gate, up = x[..., :half].float(), x[..., half:].float()
    return (torch.nn.functional.silu(gate) * up).to(x.dtype)


def _check_layer(hidden, w1, w2, topk_weights, topk_ids):
    if hidden.dim() != 2 or w1.dim() != 3 or w2.dim() != 3:
        raise AdvisorError("fused_moe takes hidden [M, H], w1 [E, 2I, H], w2 [E, H, I]; got shapes "
                           f"{tuple(hidden.shape)}, {tuple(w1.shape)}, {tuple(w2.shape)}")
    m, h = hidden.shape
    e, two_i, h1 = w1.shape
    if h1 != h or w2.shape[0] != e or w2.shape[1] != h or two_i != 2 * w2.shape[2]:
        raise AdvisorError(f"inconsistent MoE shapes: hidden {tuple(hidden.shape)}, w1 {tuple(w1.shape)}, "
                           f"w2 {tuple(w2.shape)}; need w1 [E, 2I, H] and w2 [E, H, I]")
    if topk_ids.shape != topk_weights.shape or topk_ids.shape[0] != m:
        raise AdvisorError(f"topk_ids {tuple(topk_ids.shape)} and topk_weights {tuple(topk_weights.shape)} "
                           f"must both be [M={m}, top_k]")


def fused_moe(hidden, w1, w2, topk_weights, topk_ids, config: Config | None = None,
              config2: Config | None = None) -> torch.Tensor:
    """One MoE layer: sum_k weight[t, k] * (silu(x W1g^T) * (x W1u^T)) W2^T for expert ids[t, k].

    hidden [M, H]; w1 [E, 2I, H]; w2 [E, H, I]; topk_weights [M, top_k] float; topk_ids [M, top_k].
    `config` is used for GEMM1 and, unless `config2` is given, GEMM2; None takes the default rule.
    """
    from kernels.moe_configs import default_config  # late: moe_configs imports this module's space

    _check_layer(hidden, w1, w2, topk_weights, topk_ids)
    m, h = hidden.shape
    e, two_i, _ = w1.shape
    top_k = topk_ids.shape[1]
    config = config or default_config(m, e, top_k)
    config2 = config2 or config
    topk_weights = topk_weights.to(torch.float32).contiguous()

    align = moe_align_block_size(topk_ids, config["BLOCK_SIZE_M"], e)
    inter = torch.empty((m * top_k, two_i), dtype=hidden.dtype, device=hidden.device)
    invoke_fused_moe_gemm(hidden, w1, inter, topk_weights, *align, top_k=top_k, mul_routed_weight=False,
                          config=config)
    act = silu_and_mul(inter)
    if config2["BLOCK_SIZE_M"] != config["BLOCK_SIZE_M"]:
        align = moe_align_block_size(topk_ids, config2["BLOCK_SIZE_M"], e)
    out = torch.empty((m, top_k, h), dtype=hidden.dtype, device=hidden.device)
    # GEMM2's A rows are the pairs themselves, so top_k=1 maps pair -> row.
    invoke_fused_moe_gemm(act, w2, out, topk_weights, *align, top_k=1, mul_routed_weight=True, config=config2)
    return out.sum(dim=1, dtype=torch.float32).to(hidden.dtype)


# ------------------------------------------------------------------------------------------------
# Float32 references.
# ------------------------------------------------------------------------------------------------
def fused_moe_gemm_reference(a, w, topk_ids, top_k: int, topk_weights=None) -> torch.Tensor:
    """[pairs, N] float32: row p = A[p // top_k] @ W[ids.flat[p]]^T (x weight if given)."""
    ids = topk_ids.reshape(-1).long()
    rows = a.float()[torch.arange(ids.numel(), device=a.device) // top_k]
    out = torch.empty((ids.numel(), w.shape[1]), dtype=torch.float32, device=a.device)
    for expert in torch.unique(ids).tolist():
        sel = ids == expert
        out[sel] = rows[sel] @ w[expert].float().T
    if topk_weights is not None:
        out *= topk_weights.reshape(-1, 1).float()
    return out


def fused_moe_reference(hidden, w1, w2, topk_weights, topk_ids) -> torch.Tensor:
    """The whole layer in float32, expert by expert."""
    _check_layer(hidden, w1, w2, topk_weights, topk_ids)
    top_k = topk_ids.shape[1]
    inter = fused_moe_gemm_reference(hidden, w1, topk_ids, top_k)
    half = inter.shape[1] // 2
    act = torch.nn.functional.silu(inter[:, :half]) * inter[:, half:]
    out = fused_moe_gemm_reference(act, w2, topk_ids, 1, topk_weights)
    return out.view(hidden.shape[0], top_k, -1).sum(dim=1)


def route(m: int, num_experts: int, top_k: int, device="cpu", generator=None):
    """Uniform random top-k routing (the rule of ANCHORS section 3): distinct experts per token,
    softmax weights over random logits, renormalised over the chosen k."""
    logits = torch.randn(m, num_experts, device=device, generator=generator)
    ids = torch.rand(m, num_experts, device=device, generator=generator).argsort(dim=1)[:, :top_k]
    weights = torch.softmax(logits.gather(1, ids), dim=1)
    return weights, ids.to(torch.int32)
