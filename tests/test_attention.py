"""The shipped attention forward against a float32 reference (CPU interpreter) and its exact demand."""

from __future__ import annotations

import os

import pytest
import torch

from ceilings.errors import AdvisorError
from ceilings.launch import Config
from kernels.attention import attention, attention_demand, attention_reference, describe_launch


def cfg(bm, bn, w=4, s=1):
    return Config({"BLOCK_M": bm, "BLOCK_N": bn}, w, s)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq, dim, config", [(50, 32, cfg(32, 32)), (40, 16, cfg(16, 32))])
def test_attention_matches_reference(device, dtype, causal, seq, dim, config):
    seed = int.from_bytes(os.urandom(4), "little")
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 3, seq, dim, generator=gen).to(dtype).to(device) for _ in range(3))
    out = torch.full((2, 3, seq, dim), float("nan"), dtype=dtype, device=device)
    attention(q, k, v, causal, config, out=out)
    ref = attention_reference(q, k, v, causal)
    assert not torch.isnan(out).any(), f"unwritten outputs (seed {seed})"
    err = (torch.linalg.norm(out.float().cpu() - ref.cpu()) / torch.linalg.norm(ref.cpu())).item()
    assert err < 1e-2, f"relative error {err:.2e} (seed {seed})"


def test_attention_rejects_bad_input():
    x = torch.zeros(1, 1, 8, 24, dtype=torch.float16)
    with pytest.raises(AdvisorError, match="head_dim 24"):
        attention(x, x, x)
    with pytest.raises(AdvisorError, match="one shape"):
        attention(x, x[..., :16], x)


def test_attention_demand_by_hand():
    d = attention_demand(8, 1000, 128, cfg(128, 64, 8, 2))
    assert d.ctas == 8 * 8 and d.tensor_kind == "wgmma"
    assert d.tensor_flops_per_cta == 2 * 2 * 128 * 64 * 128 * 16  # 16 key blocks of 64
    assert d.instructions_per_cta["xu"] == (128 * 64 * 16 + 128 * 16) / 32
    assert d.dram_bytes == 4 * 8 * 1000 * 128 * 2
    causal = attention_demand(8, 1024, 128, cfg(128, 64, 8, 2), causal=True)
    assert attention_demand(8, 1024, 128, cfg(128, 64, 8, 2), "bfloat16", 90, True).tensor_flops_per_cta == \
        causal.tensor_flops_per_cta
    # query block i visits 2 (i + 1) key blocks of 64: the mean over 8 blocks is 9 of 16
    full = attention_demand(8, 1024, 128, cfg(128, 64, 8, 2))
    assert causal.tensor_flops_per_cta == pytest.approx(full.tensor_flops_per_cta * 9 / 16)


def test_generic_and_exact_models_agree_on_tensor_flops():
    from ceilings.demand import generic_demand

    config = cfg(128, 64, 8, 2)
    exact = attention_demand(16, 2048, 128, config)
    generic = generic_demand(describe_launch(16, 2048, 128, config))
    assert generic.ctas == exact.ctas
    assert generic.tensor_flops_per_cta == pytest.approx(exact.tensor_flops_per_cta, rel=0.02)
