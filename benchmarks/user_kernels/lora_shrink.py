"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
LoRA shrink for a batch where every token picks its own adapter: out[t] = x[t] @ A[adapter_ids[t]]
(tokens with adapter id -1 get zeros). x (T, hidden), A (num_adapters, hidden, rank), ids (T,) int32 -> (T, rank) fp32.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def lora_shrink_kernel(
    x_ptr, a_ptr, ids_ptr, out_ptr,
    n_tokens, hidden, rank,
    stride_xt, stride_xk,
    stride_aa, stride_ak, stride_ar,
    stride_ot, stride_or,
    BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_R: tl.constexpr, USE_DOT: tl.constexpr,
):
    # grid: (token tiles, adapters). Each program does the rows of its tile that use its adapter.
    pid_m = tl.program_id(0)
    adapter = tl.program_id(1)

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < n_tokens
    ids = tl.load(ids_ptr + rows, mask=row_ok, other=-1)
    mine = row_ok & (ids == adapter)
    n_mine = tl.sum(mine.to(tl.int32), axis=0)

    if n_mine > 0:
        r = tl.arange(0, BLOCK_R)
        r_ok = r < rank
        x_rows = x_ptr + rows.to(tl.int64)[:, None] * stride_xt
        a_base = a_ptr + adapter.to(tl.int64) * stride_aa
        acc = tl.zeros([BLOCK_M, BLOCK_R], dtype=tl.float32)
        for k0 in range(0, hidden, BLOCK_K):
            kk = k0 + tl.arange(0, BLOCK_K)
            k_ok = kk < hidden
            x = tl.load(x_rows + kk[None, :] * stride_xk, mask=mine[:, None] & k_ok[None, :], other=0.0)
            a = tl.load(a_base + kk.to(tl.int64)[:, None] * stride_ak + r[None, :] * stride_ar,
                        mask=k_ok[:, None] & r_ok[None, :], other=0.0)
            if USE_DOT:
                acc += tl.dot(x, a.to(x.dtype))
            else:
                acc += tl.sum(x.to(tl.float32)[:, :, None] * a.to(tl.float32)[None, :, :], axis=1)
        out_ptrs = out_ptr + rows.to(tl.int64)[:, None] * stride_ot + r[None, :] * stride_or
        tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mine[:, None] & r_ok[None, :])


def lora_shrink(x: torch.Tensor, lora_a: torch.Tensor, adapter_ids: torch.Tensor, block_m: int = 32,
                block_k: int = 64):
    n_tokens, hidden = x.shape
    num_adapters, hidden_a, rank = lora_a.shape
    assert hidden_a == hidden
    adapter_ids = adapter_ids.to(torch.int32)
    # rows without an adapter (id -1) are never written by the kernel
    out = torch.zeros((n_tokens, rank), dtype=torch.float32, device=x.device)
    if n_tokens == 0:
        return out
    BLOCK_R = max(16, triton.next_power_of_2(rank))
    grid = lambda meta: (triton.cdiv(n_tokens, meta["BLOCK_M"]), num_adapters)
    lora_shrink_kernel[grid](
        x, lora_a, adapter_ids, out,
        n_tokens, hidden, rank,
        x.stride(0), x.stride(1),
        lora_a.stride(0), lora_a.stride(1), lora_a.stride(2),
        out.stride(0), out.stride(1),
        BLOCK_M=block_m, BLOCK_K=block_k, BLOCK_R=BLOCK_R, USE_DOT=block_m >= 16,
        num_warps=4, num_stages=2,
    )
    return out
