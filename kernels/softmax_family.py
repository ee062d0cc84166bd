"""The row softmax family (kernels/softmax.py, measured through kernels/softmax_bench.py), declared for the
advisor. A shape is a `SoftmaxSpec` (COLS wide, M rows); `--shape` is ROWS,COLS.
"""

from __future__ import annotations

from pathlib import Path

from ceilings.hardware import GPUSpec
from ceilings.launch import Config, Launch, expand_space
from kernels import family as fam
from kernels import softmax as sm
from kernels import softmax_bench as bench
from kernels.softmax_bench import SoftmaxSpec

# Default collect shapes: row widths, each at these row counts (at most 2^30 elements a case).
COLS = (128, 512, 2048, 4096, 8192, 32768)
ROWS = (256, 4096, 65536)


def read_shape(text: str) -> SoftmaxSpec:
    rows, cols = fam.read_dims(text, "ROWS,COLS")
    return SoftmaxSpec(cols, rows)


def read_launch(launch: Launch) -> tuple[SoftmaxSpec, Config] | None:
    try:
        spec = SoftmaxSpec(int(launch.scalar("cols")), int(launch.scalar("rows")))
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return spec, fam.launch_config(launch, sm.CONFIG_SPACE)


def demand(spec: SoftmaxSpec, config: Config, arch: int, shared: int | None = None, registers: int | None = None):
    """The exact model (no tensor work, no shared memory: the compiled facts change nothing here)."""
    return sm.softmax_demand(spec.m, spec.cols, config, spec.dtype, arch)


def precheck(config: Config, gpu: GPUSpec, spec: SoftmaxSpec) -> str | None:
    return bench.resource_precheck(config)


def read_row(row: dict, arch: int):
    config = fam.row_config(row)
    spec = SoftmaxSpec(int(row["shape"][len("COLS"):]), int(row["M"]))
    return spec, config, demand(spec, config, arch)


def plan(options: fam.CollectOptions) -> fam.CollectPlan:
    cols, rows = fam.ints(options.shapes, COLS, "--shapes"), fam.ints(options.ms, ROWS, "--ms")
    specs = [SoftmaxSpec(c, r) for c in cols for r in rows if c * r <= 1 << 30]
    defaults = [sm.default_config(s.m, s.cols) for s in specs]
    space = [c for c in expand_space(sm.CONFIG_SPACE) if bench.resource_precheck(c) is None]
    configs = list(dict.fromkeys(defaults + fam.sample_configs(space, options.sample, options.seed)))
    return fam.CollectPlan(specs, configs, bench.resource_precheck)


FAMILY = fam.Family(
    name="softmax", kernel="softmax_kernel", source=Path(sm.__file__).resolve(),
    description="row softmax, DRAM/XU bound (--shapes COLS, --ms rows)",
    space=lambda: expand_space(sm.CONFIG_SPACE), precheck=precheck, demand=demand,
    default_config=lambda spec: sm.default_config(spec.m, spec.cols),
    default_rule=(Path(sm.__file__).resolve(), r"^def default_config\("),
    reference=sm.softmax_reference, case=lambda spec: bench.SoftmaxCase(spec, seed=3000 + spec.m),
    compile_config=bench.compile_config, read_row=read_row, plan=plan,
    describe_launch=lambda spec, config, arch: sm.describe_launch(spec.m, spec.cols, config, spec.dtype),
    shape_form="ROWS,COLS", read_shape=read_shape, shape_text=lambda spec: f"{spec.m},{spec.cols}",
    read_launch=read_launch)
