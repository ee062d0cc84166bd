"""Sweep planning and result handling that run without a GPU: config sets, refinement, resume, tables.

The GPU parts (timing, the sweep itself) are marked `gpu` and run where torch sees CUDA.
"""

from __future__ import annotations

import csv
import gzip

import pytest
import torch

from advisor.measure import moe_tune
from advisor.measure import timing as measure
from advisor.measure.sweep import CSV_FIELDS, SweepPlan, _ResultWriter, read_done, row_key
from ceilings.errors import AdvisorError
from ceilings.launch import Config
from kernels.fused_moe import CONFIG_SPACE, config_space, resource_precheck
from kernels.moe_bench import MoEGemmSpec, describe_launch
from kernels.moe_configs import MeasuredEntry, default_config, format_config_table, parse_config_text

HOPPER = 227 * 1024


def test_stratified_set_covers_every_feasible_tile_once():
    configs = moe_tune.stratified_configs(seed=0)
    tiles = [(c["BLOCK_SIZE_M"], c["BLOCK_SIZE_N"], c["BLOCK_SIZE_K"], c.num_warps, c.num_stages) for c in configs]
    feasible_tiles = {(c["BLOCK_SIZE_M"], c["BLOCK_SIZE_N"], c["BLOCK_SIZE_K"], c.num_warps, c.num_stages)
                      for c in config_space() if resource_precheck(c, HOPPER) is None}
    assert len(tiles) == len(set(tiles)) == len(feasible_tiles)
    assert set(tiles) == feasible_tiles
    assert all(c["GROUP_SIZE_M"] in CONFIG_SPACE["GROUP_SIZE_M"] for c in configs)
    assert moe_tune.stratified_configs(seed=0) == configs  # seeded: the same set every time
    assert moe_tune.stratified_configs(seed=1) != configs


def test_precheck_rejects_what_cannot_fit():
    big = Config({"BLOCK_SIZE_M": 256, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}, 4, 3)
    assert "registers" in resource_precheck(big, HOPPER)
    deep = Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 256, "GROUP_SIZE_M": 1}, 8, 5)
    assert "shared memory" in resource_precheck(deep, HOPPER)
    small = Config({"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}, 4, 2)
    assert resource_precheck(small, HOPPER) is None
    # A GPU with less shared memory (e.g. 99 KB per block on Ada) rejects more.
    mid = Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1}, 4, 4)
    assert resource_precheck(mid, HOPPER) is None and resource_precheck(mid, 99 * 1024) is not None


def test_sample_puts_defaults_first():
    specs = [MoEGemmSpec(8, 2, 4096, 14336, m) for m in (1, 4096)]
    configs = moe_tune.sample_configs(None, 0, specs)
    defaults = {default_config(s.m, s.num_experts, s.top_k) for s in specs}
    assert set(configs[: len(defaults)]) == defaults
    assert len(configs) == len(set(configs))
    random_pick = moe_tune.sample_configs(20, 3, specs)
    assert len(random_pick) <= 20 + len(defaults)


def _row(shape, m, config: Config, us, status="ok", kernel="fused_moe_kernel", triton="3.6.0"):
    row = {k: "" for k in CSV_FIELDS}
    row.update(kernel=kernel, gemm="1", shape=shape, M=str(m), status=status, us=str(us), timing=measure.GRAPH,
               triton=triton, config=config.label(), num_warps=str(config.num_warps),
               num_stages=str(config.num_stages), **{k: str(v) for k, v in config.params.items()})
    return row


def _cfg(bm, bn, bk, g, w=4, s=3):
    return Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": g}, w, s)


def test_ranking_refinement_and_tuned_table():
    spec = MoEGemmSpec(8, 2, 4096, 14336, 64)
    fast, mid, slow = _cfg(64, 128, 64, 16, 8, 4), _cfg(32, 64, 128, 1), _cfg(16, 32, 64, 1)
    rows = [_row(spec.shape_label, 64, slow, 900.0), _row(spec.shape_label, 64, fast, 310.5),
            _row(spec.shape_label, 64, mid, 400.0), _row(spec.shape_label, 64, _cfg(16, 64, 64, 1), 200.0, "slow"),
            _row(spec.shape_label, 64, _cfg(16, 64, 64, 1), 100.0, "ok", kernel="other")]
    ranked = moe_tune.ranked_by_case(rows)
    assert [moe_tune.row_config(r) for r in ranked[(spec.shape_label, 64)]] == [fast, mid, slow]

    pairs = moe_tune.refinement_pairs(rows, [spec], top=1)
    variants = {c for _, c in pairs}
    assert all(c.replace(GROUP_SIZE_M=16, num_stages=4) == fast for c in variants)
    assert {c["GROUP_SIZE_M"] for c in variants} == set(CONFIG_SPACE["GROUP_SIZE_M"])
    assert {c.num_stages for c in variants} == set(CONFIG_SPACE["num_stages"])

    table = moe_tune.tuned_table(rows, [spec])
    # Token counts only (vLLM 0.9.2 reads every key with int()); the Triton version goes to the side file.
    assert table.configs == {64: fast} and table.extras == {}
    text = format_config_table(table)
    assert parse_config_text(text).lookup(1) == fast
    assert text.startswith('{\n    "64": {\n        "BLOCK_SIZE_M": 64,')
    meta = moe_tune.tuned_meta(rows, [spec], "NVIDIA H100 80GB HBM3", "sweep.csv")
    assert meta.triton_version == "3.6.0" and meta.source == "sweep.csv"
    # The fastest fully timed config, compared with the other configs timed (a "slow" row was timed once).
    assert meta.measured == {64: MeasuredEntry(fast, 310.5, 4)}


