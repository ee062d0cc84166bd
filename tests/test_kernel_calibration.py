"""Per-kernel calibration on CPU with synthetic timings: a model off by a constant factor for one kernel is
corrected by a few timings of that kernel, stored per kernel source and GPU, and the adaptive sweep
chooses what to time."""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest

from advisor.advice.kernel_sweep import sweep
from advisor.advice.search import predict_candidates
from advisor.advice.subjects import FamilySubject
from advisor.model import kernel_calibration as kc
from ceilings.errors import AdvisorError
from ceilings.hardware import resolve_gpu
from kernels.family import families


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_ADVISOR_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def softmax_subject() -> FamilySubject:
    family = next(f for f in families() if f.kernel == "softmax_kernel")
    return FamilySubject(family, family.read_shape("8192,4096"), resolve_gpu("h100"))


def test_a_constant_offset_is_learned_from_three_points():
    rng = np.random.default_rng(0)
    points = [kc.Point({"BLOCK": b}, "L", 10.0, float(p), 10.0 * math.exp(p) * 1.5, "")
              for b, p in zip((1, 2, 3), rng.uniform(0.1, 1.0, 3), strict=True)]
    c = kc.fit(points)
    others = rng.uniform(0.1, 1.0, 20)
    predicted = 10.0 * np.exp(c.log_ratio(others))
    truth = 10.0 * np.exp(others) * 1.5
    assert np.abs(predicted / truth - 1).max() < 0.03
    assert kc.fit(points[:1]).offset < math.log(1.5)  # one point moves it most of the way, not all
    assert kc.fit([]) is None


def test_a_slope_is_learned_from_four_points_and_shrunk():
    p = np.array([0.2, 0.5, 0.8, 1.1, 1.4])
    points = [kc.Point({"i": i}, "L", 1.0, float(v), float(math.exp(2 * v)), "") for i, v in enumerate(p)]
    c = kc.fit(points)
    assert 1.0 < c.slope < 2.0


def test_a_slope_on_the_log_ceiling_is_learned_when_asked():
    # The model right up to a level that grows with the ceiling: measured = ceiling^1.2 x exp(p).
    ceilings = [5.0, 20.0, 80.0]
    points = [kc.Point({"i": i}, "L", c, 0.3, c * math.exp(0.3) * c ** 0.2, "") for i, c in enumerate(ceilings)]
    plain, sloped = kc.fit(points), kc.fit(points, slope_on_ceiling=True)
    assert plain.ceiling_slope == 0.0 and 0.0 < sloped.ceiling_slope < 0.2  # shrunk toward 0
    other = 200.0
    truth = math.log(other ** 0.2) + 0.3
    err = lambda c: abs(float(c.log_ratio(np.array([0.3]), np.array([math.log(other)]))[0]) - truth)  # noqa: E731
    assert err(sloped) < err(plain)


def test_timings_are_kept_per_kernel_source_and_gpu(cache, tmp_path):
    src = tmp_path / "k.py"
    src.write_text("# a kernel\n")
    t = kc.KernelTimings.load(src, "k", "NVIDIA H100 80GB HBM3")
    t.add({"BLOCK": 64, "num_warps": 4, "num_stages": 3}, "launch A", 10.0, 0.2, 15.0)
    t.add({"BLOCK": 64, "num_warps": 4, "num_stages": 3}, "launch A", 10.0, 0.2, 14.0)  # re-timed: replaced
    path = t.save()
    assert path.is_relative_to(cache)
    again = kc.KernelTimings.load(src, "k", "NVIDIA H100 80GB HBM3")
    assert len(again.points) == 1 and again.measured({"BLOCK": 64, "num_warps": 4, "num_stages": 3}, "launch A") == 14
    assert kc.KernelTimings.load(src, "k", "NVIDIA H200").points == []  # another GPU
    src.write_text("# a kernel, edited\n")
    assert kc.KernelTimings.load(src, "k", "NVIDIA H100 80GB HBM3").points == []  # another source


