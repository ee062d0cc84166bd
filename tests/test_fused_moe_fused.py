"""The fused variants of the fused-MoE GEMMs (kernels/fused_moe_fused.py) against float32 references.

Without a GPU these run under Triton's CPU interpreter (see conftest.py), so the shapes are small; the
AOT tests compile each variant for sm_90 without a GPU. Routing is uniform over some experts (the rest
idle, with NaN weights so a kernel that reads them into a stored value shows it) or skewed onto a few
hot experts, as real traffic is.
"""

from __future__ import annotations

import math

import pytest
import torch
from test_fused_moe import (
    NAN,
    TOLERANCE,
    fresh_generator,
    make_config,
    make_routing,
    poisoned_buffers,
    random_weights,
    rel_error,
)

from ceilings.errors import AdvisorError
from kernels import fused_moe_fused as ff
from kernels.fused_moe import fused_moe_gemm_reference, fused_moe_reference, moe_align_block_size


def hot_routing(m: int, num_experts: int, top_k: int, hot: int, gen: torch.Generator):
    """Top-k routing where `hot` experts get most pairs: their logits lifted by 3 (distinct per token)."""
    logits = torch.randn(m, num_experts, generator=gen)
    logits[:, torch.randperm(num_experts, generator=gen)[:hot]] += 3.0
    values, ids = torch.topk(logits, top_k, dim=1)
    return torch.softmax(values, dim=1), ids.to(torch.int32), []


def routing(kind: str, m, e, top_k, gen):
    if kind == "hot":
        return hot_routing(m, e, top_k, 2, gen)
    return make_routing(m, e, top_k, max(top_k, e - 2), gen)


def small_layer(kind: str):
    """(seed, (hidden, w1, w2, topk weights, topk ids)) of a small layer (29 tokens, 8 experts, top 2) under
    `kind` routing, from a fresh seeded generator."""
    gen, seed = fresh_generator()
    m, e, top_k, h, inter = 29, 8, 2, 64, 48
    weights, ids, unused = routing(kind, m, e, top_k, gen)
    hidden = torch.randn(m, h, generator=gen).to(torch.bfloat16)
    w1 = random_weights(e, 2 * inter, h, torch.bfloat16, gen, unused)
    w2 = random_weights(e, h, inter, torch.bfloat16, gen, unused)
    return seed, (hidden, w1, w2, weights, ids)


GATED_CASES = [
    # M, E, top_k, K, I, (BM, BN, BK, GM), routing
    pytest.param(1, 8, 2, 64, 32, (16, 64, 32, 1), "uniform", id="M1-even"),
    pytest.param(37, 8, 2, 80, 48, (16, 64, 32, 2), "hot", id="M37-oddK-I48-hot"),
    pytest.param(29, 16, 4, 64, 40, (32, 32, 64, 4), "uniform", id="M29-k4-I40-idle"),
    pytest.param(20, 6, 2, 96, 64, (64, 128, 64, 1), "hot", id="M20-BM64-hot"),
]


GATED_FORMS = [
    # w1 layout, weights through TMA, persistent
    pytest.param(False, False, False, id="halves-ptr-grid"),
    pytest.param(False, True, False, id="halves-tma-grid"),
    pytest.param(False, False, True, id="halves-ptr-persistent"),
    pytest.param(False, True, True, id="halves-tma-persistent"),
    pytest.param(True, False, False, id="interleaved-ptr-grid"),
    pytest.param(True, True, True, id="interleaved-tma-persistent"),
]


