"""`advisor suggest`: for each launch of a target, the current config, the best found, and why.

Targets:
- the shipped kernels/fused_moe.py with --preset (and --tp, --tokens): one fused-MoE layer per token
  count; the engines use one config for both GEMMs of a layer, so a config is judged by GEMM1 + GEMM2;
- a shipped shape kernel (kernels/gemm.py, softmax.py, attention.py) with --shape values;
- a launch trace (`advisor record`) or launch JSON, or any kernel file with --trace/--launch;
- a serving-engine fused-MoE config file (E=..,N=..,device_name=...json): every M entry is checked
  against the best predicted for that M on the GPU the file names (the model preset is inferred from
  E and N, or given with --preset).

Output formats: text (a rich table), json, github (workflow annotations at the config's line) and
sarif (SARIF 2.1.0). Exit codes: 0 when no launch gains more than --min-speedup, 1 when some do, 2 on a
user error. Nothing here imports textual.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path

from advisor.advice.search import (
    Advice,
    Candidate,
    Location,
    MoESubject,
    Subject,
    engine_key_line,
    predict_candidates,
    search,
)
from ceilings.errors import AdvisorError
from ceilings.launch import Config
from ceilings.roofline import Ceiling

DEFAULT_TOKENS = (1, 16, 64, 256, 1024, 4096)
_ENGINE_FILE = re.compile(r"^E=(\d+),N=(\d+),device_name=([^,]+?)(,dtype=[^,]+)?(,block_shape=\[\d+, ?\d+\])?\.json$")


# ------------------------------------------------------------------------------------- the MoE layer

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
        self.spec, self.kernel, self.current, self.location = first.spec, first.kernel, first.current, first.location
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


def moe_layer(preset: str, tokens: int, tp: int = 1, gpu: str = "h100", config: Config | None = None,
              location: Location | None = None, config_dir: str | None = None, gemms: Sequence[int] = (1, 2),
              calibrated: bool = True) -> Subject:
    parts = [MoESubject(preset, tokens, tp, g, gpu, config, location, config_dir, calibrated) for g in gemms]
    if len(parts) == 1:
        return parts[0]
    from kernels.moe_presets import get_preset

    return LayerSubject(parts, f"{get_preset(preset).name} TP{tp} M={tokens}")


# ------------------------------------------------------------------------------------------ targets

def engine_file_subjects(path: str | Path, preset: str | None = None, gpu: str | None = None,
                         calibrated: bool = True) -> list[Subject]:
    """One subject per M entry of a serving-engine fused-MoE config file."""
    from ceilings.hardware import get_spec
    from kernels.moe_configs import read_config_file
    from kernels.moe_presets import PRESETS, TP_SIZES, get_preset

    path = Path(path)
    m = _ENGINE_FILE.match(path.name)
    if not m:
        raise AdvisorError(f"{path.name} is not named like an engine fused-MoE config file "
                           "(E=<experts>,N=<intermediate per rank>,device_name=<GPU>.json)")
    if m.group(4) or m.group(5):
        raise AdvisorError(f"{path.name}: quantised fused-MoE configs ({(m.group(4) or m.group(5))[1:]}) are not "
                           "modelled; the advisor covers bf16/fp16 files")
    e, n, device = int(m.group(1)), int(m.group(2)), m.group(3)
    spec = get_spec(gpu or device)
    table = read_config_file(path)
    if preset:
        p = get_preset(preset)
        tps = [tp for tp in TP_SIZES if p.num_experts == e and p.intermediate % tp == 0 and p.intermediate // tp == n]
        if not tps:
            raise AdvisorError(f"{path.name}: preset {p.name} has no TP size with E={e} and N={n}")
        matches = [(p.name, tps[0])]
    else:
        matches = [(p.name, tp) for p in PRESETS.values() for tp in TP_SIZES
                   if p.num_experts == e and p.intermediate % tp == 0 and p.intermediate // tp == n]
        if not matches:
            raise AdvisorError(f"{path.name}: no model preset has E={e} experts and N={n} per rank; give --preset "
                               "(see `advisor presets`)")
        if len(matches) > 1:
            raise AdvisorError(f"{path.name}: E={e}, N={n} fits {', '.join(f'{a} TP{b}' for a, b in matches)}; "
                               "choose one with --preset")
    name, tp = matches[0]
    out = []
    for tokens, config in sorted(table.configs.items()):
        loc = Location(str(path), engine_key_line(path, tokens), f'entry "{tokens}"')
        out.append(moe_layer(name, tokens, tp, spec.name, config, loc, calibrated=calibrated))
    return out


def trace_subjects(path: str | Path, gpu: str | None = None, kernel_file: str | None = None,
                   kernel: str | None = None, calibrated: bool = True) -> list[Subject]:
    """One subject per distinct launch of a trace (or launch JSON); the space the kernel's file declares
    (autotune list, CONFIG_SPACE) or the neighbours of the recorded config."""
    from advisor.advice.search import LaunchSubject, declared_space
    from advisor.capture.trace import read_trace

    trace = read_trace(path)
    out = []
    for i, launch in enumerate(trace.launches):
        if kernel_file:
            launch = launch.with_source(str(Path(kernel_file).resolve()))
        if kernel and launch.kernel != kernel:
            continue
        shipped = shipped_shape_subject(launch, gpu or trace.gpu or "h100", calibrated)
        if shipped is not None:  # a launch of a shipped shape kernel: its exact demand and whole space
            out.append(shipped)
            continue
        declared = declared_space(launch.source, launch.kernel)
        space, loc = declared if declared else (None, None)
        count = trace.counts[i] if i < len(trace.counts) else 1
        subject = LaunchSubject(launch, gpu or trace.gpu or "h100", space=space, location=loc, calibrated=calibrated)
        if count > 1:
            subject.label += f" (x{count})"
        out.append(subject)
    if not out:
        raise AdvisorError(f"{path}: no launch of kernel {kernel!r}" if kernel else f"{path}: no launches in it")
    return out


def shipped_shape_subject(launch, gpu: str, calibrated: bool = True) -> Subject | None:
    """A traced launch of the shipped GEMM, softmax or attention kernel as their exact shape subject."""
    from advisor.advice.ceiling import is_shipped_shape_kernel
    from advisor.advice.search import ShapeSubject

    if not is_shipped_shape_kernel(launch.source):
        return None
    try:
        name = Path(launch.source).stem
        if name == "gemm" and launch.kernel == "gemm_kernel":
            shape = ",".join(str(launch.scalar(k)) for k in ("M", "N", "K"))
        elif name == "softmax" and launch.kernel == "softmax_kernel":
            shape = f"{launch.scalar('rows')},{launch.scalar('cols')}"
        elif name == "attention" and launch.kernel == "attention_kernel":
            shape = f"{launch.grid[1]},{launch.scalar('seq')},{launch.scalar('HEAD_DIM')}"
        else:
            return None
    except (KeyError, IndexError):
        return None
    import importlib

    space = importlib.import_module(f"kernels.{name}").CONFIG_SPACE
    knobs = {k: v for k, v in list(launch.config.params.items()) + list(launch.constexprs) if k in space}
    config = Config(knobs, launch.config.num_warps, launch.config.num_stages)
    return ShapeSubject(launch.source, shape, gpu, config, calibrated)


def subjects_for(target: str, *, preset: str | None = None, tp: int = 1, tokens: Sequence[int] | None = None,
                 shapes: Sequence[str] | None = None, trace: str | None = None, kernel: str | None = None,
                 gpu: str | None = None, config_dir: str | None = None, calibrated: bool = True) -> list[Subject]:
    from advisor.advice.ceiling import is_shipped_moe, is_shipped_shape_kernel
    from advisor.advice.search import ShapeSubject

    path = Path(target)
    if not path.exists():
        raise AdvisorError(f"{target} does not exist; give a kernel file, a launch trace or an engine config file")
    if trace:
        return trace_subjects(trace, gpu, str(path), kernel, calibrated)
    if path.suffix == ".json":
        if _ENGINE_FILE.match(path.name):
            return engine_file_subjects(path, preset, gpu, calibrated)
        return trace_subjects(path, gpu, None, kernel, calibrated)
    if path.suffix != ".py":
        raise AdvisorError(f"{target}: expected a .py kernel file or a .json trace / engine config file")
    if is_shipped_moe(path):
        if not preset:
            raise AdvisorError(f"{target}: give --preset (see `advisor presets`) and optionally --tp and --tokens")
        return [moe_layer(preset, m, tp, gpu or "h100", config_dir=config_dir, calibrated=calibrated)
                for m in (tokens or DEFAULT_TOKENS)]
    if is_shipped_shape_kernel(path):
        if not shapes:
            raise AdvisorError(f"{target}: give one or more --shape values (see `advisor ceiling --help`)")
        return [ShapeSubject(path, s, gpu or "h100", calibrated=calibrated) for s in shapes]
    from ceilings.compile import load_kernel

    load_kernel(path, kernel)  # a clear error for a broken file or a missing kernel
    raise AdvisorError(f"{target}: the advisor needs the launches' shapes; give --trace TRACE.json "
                       "(from `advisor record -- python prog.py`) or a launch JSON")


def advise(subjects: Sequence[Subject], top_k: int = 5, confirm: bool = True, measure: int = 0) -> list[Advice]:
    """Search each subject; a config measured fastest on the GPU stays unless the prediction beats it beyond
    the model's error (advisor.advice.measured)."""
    from advisor.advice.measured import weigh

    return [weigh(search(s, top_k, confirm, measure=measure)) for s in subjects]


