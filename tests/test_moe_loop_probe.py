"""benchmarks/moe_probe_convert.py's conversion of a raw loop probe (benchmarks/moe_loop_probe.py) into the files
`advisor diagnose` reads, the probe's launch shape, and benchmarks/moe_probe_clock.py's reading of nvidia-smi's log,
on inputs whose answer is known by construction."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import moe_loop_probe as probe  # noqa: E402
import moe_probe_convert as conv  # noqa: E402
from moe_probe_clock import parse_smi_log  # noqa: E402

from advisor.advice import diagnose_loop as dl  # noqa: E402
from ceilings.launch import Config  # noqa: E402
from kernels.moe_bench import MoEGemmSpec, describe_fused_launch, describe_launch  # noqa: E402

BIG = Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 32}, 8, 3)


def raw_row(variant, step, first, further, launch=1.0, shape=(128, 256, 64, 8, 3), clock=1800.0):
    """A raw probe row timed from a known step (us per K step), first- and further-round cost."""
    def t(k, rounds):
        return launch + first + (rounds - 1) * further + rounds * (k / shape[2]) * step
    return {"variant": variant, "shape": list(shape), "config": "x", "status": "ok", "ctas_per_sm": 1,
            "us_k512_r1": t(512, 1), "us_k2048_r1": t(2048, 1), "us_k512_r2": t(512, 2), "us_k2048_r2": t(2048, 2),
            "clock_before_mhz": clock, "clock_after_mhz": clock}


def test_convert_writes_one_file_per_variant_that_the_advisor_reads_back(tmp_path, monkeypatch):
    raw = {"gpu": "GPU X", "triton": "t", "torch": "p", "date": "d", "command": "c", "k_steps": [512, 2048],
           "sweep_clock": {"after_protocol_mhz": 1440.0, "after_sustained_mhz": 1300.0},
           "dram": [{"probe": "contiguous 64x64 tiles", "tbs": 3.0}, {"probe": "slab 128 B segments", "tbs": 2.5}],
           "loop": [raw_row("previous", 0.6, 5.0, 3.0), raw_row("persistent", 0.6, 5.5, 2.0),
                    # A slow K = 512 time (negative step): left out and listed.
                    {**raw_row("previous", 0.6, 5.0, 3.0, shape=(64, 128, 64, 4, 3)), "us_k512_r1": 100.0}]}
    path = tmp_path / "raw.json"
    path.write_text(json.dumps(raw))
    written = conv.convert(path, "gpux", tmp_path)
    assert sorted(p.name for p in written) == ["gpux_fused_moe_fused_kernel_persistent.json",
                                               "gpux_fused_moe_kernel.json"]
    docs = tuple(json.loads(p.read_text()) for p in written)
    prev = next(d for d in docs if d["variant"] == "previous")
    assert prev["left_out"]["loops"] == ["M64 N128 K64 w4 s3"]
    assert prev["clock"] == {"probe_median_mhz": 1800.0, "sweep_protocol_mhz": 1440.0, "sweep_sustained_mhz": 1300.0,
                             "sweep_protocol_tensor_load": None}  # no heavy launch's time: no load to scale by
    assert prev["dram_segment_tbs"]["128"] == 2.5
    monkeypatch.setattr(dl, "_probe_files", lambda arch: docs)
    spec = MoEGemmSpec(8, 2, 4096, 14336, 1024)
    scale = 1800.0 / 1440.0  # the probe's clock over the sweeps' protocol's
    for launch, (step, first, further) in ((describe_launch(spec, BIG), (0.6, 5.0, 3.0)),
                                           (describe_fused_launch(spec, BIG, "persistent"), (0.6, 5.5, 2.0))):
        t = dl.probe_timing(launch, 90, (128, 256, 64), 8, 3, launch_us=1.0, clock_fraction=0.5, gpu_name="GPU X")
        assert (t.step_us, t.fixed_us, t.next_fixed_us) == pytest.approx((step * scale, first * scale,
                                                                          further * scale))


def test_probe_constexprs_tell_the_variants_apart():
    kinds = {v: conv.probe_constexprs(v) for v in probe.GEMM1_VARIANTS}
    assert kinds["previous"] == ("fused_moe_kernel", {"B_TMA": True})
    assert len({json.dumps(k, sort_keys=True) for k in kinds.values()}) == len(probe.GEMM1_VARIANTS)
    assert kinds["fused-il-persistent"][1] == {"GATED": True, "INTERLEAVED": True, "ACCUMULATE": False,
                                               "PERSISTENT": True, "B_TMA": True}


def test_each_fp8_probe_is_keyed_by_what_a_capture_of_its_form_records():
    # `advisor diagnose` on a launch read from its source finds the fp8 probe by the launch's constexprs and config
    # flags: the converter's key must be what a capture of that form (no GPU) records, and only that form's. The
    # capture runs as the program does, in a process without TRITON_INTERPRET (this one interprets its kernels).
    import os
    import subprocess

    from fp8_loop_probe import VARIANTS

    calls = {}
    for variant, (gated, scaling, tiles, _) in VARIANTS.items():
        calls[variant] = (f"gemm_only(256, 8, 2, 256, 128, {scaling!r}, 'M64 N128 K128 G1 w4 s4', {tiles})" if gated
                          else f"gemm2_only(256, 8, 2, 256, 128, {scaling!r}, 'M64 N128 K128 G1 w4 s4', False)")
    script = (
        "import json, sys\n"
        "from advisor.capture.call import capture_call\n"
        "out = {}\n"
        f"for variant, call in {calls!r}.items():\n"
        "    las = capture_call(sys.argv[1], call, 'h100').launches\n"
        "    la = [x for x in las if x.kernel == 'fused_moe_fp8_kernel'][0]\n"
        "    out[variant] = {**la.config.params, **dict(la.constexprs)}\n"
        "print(json.dumps(out))\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", script, str(ROOT / "benchmarks" / "fp8_moe_generic_check.py")],
                          capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    recorded = json.loads(done.stdout.strip().splitlines()[-1])
    for variant in VARIANTS:
        kernel, key = conv.probe_constexprs(variant)
        assert kernel == "fused_moe_fp8_kernel"
        assert {k: recorded[variant].get(k) for k in key} == key, variant
        others = [conv.probe_constexprs(v)[1] for v in VARIANTS if v != variant]
        assert not any(all(recorded[variant].get(k) == v for k, v in other.items()) for other in others), variant


def test_the_probe_launch_is_r_rounds_of_the_sms_tiles():
    # 128 x 256 tiles, 2 CTAs per SM, 2 rounds: 11 x 2 x 2 M blocks by 12 N blocks = 132 x 2 x 2 tiles.
    spec = probe.probe_spec((128, 256, 64, 8, 3), 2, 2048, rounds=2)
    assert (spec.m // 128) * (spec.n // 256) == 132 * 2 * 2 and spec.num_experts == spec.top_k == 1


def test_smi_log_lines_become_timed_clock_samples():
    text = ("timestamp, clocks.current.sm [MHz], clocks.current.memory [MHz], power.draw [W], temperature.gpu\n"
            "2026/11/23 12:22:18.029, 1530, 2619, 219.49, 44\n"
            "2026/11/23 12:22:18.049, [N/A], 2619, 219.49, 44\n"
            "2026/11/23 12:22:19.000, 1980, 2619, 120.00, 40\n")
    samples = list(parse_smi_log(text))
    assert [mhz for _, mhz in samples] == [1530.0, 1980.0]
    assert samples[1][0] - samples[0][0] == pytest.approx(0.971)


def test_resolution_is_the_quantile_of_same_loop_differences():
    # Ten loop shapes; fused-il's step is 1%, 2%, ..., 10% above the previous kernel's, its first round
    # 0.1, ..., 1.0 us dearer, its further rounds the same: the 80% quantile (of 10, by statistics.quantiles'
    # exclusive method) lies between the 8th and 9th values.
    rows = []
    for i in range(1, 11):
        shape = (16 * i, 256, 64, 8, 3)
        rows.append(raw_row("previous", 0.5, 5.0, 3.0, shape=shape))
        rows.append(raw_row("fused-il", 0.5 * (1 + i / 100), 5.0 + i / 10, 3.0, shape=shape))
    res = conv.probe_resolution({"k_steps": [512, 2048], "loop": rows})
    assert res["step_rel"] == pytest.approx(0.088, abs=1e-4)
    assert res["first_us"] == pytest.approx(0.88, abs=1e-3)
    assert res["further_us"] == pytest.approx(0.0, abs=1e-6)
    assert conv.probe_resolution({"k_steps": [512, 2048], "loop": rows[:6]}) is None  # too few pairs


def test_the_fp8_probe_runs_and_checks_each_form_and_converts(tmp_path, monkeypatch):
    # benchmarks/fp8_loop_probe.py --dry-run on the interpreter: every form at its two tiny shapes, each output
    # checked against the reference over the dequantised operands, and the converter's files keyed per form.
    import fp8_loop_probe

    for name in ("K_STEPS", "M_BLOCKS", "N_BLOCKS"):  # the dry run shrinks the shared probe's sizes
        monkeypatch.setattr(probe, name, getattr(probe, name))
    assert fp8_loop_probe.main(["--dry-run", "--out", str(tmp_path), "--repeats", "1"]) == 0
    doc = json.loads((tmp_path / "moe_loop_probe.json").read_text())
    rows = doc["loop"]
    forms = fp8_loop_probe.VARIANTS
    assert {r["variant"] for r in rows} == set(forms) and len(rows) == 2 * len(forms)
    assert all(r["status"] == "ok" and r["rel_error"] < 1e-2 for r in rows), rows
    written = conv.convert(tmp_path / "moe_loop_probe.json", "cpu", tmp_path)
    keys = {json.dumps(json.loads(p.read_text())["constexprs"], sort_keys=True) for p in written}
    assert len(written) == len(keys) == len(fp8_loop_probe.VARIANTS)
