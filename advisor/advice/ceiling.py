"""`advisor ceiling`: the per-pipeline ceiling of a launch, for the shipped kernels or any kernel.

Targets:
- the shipped fused-MoE kernel file with a model preset and a token count (exact semantic model);
- a launch JSON file (`Launch.to_dict()`, one launch or a list) for any kernel (generic SASS path);
- any kernel file with `--launch FILE`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ceilings.errors import AdvisorError
from ceilings.hardware import rates_for
from ceilings.launch import Config, Launch
from ceilings.roofline import Ceiling, roofline
from ceilings.validate import require_runnable

_LABEL = re.compile(r"^M(\d+)\s+N(\d+)\s+K(\d+)\s+G(\d+)\s+w(\d+)\s+s(\d+)$")


def parse_config(text: str) -> Config:
    """A config from engine-entry JSON or a label like `M64 N128 K64 G8 w4 s3`."""
    text = text.strip()
    label = _LABEL.match(text)
    if label:
        bm, bn, bk, gm, w, s = (int(x) for x in label.groups())
        return Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": gm}, w, s)
    try:
        entry = json.loads(text)
    except json.JSONDecodeError:
        raise AdvisorError(f"--config {text!r} is neither JSON nor a label like 'M64 N128 K64 G8 w4 s3'") from None
    return Config.from_dict(entry, "--config")


def is_shipped_moe(target: str | Path) -> bool:
    from kernels import fused_moe

    return Path(target).resolve() == Path(fused_moe.__file__).resolve()


def moe_ceiling(preset: str, tokens: int, tp: int = 1, gemm: int = 1, gpu: str = "h100",
                config: Config | None = None, calibrated: bool = True, counts: list[int] | None = None,
                compile_kernel: bool = False) -> Ceiling:
    """The exact ceiling of the shipped fused-MoE GEMM for a preset, token count and config."""
    from ceilings.hardware import get_spec
    from kernels import fused_moe as fm
    from kernels.moe_bench import MoEGemmSpec, describe_launch
    from kernels.moe_configs import get_config
    from kernels.moe_demand import moe_gemm_demand
    from kernels.moe_presets import get_preset

    if tokens < 1:
        raise AdvisorError(f"--tokens {tokens}: the token count must be at least 1")
    if gemm not in (1, 2):
        raise AdvisorError(f"--gemm {gemm}: the fused-MoE layer has GEMM 1 (w1) and GEMM 2 (w2)")
    spec_gpu = get_spec(gpu)
    shape = get_preset(preset).shape(tp)
    e, top_k, k, n = shape.gemm1() if gemm == 1 else shape.gemm2()
    spec = MoEGemmSpec(e, top_k, k, n, tokens, gemm=gemm, dtype=shape.dtype)
    config = config or get_config(tokens, e, shape.config_file_n, top_k, spec_gpu.name)[0]
    what = f"fused_moe_kernel M={tokens}"
    require_runnable(config, spec_gpu, lambda c: fm.resource_precheck(c, spec_gpu.smem_per_block), what)
    shared = registers = None
    if compile_kernel:
        from ceilings.compile import compile_launch

        compiled = compile_launch(describe_launch(spec, config, spec_gpu.arch), spec_gpu.arch)
        shared, registers = compiled.shared_bytes, compiled.registers
    demand = moe_gemm_demand(spec, config, spec_gpu.arch, counts, shared, registers)
    ceiling = roofline(demand, rates_for(spec_gpu.name, use_calibration=calibrated), config.to_dict())
    require_runnable(config, spec_gpu, None, what, ceiling)
    return ceiling


def _shipped_shape_kernels() -> dict[Path, tuple]:
    """Shipped kernels whose launch is set by a shape: file -> (what the shape is, demand, default config)."""
    from kernels import attention, gemm, softmax

    return {Path(gemm.__file__).resolve(): ("M,N,K", gemm.gemm_demand, gemm.default_config),
            Path(softmax.__file__).resolve(): ("ROWS,COLS", softmax.softmax_demand, softmax.default_config),
            Path(attention.__file__).resolve(): ("BATCH_HEADS,SEQ,HEAD_DIM", attention.attention_demand,
                                                 attention.default_config)}


def is_shipped_shape_kernel(target: str | Path) -> bool:
    return Path(target).resolve() in _shipped_shape_kernels()


def parse_shape(shape: str, what: str) -> list[int]:
    """`--shape 4096,4096,4096` -> [4096, 4096, 4096], checked against `what` (e.g. "M,N,K")."""
    try:
        dims = [int(x) for x in shape.split(",")]
    except ValueError:
        dims = []
    if len(dims) != len(what.split(",")) or min(dims) < 1:
        raise AdvisorError(f"--shape {shape!r}: give {what} as {len(what.split(','))} positive integers")
    return dims


def shape_ceiling(target: str | Path, shape: str | None, gpu: str = "h100", config: Config | None = None,
                  calibrated: bool = True) -> Ceiling:
    """The exact ceiling of a shipped shape-driven kernel (GEMM: M,N,K; softmax: ROWS,COLS; attention
    forward, non-causal: BATCH_HEADS,SEQ,HEAD_DIM)."""
    from ceilings.hardware import get_spec

    what, demand_of, default = _shipped_shape_kernels()[Path(target).resolve()]
    if not shape:
        raise AdvisorError(f"{target}: give --shape {what} (e.g. --shape {','.join(['4096'] * len(what.split(',')))})")
    dims = parse_shape(shape, what)
    config = config or default(*dims)
    missing = [p for p in default(*dims).params if p not in config.params]
    if missing:
        raise AdvisorError(f"--config for {Path(target).name} needs {', '.join(missing)}")
    spec = get_spec(gpu)
    from advisor.advice.search import ShapeSubject

    what = f"{Path(target).name} --shape {shape}"
    require_runnable(config, spec, ShapeSubject(target, shape, spec.name, config, calibrated).precheck, what)
    demand = demand_of(*dims, config, "bfloat16", spec.arch)
    ceiling = roofline(demand, rates_for(spec.name, use_calibration=calibrated), config.to_dict())
    require_runnable(config, spec, None, what, ceiling)
    return ceiling


def launch_ceilings(path: str | Path, gpu: str = "h100", calibrated: bool = True, kernel_file: str | None = None,
                    kernel: str | None = None) -> list[Ceiling]:
    """Generic ceilings for the launches of a launch JSON file (an object or a list of them).

    `kernel_file` and `kernel` replace the launches' source and kernel name (a launch written for
    one kernel applied to another file's kernel with the same arguments).
    """
    from advisor.advice.search import _element_bytes, tile_precheck
    from advisor.capture.trace import read_trace
    from ceilings.compile import load_kernel
    from ceilings.demand import generic_demand
    from ceilings.hardware import get_spec

    # The one reader of launch files and traces (the same checks as `advisor suggest`); it resolves
    # relative sources against the file's folder.
    trace = read_trace(path)
    if not trace.launches:
        raise AdvisorError(f"{path}: no launches in it; give a launch object, a list of them, or a trace")
    spec = get_spec(gpu)
    rates = rates_for(spec.name, use_calibration=calibrated)
    out = []
    for i, launch in enumerate(trace.launches):
        if kernel_file:
            launch = launch.with_source(str(Path(kernel_file).resolve()))
        if kernel:
            launch = Launch(launch.source, kernel, launch.grid, launch.tensors, launch.scalars, launch.constexprs,
                            launch.config)
        load_kernel(launch.source, launch.kernel)  # a clear error for a missing, broken or kernel-less file
        what = f"{path}: launch {i} ({launch.kernel})"
        require_runnable(launch.config, spec, lambda c, ln=launch: tile_precheck(c, spec, _element_bytes(ln)), what)
        ceiling = roofline(generic_demand(launch, arch=spec.arch), rates, launch.config.to_dict())
        require_runnable(launch.config, spec, None, what, ceiling)
        out.append(ceiling)
    return out


def render_text(ceiling: Ceiling, title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, caption=_caption(ceiling))
    for col, justify in (("pipeline", "left"), ("us", "right"), ("of ceiling", "right"), ("", "left")):
        table.add_column(col, justify=justify, no_wrap=True)
    top = max((v for v in ceiling.pipelines.values() if v), default=1.0)
    for pipe, us in ceiling.pipelines.items():
        if us is None:
            table.add_row(pipe, "?", "", "unknown")
            continue
        share = us / ceiling.ceiling_us if ceiling.ceiling_us else 0.0
        bar = "█" * max(0, round(24 * us / top))
        mark = "  ◀ binding" if pipe == ceiling.binding else ""
        style = "bold" if pipe == ceiling.binding else None
        table.add_row(pipe, f"{us:.2f}", f"{share:.0%}", bar + mark, style=style)
    Console().print(table)


def _caption(c: Ceiling) -> str:
    calibrated = sorted({v for v in c.rates_source.values() if v not in ("spec",) and "assumed" not in v})
    rates = "calibrated (" + ", ".join(Path(v).name for v in calibrated) + ")" if calibrated else "spec sheet"
    return (f"ceiling {c.ceiling_us:.2f} us = {c.binding} + launch; {c.active_ctas} of {c.ctas} CTAs work, "
            f"{c.waves:.2f} waves at {c.ctas_per_sm} CTAs/SM; rates: {rates}; demand: {c.demand_source}")
