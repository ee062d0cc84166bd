"""One model for the product, two inside: launches whose work comes from the generic path go to the
transfer model (`advisor.model.transfer`, fitted on other libraries' kernels), the rest (the shipped
kernel families' exact demand) to the shipped latency model, unchanged.

The route is the `generic_path` feature of a row, so it follows how the ceiling was computed, never a
kernel's name. The shipped model's meta is the routed model's, with the transfer model's spread between
configs of one launch added as `intervals.ranking_sd_generic` (the close-call margin of a generic
launch, `advisor.advice.search.close_call`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from advisor.model.features import FEATURES
from advisor.model.predict import LatencyModel
from advisor.model.transfer import TransferModel

_GENERIC = FEATURES.index("generic_path")


def generic_rows(x: np.ndarray) -> np.ndarray:
    """Which rows (of all FEATURES) describe a launch whose work comes from the generic path."""
    return np.asarray(x)[:, _GENERIC] > 0.5


@dataclass
class RoutedModel:
    shipped: LatencyModel
    transfer: TransferModel

    @property
    def meta(self) -> dict:
        meta = dict(self.shipped.meta)
        sd = self.transfer.meta.get("ranking_sd")
        if sd:
            meta["intervals"] = {**(meta.get("intervals") or {}), "ranking_sd_generic": sd}
        meta["transfer"] = {k: self.transfer.meta.get(k) for k in ("candidate", "rows", "libraries", "gpus", "trained")}
        return meta

    def _route(self, x: np.ndarray, shipped_fn, transfer_fn, width: int):
        x = np.asarray(x, dtype=np.float32)
        generic = generic_rows(x)
        out = [np.empty(len(x)) for _ in range(width)]
        for mask, fn in ((~generic, shipped_fn), (generic, transfer_fn)):
            if mask.any():
                for part, values in zip(out, fn(mask), strict=True):
                    part[mask] = values
        return tuple(out)

    def predict_log_ratio(self, x: np.ndarray):
        return self._route(x, lambda m: self.shipped.predict_log_ratio(x[m]),
                           lambda m: self.transfer.predict_log_ratio(x[m]), 3)

    def predict_us(self, ceiling_us: np.ndarray, x: np.ndarray):
        ceiling_us = np.asarray(ceiling_us, dtype=float)
        return self._route(x, lambda m: self.shipped.predict_us(ceiling_us[m], x[m]),
                           lambda m: self.transfer.predict_us(ceiling_us[m], x[m]), 3)

    def distance(self, x: np.ndarray) -> np.ndarray | None:
        """Each row's distance to the data of the model that predicts it (None: neither carries support)."""
        if self.shipped.support is None and self.transfer.support is None:
            return None
        nowhere = lambda m: (np.zeros(int(m.sum())),)  # noqa: E731 - a model without support: inside
        return self._route(
            x, lambda m: (self.shipped.distance(x[m]),) if self.shipped.support else nowhere(m),
            lambda m: (self.transfer.distance(x[m]),) if self.transfer.support else nowhere(m), 1)[0]

    def _thresholds(self, x: np.ndarray) -> np.ndarray:
        shipped = self.shipped.support.threshold if self.shipped.support else np.inf
        transfer = self.transfer.support.threshold if self.transfer.support else np.inf
        return np.where(generic_rows(x), transfer, shipped)

    def outside(self, x: np.ndarray) -> np.ndarray:
        d = self.distance(x)
        return np.zeros(len(x), dtype=bool) if d is None else d > self._thresholds(x)

    def outside_notes(self, x: np.ndarray) -> list[list[str]]:
        """Per row: the notes of the model that predicts it (`predict.support_notes`)."""
        x = np.asarray(x, dtype=np.float32)
        generic = generic_rows(x)
        out: list[list[str]] = [[] for _ in range(len(x))]
        for mask, model in ((~generic, self.shipped), (generic, self.transfer)):
            if mask.any():
                for i, notes in zip(np.flatnonzero(mask), model.outside_notes(x[mask]), strict=True):
                    out[i] = notes
        return out
