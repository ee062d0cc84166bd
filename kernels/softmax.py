"""A shipped row softmax, y = softmax(x) over the last dimension, with its exact demand model.

One program handles ROWS_PER_PROGRAM rows; each row is read once in BLOCK_N chunks for the max, once
more for the sum of exp, and a third time to write the result (three passes when the row does not fit
one chunk, one when it does). It is bound by DRAM for long rows and, for short rows, by the
special-function unit (one exp2 per element per pass that needs it).
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
    "BLOCK_N": (256, 512, 1024, 2048, 4096, 8192),
    "ROWS_PER_PROGRAM": (1, 2, 4),
    "num_warps": (1, 2, 4, 8, 16),
    "num_stages": (1, 2),
}
_LOG2E = 1.4426950408889634


@triton.jit
def softmax_kernel(
    # Pointers: X [rows, cols] and Y of the same shape.
    x_ptr, y_ptr,
    # Sizes and strides.
    rows, cols, stride_x, stride_y,
    # Meta-parameters.
    BLOCK_N: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr, ONE_CHUNK: tl.constexpr,
):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    for r in range(ROWS_PER_PROGRAM):
        row = pid * ROWS_PER_PROGRAM + r
        if row < rows:
            x_row = x_ptr + row.to(tl.int64) * stride_x
            y_row = y_ptr + row.to(tl.int64) * stride_y
            if ONE_CHUNK:
                # The whole row in registers: read once, exp once, write once.
                x = tl.load(x_row + offs, mask=offs < cols, other=-float("inf")).to(tl.float32)
                e = tl.math.exp2((x - tl.max(x, axis=0)) * 1.4426950408889634)
                tl.store(y_row + offs, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=offs < cols)
            else:
                # Online max and rescaled sum in one pass, then a second pass to write.
                m = tl.full((BLOCK_N,), -float("inf"), tl.float32)
                s = tl.zeros((BLOCK_N,), tl.float32)
                for start in range(0, cols, BLOCK_N):
                    x = tl.load(x_row + start + offs, mask=start + offs < cols, other=-float("inf")).to(tl.float32)
                    new_m = tl.maximum(m, x)
                    s = s * tl.math.exp2((m - new_m) * 1.4426950408889634) + \
                        tl.math.exp2((x - new_m) * 1.4426950408889634)
                    m = new_m
                row_max = tl.max(m, axis=0)
                total = tl.sum(s * tl.math.exp2((m - row_max) * 1.4426950408889634), axis=0)
                for start in range(0, cols, BLOCK_N):
                    x = tl.load(x_row + start + offs, mask=start + offs < cols, other=-float("inf")).to(tl.float32)
                    y = tl.math.exp2((x - row_max) * 1.4426950408889634) / total
                    tl.store(y_row + start + offs, y.to(y_ptr.dtype.element_ty), mask=start + offs < cols)


def default_config(rows: int, cols: int) -> Config:
    block = min(8192, triton.next_power_of_2(max(cols, 256)))
    warps = 4 if block <= 1024 else 8 if block <= 4096 else 16
    return Config({"BLOCK_N": block, "ROWS_PER_PROGRAM": 1}, warps, 1)


def grid(rows: int, config: Config) -> tuple[int]:
    return (triton.cdiv(rows, config["ROWS_PER_PROGRAM"]),)


def softmax(x: torch.Tensor, config: Config | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
    if x.dim() != 2 or x.stride(1) != 1:
        raise AdvisorError(f"softmax takes a row-major 2-D tensor; got shape {tuple(x.shape)}, strides {x.stride()}")
    rows, cols = x.shape
    config = config or default_config(rows, cols)
    y = out if out is not None else torch.empty_like(x)
    softmax_kernel[grid(rows, config)](x, y, rows, cols, x.stride(0), y.stride(0),
                                      ONE_CHUNK=cols <= config["BLOCK_N"], num_warps=config.num_warps,
                                      num_stages=config.num_stages, **config.params)
    return y


def softmax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1)


def describe_launch(rows: int, cols: int, config: Config, dtype: str = "bfloat16") -> Launch:
    return Launch(source=__file__, kernel="softmax_kernel", grid=grid(rows, config),
                  tensors=(TensorArg.contiguous("x_ptr", (rows, cols), dtype),
                           TensorArg.contiguous("y_ptr", (rows, cols), dtype)),
                  scalars={"rows": rows, "cols": cols, "stride_x": cols, "stride_y": cols},
                  constexprs={"ONE_CHUNK": cols <= config["BLOCK_N"]}, config=config)


def softmax_demand(rows: int, cols: int, config: Config, dtype: str = "bfloat16", arch: int = 90) -> Demand:
    """Exact work: exp2 per element per pass that needs one, 16-byte loads and stores, and DRAM bytes.

    One chunk: one read, one exp2 and one write per element. Several: two reads (the first pass does
    two exp2 per element: the rescale of the running sum and the element's own), one write. No tensor
    work, so the arch changes nothing here; it is taken for the same signature as the other models.
    """
    size = {"bfloat16": 2, "float16": 2, "float32": 4}[dtype]
    block, per_program = config["BLOCK_N"], config["ROWS_PER_PROGRAM"]
    ctas = math.ceil(rows / per_program)
    one_chunk = cols <= block
    chunks = math.ceil(cols / block)
    row_elems = chunks * block  # the masked tail still issues
    passes_read = 1 if one_chunk else 2
    exps = row_elems * (1 if one_chunk else 3)
    vec = 16 // size
    lsu = per_program * (row_elems * (passes_read + 1)) / vec / 32
    dram = 2 * rows * cols * size
    return Demand(kernel="softmax_kernel", ctas=ctas, active_ctas=ctas, warps_per_cta=config.num_warps,
                  tensor_flops_per_cta=0.0,
                  instructions_per_cta={"xu": per_program * exps / 32, "lsu": lsu,
                                        "fma": per_program * row_elems * (1 if one_chunk else 3) / 32},
                  smem_bytes_per_cta=0.0, l2_bytes=rows * cols * size * (passes_read + 1), dram_bytes=dram,
                  source="semantic (kernels.softmax)")
