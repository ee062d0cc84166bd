"""The one fold loop of the accuracy and confidence figures: a row is predicted only by a model none of
whose training rows share its fold."""

from __future__ import annotations

import numpy as np

from advisor.model.dataset import Dataset
from advisor.model.held_out import held_out_predictions


def _data(groups: list[str]) -> Dataset:
    n = len(groups)
    return Dataset(np.arange(n, dtype=np.float32)[:, None], np.zeros(n), np.ones(n), np.ones(n), ["g"] * n,
                   groups, groups)


class _Stub:
    """A 'model' that remembers its training groups and predicts their count (to see which rows it had)."""

    def __init__(self, part: Dataset):
        self.groups = set(part.group)
        self.rows = len(part)

    def predict_us(self, ceiling_us, x):
        n = np.full(len(x), float(self.rows))
        return ceiling_us * n, ceiling_us * n - 1, ceiling_us * n + 1


def test_each_row_is_predicted_without_its_fold():
    groups = ["a"] * 3 + ["b"] * 5 + ["c"] * 2
    data = _data(groups)
    seen = []
    masks = [np.array([g == name for g in groups]) for name in ("a", "b", "c")]
    mid, lo, hi = held_out_predictions(data, masks, _Stub,
                                       on_fold=lambda i, train, test: seen.append((i, set(train.group),
                                                                                   set(test.group))))
    assert mid.tolist() == [7.0] * 3 + [5.0] * 5 + [8.0] * 2  # trained on every row but its fold's
    assert np.all(lo < mid) and np.all(mid < hi)
    assert [(i, tr & te) for i, tr, te in seen] == [(0, set()), (1, set()), (2, set())]


def test_rows_in_no_fold_stay_unpredicted():
    data = _data(["a", "a", "b"])
    mid, _, _ = held_out_predictions(data, [np.array([True, True, True]), np.array([False, False, True])], _Stub)
    assert np.isnan(mid[:2]).all() and mid[2] == 2.0  # a mask of every row trains on nothing: skipped
