"""The subjects a search ranks: a launch of a registered kernel family (`FamilySubject`: the family's
space, precheck, exact demand and measurable case), several launches that share one config
(`LayerSubject`), and any kernel through a recorded Launch (`LaunchSubject`: compiled SASS demand,
the grid inferred from the recorded one, the space the kernel's file declares or the current
config's neighbours).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from advisor.advice.config_space import around, config_distance, guided_pick, neighbours  # noqa: F401
from advisor.advice.grid_values import tile_dim
from advisor.advice.heuristics import heuristic_values, overridden_knobs, with_heuristics
from advisor.advice.launch_rule import launch_rule, named_tiles
from advisor.advice.operands import operand_element_bytes
from advisor.advice.search import Candidate, Location, Subject, predict_candidates
from advisor.advice.stores import accumulated_tensors, group_tiles
from advisor.advice.tile_roles import covering_tiles
from ceilings.compile import kernel_def_line, kernel_heuristics
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

    def kernel_source(self) -> str | None:
        return str(self.family.source)

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
    # the models' view of the sum is the sum of the parts' views (Ceiling.model_view), not the longest part's
    view = (combine_ceilings([c.model_view or c for c in parts])
            if any(c.model_view is not None for c in parts) else None)
    return dataclasses.replace(main, ceiling_us=sum(c.ceiling_us for c in parts), pipelines=pipes, notes=notes,
                               model_view=view)


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

    def kernel_source(self):
        return self.parts[0].kernel_source()

    def useful_flops(self):
        values = [p.useful_flops() for p in self.parts]
        return None if any(v is None for v in values) else sum(values)

    def predict(self, configs, model=None) -> list[Candidate]:
        """Predictions add over the parts (each part is featurised as the launch it is)."""
        per_part = [predict_candidates(p, configs, model) for p in self.parts]
        out = []
        for cands in zip(*per_part, strict=True):
            ceiling = combine_ceilings([c.ceiling for c in cands])
            # the model's own notes on any part (outside its data, a knob past its fitted range) hold
            # for the whole launch: the ceiling's notes first, each note once
            model_notes = [n for c in cands for n in c.notes if n not in c.ceiling.notes]
            out.append(Candidate(cands[0].config, ceiling, sum(c.predicted_us for c in cands),
                                 (sum(c.interval[0] for c in cands), sum(c.interval[1] for c in cands)),
                                 list(dict.fromkeys(list(ceiling.notes) + model_notes)),
                                 outside_data=any(c.outside_data for c in cands)))
        return out

    def measurer(self):
        runs = [p.measurer() for p in self.parts]
        return lambda config: sum(run(config) for run in runs)


# ------------------------------------------------------------------------------------ any kernel, any launch

tile_dims = named_tiles


def grid_rule(launch: Launch) -> Callable[[Config], tuple[int, ...]]:
    """How the launch's grid follows its config (advisor.advice.launch_rule)."""
    return launch_rule(launch).grid


COMPILE_BUDGET_ENV = "TRITON_ADVISOR_COMPILE_BUDGET"


def compile_budget(default: int) -> int:
    """The configs a search compiles for a launch's first pick (each further neighbourhood: half as many):
    `default`, or fewer where TRITON_ADVISOR_COMPILE_BUDGET asks for fewer (a slow machine's shorter search,
    ranking fewer candidates; the test suite's default run)."""
    from ceilings.compile_limit import whole_number

    given = whole_number(COMPILE_BUDGET_ENV, "configs")
    return default if given is None else min(default, given)