@pytest.mark.parametrize("interleaved, b_tma, persistent", GATED_FORMS)
@pytest.mark.parametrize("m, e, top_k, k, inter, tiles, kind", GATED_CASES)
def test_gated_gemm_matches_reference(device, m, e, top_k, k, inter, tiles, kind, interleaved, b_tma, persistent):
    """GEMM1 with SiLU-and-mul in the epilogue: [pairs, I] = silu(x W_gate^T) * (x W_up^T), reading w1
    as it comes or gate/up-interleaved (tiles past 2I then read the next expert: NaN when it is idle)."""
    gen, seed = fresh_generator()
    config = make_config(*tiles)
    weights, ids, unused = routing(kind, m, e, top_k, gen)
    a = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    w = random_weights(e, 2 * inter, k, torch.bfloat16, gen, unused)
    full = fused_moe_gemm_reference(a, w, ids, top_k)
    ref = torch.nn.functional.silu(full[:, :inter]) * full[:, inter:]

    if interleaved:
        w = ff.interleave_gate_up(w)
    a, w, weights, ids = (t.to(device) for t in (a, w, weights, ids))
    align = moe_align_block_size(ids, config["BLOCK_SIZE_M"], e)
    c = torch.full((m * top_k, inter), NAN, dtype=torch.bfloat16, device=device)
    ff.invoke_fused_gemm(a, w, c, weights, *align, top_k=top_k, config=config, gated=True, accumulate=False,
                         persistent=persistent, b_tma=b_tma, interleaved=interleaved)
    assert not torch.isnan(c).any(), f"rows or columns left unwritten (seed {seed})"
    err = rel_error(c, ref)
    assert err < TOLERANCE, f"relative error {err:.2e} with {config.label()} (seed {seed})"


SUM_CASES = [
    # M, E, top_k, K (= I), N (= H), (BM, BN, BK, GM), routing
    pytest.param(1, 8, 2, 32, 64, (16, 32, 32, 1), "uniform", id="M1"),
    pytest.param(37, 8, 2, 48, 80, (16, 64, 32, 2), "hot", id="M37-oddK-oddN-hot"),
    pytest.param(29, 16, 8, 64, 48, (32, 32, 64, 4), "uniform", id="M29-k8-idle"),
]


@pytest.mark.parametrize("persistent", [False, True], ids=["grid", "persistent"])
@pytest.mark.parametrize("b_tma", [False, True], ids=["ptr", "tma"])
@pytest.mark.parametrize("m, e, top_k, k, n, tiles, kind", SUM_CASES)
def test_accumulating_gemm_matches_reference(device, m, e, top_k, k, n, tiles, kind, b_tma, persistent):
    """GEMM2 with the router weight and the top-k sum: out[t] = sum_k w[t, k] * act[t * top_k + k] @ W2^T."""
    gen, seed = fresh_generator()
    config = make_config(*tiles)
    weights, ids, unused = routing(kind, m, e, top_k, gen)
    act = torch.randn(m * top_k, k, generator=gen).to(torch.bfloat16)
    w = random_weights(e, n, k, torch.bfloat16, gen, unused)
    ref = fused_moe_gemm_reference(act, w, ids, 1, weights).view(m, top_k, n).sum(dim=1)

    act, w, weights, ids = (t.to(device) for t in (act, w, weights, ids))
    align = moe_align_block_size(ids, config["BLOCK_SIZE_M"], e)
    out = torch.zeros(m, n, dtype=torch.float32, device=device)
    ff.invoke_fused_gemm(act, w, out, weights, *align, top_k=top_k, config=config, gated=False, accumulate=True,
                         persistent=persistent, b_tma=b_tma)
    err = rel_error(out, ref)
    assert err < TOLERANCE, f"relative error {err:.2e} with {config.label()} (seed {seed})"


@pytest.mark.parametrize("b_tma", [False, True], ids=["ptr", "tma"])
def test_persistent_plain_gemm_matches_reference(device, b_tma):
    """The persistent tile loop without a fused epilogue: the previous kernel's result."""
    gen, seed = fresh_generator()
    m, e, top_k, k, n = 37, 8, 2, 64, 96
    config = make_config(16, 32, 32, 2)
    weights, ids, unused = routing("hot", m, e, top_k, gen)
    a = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    w = random_weights(e, n, k, torch.bfloat16, gen, unused)
    ref = fused_moe_gemm_reference(a, w, ids, top_k)
    a, w, weights, ids = (t.to(device) for t in (a, w, weights, ids))
    align = moe_align_block_size(ids, config["BLOCK_SIZE_M"], e)
    c = torch.full((m * top_k, n), NAN, dtype=torch.bfloat16, device=device)
    ff.invoke_fused_gemm(a, w, c, weights, *align, top_k=top_k, config=config, gated=False, accumulate=False,
                         persistent=True, b_tma=b_tma)
    assert not torch.isnan(c).any(), f"seed {seed}"
    assert rel_error(c, ref) < TOLERANCE, f"seed {seed}"


