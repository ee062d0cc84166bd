"""Tree ensembles evaluated with numpy: XGBoost is needed to train the latency model, not to use it.

A trained booster is exported once (`TreeEnsemble.from_booster`) into flat arrays: per tree and node
the split feature, threshold, children and missing-value direction, with leaf values in place of the
threshold, as XGBoost's JSON model stores them. Prediction walks every tree at once, one level per
step (a row goes left when its value is below the threshold, as XGBoost decides), and sums the leaves
of each output group onto the model's base score. The result equals XGBoost's own prediction to
float32 rounding (tests/test_predict.py checks it), so GPU machines and CI jobs without XGBoost can
predict, and a batch of 2,000 configs takes milliseconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np


def _floats(text: str) -> list[float]:
    """XGBoost writes base_score as '0.5' or, for several outputs, '[8.1E-2,1.03E0]'."""
    return [float(v) for v in str(text).strip("[]").split(",")]


@dataclass
class TreeEnsemble:
    left: np.ndarray          # [trees, nodes] child index, -1 at leaves
    right: np.ndarray
    feature: np.ndarray       # split feature (0 at leaves)
    value: np.ndarray         # threshold, or the leaf value at leaves (float32)
    default_left: np.ndarray  # bool: missing values go left
    group: np.ndarray         # [trees] output each tree adds to
    base: np.ndarray          # [outputs] base score per output
    depth: int                # the deepest path, in edges
    _cache: tuple | None = None

    @classmethod
    def from_booster(cls, booster) -> TreeEnsemble:
        """Export an xgboost.Booster (tree models with numeric splits)."""
        doc = json.loads(booster.save_raw("json"))
        learner = doc["learner"]
        model = learner["gradient_booster"]["model"]
        trees = model["trees"]
        if any(any(t["split_type"]) for t in trees):
            raise ValueError("categorical splits are not supported by the numpy evaluator")
        width = max(len(t["left_children"]) for t in trees)
        shape = (len(trees), width)
        left, right = np.full(shape, -1, np.int32), np.full(shape, -1, np.int32)
        feature, value = np.zeros(shape, np.int32), np.zeros(shape, np.float32)
        default_left = np.zeros(shape, bool)
        for i, t in enumerate(trees):
            n = len(t["left_children"])
            left[i, :n], right[i, :n] = t["left_children"], t["right_children"]
            feature[i, :n], value[i, :n] = t["split_indices"], t["split_conditions"]
            default_left[i, :n] = np.asarray(t["default_left"], bool)
        feature[left < 0] = 0
        base = np.asarray(_floats(learner["learner_model_param"]["base_score"]), np.float32)
        return cls(left, right, feature, value, default_left, np.asarray(model["tree_info"], np.int32), base,
                   _depth(left, right))

    def _flat(self):
        """Node arrays over all trees with children as global indices; a leaf's children are itself."""
        if getattr(self, "_cache", None) is None:
            trees, width = self.left.shape
            own = np.arange(trees * width, dtype=np.int64).reshape(trees, width)
            offset = (np.arange(trees, dtype=np.int64) * width)[:, None]
            leaf = self.left < 0
            left = np.where(leaf, own, offset + self.left).ravel()
            right = np.where(leaf, own, offset + self.right).ravel()
            self._cache = (left, right, self.feature.astype(np.int64).ravel(), self.value.ravel(),
                           self.default_left.ravel(), offset.ravel())
        return self._cache

    def predict(self, x: np.ndarray) -> np.ndarray:
        """[rows, features] -> [rows] for one output, [rows, outputs] for several."""
        x = np.asarray(x, np.float32)
        left, right, feature, value, default_left, roots = self._flat()
        n = len(x)
        columns = np.ascontiguousarray(x.T).ravel()          # feature-major: value of (f, row) at f * n + row
        rows = np.arange(n, dtype=np.int64)[None, :]
        node = np.broadcast_to(roots[:, None], (len(roots), n)).copy()
        missing = bool(np.isnan(columns).any())
        for _ in range(self.depth):
            v = columns[feature[node] * n + rows]
            go_left = v < value[node]
            if missing:
                go_left = np.where(np.isnan(v), default_left[node], go_left)
            node = np.where(go_left, left[node], right[node])
        leaves = value[node]                                   # [trees, rows]
        outputs = len(self.base)
        out = np.empty((n, outputs), np.float32)
        for g in range(outputs):
            out[:, g] = self.base[g] + leaves[self.group == g].sum(axis=0, dtype=np.float32)
        return out[:, 0] if outputs == 1 else out

    def save(self, path: str | Path) -> None:
        np.savez_compressed(path, left=self.left, right=self.right, feature=self.feature, value=self.value,
                            default_left=self.default_left, group=self.group, base=self.base,
                            depth=np.array(self.depth))

    @classmethod
    def load(cls, path: str | Path) -> TreeEnsemble:
        with np.load(path) as f:
            return cls(f["left"], f["right"], f["feature"], f["value"], f["default_left"], f["group"], f["base"],
                       int(f["depth"]))


def _depth(left: np.ndarray, right: np.ndarray) -> int:
    depth = np.zeros(left.shape, np.int32)
    deepest = 0
    for col in range(left.shape[1]):  # children come after their parent in XGBoost's node order
        for children in (left[:, col], right[:, col]):
            has = children >= 0
            idx = np.flatnonzero(has)
            depth[idx, children[has]] = depth[idx, col] + 1
            if has.any():
                deepest = max(deepest, int(depth[idx, children[has]].max()))
    return deepest
