"""`advisor ceiling`: the per-pipeline ceiling of a launch, for a kernel family or any kernel.

Targets:
- the kernel file of a registered kernel family with a `--shape` the family reads (its exact model);
  the fused-MoE kernel with a model preset and a token count instead (advisor.advice.moe);
- a launch JSON file (`Launch.to_dict()`, one launch or a list) for any kernel (generic SASS path);
- any kernel file with `--launch FILE`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from advisor.advice.compile_pool import compile_ahead
from ceilings.errors import AdvisorError
from ceilings.hardware import GPU
from ceilings.launch import Config, Launch
from ceilings.roofline import Ceiling, roofline
from ceilings.validate import require_runnable
from kernels.family import Family


def parse_config(text: str, family: Family | None = None) -> Config:
    """A config from JSON (engine entry or `Config.to_dict()`) or a label as `Config.label()` writes it
    (`M64 N128 K64 G8 w4 s3`, `N2048 ROWS_PER_PROGRAM=2 w8 s1`), the label's short names read as the
    parameters of `family`'s space."""
    text = text.strip()
    label = _from_label(text, family)
    if label is not None:
        return label
    try:
        entry = json.loads(text)
    except json.JSONDecodeError:
        raise AdvisorError(f"--config {text!r} is neither JSON nor a label like 'M64 N128 K64 G8 w4 s3'") from None
    return Config.from_dict(entry, "--config")


# Config.label()'s short names; a label read without a kernel family keeps them until `fit_config` names them.
_SHORT = ("M", "N", "K", "G")


def _from_label(text: str, family: Family | None) -> Config | None:
    if not re.fullmatch(r"(\S+\s+)*w\d+\s+s\d+", text):
        return None
    if family is None:
        return _generic_label(text)
    names = list(dict.fromkeys(p for c in family.space()[:1] for p in c.params))
    prefix = _label_prefixes(names)
    *parts, warps, stages = text.split()
    params = {}
    for part in parts:
        m = re.fullmatch(r"([A-Za-z_]+=?)(\d+)", part)
        if not m or m.group(1) not in prefix:
            return None
        params[prefix[m.group(1)]] = int(m.group(2))
    if set(params) != set(names):  # a label names every parameter of the kernel
        return None
    return Config(params, int(warps[1:]), int(stages[1:]))


def _label_prefixes(names) -> dict[str, str]:
    """Each parameter's label prefix, from Config.label itself: "M" for BLOCK_SIZE_M, "ROWS_PER_PROGRAM=" ..."""
    return {Config({name: 0}).label().split()[0][:-1]: name for name in names}


def _generic_label(text: str) -> Config | None:
    """A label as `Config.label()` writes it for any kernel: `NAME=value` parts (ints, floats, True/False) and
    the short M/N/K/G tile names, kept as such for `fit_config`; None where a part is neither."""
    *parts, warps, stages = text.split()
    params: dict = {}
    for part in parts:
        named = re.fullmatch(r"([A-Za-z_]\w*)=(\S+)", part)
        short = re.fullmatch(r"([MNKG])(\d+)", part)
        if named:
            params[named.group(1)] = _label_value(named.group(2))
        elif short:
            params[short.group(1)] = int(short.group(2))
        else:
            return None
    return Config(params, int(warps[1:]), int(stages[1:]))


def _label_value(text: str):
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def fit_config(config: Config, current: Config, kernel: str, given: str | None = None) -> Config:
    """`config` (from --config) in the names of a kernel whose current config is `current`: a label's short
    M/N/K/G name becomes the parameter it stands for there (BLOCK_M or BLOCK_SIZE_M), and every parameter must
    be one of the kernel's; one the config leaves out keeps the current value."""
    short = _label_prefixes(current.params)
    params = {}
    for name, value in config.params.items():
        real = name if name in current.params or name not in _SHORT else short.get(name, name)
        if real not in current.params:
            known = " ".join(f"{n}={v}" for n, v in current.params.items()) or "none"
            raise AdvisorError(f"--config {given or config.label()!r}: {kernel} has no parameter {name} (its "
                               f"parameters, at their current values: {known})")
        params[real] = value
    return Config({name: params.get(name, value) for name, value in current.params.items()},
                  config.num_warps, config.num_stages)


