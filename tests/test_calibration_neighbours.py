"""Per-kernel calibration by neighbours in the kernel's config space (advisor.model.kernel_calibration),
on timings whose relation to the configs is known by construction: a kernel that runs at a speed set by
its warp count alone (num_stages changes nothing), while the model predicts every config alike."""

from __future__ import annotations

import math

import numpy as np
import pytest

from advisor.model import kernel_calibration as kc

# By construction: the kernel's time over the model's, per warp count (num_stages plays no part).
FACTOR = {2: 3.0, 4: 1.0, 8: 1.5}
CEILING = 10.0
MODEL = 0.4  # the model's log(predicted / ceiling), the same for every config


def config(warps: int, stages: int) -> dict:
    return {"BLOCK": 64, "num_warps": warps, "num_stages": stages}


def truth(c: dict) -> float:
    return CEILING * math.exp(MODEL) * FACTOR[c["num_warps"]]


SPACE = [config(w, s) for w in FACTOR for s in (2, 3, 4)]
TIMED = [config(w, 2) for w in FACTOR]


def corrected(configs: list[dict] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    store = kc.KernelTimings("k", "gpu", [kc.Point(c, "L", CEILING, MODEL, truth(c)) for c in TIMED])
    n = len(SPACE)
    mid = np.full(n, MODEL)
    return store.correct(np.full(n, CEILING), mid, mid - 0.3, mid + 0.6, configs, "L")


def test_distance_counts_doublings_of_each_meta_parameter_and_a_changed_string_as_one():
    assert kc.config_distance(config(4, 2), config(4, 2), 1.0, 1.0) == 0.0
    assert kc.config_distance(config(4, 2), config(8, 4), 1.0, 1.0) == pytest.approx(math.sqrt(2.0))
    assert kc.config_distance({"P": "ieee", "num_warps": 4}, {"P": "tf32", "num_warps": 4}, 1.0, 1.0) == 1.0
    assert kc.config_distance({"num_warps": 4}, {"num_warps": 4, "EVEN": True}, 1.0, 1.0) == 1.0
    # The model's predicted time is one more coordinate: a factor 2 weighs sqrt(TIME_WEIGHT) doublings.
    doubled = kc.config_distance(config(4, 2), config(4, 2), 0.0, math.log(2.0))
    assert doubled == pytest.approx(math.sqrt(kc.TIME_WEIGHT))


def test_timed_configs_correct_their_twins_where_one_kernel_wide_factor_cannot():
    mid, _, _ = corrected(SPACE)
    wide, _, _ = corrected(None)
    measured = np.array([truth(c) for c in SPACE])
    err, err_wide = np.abs(mid / measured - 1), np.abs(wide / measured - 1)
    twins = [i for i, c in enumerate(SPACE) if c["num_stages"] == 3]  # one stage from a timed config
    # Up to 3x between neighbouring warp counts: a kernel-wide factor is 9-63% off on every config.
    assert err_wide[twins].min() > 0.08
    assert err[twins].max() < 0.25
    assert all(err[i] < 0.5 * err_wide[i] for i in twins)
    assert all(err[i] < err_wide[i] for i in range(len(SPACE)))
    assert err.mean() < 0.5 * err_wide.mean()


def test_the_band_is_the_noise_next_to_a_timed_config_and_the_kernels_spread_far_from_all():
    store = kc.KernelTimings("k", "gpu", [kc.Point(c, "L", CEILING, MODEL, truth(c)) for c in TIMED])
    far = {"BLOCK": 1024, "num_warps": 32, "num_stages": 7}
    mid = np.full(2, MODEL)
    m, lo, hi = store.correct(np.full(2, CEILING), mid, mid - 0.3, mid + 0.6, [TIMED[1], far], "L")
    width = np.log(hi / lo)
    noise = 2 * kc.Z80 * kc.SIGMA  # the 80% band of the timing noise alone
    assert noise <= width[0] < 1.3 * noise
    assert width[1] > 3 * width[0]
    # The far config gets the kernel-wide correction alone.
    assert m[1] == pytest.approx(corrected(None)[0][0], rel=1e-3)


def test_timings_of_another_launch_do_not_act_as_neighbours():
    points = [kc.Point(c, "other launch", CEILING, MODEL, truth(c)) for c in TIMED]
    store = kc.KernelTimings("k", "gpu", points)
    mid = np.full(len(SPACE), MODEL)
    with_launch = store.correct(np.full(len(SPACE), CEILING), mid, mid - 0.3, mid + 0.6, SPACE, "L")[0]
    kernel_wide = store.correct(np.full(len(SPACE), CEILING), mid, mid - 0.3, mid + 0.6)[0]
    assert np.allclose(with_launch, kernel_wide)


def test_spread_pick_times_the_config_farthest_from_those_timed():
    configs = [config(4, 2), config(4, 3), config(8, 2), config(2, 4)]
    log_us = [1.0] * 4
    assert kc.spread_pick(configs, log_us, []) == 0
    assert kc.spread_pick(configs, log_us, [0]) == 3          # a doubling of warps and of stages away
    assert kc.spread_pick(configs, log_us, [0, 3]) == 2
    assert kc.spread_pick(configs, log_us, [0, 1, 2, 3]) is None
    twins = [config(4, 2), config(8, 2), config(2, 2)]      # two at one distance: the first in order
    assert kc.spread_pick(twins, [1.0] * 3, [0]) == 1


def test_after_a_sweep_suggest_predicts_the_twins_of_timed_configs_from_their_timings(monkeypatch):
    from advisor.advice.kernel_sweep import sweep
    from advisor.advice.search import predict_candidates
    from advisor.advice.subjects import FamilySubject
    from ceilings.hardware import resolve_gpu
    from kernels.family import families

    family = next(f for f in families() if f.kernel == "softmax_kernel")
    subject = FamilySubject(family, family.read_shape("8192,4096"), resolve_gpu("h100"))
    configs = list(dict.fromkeys([subject.current, *subject.space()[:40]]))
    model_view = {c.config: c.predicted_us for c in predict_candidates(subject, configs)}
    # By construction the kernel runs the model's time times a factor set by its warp count alone.
    factor = {1: 2.5, 2: 1.6, 4: 1.0, 8: 1.3, 16: 2.0, 32: 2.4}
    truth = {c: us * factor[c.num_warps] for c, us in model_view.items()}
    subject.space = lambda: configs
    timed = {c for c, _, _ in sweep(subject, 3, measure=lambda c: truth[c])}

    def errors() -> dict:
        return {c.config: abs(c.predicted_us / truth[c.config] - 1)
                for c in predict_candidates(subject, configs) if c.config not in timed}

    with_neighbours = errors()
    monkeypatch.setattr(kc, "neighbour_correction",
                        lambda points, wide, cfgs, log_us, launch=None: (np.zeros(len(cfgs)), np.zeros(len(cfgs))))
    kernel_wide = errors()
    twins = [c for c in with_neighbours
             if any(t.params == c.params and t.num_warps == c.num_warps for t in timed)]
    assert twins  # the space holds configs that differ from a timed one in num_stages only
    assert max(with_neighbours[c] for c in twins) < 0.25
    assert all(with_neighbours[c] < kernel_wide[c] for c in twins)
    assert np.mean(list(with_neighbours.values())) < np.mean(list(kernel_wide.values()))


def test_the_sweeps_third_pick_is_the_config_farthest_from_those_timed_not_the_widest_band():
    from advisor.advice.kernel_sweep import next_config
    from advisor.advice.search import Candidate
    from ceilings.launch import Config

    def cand(warps: int, stages: int, us: float, band: tuple[float, float]) -> Candidate:
        return Candidate(Config({"BLOCK": 64}, num_warps=warps, num_stages=stages), None, us, band)

    current, fastest = cand(4, 2, 10.0, (9, 11)), cand(8, 2, 5.0, (4.9, 5.1))
    twin = cand(4, 3, 10.0, (2, 40))          # the widest band, but next to the current config
    far = cand(32, 5, 12.0, (11, 13))
    cands = [current, fastest, twin, far]
    timed = {current.config, fastest.config}
    assert next_config(cands, set(), current.config, 0) is current
    assert next_config(cands, {current.config}, current.config, 1) is fastest
    assert next_config(cands, timed, current.config, 2) is far
