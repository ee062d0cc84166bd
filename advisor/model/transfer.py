"""The transfer model: predicted latency of launches whose work comes from the generic path (any kernel
not declared in `kernels/`), learned on other libraries' kernels (issue 15).

The shipped model (`advisor.model.predict`) learned the efficiency of four exact-demand families; on a
library it never saw it does worse than a constant (benchmarks/RESULTS.md sections 14 and 18). This one
is fitted on generic-path points only (the corpus's libraries and, since RESULTS 57, nine sets of kernels
written the way users write them, each set a "library"; two GPUs) and chosen by leave-one-library-out, so
what it learns must hold on a library it did not see:

- **Target**: log(measured / ceiling), the efficiency gap. **Prior**: the constant that minimises the
  mean absolute percentage error of the training points (`mape_level`: the median of measured / ceiling
  weighted by ceiling / measured), the booster's base score; the trees only move a row away from it.
- **Loss**: the absolute percentage error itself (`mape_objective`), not the squared log error: the
  generic ceiling misses most of the work of a few kernels (measured / ceiling up to ~200), and a squared
  loss lets those few decide every split.
- **Which trees**: a few shallow, strongly regularised candidates (CANDIDATES) and the constant alone;
  `fit_transfer` chooses by an inner leave-one-library-out over the libraries it is given and keeps the
  residuals of that choice for the band.
- **Band**: split conformal on those held-out residuals: the 10% and 90% points of log(measured /
  predicted) over the libraries left out one at a time, added to the median. It claims 80%. Given each
  row's GPU, one band per GPU of at least MIN_GPU_ROWS rows (its own residuals; the GPUs' spreads differ:
  benchmarks/RESULTS.md section 33), recognised at prediction by the GPU's constants in the feature row;
  a GPU it has no band for gets the band of all rows.

`RoutedModel` serves the product: rows with the `generic_path` feature go to this model, the others to
the shipped model unchanged (no in-family change by construction).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from advisor.model.confidence import OUTSIDE_QUANTILE, Support, fit_support
from advisor.model.features import FEATURES, TRANSFER_FEATURES
from advisor.model.knob_range import knob_ranges
from ceilings.errors import AdvisorError

TRANSFER_DIR = Path(__file__).resolve().parent / "models" / "transfer"
META_FILE = "transfer_meta.json"
MEDIAN_FILE = "transfer_median.npz"

# The GPU's own constants describe no kernel, and both GPUs the corpus was timed on are Hopper parts with
# 132 SMs: a split on them would learn the GPU, not the work.
_GPU_CONSTANTS = ("sms", "clock_ghz", "dram_tbs", "log_tensor_peak")
FEATURE_SETS: dict[str, tuple[str, ...]] = {
    # How the work meets the machine: pipelines' shares, waves and tail, occupancy, bytes in flight,
    # instructions per byte, working set vs L2, the launch's share, the generic path's notes, the config.
    "transfer": (*(f for f in TRANSFER_FEATURES if f != "generic_path"), "waves", "wave_tail", "active_fraction",
                 "num_warps", "num_stages", "log_ceiling_us", "wgmma", "log_intensity", "registers", "log_shared"),
    "all": tuple(f for f in FEATURES if f not in _GPU_CONSTANTS),
}
# (feature set, depth, rounds): shallow trees, at least 20 rows' weight per leaf, a strong L2 on leaves.
CANDIDATES: dict[str, tuple[str, int, int] | None] = {
    "level only": None,
    **{f"{s}, depth {d}, {r} rounds": (s, d, r) for s in FEATURE_SETS for d in (2, 3) for r in (50, 150)},
}
PARAMS = {"eta": 0.05, "min_child_weight": 20, "lambda": 10.0, "subsample": 0.8, "colsample_bytree": 0.8,
          "seed": 0, "nthread": 1}
LEVEL = 0.8  # the band's claim
MIN_GPU_ROWS = 100  # fewer held-out residuals than this make a band of their own too noisy: the pooled one
# The feature columns that tell GPUs apart in a row (a spec's own numbers, `features.feature_row`).
_GPU_KEY = ("sms", "clock_ghz", "dram_tbs")


def mape_level(y: np.ndarray) -> float:
    """log of the constant c minimising mean |c / r - 1| over ratios r = exp(y): the median of r weighted
    by 1 / r (the loss is |c - r| / r)."""
    r = np.exp(np.asarray(y, dtype=float))
    order = np.argsort(r)
    w = np.cumsum(1.0 / r[order])
    return float(math.log(r[order][np.searchsorted(w, w[-1] / 2)]))


def mape_objective(pred: np.ndarray, dtrain) -> tuple[np.ndarray, np.ndarray]:
    """Gradient and curvature of |exp(pred - y) - 1| (the absolute percentage error) in the margin."""
    e = np.exp(pred - dtrain.get_label())
    return np.sign(pred - dtrain.get_label()) * e, e


def _columns(names: Sequence[str]) -> list[int]:
    return [FEATURES.index(f) for f in names]


def fit_median(x: np.ndarray, y: np.ndarray, candidate: tuple[str, int, int] | None):
    """(level, booster or None, feature names) for rows `x` of all FEATURES."""
    level = mape_level(y)
    if candidate is None:
        return level, None, []
    import xgboost as xgb

    names, depth, rounds = FEATURE_SETS[candidate[0]], candidate[1], candidate[2]
    m = xgb.DMatrix(np.asarray(x, np.float32)[:, _columns(names)], label=y)
    booster = xgb.train({**PARAMS, "max_depth": depth, "base_score": level}, m, num_boost_round=rounds,
                        obj=mape_objective)
    return level, booster, list(names)


def _predict_median(fitted, x: np.ndarray) -> np.ndarray:
    level, booster, names = fitted
    if booster is None:
        return np.full(len(x), level)
    import xgboost as xgb

    return booster.predict(xgb.DMatrix(np.asarray(x, np.float32)[:, _columns(names)]), output_margin=True)


def held_out_by_library(x: np.ndarray, y: np.ndarray, library: np.ndarray, candidate) -> np.ndarray:
    """log(predicted / ceiling) of every row from a model fitted without its library (clamped at 0)."""
    out = np.full(len(y), np.nan)
    for lib in np.unique(library):
        test = library == lib
        out[test] = _predict_median(fit_median(x[~test], y[~test], candidate), x[test])
    return np.maximum(out, 0.0)


def mean_library_ape(pred: np.ndarray, y: np.ndarray, library: np.ndarray) -> float:
    ape = np.abs(np.exp(pred - y) - 1)
    return float(np.mean([ape[library == lib].mean() for lib in np.unique(library)]))


def conformal_band(residuals: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """Offsets (log) below and above the median holding `level` of held-out residuals, split-conformal
    ranks (finite-sample: the band is at least as wide as the empirical quantiles)."""
    r = np.sort(np.asarray(residuals))
    n, tail = len(r), (1 - level) / 2
    lo = max(int(math.floor((n + 1) * tail)) - 1, 0)
    hi = min(int(math.ceil((n + 1) * (1 - tail))) - 1, n - 1)
    return float(r[lo]), float(r[hi])


def choose(x: np.ndarray, y: np.ndarray, library: np.ndarray, candidates: dict = CANDIDATES):
    """The candidate of lowest mean per-library MAPE over a leave-one-library-out on the rows given, its
    held-out predictions (log ratio), and every candidate's score."""
    scores, held = {}, {}
    for name, candidate in candidates.items():
        held[name] = held_out_by_library(x, y, library, candidate)
        scores[name] = mean_library_ape(held[name], y, library)
    best = min(scores, key=scores.get)
    return best, held[best], scores


