"""Measured beats predicted (advisor/advice/measured.py): a config measured fastest on the GPU keeps its place unless
the prediction beats it beyond the model's error, and every report format says "measured" or "predicted"."""

from __future__ import annotations

import json

import pytest

from advisor.advice import report
from advisor.advice.moe import engine_file_subjects, engine_key_line
from advisor.advice.search import Candidate, Location, Subject
from advisor.advice.suggest import advise
from ceilings.errors import AdvisorError
from ceilings.hardware import resolve_gpu
from ceilings.launch import Config
from ceilings.roofline import Ceiling
from kernels.moe_configs import (
    SHIPPED_DIR,
    ConfigMeta,
    ConfigTable,
    MeasuredEntry,
    meta_path,
    write_config_file,
)

H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"


def moe(bm, bn, bk, gm, warps, stages) -> Config:
    return Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": gm}, warps, stages)


TUNED, OTHER, THIRD = moe(64, 128, 128, 1, 4, 4), moe(64, 64, 128, 1, 4, 3), moe(32, 64, 64, 8, 4, 3)


class Scripted(Subject):
    """A launch whose predictions are given per config: predicted us and its 10-90% interval."""

    def __init__(self, times: dict[Config, tuple[float, tuple[float, float]]], current: Config,
                 location: Location | None, gpu: str = "h100"):
        self.times, self.current, self.location = times, current, location
        self.gpu = resolve_gpu(gpu)
        self.kernel, self.label = "fused_moe_kernel", "scripted M=64"

    def space(self):
        return list(self.times)

    def ceilings(self, configs):
        return [Ceiling(self.spec.name, self.kernel, c.to_dict(), 100.0, "dram", {"dram": 100.0}, 264, 264, 1.0, 2,
                        {}, "scripted") for c in configs]

    def predict(self, configs, model=None):
        return [Candidate(c, ceiling, self.times[c][0], self.times[c][1], [])
                for c, ceiling in zip(configs, self.ceilings(configs), strict=True)]


def tuned_file(folder, measured_on: str = H100, entry: Config = TUNED):
    """An engine file with M=64 holding `entry`, and a side file: TUNED timed fastest of 300 on `measured_on`."""
    path = write_config_file(folder / "E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json",
                             ConfigTable({1: OTHER, 64: entry}),
                             ConfigMeta(measured_on, "3.6.0", {64: MeasuredEntry(TUNED, 313.0, 300)}, "sweep.csv"))
    return path, Location(str(path), engine_key_line(path, 64), 'entry "64"')


WITHIN = {TUNED: (470.0, (460.0, 490.0)), OTHER: (440.0, (420.0, 470.0)), THIRD: (500.0, (480.0, 520.0))}
BEYOND = {TUNED: (470.0, (460.0, 490.0)), OTHER: (380.0, (360.0, 400.0)), THIRD: (500.0, (480.0, 520.0))}


def test_a_measured_best_is_kept_when_the_gain_is_within_the_model_error(tmp_path):
    _, loc = tuned_file(tmp_path)
    (a,) = advise([Scripted(WITHIN, TUNED, loc)], top_k=3, confirm=False)
    assert a.best.config == TUNED and a.speedup == 1.0 and not a.gains(1.0)
    assert a.basis == "measured"
    assert a.why.startswith(f"the current config was measured the fastest of 300 configs for M=64 on {H100} "
                            "(the swept GEMM1 ran 313.0 us; E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json.meta); "
                            "the model's best, "
                            f"{OTHER.label()}, is predicted 1.07x faster, within the model's error")
    assert [c.config for c in a.ranked] == [TUNED, OTHER, THIRD]


def test_a_gain_beyond_the_model_error_is_still_reported_as_predicted(tmp_path):
    _, loc = tuned_file(tmp_path)
    (a,) = advise([Scripted(BEYOND, TUNED, loc)], top_k=3, confirm=False)
    assert a.best.config == OTHER and a.gains(1.05) and a.basis == "predicted"
    assert "the prediction beats it beyond the model's error (360.0-400.0 us vs 460.0-490.0 us, 10-90%)" in a.why


@pytest.mark.parametrize("case", ["no side file", "measured on another GPU", "entry edited since"])
def test_without_a_record_of_this_config_on_this_gpu_the_prediction_stands(tmp_path, case):
    path, loc = tuned_file(tmp_path, measured_on=H200 if case == "measured on another GPU" else H100,
                           entry=THIRD if case == "entry edited since" else TUNED)
    if case == "no side file":
        meta_path(path).unlink()
    current = THIRD if case == "entry edited since" else TUNED
    (a,) = advise([Scripted(WITHIN, current, loc)], top_k=3, confirm=False)
    assert a.best.config == OTHER and a.gains(1.0) and a.basis == "predicted"


