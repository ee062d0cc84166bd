"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Out[j, i] = x[i, j] * s[i] in tiles, bf16 in and out.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def scaled_transpose_kernel(x_ptr, s_ptr, out_ptr, R, C, TILE_R: tl.constexpr, TILE_C: tl.constexpr):
    pr = tl.program_id(0)
    pc = tl.program_id(1)
    r = pr * TILE_R + tl.arange(0, TILE_R)
    c = pc * TILE_C + tl.arange(0, TILE_C)
    m = (r[:, None] < R) & (c[None, :] < C)
    x = tl.load(x_ptr + r[:, None] * C + c[None, :], mask=m, other=0.0)
    s = tl.load(s_ptr + r, mask=r < R, other=0.0)
    y = (x.to(tl.float32) * s[:, None]).to(tl.bfloat16)
    tl.store(out_ptr + c[None, :] * R + r[:, None], y, mask=m)


def scaled_transpose(x: torch.Tensor, s: torch.Tensor, tile_r: int = 32, tile_c: int = 32) -> torch.Tensor:
    R, C = x.shape
    out = torch.empty((C, R), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(R, tile_r), triton.cdiv(C, tile_c))
    scaled_transpose_kernel[grid](x, s, out, R, C, TILE_R=tile_r, TILE_C=tile_c, num_warps=4)
    return out
