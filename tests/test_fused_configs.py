"""Config files tuned for the fused GEMM1 (kernels/configs/fused/): the lookup `fused_moe_fused` makes
when the caller gives no config, the shipped tuned files themselves, and the tuner's config sample
(benchmarks/moe_fusion_tune.py)."""

from __future__ import annotations

import json
import math
import sys

import pytest
import torch
from conftest import REPO_ROOT

from ceilings.launch import Config
from kernels import fused_moe as fm
from kernels import fused_moe_fused as ff
from kernels import moe_configs
from kernels.moe_configs import (
    ConfigTable,
    config_file_name,
    format_config_table,
    read_config_file,
    read_config_meta,
    write_config_file,
)

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
import moe_fusion_tune  # noqa: E402

GPU = "Test GPU 80GB"
E, INTER, TOP_K = 8, 64, 2


def cfg(bm, bn, bk, gm, warps=4, stages=3):
    return Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": gm},
                     num_warps=warps, num_stages=stages)


FUSED = cfg(64, 256, 64, 16, 8, 4)
PREVIOUS = cfg(32, 128, 128, 1)


@pytest.fixture
def config_dirs(tmp_path, monkeypatch):
    """Empty shipped and fused folders in place of the repository's; returns (shipped, fused)."""
    shipped, fused = tmp_path / "configs", tmp_path / "configs" / "fused"
    fused.mkdir(parents=True)
    monkeypatch.setattr(moe_configs, "SHIPPED_DIR", shipped)
    monkeypatch.setattr(moe_configs, "FUSED_DIR", fused)
    return shipped, fused


def write(folder, config, keys=(1, 1024)):
    return write_config_file(folder / config_file_name(E, INTER, GPU), ConfigTable({m: config for m in keys}))


def test_gemm1_takes_the_fused_file_and_gemm2_the_previous_kernels(config_dirs):
    shipped, fused = config_dirs
    previous_path, fused_path = write(shipped, PREVIOUS), write(fused, FUSED)
    (c1, src1), (c2, src2) = ff.layer_configs(1000, E, INTER, TOP_K, GPU)
    assert (c1, src1) == (FUSED, str(fused_path))
    assert (c2, src2) == (PREVIOUS, str(previous_path))
    # An unfused GEMM1 is the previous kernel's GEMM: its file, not the fused one.
    assert ff.layer_configs(1000, E, INTER, TOP_K, GPU, fused_gemm1=False)[0] == (PREVIOUS, str(previous_path))


def test_without_a_fused_file_gemm1_falls_back_to_the_previous_file_then_the_default(config_dirs):
    shipped, _ = config_dirs
    default = moe_configs.default_config(1000, E, TOP_K)
    assert ff.layer_configs(1000, E, INTER, TOP_K, GPU) == ((default, "default rule"), (default, "default rule"))
    path = write(shipped, PREVIOUS)
    assert ff.layer_configs(1000, E, INTER, TOP_K, GPU)[0] == (PREVIOUS, str(path))
    # No GPU name (the CPU): the default rule, whatever files exist.
    assert ff.layer_configs(1000, E, INTER, TOP_K, None)[0] == (default, "default rule")


def test_fused_file_of_another_gpu_or_shape_is_not_taken(config_dirs):
    shipped, fused = config_dirs
    write_config_file(fused / config_file_name(E, INTER, "Other GPU"), ConfigTable({1: FUSED}))
    write_config_file(fused / config_file_name(E, 2 * INTER, GPU), ConfigTable({1: FUSED}))
    path = write(shipped, PREVIOUS)
    assert ff.layer_configs(1, E, INTER, TOP_K, GPU)[0] == (PREVIOUS, str(path))


def test_layer_without_config_runs_at_the_looked_up_config(device):
    """No config given: the layer picks one itself and still matches the float32 reference."""
    gen = torch.Generator(device=device).manual_seed(3)
    m, e, top_k, h, inter = 5, 4, 2, 32, 32
    hidden = torch.randn(m, h, device=device, generator=gen).to(torch.bfloat16)
    w1 = (torch.randn(e, 2 * inter, h, device=device, generator=gen) / h ** 0.5).to(torch.bfloat16)
    w2 = (torch.randn(e, h, inter, device=device, generator=gen) / inter ** 0.5).to(torch.bfloat16)
    weights, ids = fm.route(m, e, top_k, device=device, generator=gen)
    out = ff.fused_moe_fused(hidden, ff.interleave_gate_up(w1), w2, weights, ids, w1_interleaved=True)
    ref = fm.fused_moe_reference(hidden, w1, w2, weights, ids)
    assert ((out.float() - ref).norm() / ref.norm()).item() < 1e-2


SHIPPED_FUSED = sorted(moe_configs.FUSED_DIR.glob("*.json"))


