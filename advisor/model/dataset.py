"""The training data of the latency model: sweep CSV rows of the registered kernel families, their
exact ceilings rebuilt from the recorded shape and routing (each family reads its own rows), and the
feature rows the model sees. Each row names its own GPU: that is resolved here, per row.
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
from ceilings.roofline import roofline


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


def rows_to_dataset(rows: Iterable[dict], sources: Sequence[str] = ()) -> Dataset:
    """Feature rows of the fully timed sweep rows of the kernel families, with their exact ceilings."""
    rates_by_gpu = {}
    xs, ys, ceil, meas, gpus, groups, cases, labels = [], [], [], [], [], [], [], []
    for r in rows:
        if r.get("status") != "ok":
            continue
        spec_gpu = get_spec(r["gpu"])
        if spec_gpu.name not in rates_by_gpu:
            cal, path = load_calibration(spec_gpu.name, [SHIPPED_CALIBRATIONS])
            rates_by_gpu[spec_gpu.name] = rates_for(spec_gpu.name, cal, path or "", use_calibration=cal is not None)
        demand, config = row_demand(r, spec_gpu.arch)
        c = roofline(demand, rates_by_gpu[spec_gpu.name], config.to_dict())
        us = float(r["us"])
        kernel = r["kernel"]
        row = feature_row(c, demand, config, spec_gpu)
        xs.append([row[f] for f in FEATURES])
        labels.append(config.label())
        ys.append(math.log(us / c.ceiling_us))
        ceil.append(c.ceiling_us)
        meas.append(us)
        gpus.append(spec_gpu.name)
        groups.append(f"{kernel.split('[')[0]}/gemm{r['gemm']}/{r['shape']}")
        cases.append(f"{spec_gpu.name}/{kernel}/gemm{r['gemm']}/{r['shape']}/M{r['M']}")
    if not ys:
        raise AdvisorError("no fully timed rows (status ok) in the given sweep files")
    return Dataset(np.array(xs, dtype=np.float32), np.array(ys), np.array(ceil), np.array(meas), gpus, groups, cases,
                   list(sources), labels)


def load_sweeps(paths: Sequence[str | Path]) -> Dataset:
    rows = []
    for path in paths:
        if not Path(path).exists():
            raise AdvisorError(f"sweep file {path} does not exist")
        rows += read_results(path)
    return rows_to_dataset(rows, [str(p) for p in paths])


def shape_folds(data: Dataset, folds: int, seed: int = 0) -> list[np.ndarray]:
    """Test masks of a k-fold split by shape: no shape appears on both sides of a split."""
    groups = sorted(set(data.group))
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(groups))
    fold_of = {groups[i]: j % folds for j, i in enumerate(order)}
    labels = np.array([fold_of[g] for g in data.group])
    return [labels == f for f in range(folds)]
