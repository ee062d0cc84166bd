"""A kernel family is one declaration found through the registry: a toy family declared beside its kernel in
tests/fixtures/toy_family_kernel.py, registered from here, gets `ceiling`, rows-to-features, `collect`
planning and `suggest` with no change to advisor/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from advisor.model.features import FEATURES, feature_row
from ceilings.errors import AdvisorError
from ceilings.hardware import resolve_gpu
from ceilings.launch import expand_space
from ceilings.roofline import roofline
from kernels import family as fam

ROOT = Path(__file__).resolve().parents[1]
TOY = Path(__file__).resolve().parent / "fixtures" / "toy_family_kernel.py"
N = 1 << 26  # 512 MB moved: far beyond L2, so DRAM binds


@pytest.fixture
def toy():
    """The toy family registered for one test."""
    module = fam.load_family_module(str(TOY))
    fam.register(module.FAMILY)
    yield module
    fam.unregister(module.FAMILY.name)


def run_cli(args, capsys):
    from tui.entry import main

    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_shipped_families_are_registered_and_found_by_file_launch_and_row():
    names = [f.name for f in fam.families()]
    assert names[:4] == ["moe", "gemm", "softmax", "attention"]
    gemm = fam.family_named("gemm")
    assert fam.family_of_file(ROOT / "kernels/gemm.py") is gemm and fam.family_of_file(TOY) is None
    assert fam.family_of_row({"kernel": "fused_moe_kernel[tma]"}) is fam.family_named("moe")
    launch = gemm.describe_launch(gemm.read_shape("64,96,128"), gemm.default_config(gemm.read_shape("64,96,128")), 90)
    assert fam.family_of_launch(launch) is gemm
    assert fam.family_of_launch(launch.with_source(str(TOY))) is None  # the kernel name alone is not enough
    with pytest.raises(AdvisorError, match="^unknown kernel family 'fft'; choose one of moe, gemm"):
        fam.family_named("fft")


def test_ceiling_of_the_toy_family_is_its_demand_through_the_roofline(toy, capsys):
    code, out, err = run_cli(["ceiling", TOY, "--shape", N, "--format", "json"], capsys)
    assert code == 0, err
    shape = toy.ToyShape(N)
    config = toy.default_config(shape)
    gpu = resolve_gpu("h100")
    expected = roofline(toy.demand(shape, config, gpu.arch), gpu.rates, config.to_dict()).to_json()
    assert json.loads(out) == json.loads(json.dumps(expected))
    assert json.loads(out)["kernel"] == "toy_scale_kernel" and json.loads(out)["binding"] == "dram"
    code, _, err = run_cli(["ceiling", TOY, "--shape", "1,2", "--format", "json"], capsys)
    assert code == 2 and "--shape '1,2': give N as 1 positive integers" in err


def test_a_command_in_another_process_finds_the_family_through_the_environment():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-m", "tui.entry", "ceiling", str(TOY), "--shape", str(N), "--format", "json"]
    unknown = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert unknown.returncode == 2 and "a ceiling needs the launch's shapes" in unknown.stderr
    env[fam.FAMILIES_ENV] = str(TOY)
    known = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert known.returncode == 0, known.stderr
    assert json.loads(known.stdout)["kernel"] == "toy_scale_kernel"


def _rows(toy, gpu="NVIDIA H100 80GB HBM3"):
    rows = []
    for n, block, warps, us in ((1 << 20, 1024, 4, 9.0), (1 << 20, 256, 1, 14.0), (1 << 24, 4096, 8, 60.0)):
        rows.append({"status": "ok", "gpu": gpu, "kernel": "toy_scale_kernel", "gemm": "1", "shape": "TOY",
                     "M": str(n), "us": str(us), "num_warps": str(warps), "num_stages": "1", "shared": "",
                     "n_regs": "", "params": json.dumps({"BLOCK": block})})
    return rows


def test_toy_sweep_rows_become_feature_rows(toy, monkeypatch, tmp_path):
    from advisor.model.dataset import row_demand, rows_to_dataset

    monkeypatch.setenv("TRITON_ADVISOR_HOME", str(tmp_path))  # only the shipped calibrations, as rows use

    rows = _rows(toy)
    data = rows_to_dataset(rows)
    assert data.x.shape == (3, len(FEATURES)) and data.group == ["toy_scale_kernel/gemm1/TOY"] * 3
    assert data.config == ["BLOCK=1024 w4 s1", "BLOCK=256 w1 s1", "BLOCK=4096 w8 s1"]
    gpu = resolve_gpu("h100")
    for i, r in enumerate(rows):
        demand, config = row_demand(r, 90)
        assert demand.kernel == "toy_scale_kernel" and demand.ctas == -(-int(r["M"]) // config["BLOCK"])
        c = roofline(demand, gpu.rates, config.to_dict())
        assert data.ceiling_us[i] == pytest.approx(c.ceiling_us)
        assert np.exp(data.y[i]) * data.ceiling_us[i] == pytest.approx(float(r["us"]))
        expected = feature_row(c, demand, config, gpu.spec)
        assert np.allclose(data.x[i], [expected[f] for f in FEATURES], rtol=1e-5, atol=1e-6)
    fam.unregister("toy")
    with pytest.raises(AdvisorError, match="no kernel family declares it"):
        rows_to_dataset(rows)


def test_collect_plans_the_toy_family(toy):
    from advisor.measure.collect import build_plan

    plan = build_plan("toy", ms="300,65536", sample=3, seed=1)
    assert plan.kernel == "toy_scale_kernel" and [s.n for s in plan.specs] == [300, 65536]
    defaults = [toy.default_config(s) for s in plan.specs]
    feasible = [c for c in expand_space(toy.CONFIG_SPACE) if toy.register_check(c) is None]
    assert plan.configs[:2] == defaults and set(plan.configs) == set(defaults) | set(fam.sample_configs(feasible, 3, 1))
    assert plan.pairs() == [(s, c) for s in plan.specs for c in plan.configs]
    assert plan.compile_fn is toy.compile_config
    assert plan.prefilter(toy.Config({"BLOCK": 8192}, 1, 1)) and plan.prefilter(defaults[0]) is None
    assert build_plan("toy", ms="300", sample=3, seed=1).configs[1:] == plan.configs[2:]  # seeded
    with pytest.raises(AdvisorError, match="^--ms 'x'"):
        build_plan("toy", ms="x")


@pytest.mark.slow
def test_suggest_ranks_the_toy_space(toy, capsys, tmp_path):
    code, out, err = run_cli(["suggest", TOY, "--shape", N, "--format", "json"], capsys)
    assert code in (0, 1), err
    (d,) = json.loads(out)["launches"]
    assert d["launch"] == f"toy_family_kernel N={N}" and d["kernel"] == "toy_scale_kernel"
    space = expand_space(toy.CONFIG_SPACE)
    assert d["considered"] == len(space)
    refused = sum(toy.register_check(c) is not None for c in space)
    assert refused and sum(d["pruned"].values()) >= refused  # the family's precheck prunes
    assert d["location"]["path"] == str(TOY) and d["location"]["what"] == "the default rule"
    assert d["current"]["config"] == toy.default_config(toy.ToyShape(N)).to_dict()
    assert d["ranked"] and all(r["predicted_us"] >= r["ceiling_us"] for r in d["ranked"])
    # A launch of the toy kernel in a launch file is the family's subject too (its shape read from the launch).
    shape = toy.ToyShape(N)
    launch = toy.describe_launch(shape, toy.Config({"BLOCK": 512}, 2, 1), 90)
    path = tmp_path / "launch.json"
    path.write_text(json.dumps(launch.to_dict()))
    code, out, err = run_cli(["suggest", path, "--format", "json", "--no-confirm"], capsys)
    assert code in (0, 1), err
    (d,) = json.loads(out)["launches"]
    assert d["launch"] == f"toy_family_kernel N={N}" and d["considered"] == len(space)
    assert d["current"]["config"] == {"BLOCK": 512, "num_warps": 2, "num_stages": 1}
