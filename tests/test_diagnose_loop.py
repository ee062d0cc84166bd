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
    # The probe's step also holds each step's product scaled (fp8 block scales): named before, not again.
    est, why = dl.loop_rate(timing(step_us=1.0, c=2), 4, 10, 15.0, 1.0, scaling_us=3.0)
    assert est == pytest.approx(1.0) and "3.0 us of MMA-result scaling" in why
    causes = dict((n, e) for n, e, _ in dl.loop_causes(timing(step_us=1.0, c=2), {"MMA-result scaling": 5.0}, 4, 10,
                                                        1, 15.0, 15.0))
    assert causes["K-loop rate"] == pytest.approx(0.0)


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


BIG = Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 32},
             num_warps=8, num_stages=3)


def synthetic_doc(gpu="GPU A", step=0.5, first=4.0, further=3.0, launch=1.0, probe_mhz=None, sweep_mhz=None,
                  kernel="fused_moe_kernel", constexprs=None, two_rounds=True):
    """A probe file whose times are built from a known step, first- and further-round cost and launch floor
    (K = 512 and 2048 at BLOCK_K 64: 8 and 32 trips; R = 2 rounds take two rounds of steps)."""
    def t(trips, rounds):
        return launch + first + (rounds - 1) * further + rounds * trips * step
    row = {"ctas_per_sm": 1, "us": [t(8, 1), t(32, 1)]}
    if two_rounds:
        row["us_r2"] = [t(8, 2), t(32, 2)]
    clock = {"probe_median_mhz": probe_mhz, "sweep_protocol_mhz": sweep_mhz} if probe_mhz else {}
    return {"gpu": gpu, "arch": 90, "kernel": kernel, "constexprs": constexprs or {"B_TMA": True},
            "k_steps": [512, 2048], "clock": clock, "dram_segment_tbs": {}, "loops": {"M128 N256 K64 w8 s3": row}}


def with_probes(monkeypatch, *docs):
    monkeypatch.setattr(dl, "_probe_files", lambda arch: tuple(d for d in docs if d["arch"] == arch))


def previous_launch():
    from kernels.moe_bench import describe_launch

    return describe_launch(MoEGemmSpec(8, 2, 4096, 14336, 1024), BIG)


def test_probe_timing_recovers_step_first_and_further_rounds(monkeypatch):
    with_probes(monkeypatch, synthetic_doc(step=0.5, first=4.0, further=3.0, launch=1.0))
    t = dl.probe_timing(previous_launch(), 90, (128, 256, 64), 8, 3, launch_us=1.0, clock_fraction=0.5)
    # No clock recorded: the times are taken at the given fraction of the boost clock (x 1 / 0.5).
    assert (t.step_us, t.fixed_us, t.next_fixed_us) == pytest.approx((1.0, 8.0, 6.0))
    assert t.ramp_us(1) == pytest.approx(8.0) and t.ramp_us(4) == pytest.approx(8.0 + 3 * 6.0)
    assert "0.50 of the boost clock" in t.clock
    # A probe of one round only charges the first round's cost for every round (the older rule).
    with_probes(monkeypatch, synthetic_doc(two_rounds=False))
    t = dl.probe_timing(previous_launch(), 90, (128, 256, 64), 8, 3, 1.0, 0.5)
    assert t.next_fixed_us is None and t.ramp_us(4) == pytest.approx(4 * 8.0)
    # Another loop shape, another compute capability: no probe.
    assert dl.probe_timing(previous_launch(), 90, (128, 256, 32), 8, 3, 1.0, 0.5) is None
    assert dl.probe_timing(previous_launch(), 80, (128, 256, 64), 8, 3, 1.0, 0.5) is None


def test_a_recorded_clock_scales_the_probe_to_the_sweeps_clock(monkeypatch):
    # Probe at 2,000 MHz, sweeps' protocol at 1,600: every time is 1.25x longer at the sweeps' clock.
    with_probes(monkeypatch, synthetic_doc(step=0.4, first=2.0, further=1.0, probe_mhz=2000.0, sweep_mhz=1600.0))
    t = dl.probe_timing(previous_launch(), 90, (128, 256, 64), 8, 3, 1.0, clock_fraction=0.5)
    assert (t.step_us, t.fixed_us, t.next_fixed_us) == pytest.approx((0.5, 2.5, 1.25))
    assert "2000 MHz" in t.clock and "1600 MHz" in t.clock


