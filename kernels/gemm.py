"""A shipped dense GEMM, C = A @ B, with its config space and its exact demand model.

The kernel tiles C into BLOCK_M x BLOCK_N programs in grouped order (GROUP_M rows of tiles sweep the
columns together, for L2 reuse of B), loops over K in BLOCK_K steps and accumulates in float32.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ceilings.errors import AdvisorError
from ceilings.launch import Config, Launch, TensorArg
from ceilings.roofline import Demand

CONFIG_SPACE: dict[str, tuple[int, ...]] = {
    "BLOCK_M": (16, 32, 64, 128, 256),
    "BLOCK_N": (32, 64, 128, 256),
    "BLOCK_K": (32, 64, 128),
    "GROUP_M": (1, 8),
    "num_warps": (4, 8),
    "num_stages": (2, 3, 4, 5),
}
_TL = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}
_SIZE = {"float16": 2, "bfloat16": 2}
_SHORT = {"float16": "fp16", "bfloat16": "bf16"}


@triton.jit
def gemm_kernel(
    # Pointers: A [M, K], B [K, N], C [M, N].
    a_ptr, b_ptr, c_ptr,
    # Sizes.
    M, N, K,
    # Strides, in elements.
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    # Meta-parameters.
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None].to(tl.int64) * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :].to(tl.int64) * stride_bn
    row_ok = rows[:, None] < M
    col_ok = cols[None, :] < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs, mask=row_ok, other=0.0)
            b = tl.load(b_ptrs, mask=col_ok, other=0.0)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=row_ok & (ks[None, :] < k_left), other=0.0)
            b = tl.load(b_ptrs, mask=(ks[:, None] < k_left) & col_ok, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rows[:, None].to(tl.int64) * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=row_ok & col_ok)


def default_config(m: int, n: int, k: int) -> Config:
    """Large tiles for large products, narrow M tiles for skinny ones."""
    if m <= 16:
        return Config({"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "GROUP_M": 1}, 4, 4)
    if m <= 64 or n <= 64:
        return Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8}, 4, 4)
    return Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, 8, 3)


def grid(m: int, n: int, config: Config) -> tuple[int]:
    return (triton.cdiv(m, config["BLOCK_M"]) * triton.cdiv(n, config["BLOCK_N"]),)


def gemm(a: torch.Tensor, b: torch.Tensor, config: Config | None = None, out: torch.Tensor | None = None):
    """C = A @ B for fp16/bf16 A [M, K] and B [K, N] of one dtype; C has their dtype."""
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise AdvisorError(f"gemm takes A [M, K] and B [K, N]; got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype not in _TL or b.dtype != a.dtype:
        raise AdvisorError(f"gemm takes fp16 or bf16 operands of one dtype; got {a.dtype} and {b.dtype}")
    m, k = a.shape
    n = b.shape[1]
    config = config or default_config(m, n, k)
    c = out if out is not None else torch.empty((m, n), dtype=a.dtype, device=a.device)
    gemm_kernel[grid(m, n, config)](
        a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        EVEN_K=k % config["BLOCK_K"] == 0, num_warps=config.num_warps, num_stages=config.num_stages,
        **config.params)
    return c


def gemm_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.float() @ b.float()


def describe_launch(m: int, n: int, k: int, config: Config, dtype: str = "bfloat16") -> Launch:
    """The Launch of gemm_kernel for contiguous A [M, K], B [K, N], C [M, N]."""
    return Launch(
        source=__file__, kernel="gemm_kernel", grid=grid(m, n, config),
        tensors=(TensorArg.contiguous("a_ptr", (m, k), dtype), TensorArg.contiguous("b_ptr", (k, n), dtype),
                 TensorArg.contiguous("c_ptr", (m, n), dtype)),
        scalars={"M": m, "N": n, "K": k, "stride_am": k, "stride_ak": 1, "stride_bk": n, "stride_bn": 1,
                 "stride_cm": n, "stride_cn": 1},
        constexprs={"EVEN_K": k % config["BLOCK_K"] == 0}, config=config)


def gemm_demand(m: int, n: int, k: int, config: Config, dtype: str = "bfloat16", arch: int = 90,
                shared_bytes: int | None = None, registers: int | None = None) -> Demand:
    """Exact work of one launch: every tile multiplies BLOCK_M x BLOCK_N x (K rounded up to BLOCK_K)."""
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    size = _SIZE[dtype]
    tiles_m, tiles_n = math.ceil(m / bm), math.ceil(n / bn)
    ctas = tiles_m * tiles_n
    k_padded = math.ceil(k / bk) * bk
    wgmma = arch >= 90 and bm % 64 == 0 and config.num_warps % 4 == 0
    vec = 16 // size
    # Masked rows and columns move no bytes: each tile column reads all M rows of A once, each tile
    # row all N columns of B once.
    l2 = (tiles_n * m * k + tiles_m * n * k + m * n) * size
    return Demand(kernel="gemm_kernel", ctas=ctas, active_ctas=ctas, warps_per_cta=config.num_warps,
                  tensor_flops_per_cta=2.0 * bm * bn * k_padded, tensor_dtype=_SHORT[dtype],
                  tensor_kind="wgmma" if wgmma else "mma_sync",
                  instructions_per_cta={"lsu": (bm + bn) * k_padded / vec / 32 + bm * bn / vec / 32,
                                        "alu": bm * bn / 2 / 32},
                  smem_bytes_per_cta=2.0 * (bm + bn) * k_padded * size, l2_bytes=l2,
                  dram_bytes=(m * k + k * n + m * n) * size,
                  shared_bytes=shared_bytes if shared_bytes is not None else config.num_stages * (bm + bn) * bk * size,
                  registers=registers, source="semantic (kernels.gemm)")
