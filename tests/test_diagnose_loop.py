"""The loop-probe causes of `advisor diagnose` (advisor/advice/diagnose_loop.py) on launches whose losses
are known by construction: a probe step slower than the calibrated rate by a set amount, a fixed cost
per CTA that is or is not hidden under DRAM, row segments read slower than contiguous bytes."""

from __future__ import annotations

import pytest

from advisor.advice import diagnose_loop as dl
from advisor.advice.diagnose import diagnose
from advisor.advice.subjects import FamilySubject
from ceilings.hardware import resolve_gpu
from ceilings.launch import Config
from kernels.family import family_named
from kernels.moe_bench import MoEGemmSpec


def timing(step_us=1.0, fixed_us=2.0, c=1, segments=None):
    return dl.LoopTiming(c, step_us, fixed_us, "probe GPU", segments or {})


def test_loop_rate_is_the_probe_loop_past_the_binding_work_and_staging():
    # 4 CTAs x 10 steps at 1 us per step of 2 co-resident CTAs = 20 us of loop against 15 us of work.
    est, why = dl.loop_rate(timing(step_us=1.0, c=2), busiest_ctas=4, trips=10, busiest_main_us=15.0,
                            staging_us=0.0)
    assert est == pytest.approx(5.0)
    assert "20.0 us against 15.0 us" in why
    # Staging already named 3 us of it: only the rest is the loop's.
    assert dl.loop_rate(timing(step_us=1.0, c=2), 4, 10, 15.0, 3.0)[0] == pytest.approx(2.0)
    # A loop faster than the binding work loses nothing to its rate.
    assert dl.loop_rate(timing(step_us=1.0, c=2), 4, 10, 25.0, 0.0)[0] == 0.0


def test_cta_ramp_is_exposed_fixed_cost_past_what_fill_and_epilogue_named():
    # SM-bound: 5 exposed rounds of 2 us = 10 us, all on the SM's timeline; fill and epilogue named 4.
    est, _ = dl.cta_ramp(timing(fixed_us=2.0), exposed=5, named_us=4.0, sm_loop_us=100.0, busiest_main_us=100.0)
    assert est == pytest.approx(6.0)


def test_cta_ramp_hides_under_dram_with_slack():
    # DRAM binds at 120 us; the SM's loops take 100 us, so 20 of its 30 us of ramps hide under DRAM.
    est, _ = dl.cta_ramp(timing(fixed_us=3.0), exposed=10, named_us=0.0, sm_loop_us=100.0, busiest_main_us=120.0)
    assert est == pytest.approx(10.0)
    assert dl.cta_ramp(timing(fixed_us=1.0), 10, 0.0, 100.0, 150.0)[0] == 0.0


def test_dram_slab_reads_cost_the_segment_rate_over_the_contiguous_one_where_dram_binds():
    probe = timing(segments={"contiguous": 4.0, "128": 2.0})
    # 1 MB at 2 TB/s is 0.5 us against 0.25 us contiguous: 0.25 us more, DRAM-bound (DRAM 10 us, work 5 us).
    est, why = dl.dram_slab_reads(probe, 128, 1e6, dram_us=10.0, binding_us=5.0)
    assert est == pytest.approx(0.25)
    assert "128 B row segments" in why
    # Hidden under the binding work, and unknown for a segment the probe did not read.
    assert dl.dram_slab_reads(probe, 128, 1e6, dram_us=10.0, binding_us=20.0)[0] == 0.0
    assert dl.dram_slab_reads(probe, 256, 1e6, 10.0, 5.0)[0] == 0.0


def test_probe_timing_takes_the_step_and_intercept_at_the_sustained_clock():
    from kernels.moe_bench import describe_launch

    config = Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 32},
                    num_warps=8, num_stages=3)
    launch = describe_launch(MoEGemmSpec(8, 2, 4096, 14336, 1024), config)
    doc = next(d for d in dl._probe_files(90) if d["kernel"] == launch.kernel)
    us = doc["loops"]["M128 N256 K64 w8 s3"]["us"]
    t = dl.probe_timing(launch, 90, (128.0, 256.0, 64.0), 8, 3, launch_us=1.0, clock_fraction=0.5)
    step = (us[1] - us[0]) / ((2048 - 512) / 64)
    assert t.step_us == pytest.approx(step / 0.5)
    assert t.fixed_us == pytest.approx((us[0] - 8 * step - 1.0) / 0.5)
    # Another loop shape, another compute capability, or another kernel: no probe.
    assert dl.probe_timing(launch, 90, (128, 256, 32), 8, 3, 1.0, 0.5) is None
    assert dl.probe_timing(launch, 80, (128, 256, 64), 8, 3, 1.0, 0.5) is None


def test_the_diagnosis_names_the_probe_causes_and_never_passes_the_gap():
    gpu, family = resolve_gpu("h100"), family_named("moe")
    spec = MoEGemmSpec(8, 2, 4096, 14336, 1024)
    config = Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 32},
                    num_warps=8, num_stages=3)
    dx = diagnose(FamilySubject(family, spec, gpu, config, "mixtral"), config, 538.9)
    names = [c.name for c in dx.causes]
    assert {"K-loop rate", "CTA ramp", "DRAM slab reads"} <= set(names)
    assert names.index("K-loop rate") > names.index("operand staging")
    assert sum(c.us for c in dx.causes) == pytest.approx(dx.gap_us)
    assert dx.cause("K-loop rate") > 0 and dx.cause("CTA ramp") > 0
    assert any("loop probe measured on" in n for n in dx.notes)
    # A config the probe never ran is diagnosed without them, and says so.
    other = Config({**config.params, "BLOCK_SIZE_K": 32}, num_warps=8, num_stages=3)
    dx = diagnose(FamilySubject(family, spec, gpu, other, "mixtral"), other, 700.0)
    assert "K-loop rate" not in [c.name for c in dx.causes]
    assert any("no loop probe" in n for n in dx.notes)
