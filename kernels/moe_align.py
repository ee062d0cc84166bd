"""The fused-MoE align step in two Triton launches (issue 16): a counting sort of the (token, k) pairs by
expert, each expert's run padded to a multiple of BLOCK_SIZE_M.

Outputs are those of `kernels.fused_moe.moe_align_block_size` (the torch version, kept as the
reference), element for element: sorted_token_ids [P] int32 (pair index token * top_k + k, the pairs
of one expert in increasing pair order, padding rows holding the sentinel M * top_k), expert_ids
[P / BLOCK_SIZE_M] int32 (the expert owning each M block; blocks past the padded total get E - 1, as
the torch version's clamped searchsorted gives) and num_tokens_post_padded [1] int32. P is the
host-side bound `max_padded_tokens`, so no size depends on the routing: no host synchronisation, and
the two launches can be captured in a CUDA graph.

The method is the textbook counting sort (a histogram per chunk of the input, an exclusive prefix over
the counts, then each element scattered to its bucket's start plus its rank among the equal keys
before it), done for a GPU the usual way: the input is cut into chunks, one program per chunk.
  1. `_align_count_kernel`: program c counts the expert ids of its chunk ([chunks, experts] counts)
     and fills its slice of sorted_token_ids with the sentinel (of both outputs when GEMM2's M block
     differs from GEMM1's).
  2. `_align_scatter_kernel` (once per M block size): every program sums the count matrix into the
     per-expert totals, pads them to the M block and takes their exclusive prefix (each expert's first
     padded row), adds the counts of the chunks before its own, and writes each pair of its chunk to
     that start plus the pair's rank among the same expert's pairs earlier in the chunk (a cumulative
     sum down a one-hot [pairs, experts] tile, so the order within an expert is the pair order). It
     also writes the expert id of a share of the M blocks (how many experts end at or before the
     block's first row) and, program 0, the padded total.
The count matrix does not depend on the M block, so GEMM2's alignment at another BLOCK_SIZE_M reuses
it: one more scatter launch, not a second align.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ceilings.errors import AdvisorError
from kernels.fused_moe import max_padded_tokens

# Most programs per launch: the scatter reads the whole [chunks, experts] count matrix in each program,
# so more chunks cost more reads than they add parallelism (a few thousand pairs per program is cheap).
MAX_CHUNKS = 64
# Elements of the one-hot [pairs, experts] tile a program holds at a time (registers, not memory).
ONE_HOT_ELEMENTS = 8192
# M blocks whose expert id one step of the scatter's block loop finds.
EXPERT_ID_BLOCKS = 64
FILL_BLOCK = 1024


@triton.jit
def _align_count_kernel(topk_ids_ptr, chunk_counts_ptr, sorted_a_ptr, sorted_b_ptr,
                        num_pairs, sub_chunks_per_program, padded_a, padded_b,
                        EXPERTS_POW2: tl.constexpr, SUB: tl.constexpr, TWO_OUTPUTS: tl.constexpr,
                        FILL: tl.constexpr):
    chunk = tl.program_id(0)
    programs = tl.num_programs(0)
    experts = tl.arange(0, EXPERTS_POW2)
    counts = tl.zeros((EXPERTS_POW2,), dtype=tl.int32)
    first = chunk * sub_chunks_per_program * SUB
    for it in range(0, sub_chunks_per_program):
        offs = first + it * SUB + tl.arange(0, SUB)
        ids = tl.load(topk_ids_ptr + offs, mask=offs < num_pairs, other=-1).to(tl.int32)
        counts += tl.sum((ids[:, None] == experts[None, :]).to(tl.int32), axis=0)
    tl.store(chunk_counts_ptr + chunk * EXPERTS_POW2 + experts, counts)

    # Every row starts as padding (the sentinel); the scatter then overwrites the real pairs' rows. A
    # separate launch, so no program can overwrite a pair another has already placed.
    per_a = tl.cdiv(tl.cdiv(padded_a, programs), FILL) * FILL
    for start in range(chunk * per_a, tl.minimum((chunk + 1) * per_a, padded_a), FILL):
        offs = start + tl.arange(0, FILL)
        tl.store(sorted_a_ptr + offs, tl.full((FILL,), 0, tl.int32) + num_pairs, mask=offs < padded_a)
    if TWO_OUTPUTS:
        per_b = tl.cdiv(tl.cdiv(padded_b, programs), FILL) * FILL
        for start in range(chunk * per_b, tl.minimum((chunk + 1) * per_b, padded_b), FILL):
            offs = start + tl.arange(0, FILL)
            tl.store(sorted_b_ptr + offs, tl.full((FILL,), 0, tl.int32) + num_pairs, mask=offs < padded_b)


@triton.jit
def _align_scatter_kernel(topk_ids_ptr, chunk_counts_ptr, sorted_ptr, expert_ids_ptr, post_padded_ptr,
                          num_pairs, sub_chunks_per_program, num_chunks, num_blocks, num_experts, block_m,
                          EXPERTS_POW2: tl.constexpr, CHUNKS_POW2: tl.constexpr, SUB: tl.constexpr,
                          ID_BLOCKS: tl.constexpr):
    chunk = tl.program_id(0)
    programs = tl.num_programs(0)
    experts = tl.arange(0, EXPERTS_POW2)
    rows = tl.arange(0, CHUNKS_POW2)
    matrix = tl.load(chunk_counts_ptr + rows[:, None] * EXPERTS_POW2 + experts[None, :],
                     mask=rows[:, None] < num_chunks, other=0)
    totals = tl.sum(matrix, axis=0)
    before = tl.sum(tl.where(rows[:, None] < chunk, matrix, 0), axis=0)  # this expert's pairs in earlier chunks
    padded = (totals + block_m - 1) // block_m * block_m
    padded_end = tl.cumsum(padded, axis=0)
    base = padded_end - padded + before

    first = chunk * sub_chunks_per_program * SUB
    for it in range(0, sub_chunks_per_program):
        offs = first + it * SUB + tl.arange(0, SUB)
        valid = offs < num_pairs
        ids = tl.load(topk_ids_ptr + offs, mask=valid, other=-1).to(tl.int32)
        one_hot = (ids[:, None] == experts[None, :]).to(tl.int32)
        # Inclusive count of each expert down the tile: a pair's own entry is its rank + 1 within the tile.
        seen = tl.cumsum(one_hot, axis=0) + (base - 1)[None, :]
        dest = tl.sum(one_hot * seen, axis=1)
        tl.store(sorted_ptr + dest, offs, mask=valid)
        base += tl.sum(one_hot, axis=0)

    # The expert of M block b: how many experts' padded runs end at or before its first row (experts
    # with no pairs end where the one before them does, so they own no block), at most E - 1.
    ends = tl.where(experts < num_experts, padded_end, 2147483647)
    for b0 in range(chunk * ID_BLOCKS, num_blocks, programs * ID_BLOCKS):
        blocks = b0 + tl.arange(0, ID_BLOCKS)
        owner = tl.sum((ends[None, :] <= (blocks * block_m)[:, None]).to(tl.int32), axis=1)
        tl.store(expert_ids_ptr + blocks, tl.minimum(owner, num_experts - 1), mask=blocks < num_blocks)
    if chunk == 0:
        tl.store(post_padded_ptr, tl.sum(padded, axis=0))


def _layout(num_pairs: int, num_experts: int) -> tuple[int, int, int, int]:
    """(experts rounded up to a power of two, pairs per sub-chunk, programs, sub-chunks per program)."""
    experts_pow2 = triton.next_power_of_2(num_experts)
    sub = max(16, min(1024, ONE_HOT_ELEMENTS // experts_pow2))
    subs = max(1, triton.cdiv(num_pairs, sub))
    programs = min(MAX_CHUNKS, subs)
    per_program = triton.cdiv(subs, programs)
    programs = triton.cdiv(subs, per_program)  # no program without pairs
    return experts_pow2, sub, programs, per_program


def moe_align_triton(topk_ids: torch.Tensor, block_ms: tuple[int, ...] | list[int], num_experts: int) -> list[tuple]:
    """`kernels.fused_moe.moe_align_block_size` for one or two M block sizes from one count: a list of
    (sorted_token_ids, expert_ids, num_tokens_post_padded), one per entry of `block_ms`, each identical
    to the torch version's. Two launches for one block size, three for two."""
    if topk_ids.dim() != 2:
        raise AdvisorError(f"topk_ids has shape {tuple(topk_ids.shape)}; expected [tokens, top_k]")
    block_ms = list(dict.fromkeys(block_ms))
    if not 1 <= len(block_ms) <= 2:
        raise AdvisorError(f"moe_align_triton takes one or two M block sizes; got {block_ms}")
    device = topk_ids.device
    flat = topk_ids.reshape(-1)
    if not flat.is_contiguous():
        flat = flat.contiguous()
    pairs = flat.numel()
    experts_pow2, sub, programs, per_program = _layout(pairs, num_experts)
    outs = []
    for bm in block_ms:
        padded_len = triton.cdiv(max(max_padded_tokens(pairs, num_experts, bm), 1), bm) * bm
        outs.append((torch.empty(padded_len, dtype=torch.int32, device=device),
                     torch.empty(padded_len // bm, dtype=torch.int32, device=device),
                     torch.empty(1, dtype=torch.int32, device=device)))
    counts = torch.empty((programs, experts_pow2), dtype=torch.int32, device=device)
    second = outs[-1][0]
    _align_count_kernel[(programs,)](
        flat, counts, outs[0][0], second, pairs, per_program, outs[0][0].numel(), second.numel(),
        EXPERTS_POW2=experts_pow2, SUB=sub, TWO_OUTPUTS=len(outs) == 2, FILL=FILL_BLOCK, num_warps=4)
    for bm, (sorted_ids, expert_ids, post_padded) in zip(block_ms, outs, strict=True):
        _align_scatter_kernel[(programs,)](
            flat, counts, sorted_ids, expert_ids, post_padded, pairs, per_program, programs,
            expert_ids.numel(), num_experts, bm,
            EXPERTS_POW2=experts_pow2, CHUNKS_POW2=triton.next_power_of_2(programs), SUB=sub,
            ID_BLOCKS=EXPERT_ID_BLOCKS, num_warps=4)
    return outs


def moe_align_block_size_triton(topk_ids: torch.Tensor, block_m: int, num_experts: int):
    """One block size: (sorted_token_ids, expert_ids, num_tokens_post_padded), as the torch version."""
    return moe_align_triton(topk_ids, (block_m,), num_experts)[0]
