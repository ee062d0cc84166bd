"""A sweep spread over several GPUs (advisor/measure/spread.py), checked without a GPU.

The worker processes are real (spawned, one per "GPU", each with its CUDA_VISIBLE_DEVICES); what they
measure is a fake that writes down which device it ran on, so the scheduling, the part files, their
merge into the one CSV and resuming are what is tested. It has not run on a machine with two GPUs.
"""

from __future__ import annotations

import csv
import functools
import os
import time

import pytest

from advisor.measure import spread
from advisor.measure.sweep import CSV_FIELDS, SweepPlan, pair_key, run_sweep
from ceilings.errors import AdvisorError
from ceilings.launch import Config


class FakeSpec:
    def __init__(self, m: int):
        self.m, self.gemm, self.shape_label = m, 1, "E8_top2_K64_N64"

    def compile_signature(self, config: Config) -> tuple:
        return ()

    def flops(self) -> int:
        return 2 * self.m

    def __eq__(self, other):
        return isinstance(other, FakeSpec) and other.m == self.m

    def __hash__(self):
        return hash(self.m)


class FakeCase:
    def __init__(self, spec: FakeSpec):
        self.spec = spec

    def compulsory_bytes(self) -> int:
        return 0


def fake_measure(case, config: Config, plan, best_quick_us) -> dict:
    """Stands in for checking and timing on a GPU: which device the worker saw, and a time."""
    time.sleep(0.05)
    return {"status": "ok", "us": float(case.spec.m + config.num_warps),
            "reason": f"device {os.environ.get('CUDA_VISIBLE_DEVICES')}"}


def fake_plan(ms: tuple[int, ...] = (1, 16, 256), warps: tuple[int, ...] = (1, 2, 4, 8)) -> SweepPlan:
    configs = [Config({"BLOCK": 16}, num_warps=w, num_stages=2) for w in warps]
    return SweepPlan("fake_kernel", [FakeSpec(m) for m in ms], configs, make_case=FakeCase, compile_fn=None,
                     measure_fn=fake_measure, timing={"mode": "graph"},
                     rebuild=functools.partial(fake_plan, ms, warps))


def _rows(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_a_sweep_spread_over_two_gpus_measures_each_point_once_and_merges(tmp_path):
    path = tmp_path / "sweep.csv"
    plan = fake_plan()
    summary = run_sweep(plan, path, gpus=["3", "5"], show_progress=False)
    assert summary["complete"] and summary["rows_written"] == 12 and summary["gpus"] == 2
    rows = _rows(path)
    keys = [(r["M"], r["config"]) for r in rows]
    assert len(keys) == 12 and len(set(keys)) == 12
    assert {r["reason"] for r in rows} == {"device 3", "device 5"}  # every GPU got work
    by_case: dict = {}
    for r in rows:  # a case stays on one GPU (its timings share the case's slow cut)
        by_case.setdefault(r["M"], set()).add(r["reason"])
    assert all(len(devices) == 1 for devices in by_case.values())
    assert not spread.part_paths(path)                         # parts merged and removed
    assert sorted(p["units"] for p in summary["per_gpu"]) == [1, 2]  # 2 first units, 1 from the queue
    again = run_sweep(plan, path, gpus=["3", "5"], show_progress=False)
    assert again["rows_written"] == 0 and again["already_done"] == 12 and again["complete"]


def test_an_interrupted_spread_sweep_resumes_from_its_part_files(tmp_path):
    path = tmp_path / "sweep.csv"
    plan = fake_plan(ms=(1, 16), warps=(1, 2, 4))
    # A run killed before merging: one point in the CSV, two in a worker's part file (one of them also in the CSV).
    done = [(plan.specs[0], plan.configs[0]), (plan.specs[0], plan.configs[1])]
    for name, pairs in ((path.name, done[:1]), (path.name + ".gpu1.part", done)):
        with open(tmp_path / name, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
            writer.writeheader()
            for spec, config in pairs:
                writer.writerow({"kernel": "fake_kernel", "gemm": 1, "shape": spec.shape_label, "M": spec.m,
                                 "config": config.label(), "timing": "graph", "status": "ok", "reason": "earlier"})
    summary = run_sweep(plan, path, gpus=["0", "1"], show_progress=False)
    assert summary["recovered_rows"] == 1 and summary["already_done"] == 2 and summary["rows_written"] == 4
    rows = _rows(path)
    assert len(rows) == 6 and len({(r["M"], r["config"]) for r in rows}) == 6
    assert sum(r["reason"] == "earlier" for r in rows) == 2 and not spread.part_paths(path)


def test_work_units_split_cases_when_there_are_fewer_than_gpus():
    plan = fake_plan(ms=(1,), warps=(1, 2, 4, 8))
    units = spread.work_units(plan, plan.pairs(), gpus=4)
    assert len(units) == 4 and sorted(len(u) for u in units) == [1, 1, 1, 1]
    assert {k for u in units for k in u} == {pair_key(plan, s, c) for s, c in plan.pairs()}
    plan = fake_plan(ms=(1, 16, 256))
    assert [len(u) for u in spread.work_units(plan, plan.pairs(), gpus=2)] == [4, 4, 4]


def test_gpus_option():
    assert spread.parse_gpus("all", ["2", "3"]) == ["2", "3"]
    assert spread.parse_gpus("1", ["2", "3"]) == ["2"]
    assert spread.parse_gpus(None, ["0"]) == ["0"]
    for text, needle in (("3", "shows 2 GPU"), ("two", "number of GPUs"), ("0", "number of GPUs")):
        with pytest.raises(AdvisorError, match=needle):
            spread.parse_gpus(text, ["2", "3"])
    with pytest.raises(AdvisorError, match="sees no GPU"):
        spread.parse_gpus("all", [])
    assert spread.visible_gpus("1") is None


def test_a_plan_that_cannot_reach_a_worker_is_a_user_error(tmp_path):
    plan = SweepPlan("fake_kernel", [FakeSpec(1)], [Config({}, num_warps=4, num_stages=2)], make_case=FakeCase,
                     compile_fn=None, measure_fn=lambda *a: {}, timing={"mode": "graph"})
    with pytest.raises(AdvisorError, match="--gpus 1"):
        run_sweep(plan, tmp_path / "s.csv", gpus=["0", "1"], show_progress=False)
