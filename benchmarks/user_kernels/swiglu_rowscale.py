"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
SwiGLU of a [tokens, 2*H] projection, scaled per row, written out in bf16.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_H": 256}, num_warps=2),
        triton.Config({"BLOCK_H": 512}, num_warps=4),
        triton.Config({"BLOCK_H": 1024}, num_warps=4),
        triton.Config({"BLOCK_H": 2048}, num_warps=8),
    ],
    key=["H"],
)
@triton.jit
def swiglu_rowscale_kernel(x_ptr, scale_ptr, out_ptr, H, stride_x, stride_o, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    col_block = tl.program_id(1)
    cols = col_block * BLOCK_H + tl.arange(0, BLOCK_H)
    mask = cols < H
    gate = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * stride_x + H + cols, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(scale_ptr + row)
    y = gate * tl.sigmoid(gate) * up * s
    tl.store(out_ptr + row * stride_o + cols, y.to(tl.bfloat16), mask=mask)


def swiglu_rowscale(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    tokens, two_h = x.shape
    h = two_h // 2
    out = torch.empty((tokens, h), dtype=torch.bfloat16, device=x.device)
    grid = lambda meta: (tokens, triton.cdiv(h, meta["BLOCK_H"]))  # noqa: E731
    swiglu_rowscale_kernel[grid](x, scale, out, h, x.stride(0), out.stride(0))
    return out
