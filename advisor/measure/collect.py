"""`advisor collect`: measure (kernel family x shape x config) on this GPU into a resumable CSV.

Each family's plan names its shapes, the token / row counts and the configs (a seeded random sample of
the feasible space plus the family's default rule). Every point is checked against a float32 reference
before it is timed with the standard timing (advisor.measure.sweep.STANDARD_TIMING); rows carry the compiled
kernel's registers, spills and shared bytes, the routing of MoE cases and the config's parameters, so
`advisor train` can rebuild every feature of the ceiling from them. Runs stop at --deadline and resume
from the CSV, so a dataset is collected in calls of a few minutes.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from advisor.measure.sweep import SweepPlan, run_sweep
from ceilings.errors import AdvisorError
from ceilings.launch import Config, expand_space

HOPPER_MAX_SHARED = 227 * 1024  # bytes per block on sm_90 (ANCHORS section 4)

# Default shapes per family: LLM layer shapes plus square and skinny ones.
GEMM_SHAPES = ((4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096), (1024, 8192), (512, 2048), (8192, 1024),
               (2048, 16384))
GEMM_MS = (16, 64, 256, 1024, 4096, 16384)
SOFTMAX_COLS = (128, 512, 2048, 4096, 8192, 32768)
SOFTMAX_ROWS = (256, 4096, 65536)
ATTENTION_SEQS = (256, 1024, 2048, 4096, 8192)
ATTENTION_DIMS = (64, 128)
MOE_CASES = (("mixtral-8x7b", 2), ("qwen2-57b-a14b", 2), ("qwen3-30b-a3b", 4))
MOE_MS = (1, 16, 64, 256, 1024, 4096)


def _ints(text: str | None, default: Sequence[int], what: str) -> tuple[int, ...]:
    if not text:
        return tuple(default)
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise AdvisorError(f"{what} {text!r} is not a comma-separated list of integers; e.g. 256,4096") from None
    if not values or min(values) <= 0:
        raise AdvisorError(f"{what} {text!r} must list positive integers")
    return values


def _tuples(text: str | None, default, what: str, parts: int, example: str) -> tuple[tuple[int, ...], ...]:
    if not text:
        return tuple(default)
    out = []
    for item in text.split(","):
        try:
            values = tuple(int(v) for v in item.split(":"))
        except ValueError:
            values = ()
        if len(values) != parts or min(values) <= 0:
            raise AdvisorError(f"{what} item {item!r} is not {parts} positive integers joined by ':'; e.g. {example}")
        out.append(values)
    return tuple(out)


def _sample(space: list[Config], sample: int | None, seed: int) -> list[Config]:
    if sample is None or sample >= len(space):
        return space
    return random.Random(seed).sample(space, sample)


def gemm_space(max_shared: int = HOPPER_MAX_SHARED) -> list[Config]:
    from kernels import gemm as g
    from kernels.gemm_bench import resource_precheck

    return [c for c in expand_space(g.CONFIG_SPACE) if resource_precheck(c, max_shared) is None]


def gemm_plan(shapes=GEMM_SHAPES, ms=GEMM_MS, sample: int | None = 40, seed: int = 0) -> SweepPlan:
    from kernels import gemm as g
    from kernels.gemm_bench import GemmCase, GemmSpec, compile_config, resource_precheck

    specs = [GemmSpec(n, k, m) for n, k in shapes for m in ms]
    defaults = [g.default_config(s.m, s.n, s.k) for s in specs]
    configs = list(dict.fromkeys(defaults + _sample(gemm_space(), sample, seed)))
    return SweepPlan(kernel="gemm_kernel", specs=specs, configs=configs,
                     make_case=lambda spec: GemmCase(spec, seed=2000 + spec.m), compile_fn=compile_config,
                     prefilter=lambda c: resource_precheck(c, HOPPER_MAX_SHARED), abort_ratio=1.5)


def softmax_space() -> list[Config]:
    from kernels import softmax as sm
    from kernels.softmax_bench import resource_precheck

    return [c for c in expand_space(sm.CONFIG_SPACE) if resource_precheck(c) is None]


def softmax_plan(cols=SOFTMAX_COLS, rows=SOFTMAX_ROWS, sample: int | None = None, seed: int = 0) -> SweepPlan:
    from kernels import softmax as sm
    from kernels.softmax_bench import SoftmaxCase, SoftmaxSpec, compile_config, resource_precheck

    specs = [SoftmaxSpec(c, r) for c in cols for r in rows if c * r <= 1 << 30]
    defaults = [sm.default_config(s.m, s.cols) for s in specs]
    return SweepPlan(kernel="softmax_kernel", specs=specs,
                     configs=list(dict.fromkeys(defaults + _sample(softmax_space(), sample, seed))),
                     make_case=lambda spec: SoftmaxCase(spec, seed=3000 + spec.m), compile_fn=compile_config,
                     prefilter=resource_precheck, abort_ratio=1.5)


def attention_cases(seqs=ATTENTION_SEQS, dims=ATTENTION_DIMS) -> tuple[tuple[int, int, int], ...]:
    """(seq, head_dim, batch x heads), batch x heads chosen so each case does about the same work."""
    return tuple((seq, dim, max(1, (1 << 24) // (seq * seq) * 8)) for seq in seqs for dim in dims)


def attention_space() -> list[Config]:
    from kernels import attention as at

    return expand_space(at.CONFIG_SPACE)


def attention_plan(cases=None, sample: int | None = None, seed: int = 0) -> SweepPlan:
    from kernels import attention as at
    from kernels.attention_bench import AttentionCase, AttentionSpec, compile_config, resource_precheck

    specs = [AttentionSpec(seq, dim, bh) for seq, dim, bh in (cases or attention_cases())]
    defaults = [at.default_config(s.m, s.seq, s.head_dim) for s in specs]
    return SweepPlan(kernel="attention_kernel", specs=specs,
                     configs=list(dict.fromkeys(defaults + _sample(attention_space(), sample, seed))),
                     make_case=lambda spec: AttentionCase(spec, seed=4000 + spec.seq), compile_fn=compile_config,
                     prefilter=resource_precheck, abort_ratio=1.5)


def moe_specs(cases=MOE_CASES, ms=MOE_MS, gemms=(1,), b_tma: bool | None = None):
    from kernels.moe_bench import MoEGemmSpec
    from kernels.moe_presets import get_preset

    specs = []
    for name, tp in cases:
        shape = get_preset(name).shape(tp)
        for gemm in gemms:
            e, top_k, k, n = shape.gemm1() if gemm == 1 else shape.gemm2()
            specs += [MoEGemmSpec(e, top_k, k, n, m, gemm=gemm, b_tma=b_tma) for m in ms]
    return specs


def parse_moe_cases(text: str | None) -> tuple[tuple[str, int], ...]:
    """`preset:tp,preset:tp` -> ((preset, tp), ...); checked against the preset list."""
    from kernels.moe_presets import get_preset

    if not text:
        return MOE_CASES
    out = []
    for item in text.split(","):
        name, _, tp = item.strip().partition(":")
        if tp and not tp.isdigit():
            raise AdvisorError(f"--cases item {item!r}: the TP size after ':' must be an integer; e.g. mixtral-8x7b:2")
        get_preset(name)  # raises AdvisorError naming the known presets
        out.append((name, int(tp or 1)))
    return tuple(out)


@dataclass(frozen=True)
class Family:
    name: str
    csv: str
    what: str


FAMILIES = {
    "moe": Family("moe", "moe_collect.csv", "shipped fused-MoE GEMM1/GEMM2 (--cases preset:tp, --gemms, --ms)"),
    "gemm": Family("gemm", "gemm_collect.csv", "shipped dense GEMM (--shapes N:K, --ms)"),
    "softmax": Family("softmax", "softmax_collect.csv", "row softmax, DRAM/XU bound (--shapes COLS, --ms rows)"),
    "attention": Family("attention", "attention_collect.csv",
                        "attention forward, tensor + XU (--shapes SEQ:HEAD_DIM[:BATCH_HEADS])"),
}


def build_plan(family: str, shapes: str | None = None, ms: str | None = None, sample: int | None = None,
               seed: int = 0, gemms: str | None = None) -> SweepPlan:
    """The plan of one `advisor collect` call; bad options raise AdvisorError with the fix."""
    if family not in FAMILIES:
        raise AdvisorError(f"unknown kernel family {family!r}; choose one of {', '.join(FAMILIES)}")
    if sample is not None and sample <= 0:
        raise AdvisorError(f"--sample {sample} must be positive")
    if family == "gemm":
        return gemm_plan(_tuples(shapes, GEMM_SHAPES, "--shapes", 2, "4096:4096,11008:4096"),
                         _ints(ms, GEMM_MS, "--ms"), 40 if sample is None else sample, seed)
    if family == "softmax":
        return softmax_plan(_ints(shapes, SOFTMAX_COLS, "--shapes"), _ints(ms, SOFTMAX_ROWS, "--ms"), sample, seed)
    if family == "attention":
        if shapes:
            cases = []
            for item in shapes.split(","):
                parts = _tuples(item, (), "--shapes", item.count(":") + 1, "1024:128:64")[0]
                if len(parts) not in (2, 3):
                    raise AdvisorError(f"--shapes item {item!r} is SEQ:HEAD_DIM[:BATCH_HEADS]; e.g. 1024:128:64")
                cases.append(parts if len(parts) == 3 else attention_cases((parts[0],), (parts[1],))[0])
            return attention_plan(tuple(cases), sample, seed)
        return attention_plan(None, sample, seed)
    from advisor.measure import moe_tune as tune
    from kernels import fused_moe as fm

    specs = moe_specs(parse_moe_cases(shapes), _ints(ms, MOE_MS, "--ms"), _ints(gemms, (1,), "--gemms"))
    bad = [g for g in {s.gemm for s in specs} if g not in (1, 2)]
    if bad:
        raise AdvisorError(f"--gemms {gemms!r}: a fused-MoE layer has GEMM 1 and GEMM 2 only")
    configs = tune.sample_configs(sample or 64, seed, specs, HOPPER_MAX_SHARED)
    return SweepPlan(kernel=tune.KERNEL, specs=specs, configs=configs, make_case=tune.make_case,
                     compile_fn=tune.compile_config,
                     prefilter=lambda c: fm.resource_precheck(c, HOPPER_MAX_SHARED), abort_ratio=1.5)


def collect(family: str, out: str | Path, *, shapes: str | None = None, ms: str | None = None,
            sample: int | None = None, seed: int = 0, gemms: str | None = None, deadline_s: float | None = None,
            workers: int | None = None, show_progress: bool = False) -> dict:
    """Run (or resume) one family's collection into OUT/<family>_collect.csv; returns the sweep summary."""
    plan = build_plan(family, shapes, ms, sample, seed, gemms)
    import torch

    if not torch.cuda.is_available():
        raise AdvisorError("advisor collect measures on a GPU and none is visible here; run it on a CUDA machine")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / FAMILIES[family].csv
    summary = run_sweep(plan, path, workers=workers, deadline_s=deadline_s, show_progress=show_progress)
    features = None
    try:  # the feature row of every fully timed point, as the model sees it (rebuilt from the CSV at any time)
        from advisor.model.dataset import load_sweeps

        features = str(load_sweeps([path]).write_features(path.with_suffix(".features.csv")))
    except AdvisorError:  # nothing fully timed yet (a deadline hit early)
        pass
    return dict(summary, csv=str(path), features=features, configs=len(plan.configs), cases=len(plan.specs))