def test_fused_files_ship_for_both_gpus():
    names = {p.name for p in SHIPPED_FUSED}
    for shape in ("E=8,N=7168", "E=64,N=1280", "E=128,N=192"):
        for gpu in ("NVIDIA_H100_80GB_HBM3", "NVIDIA_H200"):
            assert f"{shape},device_name={gpu}.json" in names


def _check_shipped_file(path, min_compared: int) -> None:
    """Same token counts as the previous kernel's file of that name, written byte-compatibly, every config
    in the kernel's space, and each entry the fastest of at least `min_compared` its side file measured."""
    table = read_config_file(path)
    previous = read_config_file(moe_configs.SHIPPED_DIR / path.name)
    assert list(table.configs) == list(previous.configs)
    assert format_config_table(table) == path.read_text()
    space = set(fm.config_space())
    assert all(c in space for c in table.configs.values())
    meta = read_config_meta(path)
    assert meta is not None and meta.device_name.replace(" ", "_") in path.name
    assert {m: e.config for m, e in meta.measured.items()} == table.configs
    assert all(e.compared >= min_compared for e in meta.measured.values())


@pytest.mark.parametrize("path", SHIPPED_FUSED, ids=lambda p: p.name)
def test_shipped_fused_file_matches_its_previous_file_and_side_file(path):
    """Same token counts as the previous kernel's file of that name, written byte-compatibly, every config
    in the kernel's space, and each entry the fastest its side file measured."""
    _check_shipped_file(path, 24)


def test_real_lookup_reaches_the_shipped_fused_file():
    (c1, src1), (_, src2) = ff.layer_configs(1024, 8, 7168, 2, "NVIDIA H100 80GB HBM3")
    assert src1.endswith("fused/E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json")
    assert "fused" not in src2
    assert c1 == read_config_file(src1).configs[1024]


SHIPPED_TABLE = {1: cfg(16, 32, 128, 1), 64: cfg(64, 128, 128, 1, 4, 4), 1024: cfg(128, 256, 64, 32, 8, 3)}


