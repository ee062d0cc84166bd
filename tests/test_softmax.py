"""The shipped row softmax against torch (CPU interpreter) and its exact demand model."""

from __future__ import annotations

import os

import pytest
import torch

from ceilings.errors import AdvisorError
from ceilings.launch import Config
from kernels.softmax import describe_launch, softmax, softmax_demand, softmax_reference


def cfg(block, rows_per_program=1, warps=4):
    return Config({"BLOCK_N": block, "ROWS_PER_PROGRAM": rows_per_program}, warps, 1)


@pytest.mark.parametrize("dtype, tol", [(torch.bfloat16, 1e-2), (torch.float16, 1e-2), (torch.float32, 1e-5)])
@pytest.mark.parametrize("rows, cols, config", [
    (7, 200, cfg(256)),            # one chunk with a masked tail
    (9, 1000, cfg(256, 2)),        # several chunks, rows not a multiple of rows per program
    (3, 64, cfg(256, 4)),          # fewer rows than one program handles
])
def test_softmax_matches_reference(device, dtype, tol, rows, cols, config):
    seed = int.from_bytes(os.urandom(4), "little")
    x = (torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed)) * 4).to(dtype).to(device)
    y = torch.full_like(x, float("nan"))
    softmax(x, config, out=y)
    ref = softmax_reference(x)
    assert not torch.isnan(y).any(), f"unwritten outputs (seed {seed})"
    err = (torch.linalg.norm(y.float().cpu() - ref.cpu()) / torch.linalg.norm(ref.cpu())).item()
    assert err < tol, f"relative error {err:.2e} (seed {seed})"
    assert torch.allclose(y.float().sum(dim=1).cpu(), torch.ones(rows), atol=2e-2)


def test_softmax_rejects_bad_input():
    with pytest.raises(AdvisorError, match="row-major 2-D"):
        softmax(torch.zeros(4, 8).t())


def test_softmax_demand_by_hand():
    one = softmax_demand(1000, 3000, cfg(4096, 2, 8))
    assert one.ctas == 500 and one.dram_bytes == 2 * 1000 * 3000 * 2
    assert one.instructions_per_cta["xu"] == 2 * 4096 / 32  # one exp2 per element of two rows
    multi = softmax_demand(1000, 3000, cfg(1024))
    assert multi.instructions_per_cta["xu"] == 3 * 3072 / 32  # three chunks, three exp2 per element
    assert multi.l2_bytes == 3 * 1000 * 3000 * 2  # read twice, written once


@pytest.mark.parametrize("rows, cols, config", [(4096, 8192, cfg(1024, 1, 8)), (4096, 2048, cfg(2048, 2, 8))])
def test_generic_count_of_exp2_matches_the_exact_model(rows, cols, config):
    from ceilings.demand import generic_demand

    exact = softmax_demand(rows, cols, config)
    generic = generic_demand(describe_launch(rows, cols, config))
    assert generic.ctas == exact.ctas
    # every exp2 is one MUFU.EX2 per lane: per CTA, the generic count is at least the exact one and close to it
    assert exact.instructions_per_cta["xu"] <= generic.instructions_per_cta["xu"] <= \
        1.25 * exact.instructions_per_cta["xu"]
