"""The fused-MoE layer as the serving engines run it: what the advisor knows beyond the kernel family.

The family (kernels/moe_family.py, found through the registry as "moe") gives the space, precheck,
exact demand and measurable case of one GEMM. What stays here is the engines' view of a layer:
- a model preset at a TP size and a token count names the GEMMs (kernels/moe_presets.py);
- the config a launch runs comes from the engines' JSON config files, `E=..,N=..,device_name=...json`
  (kernels/moe_configs.py), else the default rule; that file is where advice is written back;
- the engines use one config for both GEMMs of a layer, so a config is judged by GEMM1 + GEMM2.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from advisor.advice.search import Location, Subject
from advisor.advice.subjects import FamilySubject, LayerSubject, line_of
from ceilings.errors import AdvisorError
from ceilings.hardware import GPU
from ceilings.launch import Config
from ceilings.roofline import Ceiling, roofline
from kernels.family import Family, family_named, family_of_file

FAMILY_NAME = "moe"
ENGINE_FILE = re.compile(r"^E=(\d+),N=(\d+),device_name=([^,]+?)(,dtype=[^,]+)?(,block_shape=\[\d+, ?\d+\])?\.json$")


def family() -> Family:
    return family_named(FAMILY_NAME)


def is_layer_kernel(target: str | Path) -> bool:
    """Whether a kernel file is the fused-MoE kernel (its launches come from --preset and --tokens)."""
    return family_of_file(target) is family()


def gemm_spec(preset: str, tokens: int, tp: int = 1, gemm: int = 1):
    """(GEMM spec, model shape) of one GEMM of a preset's layer at a token count."""
    from kernels.moe_bench import MoEGemmSpec
    from kernels.moe_presets import get_preset

    if tokens < 1:
        raise AdvisorError(f"--tokens {tokens}: the token count must be at least 1")
    if gemm not in (1, 2):
        raise AdvisorError(f"--gemm {gemm}: the fused-MoE layer has GEMM 1 (w1) and GEMM 2 (w2)")
    shape = get_preset(preset).shape(tp)
    e, top_k, k, n = shape.gemm1() if gemm == 1 else shape.gemm2()
    return MoEGemmSpec(e, top_k, k, n, tokens, gemm=gemm, dtype=shape.dtype), shape


def engine_config(spec, gpu: GPU, config_dir: str | None = None) -> tuple[Config, Location]:
    """The config the engines run a GEMM with on this GPU, and where it is written."""
    from kernels.moe_configs import get_config

    config, where = get_config(spec.m, spec.num_experts, spec.engine_file_n, spec.top_k, gpu.name, config_dir)
    if where == "default rule":
        path, pattern = family().default_rule
        return config, Location(str(path), line_of(path, pattern), "the default rule")
    return config, Location(where, engine_key_line(where, spec.m), "tuned config file")


def gemm_subject(preset: str, tokens: int, tp: int = 1, gemm: int = 1, gpu: GPU | None = None,
                 config: Config | None = None, location: Location | None = None,
                 config_dir: str | None = None) -> FamilySubject:
    """One GEMM of a preset's layer: the family's subject, with the engines' config and its location."""
    from kernels.moe_presets import get_preset

    spec, _ = gemm_spec(preset, tokens, tp, gemm)
    if config is None:
        config, where = engine_config(spec, gpu, config_dir)
        location = location or where
    label = f"{get_preset(preset).name} TP{tp} GEMM{gemm} M={tokens}"
    return FamilySubject(family(), spec, gpu, config, label, location)


def layer(preset: str, tokens: int, tp: int = 1, gpu: GPU | None = None, config: Config | None = None,
          location: Location | None = None, config_dir: str | None = None, gemms: Sequence[int] = (1, 2)) -> Subject:
    """The layer's GEMMs at one token count, sharing one config (one GEMM alone when `gemms` has one)."""
    parts = [gemm_subject(preset, tokens, tp, g, gpu, config, location, config_dir) for g in gemms]
    if len(parts) == 1:
        return parts[0]
    from kernels.moe_presets import get_preset

    return LayerSubject(parts, f"{get_preset(preset).name} TP{tp} M={tokens}")


def gemm_ceiling(preset: str, tokens: int, tp: int = 1, gemm: int = 1, gpu: GPU | None = None,
                 config: Config | None = None, compile_kernel: bool = False) -> Ceiling:
    """The exact ceiling of one GEMM of a preset's layer for a config (default: the engines')."""
    from ceilings.compile import compile_launch
    from ceilings.validate import require_runnable

    fam = family()
    spec, _ = gemm_spec(preset, tokens, tp, gemm)
    config = config or engine_config(spec, gpu)[0]
    what = f"{fam.kernel} M={tokens}"
    require_runnable(config, gpu.spec, lambda c: fam.precheck(c, gpu.spec, spec), what)
    shared = registers = None
    if compile_kernel:
        compiled = compile_launch(fam.describe_launch(spec, config, gpu.arch), gpu.arch)
        shared, registers = compiled.shared_bytes, compiled.registers
    ceiling = roofline(fam.demand(spec, config, gpu.arch, shared, registers), gpu.rates, config.to_dict())
    require_runnable(config, gpu.spec, None, what, ceiling)
    return ceiling


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


