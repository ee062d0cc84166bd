"""A kernel family: everything the advisor knows about one kernel, declared once, and the registry it
finds families through (the advisor never names a family).

A `Family` declares its @triton.jit kernel (name and file), config space, resource precheck, exact
demand model, float32 reference, measurable case, how to read a `--shape` text, a traced launch and a
sweep CSV row, its default config rule, the useful FLOPs when known, and the plan `advisor collect`
measures. A family's *shape* is its own object: the spec its sweeps measure (`kernels/*_bench.py`),
which has `m` (the CSV's M column), `gemm`, `shape_label` (the CSV's shape column) and
`compile_signature(config)`.

Registering: the shipped families are the modules of `SHIPPED`; `register(family)` adds one in this
process; the environment variable TRITON_ADVISOR_FAMILIES (module names or .py paths, comma-separated)
names modules whose `FAMILY` is registered on first use, for a command run in another process. Loading
a family module runs its code, as loading a kernel file does.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ceilings.errors import AdvisorError
from ceilings.hardware import GPUSpec
from ceilings.launch import Config, Launch
from ceilings.roofline import Demand

Shape = Any  # a family's own shape object (its sweep spec), see the module docstring

SHIPPED = ("kernels.moe_family", "kernels.gemm_family", "kernels.softmax_family", "kernels.attention_family")
FAMILIES_ENV = "TRITON_ADVISOR_FAMILIES"


@dataclass(frozen=True)
class CollectOptions:
    """The options of one `advisor collect` call, as typed (each family reads its own)."""

    shapes: str | None = None
    ms: str | None = None
    sample: int | None = None
    seed: int = 0
    gemms: str | None = None  # which GEMMs of a layer, for families with several


@dataclass(frozen=True)
class CollectPlan:
    """What `advisor collect` measures for a family: every spec x every config (after `prefilter`)."""

    specs: list
    configs: list[Config]
    prefilter: Callable[[Config], str | None] = lambda config: None


@dataclass(frozen=True)
class Family:
    name: str                                                     # `advisor collect NAME`
    kernel: str                                                   # the @triton.jit function
    source: Path                                                  # the file that defines it
    description: str                                              # one line for `advisor collect`
    space: Callable[[], list[Config]]                             # every config the advisor may suggest
    precheck: Callable[[Config, GPUSpec, Shape], str | None]      # why a config cannot run there, or None
    # Exact work of one launch on sm_`arch`; `shared` / `registers` from a compile, where the model uses them.
    demand: Callable[[Shape, Config, int, int | None, int | None], Demand]
    default_config: Callable[[Shape], Config]                     # the config the kernel takes untuned
    default_rule: tuple[Path, str]                                # (file, regex of the line) of that rule
    reference: Callable[..., Any]                                 # the float32 result the case checks against
    case: Callable[[Shape], Any]                                  # inputs on the GPU, reference, runner(config)
    compile_config: Callable[[Shape, Config], dict]               # top-level: sweep workers compile with it
    read_row: Callable[[dict, int], tuple[Shape, Config, Demand]]  # a sweep CSV row on sm_`arch`
    plan: Callable[[CollectOptions], CollectPlan]                 # `advisor collect NAME` with these options
    describe_launch: Callable[[Shape, Config, int], Launch] | None = None  # to compile a config for a GPU
    shape_form: str = ""                                          # what --shape holds ("M,N,K"); "" for none
    read_shape: Callable[[str], Shape] | None = None              # a --shape text (raises AdvisorError)
    shape_text: Callable[[Shape], str] | None = None              # the --shape text of a shape
    read_launch: Callable[[Launch], tuple[Shape, Config] | None] | None = None  # a traced launch
    useful_flops: Callable[[Shape], float] | None = None          # the work a launch must do, when known
    csv: str = ""                                                 # collect's CSV (default NAME_collect.csv)

    @property
    def csv_name(self) -> str:
        return self.csv or f"{self.name}_collect.csv"


# ----------------------------------------------------------------------------------------- registry

_REGISTERED: dict[str, Family] = {}
_LOADED = [False]


def register(family: Family) -> Family:
    """Add (or replace, by name) a family for this process."""
    _load()
    if not isinstance(family, Family):
        raise AdvisorError(f"{family!r} is not a kernels.family.Family declaration")
    _REGISTERED[family.name] = family
    return family


def unregister(name: str) -> None:
    _REGISTERED.pop(name, None)


def families() -> list[Family]:
    _load()
    return list(_REGISTERED.values())


def _load() -> None:
    if _LOADED[0]:
        return
    _LOADED[0] = True
    extra = [m.strip() for m in os.environ.get(FAMILIES_ENV, "").split(",") if m.strip()]
    for name in SHIPPED + tuple(extra):
        module = load_family_module(name)
        found = getattr(module, "FAMILY", None)
        if not isinstance(found, Family):
            raise AdvisorError(f"{FAMILIES_ENV}: {name} defines no FAMILY (a kernels.family.Family)")
        _REGISTERED.setdefault(found.name, found)


def load_family_module(name: str):
    """A module by dotted name, or by the path of its .py file."""
    if name.endswith(".py"):
        path = Path(name).resolve()
        if not path.is_file():
            raise AdvisorError(f"{FAMILIES_ENV}: {name} does not exist; give a module name or a .py file")
        key = f"advisor_family:{path}"  # collect's compile workers need a module name: use one for collect
        if key not in sys.modules:
            spec = importlib.util.spec_from_file_location(key, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[key] = module
            spec.loader.exec_module(module)
        return sys.modules[key]
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise AdvisorError(f"{FAMILIES_ENV}: cannot import {name} ({exc}); give a module name or a .py file") \
            from None


def family_named(name: str) -> Family:
    for family in families():
        if family.name == name:
            return family
    raise AdvisorError(f"unknown kernel family {name!r}; choose one of {', '.join(f.name for f in families())}")


def family_of_file(path: str | Path) -> Family | None:
    """The family whose kernel the file defines (the file itself, not a copy of it)."""
    target = Path(path).resolve()
    return next((f for f in families() if f.source.resolve() == target), None)


def family_of_launch(launch: Launch) -> Family | None:
    """The family of a traced launch: its kernel, in the family's own file."""
    target = Path(launch.source).resolve()
    return next((f for f in families() if f.kernel == launch.kernel and f.source.resolve() == target), None)


