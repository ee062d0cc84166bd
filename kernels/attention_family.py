"""The attention-forward family (kernels/attention.py, measured through kernels/attention_bench.py), declared
for the advisor. A shape is an `AttentionSpec` (SEQ, HEAD_DIM at M = batch x heads), non-causal; `--shape`
is BATCH_HEADS,SEQ,HEAD_DIM.
"""

from __future__ import annotations

from pathlib import Path

from ceilings.errors import AdvisorError
from ceilings.hardware import GPUSpec
from ceilings.launch import Config, Launch, expand_space
from kernels import attention as at
from kernels import attention_bench as bench
from kernels import family as fam
from kernels.attention_bench import AttentionSpec

# Default collect shapes: sequence lengths x head sizes.
SEQS = (256, 1024, 2048, 4096, 8192)
DIMS = (64, 128)


def read_shape(text: str) -> AttentionSpec:
    bh, seq, dim = fam.read_dims(text, "BATCH_HEADS,SEQ,HEAD_DIM")
    return AttentionSpec(seq, dim, bh)


def read_launch(launch: Launch) -> tuple[AttentionSpec, Config] | None:
    try:
        spec = AttentionSpec(int(launch.scalar("seq")), int(launch.scalar("HEAD_DIM")), int(launch.grid[1]))
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return spec, fam.launch_config(launch, at.CONFIG_SPACE)


def demand(spec: AttentionSpec, config: Config, arch: int, shared: int | None = None,
           registers: int | None = None):
    """The exact non-causal model (the compiled facts change nothing here)."""
    return at.attention_demand(spec.m, spec.seq, spec.head_dim, config, spec.dtype, arch)


def precheck(config: Config, gpu: GPUSpec, spec: AttentionSpec) -> str | None:
    return bench.resource_precheck(config, spec.head_dim)


def read_row(row: dict, arch: int):
    seq, dim = (int(part.lstrip("SEQD")) for part in row["shape"].split("_"))
    config = fam.row_config(row)
    spec = AttentionSpec(seq, dim, int(row["M"]))
    return spec, config, demand(spec, config, arch)


def cases(seqs=SEQS, dims=DIMS) -> tuple[tuple[int, int, int], ...]:
    """(seq, head_dim, batch x heads), batch x heads chosen so each case does about the same work."""
    return tuple((seq, dim, max(1, (1 << 24) // (seq * seq) * 8)) for seq in seqs for dim in dims)


def plan(options: fam.CollectOptions) -> fam.CollectPlan:
    chosen = []
    for item in options.shapes.split(",") if options.shapes else ():
        parts = fam.int_tuples(item, (), "--shapes", item.count(":") + 1, "1024:128:64")[0]
        if len(parts) not in (2, 3):
            raise AdvisorError(f"--shapes item {item!r} is SEQ:HEAD_DIM[:BATCH_HEADS]; e.g. 1024:128:64")
        chosen.append(parts if len(parts) == 3 else cases((parts[0],), (parts[1],))[0])
    specs = [AttentionSpec(seq, dim, bh) for seq, dim, bh in (chosen or cases())]
    defaults = [at.default_config(s.m, s.seq, s.head_dim) for s in specs]
    configs = list(dict.fromkeys(defaults + fam.sample_configs(expand_space(at.CONFIG_SPACE), options.sample,
                                                               options.seed)))
    return fam.CollectPlan(specs, configs, bench.resource_precheck)


FAMILY = fam.Family(
    name="attention", kernel="attention_kernel", source=Path(at.__file__).resolve(),
    description="attention forward, tensor + XU (--shapes SEQ:HEAD_DIM[:BATCH_HEADS])",
    space=lambda: expand_space(at.CONFIG_SPACE), precheck=precheck, demand=demand,
    default_config=lambda spec: at.default_config(spec.m, spec.seq, spec.head_dim),
    default_rule=(Path(at.__file__).resolve(), r"^def default_config\("),
    reference=at.attention_reference, case=lambda spec: bench.AttentionCase(spec, seed=4000 + spec.seq),
    compile_config=bench.compile_config, read_row=read_row, plan=plan,
    describe_launch=lambda spec, config, arch: at.describe_launch(spec.m, spec.seq, spec.head_dim, config, False,
                                                                  spec.dtype),
    shape_form="BATCH_HEADS,SEQ,HEAD_DIM", read_shape=read_shape,
    shape_text=lambda spec: f"{spec.m},{spec.seq},{spec.head_dim}", read_launch=read_launch)