@pytest.mark.parametrize("fuse_act, fuse_sum, persistent, interleaved", [
    (True, False, False, False), (False, True, False, False), (True, True, False, False),
    (True, True, True, False), (True, False, False, True), (True, True, True, True)],
    ids=["act", "sum", "act+sum", "act+sum+persistent", "act-il", "act-il+sum+persistent"])
@pytest.mark.parametrize("kind", ["uniform", "hot"])
def test_fused_layer_matches_reference(monkeypatch, device, fuse_act, fuse_sum, persistent, interleaved, kind):
    seed, (hidden, w1, w2, weights, ids) = small_layer(kind)
    ref = fused_moe_reference(hidden, w1, w2, weights, ids)
    w1_used = ff.interleave_gate_up(w1) if interleaved else w1
    args = [t.to(device) for t in (hidden, w1_used, w2, weights, ids)]
    with poisoned_buffers(monkeypatch):
        out = ff.fused_moe_fused(*args, config=make_config(16, 64, 32, 2), config2=make_config(32, 32, 32, 1),
                                 fuse_act=fuse_act, fuse_sum=fuse_sum, persistent=persistent,
                                 w1_interleaved=interleaved)
    assert out.shape == hidden.shape and out.dtype == torch.bfloat16
    assert not torch.isnan(out).any(), f"NaN in the layer output (seed {seed})"
    err = rel_error(out, ref)
    assert err < TOLERANCE, f"relative error {err:.2e} (seed {seed})"


def test_interleave_gate_up():
    w1 = torch.arange(2 * 6 * 3, dtype=torch.float32).reshape(2, 6, 3)
    il = ff.interleave_gate_up(w1)
    assert il.shape == w1.shape and il.is_contiguous()
    for e in range(2):
        for j in range(3):
            assert torch.equal(il[e, 2 * j], w1[e, j]) and torch.equal(il[e, 2 * j + 1], w1[e, 3 + j])
    with pytest.raises(AdvisorError, match="even"):
        ff.interleave_gate_up(torch.zeros(2, 5, 3))


def test_fused_gemm_rejects_bad_operands(device):
    config = make_config(16, 32, 32, 1)
    ids = torch.tensor([[0, 1], [1, 2]], dtype=torch.int32, device=device)
    weights = torch.full((2, 2), 0.5, device=device)
    align = moe_align_block_size(ids, 16, 3)
    bf = dict(dtype=torch.bfloat16, device=device)
    a, w1 = torch.zeros(2, 32, **bf), torch.zeros(3, 64, 32, **bf)

    def call(a, w, c, cfg=config, gated=True, accumulate=False):
        ff.invoke_fused_gemm(a, w, c, weights, *align, top_k=2, config=cfg, gated=gated, accumulate=accumulate)

    with pytest.raises(AdvisorError, match="writes torch.float32"):
        call(torch.zeros(4, 32, **bf), torch.zeros(3, 64, 32, **bf), torch.zeros(2, 64, **bf), gated=False,
             accumulate=True)
    with pytest.raises(AdvisorError, match="gate and up halves"):
        call(a, torch.zeros(3, 63, 32, **bf), torch.zeros(4, 31, **bf))
    with pytest.raises(AdvisorError, match="BLOCK_SIZE_N >= 32"):
        call(a, w1, torch.zeros(4, 32, **bf), cfg=make_config(16, 16, 32, 1))
    with pytest.raises(AdvisorError, match="columns"):
        call(a, w1, torch.zeros(4, 64, **bf))
    with pytest.raises(AdvisorError, match="hidden sizes differ"):
        call(torch.zeros(2, 48, **bf), w1, torch.zeros(4, 32, **bf))
    with pytest.raises(AdvisorError, match="gated=True"):
        ff.invoke_fused_gemm(a, w1, torch.zeros(4, 64, **bf), weights, *align, top_k=2, config=config, gated=False,
                             accumulate=False, interleaved=True)


