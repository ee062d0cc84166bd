"""Config search: prune what cannot run, rank the rest by predicted latency, explain the best.

A `Subject` is one launch whose config can change: its config space, an analytic precheck against the
target GPU's limits, the ceiling of any config (exact semantic demand for the shipped kernels, compiled
SASS for any other kernel), and where its current config is written. `search` prunes the space with the
precheck, ranks every survivor by the latency model (ceiling x predicted efficiency), compiles the
finalists for the target architecture to confirm they fit (shared memory, registers, spills), and
returns the top k with ceiling, prediction, interval and a reason.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ceilings.errors import AdvisorError
from ceilings.hardware import GPUSpec, get_spec, rates_for
from ceilings.launch import Config, Launch, expand_space
from ceilings.roofline import Ceiling, roofline


@dataclass(frozen=True)
class Location:
    """Where a config is written: a file and a 1-based line (for editor and CI annotations)."""

    path: str
    line: int
    what: str = ""


@dataclass
class Candidate:
    config: Config
    ceiling: Ceiling
    predicted_us: float
    interval: tuple[float, float]
    notes: list[str] = field(default_factory=list)
    measured_us: float | None = None

    @property
    def efficiency(self) -> float:
        return self.ceiling.ceiling_us / self.predicted_us if self.predicted_us else 0.0

    def to_json(self) -> dict:
        return {"config": self.config.to_dict(), "label": self.config.label(),
                "ceiling_us": round(self.ceiling.ceiling_us, 3), "binding": self.ceiling.binding,
                "predicted_us": round(self.predicted_us, 3),
                "predicted_interval_us": [round(self.interval[0], 3), round(self.interval[1], 3)],
                "measured_us": None if self.measured_us is None else round(self.measured_us, 3),
                "waves": round(self.ceiling.waves, 3), "ctas_per_sm": self.ceiling.ctas_per_sm,
                "notes": self.notes}


class Subject:
    """One launch of a kernel whose config the advisor may change (see module docstring)."""

    kernel: str = ""
    label: str = ""
    spec: GPUSpec
    current: Config
    location: Location | None = None

    def space(self) -> list[Config]:
        raise NotImplementedError

    def precheck(self, config: Config) -> str | None:
        return None

    def ceilings(self, configs: Sequence[Config]) -> list[Ceiling]:
        raise NotImplementedError

    def confirm(self, config: Config) -> tuple[str | None, list[str]]:
        """Compile for the target: (why it cannot run, or None; notes such as spills)."""
        return None, []

    def useful_flops(self) -> float | None:
        """The tensor work the launch must do (to tell padding apart), when known."""
        return None

    def predict(self, configs: Sequence[Config], model=None) -> list[Candidate]:
        return predict_candidates(self, configs, model)

    def measurer(self):
        """A callable config -> measured us (checked against a reference); needs a GPU."""
        raise AdvisorError(f"{self.label}: measuring this kind of launch is not supported")


@dataclass
class Advice:
    subject: Subject
    current: Candidate
    ranked: list[Candidate]
    considered: int
    pruned: Counter
    measured: int = 0                      # configs timed on a GPU (--measure)
    why: str = ""
    basis: str = "predicted"               # what the verdict rests on (advisor.advice.measured.weigh)

    @property
    def best(self) -> Candidate:
        return self.ranked[0] if self.ranked else self.current

    def time_of(self, c: Candidate) -> float:
        """What the advice judges a candidate by: its measured time when the advice was timed, else predicted."""
        return c.measured_us if self.measured and c.measured_us is not None else c.predicted_us

    def gains(self, min_speedup: float) -> bool:
        """Whether another config beats the current one by more than `min_speedup`."""
        return self.best.config != self.current.config and self.speedup > min_speedup

    @property
    def speedup(self) -> float:
        best = self.time_of(self.best)
        return self.time_of(self.current) / best if best else 1.0

    @property
    def headroom(self) -> float:
        """How many times slower than its own ceiling the current config runs (predicted or measured)."""
        return self.time_of(self.current) / self.current.ceiling.ceiling_us

    def to_json(self) -> dict:
        s = self.subject
        return {"launch": s.label, "kernel": s.kernel, "gpu": s.spec.name,
                "location": None if s.location is None else {"path": s.location.path, "line": s.location.line,
                                                              "what": s.location.what},
                "current": self.current.to_json(), "best": self.best.to_json(),
                "speedup": round(self.speedup, 4), "headroom": round(self.headroom, 4),
                "binding": self.current.ceiling.binding, "why": self.why,
                "ranked": [c.to_json() for c in self.ranked], "considered": self.considered,
                "pruned": dict(self.pruned), "measured": self.measured, "basis": self.basis}


# ----------------------------------------------------------------------------------------------- ranking

def predict_candidates(subject: Subject, configs: Sequence[Config], model=None) -> list[Candidate]:
    """Ceilings and predictions for `configs`, in their order."""
    from advisor.model.features import FEATURES, feature_row

    if not configs:
        return []
    model = model or _model(subject.spec.name)
    ceilings = subject.ceilings(configs)
    rows = [feature_row(c, c.demand, cfg, subject.spec) for c, cfg in zip(ceilings, configs, strict=True)]
    x = np.array([[r[f] for f in FEATURES] for r in rows], dtype=np.float32)
    mid, lo, hi = model.predict_us(np.array([c.ceiling_us for c in ceilings]), x)
    return [Candidate(cfg, c, float(m), (float(a), float(b)), list(c.notes))
            for cfg, c, m, a, b in zip(configs, ceilings, mid, lo, hi, strict=True)]


def _model(gpu: str):
    from advisor.model.predict import model_for

    return model_for(gpu)


# A speed-up below this prints as 1.00x: no gain (`search` keeps the current config, `explain` says so).
NO_GAIN = 1.005


def search(subject: Subject, top_k: int = 5, confirm: bool = True, model=None, measure: int = 0) -> Advice:
    """Rank the subject's config space; with `measure` > 0 time the current and top configs on the GPU."""
    space = list(dict.fromkeys(subject.space()))
    pruned: Counter = Counter()
    feasible = []
    for config in space:
        why = subject.precheck(config)
        if why:
            pruned[_short(why)] += 1
        else:
            feasible.append(config)
    (current,) = subject.predict([subject.current], model)
    ranked = []
    for cand in subject.predict(feasible, model):
        if cand.ceiling.ctas_per_sm == 0:
            pruned["a CTA does not fit on an SM (registers or shared memory)"] += 1
        else:
            ranked.append(cand)
    ranked.sort(key=lambda c: c.predicted_us)
    want = max(top_k, measure)
    finalists: list[Candidate] = []
    for cand in ranked:
        if len(finalists) >= want:
            break
        if confirm:
            why, notes = subject.confirm(cand.config)
            if why:
                pruned[_short(why)] += 1
                continue
            cand.notes = notes + cand.notes
        finalists.append(cand)
    if confirm:
        _, notes = subject.confirm(subject.current)
        current.notes = notes + current.notes
    advice = Advice(subject, current, finalists, len(space), pruned)
    if measure:
        run = subject.measurer()
        current.measured_us = run(current.config)
        for cand in finalists:
            cand.measured_us = current.measured_us if cand.config == current.config else run(cand.config)
        advice.measured = 1 + sum(1 for c in finalists if c.config != current.config)
        finalists.sort(key=lambda c: c.measured_us if c.measured_us is not None else math.inf)
    if advice.ranked and advice.speedup < NO_GAIN:
        # Nothing ranked beats the current config by a gain the report can show: it stays the suggestion
        # (listed once), so a "1.00x" is never reported as a change.
        advice.ranked = [current] + [c for c in advice.ranked if c.config != current.config]
    advice.why = explain(advice)
    return advice


