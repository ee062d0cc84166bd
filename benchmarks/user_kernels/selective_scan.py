"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Mamba-style selective scan: u, delta (B, D, L) f32/bf16, A (D, N) f32, Bm, Cm (B, N, L) f32, D_skip (D,) f32;
h_t = exp(delta_t * A) * h_{t-1} + delta_t * Bm_t * u_t, y_t = sum_n Cm_t[n] * h_t[n] + D_skip * u_t -> y (B, D, L)
in u's dtype. Grid (B, cdiv(D, BLOCK_D)); each program walks t = 0..L-1 sequentially, keeping its
BLOCK_D x N fp32 state in registers.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def selective_scan_kernel(
    u_ptr, delta_ptr, a_ptr, b_ptr, c_ptr, dskip_ptr, y_ptr,
    D, L, NSTATE,
    stride_ub, stride_ud, stride_ul,
    stride_db, stride_dd, stride_dl,
    stride_ad, stride_an,
    stride_bb, stride_bn, stride_bl,
    stride_cb, stride_cn, stride_cl,
    stride_yb, stride_yd, stride_yl,
    BLOCK_D: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    pid_b = tl.program_id(0)
    pid_d = tl.program_id(1)
    offs_d = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    offs_n = tl.arange(0, BLOCK_N)
    d_mask = offs_d < D
    n_mask = offs_n < NSTATE

    A = tl.load(a_ptr + offs_d[:, None] * stride_ad + offs_n[None, :] * stride_an,
                mask=d_mask[:, None] & n_mask[None, :], other=0.0).to(tl.float32)
    Dk = tl.load(dskip_ptr + offs_d, mask=d_mask, other=0.0).to(tl.float32)

    u_base = u_ptr + pid_b.to(tl.int64) * stride_ub + offs_d * stride_ud
    dt_base = delta_ptr + pid_b.to(tl.int64) * stride_db + offs_d * stride_dd
    y_base = y_ptr + pid_b.to(tl.int64) * stride_yb + offs_d * stride_yd
    b_base = b_ptr + pid_b.to(tl.int64) * stride_bb + offs_n * stride_bn
    c_base = c_ptr + pid_b.to(tl.int64) * stride_cb + offs_n * stride_cn

    h = tl.zeros((BLOCK_D, BLOCK_N), dtype=tl.float32)
    for t in range(L):
        u = tl.load(u_base + t * stride_ul, mask=d_mask, other=0.0).to(tl.float32)
        dt = tl.load(dt_base + t * stride_dl, mask=d_mask, other=0.0).to(tl.float32)
        bt = tl.load(b_base + t * stride_bl, mask=n_mask, other=0.0).to(tl.float32)
        ct = tl.load(c_base + t * stride_cl, mask=n_mask, other=0.0).to(tl.float32)
        dA = tl.exp(dt[:, None] * A)
        h = dA * h + (dt * u)[:, None] * bt[None, :]
        y = tl.sum(h * ct[None, :], axis=1) + Dk * u
        tl.store(y_base + t * stride_yl, y.to(y_ptr.dtype.element_ty), mask=d_mask)


def selective_scan(u, delta, A, Bm, Cm, D_skip):
    """u, delta (B, D, L); A (D, N) f32; Bm, Cm (B, N, L) f32; D_skip (D,) f32 -> y (B, D, L) like u."""
    Bsz, D, L = u.shape
    N = A.shape[1]
    assert delta.shape == u.shape and A.shape[0] == D
    assert Bm.shape == (Bsz, N, L) and Cm.shape == (Bsz, N, L)
    y = torch.empty((Bsz, D, L), device=u.device, dtype=u.dtype)
    BLOCK_N = triton.next_power_of_2(N)
    BLOCK_D = 32 if D >= 32 else 16
    grid = (Bsz, triton.cdiv(D, BLOCK_D))
    selective_scan_kernel[grid](
        u, delta, A, Bm, Cm, D_skip, y,
        D, L, N,
        u.stride(0), u.stride(1), u.stride(2),
        delta.stride(0), delta.stride(1), delta.stride(2),
        A.stride(0), A.stride(1),
        Bm.stride(0), Bm.stride(1), Bm.stride(2),
        Cm.stride(0), Cm.stride(1), Cm.stride(2),
        y.stride(0), y.stride(1), y.stride(2),
        BLOCK_D=BLOCK_D, BLOCK_N=BLOCK_N,
        num_warps=4,
    )
    return y