def test_cache_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("TRITON_ADVISOR_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert kc.cache_home() == tmp_path / "triton-advisor"


def test_three_chosen_timings_correct_the_kernels_other_configs(cache):
    subject = softmax_subject()
    configs = list(dict.fromkeys([subject.current, *subject.space()[:40]]))
    model_view = {c.config: c.predicted_us for c in predict_candidates(subject, configs)}
    # The kernel runs 1.5x slower than the model predicts, config for config.
    truth = {c: 1.5 * us for c, us in model_view.items()}
    subject.space = lambda: configs
    steps = sweep(subject, 3, measure=lambda c: truth[c])
    assert len(steps) == 3 and steps[0][0] == subject.current  # the current config is timed first
    assert len({c for c, _, _ in steps}) == 3
    after = predict_candidates(subject, configs)
    timed = {c for c, _, _ in steps}
    errors = [abs(c.predicted_us / truth[c.config] - 1) for c in after if c.config not in timed]
    assert max(errors) < 0.03
    assert any("timings of this kernel" in n for n in after[0].notes)
    # A timed config is predicted by its measured time.
    first = next(c for c in after if c.config == steps[0][0])
    assert first.predicted_us == pytest.approx(steps[0][2])


def test_the_sweep_alternates_fastest_and_least_certain(cache):
    from advisor.advice.kernel_sweep import next_config
    from advisor.advice.search import Candidate
    from ceilings.launch import Config

    def cand(i, us, lo, hi):
        return Candidate(Config({"B": i}), None, us, (lo, hi))

    cands = [cand(0, 10, 9, 11), cand(1, 5, 4.9, 5.1), cand(2, 8, 2, 30)]
    current = Config({"B": 0})
    assert next_config(cands, set(), current, 0).config == current
    assert next_config(cands, {current}, current, 1).config == Config({"B": 1})
    assert next_config(cands, {current, Config({"B": 1})}, current, 2).config == Config({"B": 2})
    assert next_config(cands, {c.config for c in cands}, current, 3) is None


def test_sweep_refuses_a_count_outside_3_to_8(cache):
    with pytest.raises(AdvisorError, match="3 to 8"):
        sweep(softmax_subject(), 2, measure=lambda c: 1.0)


def test_calibrate_kernel_needs_its_launches(capsys):
    from advisor.cli import main

    assert main(["calibrate", "--kernel", "tests/fixtures/styles/tut03_matmul.py"]) == 2
    assert "--call" in capsys.readouterr().err


def test_the_autotune_hook_keeps_the_times_the_autotuner_measured(cache):
    from types import SimpleNamespace

    from advisor.advice.autotune import Pruner
    from advisor.advice.search import kernel_timings

    subject = softmax_subject()
    configs = list(dict.fromkeys([subject.current, *subject.space()[:3]]))
    candidates = predict_candidates(subject, configs)
    tuner = SimpleNamespace(configs_timings={c.config.to_triton(): [0.002 * (i + 1), 0.001, 0.003]
                                             for i, c in enumerate(candidates)})
    pruner = Pruner(2)
    pruner._pending = (tuner, {"subject": subject, "candidates": candidates})
    pruner.record_timed()
    stored = kernel_timings(subject)
    assert len(stored.points) == len(candidates)
    assert stored.measured(candidates[1].config.to_dict(), subject.label) == pytest.approx(4.0)
    assert pruner._pending is None


def test_untimed_configs_are_re_ranked_with_the_new_timings(cache):
    from advisor.advice.search import record_timings, rerank_untimed

    subject = softmax_subject()
    configs = list(dict.fromkeys([subject.current, *subject.space()[:40]]))
    cands = sorted(predict_candidates(subject, configs), key=lambda c: c.predicted_us)
    slow = cands[-3:]  # the three predicted slowest are timed: 1.5x the model, as the kernel really runs
    for c in slow:
        c.measured_us = 1.5 * c.predicted_us
    record_timings(subject, [(c, c.measured_us) for c in slow])
    notes = rerank_untimed(subject, [c.config for c in cands[:-3]], slow)
    assert notes and cands[0].config.label() in notes[0] and "3 timings" in notes[0]
    assert rerank_untimed(subject, [], slow) == []


def test_after_timings_an_untimed_config_must_beat_the_fastest_timed_beyond_the_noise(cache):
    """keep_timed: once the kernel's timings corrected the model, an untimed config is named over the fastest timed
    one only when predicted faster by more than exp(KEEP_Z sqrt(2) SIGMA); inside it the timed config stays."""
    import dataclasses
    from collections import Counter

    from advisor.advice.search import KEEP_Z, Advice, keep_timed

    subject = softmax_subject()
    a, b, c = predict_candidates(subject, list(dict.fromkeys([subject.current, *subject.space()]))[:3])
    margin = math.exp(KEEP_Z * math.sqrt(2) * kc.SIGMA)
    current = dataclasses.replace(a, predicted_us=100.0, timed_before=True, corrected_by=3)
    timed = dataclasses.replace(b, predicted_us=97.0, timed_before=True, corrected_by=3)
    for untimed_us, stays in ((97.0 / margin * 1.01, True), (97.0 / margin * 0.99, False)):
        untimed = dataclasses.replace(c, predicted_us=untimed_us, corrected_by=3, notes=[])
        advice = Advice(subject, current, [untimed, timed, current], 3, Counter())
        notes = keep_timed(advice)
        if stays:  # 97 measured against a prediction within the margin of it: the timed config is named
            assert advice.best is timed and "the fastest timed config stays" in notes[0]
        else:
            assert advice.best is untimed and notes == []


@pytest.mark.slow
def test_a_config_timed_at_the_launch_is_a_candidate_even_outside_the_space_searched(cache):
    """`calibrate --kernel` chooses from one space, `suggest` can search another (an autotuned kernel's follows the
    expected pick, which the timings move): the fastest config timed at the launch was never considered (a fresh
    GEMM's 1.44x-faster timed config, RESULTS 50). Timed configs are always candidates now."""
    from advisor.advice.search import record_timings, search
    from advisor.advice.suggest import subjects_for

    call = "w8_matmul(randn(16, 512, bf16), randint(-128, 127, (512, 1024), i8), randn(1024, f32))"
    (subject,) = subjects_for("benchmarks/user_kernels/w8_gemm.py", call=call, gpu=resolve_gpu("h100"))
    outside = subject.current.replace(num_warps=2, num_stages=5)
    assert outside not in subject.space()
    fastest = min(c.predicted_us for c in predict_candidates(subject, subject.space()))
    (cand,) = predict_candidates(subject, [outside])
    # timed 4x faster than any config of the space is predicted (twice as fast was enough until BM became searchable
    # at 16 rows, RESULTS 55: the timing's correction of its neighbours now brings one within reach)
    record_timings(subject, [(cand, fastest / 4)])
    (subject,) = subjects_for("benchmarks/user_kernels/w8_gemm.py", call=call, gpu=resolve_gpu("h100"))
    advice = search(subject, confirm=False)
    assert advice.best.config == outside and advice.best.timed_before
    assert advice.best.predicted_us == pytest.approx(fastest / 4)
    # the reason says what the gain rests on: this config's earlier timing, the current config's prediction
    assert "the suggestion measured here before, the other predicted" in advice.why, advice.why


@pytest.mark.slow
def test_an_autotuned_launch_is_calibrated_from_the_config_the_autotuner_picks(cache):
    """Captured without a GPU, an autotuned launch records its list's first config, but the autotuner runs the
    fastest of the list; the sweep times that one (the model's expected pick, `suggest`'s current) first."""
    from advisor.advice.kernel_sweep import sweep
    from advisor.advice.suggest import subjects_for

    call = "w8_matmul(randn(16, 4096, bf16), randint(-128, 127, (4096, 11008), i8), randn(11008, f32))"
    (subject,) = subjects_for("benchmarks/user_kernels/w8_gemm.py", call=call, gpu=resolve_gpu("h100"))
    assert subject.autotuner_picks and subject.listed
    in_list = predict_candidates(subject, sorted(subject.listed, key=lambda c: c.label()))
    pick = min(in_list, key=lambda c: c.predicted_us).config
    assert pick != subject.current  # the recorded first is not what runs
    steps = sweep(subject, count=3, measure=lambda config: 10.0)
    assert steps[0][0] == pick


@pytest.mark.slow  # searches and compiles an autotuned user-style kernel three times over (about 20 s on 2 busy cores)
def test_the_sweep_times_the_autotuners_pick_again_when_its_timings_move_it(cache):
    """The autotuner's expected pick is the list's config predicted fastest; when the first timing finds it far
    slower than predicted, the corrected predictions name another pick, and `suggest` would weigh timed configs
    against that one's prediction alone (RESULTS 64: a config 1.24x slower than the real pick named). The sweep
    times the moved pick next, as a step of its own: the config predicted fastest is still timed after it."""
    from advisor.advice.kernel_sweep import feasible_configs, reference
    from advisor.advice.suggest import subjects_for

    call = "w8_matmul(randn(16, 4096, bf16), randint(-128, 127, (4096, 11008), i8), randn(11008, f32))"
    (subject,) = subjects_for("benchmarks/user_kernels/w8_gemm.py", call=call, gpu=resolve_gpu("h100"))
    listed = sorted(subject.listed, key=lambda c: c.label())
    before = {c.config: c.predicted_us for c in predict_candidates(subject, listed)}
    first = min(before, key=before.get)
    feasible = feasible_configs(subject)
    chosen = []  # what the sweep should time at each step, read from the predictions it chooses by

    def measure(config):
        timed = {c for c, _ in chosen}
        if len(chosen) == 1:    # after the first timing: the expected pick as corrected
            chosen.append((reference(subject, predict_candidates(subject, listed)), config))
        elif len(chosen) == 2:  # then the config predicted fastest of those untimed
            untimed = [c for c in predict_candidates(subject, feasible) if c.config not in timed]
            chosen.append((min(untimed, key=lambda c: c.predicted_us).config, config))
        else:
            chosen.append((first, config))
        # The expected pick runs 30x slower than predicted; every other config as predicted.
        return before.get(config, 10.0) * (30.0 if config == first else 1.0)

    steps = sweep(subject, count=3, measure=measure)
    assert [config for config, _, _ in steps] == [timed for _, timed in chosen]
    assert steps[0][0] == first
    moved, fastest = chosen[1][0], chosen[2][0]
    assert moved != first and moved in subject.listed   # the timing moved the expected pick
    assert steps[1][0] == moved                          # and the sweep timed it next
    assert steps[2][0] == fastest and fastest != moved   # then the config predicted fastest, as before the move


@pytest.mark.slow
def test_a_config_that_computed_another_result_is_never_suggested_nor_its_warps_and_stages_twins(cache):
    """`calibrate --kernel` timed an int4 GEMV's K tile past its quantisation group, which computes another result,
    and the `suggest` after it named a config with the same tiles and other stages (RESULTS 52): what the GPU said
    of a config's result is kept with its timings, and every config of its meta-parameters is pruned."""
    from advisor.advice.search import search
    from advisor.advice.suggest import subjects_for
    from advisor.measure.timing import WrongResult

    call = "w8_matmul(randn(16, 512, bf16), randint(-128, 127, (512, 1024), i8), randn(1024, f32))"
    (subject,) = subjects_for("benchmarks/user_kernels/w8_gemm.py", call=call, gpu=resolve_gpu("h100"))
    bad: list[dict] = []
    # which configs the sweep times first follows the model; the one made wrong is the first timed whose
    # meta-parameters the space also holds with other num_warps / num_stages
    with_twins = Counter(json.dumps(c.params, sort_keys=True) for c in subject.space())

    def run(config):  # the GPU: the first such config other than the launch's own computes another result
        if config != subject.current and not bad and with_twins[json.dumps(config.params, sort_keys=True)] > 1:
            bad.append(dict(config.params))
        if bad and config.params == bad[0]:
            raise WrongResult(f"{config.label()}: OUT differs from the reference")
        return 10.0

    steps = sweep(subject, 8, measure=run)
    assert bad and all(c.params != bad[0] for c, _, _ in steps)  # the sweep met it and went on
    (again,) = subjects_for("benchmarks/user_kernels/w8_gemm.py", call=call, gpu=resolve_gpu("h100"))
    twins = [c for c in again.space() if c.params == bad[0]]
    assert len(twins) > 1  # other num_warps / num_stages with the same tiles are in the space
    advice = search(again, confirm=False)
    assert all(c.config.params != bad[0] for c in advice.ranked)
    assert any("computes another result" in why for why in advice.pruned), advice.pruned
    stored = kc.KernelTimings.load("benchmarks/user_kernels/w8_gemm.py", subject.kernel, subject.spec.name)
    assert all(stored.gave_wrong(c.to_dict(), subject.label) is not None for c in twins)
    assert stored.gave_wrong(subject.current.to_dict(), subject.label) is None
    assert stored.gave_wrong(twins[0].to_dict(), "another launch") is None
