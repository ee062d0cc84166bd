"""GEMM1 with paired M blocks (kernels/fused_moe_gemm1.py) against the float32 reference.

Without a GPU these run under Triton's CPU interpreter (conftest.py), so the shapes are small. The
routings are built so that pairs of half blocks straddle experts (uneven counts), some experts get no
pairs (NaN weights, so a kernel reading them into a stored value shows it), and a few hot experts take
most pairs, as real traffic does.
"""

from __future__ import annotations

import pytest
import torch
from test_fused_moe import NAN, TOLERANCE, fresh_generator, make_config, random_weights, rel_error
from test_fused_moe_fused import routing

from ceilings.errors import AdvisorError
from kernels import fused_moe_fused as ff
from kernels import fused_moe_gemm1 as g1
from kernels.fused_moe import moe_align_block_size

CASES = [
    # M, E, top_k, K, I, (BM, BN, BK, GM), routing
    pytest.param(1, 8, 2, 64, 32, (32, 64, 32, 1), "uniform", id="M1"),
    pytest.param(37, 8, 2, 80, 48, (32, 64, 32, 2), "hot", id="M37-oddK-I48-hot"),
    pytest.param(29, 16, 4, 64, 40, (64, 32, 64, 4), "uniform", id="M29-k4-I40-idle"),
    pytest.param(45, 6, 2, 96, 64, (64, 128, 32, 1), "hot", id="M45-BM64-hot"),
]

FORMS = [
    # paired, persistent, weights through TMA
    pytest.param(True, False, False, id="paired-grid-ptr"),
    pytest.param(True, False, True, id="paired-grid-tma"),
    pytest.param(True, True, True, id="paired-persistent-tma"),
    pytest.param(False, True, False, id="whole-persistent-ptr"),
]


def gemm1_case(device, m, e, top_k, k, inter, tiles, kind, paired):
    """One case's inputs on `device`: config, A, interleaved weights, routing ids, the routing aligned for the
    kernel form, a NaN-filled output, the float32 reference and the seed."""
    gen, seed = fresh_generator()
    config = make_config(*tiles)
    _, ids, unused = routing(kind, m, e, top_k, gen)
    a = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    w = random_weights(e, 2 * inter, k, torch.bfloat16, gen, unused)
    ref = g1.reference(a, w, ids)
    a, w_il, ids = (t.to(device) for t in (a, ff.interleave_gate_up(w), ids))
    align = moe_align_block_size(ids, g1.align_block(config, paired), e)
    c = torch.full((m * top_k, inter), NAN, dtype=torch.bfloat16, device=device)
    return config, a, w_il, ids, align, c, ref, seed


def check_output(c, ref, config, seed):
    """Every output row and column written, and within the tolerance of the float32 reference."""
    assert not torch.isnan(c).any(), f"rows or columns left unwritten (seed {seed})"
    err = rel_error(c, ref)
    assert err < TOLERANCE, f"relative error {err:.2e} with {config.label()} (seed {seed})"


@pytest.mark.parametrize("m, e, top_k, k, inter, tiles, kind", CASES[1:3])
def test_gemm1_persistent_flattened_matches_reference(device, m, e, top_k, k, inter, tiles, kind):
    """The persistent tile loop pipelined with the K loop as one (flatten): the same result."""
    config, a, w_il, ids, align, c, ref, seed = gemm1_case(device, m, e, top_k, k, inter, tiles, kind, paired=False)
    g1.invoke_gemm1(a, w_il, c, *align, top_k=top_k, config=config, paired=False, persistent=True, flatten=True)
    check_output(c, ref, config, seed)


@pytest.mark.parametrize("paired, persistent, b_tma", FORMS)
@pytest.mark.parametrize("m, e, top_k, k, inter, tiles, kind", CASES)
def test_gemm1_matches_reference(device, m, e, top_k, k, inter, tiles, kind, paired, persistent, b_tma):
    config, a, w_il, ids, align, c, ref, seed = gemm1_case(device, m, e, top_k, k, inter, tiles, kind, paired=paired)
    g1.invoke_gemm1(a, w_il, c, *align, top_k=top_k, config=config, paired=paired, persistent=persistent,
                    b_tma=b_tma)
    check_output(c, ref, config, seed)


