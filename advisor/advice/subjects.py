"""The subjects a search ranks: a launch of a registered kernel family (`FamilySubject`: the family's
space, precheck, exact demand and measurable case), several launches that share one config
(`LayerSubject`), and any kernel through a recorded Launch (`LaunchSubject`: compiled SASS demand,
the grid inferred from the recorded one, the space the kernel's file declares or the current
config's neighbours).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping, Sequence
from itertools import combinations
from pathlib import Path

from advisor.advice.search import Candidate, Location, Subject, predict_candidates
from ceilings.errors import AdvisorError
from ceilings.hardware import GPU, GPUSpec
from ceilings.launch import Config, Launch, expand_space
from ceilings.roofline import Ceiling, roofline
from kernels.family import Family


def line_of(path: str | Path, pattern: str) -> int:
    """1-based line of the first match of `pattern` in a file (1 if none)."""
    try:
        for i, text in enumerate(Path(path).read_text().splitlines(), 1):
            if re.search(pattern, text):
                return i
    except OSError:
        pass
    return 1


# ----------------------------------------------------------------------------------------- a family

class FamilySubject(Subject):
    """One launch of a registered kernel family at one shape: everything from its declaration."""

    def __init__(self, family: Family, shape, gpu: GPU, config: Config | None = None, label: str | None = None,
                 location: Location | None = None):
        self.family, self.shape, self.gpu = family, shape, gpu
        self.kernel = family.kernel
        self.label = label or f"{family.source.stem} {family.shape_form}={family.shape_text(shape)}"
        self.current = config or family.default_config(shape)
        if location is None:
            path, pattern = family.default_rule
            location = Location(str(path), line_of(path, pattern), "the default rule")
        self.location = location

    def space(self) -> list[Config]:
        return self.family.space()

    def precheck(self, config: Config) -> str | None:
        return self.family.precheck(config, self.gpu.spec, self.shape)

    def ceilings(self, configs: Sequence[Config]) -> list[Ceiling]:
        arch = self.gpu.arch
        return [roofline(self.family.demand(self.shape, c, arch), self.gpu.rates, c.to_dict()) for c in configs]

    def confirm(self, config: Config) -> tuple[str | None, list[str]]:
        from ceilings.compile import compile_launch

        describe = self.family.describe_launch
        if describe is None:
            return None, []
        arch = self.gpu.arch
        return _confirm(lambda: compile_launch(describe(self.shape, config, arch), arch), self.gpu.spec, config)

    def confirm_launches(self, configs: Sequence[Config]) -> list[Launch]:
        describe, arch = self.family.describe_launch, self.gpu.arch
        return [] if describe is None else [describe(self.shape, c, arch) for c in configs]

    def useful_flops(self) -> float | None:
        return None if self.family.useful_flops is None else self.family.useful_flops(self.shape)

    def measurer(self):
        return _case_measurer(lambda: self.family.case(self.shape), self.label)


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



# ----------------------------------------------------------------------------- launches sharing a config

def combine_ceilings(parts: Sequence[Ceiling]) -> Ceiling:
    """The ceiling of launches run one after another: times add per pipeline; the shape of the launch
    (CTAs, waves, occupancy, demand) is the longest part's."""
    main = max(parts, key=lambda c: c.ceiling_us)
    pipes = {}
    for name in main.pipelines:
        values = [c.pipelines.get(name) for c in parts]
        pipes[name] = None if any(v is None for v in values) else sum(values)
    notes = list(dict.fromkeys(n for c in parts for n in c.notes))
    return dataclasses.replace(main, ceiling_us=sum(c.ceiling_us for c in parts), pipelines=pipes, notes=notes)


