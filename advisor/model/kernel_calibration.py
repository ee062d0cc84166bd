"""Per-kernel calibration: the configs of one kernel timed on one GPU correct the model for that kernel.

The latency model is trained on other kernels; on a kernel it has never seen it is often off by a
factor common to the kernel's configs (its efficiency level), while ranking them well. So every timing
the advisor takes (`suggest --measure`, `advisor calibrate --kernel`, `apply --verify`, the autotune
hook's timed configs) is kept, keyed by the kernel's source (a hash of its file and its name) and the
GPU, in the user's cache folder ($XDG_CACHE_HOME/triton-advisor, else ~/.cache/triton-advisor;
$TRITON_ADVISOR_CACHE overrides it), and the model's prediction for that kernel is corrected:

    log(measured / ceiling)  ~  p + a + (b - 1) (p - mean p)      p: the model's log(predicted / ceiling)

a per-kernel offset `a` (the mean residual, shrunk toward zero by PRIOR_WEIGHT: a normal prior on the
offset of spread TAU against timing noise SIGMA, so one timing already moves it most of the way) and,
from 4 points on, a slope `b` shrunk toward 1 the same way. The band becomes the residual spread of the
measured points after correction (at least the noise), so it narrows as points come in. A config timed
before at the same launch is predicted by its measured time.

**Neighbours** (given the candidates' configs): a kernel's configs are not off by one factor. Configs
that differ only in a knob the kernel does not feel (often num_stages) run alike, while one warp count
can run 27x slower than the next at the same ceiling (FLA's dqkwg backward on the corpus). So each timed
config of the same launch also corrects the configs near it in its config space: a candidate's residual about
the kernel-wide correction is the timed configs' residuals weighted by exp(-d^2 / 2 NEIGHBOUR_SCALE^2)
against FAR_WEIGHT for the kernel-wide correction alone, d the distance in log2 units over the numeric
meta-parameters (a different string or flag counts 1) and the model's predicted time (weight
TIME_WEIGHT). Near a timed config the band is the timing noise; far from all, the kernel-wide one.
`spread_pick` chooses a config to time far from those timed, so the neighbours cover the space.
The three constants were chosen on the corpus's four libraries (timed configs looked up, 3 per
launch); the same choice nested, leave one library out, is benchmarks/RESULTS.md section 27.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

TAU = 0.4          # spread of per-kernel offsets of kernels the model never saw (the 1.5x: log 0.4)
SIGMA = 0.1        # spread of one kernel's residuals after its offset (timing noise and model scatter)
PRIOR_WEIGHT = (SIGMA / TAU) ** 2
SLOPE_PRIOR_POINTS = 4.0
Z80 = 1.2816       # the 10% / 90% points of a normal distribution
NEIGHBOUR_SCALE = 0.5   # log2 units: a factor 2 in one meta-parameter weighs exp(-2) of a twin
TIME_WEIGHT = 1.0       # the model's predicted time as a coordinate, in log2 units like the others
FAR_WEIGHT = 0.05       # the kernel-wide correction's weight against the timed neighbours'


def cache_home() -> Path:
    if os.environ.get("TRITON_ADVISOR_CACHE"):
        return Path(os.environ["TRITON_ADVISOR_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "triton-advisor"


def kernel_key(source: str | os.PathLike, kernel: str) -> str:
    """The kernel's identity across runs: its file's contents and its name (a moved file keeps it, an
    edited one starts afresh)."""
    digest = hashlib.sha256(Path(source).read_bytes() + b"\0" + kernel.encode()).hexdigest()[:20]
    return f"{kernel}-{digest}"


@dataclass
class Point:
    config: dict             # Config.to_dict()
    launch: str              # which launch (its label): the same config at another shape is another point
    ceiling_us: float
    model_log_ratio: float   # the model's log(predicted / ceiling), before any correction
    measured_us: float
    date: str = ""

    @property
    def residual(self) -> float:
        return math.log(self.measured_us / self.ceiling_us) - self.model_log_ratio


@dataclass
class Correction:
    offset: float
    slope: float
    center: float
    points: int
    spread: float            # residual sd after correction (log units)
    ceiling_slope: float = 0.0   # per unit of log ceiling about ceiling_center (fit(slope_on_ceiling=True))
    ceiling_center: float = 0.0

    def log_ratio(self, p: np.ndarray, log_ceiling: np.ndarray | None = None) -> np.ndarray:
        out = p + self.offset + (self.slope - 1.0) * (p - self.center)
        if self.ceiling_slope and log_ceiling is not None:
            out = out + self.ceiling_slope * (np.asarray(log_ceiling) - self.ceiling_center)
        return out


def fit(points: list[Point], slope_on_ceiling: bool = False) -> Correction | None:
    """The correction `points` support (module docstring); None without points. `slope_on_ceiling`: from
    2 points on, a slope of the residual on log(ceiling), shrunk toward 0 like the other slope (the
    generic path's ceiling may be off by a factor that grows with the work, not only by a level)."""
    if not points:
        return None
    p = np.array([pt.model_log_ratio for pt in points])
    r = np.array([math.log(pt.measured_us / pt.ceiling_us) for pt in points])
    lc = np.log([pt.ceiling_us for pt in points])
    n = len(points)
    offset = float((r - p).sum() / (n + PRIOR_WEIGHT))
    slope, center = 1.0, float(p.mean())
    if n >= 4 and p.var() > 1e-4:
        ols = float(np.cov(p, r, bias=True)[0, 1] / p.var())
        slope = float(np.clip(1.0 + (ols - 1.0) * n / (n + SLOPE_PRIOR_POINTS), 0.25, 2.0))
        offset = float((r - p - (slope - 1.0) * (p - center)).sum() / (n + PRIOR_WEIGHT))
    c = Correction(offset, slope, center, n, SIGMA, 0.0, float(lc.mean()))
    if slope_on_ceiling and n >= 2 and lc.var() > 1e-4:
        e = r - c.log_ratio(p) + c.offset
        ols = float(np.cov(lc, e, bias=True)[0, 1] / lc.var())
        c.ceiling_slope = float(np.clip(ols * n / (n + SLOPE_PRIOR_POINTS), -1.0, 1.0))
        c.offset = float((e - c.ceiling_slope * (lc - c.ceiling_center)).sum() / (n + PRIOR_WEIGHT))
    resid = r - c.log_ratio(p, lc)
    if n >= 3:
        c.spread = max(float(np.sqrt((resid ** 2).sum() / (n - 1))), SIGMA / 2)
    return c


class KernelTimings:
    """The stored timings of one kernel on one GPU, and the configs that computed another result than the launch's
    own when timed (`wrong`: {"config", "launch", "date"})."""

    def __init__(self, key: str, gpu: str, points: list[Point] | None = None, folder: Path | None = None):
        self.key, self.gpu, self.points = key, gpu, list(points or [])
        self.wrong: list[dict] = []
        self.path = (folder or cache_home()) / "kernels" / _safe(gpu) / f"{key}.json"

    @classmethod
    def load(cls, source: str | os.PathLike, kernel: str, gpu: str, folder: Path | None = None) -> KernelTimings:
        found = cls(kernel_key(source, kernel), gpu, folder=folder)
        try:
            data = json.loads(found.path.read_text())
            found.points = [Point(**p) for p in data.get("points", [])]
            found.wrong = [dict(w) for w in data.get("wrong", []) if isinstance(w.get("config"), dict)]
        except (OSError, ValueError, TypeError, AttributeError):  # none yet, or a damaged file: start afresh
            found.points, found.wrong = [], []
        return found

    def add(self, config: dict, launch: str, ceiling_us: float, model_log_ratio: float, measured_us: float) -> None:
        if not (measured_us > 0 and ceiling_us > 0 and math.isfinite(measured_us) and math.isfinite(model_log_ratio)):
            return
        # A config re-timed at a launch replaces its earlier timing.
        self.points = [p for p in self.points if not (p.config == config and p.launch == launch)]
        self.points.append(Point(dict(config), launch, float(ceiling_us), float(model_log_ratio), float(measured_us),
                                 dt.date.today().isoformat()))

    def add_wrong(self, config: dict, launch: str) -> None:
        """`config` computed another result than the launch's own config at `launch` when timed."""
        if self.gave_wrong(config, launch) is None:
            self.wrong.append({"config": dict(config), "launch": launch, "date": dt.date.today().isoformat()})

    def gave_wrong(self, config: dict, launch: str) -> dict | None:
        """The stored config with `config`'s meta-parameters (num_warps and num_stages aside) that computed another
        result at `launch`, else None. num_warps and num_stages choose how the same program runs, not what it
        computes (a kernel without races gives the same result under any of them), so a wrong result under one
        is wrong under all; the meta-parameters themselves can change the program (a K tile past a quantisation
        group applies one scale where the data has two)."""
        meta = {k: v for k, v in config.items() if k not in ("num_warps", "num_stages")}
        for w in self.wrong:
            if w.get("launch") == launch and {k: v for k, v in w["config"].items()
                                              if k not in ("num_warps", "num_stages")} == meta:
                return w
        return None

    def save(self) -> Path:
        from ceilings.files import atomic_write

        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, (json.dumps({"kernel": self.key, "gpu": self.gpu,
                                             "points": [asdict(p) for p in self.points], "wrong": self.wrong},
                                            indent=1) + "\n").encode())
        return self.path

    def measured(self, config: dict, launch: str) -> float | None:
        for p in self.points:
            if p.config == config and p.launch == launch:
                return p.measured_us
        return None

    def correction(self) -> Correction | None:
        return fit(self.points)

    def correct(self, ceiling_us: np.ndarray, log_mid: np.ndarray, log_lo: np.ndarray, log_hi: np.ndarray,
                configs: list[dict] | None = None, launch: str | None = None):
        """Corrected (mid, lo, hi) in us from the model's log ratios; None when no points. With the
        candidates' `configs` (Config.to_dict()) the timed configs of `launch` also correct their
        neighbours (module docstring)."""
        c = self.correction()
        if c is None:
            return None
        ceiling_us, log_mid = np.asarray(ceiling_us, dtype=float), np.asarray(log_mid, dtype=float)
        mid = c.log_ratio(log_mid, np.log(ceiling_us))
        half = Z80 * c.spread * math.sqrt(1.0 + 1.0 / c.points)
        # Until 3 points show the spread, the model's own band width (shifted) is kept.
        if c.points < 3:
            below, above = log_mid - np.asarray(log_lo), np.asarray(log_hi) - log_mid
        else:
            below = above = np.full(len(mid), half)
        if configs is not None:
            delta, near = neighbour_correction(self.points, c, configs, log_mid + np.log(ceiling_us), launch)
            mid = mid + delta
            noise = Z80 * SIGMA
            below, above = near * noise + (1 - near) * below, near * noise + (1 - near) * above
        ratio = lambda v: np.exp(np.maximum(v, 0.0))  # noqa: E731 - a launch cannot beat its ceiling
        return ceiling_us * ratio(mid), ceiling_us * ratio(mid - below), ceiling_us * ratio(mid + above)