# ------------------------------------------------------------------------------------------ apply

def _moe_parts(subject: Subject) -> list[MoESubject]:
    parts = subject.parts if isinstance(subject, LayerSubject) else [subject]
    return [p for p in parts if isinstance(p, MoESubject)]


def plan_apply(advices: Sequence[Advice], config_dir: str | Path | None = None, min_speedup: float = 1.0,
               force_gpu: bool = False) -> list:
    """The edits that write each advice's best config where the launch reads it (advisor.advice.apply.Edit list):
    fused-MoE launches into their engine config file (the file they were read from, else a new file in
    `config_dir`, by default the project's kernels/configs); autotuned kernels into their
    @triton.autotune list. Only advices that gain more than `min_speedup` are written. Advice for one GPU
    goes into an engine file named for another only with `force_gpu`."""
    from advisor.advice import apply
    from kernels.moe_configs import SHIPPED_DIR, config_file_name

    engine: dict[Path, dict[int, Config]] = {}
    advised_for: dict[Path, set[str]] = {}  # the GPUs whose advice goes into each engine file
    autotune: dict[tuple[Path, str], list[Config]] = {}
    for a in advices:
        s, loc = a.subject, a.subject.location
        parts = _moe_parts(s)
        wins = a.gains(min_speedup)
        if parts:
            # Every advised token count gets its entry (the current config where nothing gains), so adding
            # keys never moves another advised M to a different nearest key.
            moe = parts[0].moe
            if loc and loc.path.endswith(".json") and not config_dir:
                path = Path(loc.path)
            else:
                path = Path(config_dir or SHIPPED_DIR) / config_file_name(moe.num_experts, parts[0].file_n, s.spec.name)
            engine.setdefault(path, {})[moe.m] = a.best.config if wins else a.current.config
            advised_for.setdefault(path, set()).add(s.spec.name)
        elif not wins:
            continue
        elif loc and loc.what == "autotune configs":
            autotune.setdefault((Path(loc.path), s.kernel), []).append(a.best.config)
        else:
            where = f"{loc.path}:{loc.line}" if loc else s.label
            raise AdvisorError(f"{s.label}: its config is chosen by code ({where}), not read from a config file or an "
                               "autotune list; change it there by hand")
    for path, entries in engine.items():
        _check_file_gpu(path, entries, advised_for[path], force_gpu)
    edits = [apply.plan_engine_json(path, entries) for path, entries in engine.items()]
    edits += [apply.plan_autotune(path, kernel, list(dict.fromkeys(configs)), mode="add")
              for (path, kernel), configs in autotune.items()]
    return edits