def _short(reason: str) -> str:
    """A reason's kind, for counting: its first clause with the numbers left out."""
    return re.sub(r"\d+", "#", reason.split(";")[0])[:80]


# ----------------------------------------------------------------------------------------------- reasons

def explain(advice: Advice) -> str:
    """One sentence: why the best config beats the current one, from their ceilings and predictions."""
    cur, best, s = advice.current, advice.best, advice.subject
    if best.config == cur.config or advice.speedup < NO_GAIN:
        eff = cur.ceiling.ceiling_us / advice.time_of(cur)
        return (f"the current config is already the best found; it runs at {eff:.0%} of its ceiling, "
                f"bound by {cur.ceiling.binding}")
    gain = f"{advice.speedup:.2f}x {'measured' if advice.measured else 'predicted'}"
    spills = [n for n in cur.notes if "spill" in n]
    if spills:
        return f"{spills[0]} in the current config; {best.config.label()} does not ({gain})"
    useful = s.useful_flops()
    cd, bd = cur.ceiling.demand, best.ceiling.demand
    if useful and cd and bd and cd.tensor_flops_per_cta and bd.tensor_flops_per_cta:
        waste_c = 1 - useful / (cd.tensor_flops_per_cta * cd.active_ctas)
        waste_b = 1 - useful / (bd.tensor_flops_per_cta * bd.active_ctas)
        if waste_c - waste_b > 0.1:
            effect = (f"which cuts the {cur.ceiling.binding}-bound ceiling from {cur.ceiling.ceiling_us:.1f} to "
                      f"{best.ceiling.ceiling_us:.1f} us" if best.ceiling.ceiling_us < 0.98 * cur.ceiling.ceiling_us
                      else "less wasted issue for the same ceiling")
            return (f"{waste_c:.0%} of the current tensor work is tile padding, {waste_b:.0%} with "
                    f"{best.config.label()}: {effect} ({gain})")
    sms = s.spec.sms
    if cur.ceiling.waves < 0.6 and best.ceiling.active_ctas > cur.ceiling.active_ctas * 1.5:
        return (f"the current config fills {cur.ceiling.active_ctas} CTAs on {sms} SMs ({cur.ceiling.waves:.2f} "
                f"waves); {best.config.label()} spreads the work over {best.ceiling.active_ctas} ({gain})")
    tail_c = cur.ceiling.waves - math.floor(cur.ceiling.waves)
    whole = math.isfinite(best.ceiling.waves) and abs(best.ceiling.waves - round(best.ceiling.waves)) < 0.15
    if cur.ceiling.waves > 1 and 0 < tail_c < 0.5 and whole:
        return (f"the current config ends in a partial wave ({cur.ceiling.waves:.2f} waves); "
                f"{best.config.label()} runs {best.ceiling.waves:.2f} waves ({gain})")
    if best.ceiling.ceiling_us < cur.ceiling.ceiling_us * 0.9:
        return (f"{best.config.label()} lowers the ceiling from {cur.ceiling.ceiling_us:.1f} to "
                f"{best.ceiling.ceiling_us:.1f} us (bound by {best.ceiling.binding}; current by "
                f"{cur.ceiling.binding}) ({gain})")
    if best.ceiling.ctas_per_sm != cur.ceiling.ctas_per_sm:
        return (f"{best.config.label()} runs {best.ceiling.ctas_per_sm} CTAs per SM (current "
                f"{cur.ceiling.ctas_per_sm}) and the model expects it nearer its ceiling: "
                f"{best.efficiency:.0%} vs {cur.efficiency:.0%} ({gain})")
    return (f"same {cur.ceiling.binding} ceiling within 10%, but the model expects {best.config.label()} to run "
            f"at {best.efficiency:.0%} of it against {cur.efficiency:.0%} for the current config ({gain})")


