"""The exact demand of kernels/fused_moe_fused.py's variants (kernels/moe_fused_demand.py) and `advisor
diagnose` across them, on cases whose answer is known by construction."""

from __future__ import annotations

import json
import math

import pytest

from advisor.advice.diagnose import diagnose_ceiling
from advisor.advice.diagnose_causes import staged_bytes_per_k_step
from advisor.advice.diagnose_compare import compare
from advisor.advice.diagnose_l2 import weight_reuse
from advisor.advice.subjects import FamilySubject
from ceilings.errors import AdvisorError
from ceilings.hardware import resolve_gpu
from ceilings.launch import Config
from ceilings.roofline import roofline
from kernels import fused_moe_fused as ff
from kernels.family import family_named
from kernels.moe_bench import MoEGemmSpec
from kernels.moe_demand import moe_gemm_demand
from kernels.moe_fused_demand import FusedMoEGemmSpec, fused_gemm_demand, variant_spec

MIXTRAL_G1 = MoEGemmSpec(8, 2, 4096, 14336, 4096)          # Mixtral TP2 GEMM1 (N = gate + up)
QWEN3_G1 = MoEGemmSpec(128, 8, 2048, 1536, 1024)           # Qwen3-MoE TP4 GEMM1
MIXTRAL_G2 = MoEGemmSpec(8, 2, 7168, 4096, 4096, gemm=2)   # Mixtral TP2 GEMM2
BIG = Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 32}, 8, 3)
SMALL = Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}, 4, 3)


def _demand(spec, variant, config):
    return fused_gemm_demand(variant_spec(spec, variant), config)


def _diagnosis(spec, variant, config, us, gpu_name="h100"):
    gpu, family = resolve_gpu(gpu_name), family_named("moe")
    vspec = variant_spec(spec, variant, gpu.spec.sms)
    subject = FamilySubject(family, vspec, gpu, config, f"case [{variant}]")
    ceiling = roofline(family.demand(vspec, config, gpu.arch), gpu.rates, config.to_dict())
    return diagnose_ceiling(subject, config, ceiling, us, read_sass=False)


@pytest.mark.parametrize("spec", [MIXTRAL_G1, QWEN3_G1])
@pytest.mark.parametrize("config", [BIG, SMALL], ids=["128x256", "64x128"])
def test_persistent_launches_programs_over_the_real_tiles_and_none_only_exits(spec, config):
    before, after = _demand(spec, "previous", config), _demand(spec, "persistent", config)
    assert before.ctas > before.active_ctas                       # the worst-routing grid has exit-only CTAs
    programs = ff.persistent_grid(math.ceil(before.ctas / math.ceil(spec.n / config["BLOCK_SIZE_N"]))
                                  * config["BLOCK_SIZE_M"], spec.n, config, False, 132)[0]
    assert after.ctas == programs == 132 * ff.ctas_per_sm(config) <= after.active_ctas
    assert after.active_ctas == before.active_ctas                # the same tiles, looped over
    dx = _diagnosis(spec, "persistent", config, 5000.0)
    assert dx.estimate("exit-only CTAs") == 0.0
    assert _diagnosis(spec, "previous", config, 5000.0).estimate("exit-only CTAs") > 0.0


def test_persistent_programs_only_exit_where_the_tiles_are_fewer():
    # Qwen3 TP4 at M=1: 8 pairs, two of them on one expert: 7 M blocks x 12 N blocks of real tiles; the
    # worst routing (8 experts) gives 8 x 12, fewer than the SMs hold, so that is the grid.
    spec = variant_spec(MoEGemmSpec(128, 8, 2048, 1536, 1), "persistent")
    counts = [2, 1, 1, 1, 1, 1, 1] + [0] * 121
    d = fused_gemm_demand(spec, SMALL, 90, counts)
    assert (d.ctas, d.active_ctas) == (96, 84)


@pytest.mark.parametrize("spec, variant", [(MIXTRAL_G1, "persistent"), (QWEN3_G1, "persistent"),
                                           (MIXTRAL_G2, "fused-persistent")])
def test_the_persistent_grid_does_the_same_work_with_the_same_busiest_sm(spec, variant):
    """A variant that only changes the grid does the previous kernel's work; round-robin programs over
    equal tiles give the busiest SM ceil(tiles / SMs) tiles, as the hardware's scheduling of a grid does."""
    base = "previous" if variant == "persistent" else "fused"
    before, after = _demand(spec, base, BIG), _demand(spec, variant, BIG)
    for key in ("tensor", "lsu", "alu", "xu", "fma", "smem"):
        assert after.total(key) == before.total(key)
        assert after.busiest_sm_work(key, 132) == before.busiest_sm_work(key, 132)
    assert (after.l2_bytes, after.dram_bytes) == (before.l2_bytes, before.dram_bytes)
    b, a = _diagnosis(spec, base, BIG, 3000.0), _diagnosis(spec, variant, BIG, 3000.0)
    assert a.estimate("tail wave") == b.estimate("tail wave") and a.ideal_us == b.ideal_us