def test_persistent_grid_covers_the_sms_and_no_more_than_the_tiles():
    big = make_config(128, 256, 64, 32, num_warps=8, num_stages=3)
    small = make_config(16, 64, 64, 1, num_warps=4, num_stages=3)
    assert ff.ctas_per_sm(big) == 1  # 48 KB x 2 buffers and a 128-register accumulator per thread
    assert ff.ctas_per_sm(small) > 1
    assert ff.persistent_grid(4096, 7168, big, gated=True, num_sms=132) == (132,)
    # Few tiles: one program per tile of the worst routing, none that could only exit.
    assert ff.persistent_grid(256, 7168, big, gated=True, num_sms=132) == (2 * math.ceil(7168 / 128),)
    assert ff.gemm_grid(256, 7168, big, gated=True) == (2 * 56,)
    assert ff.gemm_grid(256, 7168, big, gated=False) == (2 * 28,)


# ------------------------------------------------------------------------------------------------
# Each variant compiles for sm_90 (Hopper: wgmma, TMA), with 4 and 8 warps, without spilling.
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("gemm, variant", [(1, "fused"), (1, "fused-persistent"), (1, "persistent"),
                                           (1, "fused-il"), (1, "fused-il-persistent"),
                                           (2, "fused"), (2, "fused-persistent")])
@pytest.mark.parametrize("warps", [4, 8], ids=["w4", "w8"])
def test_variant_compiles_for_sm90(gemm, variant, warps):
    """8 warps: 128x256 tiles for GEMM1 (two consumer warpgroups); 128x128 for the accumulating GEMM2,
    whose float32 atomics epilogue spills 8 bytes at 128x256 in the persistent loop (Triton 3.9)."""
    from ceilings.compile import compile_launch
    from kernels.moe_bench import MoEGemmSpec, describe_fused_launch

    k, n = (4096, 14336) if gemm == 1 else (7168, 4096)
    spec = MoEGemmSpec(8, 2, k, n, 1024, gemm=gemm)
    tiles = (64, 128, 64, 8) if warps == 4 else (128, 256 if gemm == 1 else 128, 64, 32)
    config = make_config(*tiles, num_warps=warps, num_stages=3)
    compiled = compile_launch(describe_fused_launch(spec, config, variant), arch=90)
    assert compiled.local_bytes == 0, f"{variant} spills with {config.label()}"
    assert "HGMMA" in compiled.sass, f"{variant} with {config.label()} did not use wgmma"
    assert ("RED" in compiled.sass or "ATOM" in compiled.sass) == (gemm == 2 and variant.startswith("fused"))
    assert "UTMALDG" in compiled.sass  # weights through TMA


@pytest.mark.parametrize("kind", ["uniform", "hot"])
def test_layer_with_triton_align_equals_the_torch_align_path(device, kind):
    """Both aligns give identical routing tables, so the layer's output is the same bit for bit; GEMM2's M
    block differs from GEMM1's (the Triton align then scatters the one count twice)."""
    seed, (hidden, w1, w2, weights, ids) = small_layer(kind)
    args = [t.to(device) for t in (hidden, ff.interleave_gate_up(w1), w2, weights, ids)]
    outs = [ff.fused_moe_fused(*args, config=make_config(16, 64, 32, 2), config2=make_config(32, 32, 32, 1),
                               fuse_sum=False, w1_interleaved=True, align=align) for align in ("triton", "torch")]
    assert torch.equal(outs[0], outs[1]), f"seed {seed}"
    ref = fused_moe_reference(hidden, w1, w2, weights, ids)
    assert rel_error(outs[0], ref) < TOLERANCE, f"seed {seed}"
    with pytest.raises(AdvisorError, match="align"):
        ff.fused_moe_fused(*args, config=make_config(16, 64, 32, 2), w1_interleaved=True, align="cub")
