"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
fused SwiGLU backward for a merged gate/up projection: gate_up (M, 2*I) holds [gate | up] along the
last dim (bf16/f16), dout (M, I) is the gradient of h = silu(gate) * up; returns d_gate_up (M, 2*I)
with d_up = dout * silu(gate) in the right half and d_gate = dout * up * sig(gate) * (1 + gate * (1 - sig(gate)))
in the left half, math in fp32. Grid (M, cdiv(I, BLOCK)): each program handles BLOCK columns of one
row, reading gate, up and dout and writing both gradient halves (elementwise, memory bound).
@triton.autotune over BLOCK / num_warps keyed on I.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 512}, num_warps=2),
        triton.Config({"BLOCK": 1024}, num_warps=4),
        triton.Config({"BLOCK": 2048}, num_warps=8),
        triton.Config({"BLOCK": 4096}, num_warps=8),
    ],
    key=["I"],
)
@triton.jit
def swiglu_backward_kernel(
    gu_ptr, dout_ptr, dgu_ptr,
    I,
    stride_gum, stride_dom, stride_dgm,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    pid = tl.program_id(1)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < I

    g = tl.load(gu_ptr + row * stride_gum + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(gu_ptr + row * stride_gum + I + offs, mask=mask, other=0.0).to(tl.float32)
    do = tl.load(dout_ptr + row * stride_dom + offs, mask=mask, other=0.0).to(tl.float32)

    sig = tl.sigmoid(g)
    silu = g * sig
    d_up = do * silu
    d_gate = do * u * sig * (1.0 + g * (1.0 - sig))

    out_ty = dgu_ptr.dtype.element_ty
    tl.store(dgu_ptr + row * stride_dgm + offs, d_gate.to(out_ty), mask=mask)
    tl.store(dgu_ptr + row * stride_dgm + I + offs, d_up.to(out_ty), mask=mask)


def swiglu_backward(gate_up, dout):
    """gate_up (M, 2I) = [gate | up], dout (M, I) -> d_gate_up (M, 2I), gate_up's dtype."""
    assert gate_up.dim() == 2 and dout.dim() == 2
    M, two_i = gate_up.shape
    I = two_i // 2
    assert two_i == 2 * I and dout.shape == (M, I)
    if gate_up.stride(1) != 1:
        gate_up = gate_up.contiguous()
    if dout.stride(1) != 1:
        dout = dout.contiguous()
    d_gate_up = torch.empty((M, 2 * I), device=gate_up.device, dtype=gate_up.dtype)
    grid = lambda meta: (M, triton.cdiv(I, meta["BLOCK"]))
    swiglu_backward_kernel[grid](
        gate_up, dout, d_gate_up,
        I,
        gate_up.stride(0), dout.stride(0), d_gate_up.stride(0),
    )
    return d_gate_up
