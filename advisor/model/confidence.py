"""How far to trust a prediction: whether a launch lies inside the model's data, and intervals that cover
what they claim.

**Inside or outside the data** is a distance in feature space, not a kernel's name: the features are
standardised by the training rows' spread, and a launch's distance is the distance to its nearest
training row of a support set (up to SUPPORT_ROWS rows of the training data, spread over it by a fixed
random draw, kept in `latency_support.npz` beside the model). A launch is outside the data when that
distance is beyond the `outside_quantile` of the same distance for the training rows themselves (each to
the support without itself), stored in the model's meta as `support.threshold`.

**Intervals** are the quantile models' 10%-90% band, widened by a factor found on held-out data (split
conformal prediction): predictions of rows whose shape was held out of training, each row's score the
factor its band must be widened by (in log space, about the median) to cover the measured time; the
factor stored is the score's 80% quantile, so the widened band covers 80% of held-out points. A second
factor, from families held out one at a time, applies to launches outside the data. Both are in meta as
`intervals` with the coverage before and after (`benchmarks/confidence.py` computes them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

SUPPORT_ROWS = 3000
OUTSIDE_QUANTILE = 0.99
SUPPORT_FILE = "latency_support.npz"
COVERAGE = 0.8           # the interval's claim: 10% to 90%
_MIN_HALF_WIDTH = 0.01   # a band clamped at the ceiling still widens upward; log units


@dataclass
class Support:
    """Standardised training rows the distance of a launch is measured to."""

    mean: np.ndarray
    scale: np.ndarray
    rows: np.ndarray      # [n, features], standardised
    threshold: float      # a distance beyond this is outside the data

    def distance(self, x: np.ndarray) -> np.ndarray:
        z = (np.asarray(x, dtype=np.float64) - self.mean) / self.scale
        out = np.empty(len(z))
        for start in range(0, len(z), 512):
            part = z[start:start + 512]
            d2 = (part ** 2).sum(1)[:, None] - 2 * part @ self.rows.T + (self.rows ** 2).sum(1)[None, :]
            out[start:start + 512] = np.sqrt(np.maximum(d2.min(1), 0.0))
        return out

    def outside(self, x: np.ndarray) -> np.ndarray:
        return self.distance(x) > self.threshold

    def save(self, folder: str | Path) -> Path:
        path = Path(folder) / SUPPORT_FILE
        np.savez_compressed(path, mean=self.mean, scale=self.scale, rows=self.rows.astype(np.float32),
                            threshold=np.array(self.threshold))
        return path

    @classmethod
    def load(cls, folder: str | Path) -> Support | None:
        path = Path(folder) / SUPPORT_FILE
        if not path.exists():
            return None
        with np.load(path) as f:
            return cls(f["mean"], f["scale"], f["rows"].astype(np.float64), float(f["threshold"]))


def fit_support(x: np.ndarray, rows: int = SUPPORT_ROWS, quantile: float = OUTSIDE_QUANTILE,
                seed: int = 0) -> Support:
    """The support of training rows `x` (see the module docstring)."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(0)
    scale = x.std(0)
    scale[scale < 1e-9] = 1.0  # a feature constant in training: a unit step away counts as one spread
    z = (x - mean) / scale
    unique = np.unique(z, axis=0)
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(unique), size=min(rows, len(unique)), replace=False)
    support = Support(mean, scale, unique[pick], np.inf)
    # Each training row's distance to the support without itself (its own copy is at distance 0).
    probe = z[rng.choice(len(z), size=min(len(z), 4000), replace=False)]
    d2 = (probe ** 2).sum(1)[:, None] - 2 * probe @ support.rows.T + (support.rows ** 2).sum(1)[None, :]
    d2 = np.where(d2 < 1e-12, np.inf, d2)
    support.threshold = float(np.quantile(np.sqrt(d2.min(1)), quantile))
    return support


def band_scores(mid_us: np.ndarray, lo_us: np.ndarray, hi_us: np.ndarray, measured_us: np.ndarray) -> np.ndarray:
    """Per point, the factor the band must be widened by (log space, about the median) to hold it."""
    m, y = np.log(mid_us), np.log(measured_us)
    below = np.maximum(m - np.log(lo_us), _MIN_HALF_WIDTH)
    above = np.maximum(np.log(hi_us) - m, _MIN_HALF_WIDTH)
    return np.maximum((m - y) / below, (y - m) / above)


def coverage(mid_us, lo_us, hi_us, measured_us, scale: float = 1.0) -> float:
    return float((band_scores(mid_us, lo_us, hi_us, measured_us) <= scale).mean())


def conformal_scale(scores: np.ndarray, level: float = COVERAGE) -> float:
    """The split-conformal factor: the ceil((n + 1) level)-th smallest score, at least 1 (never narrower)."""
    scores = np.sort(np.asarray(scores))
    k = min(int(np.ceil((len(scores) + 1) * level)), len(scores)) - 1
    return max(float(scores[k]), 1.0)


def widen(mid: np.ndarray, lo: np.ndarray, hi: np.ndarray, factor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A band in log space widened about its median by `factor` (per row)."""
    below = np.maximum(mid - lo, _MIN_HALF_WIDTH)
    above = np.maximum(hi - mid, _MIN_HALF_WIDTH)
    return mid - factor * below, mid + factor * above
