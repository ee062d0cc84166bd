"""The fused-MoE kernel and layer against their float32 references, and the align step's invariants.

Without a GPU these run under Triton's CPU interpreter (see conftest.py), so the shapes are small.
Every test draws fresh random inputs; the seed is printed in failure messages to reproduce a run.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections import Counter, defaultdict

import pytest
import torch

from ceilings.errors import AdvisorError
from ceilings.launch import Config
from kernels.fused_moe import (
    CONFIG_SPACE,
    config_space,
    fused_moe,
    fused_moe_gemm_reference,
    fused_moe_reference,
    invoke_fused_moe_gemm,
    max_padded_tokens,
    moe_align_block_size,
    route,
)

NAN = float("nan")
TOLERANCE = 1e-2


def fresh_generator() -> tuple[torch.Generator, int]:
    seed = int.from_bytes(os.urandom(8), "little") >> 1
    return torch.Generator().manual_seed(seed), seed


def make_config(bm: int, bn: int, bk: int, gm: int, num_warps: int = 4, num_stages: int = 2) -> Config:
    return Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": gm},
                  num_warps=num_warps, num_stages=num_stages)


def make_routing(m: int, num_experts: int, top_k: int, active: int, gen: torch.Generator):
    """Top-k routing onto `active` randomly chosen experts (distinct per token); the rest get no tokens."""
    assert top_k <= active <= num_experts
    experts = torch.randperm(num_experts, generator=gen)[:active]
    choice = torch.rand(m, active, generator=gen).argsort(dim=1)[:, :top_k]
    ids = experts[choice].to(torch.int32)
    weights = torch.softmax(torch.randn(m, top_k, generator=gen), dim=1)
    unused = sorted(set(range(num_experts)) - set(experts.tolist()))
    return weights, ids, unused


def random_weights(e: int, n: int, k: int, dtype, gen, unused) -> torch.Tensor:
    """[E, N, K] weights scaled so outputs stay O(1); experts that get no tokens are all NaN, so a
    kernel that reads them shows it."""
    w = torch.randn(e, n, k, generator=gen) / math.sqrt(k)
    w[unused] = NAN
    return w.to(dtype)


@contextlib.contextmanager
def poisoned_buffers(monkeypatch):
    """The layer allocates its intermediate and output buffers with torch.empty: inside this block they
    start as NaN, so a tile the kernel forgets to write shows in the output."""
    real_empty = torch.empty

    def poisoned_empty(*shape, **kwargs):
        t = real_empty(*shape, **kwargs)
        return t.fill_(NAN) if t.is_floating_point() else t

    with monkeypatch.context() as patch:
        patch.setattr(torch, "empty", poisoned_empty)
        yield


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    ref = ref.float().cpu()
    return (torch.linalg.norm(out.float().cpu() - ref) / torch.linalg.norm(ref)).item()


# ------------------------------------------------------------------------------------------------
# The GEMM alone.
# ------------------------------------------------------------------------------------------------
GEMM_CASES = [
    # dtype, M, E, top_k, active experts, K, N, (BM, BN, BK, GM), mul_routed_weight
    pytest.param(torch.bfloat16, 1, 8, 2, 8, 64, 64, (16, 32, 32, 1), False, id="bf16-M1-k2-even"),
    pytest.param(torch.bfloat16, 5, 4, 1, 3, 96, 48, (16, 32, 64, 1), True, id="bf16-M5-k1-oddK-oddN-idle"),
    pytest.param(torch.bfloat16, 37, 16, 8, 10, 64, 80, (32, 64, 32, 4), True, id="bf16-M37-k8-G4-idle"),
    pytest.param(torch.bfloat16, 37, 8, 2, 3, 80, 96, (64, 32, 32, 2), False, id="bf16-M37-BM64-oddK-idle"),
    pytest.param(torch.bfloat16, 20, 12, 2, 12, 48, 64, (64, 64, 64, 1), True, id="bf16-M20-K<BK"),
    pytest.param(torch.float16, 37, 6, 2, 6, 128, 64, (16, 64, 64, 8), True, id="fp16-M37-G8"),
    pytest.param(torch.float16, 5, 16, 8, 9, 72, 40, (32, 32, 64, 1), False, id="fp16-M5-k8-oddK-idle"),
    pytest.param(torch.float16, 1, 4, 1, 1, 32, 32, (64, 64, 32, 2), True, id="fp16-M1-one-expert"),
]


@pytest.mark.parametrize("b_tma", [False, True], ids=["ptr", "tma"])
@pytest.mark.parametrize("dtype, m, e, top_k, active, k, n, tiles, mul", GEMM_CASES)
def test_gemm_matches_reference(device, dtype, m, e, top_k, active, k, n, tiles, mul, b_tma):
    """Both ways of reading the weights: pointer loads, and TMA descriptors over the [E * N, K] view
    (whose tiles past N read the next expert's rows, NaN for idle experts here, into unstored columns)."""
    gen, seed = fresh_generator()
    config = make_config(*tiles)
    weights, ids, unused = make_routing(m, e, top_k, active, gen)
    a = torch.randn(m, k, generator=gen).to(dtype)
    w = random_weights(e, n, k, dtype, gen, unused)
    ref = fused_moe_gemm_reference(a, w, ids, top_k, weights if mul else None)

    a, w, weights, ids = (t.to(device) for t in (a, w, weights, ids))
    align = moe_align_block_size(ids, config["BLOCK_SIZE_M"], e)
    c = torch.full((m * top_k, n), NAN, dtype=dtype, device=device)
    out = invoke_fused_moe_gemm(a, w, c, weights, *align, top_k=top_k, mul_routed_weight=mul, config=config,
                                b_tma=b_tma)

    assert out is c
    assert not torch.isnan(c).any(), f"rows or columns left unwritten (seed {seed})"
    err = rel_error(c, ref)
    assert err < TOLERANCE, f"relative error {err:.2e} with {config.label()} (seed {seed})"


def test_gemm_strided_a_and_3d_c(device):
    """A as a column slice of a wider tensor (row stride > K, NaN past K) and C given as [M, top_k, N]."""
    gen, seed = fresh_generator()
    m, e, top_k, k, n = 13, 6, 2, 80, 48
    config = make_config(16, 32, 32, 2)
    weights, ids, unused = make_routing(m, e, top_k, e - 1, gen)
    wide = torch.full((m, k + 24), NAN)
    wide[:, :k] = torch.randn(m, k, generator=gen)
    wide = wide.to(torch.bfloat16).to(device)
    a = wide[:, :k]
    assert a.stride(0) == k + 24
    w = random_weights(e, n, k, torch.bfloat16, gen, unused).to(device)
    weights, ids = weights.to(device), ids.to(device)

    c = torch.full((m, top_k, n), NAN, dtype=torch.bfloat16, device=device)
    align = moe_align_block_size(ids, config["BLOCK_SIZE_M"], e)
    invoke_fused_moe_gemm(a, w, c, weights, *align, top_k=top_k, mul_routed_weight=True, config=config)

    ref = fused_moe_gemm_reference(a.cpu(), w.cpu(), ids.cpu(), top_k, weights.cpu())
    assert not torch.isnan(c).any(), f"seed {seed}"
    err = rel_error(c.view(m * top_k, n), ref)
    assert err < TOLERANCE, f"relative error {err:.2e} (seed {seed})"


def test_gemm_rejects_bad_operands(device):
    config = make_config(16, 32, 32, 1)
    ids = torch.tensor([[0, 1], [1, 2]], dtype=torch.int32, device=device)
    weights = torch.full((2, 2), 0.5, device=device)
    align = moe_align_block_size(ids, 16, 3)

    def call(a, w, c):
        invoke_fused_moe_gemm(a, w, c, weights, *align, top_k=2, mul_routed_weight=False, config=config)

    bf = dict(dtype=torch.bfloat16, device=device)
    with pytest.raises(AdvisorError, match="bf16 or fp16"):
        call(torch.zeros(2, 32, device=device), torch.zeros(3, 32, 32, device=device),
             torch.zeros(4, 32, device=device))
    with pytest.raises(AdvisorError, match="bf16 or fp16"):
        call(torch.zeros(2, 32, **bf), torch.zeros(3, 32, 32, dtype=torch.float16, device=device),
             torch.zeros(4, 32, **bf))
    with pytest.raises(AdvisorError, match="hidden sizes differ"):
        call(torch.zeros(2, 48, **bf), torch.zeros(3, 32, 32, **bf), torch.zeros(4, 32, **bf))
    with pytest.raises(AdvisorError, match="columns"):
        call(torch.zeros(2, 32, **bf), torch.zeros(3, 32, 32, **bf), torch.zeros(4, 40, **bf))


# ------------------------------------------------------------------------------------------------
# The whole layer.
# ------------------------------------------------------------------------------------------------
LAYER_CASES = [
    # dtype, M, E, top_k, active experts, H, I, config (tiles or None), config2 (tiles or None)
    pytest.param(torch.bfloat16, 1, 8, 2, 8, 64, 32, None, None, id="bf16-M1-default-rule"),
    pytest.param(torch.bfloat16, 37, 8, 2, 5, 96, 48, (32, 32, 32, 2), (16, 64, 64, 1),
                 id="bf16-M37-two-configs"),
    pytest.param(torch.bfloat16, 5, 16, 8, 9, 64, 40, (16, 64, 64, 1), None, id="bf16-M5-k8-idle"),
    pytest.param(torch.float16, 37, 4, 1, 4, 80, 64, (64, 32, 64, 1), None, id="fp16-M37-k1-oddH"),
    pytest.param(torch.float16, 20, 16, 8, 16, 64, 48, (16, 32, 32, 4), (32, 64, 32, 1), id="fp16-M20-k8"),
]


@pytest.mark.parametrize("dtype, m, e, top_k, active, h, inter, tiles, tiles2", LAYER_CASES)
def test_layer_matches_reference(monkeypatch, device, dtype, m, e, top_k, active, h, inter, tiles, tiles2):
    gen, seed = fresh_generator()
    weights, ids, unused = make_routing(m, e, top_k, active, gen)
    hidden = torch.randn(m, h, generator=gen).to(dtype)
    w1 = random_weights(e, 2 * inter, h, dtype, gen, unused)
    w2 = random_weights(e, h, inter, dtype, gen, unused)
    ref = fused_moe_reference(hidden, w1, w2, weights, ids)
    assert not torch.isnan(ref).any()

    config = make_config(*tiles) if tiles else None
    config2 = make_config(*tiles2) if tiles2 else None
    args = [t.to(device) for t in (hidden, w1, w2, weights, ids)]
    with poisoned_buffers(monkeypatch):
        out = fused_moe(*args, config=config, config2=config2)

    assert out.shape == (m, h) and out.dtype == dtype
    assert not torch.isnan(out).any(), f"NaN in the layer output (seed {seed})"
    err = rel_error(out, ref)
    assert err < TOLERANCE, f"relative error {err:.2e} (seed {seed})"


def test_layer_with_no_tokens(device):
    hidden = torch.zeros(0, 64, dtype=torch.bfloat16, device=device)
    w1 = torch.zeros(4, 64, 64, dtype=torch.bfloat16, device=device)
    w2 = torch.zeros(4, 64, 32, dtype=torch.bfloat16, device=device)
    out = fused_moe(hidden, w1, w2, torch.zeros(0, 2, device=device),
                    torch.zeros(0, 2, dtype=torch.int32, device=device))
    assert out.shape == (0, 64)


def _layer_tensors(m=4, e=4, top_k=2, h=64, inter=32):
    hidden = torch.zeros(m, h, dtype=torch.bfloat16)
    w1 = torch.zeros(e, 2 * inter, h, dtype=torch.bfloat16)
    w2 = torch.zeros(e, h, inter, dtype=torch.bfloat16)
    weights = torch.full((m, top_k), 1.0 / top_k)
    ids = torch.arange(m * top_k, dtype=torch.int32).reshape(m, top_k) % e
    return hidden, w1, w2, weights, ids


@pytest.mark.parametrize("which, bad", [
    pytest.param("w1", torch.zeros(4, 64, 65, dtype=torch.bfloat16), id="w1-wrong-hidden"),
    pytest.param("w1", torch.zeros(4, 60, 64, dtype=torch.bfloat16), id="w1-not-2I"),
    pytest.param("w2", torch.zeros(5, 64, 32, dtype=torch.bfloat16), id="w2-wrong-experts"),
    pytest.param("w2", torch.zeros(4, 48, 32, dtype=torch.bfloat16), id="w2-wrong-hidden"),
    pytest.param("w2", torch.zeros(4, 64, 31, dtype=torch.bfloat16), id="w2-wrong-intermediate"),
    pytest.param("hidden", torch.zeros(64, dtype=torch.bfloat16), id="hidden-1d"),
    pytest.param("w1", torch.zeros(64, 64, dtype=torch.bfloat16), id="w1-2d"),
    pytest.param("ids", torch.zeros(3, 2, dtype=torch.int32), id="ids-wrong-tokens"),
    pytest.param("ids", torch.zeros(4, 3, dtype=torch.int32), id="ids-weights-differ"),
])
def test_layer_rejects_bad_shapes(which, bad):
    tensors = dict(zip(("hidden", "w1", "w2", "weights", "ids"), _layer_tensors(), strict=True))
    tensors[which] = bad
    with pytest.raises(AdvisorError):
        fused_moe(*tensors.values())
    with pytest.raises(AdvisorError):
        fused_moe_reference(*tensors.values())


# ------------------------------------------------------------------------------------------------
# moe_align_block_size against a plain-Python recomputation.
# ------------------------------------------------------------------------------------------------
def check_align(topk_ids: torch.Tensor, block_m: int, num_experts: int, result) -> None:
    sorted_ids, expert_ids, post_padded = result
    assert sorted_ids.dtype == expert_ids.dtype == post_padded.dtype == torch.int32
    assert post_padded.shape == (1,)
    flat = [int(x) for x in topk_ids.reshape(-1).tolist()]
    pairs = len(flat)
    sentinel = pairs
    s = sorted_ids.tolist()
    blocks = expert_ids.tolist()
    total = int(post_padded.item())

    bound = max_padded_tokens(pairs, num_experts, block_m)
    assert len(s) % block_m == 0
    assert len(s) <= -(-max(bound, 1) // block_m) * block_m
    assert len(blocks) == len(s) // block_m

    counts = Counter(flat)
    padded = {e: -(-c // block_m) * block_m for e, c in counts.items()}
    assert total == sum(padded.values())
    assert total <= bound and total % block_m == 0

    # Every pair exactly once, everything else the sentinel; nothing real past the padded count.
    assert all(0 <= t <= sentinel for t in s)
    assert sorted(t for t in s if t != sentinel) == list(range(pairs))
    assert all(t == sentinel for t in s[total:])

    # Each expert's pairs: a run in increasing pair order that starts on a block boundary and is
    # followed by padding up to a multiple of block_m.
    position = {t: i for i, t in enumerate(s) if t != sentinel}
    for e, count in counts.items():
        mine = [p for p, x in enumerate(flat) if x == e]
        start = position[mine[0]]
        assert start % block_m == 0, f"expert {e} starts at {start}"
        assert s[start:start + count] == mine
        assert all(t == sentinel for t in s[start + count:start + padded[e]])

    # expert_ids: each block of the padded region names the expert of every pair in it, and each
    # expert that receives pairs owns exactly padded/block_m blocks.
    owned = defaultdict(int)
    for b in range(total // block_m):
        e = blocks[b]
        assert 0 <= e < num_experts
        owned[e] += 1
        for t in s[b * block_m:(b + 1) * block_m]:
            if t != sentinel:
                assert flat[t] == e, f"block {b} is expert {e} but holds pair {t} of expert {flat[t]}"
    assert dict(owned) == {e: padded[e] // block_m for e in counts}


@pytest.mark.parametrize("m, top_k, e, active, block_m", [
    (0, 2, 4, 4, 16),
    (1, 1, 4, 4, 16),
    (1, 8, 16, 8, 16),
    (5, 2, 8, 3, 16),
    (37, 2, 8, 8, 32),
    (37, 8, 16, 10, 64),
    (100, 6, 64, 64, 16),
    (64, 1, 1, 1, 128),
    (300, 8, 128, 30, 64),
    (513, 2, 8, 8, 256),
])
@pytest.mark.parametrize("id_dtype", [torch.int32, torch.int64])
def test_align_invariants(device, m, top_k, e, active, block_m, id_dtype):
    gen, seed = fresh_generator()
    _, ids, _ = make_routing(m, e, top_k, active, gen)
    ids = ids.to(id_dtype).to(device)
    check_align(ids.cpu(), block_m, e, moe_align_block_size(ids, block_m, e))


@pytest.mark.parametrize("block_m", [16, 64])
def test_align_invariants_repeated_experts(device, block_m):
    """The align step does not need distinct experts per token."""
    gen, _ = fresh_generator()
    ids = torch.randint(0, 8, (50, 4), generator=gen, dtype=torch.int32)
    ids[:, 1] = ids[:, 0]
    check_align(ids, block_m, 8, moe_align_block_size(ids.to(device), block_m, 8))


def test_align_checker_catches_a_broken_layout():
    ids = torch.tensor([[0, 1], [1, 0], [2, 1]], dtype=torch.int32)
    good = moe_align_block_size(ids, 4, 3)
    check_align(ids, 4, 3, good)
    sorted_ids, expert_ids, total = (t.clone() for t in good)
    sorted_ids[[0, 1]] = sorted_ids[[1, 0]]  # two pairs of one expert out of order
    with pytest.raises(AssertionError):
        check_align(ids, 4, 3, (sorted_ids, expert_ids, total))
    sorted_ids, expert_ids, total = (t.clone() for t in good)
    expert_ids[0] = 2
    with pytest.raises(AssertionError):
        check_align(ids, 4, 3, (sorted_ids, expert_ids, total))


def test_align_rejects_flat_ids():
    with pytest.raises(AdvisorError):
        moe_align_block_size(torch.zeros(8, dtype=torch.int32), 16, 4)


# ------------------------------------------------------------------------------------------------
# Routing and the config space.
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("m, e, top_k", [(64, 16, 1), (64, 16, 2), (64, 16, 8), (7, 8, 8), (1, 128, 8)])
def test_route(m, e, top_k):
    weights, ids = route(m, e, top_k)
    assert ids.shape == weights.shape == (m, top_k)
    assert ids.dtype == torch.int32 and weights.dtype == torch.float32
    assert ((ids >= 0) & (ids < e)).all()
    for row in ids.tolist():
        assert len(set(row)) == top_k, f"repeated expert in {row}"
    assert (weights > 0).all()
    torch.testing.assert_close(weights.sum(dim=1), torch.ones(m), atol=1e-6, rtol=0)


def test_route_follows_its_generator():
    _, seed = fresh_generator()
    first = route(16, 8, 2, generator=torch.Generator().manual_seed(seed))
    second = route(16, 8, 2, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])


def test_config_space():
    space = config_space()
    assert len(space) == 1920
    assert len(set(space)) == 1920
    assert math.prod(len(v) for v in CONFIG_SPACE.values()) == 1920
    for config in space:
        entry = config.to_engine_entry()
        assert list(entry) == ["BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M",
                               "num_warps", "num_stages"]
        for key, value in entry.items():
            assert value in CONFIG_SPACE[key]
    assert config_space() == space  # a fixed order


# ------------------------------------------------------------------------------------------------
# On a GPU: a real model's shape over configs of the tuners' space.
# ------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 64, 300])
def test_layer_on_gpu_preset_shape(m):
    from kernels.moe_presets import get_preset

    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        pytest.skip("TRITON_INTERPRET is set; this test is for compiled kernels")
    shape = get_preset("mixtral-8x7b").shape(8)
    gen, seed = fresh_generator()
    e, top_k, h, inter = shape.num_experts, shape.top_k, shape.hidden, shape.intermediate
    weights, ids, unused = make_routing(m, e, top_k, e, gen)
    hidden = torch.randn(m, h, generator=gen).to(torch.bfloat16)
    w1 = random_weights(e, 2 * inter, h, torch.bfloat16, gen, unused)
    w2 = random_weights(e, h, inter, torch.bfloat16, gen, unused)
    ref = fused_moe_reference(hidden, w1, w2, weights, ids)
    args = [t.cuda() for t in (hidden, w1, w2, weights, ids)]
    for tiles, warps, stages in [((16, 64, 128, 1), 4, 4), ((64, 128, 64, 16), 4, 4),
                                 ((128, 128, 64, 16), 8, 4), ((32, 128, 256, 1), 4, 2)]:
        config = make_config(*tiles, num_warps=warps, num_stages=stages)
        out = fused_moe(*args, config=config)
        assert not torch.isnan(out).any()
        err = rel_error(out, ref)
        assert err < TOLERANCE, f"relative error {err:.2e} with {config.label()} (seed {seed})"
