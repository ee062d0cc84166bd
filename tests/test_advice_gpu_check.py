"""The held-out advice check's CPU parts (benchmarks/corpus/check_advice_gpu.py): which launches it can
run, which transfer model each launch's `suggest` gets, and how a cut device call is taken up again."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "corpus"))
gpu_check = pytest.importorskip("check_advice_gpu")


def test_launches_whose_ceiling_evaluation_errored_are_not_planned():
    broken = gpu_check.unreplayable()
    records = [json.loads(x) for x in (gpu_check.DATA / "ceilings.jsonl").read_text().splitlines()]
    errored = {r["launch_id"] for r in records if "error" in r}
    assert errored and errored <= set(broken)
    assert all(why for why in broken.values())
    for plan in (gpu_check.FRESH_PLAN, gpu_check.HELD_OUT_PLAN):
        planned = {p["launch_id"] for p in json.loads(plan.read_text())["launches"]}
        assert planned and not planned & set(broken)


def test_each_library_gets_the_transfer_model_fitted_without_it(monkeypatch):
    monkeypatch.setenv("ADVICE_PLAN", str(gpu_check.HELD_OUT_PLAN))
    models = gpu_check.plan_models()
    assert set(models) == set(gpu_check.LIBRARIES)
    for lib, folder in models.items():
        meta = json.loads((folder / "transfer_meta.json").read_text())
        assert meta["held_out_library"] == lib and lib not in meta["libraries"]
    monkeypatch.setenv("ADVICE_PLAN", str(gpu_check.PLAN))
    assert gpu_check.plan_models() == {}  # the first plan: the shipped model


def test_a_cut_run_keeps_what_ended_and_runs_again_what_its_deadline_did_not_start(tmp_path):
    rows = [{"launch_id": "a", "measure": 0, "rc": 0}, {"launch_id": "a", "measure": 4, "rc": gpu_check.NOT_STARTED},
            {"launch_id": "b", "measure": 0, "rc": "timeout"}, {"launch_id": "c", "measure": 0, "rc": 2}]
    (tmp_path / "advice_gpu_suggest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    kept, timings = gpu_check.resumed(tmp_path)
    assert [(r["launch_id"], r["measure"]) for r in kept] == [("a", 0), ("b", 0), ("c", 0)] and timings is None
    (tmp_path / "advice_gpu_timings.csv").write_text("library,launch_id\n")
    assert gpu_check.resumed(tmp_path)[1] == tmp_path / "advice_gpu_timings.csv"
    assert gpu_check.resumed(None) == ([], None)


def test_remeasure_runs_again_the_measure_runs_that_shared_the_gpu(tmp_path):
    rows = [{"launch_id": "a", "measure": 0, "rc": 0}, {"launch_id": "a", "measure": 4, "rc": 0, "measure_jobs": 4},
            {"launch_id": "b", "measure": 4, "rc": 1, "measure_jobs": 1}, {"launch_id": "c", "measure": 4, "rc": 0}]
    (tmp_path / "advice_gpu_suggest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    kept = gpu_check.resumed(tmp_path)[0]
    assert len(kept) == 4
    kept = gpu_check.resumed(tmp_path, remeasure=True)[0]
    assert [(r["launch_id"], r["measure"]) for r in kept] == [("a", 0), ("b", 4)]  # alone on the GPU: kept


def test_a_launch_whose_new_choice_was_never_timed_is_timed_again_whole():
    def timing(lid, cfg, roles="space"):
        return {"launch_id": lid, "config": json.dumps(cfg), "roles": roles}

    timings = [timing("a", {"B": 64}, "own"), timing("a", {"B": 128, "EVEN_K": True}), timing("b", {"B": 64}, "own"),
               timing("b", {"B": 256}, "own-repeat"), timing("d", {"B": 64}, "own")]
    rows = [{"launch_id": "a", "measure": 4, "best": {"config": {"B": 128}}},   # timed, with a heuristic's constexpr
            {"launch_id": "a", "measure": 0, "best": {"config": {"B": 64}}},    # its own: timed
            {"launch_id": "b", "measure": 4, "best": {"config": {"B": 256}}},   # only as the repeat's config: not timed
            {"launch_id": "c", "measure": 4, "best": {"config": {"B": 32}}},    # never timed: the timing process's
            {"launch_id": "d", "measure": 0, "best": {"config": {"B": 128}}}]   # a suggestion without timings, untimed
    assert gpu_check.untimed_picks(rows, timings) == {"b", "d"}


def test_redo_runs_again_both_suggest_runs_of_the_launches_named(tmp_path):
    rows = [{"launch_id": "a", "measure": 0, "rc": 0}, {"launch_id": "a", "measure": 4, "rc": 0, "measure_jobs": 1},
            {"launch_id": "b", "measure": 0, "rc": 1}, {"launch_id": "b", "measure": 4, "rc": 0, "measure_jobs": 1}]
    (tmp_path / "advice_gpu_suggest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    kept = gpu_check.resumed(tmp_path, redo={"a"})[0]
    assert [(r["launch_id"], r["measure"]) for r in kept] == [("b", 0), ("b", 4)]


def test_an_autotuned_launch_travels_with_its_autotune_group_as_record_writes_it():
    """Each other config of the captured list, with the grid and constexprs the library's host code gave it,
    after the launch itself; a launch without a list travels alone."""
    entry = {"source": "k.py", "kernel": "k", "grid": [8], "tensors": [], "scalars": {"n": 1024},
             "constexprs": {"EVEN": True}, "config": {"BLOCK": 128, "HEAD": 64, "num_warps": 4, "num_stages": 2}}
    listed = [{"config": {"BLOCK": 128, "num_warps": 4, "num_stages": 2}, "grid": [8, 1, 1],
               "constexprs": {"EVEN": True, "HEAD": 64}},
              {"config": {"BLOCK": 128, "EVEN": True, "num_warps": 4, "num_stages": 2}, "grid": [8, 1, 1],
               "constexprs": {"HEAD": 64}},   # the launch's own config as the list sets it: not a second entry
              {"config": {"BLOCK": 256, "EVEN": False, "num_warps": 8, "num_stages": 2}, "grid": [5, 1, 1],
               "constexprs": {"HEAD": 64}}]   # a grid no rule gives (not cdiv(1024, 256)); EVEN set by the list
    case = gpu_check.Case("lib", 0, entry, {"variants": listed})
    own, other = gpu_check.with_autotune_group(case)
    assert own is entry
    assert other["grid"] == [5] and other["constexprs"] == {"EVEN": False} and other["count"] == 1
    # the host's HEAD kept; EVEN filed under constexprs, as the recorded launch files it
    assert other["config"] == {"BLOCK": 256, "HEAD": 64, "num_warps": 8, "num_stages": 2}
    assert gpu_check.with_autotune_group(gpu_check.Case("lib", 0, entry, {})) == [entry]


def test_a_stopped_run_leaves_no_child_process_behind(tmp_path):
    # a child that starts a grandchild (as `suggest` starts compile workers) and outlives the limit
    marker = tmp_path / "grandchild.pid"
    script = ("import subprocess, sys, time; "
              f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
              f"open({str(marker)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    with pytest.raises(gpu_check.subprocess.TimeoutExpired):
        gpu_check.bounded_run([sys.executable, "-c", script], 3.0)
    import os
    import time

    pid = int(marker.read_text())
    for _ in range(50):  # the kill is delivered at once; reaping by init can take a moment
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        state = Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}/stat").exists() else "X"
        if state == "Z":
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the grandchild {pid} still runs after the limit")
    done = gpu_check.bounded_run([sys.executable, "-c", "print('ok')"], 30.0)
    assert done.returncode == 0 and done.stdout.strip() == "ok"


def test_a_launch_the_timing_process_never_reached_is_no_result():
    plain = {"library": "liger", "launch_id": "x", "index": 0, "kernel": "k", "measure": 0, "rc": 0,
             "best": {"config": {"BLOCK": 64}}}
    timed = dict(plain, measure=4)
    untimed = gpu_check.launch_outcome(plain, timed, [])
    assert untimed["timed"] == 0 and untimed["suggested_us"] is None
    row = {"config": json.dumps({"BLOCK": 64}, sort_keys=True), "status": "ok", "us": "10.0", "from_rule": "0"}
    own = dict(row, roles="own+suggested+measure4")
    reached = gpu_check.launch_outcome(plain, timed, [own])
    assert reached["timed"] == 1 and reached["suggested_vs_own"] == 1.0 and reached["measure4_vs_best"] == 1.0


def test_the_products_timings_are_compared_with_the_checks_per_config_and_per_gpu_sharing():
    a, b = {"BLOCK": 64}, {"BLOCK": 128}
    runs = {"x": {4: {"measure": 4, "measure_jobs": 4, "ranked": [
        {"config": a, "measured_us": 10.0}, {"config": b, "measured_us": 30.0}, {"config": {"BLOCK": 256}}]}},
        "y": {4: {"measure": 4, "measure_jobs": 1, "ranked": [{"config": a, "measured_us": 5.1}]}}}
    timings = [{"launch_id": "x", "config": json.dumps(a), "status": "ok", "roles": "own", "us": "10.0"},
               {"launch_id": "x", "config": json.dumps(b), "status": "ok", "roles": "space", "us": "15.0"},
               {"launch_id": "x", "config": json.dumps(a), "status": "ok", "roles": "own-repeat", "us": "99"},
               {"launch_id": "y", "config": json.dumps(a), "status": "ok", "roles": "own", "us": "5.0"}]
    ratios = gpu_check.product_vs_check(runs, timings)
    assert ratios["4"] == [1.0, 2.0] and [round(x, 3) for x in ratios["1"]] == [1.02]


def test_the_one_launch_trace_carries_the_captured_integer_contents_as_record_writes_them():
    entry = {"kernel": "k", "tensors": [
        {"name": "inp", "dtype": "float32", "shape": [4, 2], "stride": [2, 1]},
        {"name": "index", "dtype": "int64", "shape": [2, 3], "stride": [1, 2]},   # a transposed view
        {"name": "mask", "dtype": "bool", "shape": [3], "stride": [1]}]}
    out = gpu_check.with_recorded_values(entry, {"index": [[4, 0, 2], [1, 3, 5]], "mask": [True, False, True],
                                                 "inp": [[1.0, 2.0]] * 4})
    inp, index, mask = out["tensors"]
    assert "values" not in inp and "values" not in entry["tensors"][1]
    assert index["values"] == [4, 1, 0, 3, 2, 5] and mask["values"] == [1, 0, 1]
    from ceilings.launch import TensorArg

    arg = TensorArg(index["name"], tuple(index["shape"]), index["dtype"], tuple(index["stride"]),
                    values=tuple(index["values"]))
    assert arg.values == (4, 1, 0, 3, 2, 5)
