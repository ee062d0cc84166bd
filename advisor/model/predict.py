"""Predicted latency: XGBoost on the ceiling's features, trained on measured sweeps.

The target is log(measured / ceiling), the efficiency gap, which transfers across GPUs better than
raw time (the analytical + learned approach of PipeWeave/SynPerf and KernelSight-LM, ANCHORS
section 1); predicted_us = ceiling_us x exp(prediction). Two quantile models (10% and 90%) give the
interval. The training rows come from `advisor.model.dataset`; the trained models ship in
advisor/model/models/.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from advisor.model.confidence import OUTSIDE_QUANTILE, SUPPORT_FILE, Support, fit_support, widen
from advisor.model.dataset import Dataset
from advisor.model.features import DEFAULT_FEATURES, FEATURES, feature_row
from ceilings.errors import AdvisorError
from ceilings.hardware import GPU

MODEL_DIR = Path(__file__).resolve().parent / "models"
INSTALL_XGBOOST = "pip install 'triton-advisor[train]' (or pip install xgboost)"


def require_xgboost(what: str):
    """XGBoost, which training needs and predicting does not (advisor/model/trees.py): an optional
    dependency (the `train` extra), so a CPU install stays small. Its absence is a user error."""
    try:
        import xgboost
    except ImportError:
        raise AdvisorError(f"{what} needs XGBoost, which is not installed here; {INSTALL_XGBOOST}") from None
    return xgboost
QUANTILES = (0.1, 0.9)


OUTSIDE_NOTE = ("the launch's features are far from every row the model was trained on (distance {d:.1f}, "
                "beyond {t:.1f}): outside the model's data, the prediction is a guess; measure it (--measure)")


@dataclass
class LatencyModel:
    median: object           # predicts log(measured / ceiling): a TreeEnsemble (numpy) or an xgboost.Booster
    quantiles: object        # the same with one output per entry of QUANTILES
    meta: dict
    support: Support | None = None  # the training rows' feature space (advisor.model.confidence)

    @property
    def features(self) -> list[str]:
        """The features this model was trained on, a subset of FEATURES in their order (a model trained
        before a feature was added ignores it)."""
        return list(self.meta.get("features", FEATURES))

    @property
    def columns(self) -> np.ndarray:
        """Where the model's features sit in a row of all FEATURES."""
        return np.array([FEATURES.index(f) for f in self.features], dtype=np.int64)

    def _predict(self, model, x: np.ndarray) -> np.ndarray:
        if hasattr(model, "save_raw"):  # an xgboost.Booster, fresh from training
            import xgboost as xgb

            return model.predict(xgb.DMatrix(x, feature_names=self.features))
        return model.predict(x)

    def predict_log_ratio(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The model's log(predicted / ceiling) and its band; `x` holds rows of all FEATURES."""
        x = np.asarray(x, dtype=np.float32)[:, self.columns]
        mid = self._predict(self.median, x)
        q = np.asarray(self._predict(self.quantiles, x)).reshape(len(mid), -1)
        lo, hi = np.minimum(q[:, 0], mid), np.maximum(q[:, -1], mid)
        return mid, lo, hi

    def distance(self, x: np.ndarray) -> np.ndarray | None:
        """Each row's distance to the model's data (None: the model carries no support)."""
        return None if self.support is None else self.support.distance(np.asarray(x)[:, self.columns])

    def outside(self, x: np.ndarray) -> np.ndarray:
        """Whether each row lies outside the model's data (a distance in feature space)."""
        d = self.distance(x)
        return np.zeros(len(x), dtype=bool) if d is None else d > self.support.threshold

    def outside_notes(self, x: np.ndarray) -> list[list[str]]:
        return support_notes(self, x)

    def predict_us(self, ceiling_us: np.ndarray, x: np.ndarray):
        """Median and interval in us. The band is the quantile models' widened by the factor the model's
        meta holds for launches inside or outside its data (calibrated on held-out rows)."""
        mid, lo, hi = self.predict_log_ratio(x)
        intervals = self.meta.get("intervals")
        if intervals:
            factor = np.where(self.outside(x), intervals["scale_outside"], intervals["scale"])
            if intervals.get("scale_generic"):
                # A launch whose work comes from the generic path (any kernel not shipped here): the
                # factor found on libraries the model never saw (benchmarks/corpus/check_model.py).
                generic = np.asarray(x)[:, FEATURES.index("generic_path")] > 0.5
                factor = np.where(generic, intervals["scale_generic"], factor)
            lo, hi = widen(mid, lo, hi, factor)
        # A launch cannot beat its ceiling: the ratio is at least 1.
        ratio = lambda v: np.exp(np.maximum(v, 0.0))  # noqa: E731
        return ceiling_us * ratio(mid), ceiling_us * ratio(lo), ceiling_us * ratio(hi)

    def save(self, folder: str | Path = MODEL_DIR) -> Path:
        """The boosters (to fine-tune with XGBoost) and their numpy export (to predict without it)."""
        from advisor.model.trees import TreeEnsemble

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for name, model in (("median", self.median), ("quantiles", self.quantiles)):
            if not hasattr(model, "save_raw"):
                raise AdvisorError("only a model trained in this process (XGBoost boosters) can be saved")
            model.save_model(str(folder / f"latency_{name}.ubj"))
            TreeEnsemble.from_booster(model).save(folder / f"latency_{name}.npz")
        if self.support is not None:
            self.support.save(folder)
        (folder / "latency_meta.json").write_text(json.dumps(self.meta, indent=2) + "\n")
        return folder

    @classmethod
    def load(cls, folder: str | Path = MODEL_DIR, boosters: bool | None = None) -> LatencyModel:
        """The model of `folder`. `boosters=True`: XGBoost's boosters (to continue training them);
        False: the numpy export (no XGBoost needed); None: the boosters when XGBoost is installed (its
        C++ predictor is about 20x faster), else the numpy export."""
        from advisor.model.trees import TreeEnsemble

        folder = Path(folder)
        meta_path = folder / "latency_meta.json"
        if not meta_path.exists():
            raise AdvisorError(f"no trained latency model in {folder}; run `advisor train` first")
        meta = json.loads(meta_path.read_text())
        if not meta.get("features") or not set(meta["features"]) <= set(FEATURES):
            raise AdvisorError(f"the model in {folder} was trained on other features; retrain with `advisor train`")
        if boosters is None:
            try:
                import xgboost  # noqa: F401
            except ImportError:
                boosters = False
            else:
                boosters = (folder / "latency_median.ubj").exists()
        if boosters:
            xgb = require_xgboost("loading the model's XGBoost boosters")
            median, quantiles = xgb.Booster(), xgb.Booster()
            median.load_model(str(folder / "latency_median.ubj"))
            quantiles.load_model(str(folder / "latency_quantiles.ubj"))
            return cls(median, quantiles, meta, Support.load(folder))
        return cls(TreeEnsemble.load(folder / "latency_median.npz"),
                   TreeEnsemble.load(folder / "latency_quantiles.npz"), meta, Support.load(folder))


def predict_ceilings(ceilings: Sequence, model: LatencyModel | None = None, *, gpu: GPU) -> list[dict]:
    """predicted_us and its interval for ceilings on `gpu` computed by `advisor.advice.ceiling` (with their
    demand)."""
    from ceilings.launch import Config
    from ceilings.roofline import model_ceiling_us

    model = model or model_for(gpu)
    rows = [feature_row(c, c.demand, Config.from_dict(c.config), gpu.spec) for c in ceilings]
    x = np.array([[r[f] for f in FEATURES] for r in rows], dtype=np.float32)
    mid, lo, hi = at_least_the_floor(ceilings, *model.predict_us(np.array([model_ceiling_us(c) for c in ceilings]), x))
    out = []
    for m, a, b, note in zip(mid, lo, hi, model.outside_notes(x), strict=True):
        out.append({"predicted_us": round(float(m), 3), "predicted_interval_us": [round(float(a), 3),
                                                                                  round(float(b), 3)],
                    "notes": note})
    return out


def at_least_the_floor(ceilings: Sequence, *times: np.ndarray) -> tuple[np.ndarray, ...]:
    """Predicted times (median, interval ends) raised to each launch's ceiling where under it. The models scale the
    ceiling they were fitted on (`Ceiling.model_view`), which can lie under the ceiling shown (whose terms came after
    them: the chain by the compiled occupancy, the L1 data stage's line wavefronts); no launch runs under its floor,
    so neither may its prediction: set 13's pixel shuffle was predicted at 0.48x its measured time, under the L1 floor
    Nsight Compute showed it running at (RESULTS 62)."""
    floor = np.array([c.ceiling_us for c in ceilings], dtype=float)
    return tuple(np.maximum(np.asarray(t, dtype=float), floor) for t in times)


def support_notes(model, x: np.ndarray) -> list[list[str]]:
    """Per row of `x` (all FEATURES): OUTSIDE_NOTE where the row lies beyond `model`'s support, then a note per
    knob outside the values it was fitted on (`advisor.model.knob_range`). `model`: a LatencyModel or a
    TransferModel (its `distance`, `support` and `meta`)."""
    from advisor.model.knob_range import knob_notes

    out = knob_notes(model.meta.get("knob_ranges"), x)
    d = model.distance(x)
    if d is None:
        return out
    t = model.support.threshold
    return [([OUTSIDE_NOTE.format(d=v, t=t)] if v > t else []) + knobs for v, knobs in zip(d, out, strict=True)]


def is_outside_note(note: str) -> bool:
    """Whether a note is the model's "outside its data" caveat (OUTSIDE_NOTE)."""
    return note.startswith(OUTSIDE_NOTE.split("{")[0])


def outside_note_distance(note: str) -> float:
    """The feature distance an OUTSIDE_NOTE states (0 for any other note)."""
    prefix = OUTSIDE_NOTE.split("{")[0]
    if not note.startswith(prefix):
        return 0.0
    return float(note[len(prefix):].split(",")[0])


PARAMS = {"max_depth": 6, "eta": 0.08, "subsample": 0.8, "colsample_bytree": 0.8, "min_child_weight": 2,
          "seed": 0, "nthread": 2}
ROUNDS = 300


def train(data: Dataset, rounds: int = ROUNDS, features: Sequence[str] = DEFAULT_FEATURES,
          weights: np.ndarray | None = None) -> LatencyModel:
    """The median and quantile boosters on `data` (rows of all FEATURES), using `features` of them, each
    row weighted by `weights` (None: equally; `advisor.model.dataset.balanced_weights` keeps a few
    hundred rows of new kernels from being drowned by tens of thousands of one family's)."""
    from advisor.model.knob_range import knob_ranges

    xgb = require_xgboost("training the latency model (`advisor train`)")

    features = [f for f in FEATURES if f in set(features)]
    cols = [FEATURES.index(f) for f in features]
    m = xgb.DMatrix(data.x[:, cols], label=data.y, weight=weights, feature_names=features)
    median = xgb.train({**PARAMS, "objective": "reg:squarederror"}, m, num_boost_round=rounds)
    quantiles = xgb.train({**PARAMS, "objective": "reg:quantileerror", "quantile_alpha": np.array(QUANTILES)}, m,
                          num_boost_round=rounds)
    digests = {}
    for src in data.sources:
        if Path(src).is_file():
            digests[Path(src).name] = hashlib.sha256(Path(src).read_bytes()).hexdigest()[:16]
    meta = {"features": features, "target": "log(measured_us / ceiling_us)", "quantiles": list(QUANTILES),
            "kernels": sorted({g.split("/")[0] for g in data.group}),
            "rows": len(data), "gpus": sorted(set(data.gpu)), "shapes": len(set(data.group)),
            "data": digests, "trained": dt.date.today().isoformat(), "xgboost": xgb.__version__,
            "params": PARAMS, "rounds": rounds, "weighted": weights is not None}
    support = fit_support(data.x[:, cols])
    meta["support"] = {"file": SUPPORT_FILE, "rows": int(len(support.rows)), "threshold": round(support.threshold, 4),
                       "quantile": OUTSIDE_QUANTILE}
    meta["knob_ranges"] = knob_ranges(data.x)
    # Intervals uncalibrated until benchmarks/confidence.py finds their factors on held-out folds.
    return LatencyModel(median, quantiles, meta, support)


TUNE_ROUNDS = 60


def fine_tune(model: LatencyModel, data: Dataset, rounds: int = TUNE_ROUNDS) -> LatencyModel:
    """Continue the boosters' training on one GPU's short sweep (the KernelSight-LM calibration tier):
    `rounds` more trees fitted to what the shipped model gets wrong on that GPU."""
    xgb = require_xgboost("fine-tuning the latency model (`advisor calibrate --tune`)")

    if not hasattr(model.median, "save_raw"):
        raise AdvisorError("fine-tuning needs the XGBoost boosters: load the model with boosters=True")
    if len(data) < 20:
        raise AdvisorError(f"{len(data)} measured points are too few to tune on; collect at least 20")
    m = xgb.DMatrix(data.x[:, model.columns], label=data.y, feature_names=model.features)
    params = {**PARAMS, "eta": 0.05}
    median = xgb.train({**params, "objective": "reg:squarederror"}, m, num_boost_round=rounds, xgb_model=model.median)
    quantiles = xgb.train({**params, "objective": "reg:quantileerror", "quantile_alpha": np.array(QUANTILES)}, m,
                          num_boost_round=rounds, xgb_model=model.quantiles)
    digests = {Path(src).name: hashlib.sha256(Path(src).read_bytes()).hexdigest()[:16] for src in data.sources}
    meta = dict(model.meta, tuned={"gpus": sorted(set(data.gpu)), "rows": len(data), "rounds": rounds,
                                   "data": digests, "date": dt.date.today().isoformat()})
    return LatencyModel(median, quantiles, meta, model.support)


def tuned_model_dir(gpu_name: str) -> Path:
    """Where `advisor calibrate --tune` keeps a GPU's fine-tuned model: beside its calibration file."""
    from ceilings.hardware import calibration_file_name, calibration_home

    return calibration_home() / (calibration_file_name(gpu_name).removesuffix(".json") + ".model")


_LOADED: dict[str, LatencyModel] = {}
# A transfer model to use instead of the shipped one: a folder `benchmarks/corpus/check_transfer.py` wrote
# (e.g. one fitted without a library, to check advice on that library as a kernel the model never saw).
TRANSFER_MODEL_ENV = "TRITON_ADVISOR_TRANSFER_MODEL"


def transfer_folder() -> Path | None:
    """The transfer model's folder: $TRITON_ADVISOR_TRANSFER_MODEL when set, else the shipped one (None
    when none ships). A set variable naming no transfer model is a user error, not a silent fallback."""
    from advisor.model.transfer import META_FILE, TRANSFER_DIR

    given = os.environ.get(TRANSFER_MODEL_ENV, "").strip()
    if not given:
        return TRANSFER_DIR if (TRANSFER_DIR / META_FILE).exists() else None
    folder = Path(given).expanduser()
    if not (folder / META_FILE).is_file():
        raise AdvisorError(f"{TRANSFER_MODEL_ENV}={given!r}: no transfer model there ({META_FILE} missing); give a "
                           "folder written by benchmarks/corpus/check_transfer.py, or unset it for the shipped model")
    return folder.resolve()


def model_for(gpu: GPU | None = None):
    """The GPU's fine-tuned model when `advisor calibrate --tune` made one, else the shipped model; either
    routed with the transfer model for generic-path launches (`with_transfer`)."""
    folder = MODEL_DIR
    if gpu is not None:
        tuned = tuned_model_dir(gpu.name)
        if (tuned / "latency_meta.json").exists():
            folder = tuned
    transfer = transfer_folder()
    key = f"{folder}|{transfer}"
    if key not in _LOADED:
        _LOADED[key] = with_transfer(LatencyModel.load(folder), transfer)
    return _LOADED[key]


def with_transfer(model: LatencyModel, folder: Path | None = None):
    """`model` for the shipped families' launches and the transfer model of `folder` (default: the one
    `transfer_folder` names) for generic-path launches (`advisor.model.routing`); `model` alone when there
    is none."""
    from advisor.model.transfer import TransferModel

    folder = folder or transfer_folder()
    if folder is None:
        return model
    from advisor.model.routing import RoutedModel

    return RoutedModel(model, TransferModel.load(folder))
