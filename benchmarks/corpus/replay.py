"""A recorded launch back into a runnable call: its kernel, its config variants, its arguments.

Reads a trace written by `advisor record` and the extras `capture_extras` wrote beside it. The kernel
is imported from the module that defined it (the library's own import, so its relative imports and
globals hold); a kernel file that is no importable module (FlagGems writes some kernels to a code
cache) is executed from its path. Floating tensors get fresh random normal values, integer and boolean
tensors the values recorded for them (<= 64 KiB), else zeros (a random integer could index out of
bounds).
"""

from __future__ import annotations

import hashlib
import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from capture_extras import trace_key

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
LIBRARIES = ("liger", "flaggems", "fla", "gemlite")
# Libraries measured only to test on: no choice (counting rule, floor, model, margin) was made on them, and no
# script fits on their rows. Their timings and ceilings live in files of their own (check_points.HELD_OUT_MODE).
HELD_OUT = ("torchao",)
NON_CONFIG = ("num_warps", "num_stages")


@dataclass
class Variant:
    """One config of a launch: its meta-parameters, launch options, grid and the other constexprs."""

    config: dict                      # meta-parameters, then num_warps and num_stages
    grid: list[int]
    constexprs: dict
    recorded: bool = False
    extra: dict = field(default_factory=dict)  # num_ctas / maxnreg where a config sets them

    @property
    def label(self) -> str:
        return json.dumps(self.config, sort_keys=True)


@dataclass
class Case:
    library: str
    index: int                        # position in the trace
    entry: dict                       # the trace's launch object
    extras: dict                      # what capture_extras kept for it (may be empty)

    @property
    def key(self) -> str:
        return trace_key(self.entry)

    @property
    def id(self) -> str:
        return hashlib.sha1(self.key.encode()).hexdigest()[:12]

    @property
    def kernel(self) -> str:
        return self.entry["kernel"]

    def recorded_variant(self) -> Variant:
        e = self.entry
        config = dict(e.get("config", {}))
        return Variant(config, _grid3(e["grid"]), dict(e.get("constexprs", {})), recorded=True)

    def variants(self, limit: int = 40) -> list[Variant]:
        """The recorded config, then every config of an autotuned kernel's list (the grid each would launch
        with, from the capture), else the neighbours in num_warps and num_stages (same grid)."""
        base = self.recorded_variant()
        out = [base]
        listed = self.extras.get("variants") or []
        if len(listed) > 1:
            params = {k for k in base.config if k not in NON_CONFIG}
            for v in listed:
                # The recorder also files tile-like names set by heuristics under config: give every variant
                # the recorded config's keys (their values for this variant), so that labels compare.
                merged = dict(v["config"])
                for k in params:
                    merged.setdefault(k, v["constexprs"].get(k, base.config[k]))
                merged = {**{k: merged[k] for k in merged if k not in NON_CONFIG},
                          **{k: merged[k] for k in NON_CONFIG}}
                consts = {k: c for k, c in v["constexprs"].items() if k not in merged}
                out.append(Variant(merged, _grid3(v["grid"]), consts,
                                   extra={k: v[k] for k in ("num_ctas", "maxnreg") if k in v}))
        else:
            w, s = base.config.get("num_warps", 4), base.config.get("num_stages", 3)
            for nw, ns in ((w // 2, s), (w * 2, s), (w, s - 1), (w, s + 1)):
                if 1 <= nw <= 32 and ns >= 1:
                    out.append(Variant({**base.config, "num_warps": nw, "num_stages": ns}, base.grid,
                                       base.constexprs))
        unique: dict[str, Variant] = {}
        for v in out:
            if v.label not in unique:
                unique[v.label] = v
            elif v.label == base.label and not unique[v.label].extra:  # the autotune entry of the recorded one
                unique[v.label] = Variant(v.config, v.grid, v.constexprs, True, v.extra)
        return list(unique.values())[:limit]


def _grid3(grid) -> list[int]:
    g = [int(x) for x in grid]
    return g + [1] * (3 - len(g))


def trace_path(library: str) -> Path:
    return DATA / "traces" / f"{library}.json"


def extras_path(library: str) -> Path:
    return DATA / "traces" / f"{library}.extras.json"


def _packed(path: Path) -> Path:
    return path.with_name(path.name + ".gz")


def stored(path: Path) -> bool:
    """A trace or extras file is here, plain or as its gzip beside it (`X.json.gz`)."""
    return path.exists() or _packed(path).exists()


def read_json(path: Path):
    """A trace or extras file, or its gzip beside it (`X.json.gz`: the large traces are kept compressed)."""
    if not path.exists() and _packed(path).exists():
        import gzip

        with gzip.open(_packed(path), "rt") as f:
            return json.load(f)
    return json.loads(path.read_text())


def probe_owners(library: str) -> dict[str, str]:
    """{id of an autotune probe entry: id of the launch it is a config of} (`load_cases` leaves probes out)."""
    trace = read_json(trace_path(library))
    launches = trace["launches"]
    owner = {}
    for group in trace.get("autotune_groups", []):
        chosen = Case(library, group[0], launches[group[0]], {}).id
        for i in group[1:]:
            owner.setdefault(Case(library, i, launches[i], {}).id, chosen)
    return owner


def load_cases(library: str) -> list[Case]:
    """The program's launches. A trace that `advisor record` wrote with autotune groups also holds, after
    each group's chosen launch, the same launch under every other config of its list (probed, not made by
    the program): those are that launch's variants (the extras list them too), not launches of their own."""
    trace = read_json(trace_path(library))
    extras_file = extras_path(library)
    extras = read_json(extras_file) if stored(extras_file) else {}
    probed = {i for group in trace.get("autotune_groups", []) for i in group[1:]}
    return [Case(library, i, entry, extras.get(trace_key(entry), {}))
            for i, entry in enumerate(trace["launches"]) if i not in probed]


# ----------------------------------------------------------------------------------------------------
# The kernel.
# ----------------------------------------------------------------------------------------------------
_KERNELS: dict[tuple[str, str], object] = {}


def _unwrap(obj):
    from triton.runtime.jit import JITFunction

    for _ in range(8):
        if isinstance(obj, JITFunction) or not hasattr(obj, "fn"):
            break
        obj = obj.fn
    return obj


def _allocator() -> None:
    """Global scratch for kernels that ask Triton for it (device-side tensor descriptors), as libraries set."""
    import torch
    import triton

    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8, device="cuda"))