@pytest.mark.parametrize("m", [1, 64, 1024, 4096])
def test_sample_anchors_on_the_previous_configs_and_spreads_within_bounds(m):
    sample = moe_fusion_tune.sample_configs(m, 8, 2, SHIPPED_TABLE, 32)
    own = ConfigTable(dict(SHIPPED_TABLE)).lookup(m)
    assert sample[0] == own and len(sample) == 32 and len(set(sample)) == 32
    keys = sorted(SHIPPED_TABLE)
    at = keys.index(min(keys, key=lambda k: (abs(k - m), k)))
    assert all(SHIPPED_TABLE[keys[i]] in sample for i in (at - 1, at + 1) if 0 <= i < len(keys))
    space = set(fm.config_space())
    assert all(c in space and (c == own or moe_fusion_tune._fits(c)) for c in sample)
    # Past the anchors (previous configs, own with N doubled or halved, the large tiles): M blocks no
    # taller than twice an expert's expected rows, nor shorter than a quarter of that (down to 16).
    large = {moe_fusion_tune.moe_fusion.parse_label(t) for t in moe_fusion_tune.moe_fusion.LARGE_TILES}
    anchors = set(SHIPPED_TABLE.values()) | large | {moe_fusion_tune._with_n(own, n) for n in (16, 32, 64, 128, 256)}
    spread = [c for c in sample if c not in anchors]
    cap = min(256, max(16, 2 ** math.ceil(math.log2(max(2 * m * 2 / 8, 1)))))
    assert len(spread) >= 20
    assert all(max(16, min(64, cap // 4)) <= c["BLOCK_SIZE_M"] <= cap for c in spread)
    assert moe_fusion_tune.sample_configs(m, 8, 2, SHIPPED_TABLE, 32) == sample


def test_sample_without_a_shipped_file_starts_at_the_default_rule():
    sample = moe_fusion_tune.sample_configs(256, 64, 8, {}, 24)
    assert sample[0] == moe_configs.default_config(256, 64, 8) and len(sample) == 24


# ------------------------------------------------------------------------------------------------
# GEMM2 of the new layer: files tuned per form (fused/gemm2/, fused/gemm2_sum/) and the form's choice.
# ------------------------------------------------------------------------------------------------
GEMM2_PLAIN = cfg(64, 128, 64, 1, 4, 4)
GEMM2_SUM = cfg(32, 64, 128, 16, 4, 3)


def write_gemm2(folder, config, us_by_m):
    """A GEMM2 file of one config with a side file that measured it at `us_by_m` ({M: us})."""
    from kernels.moe_configs import ConfigMeta, MeasuredEntry

    folder.mkdir(parents=True, exist_ok=True)
    meta = ConfigMeta(GPU, "3.6.0", {m: MeasuredEntry(config, us, 12) for m, us in us_by_m.items()}, "test")
    return write_config_file(folder / config_file_name(E, INTER, GPU), ConfigTable({m: config for m in us_by_m}),
                             meta)


def test_gemm2_takes_the_file_of_its_form_and_falls_back_to_the_previous_kernels(config_dirs):
    shipped, fused = config_dirs
    previous_path = write(shipped, PREVIOUS)
    plain_path = write_gemm2(fused / "gemm2", GEMM2_PLAIN, {1: 10.0, 1024: 100.0})
    assert ff.layer_configs(1000, E, INTER, TOP_K, GPU, fuse_sum=False)[1] == (GEMM2_PLAIN, str(plain_path))
    # No file for the fused-sum form, and no form given: the previous kernel's file.
    assert ff.layer_configs(1000, E, INTER, TOP_K, GPU, fuse_sum=True)[1] == (PREVIOUS, str(previous_path))
    assert ff.layer_configs(1000, E, INTER, TOP_K, GPU)[1] == (PREVIOUS, str(previous_path))
    sum_path = write_gemm2(fused / "gemm2_sum", GEMM2_SUM, {1: 8.0, 1024: 120.0})
    assert ff.layer_configs(1000, E, INTER, TOP_K, GPU, fuse_sum=True)[1] == (GEMM2_SUM, str(sum_path))


def test_the_sum_is_fused_where_its_form_measured_faster(config_dirs):
    _, fused = config_dirs
    write_gemm2(fused / "gemm2", GEMM2_PLAIN, {1: 10.0, 1024: 100.0})
    # One form measured: no comparison, so the fused sum (the layer's former default).
    assert ff.choose_fuse_sum(1000, E, INTER, GPU) is True
    write_gemm2(fused / "gemm2_sum", GEMM2_SUM, {1: 8.0, 1024: 120.0})
    assert ff.choose_fuse_sum(1, E, INTER, GPU) is True  # 8 us against 10
    assert ff.choose_fuse_sum(1000, E, INTER, GPU) is False  # nearest key 1024: 120 us against 100
    assert ff.choose_fuse_sum(4096, E, INTER, GPU) is False
    assert ff.choose_fuse_sum(1000, E, INTER, None) is True  # the CPU: no GPU's measurements apply


SHIPPED_GEMM2 = sorted(p for sub in ff.GEMM2_FOLDERS.values() for p in (moe_configs.FUSED_DIR / sub).glob("*.json"))


def test_gemm2_files_ship_for_both_forms_shapes_and_gpus():
    names = {(p.parent.name, p.name) for p in SHIPPED_GEMM2}
    for sub in ff.GEMM2_FOLDERS.values():
        for shape in ("E=8,N=7168", "E=64,N=1280", "E=128,N=192"):
            for gpu in ("NVIDIA_H100_80GB_HBM3", "NVIDIA_H200"):
                assert (sub, f"{shape},device_name={gpu}.json") in names


@pytest.mark.parametrize("path", SHIPPED_GEMM2, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shipped_gemm2_file_matches_its_previous_file_and_side_file(path):
    _check_shipped_file(path, 12)


def test_real_lookup_reaches_the_shipped_gemm2_files():
    for fuse_sum, sub in ff.GEMM2_FOLDERS.items():
        (_, src1), (c2, src2) = ff.layer_configs(4096, 64, 1280, 8, "NVIDIA H200", fuse_sum=fuse_sum)
        assert src2.endswith(f"fused/{sub}/E=64,N=1280,device_name=NVIDIA_H200.json")
        assert c2 == read_config_file(src2).configs[4096]
        assert src1.endswith("fused/E=64,N=1280,device_name=NVIDIA_H200.json")


def test_gemm2_files_are_written_from_a_run_per_form(tmp_path):
    """moe_layer_tune --write-from: the fastest checked config per (shape, M) and form, with its time and the
    count compared in the side file; failed rows are not candidates."""
    import moe_layer_tune

    a, b = "M64 N128 K64 G1 w4 s4", "M32 N64 K128 G16 w4 s3"
    rows = [{"case": "dry-a", "m": 1, "form": "gemm2", "config": a, "status": "ok", "us": 5.0},
            {"case": "dry-a", "m": 1, "form": "gemm2", "config": b, "status": "ok", "us": 4.0},
            {"case": "dry-a", "m": 1, "form": "gemm2_sum", "config": b, "status": "failed", "us": 1.0},
            {"case": "dry-a", "m": 1, "form": "gemm2_sum", "config": a, "status": "ok", "us": 6.0}]
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"gpu": GPU, "triton": "3.6.0", "dry": True, "gemm2": rows}))
    written = moe_layer_tune.write_from(run, tmp_path / "out")
    assert len(written) == 2
    for sub, want, compared in (("gemm2", b, 2), ("gemm2_sum", a, 1)):
        path = tmp_path / "out" / sub / config_file_name(8, 48, GPU)
        assert read_config_file(path).configs == {1: moe_fusion_tune.moe_fusion.parse_label(want)}
        assert read_config_meta(path).measured[1].compared == compared