def test_top_configs_unions_cases():
    a, b, c = _cfg(16, 32, 64, 1), _cfg(32, 64, 64, 1), _cfg(64, 64, 64, 1)
    rows = [_row("S1", 1, a, 10), _row("S1", 1, b, 20), _row("S1", 1, c, 30), _row("S2", 4, c, 5), _row("S2", 4, a, 9)]
    assert set(moe_tune.top_configs(rows, 1)) == {a, c}
    assert set(moe_tune.top_configs(rows, 2)) == {a, b, c}


def test_results_csv_resume_and_gzip(tmp_path):
    path = tmp_path / "sweep.csv"
    writer = _ResultWriter(path)
    rows = [_row("S1", 1, _cfg(16, 32, 64, 1), 10), _row("S1", 4, _cfg(16, 32, 64, 1), 11.5, "slow")]
    for r in rows:
        writer.write(r)
    writer.close()
    again = _ResultWriter(path)  # appending must not repeat the header
    again.write(_row("S2", 1, _cfg(32, 32, 64, 1), 3))
    again.close()
    with path.open(newline="") as f:
        lines = list(csv.reader(f))
    assert lines[0] == CSV_FIELDS and sum(1 for line in lines if line == CSV_FIELDS) == 1
    assert read_done(path) == {row_key(r) for r in rows} | {row_key(_row("S2", 1, _cfg(32, 32, 64, 1), 3))}
    gz = tmp_path / "sweep.csv.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert moe_tune.read_results(gz) == moe_tune.read_results(path)
    assert moe_tune.read_results(tmp_path / "missing.csv") == []


def test_sweep_plan_pairs_deduplicate():
    spec = MoEGemmSpec(8, 2, 64, 64, 1)
    config = _cfg(16, 32, 64, 1)
    plan = SweepPlan("k", [spec], [config], make_case=None, compile_fn=None, extra_pairs=[(spec, config)])
    assert plan.pairs() == [(spec, config)]


def test_relative_error_and_check():
    ref = torch.randn(64, 32)
    assert measure.relative_error(ref, ref) == 0.0
    noisy = ref + 1e-3 * torch.randn(64, 32)
    assert 0 < measure.relative_error(noisy, ref) < 1e-2
    poisoned = ref.clone()
    poisoned[3, 5] = float("nan")
    assert measure.relative_error(poisoned, ref) == float("inf")
    with pytest.raises(measure.MeasurementError, match="relative error"):
        measure.check_output(poisoned, ref, 1e-2)
    assert issubclass(measure.MeasurementError, AdvisorError)


def test_timing_refuses_too_few_replays_and_needs_cuda():
    with pytest.raises(AdvisorError, match="20 replays"):
        measure.time_launch(lambda: None, replays=5)
    if not torch.cuda.is_available():
        with pytest.raises(measure.MeasurementError, match="GPU"):
            measure.time_launch(lambda: None)


def test_timing_describes_its_mode():
    graph = measure.Timing(us=10.0, mode=measure.GRAPH, replays=20, launches_per_sample=10, min_us=9, max_us=11)
    flush = measure.Timing(us=12.0, mode=measure.FLUSH, replays=20, launches_per_sample=1, min_us=11, max_us=13)
    assert "no L2 flush" in graph.describe() and not graph.flush_l2
    assert "L2 flushed" in flush.describe() and flush.flush_l2


def test_describe_launch_matches_the_kernel_arguments():
    spec = MoEGemmSpec(8, 2, 4096, 14336, 16)
    config = _cfg(16, 64, 128, 1)
    launch = describe_launch(spec, config)
    assert launch.kernel == "fused_moe_kernel" and launch.source.endswith("kernels/fused_moe.py")
    # 16 tokens x top-2 pairs, plus at most 15 padding rows for each of 8 experts, rounded up to BLOCK_SIZE_M
    em = 160
    assert 32 + 8 * 15 <= em < 32 + 8 * 15 + 16
    assert launch.scalar("EM") == em and launch.grid == (em // 16 * 14336 // 64,)
    assert launch.tensor("b_ptr").shape == (8, 14336, 4096)
    assert launch.config == config


@pytest.mark.gpu
def test_sweep_on_gpu_records_and_resumes(tmp_path):
    from advisor.measure.sweep import run_sweep
    from kernels.moe_bench import compile_config

    specs = [MoEGemmSpec(8, 2, 256, 512, m) for m in (1, 64)]
    configs = [_cfg(16, 64, 64, 1), _cfg(32, 64, 64, 1, 4, 2)]
    plan = SweepPlan("fused_moe_kernel", specs, configs, make_case=moe_tune.make_case, compile_fn=compile_config,
                     timing={"mode": measure.GRAPH})
    path = tmp_path / "s.csv"
    first = run_sweep(plan, path, workers=2, show_progress=False)
    assert first["rows_written"] == 4 and first["complete"]
    rows = moe_tune.read_results(path)
    assert all(r["status"] == "ok" and float(r["us"]) > 0 for r in rows)
    again = run_sweep(plan, path, workers=2, show_progress=False)
    assert again["rows_written"] == 0 and again["already_done"] == 4