def test_the_clock_drop_follows_the_tensor_load_up_to_the_heavy_launchs(monkeypatch):
    doc = synthetic_doc(step=0.4, first=2.0, further=1.0, probe_mhz=2000.0, sweep_mhz=1600.0)
    doc["clock"]["sweep_protocol_tensor_load"] = 0.8
    with_probes(monkeypatch, doc)

    def step(load):
        return dl.probe_timing(previous_launch(), 90, (128, 256, 64), 8, 3, 1.0, 0.5, None, load).step_us
    # Half the heavy launch's load: half the clock drop (x 1.125 of the x 1.25); at or past it, all of it;
    # no load given: all of it; no tensor work: none.
    assert step(0.4) == pytest.approx(0.4 * 1.125)
    assert step(0.8) == pytest.approx(0.5) and step(1.2) == pytest.approx(0.5) and step(None) == pytest.approx(0.5)
    assert step(0.0) == pytest.approx(0.4)


def test_the_gpus_own_probe_comes_first_then_one_of_the_same_arch(monkeypatch):
    with_probes(monkeypatch, synthetic_doc(gpu="GPU A", step=1.0), synthetic_doc(gpu="GPU B", step=2.0))
    pick = {name: dl.probe_timing(previous_launch(), 90, (128, 256, 64), 8, 3, 1.0, 1.0, name).gpu
            for name in ("GPU A", "GPU B", "GPU C")}
    assert pick == {"GPU A": "GPU A", "GPU B": "GPU B", "GPU C": "GPU A"}
    assert "taken as the same SM" in dl.probe_note(dl.probe_timing(previous_launch(), 90, (128, 256, 64), 8, 3,
                                                                   1.0, 1.0, "GPU C"), "GPU C")


def test_each_kernel_variant_reads_its_own_probe(monkeypatch):
    from kernels.moe_bench import describe_fused_launch

    flags = {"GATED": False, "INTERLEAVED": False, "ACCUMULATE": False, "PERSISTENT": True, "B_TMA": True}
    with_probes(monkeypatch, synthetic_doc(step=1.0),
                synthetic_doc(step=3.0, kernel="fused_moe_fused_kernel", constexprs=flags),
                synthetic_doc(step=5.0, kernel="fused_moe_fused_kernel", constexprs={**flags, "PERSISTENT": False}))
    spec = MoEGemmSpec(8, 2, 4096, 14336, 1024)
    steps = [dl.probe_timing(launch, 90, (128, 256, 64), 8, 3, 1.0, 1.0).step_us
             for launch in (previous_launch(), describe_fused_launch(spec, BIG, "persistent"))]
    assert steps == pytest.approx([1.0, 3.0])
    # A variant no probe ran (the gated persistent kernel here) gets none.
    assert dl.probe_timing(describe_fused_launch(spec, BIG, "fused-il-persistent"), 90, (128, 256, 64), 8, 3,
                           1.0, 1.0) is None


def test_a_launch_read_from_its_source_finds_its_probe_by_flags_in_its_config(monkeypatch):
    # The capture files constexprs named like tiles (BLOCK_SCALED, TILE_SCALES) with the config: a probe keyed by
    # them is found there, and one of the other scheme is not taken for it.
    from ceilings.launch import Launch

    flags = {"GATED": True, "ACCUMULATE": False, "B_TMA": True}
    with_probes(monkeypatch,
                synthetic_doc(step=2.0, kernel="fp8_kernel", constexprs={**flags, "BLOCK_SCALED": True,
                                                                         "TILE_SCALES": True}),
                synthetic_doc(step=4.0, kernel="fp8_kernel", constexprs={**flags, "BLOCK_SCALED": True,
                                                                         "TILE_SCALES": False}))

    def launch(tiles):
        config = Config({**BIG.params, "BLOCK_SCALED": True, "TILE_SCALES": tiles}, 8, 3)
        return Launch("k.py", "fp8_kernel", (1,), constexprs=tuple(flags.items()), config=config)
    steps = [dl.probe_timing(launch(t), 90, (128, 256, 64), 8, 3, 1.0, 1.0).step_us for t in (True, False)]
    assert steps == pytest.approx([2.0, 4.0])