def test_previous_is_the_previous_kernels_demand_and_the_fused_kernel_keeps_its_k_loop():
    counts = [900, 1100, 1000, 1050, 950, 1000, 1100, 900]
    plain = variant_spec(MIXTRAL_G1, "previous")
    assert type(plain) is MoEGemmSpec and plain == MIXTRAL_G1
    assert fused_gemm_demand(plain, BIG, 90, counts) == moe_gemm_demand(MIXTRAL_G1, BIG, 90, counts)
    base = moe_gemm_demand(MIXTRAL_G1, BIG, 90, counts)
    il = fused_gemm_demand(variant_spec(MIXTRAL_G1, "fused-il"), BIG, 90, counts)
    assert (il.total("tensor"), il.smem_bytes_per_cta, il.ctas, il.active_ctas) == \
        (base.total("tensor"), base.smem_bytes_per_cta, base.ctas, base.active_ctas)


@pytest.mark.parametrize("variant", ["fused", "fused-il"])
def test_fused_activation_halves_what_the_epilogue_writes(variant):
    spec, size = variant_spec(MIXTRAL_G1, variant), 2
    before, after = _demand(MIXTRAL_G1, "previous", BIG), fused_gemm_demand(spec, BIG)
    assert spec.output_tile_bytes(BIG) == 128 * 256 * size / 2
    c_bytes = MIXTRAL_G1.pairs * MIXTRAL_G1.n * size
    assert before.dram_bytes - after.dram_bytes == pytest.approx(c_bytes / 2)
    assert before.l2_bytes - after.l2_bytes == pytest.approx(c_bytes / 2)
    b, a = _diagnosis(MIXTRAL_G1, "previous", BIG, 5000.0), _diagnosis(MIXTRAL_G1, variant, BIG, 5000.0)
    assert a.estimate("epilogue") == pytest.approx(b.estimate("epilogue") / 2)


def test_two_dots_read_the_a_tile_twice():
    spec = variant_spec(MIXTRAL_G1, "fused")
    assert spec.mma_dots == 2 and variant_spec(MIXTRAL_G1, "fused-il").mma_dots == 1
    k_padded = 4096
    assert fused_gemm_demand(spec, BIG).smem_bytes_per_cta - _demand(MIXTRAL_G1, "fused-il", BIG).smem_bytes_per_cta \
        == 128 * k_padded * 2
    # 128 x 256 on two warpgroups: one dot reads 2 slices x (64 + 256) rows; two dots of 128 columns
    # read 2 x 2 slices x (64 + 128); the tiles are written once either way.
    written = (128 + 256) * 64 * 2
    assert staged_bytes_per_k_step(128, 256, 64, 8, 2) == written + 2 * (64 + 256) * 64 * 2
    assert staged_bytes_per_k_step(128, 256, 64, 8, 2, dots=2) == written + 2 * 2 * (64 + 128) * 64 * 2


def test_fused_sum_writes_four_byte_atomics_and_the_output_once():
    spec = variant_spec(MIXTRAL_G2, "fused")
    before, after = _demand(MIXTRAL_G2, "previous", BIG), fused_gemm_demand(spec, BIG)
    assert spec.accumulate and spec.output_tile_bytes(BIG) == 128 * 256 * 4
    assert spec.output_dram_bytes() == MIXTRAL_G2.m * MIXTRAL_G2.n * 4
    pairs_c = MIXTRAL_G2.pairs * MIXTRAL_G2.n * 2
    assert after.dram_bytes - before.dram_bytes == pytest.approx(2 * MIXTRAL_G2.m * MIXTRAL_G2.n * 4 - pairs_c)
    assert after.l2_bytes - before.l2_bytes == pytest.approx(MIXTRAL_G2.pairs * MIXTRAL_G2.n * 2)
    b, a = _diagnosis(MIXTRAL_G2, "previous", BIG, 3000.0), _diagnosis(MIXTRAL_G2, "fused", BIG, 3000.0)
    assert a.estimate("epilogue") == pytest.approx(2 * b.estimate("epilogue"))


def test_the_persistent_order_runs_over_the_real_m_blocks():
    runs = [3, 5, 2]
    prev = weight_reuse(MIXTRAL_G1, SMALL, (64, 128, 64), 10 * 112, 20 * 112, runs)
    pers = weight_reuse(variant_spec(MIXTRAL_G1, "persistent"), SMALL, (64, 128, 64), 10 * 112, 132, runs)
    assert prev[1] == 20 and pers[1] == 10 and prev[0] == pers[0] == runs