def _check_file_gpu(path: Path, entries: dict[int, Config], advised_for: set[str], force_gpu: bool) -> None:
    """An engine file is read on the GPU its name gives: advice for another GPU goes in only when forced, and
    every config written into it must fit that GPU."""
    from ceilings.hardware import get_spec
    from kernels.fused_moe import resource_precheck

    m = _ENGINE_FILE.match(path.name)
    if not m:
        return
    spec = get_spec(m.group(3))
    others = sorted(advised_for - {spec.name})
    if others and not force_gpu:
        raise AdvisorError(f"{path.name} is read on {spec.name}, but the advice is for {', '.join(others)}; write it "
                           f"to that GPU's file (--config-dir DIR), advise for {spec.name} (--gpu), or pass "
                           "--force-gpu")
    for tokens, config in sorted(entries.items()):
        why = resource_precheck(config, spec.smem_per_block)
        if why:
            raise AdvisorError(f"{path.name}: {config.label()} for M={tokens} does not fit {spec.name}, the GPU the "
                               f"file is for ({why}); advise for that GPU (--gpu) instead")


def check_fit(advices: Sequence[Advice]) -> None:
    """Refuse configs that cannot run on the target GPU (the subject's analytic precheck)."""
    for a in advices:
        why = a.subject.precheck(a.best.config)
        if why:
            raise AdvisorError(f"{a.subject.label}: {a.best.config.label()} does not fit {a.subject.spec.name}: {why}")