def test_the_shipped_probes_cover_both_gpus_and_every_gemm1_variant():
    docs = dl._probe_files(90)
    seen = {(d["gpu"], d.get("variant", "previous")) for d in docs}
    for gpu in ("NVIDIA H100 80GB HBM3", "NVIDIA H200"):
        for variant in ("previous", "fused", "fused-il", "persistent", "fused-persistent", "fused-il-persistent"):
            assert (gpu, variant) in seen
    for d in docs:
        assert d["clock"]["probe_median_mhz"] > d["clock"]["sweep_protocol_mhz"] > 0
        assert all("us_r2" in row for row in d["loops"].values())


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
    # Estimates past the gap are said to be: measured barely over the ideal, the same causes name far more.
    estimates = sum(c.estimate_us for c in dx.causes if c.name != "unexplained")
    tight = diagnose(FamilySubject(family, spec, gpu, config, "mixtral"), config, dx.ideal_us + estimates / 2)
    over = sum(c.estimate_us for c in tight.causes if c.name != "unexplained") / tight.gap_us
    assert over > 1.1 and any(f"sum to {over:.2f}x the gap" in n for n in tight.notes)
    assert sum(c.us for c in tight.causes) == pytest.approx(tight.gap_us)
    assert any("x the gap" in n for n in dx.notes) == (estimates > 1.1 * dx.gap_us)
    # A config the probe never ran is diagnosed without them, and says so.
    other = Config({**config.params, "BLOCK_SIZE_K": 32}, num_warps=8, num_stages=3)
    dx = diagnose(FamilySubject(family, spec, gpu, other, "mixtral"), other, 700.0)
    assert "K-loop rate" not in [c.name for c in dx.causes]
    assert any("no loop probe" in n for n in dx.notes)


def test_resolution_bands_scale_with_the_loop_and_the_rounds():
    t = dl.LoopTiming(2, 1.0, 4.0, "probe GPU", {}, 3.0, "", {"step_rel": 0.05, "first_us": 0.5, "further_us": 0.25})
    # 6 CTAs x 10 steps at 1 us per step of 2 co-resident CTAs: 30 us of loop, 5% of it; 4 rounds: 0.5 + 3 x 0.25.
    assert dl.resolution_bands(t, busiest_ctas=6, trips=10, exposed=4) == pytest.approx(
        {"K-loop rate": 1.5, "CTA ramp": 1.25})
    assert dl.resolution_bands(dl.LoopTiming(2, 1.0, 4.0, "probe GPU", {}), 6, 10, 4) == {}


def test_compare_does_not_name_a_probe_cause_moved_less_than_its_resolution():
    from advisor.advice.diagnose import Cause, Diagnosis
    from advisor.advice.diagnose_compare import compare, render_compare

    def dx(ramp, k_loop, time_us):
        causes = [Cause("epilogue", 5.0, 5.0, ""), Cause("CTA ramp", ramp, ramp, "", 3.0),
                  Cause("K-loop rate", k_loop, k_loop, "", 10.0)]
        named = sum(c.us for c in causes)
        return Diagnosis("case", "GPU", BIG, time_us, "measured", 100.0, 100.0,
                         [*causes, Cause("unexplained", time_us - 100.0 - named, 0.0, "")])
    # The ramp falls by 2 us (under its 3 us resolution), the K loop by 8 (under 10): neither is named.
    cmp = compare(dx(20.0, 50.0, 200.0), dx(18.0, 42.0, 190.0))
    assert cmp.removed is None and cmp.removed_by_estimate is None
    assert [c.name for c in cmp.unresolved] == ["CTA ramp", "K-loop rate"]
    assert any("not named: CTA ramp -2.0" in line or "CTA ramp +2.0" in line for line in render_compare(cmp))
    # Past its resolution the ramp is named; the K loop still is not.
    cmp = compare(dx(20.0, 50.0, 200.0), dx(14.0, 42.0, 186.0))
    assert cmp.removed.name == "CTA ramp" and cmp.removed_by_estimate.name == "CTA ramp"
    assert [c.name for c in cmp.unresolved] == ["K-loop rate"]
    assert cmp.to_json()["unresolved"] == ["K-loop rate"]
