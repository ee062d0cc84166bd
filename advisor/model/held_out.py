"""Held-out predictions: every row of a dataset predicted by a model trained without its fold.

The one fold loop behind the accuracy and confidence figures (`benchmarks/accuracy.py`,
`benchmarks/confidence.py`, `benchmarks/corpus/check_model.py`): folds by shape, by kernel family or by
library are all test masks over the rows, and a row is predicted only by a model none of whose training
rows share its fold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from advisor.model.dataset import Dataset


def held_out_predictions(data: Dataset, masks: Sequence[np.ndarray], fit: Callable[[Dataset], object],
                         on_fold: Callable[[int, Dataset, Dataset], None] | None = None):
    """(mid, lo, hi) in us per row, each from `fit` (a training split -> LatencyModel) applied to the rows
    outside the row's mask; rows in no mask (or a mask holding every row) stay NaN. `on_fold(i, train,
    test)` is told of each fold, for progress or per-fold extras."""
    mid, lo, hi = (np.full(len(data), np.nan) for _ in range(3))
    for i, mask in enumerate(masks):
        mask = np.asarray(mask, dtype=bool)
        if mask.all() or not mask.any():
            continue
        train, test = data.subset(~mask), data.subset(mask)
        mid[mask], lo[mask], hi[mask] = fit(train).predict_us(test.ceiling_us, test.x)
        if on_fold:
            on_fold(i, train, test)
    return mid, lo, hi
