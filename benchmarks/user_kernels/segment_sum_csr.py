"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Segment (scatter) sum via CSR: values (N, D) fp32 and integer segment ids (N,) in [0, S). The host sorts the ids
(torch.sort, keeping the permutation) and builds CSR offsets (S+1,) with bincount + cumsum; one program per
(segment, D block) loops over its rows offsets[s]..offsets[s+1] (bounds loaded from memory) gathering values[perm[r]].
Output (S, D) fp32; empty segments give zeros.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def segment_sum_csr_kernel(
    values_ptr, perm_ptr, offsets_ptr, out_ptr,
    dim, stride_vn, stride_os,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    seg = tl.program_id(0)
    pid_d = tl.program_id(1)
    cols = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    cmask = cols < dim

    start = tl.load(offsets_ptr + seg)
    end = tl.load(offsets_ptr + seg + 1)

    acc = tl.zeros((BLOCK_N, BLOCK_D), dtype=tl.float32)
    for r0 in range(start, end, BLOCK_N):
        r = r0 + tl.arange(0, BLOCK_N)
        rmask = r < end
        src = tl.load(perm_ptr + r, mask=rmask, other=0).to(tl.int64)
        x = tl.load(values_ptr + src[:, None] * stride_vn + cols[None, :],
                    mask=rmask[:, None] & cmask[None, :], other=0.0)
        acc += x.to(tl.float32)

    total = tl.sum(acc, axis=0)
    tl.store(out_ptr + seg.to(tl.int64) * stride_os + cols, total, mask=cmask)


def segment_sum_csr(values, segment_ids, num_segments):
    """values (N, D), segment_ids (N,) int in [0, num_segments). Returns (num_segments, D) fp32 sums."""
    N, D = values.shape
    if values.stride(-1) != 1:
        values = values.contiguous()
    sorted_ids, perm = torch.sort(segment_ids, stable=True)
    counts = torch.bincount(sorted_ids, minlength=num_segments)[:num_segments]
    offsets = torch.zeros(num_segments + 1, dtype=torch.int64, device=values.device)
    offsets[1:] = torch.cumsum(counts, dim=0)
    offsets = offsets.to(torch.int32)
    perm = perm.to(torch.int32)
    out = torch.empty((num_segments, D), dtype=torch.float32, device=values.device)
    BLOCK_D = 128
    grid = (num_segments, triton.cdiv(D, BLOCK_D))
    segment_sum_csr_kernel[grid](
        values, perm, offsets, out,
        D, values.stride(0), out.stride(0),
        BLOCK_N=32, BLOCK_D=128,
        num_warps=4,
    )
    return out
