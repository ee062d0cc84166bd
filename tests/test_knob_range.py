"""A config knob past the values the latency model was fitted on (per kind of work) is called an
extrapolation, and `suggest` names no such config without timing it (advisor.model.knob_range)."""

from __future__ import annotations

import numpy as np

from advisor.model.features import FEATURES
from advisor.model.knob_range import MIN_ROWS, is_knob_note, knob_notes, knob_ranges
from ceilings.hardware import resolve_gpu

_TENSOR, _STAGES, _WARPS = (FEATURES.index(f) for f in ("share_tensor", "num_stages", "num_warps"))


def rows(tensor: bool, warps: int, stages: int, n: int) -> np.ndarray:
    x = np.zeros((n, len(FEATURES)), dtype=np.float32)
    x[:, _TENSOR] = 0.6 if tensor else 0.0
    x[:, _WARPS], x[:, _STAGES] = warps, stages
    return x


def test_ranges_are_per_kind_of_work_and_need_min_rows_per_value():
    x = np.concatenate([rows(True, 4, s, MIN_ROWS) for s in (2, 3, 4, 5)]
                       + [rows(True, 8, 1, MIN_ROWS - 1)]  # too few single-stage dot rows to count
                       + [rows(False, w, 1, MIN_ROWS) for w in (1, 16)])
    ranges = knob_ranges(x)
    assert ranges == {"tensor-core loops": {"num_warps": [4, 4], "num_stages": [2, 5]},
                      "kernels without tensor-core work": {"num_warps": [1, 16], "num_stages": [1, 1]}}
    probe = np.concatenate([rows(True, 4, 1, 1), rows(True, 4, 3, 1), rows(False, 8, 1, 1), rows(True, 16, 6, 1)])
    notes = knob_notes(ranges, probe)
    assert len(notes[0]) == 1 and notes[0][0].startswith("num_stages=1 lies outside the 2-5")
    assert "tensor-core loops" in notes[0][0] and is_knob_note(notes[0][0])
    assert notes[1] == [] and notes[2] == []  # inside; and 8 warps lies between the 1 and 16 seen without dots
    assert [n.split(" ")[0] for n in notes[3]] == ["num_warps=16", "num_stages=6"]
    assert knob_notes(None, probe) == [[], [], [], []] and knob_notes({}, probe)[0] == []
    assert not is_knob_note("the launch's features are far from every row the model was trained on")


def test_the_shipped_transfer_model_calls_a_single_stage_dot_loop_an_extrapolation():
    """Its corpus holds tensor-core loops at num_stages 2-5 only (RESULTS 49/50); a kernel-free row says so."""
    from advisor.model.predict import model_for

    model = model_for(resolve_gpu("h100"))
    x = np.concatenate([rows(True, 4, 1, 1), rows(True, 4, 3, 1), rows(False, 4, 1, 1)])
    x[:, FEATURES.index("generic_path")] = 1.0
    notes = model.outside_notes(x)
    assert any(is_knob_note(n) and "num_stages=1" in n for n in notes[0])
    assert not any(is_knob_note(n) for n in notes[1] + notes[2])


class _Flagging:
    """The shipped model, except that configs past `warps` warps are predicted twice as fast and flagged as a
    knob past the fitted range for `kind`: what a single-stage dot loop looked like to the transfer model."""

    def __init__(self, model, warps: int = 8, kind: str = "kernels without tensor-core work"):
        self.inner, self.meta, self.warps, self.kind = model, model.meta, warps, kind

    def _wide(self, x):
        return np.asarray(x)[:, _WARPS] > self.warps

    def predict_us(self, ceiling_us, x):
        mid, lo, hi = self.inner.predict_us(ceiling_us, x)
        half = np.where(self._wide(x), 0.5, 1.0)
        return mid * half, lo * half, hi * half

    def predict_log_ratio(self, x):
        return self.inner.predict_log_ratio(x)

    def outside_notes(self, x):
        ranges = {self.kind: {"num_warps": [1, self.warps]}}
        return [a + b for a, b in zip(self.inner.outside_notes(x), knob_notes(ranges, x), strict=True)]


def test_suggest_names_no_extrapolated_config_without_timings(tmp_path, monkeypatch):
    from advisor.advice.search import search
    from advisor.advice.subjects import FamilySubject
    from advisor.model.predict import model_for
    from kernels.family import families

    monkeypatch.setenv("TRITON_ADVISOR_CACHE", str(tmp_path / "cache"))
    family = next(f for f in families() if f.kernel == "softmax_kernel")
    subject = FamilySubject(family, family.read_shape("8192,4096"), resolve_gpu("h100"))
    model = _Flagging(model_for(subject.gpu))
    advice = search(subject, top_k=200, confirm=False, model=model)
    flagged = [c for c in advice.ranked if c.extrapolated]
    assert flagged, "the 16-warp configs stay listed"
    assert advice.best.config.num_warps != 16
    # every config the model has evidence for comes first, however fast a flagged one is predicted
    first_flagged = advice.ranked.index(flagged[0])
    assert all(c.extrapolated for c in advice.ranked[first_flagged:])
    assert min(c.predicted_us for c in flagged) < advice.best.predicted_us


def test_a_layers_launch_keeps_the_notes_the_model_gave_its_gemms():
    """The fused-MoE layer's candidate sums its two GEMMs' predictions; a knob past the model's range on them
    is the layer's too (the parts' model notes were dropped before)."""
    from advisor.advice.moe import layer
    from advisor.model.predict import model_for

    gpu = resolve_gpu("h100")
    subject = layer("mixtral-8x7b", 1024, tp=2, gpu=gpu)
    four = subject.current.replace(num_warps=4)
    eight = subject.current.replace(num_warps=8)
    model = _Flagging(model_for(gpu), warps=4, kind="tensor-core loops")
    kept, flagged = subject.predict([four, eight], model)
    assert not kept.extrapolated
    assert flagged.extrapolated and flagged.outside_data
    assert sum(is_knob_note(n) for n in flagged.notes) == 1  # one note for both GEMMs