def within_launch_sd(residuals: np.ndarray, launch: Sequence[str]) -> float | None:
    """The spread of held-out residuals among the configs of one launch (its own offset removed, launches
    of 3 or more configs): the error of a predicted speed-up between two configs is sqrt(2) times it."""
    launch = np.asarray(launch)
    parts = [residuals[launch == k] - residuals[launch == k].mean() for k in np.unique(launch)
             if (launch == k).sum() >= 3]
    return float(np.sqrt((np.concatenate(parts) ** 2).mean())) if parts else None


@dataclass
class TransferModel:
    level: float                 # the prior, log(predicted / ceiling)
    median: object               # TreeEnsemble or xgboost.Booster over `features`; None: the level alone
    band: tuple[float, float]    # log offsets of the 80% band about the median (every GPU)
    meta: dict
    support: Support | None = None

    def bands(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The band's log offsets per row: its GPU's (meta `band_by_gpu`, matched on the GPU's constants
        in the row), else the band of all rows."""
        x = np.asarray(x, np.float32)
        lo, hi = np.full(len(x), self.band[0]), np.full(len(x), self.band[1])
        key = x[:, _columns(_GPU_KEY)]
        for entry in self.meta.get("band_by_gpu", {}).values():
            match = np.all(np.isclose(key, np.asarray(entry["key"], np.float32), rtol=1e-4), axis=1)
            lo[match], hi[match] = entry["band"]
        return lo, hi

    @property
    def features(self) -> list[str]:
        return list(self.meta.get("features", []))

    def predict_log_ratio(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """log(predicted / ceiling) and its band for rows of all FEATURES (the median at least 0: no
        launch beats its ceiling)."""
        x = np.asarray(x, np.float32)
        if self.median is None:
            mid = np.full(len(x), self.level)
        elif hasattr(self.median, "save_raw"):
            mid = _predict_median((self.level, self.median, self.features), x)
        else:
            mid = self.median.predict(x[:, _columns(self.features)])
        mid = np.maximum(np.asarray(mid, dtype=float), 0.0)
        lo, hi = self.bands(x)
        return mid, mid + lo, mid + hi

    def predict_us(self, ceiling_us: np.ndarray, x: np.ndarray):
        mid, lo, hi = self.predict_log_ratio(x)
        ratio = lambda v: np.exp(np.maximum(v, 0.0))  # noqa: E731 - a launch cannot beat its ceiling
        return ceiling_us * ratio(mid), ceiling_us * ratio(lo), ceiling_us * ratio(hi)

    def distance(self, x: np.ndarray) -> np.ndarray | None:
        if self.support is None:
            return None
        return self.support.distance(np.asarray(x)[:, _columns(self.meta["support_features"])])

    def outside_notes(self, x: np.ndarray) -> list[list[str]]:
        from advisor.model.predict import support_notes

        return support_notes(self, x)

    def save(self, folder: str | Path = TRANSFER_DIR) -> Path:
        from advisor.model.trees import TreeEnsemble

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if self.median is not None:
            ensemble = TreeEnsemble.from_booster(self.median) if hasattr(self.median, "save_raw") else self.median
            ensemble.save(folder / MEDIAN_FILE)
        if self.support is not None:
            self.support.save(folder)
        meta = dict(self.meta, level=self.level, band=list(self.band), has_trees=self.median is not None)
        (folder / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
        return folder

    @classmethod
    def load(cls, folder: str | Path = TRANSFER_DIR) -> TransferModel:
        from advisor.model.trees import TreeEnsemble

        folder = Path(folder)
        path = folder / META_FILE
        if not path.exists():
            raise AdvisorError(f"no transfer model in {folder}; run benchmarks/corpus/check_transfer.py --write")
        meta = json.loads(path.read_text())
        if not set(meta.get("features", [])) | set(meta.get("support_features", [])) <= set(FEATURES):
            raise AdvisorError(f"the transfer model in {folder} was fitted on other features; refit it with "
                               "benchmarks/corpus/check_transfer.py --write")
        median = TreeEnsemble.load(folder / MEDIAN_FILE) if meta.get("has_trees") else None
        return cls(float(meta["level"]), median, (float(meta["band"][0]), float(meta["band"][1])), meta,
                   Support.load(folder))


def gpu_bands(residuals: np.ndarray, row_gpus: Sequence[str]) -> dict[str, dict]:
    """The conformal band of each GPU with at least MIN_GPU_ROWS residuals, keyed by its name, with the
    constants that recognise its rows."""
    from ceilings.hardware import get_spec

    row_gpus = np.asarray(row_gpus)
    out = {}
    for name in sorted(set(row_gpus.tolist())):
        mine = row_gpus == name
        if mine.sum() >= MIN_GPU_ROWS:
            spec = get_spec(name)
            out[name] = {"key": [float(spec.sms), spec.boost_clock_ghz, spec.dram_tbs],
                         "band": list(conformal_band(residuals[mine])), "rows": int(mine.sum())}
    return out


def fit_transfer(x: np.ndarray, y: np.ndarray, library: np.ndarray, gpus: Sequence[str] = (),
                 launch: Sequence[str] = (), candidates: dict = CANDIDATES,
                 row_gpus: Sequence[str] = ()) -> TransferModel:
    """A TransferModel for rows `x` (all FEATURES) with targets `y` = log(measured / ceiling), the
    candidate and band chosen by leave-one-library-out over `library` (module docstring). `launch` names
    each row's launch (GPU included), for the spread of held-out errors between configs of one launch;
    `row_gpus` each row's GPU, for a band per GPU."""
    from advisor.model.predict import require_xgboost

    xgb = require_xgboost("fitting the transfer model")
    x, y, library = np.asarray(x, np.float32), np.asarray(y, dtype=float), np.asarray(library)
    if len(np.unique(library)) < 2:
        raise AdvisorError("the transfer model is chosen by leaving one library out: give rows of 2 or more")
    best, held, scores = choose(x, y, library, candidates)
    band = conformal_band(y - held)
    level, booster, names = fit_median(x, y, candidates[best])
    support_names = list(FEATURE_SETS["transfer"])
    meta = {"features": names, "support_features": support_names, "candidate": best,
            "target": "log(measured_us / ceiling_us), generic-path launches",
            "loss": "absolute percentage error", "rows": int(len(y)), "gpus": sorted(set(gpus)),
            "libraries": {str(k): int(v) for k, v in zip(*np.unique(library, return_counts=True), strict=True)},
            "inner_mape": {k: round(v, 4) for k, v in scores.items()},
            "band_claim": LEVEL, "ranking_sd": within_launch_sd(y - held, launch) if len(launch) else None,
            "params": PARAMS, "xgboost": xgb.__version__, "trained": dt.date.today().isoformat(),
            "support": {"quantile": OUTSIDE_QUANTILE}}
    if len(row_gpus):
        meta["band_by_gpu"] = gpu_bands(y - held, row_gpus)
    support = fit_support(x[:, _columns(support_names)])
    meta["support"]["threshold"] = round(support.threshold, 4)
    meta["knob_ranges"] = knob_ranges(x)
    return TransferModel(level, booster, band, meta, support)