# ----------------------------------------------------------------------------------------------- subjects

def _line_of(path: str | Path, pattern: str) -> int:
    """1-based line of the first match of `pattern` in a file (1 if none)."""
    try:
        for i, text in enumerate(Path(path).read_text().splitlines(), 1):
            if re.search(pattern, text):
                return i
    except OSError:
        pass
    return 1


class MoESubject(Subject):
    """A GEMM of the shipped fused-MoE layer: preset, TP size, GEMM 1 or 2, token count; exact demand."""

    def __init__(self, preset: str, tokens: int, tp: int = 1, gemm: int = 1, gpu: str = "h100",
                 config: Config | None = None, location: Location | None = None, config_dir: str | None = None,
                 calibrated: bool = True):
        from kernels.moe_bench import MoEGemmSpec
        from kernels.moe_configs import get_config
        from kernels.moe_presets import get_preset

        if tokens < 1:
            raise AdvisorError(f"--tokens {tokens}: the token count must be at least 1")
        if gemm not in (1, 2):
            raise AdvisorError(f"--gemm {gemm}: the fused-MoE layer has GEMM 1 (w1) and GEMM 2 (w2)")
        self.spec = get_spec(gpu)
        self.rates = rates_for(self.spec.name, use_calibration=calibrated)
        shape = get_preset(preset).shape(tp)
        e, top_k, k, n = shape.gemm1() if gemm == 1 else shape.gemm2()
        self.moe = MoEGemmSpec(e, top_k, k, n, tokens, gemm=gemm, dtype=shape.dtype)
        self.file_n = shape.config_file_n  # the N of the engine config file this launch reads
        self.kernel = "fused_moe_kernel"
        self.label = f"{get_preset(preset).name} TP{tp} GEMM{gemm} M={tokens}"
        if config is None:
            config, where = get_config(tokens, e, shape.config_file_n, top_k, self.spec.name, config_dir)
            if location is None:
                location = _moe_location(where, tokens)
        self.current = config
        self.location = location

    def space(self) -> list[Config]:
        from kernels import fused_moe as fm

        return fm.config_space()

    def precheck(self, config: Config) -> str | None:
        from kernels import fused_moe as fm

        if set(config.params) != set(fm.CONFIG_SPACE) - {"num_warps", "num_stages"}:
            return f"config {config.label()} does not set the kernel's tile parameters"
        return fm.resource_precheck(config, self.spec.smem_per_block, max_regs_per_thread=255)

    def ceilings(self, configs: Sequence[Config]) -> list[Ceiling]:
        from kernels.moe_demand import moe_gemm_demand

        return [roofline(moe_gemm_demand(self.moe, c, self.spec.arch), self.rates, c.to_dict()) for c in configs]

    def confirm(self, config: Config) -> tuple[str | None, list[str]]:
        from ceilings.compile import compile_launch
        from kernels.moe_bench import describe_launch

        return _confirm(lambda: compile_launch(describe_launch(self.moe, config, self.spec.arch), self.spec.arch),
                        self.spec, config)

    def useful_flops(self) -> float | None:
        return float(self.moe.flops())

    def measurer(self):
        from kernels.moe_bench import MoEGemmCase

        return _case_measurer(lambda: MoEGemmCase(self.moe, device="cuda", seed=1000 + self.moe.m), self.label)


