"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Training-mode batch norm statistics of x (N, C, H, W) bf16 (NCHW contiguous): per-channel mean and rstd =
1 / sqrt(biased var + eps), both (C,) fp32. Pass 1: grid (C, num_chunks), each program sums x and x^2 (fp32)
over one chunk of the channel's N*H*W elements into a (C, num_chunks) partials buffer. Pass 2: one program per
channel combines its partials and writes mean and rstd.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def bn_partial_sums_kernel(
    x_ptr, psum_ptr, psq_ptr,
    C, HW, L, num_chunks,
    CHUNK: tl.constexpr,
    BLOCK: tl.constexpr,
):
    c = tl.program_id(0)
    chunk = tl.program_id(1)
    base = chunk * CHUNK
    acc_s = tl.zeros((BLOCK,), dtype=tl.float32)
    acc_q = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, CHUNK, BLOCK):
        j = base + off + tl.arange(0, BLOCK)
        mask = j < L
        n = j // HW
        hw = j - n * HW
        addr = (n.to(tl.int64) * C + c) * HW + hw
        v = tl.load(x_ptr + addr, mask=mask, other=0.0).to(tl.float32)
        acc_s += v
        acc_q += v * v
    tl.store(psum_ptr + c * num_chunks + chunk, tl.sum(acc_s, axis=0))
    tl.store(psq_ptr + c * num_chunks + chunk, tl.sum(acc_q, axis=0))


@triton.jit
def bn_finalize_kernel(
    psum_ptr, psq_ptr, mean_ptr, rstd_ptr,
    num_chunks, count, eps,
    BLOCK: tl.constexpr,
):
    c = tl.program_id(0)
    acc_s = tl.zeros((BLOCK,), dtype=tl.float32)
    acc_q = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, num_chunks, BLOCK):
        i = off + tl.arange(0, BLOCK)
        mask = i < num_chunks
        acc_s += tl.load(psum_ptr + c * num_chunks + i, mask=mask, other=0.0)
        acc_q += tl.load(psq_ptr + c * num_chunks + i, mask=mask, other=0.0)
    s = tl.sum(acc_s, axis=0)
    q = tl.sum(acc_q, axis=0)
    mean = s / count
    var = tl.maximum(q / count - mean * mean, 0.0)
    tl.store(mean_ptr + c, mean)
    tl.store(rstd_ptr + c, 1.0 / tl.sqrt(var + eps))


def batchnorm_stats(x, eps=1e-5):
    """x (N, C, H, W) bf16 -> (mean (C,) fp32, rstd (C,) fp32)."""
    x = x.contiguous()
    N, C, H, W = x.shape
    HW = H * W
    L = N * HW
    dev = x.device
    BLOCK = 1024
    CHUNK = BLOCK * 8
    if L < CHUNK:
        BLOCK = min(1024, triton.next_power_of_2(max(L, 16)))
        CHUNK = BLOCK
    num_chunks = triton.cdiv(L, CHUNK)
    psum = torch.empty((C, num_chunks), device=dev, dtype=torch.float32)
    psq = torch.empty((C, num_chunks), device=dev, dtype=torch.float32)
    mean = torch.empty((C,), device=dev, dtype=torch.float32)
    rstd = torch.empty((C,), device=dev, dtype=torch.float32)

    bn_partial_sums_kernel[(C, num_chunks)](
        x, psum, psq, C, HW, L, num_chunks,
        CHUNK=CHUNK, BLOCK=BLOCK, num_warps=4,
    )
    FIN_BLOCK = min(1024, triton.next_power_of_2(max(num_chunks, 16)))
    bn_finalize_kernel[(C,)](
        psum, psq, mean, rstd, num_chunks, float(L), eps,
        BLOCK=FIN_BLOCK, num_warps=4,
    )
    return mean, rstd
