"""fp8 (e4m3) quantisation for the fused-MoE layer (`kernels.fused_moe_fp8`): the scaling schemes, a Triton
activation quantiser checked against a torch one, weight quantisation and dequantisation.

"block" is DeepSeek-V3's (ANCHORS section 1): one float32 scale per 128 x 128 weight block and per 128 columns of
an activation row; "channel": one per weight row and per token, over the whole K.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ceilings.errors import AdvisorError

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # largest finite e4m3fn value
SCALE_BLOCK = 128
# Scaling schemes: (weight rows per scale, columns per scale; None = the whole K), activations scaled per row
# over the same columns. "block": DeepSeek-V3's checkpoints (128 x 128 weight blocks, 1 x 128 activation
# groups): the scales change every 128 columns of K, so each K step's product is scaled before it is added.
# "channel": one scale per weight row and per token: constant over K, so applied once in the epilogue.
SCALINGS = {"block": (SCALE_BLOCK, SCALE_BLOCK), "channel": (1, None)}
_MIN_AMAX = 1e-12  # an all-zero group gets a tiny scale instead of a division by zero


@triton.jit
def quantize_rows_kernel(x_ptr, q_ptr, s_ptr, M, K, group, stride_xm, stride_qm, stride_sm,
                         BLOCK_ROWS: tl.constexpr, CHUNK: tl.constexpr, EXACT_DIV: tl.constexpr):
    # One program: BLOCK_ROWS rows x one group of `group` columns -> fp8 values and one scale per row.
    # Two passes over the group in CHUNK columns: its largest magnitude, then the scaled values.
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    start = tl.program_id(1) * group
    end = tl.minimum(start + group, K)
    x_rows = x_ptr + rows[:, None].to(tl.int64) * stride_xm
    q_rows = q_ptr + rows[:, None].to(tl.int64) * stride_qm
    amax = tl.zeros((BLOCK_ROWS,), dtype=tl.float32)
    for c in range(start, end, CHUNK):
        cols = c + tl.arange(0, CHUNK)
        mask = (rows[:, None] < M) & (cols[None, :] < end)
        x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.max(tl.abs(x), axis=1))
    scale = tl.maximum(amax, 1e-12) / 448.0
    for c in range(start, end, CHUNK):
        cols = c + tl.arange(0, CHUNK)
        mask = (rows[:, None] < M) & (cols[None, :] < end)
        x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        # EXACT_DIV: IEEE division, as torch divides (a called routine); `/` is the GPU's approximate one.
        if EXACT_DIV:
            q = tl.math.div_rn(x, tl.broadcast_to(scale[:, None], x.shape))
        else:
            q = x / scale[:, None]
        tl.store(q_rows + cols[None, :], q.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + rows * stride_sm + tl.program_id(1), scale, mask=rows < M)


def _groups(scaling: str) -> tuple[int | None, int | None]:
    """(weight rows per scale, columns per scale; None = the whole K) of a scaling scheme."""
    if scaling not in SCALINGS:
        raise AdvisorError(f"scaling={scaling!r} is not an fp8 scaling scheme; use one of {', '.join(SCALINGS)}")
    return SCALINGS[scaling]


def quantize_rows(x: torch.Tensor, scaling: str = "block", exact: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] (bf16/fp16/fp32) -> (fp8 [M, K], float32 scales [M, groups]): each group of a row (128
    columns for "block", the whole row for "channel") scaled so that its largest magnitude maps to 448.
    exact: IEEE division, bit for bit what `quantize_rows_reference` gives; the default, the GPU's fast
    division, put 0-2 values per case one e4m3 step off it and took 1.0-1.9 us less at small M, up to 8.5 us
    for the per-token scheme (RESULTS 40, H100 run 5)."""
    if x.dim() != 2:
        raise AdvisorError(f"quantize_rows takes a 2-D [M, K] tensor; got shape {tuple(x.shape)}")
    x = x if x.stride(1) == 1 else x.contiguous()
    m, k = x.shape
    group = _groups(scaling)[1] or max(k, 1)
    groups = triton.cdiv(k, group)
    q = torch.empty((m, k), dtype=FP8, device=x.device)
    scales = torch.empty((m, groups), dtype=torch.float32, device=x.device)
    # A whole-row group is walked in chunks of up to 1024 columns, a row or two per program: 128-column
    # chunks of 16 rows took 6-12 us at M = 1 on the H100 (64 dependent loads), against 2 us for blocks.
    chunk = min(1024, triton.next_power_of_2(group))
    block_rows = max(1, 2048 // chunk)
    quantize_rows_kernel[(triton.cdiv(m, block_rows), groups)](
        x, q, scales, m, k, group, x.stride(0), q.stride(0), scales.stride(0), BLOCK_ROWS=block_rows, CHUNK=chunk,
        EXACT_DIV=exact)
    return q, scales


def quantize_rows_reference(x: torch.Tensor, scaling: str = "block") -> tuple[torch.Tensor, torch.Tensor]:
    """`quantize_rows` in torch (the check for the Triton quantiser)."""
    q, scales = _quantize_blocks(x[None], 1, _groups(scaling)[1])
    return q[0], scales[0]


def _quantize_blocks(w: torch.Tensor, row_group: int, col_group: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    e, r, k = w.shape
    col_group = col_group or max(k, 1)
    rb, kb = triton.cdiv(r, row_group), triton.cdiv(k, col_group)
    q = torch.empty((e, r, k), dtype=FP8, device=w.device)
    scales = torch.empty((e, rb, kb), dtype=torch.float32, device=w.device)
    for i in range(e):  # one expert at a time, to bound the float32 copy
        padded = torch.zeros((rb * row_group, kb * col_group), dtype=torch.float32, device=w.device)
        padded[:r, :k] = w[i].float()
        blocks = padded.view(rb, row_group, kb, col_group)
        scales[i] = blocks.abs().amax(dim=(1, 3)).clamp_min(_MIN_AMAX) / FP8_MAX
        q[i] = (blocks / scales[i][:, None, :, None]).view(rb * row_group, -1)[:r, :k].to(FP8)
    return q, scales


def quantize_weights(w: torch.Tensor, scaling: str = "block") -> tuple[torch.Tensor, torch.Tensor]:
    """w [E, R, K] -> (fp8 [E, R, K], float32 scales [E, row groups, column groups]): "block": one scale per
    128 x 128 block (an edge block covers what is left); "channel": one per row."""
    if w.dim() != 3:
        raise AdvisorError(f"quantize_weights takes [E, R, K] weights; got shape {tuple(w.shape)}")
    return _quantize_blocks(w, *_groups(scaling))


def _expand(scales: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Scales [..., rb, kb] of either scheme spread over [..., rows, cols] (each scale over its block): one
    scale per row or per 128 rows; per 128 columns or for all of them (the two agree where they coincide)."""
    rb, kb = scales.shape[-2:]
    row_group = 1 if rb == rows else SCALE_BLOCK
    col_group = SCALE_BLOCK if kb == triton.cdiv(cols, SCALE_BLOCK) else max(cols, 1)
    full = scales.repeat_interleave(row_group, dim=-2).repeat_interleave(col_group, dim=-1)
    return full[..., :rows, :cols]


def dequantize_weights(q: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """float32 [E, R, K] from `quantize_weights`'s pair."""
    return q.float() * _expand(scales, q.shape[1], q.shape[2])


def dequantize_rows(q: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    return q.float() * _expand(scales, q.shape[0], q.shape[1])
