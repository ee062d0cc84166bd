"""The shipped dense GEMM against a float32 reference (CPU interpreter), and its exact demand model."""

from __future__ import annotations

import os

import pytest
import torch

from ceilings.errors import AdvisorError
from ceilings.launch import Config
from kernels.gemm import describe_launch, gemm, gemm_demand, gemm_reference


def cfg(bm, bn, bk, g=1, w=4, s=2):
    return Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": g}, w, s)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m, n, k, config", [
    (37, 50, 64, cfg(16, 32, 32)),          # partial tiles in M and N, even K
    (64, 64, 80, cfg(32, 32, 32, g=8)),     # K not a multiple of BLOCK_K
    (5, 96, 40, cfg(16, 64, 64)),           # skinny M, K smaller than BLOCK_K
])
def test_gemm_matches_reference(device, dtype, m, n, k, config):
    seed = int.from_bytes(os.urandom(4), "little")
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=gen).to(dtype).to(device)
    b = torch.randn(k, n, generator=gen).to(dtype).to(device)
    c = torch.full((m, n), float("nan"), dtype=dtype, device=device)
    gemm(a, b, config, out=c)
    ref = gemm_reference(a, b)
    assert not torch.isnan(c).any(), f"unwritten outputs (seed {seed})"
    err = (torch.linalg.norm(c.float().cpu() - ref.cpu()) / torch.linalg.norm(ref.cpu())).item()
    assert err < 1e-2, f"relative error {err:.2e} (seed {seed})"


def test_gemm_rejects_bad_operands():
    with pytest.raises(AdvisorError, match="A \\[M, K\\] and B \\[K, N\\]"):
        gemm(torch.zeros(4, 8, dtype=torch.float16), torch.zeros(4, 8, dtype=torch.float16))
    with pytest.raises(AdvisorError, match="fp16 or bf16"):
        gemm(torch.zeros(4, 8), torch.zeros(8, 4))


def test_gemm_demand_by_hand():
    d = gemm_demand(1000, 300, 100, cfg(128, 128, 64, w=8, s=3))
    assert d.ctas == 8 * 3 and d.tensor_flops_per_cta == 2 * 128 * 128 * 128 and d.tensor_kind == "wgmma"
    assert d.dram_bytes == 2 * (1000 * 100 + 100 * 300 + 1000 * 300)
    assert d.l2_bytes == 2 * (3 * 1000 * 100 + 8 * 300 * 100 + 1000 * 300)
    assert d.shared_bytes == 3 * 256 * 64 * 2


@pytest.mark.parametrize("m, n, k, config", [(2048, 1024, 512, cfg(128, 128, 64, w=8, s=3)),
                                             (16, 4096, 1024, cfg(16, 64, 128, w=4, s=4))])
def test_generic_and_exact_models_agree_on_tensor_flops(m, n, k, config):
    from ceilings.demand import generic_demand

    exact = gemm_demand(m, n, k, config)
    generic = generic_demand(describe_launch(m, n, k, config))
    assert generic.ctas == exact.ctas
    assert generic.tensor_flops_per_cta == pytest.approx(exact.tensor_flops_per_cta, rel=0.02)
    assert generic.tensor_kind == exact.tensor_kind