class LayerSubject(Subject):
    """One config shared by several launches (the two GEMMs of a fused-MoE layer): judged by their sum."""

    def __init__(self, parts: Sequence[Subject], label: str):
        self.parts = list(parts)
        first = self.parts[0]
        self.gpu, self.kernel, self.current, self.location = first.gpu, first.kernel, first.current, first.location
        self.label = label

    def space(self):
        return self.parts[0].space()

    def precheck(self, config):
        for p in self.parts:
            why = p.precheck(config)
            if why:
                return why
        return None

    def ceilings(self, configs):
        per_part = [p.ceilings(configs) for p in self.parts]
        return [combine_ceilings(cs) for cs in zip(*per_part, strict=True)]

    def confirm(self, config):
        notes = []
        for p in self.parts:
            why, more = p.confirm(config)
            if why:
                return why, []
            notes += more
        return None, list(dict.fromkeys(notes))

    def confirm_launches(self, configs):
        return [launch for p in self.parts for launch in p.confirm_launches(configs)]

    def useful_flops(self):
        values = [p.useful_flops() for p in self.parts]
        return None if any(v is None for v in values) else sum(values)

    def predict(self, configs, model=None) -> list[Candidate]:
        """Predictions add over the parts (each part is featurised as the launch it is)."""
        per_part = [predict_candidates(p, configs, model) for p in self.parts]
        out = []
        for cands in zip(*per_part, strict=True):
            ceiling = combine_ceilings([c.ceiling for c in cands])
            out.append(Candidate(cands[0].config, ceiling, sum(c.predicted_us for c in cands),
                                 (sum(c.interval[0] for c in cands), sum(c.interval[1] for c in cands)),
                                 list(ceiling.notes)))
        return out

    def measurer(self):
        runs = [p.measurer() for p in self.parts]
        return lambda config: sum(run(config) for run in runs)


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

    def __init__(self, launch: Launch, gpu: GPU, space: Sequence[Config] | None = None,
                 location: Location | None = None, label: str | None = None,
                 grid: Callable[[Config], tuple[int, ...]] | None = None,
                 variants: Mapping[Config, Launch] | None = None):
        """`variants`: the launch each config makes where that is known (a capture of every autotune
        config: its grid, and constexprs heuristics set from the config)."""
        from ceilings.compile import load_kernel

        self.fn = load_kernel(launch.source, launch.kernel)
        self.launch = launch
        self.gpu = gpu
        self.kernel = launch.kernel
        self.current = launch.config
        self.grid = grid or grid_rule(launch)
        self._space = list(space) if space is not None else None
        self.label = label or (f"{launch.kernel} grid={list(launch.grid)} "
                               + " ".join(f"{t.name}{list(t.shape)}" for t in launch.tensors[:3]))
        self.location = location or Location(launch.source, _def_line(launch.source, launch.kernel), "kernel")
        self._compiled: dict[Config, object] = {}
        self.notes: list[str] = []
        self.variants = dict(variants or {})

    def launch_for(self, config: Config) -> Launch:
        if config in self.variants:
            return self.variants[config]
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
        return tile_precheck(config, self.spec, element_bytes_of(self.launch))

    def _compile(self, config: Config):
        from ceilings.compile import compile_launch

        if config not in self._compiled:
            self._compiled[config] = compile_launch(self.launch_for(config), self.spec.arch, fn=self.fn)
        return self._compiled[config]

    def ceilings(self, configs: Sequence[Config]) -> list[Ceiling]:
        from advisor.advice.compile_pool import compile_ahead
        from ceilings.demand import generic_demand

        compile_ahead([self.launch_for(c) for c in configs if c not in self._compiled], self.spec.arch, self.fn)
        out = []
        for c in configs:
            launch = self.launch_for(c)
            out.append(roofline(generic_demand(launch, self._compile(c), self.spec.arch), self.gpu.rates, c.to_dict()))
        return out

    def confirm(self, config: Config) -> tuple[str | None, list[str]]:
        return _confirm(lambda: self._compile(config), self.spec, config)

    def measurer(self):
        from advisor.measure.launch_run import launch_measurer

        return launch_measurer(self.fn, self.launch, self.grid, self.label)


def _def_line(source: str, kernel: str) -> int:
    return line_of(source, rf"^\s*def\s+{re.escape(kernel)}\s*\(")


def element_bytes_of(launch: Launch) -> int:
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
    from advisor.capture.autotune_space import built_autotune_space

    built = built_autotune_space(source, kernel)  # a list built by code: its configs, and where it is built
    if built is not None:
        return built.configs, Location(str(source), built.line, f"autotune configs built by code ({built.what})")
    text = Path(source).read_text()
    if re.search(r"^CONFIG_SPACE\s*[:=]", text, re.M):
        from ceilings.compile import load_module

        module = load_module(source)
        space = getattr(module, "CONFIG_SPACE", None)
        if isinstance(space, dict) and space:
            return expand_space(space), Location(str(source), line_of(source, r"^CONFIG_SPACE\s*[:=]"), "CONFIG_SPACE")
    return None
