"""The operand-staging cause of `advisor diagnose` on dense GEMMs whose shared-memory traffic is known by
construction: 132 tiles (one CTA per SM, no tail) of 64 x 256 on two warpgroups (they split N, so each
wgmma is m64n128k16 and re-reads the A slice), of 128 x 256 (two warpgroups along M: exactly the 32 FLOP
per byte shared memory feeds the tensor pipe) and of 16 x 64 (warp-level MMAs: not estimated)."""

from __future__ import annotations

import pytest

from advisor.advice.diagnose import diagnose
from advisor.advice.diagnose_causes import staged_bytes_per_k_step, wgmma_layout
from tests.test_diagnose import GPU, SMS, check_sums, gemm

LONG = 10_000.0


@pytest.mark.parametrize(("tile", "warps", "layout"), [
    ((64, 256), 8, (1, 128)),    # one 64-row slice: the second warpgroup takes half of N
    ((128, 256), 8, (2, 256)),   # one warpgroup per 64 rows
    ((256, 128), 8, (2, 128)),   # two warpgroups along M, each two slices
    ((128, 128), 4, (1, 128)),   # one warpgroup, two slices
    ((64, 512), 4, (1, 256)),    # an instruction is at most 256 wide
])
def test_warpgroups_go_along_m_first(tile, warps, layout):
    assert wgmma_layout(*tile, warps) == layout


def test_staged_bytes_count_writes_and_every_instructions_reads():
    # 64 x 256 x 64 on 8 warps: tiles written (64 + 256) x 64 x 2 B; two m64n128k16 per k16 step, each
    # reading 64 + 128 rows of 16 columns: (64 + 128) x 64 x 2 B per instruction column over the K step.
    assert staged_bytes_per_k_step(64, 256, 64, 8, 2) == (64 + 256) * 64 * 2 + 2 * (64 + 128) * 64 * 2
    # 128 x 256 on 8 warps: exactly 2 x 128 x 256 x 64 FLOP at 32 FLOP per byte.
    assert staged_bytes_per_k_step(128, 256, 64, 8, 2) == 2 * 128 * 256 * 64 / 32


def staging(d):
    return next((c for c in d.causes if c.name == "operand staging"), None)


def test_a_64_row_tile_on_two_warpgroups_waits_on_shared_memory():
    subject = gemm("768,2816,4096", bm=64, bn=256, bk=64, warps=8)  # 12 x 11 = 132 tiles
    (ceiling,) = subject.ceilings([subject.current])
    assert ceiling.active_ctas == SMS and ceiling.ctas_per_sm == 1 and ceiling.binding == "tensor"
    rate = GPU.rates.tensor_tflops["bf16"] * 1e12 / SMS        # one SM's calibrated tensor rate
    smem_rate = rate / (GPU.spec.tensor_flops["bf16"] / GPU.spec.smem_bytes_per_clock)
    trips = 4096 // 64
    staged_us = trips * ((64 + 256) * 64 * 2 + 2 * (64 + 128) * 64 * 2) / smem_rate * 1e6
    tensor_us = 2 * 64 * 256 * 4096 / rate * 1e6
    d = diagnose(subject, time_us=LONG)
    cause = staging(d)
    assert cause.estimate_us == pytest.approx(staged_us - tensor_us, rel=1e-9)
    assert cause.estimate_us == pytest.approx(0.375 * tensor_us, rel=1e-9)  # 32 / (2^21 / 90112) - 1
    assert "m64n128k16" in cause.why and "23.3 FLOP per byte" in cause.why
    check_sums(d)


def test_a_128_by_256_tile_on_two_warpgroups_loses_nothing_to_staging():
    d = diagnose(gemm("1536,2816,4096", bm=128, bn=256, bk=64, warps=8), time_us=LONG)
    assert staging(d).estimate_us == pytest.approx(0.0, abs=1e-6)
    check_sums(d)


def test_warp_level_mmas_get_no_staging_estimate():
    subject = gemm("2112,704,4096", bm=16, bn=64, bk=64, warps=4, stages=3)
    (ceiling,) = subject.ceilings([subject.current])
    assert ceiling.demand.tensor_kind == "mma_sync"
    assert staging(diagnose(subject, time_us=LONG)) is None


def test_staging_is_capped_by_the_gap():
    subject = gemm("768,2816,4096", bm=64, bn=256, bk=64, warps=8)
    d = diagnose(subject, time_us=LONG)
    short = d.ideal_us + 0.5 * sum(c.estimate_us for c in d.causes if c.name != "unexplained")
    d = diagnose(subject, time_us=short)
    check_sums(d)
    assert d.unexplained_us == pytest.approx(0.0, abs=1e-9) and staging(d).us < staging(d).estimate_us