def engine_file_subjects(path: str | Path, preset: str | None = None, gpu: GPU | None = None,
                         calibrated: bool = True, tokens: Sequence[int] | None = None) -> list[Subject]:
    """One layer per M entry of a serving-engine fused-MoE config file, on `gpu` or the GPU the file names
    (with `tokens`, the entries of those keys only)."""
    from ceilings.hardware import resolve_gpu
    from kernels.moe_configs import read_config_file
    from kernels.moe_presets import PRESETS, TP_SIZES, get_preset

    path = Path(path)
    m = ENGINE_FILE.match(path.name)
    if not m:
        raise AdvisorError(f"{path.name} is not named like an engine fused-MoE config file "
                           "(E=<experts>,N=<intermediate per rank>,device_name=<GPU>.json)")
    if m.group(4) or m.group(5):
        raise AdvisorError(f"{path.name}: quantised fused-MoE configs ({(m.group(4) or m.group(5))[1:]}) are not "
                           "modelled; the advisor covers bf16/fp16 files")
    e, n, device = int(m.group(1)), int(m.group(2)), m.group(3)
    gpu = gpu or resolve_gpu(device, calibrated)  # the file names the GPU it is for
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
    entries = sorted(table.configs.items())
    if tokens:
        missing = [m for m in tokens if m not in table.configs]
        if missing:
            raise AdvisorError(f"{path.name} has no entry for --tokens {','.join(map(str, missing))}; its entries "
                               f"are {','.join(str(m) for m, _ in entries)}")
        entries = [(m, c) for m, c in entries if m in tokens]
    out = []
    for m, config in entries:
        if m < 1:  # the engines look configs up for M >= 1 tokens; a layer of 0 tokens has no time
            raise AdvisorError(f'{path.name}: entry "{m}" is not a token count the engines look up (M >= 1); '
                               "remove that entry")
        loc = Location(str(path), engine_key_line(path, m), f'entry "{m}"')
        out.append(layer(name, m, tp, gpu, config, loc))
    return out


# ------------------------------------------------------------------------------------------ apply

def gemm_parts(subject: Subject) -> list[FamilySubject]:
    """The fused-MoE GEMMs a subject launches (none for other kernels)."""
    parts = subject.parts if isinstance(subject, LayerSubject) else [subject]
    return [p for p in parts if isinstance(p, FamilySubject) and p.family is family()]


def engine_entries(advices, config_dir: str | Path | None, min_speedup: float) -> dict[Path, dict[int, tuple]]:
    """The engine-file entries to write for the advices of fused-MoE launches, {file: {M: (config, GEMM
    spec, the GPU advised for)}}: the file each was read from, else a new file in `config_dir` (by default
    the project's kernels/configs). Every advised token count gets its entry (the current config where
    nothing gains), so adding keys never moves another advised M to a different nearest key."""
    from kernels.moe_configs import SHIPPED_DIR, config_file_name

    engine: dict[Path, dict[int, tuple]] = {}
    for a in advices:
        parts = gemm_parts(a.subject)
        if not parts:
            continue
        loc, spec = a.subject.location, parts[0].shape
        if loc and loc.path.endswith(".json") and not config_dir:
            path = Path(loc.path)
        else:
            path = Path(config_dir or SHIPPED_DIR) / config_file_name(spec.num_experts, spec.engine_file_n,
                                                                       a.subject.spec.name)
        config = a.best.config if a.gains(min_speedup) else a.current.config
        engine.setdefault(path, {})[spec.m] = (config, spec, a.subject.spec.name)
    return engine


def engine_edits(engine: dict[Path, dict[int, tuple]], force_gpu: bool = False) -> list:
    """The edits of `engine_entries`, after checking that every config fits the GPU its file is for (and,
    unless `force_gpu`, that the advice is for that GPU)."""
    from advisor.advice import apply

    for path, entries in engine.items():
        check_file_gpu(path, entries, force_gpu)
    return [apply.plan_engine_json(path, {m: config for m, (config, _, _) in entries.items()})
            for path, entries in engine.items()]


def check_file_gpu(path: Path, entries: dict[int, tuple], force_gpu: bool = False) -> None:
    """An engine file is read on the GPU its name gives: advice for another GPU goes in only when forced,
    and every config written into it must fit that GPU."""
    from ceilings.hardware import get_spec
    from ceilings.validate import config_problem

    m = ENGINE_FILE.match(path.name)
    if not m:
        return
    spec = get_spec(m.group(3))  # the file names the GPU it is for
    others = sorted({advised for _, _, advised in entries.values()} - {spec.name})
    if others and not force_gpu:
        raise AdvisorError(f"{path.name} is read on {spec.name}, but the advice is for {', '.join(others)}; write it "
                           f"to that GPU's file (--config-dir DIR), advise for {spec.name} (--gpu), or pass "
                           "--force-gpu")
    fam = family()
    for tokens, (config, gemm, _) in sorted(entries.items(), key=lambda item: item[0]):
        why = config_problem(config, spec, lambda c, g=gemm: fam.precheck(c, spec, g))
        if why:
            raise AdvisorError(f"{path.name}: {config.label()} for M={tokens} does not fit {spec.name}, the GPU the "
                               f"file is for ({why}); advise for that GPU (--gpu) instead")