def config_distance(a: dict, b: dict, log_us_a: float, log_us_b: float, time_weight: float | None = None) -> float:
    """How far apart two configs of one kernel are (module docstring): log2 units over the numeric
    meta-parameters (num_warps and num_stages among them), 1 for a different string or flag, and the
    model's predicted times (natural logs) as one more coordinate of weight `time_weight`."""
    d2 = 0.0
    for key in set(a) | set(b):
        u, v = a.get(key), b.get(key)
        if isinstance(u, int | float) and isinstance(v, int | float) and not isinstance(u, bool) \
                and not isinstance(v, bool):
            d2 += (_log2(u) - _log2(v)) ** 2
        elif u != v:
            d2 += 1.0
    weight = TIME_WEIGHT if time_weight is None else time_weight
    return math.sqrt(d2 + weight * ((log_us_a - log_us_b) / math.log(2)) ** 2)


def _log2(v: float) -> float:
    return math.log2(v) if v > 0 else -1.0  # 0 (a flag as an integer) one step below 1


def neighbour_correction(points: list[Point], kernel_wide: Correction, configs: list[dict], log_model_us: np.ndarray,
                         launch: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate: the log correction its timed neighbours of `launch` add to the kernel-wide one,
    and their share of its weight (0: none near, towards 1: a timed twin). `log_model_us`: the model's
    log(predicted us) of each candidate, before any correction."""
    anchors = [p for p in points if launch is None or p.launch == launch]
    delta, near = np.zeros(len(configs)), np.zeros(len(configs))
    if not anchors:
        return delta, near
    lc = np.log([p.ceiling_us for p in anchors])
    p_model = np.array([p.model_log_ratio for p in anchors])
    # Each timed config's residual about the kernel-wide correction: what only its neighbours share.
    e = np.log([p.measured_us for p in anchors]) - lc - kernel_wide.log_ratio(p_model, lc)
    anchor_us = p_model + lc
    for i, (config, log_us) in enumerate(zip(configs, log_model_us, strict=True)):
        d = np.array([config_distance(config, p.config, float(log_us), float(a))
                      for p, a in zip(anchors, anchor_us, strict=True)])
        w = np.exp(-0.5 * (d / NEIGHBOUR_SCALE) ** 2)
        delta[i] = float(w @ e / (w.sum() + FAR_WEIGHT))
        near[i] = float(w.sum() / (w.sum() + FAR_WEIGHT))
    return delta, near


def spread_pick(configs: list[dict], log_model_us: list[float], timed: list[int]) -> int | None:
    """The index of the config farthest from every timed one (`timed`: indices), ties to the first; None
    when all are timed. What to time to let the neighbours cover a kernel's space."""
    untimed = [i for i in range(len(configs)) if i not in set(timed)]
    if not untimed:
        return None
    if not timed:
        return untimed[0]

    def gap(i: int) -> float:
        # Rounded: equal distances (a grid of configs) go to the first in order, not to float rounding.
        return round(min(config_distance(configs[i], configs[j], log_model_us[i], log_model_us[j])
                         for j in timed), 3)
    return max(untimed, key=gap)


def model_log_ratios(model, ceiling_us: np.ndarray, x: np.ndarray):
    """The model's (mid, lo, hi) as log(predicted / ceiling), its band calibrated as it is shown."""
    mid, lo, hi = model.predict_us(ceiling_us, x)
    return np.log(mid / ceiling_us), np.log(lo / ceiling_us), np.log(hi / ceiling_us)


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