def family_ceiling(target: str | Path, shape: str | None, gpu: GPU, config: Config | None = None,
                   compile_kernel: bool = False) -> Ceiling:
    """The exact ceiling of a registered family's kernel file at a `--shape` text, for a config (default:
    the family's default rule)."""
    from kernels.family import family_of_file

    family = family_of_file(target)
    if family is None or family.read_shape is None:
        raise AdvisorError(f"{target}: no kernel family that reads --shape declares this file")
    if not shape:
        example = ",".join(["4096"] * len(family.shape_form.split(",")))
        raise AdvisorError(f"{target}: give --shape {family.shape_form} (e.g. --shape {example})")
    dims = family.read_shape(shape)
    default = family.default_config(dims)
    config = config or default
    missing = [p for p in default.params if p not in config.params]
    if missing:
        raise AdvisorError(f"--config for {Path(target).name} needs {', '.join(missing)}")
    what = f"{Path(target).name} --shape {shape}"
    require_runnable(config, gpu.spec, lambda c: family.precheck(c, gpu.spec, dims), what)
    shared = registers = None
    if compile_kernel and family.describe_launch is not None:
        from ceilings.compile import compile_launch

        compiled = compile_launch(family.describe_launch(dims, config, gpu.arch), gpu.arch)
        shared, registers = compiled.shared_bytes, compiled.registers
    ceiling = roofline(family.demand(dims, config, gpu.arch, shared, registers), gpu.rates, config.to_dict())
    require_runnable(config, gpu.spec, None, what, ceiling)
    return ceiling


def launch_ceilings(path: str | Path, gpu: GPU, kernel_file: str | None = None,
                    kernel: str | None = None) -> list[Ceiling]:
    """Generic ceilings for the launches of a launch JSON file (an object or a list of them, or a trace).

    `kernel_file` and `kernel` replace the launches' source and kernel name (a launch written for
    one kernel applied to another file's kernel with the same arguments).
    """
    from advisor.capture.trace import read_trace

    # The one reader of launch files and traces (the same checks as `advisor suggest`); it resolves
    # relative sources against the file's folder.
    trace = read_trace(path)
    if not trace.launches:
        raise AdvisorError(f"{path}: no launches in it; give a launch object, a list of them, or a trace")
    launches = []
    for launch in trace.launches:
        if kernel_file:
            launch = launch.with_source(str(Path(kernel_file).resolve()))
        if kernel:
            launch = Launch(launch.source, kernel, launch.grid, launch.tensors, launch.scalars, launch.constexprs,
                            launch.config)
        launches.append(launch)
    compile_ahead(launches, gpu.arch)  # in parallel, and told to a progress display (compile_pool.reporting)
    return [_generic_ceiling(launch, gpu, f"{path}: launch {i} ({launch.kernel})") for i, launch in enumerate(launches)]


def _generic_ceiling(launch: Launch, gpu: GPU, what: str) -> Ceiling:
    """The generic ceiling of one launch, refused (exit 2) when its config cannot run on the GPU."""
    from advisor.advice.operands import operand_element_bytes
    from advisor.advice.subjects import tile_precheck
    from ceilings.compile import load_kernel
    from ceilings.demand import generic_demand

    fn = load_kernel(launch.source, launch.kernel)  # a clear error for a missing, broken or kernel-less file
    operand_bytes = operand_element_bytes(launch, fn)
    require_runnable(launch.config, gpu.spec, lambda c: tile_precheck(c, gpu.spec, operand_bytes), what)
    ceiling = roofline(generic_demand(launch, arch=gpu.arch), gpu.rates, launch.config.to_dict())
    require_runnable(launch.config, gpu.spec, None, what, ceiling)
    return ceiling


