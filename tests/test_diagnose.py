"""`advisor diagnose`: the gap between ideal and measured time split into causes, on launches whose
losses are known by construction (a tail of half a wave, CTAs that only exit, a short K loop, tile
padding at M=1, a 64-bit remainder), and on the shipped fused-MoE presets with RESULTS section 1's
measured times. Compiled for sm_90 without a GPU."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from advisor.advice import moe
from advisor.advice.ceiling import parse_config
from advisor.advice.diagnose import LOAD_LATENCY_CYCLES, diagnose, render_lines
from advisor.advice.diagnose_causes import load_latency_cycles
from advisor.advice.subjects import FamilySubject, LaunchSubject
from advisor.cli import main
from ceilings.errors import AdvisorError
from ceilings.hardware import resolve_gpu
from ceilings.launch import Config, Launch, TensorArg
from kernels.family import family_named

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "floor_kernels.py"
GPU = resolve_gpu("h100")
SMS = GPU.spec.sms
# The H100's load latencies in cycles at its boost clock: its calibration's pointer chase (benchmarks/RESULTS.md 65).
LATENCY, LATENCY_SOURCE = load_latency_cycles(GPU.calibration, LOAD_LATENCY_CYCLES[90], GPU.rates.clock_ghz * 1e9)
LONG = 10_000.0  # a measured time far above any estimate here: no cause is capped


def gemm(shape: str, bm=128, bn=256, bk=64, warps=8, stages=3, gpu=None) -> FamilySubject:
    family = family_named("gemm")
    config = Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, warps, stages)
    return FamilySubject(family, family.read_shape(shape), gpu or GPU, config)


def tensor_rate_per_sm(dtype: str) -> float:
    return GPU.rates.tensor_tflops[dtype] * 1e12 / SMS


def check_sums(d) -> None:
    assert all(c.us >= 0 for c in d.causes)
    assert sum(c.us for c in d.causes) == pytest.approx(d.gap_us, abs=1e-6)
    assert d.causes[-1].name == "unexplained"


def test_one_and_a_half_waves_lose_half_a_wave_to_the_tail():
    subject = gemm("2304,2816,4096")  # 18 x 11 = 198 tiles of 128 x 256, one CTA per SM: 1.5 waves
    d = diagnose(subject, time_us=LONG)
    (ceiling,) = subject.ceilings([subject.current])
    assert ceiling.active_ctas == 198 and ceiling.ctas_per_sm == 1
    per_cta_us = 2 * 128 * 256 * 4096 / tensor_rate_per_sm(ceiling.demand.tensor_dtype) * 1e6
    assert d.cause("padding") == pytest.approx(0.0, abs=1e-9)  # the tiles divide the problem
    assert d.cause("tail wave") == pytest.approx((2 - 198 / SMS) * per_cta_us, rel=1e-9)
    assert "busiest SM runs 2 CTAs against 1.50" in next(c.why for c in d.causes if c.name == "tail wave")
    check_sums(d)


def test_ctas_that_only_exit_cost_one_l2_round_trip_per_round_of_slots():
    tensors = (TensorArg.contiguous("x_ptr", (SMS, 1024), "float32"),
               TensorArg.contiguous("y_ptr", (SMS, 1024), "float32"))
    launch = Launch(str(FIXTURES), "guarded_rows", (2 * SMS,), tensors, {"n_rows": SMS, "n_cols": 1024, "use_exp": 0},
                    {}, Config({"BLOCK": 1024}, 4, 1))
    d = diagnose(LaunchSubject(launch, GPU), time_us=LONG)
    exit_only = next(c for c in d.causes if c.name == "exit-only CTAs")
    # Half the CTAs exit; many fit on an SM at once, so they take one round of slots.
    assert f"{SMS} of {2 * SMS} CTAs only exit: 1 round(s)" in exit_only.why
    assert exit_only.estimate_us == pytest.approx(LATENCY["l2"] / (GPU.rates.clock_ghz * 1e3))
    assert d.cause("padding") == 0.0
    check_sums(d)


def fill_drain_expected(subject: FamilySubject, bk=64) -> tuple[float, float]:
    """(fill/drain per CTA in us, the CTA's main-loop time in us) by hand: one load latency plus the
    shorter of a trip's load and a trip's MMAs; 132 tiles, one per SM, so each SM runs one CTA."""
    (ceiling,) = subject.ceilings([subject.current])
    dm = ceiling.demand
    trips = dm.tensor_flops_per_cta / (2 * 128 * 256 * bk)
    trip_s = 2 * 128 * 256 * bk / tensor_rate_per_sm(dm.tensor_dtype)
    load_s = (128 + 256) * bk * 2 / (GPU.rates.l2_tbs * 1e12 / SMS)
    frac = min(1.0, dm.dram_bytes / dm.l2_bytes)
    cycles = frac * LATENCY["dram"] + (1 - frac) * LATENCY["l2"]
    return (cycles / (GPU.rates.clock_ghz * 1e9) + min(load_s, trip_s)) * 1e6, trips * trip_s * 1e6


def test_fill_and_drain_weigh_against_the_trip_count():
    shares = []
    for k in (128, 8192):  # 2 trips of BLOCK_K = 64 against 128
        subject = gemm(f"1536,2816,{k}")  # 12 x 11 = 132 tiles: one CTA per SM, no tail
        fill, main_us = fill_drain_expected(subject)
        d = diagnose(subject, time_us=LONG)
        assert next(c.estimate_us for c in d.causes if c.name == "fill/drain") == pytest.approx(fill, rel=1e-9)
        assert d.cause("tail wave") == pytest.approx(0.0, abs=1e-9)
        shares.append(fill / main_us)
        check_sums(d)
    assert shares[0] > 30 * shares[1]  # a 2-trip loop is mostly fill and drain, a 128-trip loop hardly


def test_padding_at_one_token_costs_time_only_where_the_tensor_pipe_binds():
    family = moe.family()
    tuned = moe.gemm_subject("mixtral-8x7b", 1, 2, 1, GPU, parse_config("M16 N32 K128 G1 w4 s3", family))
    d = diagnose(tuned, time_us=80.0)  # RESULTS section 1: the tuned config's measured time
    padding = next(c for c in d.causes if c.name == "padding")
    # 2 pairs in 2 blocks of 16 rows: 15/16 of the tensor work is padding, but DRAM (the weights) binds.
    assert padding.us == 0.0 and "94% of the tensor work is tile padding, off the binding path" in padding.why
    check_sums(d)

    wide = moe.gemm_subject("mixtral-8x7b", 1, 2, 1, GPU, parse_config("M256 N128 K64 G1 w8 s3", family))
    d = diagnose(wide, time_us=LONG)
    (ceiling,) = wide.ceilings([wide.current])
    dm, chip = ceiling.demand, GPU.rates.tensor_tflops["bf16"] * 1e12
    padded_us = dm.active_ctas * dm.tensor_flops_per_cta / chip * 1e6
    ideal_us = max(wide.useful_flops() / chip * 1e6, ceiling.pipelines["dram"])
    assert padded_us > ceiling.pipelines["dram"]  # 256-row tiles for 1 row: the tensor pipe binds
    assert d.cause("padding") == pytest.approx(padded_us - ideal_us, rel=1e-9)
    assert d.ideal_us == pytest.approx(ideal_us + GPU.rates.launch_us, rel=1e-9)
    check_sums(d)


def test_a_64_bit_remainder_is_named_from_the_sass():
    tensors = (TensorArg.contiguous("x_ptr", (64 * 1024,), "float32"),
               TensorArg.contiguous("y_ptr", (64 * 1024,), "float32"))
    launch = Launch(str(FIXTURES), "wide_remainder", (64,), tensors, {"n_cols": 1000}, {},
                    Config({"BLOCK": 1024}, 4, 1))
    d = diagnose(LaunchSubject(launch, GPU), time_us=LONG)
    division = next(c for c in d.causes if c.name == "software division")
    assert division.us > 0 and "__cuda_sm20_rem_s64" in division.why
    check_sums(d)


# RESULTS section 1: the tuned configs' measured GEMM1 times on the H100, M >= 1024.
MEASURED = [("mixtral-8x7b", 2, 1024, "M128 N256 K64 G32 w8 s3", 538.9),
            ("mixtral-8x7b", 2, 4096, "M128 N256 K64 G32 w8 s4", 1669.3),
            ("qwen2-57b-a14b", 2, 1024, "M128 N256 K64 G1 w8 s4", 480.2),
            ("qwen2-57b-a14b", 2, 4096, "M128 N256 K64 G64 w8 s4", 1133.3),
            ("qwen3-30b-a3b", 4, 1024, "M64 N128 K64 G64 w8 s3", 79.8),
            ("qwen3-30b-a3b", 4, 4096, "M128 N128 K64 G1 w4 s3", 131.8)]


@pytest.mark.parametrize(("preset", "tp", "tokens", "config", "measured"), MEASURED)
def test_measured_presets_split_their_whole_gap(preset, tp, tokens, config, measured):
    subject = moe.gemm_subject(preset, tokens, tp, 1, GPU, parse_config(config, moe.family()))
    d = diagnose(subject, time_us=measured)
    check_sums(d)
    assert d.time_us == measured and d.basis == "measured"
    assert d.ideal_us <= d.ceiling_us + 1e-9 <= measured
    # What the model explains today (benchmarks/RESULTS.md reading of issue 16): padding and the tail
    # where the tensor pipe binds; the DRAM-bound M=1024 cases keep most of their gap unexplained.
    if d.ceiling_us > d.ideal_us + 1.0:
        assert d.cause("padding") + d.cause("tail wave") > 0.25 * d.gap_us


def test_the_issue_case_on_the_command_line(capsys):
    args = ["diagnose", "kernels/fused_moe.py", "--preset", "mixtral-8x7b", "--tp", "2", "--tokens", "1024",
            "--measured", "518"]
    assert main([*args, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["basis"] == "measured" and doc["time_us"] == 518.0
    assert sum(c["us"] for c in doc["causes"]) == pytest.approx(doc["gap_us"], abs=0.01)
    # 70% of the 182 us gap named today (padding 81, tail 28, epilogue, fill/drain); issue 16 asks 80%.
    assert doc["explained_share"] >= 0.65
    assert max(doc["causes"], key=lambda c: c["us"])["name"] == "padding"
    assert main(args) == 0
    text = capsys.readouterr().out
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "padding" in text and "unexplained" in text and " us " in text


def test_without_a_time_the_prediction_is_diagnosed():
    subject = gemm("2304,2816,4096")
    d = diagnose(subject)
    (cand,) = subject.predict([subject.current])
    assert d.basis == "predicted" and d.time_us == pytest.approx(cand.predicted_us)
    check_sums(d)
    assert all(len(line) <= 80 for line in render_lines(d))


@pytest.mark.parametrize(("extra", "message"), [
    (["--measured", "-3"], "--measured -3.0: give the launch's time in microseconds"),
    (["--measured", "nan"], "--measured nan"),
    (["--measure", "--measured", "5"], "not both"),
])
def test_bad_times_are_one_line_errors(capsys, extra, message):
    args = ["diagnose", "kernels/fused_moe.py", "--preset", "mixtral-8x7b", "--tokens", "16", *extra]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_config_that_cannot_run_is_refused():
    subject = gemm("2304,2816,4096")
    with pytest.raises(AdvisorError, match="cannot run"):
        diagnose(subject, Config({"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_M": 8}, 4, 5), 100.0)


def test_suggest_json_carries_a_diagnosis_per_launch(capsys):
    args = ["suggest", "kernels/fused_moe.py", "--preset", "qwen3-30b-a3b", "--tp", "4", "--tokens", "256",
            "--format", "json", "--no-confirm", "--top-k", "1"]
    main(args)
    (launch,) = json.loads(capsys.readouterr().out)["launches"]
    assert {"launch", "current", "best", "speedup", "headroom", "gains", "cannot_run"} <= set(launch)
    diagnosis = launch["diagnosis"]
    assert diagnosis["basis"] == "predicted"
    assert diagnosis["time_us"] == pytest.approx(launch["current"]["predicted_us"], rel=1e-3)
    assert sum(c["us"] for c in diagnosis["causes"]) == pytest.approx(diagnosis["gap_us"], abs=0.01)
    assert math.isfinite(diagnosis["explained_share"])


@pytest.mark.slow  # compiles two one-warp row kernels and evaluates a 200,000-CTA grid (about 25 s on 2 busy cores)
def test_a_grid_of_tiny_ctas_loses_its_gap_to_dispatch():
    from ceilings.latency_floor import empty_kernel_floor

    def rows(n_rows: int, block: int) -> LaunchSubject:
        tensors = (TensorArg.contiguous("x_ptr", (n_rows, block), "float32"),
                   TensorArg.contiguous("y_ptr", (n_rows, block), "float32"))
        launch = Launch(str(FIXTURES), "guarded_rows", (n_rows,), tensors,
                        {"n_rows": n_rows, "n_cols": block, "use_exp": 0}, {}, Config({"BLOCK": block}, 1, 1))
        return LaunchSubject(launch, GPU)

    # 200,000 CTAs of one warp move 25.6 MB: an empty kernel of that grid (measured) takes several times the
    # time the bytes need, so the gap past the ideal is the grid's start and retire, and nothing else.
    d = diagnose(rows(200_000, 16), time_us=LONG)
    dispatch = empty_kernel_floor(GPU.rates.empty_kernel_us, 200_000, 1)
    assert dispatch > 3 * d.ideal_us
    assert d.estimate("grid dispatch") == pytest.approx(dispatch - d.ideal_us, rel=1e-9)
    assert "an empty kernel of 200000 CTAs of 1 warps" in next(c.why for c in d.causes if c.name == "grid dispatch")
    check_sums(d)
    # Rows of 16K floats in 132 CTAs: the grid starts in a fraction of the work's time, no dispatch cause.
    d = diagnose(rows(SMS, 16384), time_us=LONG)
    assert all(c.name != "grid dispatch" for c in d.causes)


def test_diagnose_of_a_launch_file_at_a_config_label(capsys):
    launch = str(Path(__file__).resolve().parent / "fixtures" / "matmul_launch.json")
    assert main(["diagnose", launch, "--config", "M64 N64 K32 G8 w4 s3", "--measured", "40", "--format",
                 "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["config"] == "M64 N64 K32 G8 w4 s3" and doc["time_us"] == 40.0
    # the config's own grid: 32 x 64 tiles of 64 x 64, not the recorded launch's 512 CTAs
    assert "0 of 2048 CTAs only exit" in " ".join(c["why"] for c in doc["causes"])
    assert main(["diagnose", launch, "--config", "BLOCK_M=64 BLOCK_N=64 BLOCK_K=32 GROUP_M=8 w4 s3", "--measured",
                 "40", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["ceiling_us"] == doc["ceiling_us"]
