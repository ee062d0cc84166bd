"""Configs that compile to one program run in one time (`Demand.binary`, `search.one_time_per_binary`).

Set 16's cross-entropy backward (benchmarks/user_kernels/cross_entropy_backward.py, RESULTS 66) loops over the
vocabulary with loads that feed no dot: Triton pipelines nothing, and num_stages 1-4 compile to one cubin. After
three timings the model still predicted num_stages 1 14% faster than the same binary timed at 3, named it, and it
ran as slow. A twin of a timed config now takes its timing, untimed twins share one prediction, and a search
lists no twin of the current config or of one ranked before it.
"""

from __future__ import annotations

import pytest

from advisor.advice.search import binary_of, predict_candidates, record_timings, search
from advisor.advice.suggest import subjects_for
from ceilings.hardware import resolve_gpu

FILE = "benchmarks/user_kernels/cross_entropy_backward.py"
CALL = "cross_entropy_backward(randn(64, 50000, bf16), randint(0, 50000, (64,), i64), rand(64, f32) * 0.001)"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_ADVISOR_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def subject():
    (s,) = subjects_for(FILE, call=CALL, gpu=resolve_gpu("h100"))
    return s


def test_num_stages_that_change_no_instruction_are_one_binary_with_one_prediction(cache):
    s = subject()
    stages = [s.current.replace(num_stages=n) for n in (1, 2, 3, 4)]
    wider = [s.current.replace(num_warps=16, num_stages=n) for n in (1, 3)]
    cands = predict_candidates(s, stages + wider)
    assert len({binary_of(c) for c in cands[:4]}) == 1  # the kernel's loop has nothing to pipeline
    assert binary_of(cands[4]) == binary_of(cands[5]) != binary_of(cands[0])  # more warps: another program
    # the current config's twins take its prediction; twins without the current config share one
    assert {c.predicted_us for c in cands[:4]} == {next(c for c in cands if c.config == s.current).predicted_us}
    assert cands[4].predicted_us == cands[5].predicted_us and cands[4].interval == cands[5].interval


def test_a_twin_of_a_timed_config_takes_its_timing(cache):
    s = subject()
    s1, s3 = s.current.replace(num_warps=16, num_stages=1), s.current.replace(num_warps=16, num_stages=3)
    (timed,) = predict_candidates(s, [s3])
    record_timings(s, [(timed, 2.0 * timed.predicted_us)])  # the binary runs twice as slow as predicted
    fresh = subject()
    one, three = predict_candidates(fresh, [s1, s3])
    assert three.timed_before and three.predicted_us == pytest.approx(2.0 * timed.predicted_us)
    assert one.timed_before and one.predicted_us == three.predicted_us
    assert any("the same compiled kernel as BLOCK_V=4096 w16 s3" in n for n in one.notes), one.notes


def test_a_search_lists_no_twin_of_the_current_config_nor_of_one_ranked_before(cache):
    s = subject()
    advice = search(s, confirm=False)
    listed = [binary_of(c) for c in advice.ranked if c.config != s.current]
    assert len(listed) == len(set(listed))
    assert binary_of(advice.current) not in listed
    assert advice.pruned["the same compiled kernel as the current config or one ranked before it"] >= 3


def test_a_calibration_sweep_never_times_a_twin_of_a_config_it_timed(cache):
    """`calibrate --kernel`'s sweep: a config timed far faster than predicted makes its twins the fastest predicted
    (they take its time); timing one of them would spend a timing on a program already timed."""
    from advisor.advice.kernel_sweep import sweep

    s = subject()
    steps = sweep(s, count=3, measure=lambda config: 1.0)
    assert steps[0][0] == s.current
    timed = predict_candidates(subject(), [config for config, _, _ in steps])
    assert len({binary_of(c) for c in timed}) == 3, [c.config.label() for c in timed]