def _moe_location(where: str, tokens: int) -> Location:
    from kernels import moe_configs

    if where == "default rule":
        return Location(moe_configs.__file__, _line_of(moe_configs.__file__, r"^def default_config\("),
                        "the default rule")
    return Location(where, engine_key_line(where, tokens), "tuned config file")


def engine_key_line(path: str | Path, tokens: int) -> int:
    """Line of the entry an engine file uses for M tokens: the nearest key, the smaller on a tie."""
    keys = []
    for i, text in enumerate(Path(path).read_text().splitlines(), 1):
        m = re.match(r'^\s*"(\d+)"\s*:', text)
        if m:
            keys.append((i, int(m.group(1))))
    if not keys:
        return 1
    return min(keys, key=lambda item: (abs(item[1] - tokens), item[1]))[0]


def _confirm(compile_fn: Callable, spec: GPUSpec, config: Config) -> tuple[str | None, list[str]]:
    try:
        compiled = compile_fn()
    except AdvisorError as exc:
        return f"does not compile: {exc}", []
    except Exception as exc:  # the compiler's own errors (out of resources, lowering failures)
        return f"does not compile for sm_{spec.arch}: {type(exc).__name__}: {' '.join(str(exc).split())[:120]}", []
    if compiled.shared_bytes > spec.smem_per_block:
        return (f"needs {compiled.shared_bytes} B of shared memory, over the {spec.smem_per_block} B a block may "
                f"use on {spec.name}"), []
    notes = []
    if compiled.local_bytes:
        notes.append(f"{compiled.local_bytes} B per thread of register spills")
    return None, notes


