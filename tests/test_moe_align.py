"""The Triton align step (kernels/moe_align.py) against the torch version it replaces, element for element.

Without a GPU these run under Triton's CPU interpreter (see conftest.py), so the shapes are small. The
routings: uniform, a few hot experts, experts with no tokens at all (including the first and the last),
every pair on one expert, and more pairs than one program's chunk (so several programs count and scatter).
"""

from __future__ import annotations

import pytest
import torch
from test_fused_moe import fresh_generator, make_routing

from ceilings.errors import AdvisorError
from kernels import moe_align
from kernels.fused_moe import moe_align_block_size


def routing_ids(kind: str, m: int, e: int, top_k: int, gen: torch.Generator) -> torch.Tensor:
    if kind == "uniform":
        return make_routing(m, e, top_k, e, gen)[1]
    if kind == "idle":  # about half the experts get nothing
        return make_routing(m, e, top_k, max(top_k, e // 2), gen)[1]
    if kind == "ends-idle":  # the first and the last expert get nothing
        ids = make_routing(m, e - 2, top_k, e - 2, gen)[1]
        return ids + 1
    if kind == "hot":
        logits = torch.randn(m, e, generator=gen)
        logits[:, torch.randperm(e, generator=gen)[:2]] += 3.0
        return torch.topk(logits, top_k, dim=1).indices.to(torch.int32)
    if kind == "one-expert":
        return torch.full((m, top_k), e // 2, dtype=torch.int32)
    raise ValueError(kind)


CASES = [
    # M, E, top_k, M block sizes (GEMM1, GEMM2), routing
    pytest.param(1, 8, 2, (16, 16), "uniform", id="M1"),
    pytest.param(37, 8, 2, (16, 64), "hot", id="M37-hot-two-blocks"),
    pytest.param(29, 16, 4, (32, 32), "idle", id="M29-idle"),
    pytest.param(23, 12, 3, (16, 32), "ends-idle", id="M23-E12-ends-idle"),
    pytest.param(40, 8, 2, (64, 16), "one-expert", id="M40-one-expert"),
    pytest.param(3, 64, 8, (16, 16), "uniform", id="M3-E64-most-idle"),
    # 16 experts: 512 pairs per sub-chunk, so 1,400 pairs take 3 programs.
    pytest.param(350, 16, 4, (64, 128), "hot", id="M350-three-programs"),
]


@pytest.mark.parametrize("m, e, top_k, block_ms, kind", CASES)
def test_triton_align_equals_the_torch_version(device, m, e, top_k, block_ms, kind):
    gen, seed = fresh_generator()
    ids = routing_ids(kind, m, e, top_k, gen).to(device)
    outs = moe_align.moe_align_triton(ids, block_ms, e)
    assert len(outs) == len(set(block_ms))
    for bm, got in zip(dict.fromkeys(block_ms), outs, strict=True):
        want = moe_align_block_size(ids, bm, e)
        for name, g, w in zip(("sorted_token_ids", "expert_ids", "num_tokens_post_padded"), got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape, f"{name} at BLOCK_SIZE_M={bm} (seed {seed})"
            assert torch.equal(g.cpu(), w.cpu()), f"{name} differs at BLOCK_SIZE_M={bm}, {kind} (seed {seed})"


def test_several_programs_are_used_where_the_pairs_exceed_a_chunk():
    """The multi-program path is what the M350 case exercises: the layout gives it 3 programs."""
    experts_pow2, sub, programs, per_program = moe_align._layout(350 * 4, 16)
    assert (experts_pow2, sub) == (16, 512) and programs == 3 and per_program == 1
    # Many pairs: at most MAX_CHUNKS programs, each over whole sub-chunks, none without pairs.
    experts_pow2, sub, programs, per_program = moe_align._layout(4096 * 8, 128)
    assert programs <= moe_align.MAX_CHUNKS
    assert (programs - 1) * per_program * sub < 4096 * 8 <= programs * per_program * sub


def test_int64_ids_and_a_single_block_size(device):
    gen, _ = fresh_generator()
    ids = make_routing(19, 8, 2, 8, gen)[1].to(torch.int64).to(device)
    got = moe_align.moe_align_block_size_triton(ids, 16, 8)
    want = moe_align_block_size(ids, 16, 8)
    assert all(torch.equal(g.cpu(), w.cpu()) for g, w in zip(got, want, strict=True))


def test_bad_arguments_are_rejected(device):
    ids = torch.zeros(4, 2, dtype=torch.int32, device=device)
    with pytest.raises(AdvisorError, match="tokens, top_k"):
        moe_align.moe_align_triton(ids.reshape(-1), (16,), 4)
    with pytest.raises(AdvisorError, match="one or two"):
        moe_align.moe_align_triton(ids, (16, 32, 64), 4)
