"""The training data of the latency model: sweep CSV rows of the shipped kernels, their exact
ceilings rebuilt from the recorded shape and routing, and the feature rows the model sees.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from advisor.model.features import FEATURES, feature_row
from ceilings.errors import AdvisorError
from ceilings.hardware import SHIPPED_CALIBRATIONS, get_spec, load_calibration, rates_for
from ceilings.roofline import model_ceiling_us, roofline


def read_results(path: str | Path) -> list[dict]:
    """Rows of a sweep CSV, plain or gzip-compressed (an empty list for a file that does not exist)."""
    path = Path(path)
    if not path.exists():
        return []
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as f:
        return list(csv.DictReader(io.StringIO(f.read())))


@dataclass
class Dataset:
    x: np.ndarray                     # [rows, features]
    y: np.ndarray                     # log(measured / ceiling)
    ceiling_us: np.ndarray
    measured_us: np.ndarray
    gpu: list[str]
    group: list[str]                  # the shape: rows of one group are never split between train and test
    case: list[str]                   # one (shape, M) on one GPU: configs of a case are ranked together
    sources: list[str] = field(default_factory=list)
    config: list[str] = field(default_factory=list)  # each row's config label

    def subset(self, mask: np.ndarray) -> Dataset:
        idx = np.flatnonzero(mask)
        pick = lambda seq: [seq[i] for i in idx]  # noqa: E731
        return Dataset(self.x[idx], self.y[idx], self.ceiling_us[idx], self.measured_us[idx], pick(self.gpu),
                       pick(self.group), pick(self.case), self.sources, pick(self.config) if self.config else [])

    def write_features(self, path: str | Path) -> Path:
        """Every row as the model sees it: identifiers, ceiling, measured time and the feature row (CSV;
        gzip-compressed when the name ends in .gz)."""
        import csv
        import gzip

        path = Path(path)
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "wt", newline="") as f:
            w = csv.writer(f)
            w.writerow(["gpu", "shape", "case", "config", "ceiling_us", "measured_us", *FEATURES])
            for i in range(len(self.y)):
                w.writerow([self.gpu[i], self.group[i], self.case[i], self.config[i] if self.config else "",
                            repr(float(self.ceiling_us[i])), repr(float(self.measured_us[i])),
                            *(f"{v:.6g}" for v in self.x[i])])
        return path

    def __len__(self) -> int:
        return len(self.y)


def row_demand(r: dict, arch: int):
    """The exact demand and config of a sweep row, from the kernel family that declares its kernel."""
    from kernels.family import family_of_row

    _, config, demand = family_of_row(r).read_row(r, arch)
    return demand, config


_SWEEP_HINT = "give sweep CSVs written by `advisor collect` or `advisor tune`"
_SWEEP_COLUMNS = ("status", "gpu", "kernel", "shape", "M", "us")


def rows_to_dataset(rows: Iterable[dict], sources: Sequence[str] = (), origins: Sequence[str] = ()) -> Dataset:
    """Feature rows of the fully timed sweep rows of the kernel families, with their exact ceilings.
    `origins` names each row (file and line) for the error a malformed row raises."""
    rates_by_gpu: dict = {}
    entries = []
    for i, r in enumerate(rows):
        if r.get("status") != "ok":
            continue
        try:
            entries.append(_row_entry(r, rates_by_gpu))
        except (KeyError, ValueError, TypeError, IndexError, AttributeError, ZeroDivisionError) as exc:
            where = origins[i] if i < len(origins) else f"sweep row {i + 1}"
            what = f"no column {exc}" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
            raise AdvisorError(f"{where}: not a sweep row of a known kernel family ({what}); {_SWEEP_HINT}") from None
    if not entries:
        raise AdvisorError("no fully timed rows (status ok) in the given sweep files")
    xs, ys, ceil, meas, gpus, groups, cases, labels = (list(column) for column in zip(*entries, strict=True))
    return Dataset(np.array(xs, dtype=np.float32), np.array(ys), np.array(ceil), np.array(meas), gpus, groups, cases,
                   list(sources), labels)


def _row_entry(r: dict, rates_by_gpu: dict) -> tuple:
    """One sweep row as (feature row, log ratio, ceiling, measured us, GPU, shape group, case, config label)."""
    spec_gpu = get_spec(r["gpu"])
    if spec_gpu.name not in rates_by_gpu:
        cal, path = load_calibration(spec_gpu.name, [SHIPPED_CALIBRATIONS])
        rates_by_gpu[spec_gpu.name] = rates_for(spec_gpu.name, cal, path or "", use_calibration=cal is not None)
    demand, config = row_demand(r, spec_gpu.arch)
    c = roofline(demand, rates_by_gpu[spec_gpu.name], config.to_dict())
    us = float(r["us"])
    kernel = r["kernel"]
    row = feature_row(c, demand, config, spec_gpu)
    ceiling_us = model_ceiling_us(c)  # the ceiling the features describe (roofline.Ceiling.model_view)
    return ([row[f] for f in FEATURES], math.log(us / ceiling_us), ceiling_us, us, spec_gpu.name,
            f"{kernel.split('[')[0]}/gemm{r['gemm']}/{r['shape']}",
            f"{spec_gpu.name}/{kernel}/gemm{r['gemm']}/{r['shape']}/M{r['M']}", config.label())


def load_sweeps(paths: Sequence[str | Path]) -> Dataset:
    rows, origins = [], []
    for path in paths:
        if not Path(path).is_file():
            raise AdvisorError(f"sweep file {path} does not exist" + (" (it is a folder)" if Path(path).is_dir()
                                                                      else ""))
        try:
            found = read_results(path)
        except (OSError, EOFError, UnicodeDecodeError, csv.Error) as exc:
            raise AdvisorError(f"sweep file {path} cannot be read as a CSV ({type(exc).__name__}); {_SWEEP_HINT}") \
                from None
        missing = [c for c in _SWEEP_COLUMNS if found and c not in found[0]]
        if missing:
            raise AdvisorError(f"sweep file {path} has no column {', '.join(missing)}; {_SWEEP_HINT}")
        rows += found
        origins += [f"{path}: row {i + 1}" for i in range(len(found))]
    return rows_to_dataset(rows, [str(p) for p in paths], origins)


def origin(group: str) -> str:
    """Where a row comes from, for weighting and leave-one-out splits: a corpus library ("corpus/liger",
    groups "corpus/LIBRARY/...") or a shipped family (the kernel, the group's first part)."""
    parts = group.split("/")
    return "/".join(parts[:2]) if parts[0] == "corpus" else parts[0]


def balanced_weights(data: Dataset, power: float = 0.5) -> np.ndarray:
    """Row weights (mean 1) under which an origin of n rows carries a total weight proportional to
    n ** (1 - power): power 0 weights every row alike, 1 every origin alike. Tens of thousands of one
    family's rows would otherwise decide every split, and a few hundred rows of new kernels none."""
    origins = [origin(g) for g in data.group]
    counts: dict[str, int] = {}
    for o in origins:
        counts[o] = counts.get(o, 0) + 1
    w = np.array([counts[o] ** -power for o in origins])
    return w * (len(w) / w.sum())


def shape_folds(data: Dataset, folds: int, seed: int = 0) -> list[np.ndarray]:
    """Test masks of a k-fold split by shape: no shape appears on both sides of a split."""
    groups = sorted(set(data.group))
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(groups))
    fold_of = {groups[i]: j % folds for j, i in enumerate(order)}
    labels = np.array([fold_of[g] for g in data.group])
    return [labels == f for f in range(folds)]