def _case_measurer(make_case: Callable, label: str):
    from advisor.measure import timing as measure
    from advisor.measure.sweep import STANDARD_TIMING

    case = make_case()

    def run(config: Config) -> float:
        timing, _ = measure.measure_checked(case.runner(config), case.out, case.reference, tol=1e-2,
                                            what=f"{label} {config.label()}", **STANDARD_TIMING)
        return timing.us

    return run


class ShapeSubject(Subject):
    """A shipped shape-driven kernel (GEMM M,N,K; softmax ROWS,COLS; attention BATCH_HEADS,SEQ,HEAD_DIM)."""

    def __init__(self, target: str | Path, shape: str, gpu: str = "h100", config: Config | None = None,
                 calibrated: bool = True):
        from advisor.advice.ceiling import _shipped_shape_kernels, parse_shape

        kernels = _shipped_shape_kernels()
        path = Path(target).resolve()
        if path not in kernels:
            raise AdvisorError(f"{target} is not one of the shipped shape kernels")
        what, self._demand, default = kernels[path]
        dims = parse_shape(shape, what)
        self.dims = dims
        self.module = _module_of(path)
        self.spec = get_spec(gpu)
        self.rates = rates_for(self.spec.name, use_calibration=calibrated)
        self.kernel = path.stem + "_kernel"
        self.label = f"{path.stem} {what}={shape}"
        self.current = config or default(*dims)
        self.location = Location(str(path), _line_of(path, r"^def default_config\("), "the default rule")

    def space(self) -> list[Config]:
        return expand_space(self.module.CONFIG_SPACE)

    def precheck(self, config: Config) -> str | None:
        name = self.module.__name__.rsplit(".", 1)[-1]
        if name == "gemm":
            from kernels.gemm_bench import resource_precheck

            return resource_precheck(config, self.spec.smem_per_block)
        if name == "softmax":
            from kernels.softmax_bench import resource_precheck

            return resource_precheck(config)
        from kernels.attention_bench import resource_precheck

        return resource_precheck(config, self.dims[2])

    def ceilings(self, configs: Sequence[Config]) -> list[Ceiling]:
        return [roofline(self._demand(*self.dims, c, "bfloat16", self.spec.arch), self.rates, c.to_dict())
                for c in configs]

    def useful_flops(self) -> float | None:
        name = self.module.__name__.rsplit(".", 1)[-1]
        if name == "gemm":
            m, n, k = self.dims
            return 2.0 * m * n * k
        return None


def _module_of(path: Path):
    import importlib

    return importlib.import_module(f"kernels.{path.stem}")


# ------------------------------------------------------------------------------------ any kernel, any launch

_TILE_PARAM = re.compile(r"^(BLOCK|TILE)(_SIZE)?_([A-Z0-9]+)$")


SIZE_SPELLINGS = ("{x}", "n_{x}", "size_{x}", "{x}_size", "n{x}")


def tile_dims(launch: Launch, spellings: Sequence[str] = SIZE_SPELLINGS) -> list[tuple[str, int]]:
    """(tile parameter, size it tiles) pairs: BLOCK_X / BLOCK_SIZE_X / TILE_X of the config matched, case
    ignored, to a positive integer argument of the launch spelled as one of `spellings` of X."""
    lower = {k.lower(): v for k, v in launch.scalars if isinstance(v, int) and not isinstance(v, bool)}
    out = []
    for name, value in launch.config.params.items():
        m = _TILE_PARAM.match(name)
        if not m or not isinstance(value, int) or value <= 0:
            continue
        x = m.group(3).lower()
        for spelling in spellings:
            if lower.get(spelling.format(x=x), 0) > 0:
                out.append((name, lower[spelling.format(x=x)]))
                break
    return out


