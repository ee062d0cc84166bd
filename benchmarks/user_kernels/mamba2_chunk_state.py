"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Mamba-2 (SSD) per-chunk state: states[b,c,h,p,n] = sum_{l in chunk c} x[b,l,h,p] * B[b,l,g(h),n] * dt[b,l,h]
* exp(dA_cs[b,h,c,last] - dA_cs[b,h,c,l]); x (B, L, H, P), B (B, L, G, N), dt (B, L, H), A_log (H,) -> (B, C, H, P,
N) fp32.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def mamba2_chunk_state_kernel(
    x_ptr, b_ptr, dt_ptr, dA_cs_ptr, states_ptr,
    seqlen, nheads, nchunks, hdim, dstate, heads_per_group,
    sx_b, sx_l, sx_h, sx_p,
    sb_b, sb_l, sb_g, sb_n,
    sdt_b, sdt_h, sdt_c, sdt_l,
    sst_b, sst_c, sst_h, sst_p, sst_n,
    CHUNK_SIZE: tl.constexpr,
    BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_L: tl.constexpr,
):
    pid_pn = tl.program_id(0)
    pid_bc = tl.program_id(1)
    h = tl.program_id(2)
    b = pid_bc // nchunks
    c = pid_bc % nchunks
    g = h // heads_per_group
    num_pb = tl.cdiv(hdim, BLOCK_P)
    pid_p = pid_pn % num_pb
    pid_n = pid_pn // num_pb

    offs_p = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    p_mask = offs_p < hdim
    n_mask = offs_n < dstate

    chunk_start = c * CHUNK_SIZE
    chunk_len = tl.minimum(CHUNK_SIZE, seqlen - chunk_start)

    x_base = x_ptr + b.to(tl.int64) * sx_b + chunk_start.to(tl.int64) * sx_l + h * sx_h
    b_base = b_ptr + b.to(tl.int64) * sb_b + chunk_start.to(tl.int64) * sb_l + g * sb_g
    dt_base = dt_ptr + b.to(tl.int64) * sdt_b + h * sdt_h + c * sdt_c
    dA_base = dA_cs_ptr + b.to(tl.int64) * sdt_b + h * sdt_h + c * sdt_c

    dA_last = tl.load(dA_base + (chunk_len - 1) * sdt_l)

    acc = tl.zeros((BLOCK_P, BLOCK_N), dtype=tl.float32)
    for l0 in range(0, chunk_len, BLOCK_L):
        offs_l = l0 + tl.arange(0, BLOCK_L)
        l_mask = offs_l < chunk_len
        xt = tl.load(x_base + offs_p[:, None] * sx_p + offs_l[None, :] * sx_l,
                     mask=p_mask[:, None] & l_mask[None, :], other=0.0)
        bt = tl.load(b_base + offs_l[:, None] * sb_l + offs_n[None, :] * sb_n,
                     mask=l_mask[:, None] & n_mask[None, :], other=0.0).to(tl.float32)
        dA = tl.load(dA_base + offs_l * sdt_l, mask=l_mask, other=0.0)
        dt = tl.load(dt_base + offs_l * sdt_l, mask=l_mask, other=0.0)
        scale = tl.exp(dA_last - dA) * dt
        bt = (bt * scale[:, None]).to(xt.dtype)
        acc = tl.dot(xt, bt, acc)

    st = (states_ptr + b.to(tl.int64) * sst_b + c.to(tl.int64) * sst_c + h * sst_h
          + offs_p[:, None] * sst_p + offs_n[None, :] * sst_n)
    tl.store(st, acc, mask=p_mask[:, None] & n_mask[None, :])


def mamba2_chunk_state(x, B, dt, A_log, chunk_size=256):
    """x (batch, L, H, P), B (batch, L, G, N), dt (batch, L, H) positive (post-softplus), A_log (H,).
    Returns states (batch, nchunks, H, P, N) float32."""
    batch, seqlen, nheads, hdim = x.shape
    _, _, ngroups, dstate = B.shape
    assert nheads % ngroups == 0
    nchunks = triton.cdiv(seqlen, chunk_size)
    pad = nchunks * chunk_size - seqlen
    A = -torch.exp(A_log.float())
    dt_c = torch.nn.functional.pad(dt.float(), (0, 0, 0, pad))
    dt_c = dt_c.reshape(batch, nchunks, chunk_size, nheads).permute(0, 3, 1, 2).contiguous()
    dA_cs = torch.cumsum(dt_c * A[None, :, None, None], dim=-1)
    states = torch.empty((batch, nchunks, nheads, hdim, dstate), dtype=torch.float32, device=x.device)
    if batch == 0 or seqlen == 0:
        return states
    BLOCK_P, BLOCK_N, BLOCK_L = 64, 64, 32
    grid = (triton.cdiv(hdim, BLOCK_P) * triton.cdiv(dstate, BLOCK_N), batch * nchunks, nheads)
    mamba2_chunk_state_kernel[grid](
        x, B, dt_c, dA_cs, states,
        seqlen, nheads, nchunks, hdim, dstate, nheads // ngroups,
        x.stride(0), x.stride(1), x.stride(2), x.stride(3),
        B.stride(0), B.stride(1), B.stride(2), B.stride(3),
        dt_c.stride(0), dt_c.stride(1), dt_c.stride(2), dt_c.stride(3),
        states.stride(0), states.stride(1), states.stride(2), states.stride(3), states.stride(4),
        CHUNK_SIZE=chunk_size,
        BLOCK_P=BLOCK_P, BLOCK_N=BLOCK_N, BLOCK_L=BLOCK_L,
        num_warps=4, num_stages=3,
    )
    return states