def test_timed_in_this_run_is_measured(tmp_path):
    from advisor.advice.measured import weigh

    (a,) = advise([Scripted(WITHIN, TUNED, None)], top_k=3, confirm=False)
    a.measured = 3
    assert weigh(a).basis == "measured"


def test_a_broken_side_file_is_a_user_error(tmp_path):
    path, loc = tuned_file(tmp_path)
    meta_path(path).write_text("{not json\n")
    with pytest.raises(AdvisorError, match=r"\.json\.meta: not valid JSON .*fix or delete the side file"):
        advise([Scripted(WITHIN, TUNED, loc)], top_k=3, confirm=False)


def test_a_gain_that_rounds_to_1_00x_is_not_a_change():
    """Issue 12: M=4096 suggested a change at "1.00x" while its reason said the current config is the best."""
    times = {TUNED: (1000.0, (950.0, 1050.0)), OTHER: (998.0, (948.0, 1048.0))}  # 1.002x
    (a,) = advise([Scripted(times, TUNED, None)], top_k=3, confirm=False)
    assert a.best.config == TUNED and a.speedup == 1.0 and not a.gains(1.0)
    assert a.why.startswith("the current config is already the best found")


def test_every_format_says_measured_or_predicted(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    _, loc = tuned_file(tmp_path)
    kept, = advise([Scripted(WITHIN, TUNED, loc)], top_k=3, confirm=False)
    gained, = advise([Scripted(BEYOND, TUNED, loc)], top_k=3, confirm=False)
    doc = json.loads(report.to_json([kept, gained], 1.05))
    assert [launch["basis"] for launch in doc["launches"]] == ["measured", "predicted"]
    assert [launch["gains"] for launch in doc["launches"]] == [False, True]
    github = report.to_github([kept, gained], 1.05)
    assert github.count("::warning") == 1 and "title=triton-advisor 1.24x::" in github
    assert "1.24x predicted on" in github and "(470.0 -> 380.0 us)" in github
    sarif = json.loads(report.to_sarif([kept, gained], 1.05))
    (result,) = sarif["runs"][0]["results"]
    assert result["properties"]["basis"] == "predicted" and "1.24x predicted" in result["message"]["text"]
    report.render_text([kept, gained], 1.05)
    text = capsys.readouterr().out
    # The table marks a verdict that rests on measurements (gain column stays a number at 80 columns);
    # the reasons under it say which is which.
    assert "1.00x*" in text and "1.24x " in text and "1.24x*" not in text and "verdict rests on measurements" in text
    assert "1.24x predicted" in text
    assert "measured the fastest of 300 configs for M=64" in text  # why the measured config stays


def test_the_shipped_tuned_files_are_not_flagged_by_unmeasured_predictions():
    """Issue 12: each shipped measured-best file was flagged as leaving 1.05-1.16x on the table."""
    path = SHIPPED_DIR / "E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json"
    advices = advise(engine_file_subjects(path), top_k=3, confirm=False)
    assert len(advices) == 6
    from advisor.advice.measured import beyond_error

    for a in advices:
        assert a.basis == "measured" or beyond_error(a), (a.subject.label, a.why)
        assert not a.gains(1.0) or beyond_error(a), (a.subject.label, a.why)
    assert sum(a.basis == "measured" for a in advices) >= 1


def test_a_config_that_measures_wrong_is_left_out_not_the_command():
    """Issue 15 (GemLite's gemv on the GPU): one finalist that did not reproduce the current config's result
    ended `suggest --measure` with an error; it is left out, with a note, and the others are timed."""
    from advisor.measure.timing import MeasurementError

    measured = {TUNED: 470.0, THIRD: 450.0}

    class Timed(Scripted):
        def measurer(self):
            def run(config):
                if config not in measured:
                    raise MeasurementError(f"scripted {config.label()}: c_ptr differs from the reference")
                return measured[config]
            return run

    (a,) = advise([Timed(BEYOND, TUNED, None)], top_k=3, confirm=False, measure=3)
    assert [c.config for c in a.ranked] == [THIRD, TUNED] and a.measured == 2 and a.basis == "measured"
    assert any("c_ptr differs" in n and "left out" in n for n in a.notes)
    assert sum(a.pruned.values()) == 1
