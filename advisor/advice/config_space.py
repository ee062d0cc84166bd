"""The configs a search of any kernel ranks: the kernel's own space, or one around its current config,
explored under a compile budget with the latency model as guide.

Each config of a kernel without an exact model is compiled for its demand (about a second each), so a
space larger than the budget cannot be ranked whole. `guided_pick` spends the budget where the model
says the fast configs are: a third of it on configs spread over the space (farthest-point sampling
from the current config, so distant corners are seen), then, round after round, the untried configs
that a cheap surrogate of the model's predictions ranks fastest (a ridge fit of log predicted time
over the knobs, refitted after each round): every config of the space is ranked by the cheap
estimate, only the top few are compiled and predicted. Configs 2-3 knobs from the current one are
reached whenever the predictions lead there.
Only configs of the space are ever proposed: a kernel whose space has no num_warps=2 gets none.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import product

import numpy as np

from advisor.advice.grid_values import SWIZZLE_GROUP, one_d_tile, tile_dim
from ceilings.launch import Config


def config_distance(a: Config, b: Config) -> float:
    """How far apart two configs are: log2 steps over every numeric knob."""
    def step(x, y):
        return abs(math.log2(x / y)) if isinstance(x, int | float) and isinstance(y, int | float) and x > 0 and y > 0 \
            else float(x != y)
    keys = set(a.params) | set(b.params)
    return (sum(step(a.params.get(k, 0), b.params.get(k, 0)) for k in keys) + step(a.num_warps, b.num_warps)
            + step(max(a.num_stages, 1), max(b.num_stages, 1)))


def _knob_values(name: str, value) -> list:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return [value]
    if tile_dim(name):
        # matrix tiles stop at 512; a row tile launched larger (a norm's 8192) may still be halved. A tile
        # named for no dimension (BLOCK_SIZE, TILE_SIZE: a 1-D block, a row norm's step) goes to 8192.
        top = 8192 if one_d_tile(name) else 512
        # A tile of 16 or more may feed tl.dot, which takes no operand under 16; one launched under 16 feeds
        # none (a few heads or rows per program), so it may be halved too.
        low = 16 if value >= 16 else 1
        return [v for v in (value // 2, value, value * 2) if low <= v <= max(top, value)] or [value]
    if SWIZZLE_GROUP.match(name):
        # Only a program-order group (GROUP_SIZE_M, GROUP_M) is a tuning knob: it reorders the programs and leaves
        # the result alone. A bare GROUP / GROUP_SIZE is as often the data's own (a quantisation group that sets
        # which scale a weight takes), and changing it changes what the kernel computes.
        return [v for v in (value // 2, value, value * 2) if v >= 1]
    return [value]


def neighbours(config: Config) -> list[Config]:
    """The current config and every config one step away in one knob (tile sizes halved or doubled,
    group sizes, num_warps 2..16, num_stages 1..5)."""
    out = [config]
    for name, value in config.params.items():
        for v in _knob_values(name, value):
            if v != value:
                out.append(config.replace(**{name: v}))
    for w in (2, 4, 8, 16):
        if w != config.num_warps:
            out.append(config.replace(num_warps=w))
    for s in (1, 2, 3, 4, 5):
        if s != config.num_stages:
            out.append(config.replace(num_stages=s))
    return list(dict.fromkeys(out))


def around(config: Config, fixed: frozenset[str] | set[str] = frozenset()) -> list[Config]:
    """The space of a kernel that declares none: every combination of one step in each knob at once
    (tiles and group sizes halved, kept or doubled; num_warps halved, kept or doubled within 2..16;
    num_stages one less, kept or one more within 1..5), the current config first. Knobs in `fixed` keep
    their value (tiles each program covers whole: `advisor.advice.tile_roles`)."""
    names = list(config.params)
    values = [[config.params[n]] if n in fixed else _knob_values(n, config.params[n]) for n in names]
    warps = [w for w in (config.num_warps // 2, config.num_warps, config.num_warps * 2) if 2 <= w <= 16] \
        or [config.num_warps]
    stages = [s for s in (config.num_stages - 1, config.num_stages, config.num_stages + 1) if 1 <= s <= 5] \
        or [config.num_stages]
    out = [config]
    for combo in product(*values, warps, stages):
        out.append(Config(dict(zip(names, combo[:-2], strict=True)), combo[-2], combo[-1]))
    return list(dict.fromkeys(out))


def spread(configs: Sequence[Config], start: Config, count: int) -> list[Config]:
    """`count` configs of `configs` far from each other and from `start` (farthest-point sampling)."""
    chosen: list[Config] = []
    nearest = {c: config_distance(c, start) for c in configs if c != start}
    while nearest and len(chosen) < count:
        far = max(nearest, key=lambda c: (nearest[c], -configs.index(c)))
        chosen.append(far)
        del nearest[far]
        for c in nearest:
            nearest[c] = min(nearest[c], config_distance(c, far))
    return chosen


def _knob_matrix(configs: Sequence[Config], names: list[str]) -> np.ndarray:
    """Each config as log2 of its numeric knobs and their squares (a smooth surface over the space)."""
    cols = []
    for c in configs:
        values = [c.params.get(n) for n in names] + [c.num_warps, max(c.num_stages, 1)]
        x = [math.log2(v) if isinstance(v, int | float) and v > 0 else 0.0 for v in values]
        cols.append([1.0, *x, *(v * v for v in x)])
    return np.array(cols)


def surrogate(known: dict[Config, float], candidates: Sequence[Config]) -> np.ndarray:
    """The model's predictions extended to configs not compiled yet: a ridge fit of log(predicted us)
    over the knobs (log2 and its square), good enough to say which configs to compile next."""
    names = sorted({n for c in list(known) + list(candidates) for n in c.params})
    finite = {c: t for c, t in known.items() if math.isfinite(t) and t > 0}
    if len(finite) < 2:
        return np.zeros(len(candidates))
    a = _knob_matrix(list(finite), names)
    y = np.log(np.array(list(finite.values())))
    ridge = 0.1 * np.eye(a.shape[1])
    ridge[0, 0] = 0.0
    coef = np.linalg.solve(a.T @ a + ridge, a.T @ y)
    return _knob_matrix(candidates, names) @ coef


def guided_pick(feasible: Sequence[Config], current: Config, budget: int,
                predict: Callable[[list[Config]], list[float]]) -> list[Config]:
    """At most `budget` configs of `feasible` (plus the current one), chosen with `predict` (configs ->
    predicted us, each call compiling what it is given): a spread sample first, then, round after round,
    the untried configs a surrogate fitted to the predictions so far ranks fastest."""
    feasible = list(dict.fromkeys(feasible))
    if len(feasible) <= budget:
        return feasible
    times: dict[Config, float] = {}

    def evaluate(batch: list[Config]) -> None:
        batch = [c for c in dict.fromkeys(batch) if c not in times][: max(budget - len(times), 0)]
        if batch:
            times.update(zip(batch, predict(batch), strict=True))

    evaluate([current] + spread([c for c in feasible if c != current], current, max(budget // 3, 2)))
    while len(times) < budget:
        untried = [c for c in feasible if c not in times]
        if not untried:
            break
        guess = surrogate(times, untried)
        order = sorted(range(len(untried)), key=lambda i: guess[i])
        evaluate([untried[i] for i in order[: max(budget // 6, 2)]])
    # A config the compiler refuses (its prediction is infinite) is no candidate.
    return [c for c in feasible if c in times and (math.isfinite(times[c]) or c == current)] + \
        ([current] if current in times and current not in feasible else [])