def family_of_row(row: dict) -> Family:
    """The family of a sweep CSV row, by its kernel column (a variant may follow in brackets: `k[tma]`)."""
    kernel = row["kernel"].split("[")[0]
    for family in families():
        if family.kernel == kernel:
            return family
    raise AdvisorError(f"sweep row of kernel {row['kernel']!r}: no kernel family declares it; register its family "
                       f"(kernels.family.register, or {FAMILIES_ENV})")


# ------------------------------------------------------------------------- helpers for declarations

def read_dims(text: str, form: str) -> list[int]:
    """`4096,4096,4096` -> [4096, 4096, 4096], checked against `form` (e.g. "M,N,K")."""
    try:
        dims = [int(x) for x in text.split(",")]
    except ValueError:
        dims = []
    if len(dims) != len(form.split(",")) or min(dims) < 1:
        raise AdvisorError(f"--shape {text!r}: give {form} as {len(form.split(','))} positive integers")
    return dims


def launch_config(launch: Launch, space: dict) -> Config:
    """The config of a traced launch: its parameters and constexprs that are knobs of `space`."""
    knobs = {k: v for k, v in list(launch.config.params.items()) + list(launch.constexprs) if k in space}
    return Config(knobs, launch.config.num_warps, launch.config.num_stages)


def row_config(row: dict) -> Config:
    """The config of a sweep row that keeps its parameters as JSON (the `params` column)."""
    return Config(json.loads(row["params"]), int(row["num_warps"]), int(row["num_stages"]))


def row_compiled(row: dict) -> tuple[int | None, int | None]:
    """(shared bytes, registers per thread) a sweep row recorded from the compiled kernel, where it did."""
    shared = int(row["shared"]) if row.get("shared") else None
    registers = int(row["n_regs"]) if row.get("n_regs") else None
    return shared, registers


def ints(text: str | None, default: Sequence[int], what: str) -> tuple[int, ...]:
    """A comma-separated option of positive integers, or `default` when not given."""
    if not text:
        return tuple(default)
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise AdvisorError(f"{what} {text!r} is not a comma-separated list of integers; e.g. 256,4096") from None
    if not values or min(values) <= 0:
        raise AdvisorError(f"{what} {text!r} must list positive integers")
    return values


def int_tuples(text: str | None, default, what: str, parts: int, example: str) -> tuple[tuple[int, ...], ...]:
    """A comma-separated option of `parts` positive integers joined by ':' (e.g. N:K), or `default`."""
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


def sample_configs(space: list[Config], sample: int | None, seed: int) -> list[Config]:
    """A seeded random sample of `space` (all of it when `sample` is None or larger)."""
    if sample is None or sample >= len(space):
        return space
    return random.Random(seed).sample(space, sample)