class LaunchSubject(Subject):
    """Any kernel through a Launch (a trace, a launch file or autotune arguments): compiled SASS demand."""

    def __init__(self, launch: Launch, gpu: GPU, space: Sequence[Config] | None = None,
                 location: Location | None = None, label: str | None = None,
                 grid: Callable[[Config], tuple[int, ...]] | None = None,
                 variants: Mapping[Config, Launch] | None = None,
                 relaunch: Callable[[Config], Launch | None] | None = None,
                 declared: Sequence[Config] | None = None):
        """`variants`: the launch each config makes where that is known (a capture of every autotune
        config: its grid, and constexprs heuristics set from the config). `grid`: how the grid follows the
        config where the caller knows it (the autotune hook's grid callable); otherwise it, the padded size
        arguments and the buffers sized by them are inferred from the launch (advisor.advice.launch_rule).
        `relaunch`: config -> the launch the program makes with it (a captured call re-run per config:
        grid functions and heuristics see the config). Where the launch has padded sizes, which host code
        derives from its own config before the launch, only a re-run of the host with the config written in
        (`relaunch(config, edited_only=True)`: literals or names bound once, as `advisor apply` edits them) is
        taken; an override of the kernel's meta-parameters alone cannot change them. `declared`:
        the autotune list as the file writes it, where `space` holds the captured configs (which carry the
        host's constexprs too): the parameters it does not set are the host's (`host_params`)."""
        from ceilings.compile import load_kernel

        self.fn = load_kernel(launch.source, launch.kernel)
        self.launch = launch
        self.gpu = gpu
        self.kernel = launch.kernel
        self.current = launch.config
        self.rule = launch_rule(launch)
        self.grid = grid or self.rule.grid
        # Launched constexprs an autotune list does not set (the host passes them: BD = next_power_of_2(D)),
        # which the recorder files under the config with the tuned ones: every config of the space keeps
        # their launched values, or none of it would set the launch's parameters.
        self.host_params = host_params(declared or space or [], self.current)
        self._space = ([Config({k: c.params.get(k, v) for k, v in self.current.params.items()}, c.num_warps,
                               c.num_stages) if self.host_params else c for c in space]
                       if space is not None else None)
        # An autotune list is the space the autotuner picks from, not every config the kernel can run: the
        # search also climbs past it (`_extends_list`), and a config found there is one to add to the list.
        self.listed: frozenset[Config] = frozenset(self._space or ()) if (
            location is not None and location.what.startswith("autotune configs")) else frozenset()
        self.label = label or (f"{launch.kernel} grid={list(launch.grid)} "
                               + " ".join(f"{t.name}{list(t.shape)}" for t in launch.tensors[:3]))
        self.location = location or Location(launch.source, _config_line(launch.source, launch.kernel), "kernel")
        self._compiled: dict[Config, object] = {}
        # configs a search's time limit left uncompiled, with why: not tried again by this subject (a TUI's
        # confirming search follows its ranking at once); a new subject (a new run) tries them again
        self._late: dict[Config, str] = {}
        self._ceilings: dict[Config, Ceiling] = {}
        self.notes: list[str] = self.rule.notes() if grid is None else []
        self.variants = dict(variants or {})
        self.relaunch = relaunch
        self._relaunched: dict[Config, Launch | None] = {}
        self._covering: set[str] | None = None  # tiles kept as launched: found on the first space()
        self._picked: list[Config] | None = None  # the model-guided pick: made once (it compiles), noted once
        self.climbed: set[Config] = set()  # configs only the climb reached (past the first neighbourhood)
        self.operand_bytes = operand_element_bytes(launch, self.fn)
        self._noted: set[str] = set()  # kinds of note added once per subject (`_note_once`)
        self.heuristics = self._launched_heuristics()

    @property
    def declared_configs(self) -> list[Config]:
        """The kernel's own space in its order (an autotune list's first config first); empty when it has none."""
        return list(self._space or [])

    def launch_for(self, config: Config) -> Launch:
        if config in self.variants:
            return self.variants[config]
        relaunched = self._host_launch(config)
        if relaunched is not None:
            return relaunched
        made = self.rule(config)
        made = made if self.grid == self.rule.grid else dataclasses.replace(made, grid=self.grid(config))
        return self._with_heuristics(made, config)

    def _host_launch(self, config: Config) -> Launch | None:
        """The launch the host code makes with `config` (its re-run, `relaunch`); None where there is none."""
        if self.relaunch is None or config == self.current:
            return None
        if config not in self._relaunched:
            # The host re-run with the config written in (as `advisor apply` would) is the host's own answer: its
            # grid and padded sizes stand. Else only the kernel's meta-parameters were overridden at the launch.
            again = self.relaunch(config, edited_only=True)
            if again is None and not self.rule.padded:
                again = self.relaunch(config)
            # either re-run may keep a grid of the host's own that the config does not reach (a name the edit
            # cannot reach, constants the override does not): checked against the launch rule alike
            self._relaunched[config] = self._host_grid_checked(again, config)
        return self._relaunched[config]

    def _host_grid_checked(self, relaunched: Launch | None, config: Config) -> Launch | None:
        """A re-run of the host code whose grid did not move although the launch rule says this config's grid
        must (the host sizes its grid from constants of its own, `BLOCK_M, BLOCK_N = 64, 64; grid = (M //
        BLOCK_M, ...)`, which the re-run's override of the kernel's constexprs does not reach): that grid would
        cover a part of the output, so the rule's grid is taken, as a person changing the config there would
        change both, with a note."""
        if relaunched is None or relaunched.grid != self.launch.grid or self.rule.unknown_grid(config):
            return relaunched
        ruled = self.rule.grid(config)
        if ruled == self.launch.grid:
            return relaunched
        tiles = sorted({name for combo, _ in self.rule.axes for name, _ in combo})
        self._note_once("host grid", f"the host code computes its grid from values of its own, not from the "
                        f"kernel's {', '.join(tiles)}: for other configs the grid follows the launch rule (change "
                        "the host's values with the kernel's)")
        return dataclasses.replace(relaunched, grid=ruled)

    def _launched_heuristics(self) -> list:
        """The kernel's @triton.heuristics, if the launch went through them: evaluated at the launched
        config they give the values it recorded (else the host launched the bare kernel, or they read
        data: none are applied)."""
        heuristics = kernel_heuristics(self.launch.source, self.launch.kernel)
        if not heuristics:
            return []
        try:
            values = heuristic_values(heuristics, self.launch, self.current)
        except Exception:  # noqa: BLE001 - not evaluable without data: launch_for notes it per config
            return heuristics
        recorded = with_heuristics(self.launch, values)
        return heuristics if (recorded.constexprs, recorded.config) == (self.launch.constexprs, self.current) else []

    def _with_heuristics(self, made: Launch, config: Config) -> Launch:
        """`made` with the kernel's @triton.heuristics evaluated for `config` (advisor.advice.heuristics); the
        launched config keeps what was recorded. A heuristic that cannot be evaluated here (it reads data)
        keeps its recorded value, with a note."""
        if not self.heuristics or config == self.current:
            return made
        try:
            values = heuristic_values(self.heuristics, made, config)
        except Exception as exc:  # a user's lambda: any error means "not known here"
            names = ", ".join(n for values in self.heuristics for n in values)
            self._note_once("heuristics failed", f"the kernel's @triton.heuristics ({names}) could not be evaluated "
                            f"without its data ({type(exc).__name__}: {exc}); other configs keep the launched "
                            "values, which may not be what the kernel would pick: measure them (--measure)")
            return made
        return with_heuristics(made, values)

    max_configs = 32  # each config of a generic kernel is compiled for its demand: a budget per launch
    # (TRITON_ADVISOR_COMPILE_BUDGET lowers it: `compile_budget`)
    climb_rounds = 3  # further neighbourhoods around the predicted best, for a kernel that declares no space
    # past an autotune list, around its predicted best: its author searched the list's region already, and each
    # round compiles up to half the budget again (FlagGems' mm: 22 configs, then 8 past them, 19 s here)
    list_climb_rounds = 2

    def space(self) -> list[Config]:
        """The kernel's own space (its autotune list, a declared space, the configs a capture made), or
        for a kernel with none the combinations of one step in every knob around the current config, then
        around the config the model ranks first, while that moves (`_climb`); beyond the compile budget,
        the configs the latency model leads to (advisor.advice.config_space)."""
        if self._picked is not None:
            return list(self._picked)
        declared = self._space is not None
        full = self._not_overridden(self._space if declared else around(self.current, self._covering_tiles()))
        fixed = declared and not self._extends_list()  # a declared space searched as it is
        budget = compile_budget(self.max_configs)
        if len(full) <= budget and (fixed or (not declared and self.climb_rounds == 0)):
            return full
        picked = full
        if len(full) > budget:
            feasible = [c for c in full if self.precheck(c) is None]
            picked = guided_pick(feasible, self.current, budget, self._predicted_us)
            self.notes.append(f"{len(full)} configs in the space ({len(feasible)} fit); the {len(picked)} the "
                              "latency model led to were compiled and ranked (each config is compiled for its demand)")
        self._picked = picked if fixed else self._climb(picked, budget, past_list=declared)
        return list(self._picked)

    def _extends_list(self) -> bool:
        """Whether the search climbs past the kernel's autotune list: configs there need launches from the launch
        rule, so only where the rule gives every captured config of the list the grid the host code gave it."""
        if not self.listed or not self.list_climb_rounds:
            return False
        for config, launch in self.variants.items():
            if self.rule.unknown_grid(config) or tuple(self.rule.grid(config)) != tuple(launch.grid):
                self._note_once("list kept", f"configs past the autotune list are not searched: the host code's "
                                f"grid for {config.label()} ({list(launch.grid)}) is not one the launch rule explains, "
                                "so their grids would be guesses")
                return False
        return True

    def _climb(self, first: list[Config], budget: int, past_list: bool = False) -> list[Config]:
        """`first` (the neighbourhood of the current config) and, round after round, the one-step
        neighbourhood of the config the model ranks fastest so far, while that config moves: a tile of
        64 whose best value is 1024 is four steps away, which one neighbourhood never reaches (flashnn's
        row norms, RESULTS 38). Each round is compiled in parallel and held to the compile budget.
        `past_list`: `first` is an autotune list, whose best config the climb starts from wherever it is;
        the parameters the host passes keep their values."""
        if not first:
            return first
        times = dict(zip(first, self._predicted_us(first), strict=True))
        out, seen = list(first), set(first)
        best, rounds = min(times, key=times.get), 0
        fixed = self._covering_tiles() | set(self.host_params)
        limit = self.list_climb_rounds if past_list else self.climb_rounds
        while (past_list or best != self.current) and rounds < limit and math.isfinite(times[best]):
            near = [c for c in self._not_overridden(around(best, fixed)) if c not in seen]
            seen.update(near)
            feasible = [c for c in near if self.precheck(c) is None]
            if not feasible:
                break
            per_round = budget // 2  # a round is a step, not a new search: half the first budget
            batch = (guided_pick(feasible, best, per_round, self._predicted_us)
                     if len(feasible) > per_round else feasible)
            batch = [c for c in batch if c not in times]
            times.update(zip(batch, self._predicted_us(batch), strict=True))
            out += batch
            rounds += 1
            moved = min(times, key=times.get)
            if moved == best:
                break
            best = moved
        self.climbed = set(out) - set(first)
        if rounds:
            past = " past the autotune list" if past_list else ""
            self.notes.append(f"searched {rounds} further neighbourhood(s){past} around the config the model ranked "
                              f"first ({len(out)} configs compiled and ranked)")
        return [c for c in out if math.isfinite(times.get(c, math.inf)) or c == self.current]

    def _not_overridden(self, configs: list[Config]) -> list[Config]:
        """`configs` without those whose knobs the kernel's heuristics set to other values (a BLOCK_N or
        num_warps a heuristic derives from the shape): launched, they would run the heuristic's config."""
        if not self.heuristics:
            return configs
        kept, overridden = [], set()
        for c in configs:
            try:
                changed = overridden_knobs(heuristic_values(self.heuristics, self.launch, c), c)
            except Exception:  # noqa: BLE001 - not evaluable without data: launch_for notes it
                changed = set()
            if changed and c != self.current:
                overridden |= changed
                continue
            kept.append(c)
        if overridden:
            verb, other = ("is", "it another value") if len(overridden) == 1 else ("are", "them other values")
            self._note_once("overridden", f"{', '.join(sorted(overridden))} {verb} set by the kernel's "
                            f"@triton.heuristics for each config: configs that give {other} are not searched (the "
                            "launch would run the heuristics' value)")
        return kept

    def _note_once(self, kind: str, text: str) -> None:
        """A note of a kind this subject adds once, whichever config first shows it."""
        if kind not in self._noted:
            self._noted.add(kind)
            self.notes.append(text)

    def _covering_tiles(self) -> set[str]:
        """The tiles the search keeps as launched (advisor.advice.tile_roles), found once, with their note."""
        if self._covering is None:
            self._covering = {name for name in covering_tiles(self.fn, self.current.params, self.rule)
                              if not self._grid_follows(name)}
            if self._covering:
                self.notes.append("kept as launched: " + ", ".join(f"{n}={self.current[n]}"
                                                                   for n in sorted(self._covering))
                                  + " (each program covers it whole: no grid axis or loop of the kernel follows "
                                  "it, so another value would change the result)")
            groups = group_tiles(self.fn, self._tile_axes()) - self._covering
            if groups:
                self._covering |= groups
                self.notes.append("kept as launched: " + ", ".join(f"{n}={self.current[n]}" for n in sorted(groups))
                                  + " (a group size, not a tile: each program writes one value per group, addressed "
                                  "by its program id, so another value would write another number of them)")
        return self._covering

    def _tile_axes(self) -> dict[str, set[int]]:
        """Tile -> the grid axes it divides: the launch rule's, and those the host's grid moves when the
        tile is halved (a captured grid function the rule could not read)."""
        out: dict[str, set[int]] = {}
        for axis, (combo, _) in enumerate(self.rule.axes):
            for name, _ in combo:
                out.setdefault(name, set()).add(axis)
        for name in self.current.params:
            if name not in out and tile_dim(name):
                moved = self._moved_axes(name)
                if moved:
                    out[name] = moved
        return out

    def _grid_follows(self, tile: str) -> bool:
        """Whether the host code's grid follows a tile the launch rule cannot explain."""
        return bool(self._moved_axes(tile))

    def _moved_axes(self, tile: str) -> set[int]:
        """The grid axes the host code's grid moves when `tile` is halved (the captured call re-run with
        it); none without a call to re-run."""
        value = self.current[tile]
        if self.relaunch is None or not isinstance(value, int) or isinstance(value, bool) or value < 2:
            return set()
        probe_config = self.current.replace(**{tile: value // 2})
        again = self.variants.get(probe_config) or self._host_launch(probe_config)
        if again is None:
            return set()
        probe, grid = again.grid, self.launch.grid
        shared = min(len(probe), len(grid))
        return {i for i in range(max(len(probe), len(grid))) if i >= shared or probe[i] != grid[i]}

    def _predicted_us(self, configs: list[Config]) -> list[float]:
        """Each config's predicted time (inf where it does not compile); compiled in parallel first (a
        guided pick or a climb asks for a batch at a time: one by one, a GEMM's batches took minutes)."""
        self._compile_batch(configs)
        out = []
        for c in configs:
            try:
                (cand,) = self.predict([c])
                out.append(cand.predicted_us)
            except Exception:  # noqa: BLE001 - a config that does not compile is no lead to follow
                out.append(math.inf)
        return out

    def precheck(self, config: Config) -> str | None:
        if set(config.params) != set(self.current.params):
            return "sets other parameters than the kernel's launch"
        if self.grid == self.rule.grid and config not in self.variants:
            unknown = self.rule.unknown_grid(config)  # its grid would be a guess: no speed-up claimed from it
            # A re-run of the host code settles it where its grid moves with the config; one whose grid stays
            # may size it from values of its own (`grid = (cdiv(seqlen, block_m), ...)` with the host's block_m),
            # which the re-run's override of the kernel's constexprs does not reach.
            again = self._host_launch(config) if unknown else None
            if unknown and (again is None or again.grid == self.launch.grid):
                return unknown
        compiled = self._compiled.get(config)
        if compiled is None and config == self.current:  # compiled for its ceiling in any case
            try:
                compiled = self._compile(config)
            except Exception:  # noqa: BLE001 - the compiler's verdict comes with the confirm step
                compiled = None
        if compiled is not None:  # the kernel's own shared bytes, not an estimate
            if compiled.shared_bytes > self.spec.smem_per_block:
                return (f"needs {compiled.shared_bytes} B of shared memory, over {self.spec.smem_per_block} B "
                        "per block")
            return tile_precheck(config, self.spec, None)
        return tile_precheck(config, self.spec, self.operand_bytes)

    def _compile(self, config: Config, ahead: bool = True):
        """The config's compile; `ahead`: a miss of the compile cache goes to a worker first, where the
        compile limit holds (False: `_compile_batch` has just tried it there)."""
        from ceilings.compile import compile_launch
        from ceilings.compile_limit import SearchOutOfTime

        if config not in self._compiled:
            if ahead:
                self._compile_batch([config])
            if config in self._late:  # not compiled here either: the search had no time left for it
                raise SearchOutOfTime(self._late[config])
            self._compiled[config] = compile_launch(self.launch_for(config), self.spec.arch, fn=self.fn)
        return self._compiled[config]

    def _compile_batch(self, configs: Sequence[Config]) -> None:
        """The configs not compiled yet, in parallel workers, each within the compile limit; those a search's
        time limit left uncompiled are noted (`_late`) so that no caller compiles them in this process."""
        from advisor.advice.compile_pool import OUT_OF_TIME, compile_ahead

        wanted = {self.launch_for(c): c for c in configs
                  if c not in self._ceilings and c not in self._compiled and c not in self._late}
        failed = compile_ahead(list(wanted), self.spec.arch, self.fn, supervised=True)
        for launch, why in failed.items():
            if why.startswith(OUT_OF_TIME):
                self._late[wanted[launch]] = why

    def compile_problems(self, configs: Sequence[Config]) -> dict[Config, str]:
        from ceilings.compile_limit import COMPILE_LIMIT_ENV, CompileStalled, SearchOutOfTime

        self._compile_batch(configs)
        problems = {}
        for c in configs:
            try:
                self._compile(c, ahead=False)
            except CompileStalled as exc:
                problems[c] = f"its compile ran past the {exc.limit_s:.0f} s limit ({COMPILE_LIMIT_ENV})"
            except SearchOutOfTime as exc:
                problems[c] = str(exc)
            except AdvisorError as exc:
                problems[c] = f"it does not compile ({str(exc).split(': ', 1)[-1][:240]})"
        return problems

    def ceilings(self, configs: Sequence[Config]) -> list[Ceiling]:
        from ceilings.demand import generic_demand

        self._compile_batch(configs)
        for c in configs:
            if c not in self._ceilings:
                demand = generic_demand(self.launch_for(c), self._compile(c, ahead=False), self.spec.arch)
                self._ceilings[c] = roofline(demand, self.gpu.rates, c.to_dict())
        return [self._ceilings[c] for c in configs]

    def confirm(self, config: Config) -> tuple[str | None, list[str]]:
        return _confirm(lambda: self._compile(config), self.spec, config)

    def kernel_source(self) -> str | None:
        return self.launch.source

    def measurer(self):
        from advisor.measure.launch_run import launch_measurer

        return launch_measurer(self.fn, self.timed_launch(), self.launch_for, self.label,
                               zeroed=self.accumulated())

    # A captured call's real run on the GPU (advisor.capture.call_contents.program_contents, shared by the call's
    # launches); None for other subjects.
    program_contents: Callable[[], list[Launch] | None] | None = None

    def timed_launch(self, run: bool = True) -> Launch:
        """The launch timings run: this one, with the contents a real run of its call recorded for integer
        tensors the capture without a GPU has none for (advisor.capture.call_contents). `run=False`: only what
        a run already gave, starting none."""
        from advisor.capture.call_contents import lacks_contents, with_contents

        if getattr(self, "_timed_launch", None) is None:
            if self.program_contents is None or not lacks_contents(self.launch):
                self._timed_launch = self.launch
            elif not run:
                return self.launch
            else:
                found = self.program_contents()
                self._timed_launch = self.launch if found is None else with_contents(self.launch, found)
        return self._timed_launch

    def result_check(self, configs: Sequence[Config]):
        """Whether the leading `configs` compute the current config's result, in Triton's interpreter
        (advisor.advice.result_check)."""
        from advisor.advice import result_check

        return result_check.check(self, list(configs))

    def accumulated(self) -> set[str]:
        """The floating tensors the kernel adds into with atomics (a split-K GEMM's output): every run that
        checks or times a config starts them at zero, as the host or an autotune pre-hook does
        (advisor.advice.stores)."""
        return accumulated_tensors(self.fn, ((t.name, t.dtype) for t in self.launch.tensors))


def host_params(space: Sequence[Config], current: Config) -> dict:
    """The launch's meta-parameters that no config of `space` sets, with their launched values, when every
    config sets only parameters the launch has (else none: such a space is another kernel's, and the
    precheck says so)."""
    launched = current.params
    if not space or any(not set(c.params) <= set(launched) for c in space):
        return {}
    tuned = {name for c in space for name in c.params}
    return {name: value for name, value in launched.items() if name not in tuned}


def tuned_config(subject: Subject, config: Config) -> Config:
    """`config` as an autotune list writes it: without the parameters the host passes (`host_params`)."""
    fixed = getattr(subject, "host_params", None) or {}
    if not fixed:
        return config
    return Config({k: v for k, v in config.params.items() if k not in fixed}, config.num_warps, config.num_stages)


def _config_line(source: str, kernel: str) -> int:
    """Where a launch's config is written when no list or file holds it: the kernel's one launch call in its own
    file (`kernel[grid](..., num_warps=4)`, where `advisor apply` edits it), else the kernel's definition."""
    try:
        stamp = os.stat(source).st_mtime_ns
    except OSError:
        stamp = None
    return _launch_line(str(source), kernel, stamp) or kernel_def_line(source, kernel) or 1


@functools.lru_cache(maxsize=256)
def _launch_line(source: str, kernel: str, stamp: int | None) -> int | None:
    """The line of the kernel's one launch call in `source` (read once per file version), else None."""
    from advisor.advice.autotune_list import load_source
    from advisor.advice.launch_edit import launch_calls

    try:
        calls = launch_calls(load_source(Path(source)), kernel)
    except (AdvisorError, OSError):
        return None
    return calls[0].lineno if len(calls) == 1 else None


def tile_precheck(config: Config, spec: GPUSpec, element_bytes: int | None = 2) -> str | None:
    """The analytic limits of a tiled kernel: a (M x N) fp32 accumulator in registers and (M x K + K x N)
    operand tiles of `element_bytes` per pipeline stage in shared memory, when the config names those
    tiles (None: the kernel stages no operand tiles, or their size is known from its compile); warps per
    block."""
    if config.num_warps * 32 > 1024:
        return f"{config.num_warps} warps exceed 1024 threads per block"
    tiles = {}
    for name, value in config.params.items():
        dim = tile_dim(name)
        if dim and isinstance(value, int):
            tiles[dim] = value
    bm, bn, bk = tiles.get("M"), tiles.get("N"), tiles.get("K")
    if bm and bn:
        acc = bm * bn // (32 * config.num_warps)
        if acc > spec.max_registers_per_thread:
            return f"accumulator needs {acc} registers per thread; use smaller tiles or more warps"
    if bm and bn and bk and element_bytes:
        smem = max(config.num_stages - 1, 1) * (bm * bk + bk * bn) * element_bytes
        if smem > spec.smem_per_block:
            return f"operand tiles need {smem} B of shared memory, over {spec.smem_per_block} B per block"
    return None


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
        from advisor.advice.autotune_hand import space_list_line

        written = space_list_line(source, built.configs)  # point at the configs, not at the call building them
        if written is not None:
            return built.configs, Location(str(source), written[0], f"autotune configs built by code ({written[1]})")
        return built.configs, Location(str(source), built.line, f"autotune configs built by code ({built.what})")
    text = Path(source).read_text()
    if re.search(r"^CONFIG_SPACE\s*[:=]", text, re.M):
        from ceilings.compile import load_module

        module = load_module(source)
        space = getattr(module, "CONFIG_SPACE", None)
        if isinstance(space, dict) and space:
            return expand_space(space), Location(str(source), line_of(source, r"^CONFIG_SPACE\s*[:=]"), "CONFIG_SPACE")
    return None
