"""The figures `benchmarks/user_sets_model.py` reports for the transfer model on held-out sets (issue 15):
MAPE, Spearman per launch, the predicted fastest against the fastest timed, the band's coverage."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
user_sets_model = pytest.importorskip("user_sets_model")


def _rows(case: str, measured: list[float]) -> list[dict]:
    return [{"gpu": "h200", "case": case, "measured_us": m, "ceiling_us": m / 2} for m in measured]


def test_figures_of_two_launches_against_hand_computed_values():
    rows = _rows("a", [10.0, 20.0, 30.0]) + _rows("b", [5.0, 4.0])
    # launch a ranked in order, 10% high each; launch b: the predicted fastest (5.0 measured) is 1.25x the best
    mid = np.array([11.0, 22.0, 33.0, 4.0, 4.4])
    lo, hi = mid * 0.9, mid * 1.1
    f = user_sets_model.figures(rows, mid, lo, hi)
    assert f["rows"] == 5 and f["launches"] == 2
    assert f["mape"] == pytest.approx(np.mean([0.1, 0.1, 0.1, 0.2, 0.1]))
    assert f["spearman"] == pytest.approx(1.0)  # only launch a has >= 3 configs
    assert f["top1_105"] == pytest.approx(0.5)  # a picks its fastest, b picks 1.25x
    # inside [0.9, 1.1] x predicted: a's three (measured = predicted / 1.1), b's 4.0 at 4.4 (ratio 1.1); not 5.0 at 4.0
    assert f["band"] == pytest.approx(4 / 5)


def test_set_ranges_parse_as_the_command_line_writes_them():
    assert user_sets_model.parse_sets("1-9") == list(range(1, 10))
    assert user_sets_model.parse_sets("10") == [10]


def test_the_keep_margin_names_the_models_fastest_only_past_exp_z_sqrt2_sd():
    """`margin`'s simulation of suggest's keep-the-own-config rule, against hand-computed outcomes."""
    def launch(case, rows):
        return [{"set": 1, "gpu": "h200", "case": case, "config": c, "measured_us": m} for c, m, _ in rows]

    # launch a: own config "o" (10 us), the model's fastest "x" predicted 1.2x faster, runs slower (11 us);
    # launch b: own "o" (10 us), the model's fastest "y" predicted 1.5x faster, runs fastest (6 us)
    a = [("o", 10.0, 10.0), ("x", 11.0, 10.0 / 1.2), ("z", 9.0, 9.5)]
    b = [("o", 10.0, 10.0), ("y", 6.0, 10.0 / 1.5), ("w", 8.0, 9.0)]
    rows = launch("a", a) + launch("b", b)
    predicted = np.array([p for _, _, p in a + b])
    own = {(1, "h200", "a"): "o", (1, "h200", "b"): "o"}
    sd = [0.2] * len(rows)  # margins: z 0 -> 1.0x, z 0.8416 -> exp(0.8416 * 1.414 * 0.2) = 1.27x
    named_always = user_sets_model.margin_outcomes(rows, predicted, sd, 0.0, own)
    assert sorted(named_always) == [(False, False), (True, True)]  # x is slower than own and 1.22x the fastest
    kept_a = user_sets_model.margin_outcomes(rows, predicted, sd, 0.8416, own)
    assert sorted(kept_a) == [(True, False), (True, True)]  # a keeps own (10 us, 1.11x its fastest); b names y
    assert user_sets_model.margin_outcomes(rows, predicted, sd, 0.0, {}) == []  # no own config known: no launch