def call_ceilings(path: str | Path, call: str, gpu: GPU, kernel: str | None = None) -> list[Ceiling]:
    """The ceiling of each launch a call of the kernel file's host code makes (captured without a GPU,
    advisor.capture.call). An autotuned launch is shown with the first of its configs, as its note says."""
    import dataclasses

    from advisor.advice.stores import stored_outputs
    from advisor.capture.call import capture_call_with_data
    from advisor.capture.trace import autotune_groups, select_launches

    trace, _ = capture_call_with_data(path, call, gpu.spec.name, written=stored_outputs)
    groups = {g[0]: len(g) for g in autotune_groups(trace)}
    alternatives = {j for g in autotune_groups(trace) for j in g[1:]}
    shown = select_launches(trace.launches, kernel, alternatives)
    compile_ahead([trace.launches[i] for i in shown], gpu.arch)  # in parallel, told to a progress display
    out = []
    for i in shown:
        launch = trace.launches[i]
        c = _generic_ceiling(launch, gpu, f"--call {call!r}: launch {i} ({launch.kernel})")
        if i in groups:
            c = dataclasses.replace(c, notes=[*c.notes, f"autotuned: the first of its {groups[i]} configs; on a GPU "
                                              "the autotuner picks one by timing (`advisor suggest` ranks them and "
                                              "shows the expected pick)"])
        out.append(c)
    if not out:
        raise AdvisorError(f"--call {call!r} launched no kernel {kernel!r}; launched: {', '.join(trace.kernels)}")
    return out


# Pipelines whose time is shown but is no roof: the ceiling is the max over the others (plus the launch
# floor), so such a time can exceed the ceiling while another pipeline binds. L2 is one because its rate is
# a probe's reach, not the hardware's limit (ceilings.roofline). A share "of ceiling" would read 209% next
# to a binding pipeline at 100%, so its share column says what it is instead, and its bar is drawn on the
# same scale as the roofs, cut at the bar's width.
NOT_A_ROOF = ("l2",)
_BAR = 24


def render_text(ceiling: Ceiling, title: str, prediction: str | None = None, more_caveats=(), console=None) -> None:
    """The ceiling as a table, then `prediction` (a line of `advisor predict`) and every caveat the
    numbers rest on (the ceiling's notes and `more_caveats`), one per line under the table."""
    from rich.console import Console
    from rich.table import Table

    from advisor.advice.report import print_caveats

    console = console or Console()
    table = Table(title=title, caption=_caption(ceiling))
    for col, justify in (("pipeline", "left"), ("us", "right"), ("of ceiling", "right"), ("", "left")):
        table.add_column(col, justify=justify, no_wrap=True)
    roofs = [v for k, v in ceiling.pipelines.items() if v and k not in NOT_A_ROOF]
    top = max(roofs, default=1.0)
    for pipe, us in ceiling.pipelines.items():
        if us is None:
            table.add_row(pipe, "?", "", "unknown")
            continue
        bar = "█" * min(_BAR, max(0, round(_BAR * us / top)))
        if pipe in NOT_A_ROOF:
            over = "▶" if us > top else ""
            table.add_row(pipe, f"{us:.2f}", "not a roof", bar + over + "  overlaps", style="dim")
            continue
        share = us / ceiling.ceiling_us if ceiling.ceiling_us else 0.0
        mark = "  ◀ binding" if pipe == ceiling.binding else ""
        style = "bold" if pipe == ceiling.binding else None
        table.add_row(pipe, f"{us:.2f}", f"{share:.0%}", bar + mark, style=style)
    console.print(table)
    if prediction:
        console.print(prediction, highlight=False, markup=False)
    caveats = list(dict.fromkeys([*ceiling.notes, *more_caveats]))
    if caveats:
        console.print("caveats:", highlight=False, markup=False)
        print_caveats(console, caveats, limit=len(caveats))


def _caption(c: Ceiling) -> str:
    calibrated = sorted({v for v in c.rates_source.values() if v not in ("spec",) and "assumed" not in v})
    rates = "calibrated (" + ", ".join(Path(v).name for v in calibrated) + ")" if calibrated else "spec sheet"
    return (f"ceiling {c.ceiling_us:.2f} us = {c.binding} + launch; {c.active_ctas} of {c.ctas} CTAs work, "
            f"{c.waves:.2f} waves at {c.ctas_per_sm} CTAs/SM; rates: {rates}; demand: {c.demand_source}")
