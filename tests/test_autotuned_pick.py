"""An autotuned launch captured without a GPU: what runs is the autotuner's pick, not the list's first
(advisor.advice.autotuner_pick.stand_for_autotuner), and the search climbs past the list for a config to add to it
(LaunchSubject._extends_list), which `apply` writes into the list.

The model's predictions are replaced by a known function of the config here: these tests check what the
search does with a ranking, not the model's accuracy (benchmarks and RESULTS hold that)."""

from __future__ import annotations

import math

import pytest

from advisor.advice.subjects import LaunchSubject

KERNEL = '''import torch
import triton
import triton.language as tl


@triton.autotune(configs=[
    triton.Config({"BLOCK": 256}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK": 512}, num_warps=4, num_stages=3),
], key=["n"])
@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


def scale(x):
    y = torch.empty_like(x)
    n = x.numel()
    scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
    return y
'''
CALL = "scale(randn(1048576, f32))"


def synthetic_us(config) -> float:
    """Faster with larger tiles and more warps, slower with more stages: the list's second config beats its
    first, and BLOCK 1024 w8 s2, one step past the list, beats both by far."""
    return 4096.0 / config["BLOCK"] / config.num_warps * config.num_stages


@pytest.fixture
def ranked_by_config(monkeypatch):
    real = LaunchSubject.predict

    def predict(self, configs, model=None):
        out = real(self, configs, model)
        for cand in out:
            cand.predicted_us = cand.model_us = synthetic_us(cand.config)
            cand.interval = (0.9 * cand.predicted_us, 1.1 * cand.predicted_us)
        return out

    monkeypatch.setattr(LaunchSubject, "predict", predict)
    monkeypatch.setattr(LaunchSubject, "list_climb_rounds", 1)


def _advice(path):
    from advisor.advice.suggest import advise, subjects_for

    (subject,) = subjects_for(str(path), call=CALL)
    (advice,) = advise([subject], top_k=3)
    return subject, advice


def test_the_autotuners_pick_is_current_and_a_config_past_the_list_is_named(tmp_path, ranked_by_config):
    path = tmp_path / "scale.py"
    path.write_text(KERNEL)
    subject, advice = _advice(path)
    assert subject.autotuner_picks and {c["BLOCK"] for c in subject.listed} == {256, 512}
    # current: the list's fastest (BLOCK 512), not its first (BLOCK 256), which a note names
    assert advice.current.config["BLOCK"] == 512 and advice.current.predicted_us == pytest.approx(6.0)
    assert any(n.startswith("autotuned over 2 configs") and "the list's first (BLOCK=256 w4 s3" in n
               for n in advice.caveats), advice.caveats
    # the climb past the list found a config the autotuner cannot pick: named, over the pick, not over the first
    best = advice.best.config
    assert best not in subject.listed and best in subject.climbed
    assert advice.speedup == pytest.approx(6.0 / synthetic_us(best)) and advice.gains(1.05)
    assert any("is not in the kernel's autotune list" in n for n in advice.notes)


def test_apply_adds_the_config_past_the_list_to_it(tmp_path, ranked_by_config, capsys):
    from advisor.advice.apply import backup_path, read_autotune_configs
    from advisor.cli import main

    path = tmp_path / "scale.py"
    path.write_text(KERNEL)
    _, advice = _advice(path)
    best = advice.best.config
    assert main(["apply", str(path), "--call", CALL]) == 0, capsys.readouterr().err
    listed = [c for c, _ in read_autotune_configs(path, "scale_kernel")]
    assert sorted(c["BLOCK"] for c in listed if c != best) == [256, 512] and best in listed and len(listed) == 3
    assert backup_path(path).read_text() == KERNEL  # the file as it was, kept beside it
    # everything but the list is as it was
    after = path.read_text()
    assert after.split("], key=")[1] == KERNEL.split("], key=")[1]


def test_with_every_config_of_the_list_equal_nothing_is_claimed_over_the_first(tmp_path, monkeypatch):
    """Without the replaced predictions: the real model's pick is the list's fastest predicted, and the
    gain over it is what `suggest` reports, never one over the list's first."""
    monkeypatch.setattr(LaunchSubject, "list_climb_rounds", 0)  # the list alone
    path = tmp_path / "scale.py"
    path.write_text(KERNEL)
    subject, advice = _advice(path)
    listed = subject.predict(sorted(subject.listed, key=lambda c: c["BLOCK"]))
    assert advice.current.predicted_us == pytest.approx(min(c.predicted_us for c in listed))
    assert advice.speedup == 1.0 and not advice.gains(1.0)
    assert math.isfinite(advice.headroom)


def test_a_list_whose_grids_the_rule_does_not_explain_is_searched_as_it_is(tmp_path, ranked_by_config):
    """The host's grid for a config of the list is not the launch rule's (it launches a fixed grid): configs
    past the list would need the rule's grid, a guess, so the search stays in the list and says why."""
    path = tmp_path / "scale.py"
    path.write_text(KERNEL.replace('(triton.cdiv(n, meta["BLOCK"]),)', "(4096,)"))
    subject, advice = _advice(path)
    assert set(subject.space()) == set(subject.listed) and not subject.climbed
    assert advice.best.config in subject.listed
    assert any("configs past the autotune list are not searched" in n for n in subject.notes), subject.notes