def grid_rule(launch: Launch) -> Callable[[Config], tuple[int, ...]]:
    """How the launch's grid follows its config, inferred from the recorded grid.

    Each grid axis is explained, when it can be, as a product of cdiv(size, BLOCK_X) over tile parameters
    BLOCK_X / BLOCK_SIZE_X / TILE_X of the config and an integer argument named X (or x, n_x, size_x) of
    the launch, times a leftover factor that does not depend on the config (batch, heads). Axes that no
    such product explains keep their size (persistent grids, fixed batch axes).
    """
    tiles = tile_dims(launch)
    rules: list[tuple[list[tuple[str, int]], int]] = []
    used: set[str] = set()
    for size in launch.grid:
        best = None
        free = [t for t in tiles if t[0] not in used]
        for r in range(len(free), 0, -1):
            from itertools import combinations

            for combo in combinations(free, r):
                product = math.prod(-(-dim // launch.config[name]) for name, dim in combo)
                if product and size % product == 0:
                    best = (list(combo), size // product)
                    break
            if best:
                break
        if best:
            used.update(name for name, _ in best[0])
            rules.append(best)
        else:
            rules.append(([], size))

    def grid(config: Config) -> tuple[int, ...]:
        return tuple(factor * math.prod(-(-dim // config[name]) for name, dim in combo) for combo, factor in rules)

    return grid


class LaunchSubject(Subject):
    """Any kernel through a Launch (a trace, a launch file or autotune arguments): compiled SASS demand."""

    def __init__(self, launch: Launch, gpu: str = "h100", space: Sequence[Config] | None = None,
                 location: Location | None = None, calibrated: bool = True, label: str | None = None,
                 grid: Callable[[Config], tuple[int, ...]] | None = None):
        from ceilings.compile import load_kernel

        self.fn = load_kernel(launch.source, launch.kernel)
        self.launch = launch
        self.spec = get_spec(gpu)
        self.rates = rates_for(self.spec.name, use_calibration=calibrated)
        self.kernel = launch.kernel
        self.current = launch.config
        self.grid = grid or grid_rule(launch)
        self._space = list(space) if space is not None else None
        self.label = label or (f"{launch.kernel} grid={list(launch.grid)} "
                               + " ".join(f"{t.name}{list(t.shape)}" for t in launch.tensors[:3]))
        self.location = location or Location(launch.source, _def_line(launch.source, launch.kernel), "kernel")
        self._compiled: dict[Config, object] = {}
        self.notes: list[str] = []

    def launch_for(self, config: Config) -> Launch:
        return Launch(self.launch.source, self.launch.kernel, self.grid(config), self.launch.tensors,
                      self.launch.scalars, self.launch.constexprs, config)

    max_configs = 32  # each config of a generic kernel is compiled for its demand: a budget per launch

    def space(self) -> list[Config]:
        """The declared space (or the neighbours of the current config); beyond the compile budget, the
        feasible configs nearest to the current one."""
        full = self._space if self._space is not None else neighbours(self.current)
        if len(full) <= self.max_configs:
            return full
        feasible = [c for c in full if self.precheck(c) is None]
        near = sorted(feasible, key=lambda c: config_distance(c, self.current))[: self.max_configs]
        self.notes.append(f"{len(full)} configs declared; the {len(near)} feasible ones nearest the current config "
                          f"were ranked (each is compiled for its demand)")
        return near

    def precheck(self, config: Config) -> str | None:
        if set(config.params) != set(self.current.params):
            return "sets other parameters than the kernel's launch"
        return tile_precheck(config, self.spec, _element_bytes(self.launch))

    def _compile(self, config: Config):
        from ceilings.compile import compile_launch

        if config not in self._compiled:
            self._compiled[config] = compile_launch(self.launch_for(config), self.spec.arch, fn=self.fn)
        return self._compiled[config]

    def ceilings(self, configs: Sequence[Config]) -> list[Ceiling]:
        from ceilings.demand import generic_demand

        out = []
        for c in configs:
            launch = self.launch_for(c)
            out.append(roofline(generic_demand(launch, self._compile(c), self.spec.arch), self.rates, c.to_dict()))
        return out

    def confirm(self, config: Config) -> tuple[str | None, list[str]]:
        return _confirm(lambda: self._compile(config), self.spec, config)

    def measurer(self):
        from advisor.measure.launch_run import launch_measurer

        return launch_measurer(self.fn, self.launch, self.grid, self.label)


def _def_line(source: str, kernel: str) -> int:
    return _line_of(source, rf"^\s*def\s+{re.escape(kernel)}\s*\(")


def _element_bytes(launch: Launch) -> int:
    sizes = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1, "int8": 1}
    found = [sizes[t.dtype] for t in launch.tensors if t.dtype in sizes]
    return max(found) if found else 2


def tile_precheck(config: Config, spec: GPUSpec, element_bytes: int = 2) -> str | None:
    """The analytic limits of a tiled kernel: a (M x N) fp32 accumulator in registers and (M x K + K x N)
    operand tiles per pipeline stage in shared memory, when the config names those tiles; warps per block."""
    if config.num_warps * 32 > 1024:
        return f"{config.num_warps} warps exceed 1024 threads per block"
    tiles = {}
    for name, value in config.params.items():
        m = _TILE_PARAM.match(name)
        if m and isinstance(value, int):
            tiles[m.group(3)] = value
    bm, bn, bk = tiles.get("M"), tiles.get("N"), tiles.get("K")
    if bm and bn:
        acc = bm * bn // (32 * config.num_warps)
        if acc > spec.max_registers_per_thread:
            return f"accumulator needs {acc} registers per thread; use smaller tiles or more warps"
    if bm and bn and bk:
        smem = max(config.num_stages - 1, 1) * (bm * bk + bk * bn) * element_bytes
        if smem > spec.smem_per_block:
            return f"operand tiles need {smem} B of shared memory, over {spec.smem_per_block} B per block"
    return None


def config_distance(a: Config, b: Config) -> float:
    """How far apart two configs are: log2 steps over every numeric knob."""
    def step(x, y):
        return abs(math.log2(x / y)) if isinstance(x, int | float) and isinstance(y, int | float) and x > 0 and y > 0 \
            else float(x != y)
    keys = set(a.params) | set(b.params)
    return (sum(step(a.params.get(k, 0), b.params.get(k, 0)) for k in keys) + step(a.num_warps, b.num_warps)
            + step(max(a.num_stages, 1), max(b.num_stages, 1)))


def neighbours(config: Config) -> list[Config]:
    """The default space of a kernel without a declared one: the current config and every config one
    step away in one knob (tile sizes halved or doubled, group sizes, num_warps 2..16, num_stages 1..5)."""
    out = [config]
    for name, value in config.params.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            continue
        if _TILE_PARAM.match(name) or name.startswith("GROUP"):
            for v in (value // 2, value * 2):
                if v >= (16 if _TILE_PARAM.match(name) else 1) and v <= 512:
                    out.append(config.replace(**{name: v}))
    for w in (2, 4, 8, 16):
        if w != config.num_warps:
            out.append(config.replace(num_warps=w))
    for s in (1, 2, 3, 4, 5):
        if s != config.num_stages:
            out.append(config.replace(num_stages=s))
    return list(dict.fromkeys(out))


def declared_space(source: str | Path, kernel: str) -> tuple[list[Config], Location | None] | None:
    """The config space a kernel's file declares: its @triton.autotune list, or a module-level
    CONFIG_SPACE dict of lists (with num_warps / num_stages). None when it declares neither."""
    from advisor.advice.apply import read_autotune_configs

    try:
        found = read_autotune_configs(source, kernel)
    except AdvisorError:  # no autotune list (or one that is computed): look for a declared space
        found = []
    if found:
        return [c for c, _ in found], Location(str(source), found[0][1], "autotune configs")
    text = Path(source).read_text()
    if re.search(r"^CONFIG_SPACE\s*[:=]", text, re.M):
        from ceilings.compile import load_module

        module = load_module(source)
        space = getattr(module, "CONFIG_SPACE", None)
        if isinstance(space, dict) and space:
            return expand_space(space), Location(str(source), _line_of(source, r"^CONFIG_SPACE\s*[:=]"), "CONFIG_SPACE")
    return None