def kernel_function(case: Case):
    """The kernel's JITFunction, found in the module that defined it."""
    from triton.runtime.jit import JITFunction

    if not _KERNELS:
        _allocator()

    source, name = case.entry["source"], case.kernel
    if (source, name) in _KERNELS:
        return _KERNELS[(source, name)]
    found = None
    module_name = case.extras.get("module")
    if module_name:
        try:
            module = importlib.import_module(module_name)
        except Exception:
            module = None
        if module is not None:
            for obj in vars(module).values():
                fn = _unwrap(obj)
                if isinstance(fn, JITFunction) and fn.fn.__name__ == name:
                    found = fn
                    break
    if found is None:  # a generated kernel file, or a module that would not import by name
        from ceilings.compile import load_kernel

        found = load_kernel(source, name)
    _KERNELS[(source, name)] = found
    return found


# ----------------------------------------------------------------------------------------------------
# The arguments.
# ----------------------------------------------------------------------------------------------------
def accumulated(case: Case) -> set[str]:
    """The floating tensors the launch's kernel adds into with atomics (a split-K output), which its host
    or an autotune pre-hook zeroes: the product starts its runs of them at zero (advisor.advice.stores),
    and so does the check since 2026-11-24 (earlier rows called right split-K configs wrong)."""
    from advisor.advice.stores import accumulated_tensors

    return accumulated_tensors(kernel_function(case), ((t["name"], t["dtype"]) for t in case.entry.get("tensors", [])))


def make_tensors(case: Case, seed: int = 0, zeroed: set[str] = frozenset()) -> dict:
    import torch

    gen = torch.Generator(device="cuda").manual_seed(seed)
    values = case.extras.get("values") or {}
    out = {}
    for t in case.entry.get("tensors", []):
        dtype = getattr(torch, t["dtype"])
        shape, stride = t["shape"], t["stride"]
        span = 1 + sum((s - 1) * st for s, st in zip(shape, stride) if s > 0)
        if dtype.is_floating_point:
            flat = torch.randn(span, device="cuda", generator=gen).to(dtype)
            if t["name"] in zeroed:
                flat.zero_()  # drawn all the same: the other tensors keep the values they had before
        else:
            flat = torch.zeros(span, device="cuda", dtype=dtype)
        view = torch.as_strided(flat, shape, stride)
        if t["name"] in values and not dtype.is_floating_point:
            view.copy_(torch.tensor(values[t["name"]], dtype=dtype).reshape(shape))
        if t.get("block_shape") is not None:
            from triton.tools.tensor_descriptor import TensorDescriptor

            view = TensorDescriptor(view, list(shape), list(stride), list(t["block_shape"]))
        out[t["name"]] = view
    return out


def arguments(fn, case: Case, variant: Variant, tensors: dict) -> dict:
    """Every argument of `fn` by name (runtime ones, constexprs, launch options): by name because a library
    may declare a constexpr between runtime parameters, which the JIT's binder accepts only so."""
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    scalars = case.entry.get("scalars", {})
    constexprs = {**variant.constexprs, **{k: v for k, v in variant.config.items() if k not in NON_CONFIG}}
    names = list(tensors) + list(scalars)
    kwargs = {}
    for p in fn.params:
        if p.is_constexpr:
            if p.name in constexprs:
                kwargs[p.name] = _constexpr(fn, constexprs[p.name], tl, JITFunction)
        elif p.name in tensors:
            kwargs[p.name] = tensors[p.name]
        elif p.name in scalars:
            kwargs[p.name] = scalars[p.name]
        elif any(k.startswith(p.name + "[") for k in names):  # a tuple argument, recorded element by element
            parts = sorted((k for k in names if k.startswith(p.name + "[")), key=lambda k: int(k[len(p.name) + 1:-1]))
            kwargs[p.name] = tuple(tensors[k] if k in tensors else scalars[k] for k in parts)
        elif not p.has_default:
            raise KeyError(f"{case.kernel}: no value for argument {p.name}")
    kwargs["num_warps"] = variant.config.get("num_warps", 4)
    kwargs["num_stages"] = variant.config.get("num_stages", 3)
    kwargs.update(variant.extra)
    return kwargs


def _constexpr(fn, value, tl, jit_type):
    """A recorded constexpr back to what the kernel was given: a dtype name to its `tl` dtype, a JIT
    function's name to the function (looked up where the kernel looks it up), a list to a tuple."""
    if isinstance(value, str):
        dtype = getattr(tl, value, None)
        if isinstance(dtype, tl.dtype):
            return dtype
        target = fn.fn.__globals__.get(value)
        if isinstance(_unwrap(target), jit_type):
            return target
    if isinstance(value, list):
        return tuple(_constexpr(fn, v, tl, jit_type) for v in value)
    return value


def runner(fn, case: Case, variant: Variant, tensors: dict):
    """A function that enqueues the launch once and returns without synchronising."""
    kwargs = arguments(fn, case, variant, tensors)
    grid = tuple(variant.grid)
    return lambda: fn[grid](**kwargs)