def test_pairs_straddle_experts_and_halve_padding():
    """Known by construction: counts 70, 10, 33 at BLOCK_SIZE_M 64 pad to 128 + 64 + 64 rows; aligned at 32
    they pad to 96 + 32 + 64, and the half blocks pair up as (e0 e0) (e0 e1) (e2 e2): one pair straddles."""
    assert g1.padded_rows([70, 10, 33], 64) == 256
    assert g1.padded_rows([70, 10, 33], 32) == 192
    ids = torch.tensor([0] * 70 + [1] * 10 + [2] * 33, dtype=torch.int32).view(-1, 1)
    _, expert_ids, total = moe_align_block_size(ids, 32, 3)
    blocks = expert_ids[: int(total) // 32].tolist()
    assert blocks == [0, 0, 0, 1, 2, 2]
    pairs = [tuple(blocks[i:i + 2]) for i in range(0, len(blocks), 2)]
    assert [a == b for a, b in pairs] == [True, False, True]


def test_gemm1_rejects_misaligned_routing(device):
    config = make_config(64, 64, 32, 1)
    ids = torch.tensor([[0, 1], [1, 2]], dtype=torch.int32, device=device)
    a = torch.zeros(2, 32, dtype=torch.bfloat16, device=device)
    w = torch.zeros(3, 64, 32, dtype=torch.bfloat16, device=device)
    c = torch.empty(4, 32, dtype=torch.bfloat16, device=device)
    align64 = moe_align_block_size(ids, 64, 3)
    with pytest.raises(AdvisorError, match="align_block"):
        g1.invoke_gemm1(a, w, c, *align64, top_k=2, config=config, paired=True)
    with pytest.raises(AdvisorError, match="BLOCK_SIZE_M >= 32"):
        g1.align_block(make_config(16, 64, 32, 1), paired=True)


@pytest.mark.parametrize("persistent, flatten", [(False, False), (True, True)], ids=["grid", "persistent-flat"])
@pytest.mark.parametrize("m, e, top_k, k, inter, tiles, kind", CASES)
def test_gemm1_on_pregathered_a_matches_reference(device, m, e, top_k, k, inter, tiles, kind, persistent, flatten):
    """A gathered into sorted order first (`gather_rows`), then read through a TMA descriptor: the same result."""
    config, a, w_il, ids, align, c, ref, seed = gemm1_case(device, m, e, top_k, k, inter, tiles, kind, paired=False)
    a_sorted = g1.gather_rows(a, align[0], align[2], top_k)
    rows = align[0][: int(align[2])].long().cpu()
    valid = rows < m * top_k
    assert torch.equal(a_sorted[: len(rows)][valid].cpu(), a.cpu()[rows[valid] // top_k])
    assert not a_sorted[: len(rows)][~valid].cpu().any(), "padding rows must be zeros"
    g1.invoke_gemm1(a, w_il, c, *align, top_k=top_k, config=config, paired=False, a_sorted=a_sorted, b_tma=True,
                    persistent=persistent, flatten=flatten)
    check_output(c, ref, config, seed)


def test_pregathered_a_must_match_the_routing(device):
    config = make_config(32, 64, 32, 1)
    ids = torch.tensor([[0, 1], [1, 2]], dtype=torch.int32, device=device)
    a = torch.zeros(2, 32, dtype=torch.bfloat16, device=device)
    w = torch.zeros(3, 64, 32, dtype=torch.bfloat16, device=device)
    c = torch.empty(4, 32, dtype=torch.bfloat16, device=device)
    align = moe_align_block_size(ids, 32, 3)
    with pytest.raises(AdvisorError, match="gather_rows"):
        g1.invoke_gemm1(a, w, c, *align, top_k=2, config=config, paired=False, a_sorted=a[:1])
    with pytest.raises(AdvisorError, match="paired=False"):
        g1.invoke_gemm1(a, w, c, *moe_align_block_size(ids, 16, 3), top_k=2, config=config, paired=True,
                        a_sorted=g1.gather_rows(a, *moe_align_block_size(ids, 16, 3)[::2], top_k=2))