@pytest.mark.parametrize("variant, gemm, needle", [
    ("fused-ll", 1, "choose one of previous, fused, fused-il"),
    ("fused-il", 2, "GEMM1 only"),
    ("persistent", 2, "use 'fused-persistent'"),
])
def test_a_variant_the_kernel_does_not_have_is_refused(variant, gemm, needle):
    with pytest.raises(AdvisorError, match=needle):
        variant_spec(MIXTRAL_G2 if gemm == 2 else MIXTRAL_G1, variant)


def test_precheck_refuses_a_gated_tile_under_32_columns():
    narrow = Config({"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}, 4, 3)
    gpu, family = resolve_gpu("h100"), family_named("moe")
    assert "gate and up halves" in family.precheck(narrow, gpu.spec, variant_spec(MIXTRAL_G1, "fused-il"))
    assert family.precheck(narrow, gpu.spec, MIXTRAL_G1) is None
    assert isinstance(variant_spec(MIXTRAL_G1, "fused-il", 114), FusedMoEGemmSpec)


def test_compare_across_variants_names_what_changed_by_estimate():
    before = _diagnosis(MIXTRAL_G1, "previous", BIG, 1700.0)
    after = _diagnosis(MIXTRAL_G1, "fused-il", BIG, 1700.0)
    cmp = compare(before, after)
    assert cmp.removed_by_estimate.name == "epilogue"
    assert cmp.to_json()["after"]["launch"] == "case [fused-il]"
    same = compare(before, _diagnosis(MIXTRAL_G1, "persistent", BIG, 1400.0))
    assert same.removed_by_estimate.name == "exit-only CTAs"  # the only estimate the grid lowers


def run_cli(args, capsys):
    from tui.entry import main

    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_compares_the_previous_kernel_with_a_variant(capsys):
    code, out, err = run_cli(["diagnose", "kernels/fused_moe.py", "--preset", "mixtral-8x7b", "--tp", "2",
                              "--tokens", "4096", "--config", "M128 N256 K64 G1 w8 s4", "--measured", "2425.42",
                              "--compare-variant", "persistent", "--compare-measured", "2102.74",
                              "--format", "json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["after"]["launch"].endswith("[persistent]") and doc["after"]["config"] == doc["before"]["config"]
    # Both kernels have a loop probe (benchmarks/moe_loop_probe.py): the probe's causes count on both sides,
    # but at this config they move by less than two probes of one K loop differ (RESULTS 35), so the only
    # estimate named is the one the grid lowers by construction.
    assert doc["one_sided"] == [] and sorted(doc["unresolved"]) == ["CTA ramp", "K-loop rate"]
    assert doc["removed_by_estimate"] == "exit-only CTAs"
    assert round(doc["time_saved_us"], 2) == 322.68


def test_the_persistent_ramp_change_is_the_two_probes_round_costs_apart():
    from advisor.advice import diagnose_loop as dl
    from advisor.advice.diagnose import _launch
    from advisor.advice.diagnose_causes import SUSTAINED_CLOCK_FRACTION

    config = Config({**BIG.params, "GROUP_SIZE_M": 1}, 8, 4)
    before = _diagnosis(MIXTRAL_G1, "previous", config, 2425.42)
    after = _diagnosis(MIXTRAL_G1, "persistent", config, 2102.74)
    gpu, family = resolve_gpu("h100"), family_named("moe")
    timings = []
    for variant, us in (("previous", 2425.42), ("persistent", 2102.74)):
        spec = variant_spec(MIXTRAL_G1, variant, gpu.spec.sms)
        launch = _launch(FamilySubject(family, spec, gpu, config, variant), config)
        # Each side's tensor load (padded work at the calibrated rate over its time) sets its clock.
        tensor_us = family.demand(spec, config, 90).total("tensor") / (gpu.rates.tensor_tflops["bf16"] * 1e6)
        timings.append(dl.probe_timing(launch, 90, (128, 256, 64), 8, 4, gpu.rates.launch_us,
                                       SUSTAINED_CLOCK_FRACTION[90], gpu.spec.name,
                                       tensor_us / (us - gpu.rates.launch_us)))
    # One CTA per SM on both sides, tensor-bound: every round's fixed cost shows, the busiest SM's tiles in
    # rounds (the same count on both sides, by construction of the persistent grid).
    ctas = fused_gemm_demand(variant_spec(MIXTRAL_G1, "persistent", gpu.spec.sms), config).active_ctas
    rounds = math.ceil(ctas / gpu.spec.sms)
    change = compare(before, after)
    ramp = next(c for c in change.causes if c.name == "CTA ramp")
    assert ramp.removed_estimate_us == pytest.approx(timings[0].ramp_us(rounds) - timings[1].ramp_us(rounds))


def test_cli_refuses_a_variant_for_another_kernel(capsys):
    code, _, err = run_cli(["diagnose", "kernels/gemm.py", "--shape", "1024,1024,1024", "--variant", "fused-il"],
                           capsys)
    assert code == 2 and "--variant names a fused-MoE kernel variant" in err
