"""The vocabulary every part passes around: a kernel `Config` and a `Launch` of a kernel.

Both are immutable and hashable, so they can key caches and sets. Neither needs torch or a GPU;
`Config.to_triton` imports triton only when called.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ceilings.errors import AdvisorError

Scalar = int | float | bool | str
# A launch's scalar arguments may also be None (an optional argument passed as None).

# The serving engines' fused-MoE JSON entry: meta-parameters first, then the two launch options,
# in this order (the order their tuners write, kept for byte-compatible files).
ENGINE_META_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M")
ENGINE_LAUNCH_KEYS = ("num_warps", "num_stages")
# The contents of integer tensors up to this size may travel with a launch (TensorArg.values): a routing table of
# 32,768 tokens x top-8 in int32, an embedding bag's 65,536 int64 lengths (RESULTS 56: at 256 KiB they travelled as
# a sample, which the ceiling does not read, and the bag loop they bound was predicted 2.3x too fast). Timings and
# the interpreter check run on these contents; zeros in a larger one turn a gather into reads of one row (RESULTS
# 55: a MoE combine of 65,536 rows ran 4-5x faster than its bytes allow), so it carries a sample instead.
MAX_VALUES_BYTES = 1024 * 1024
# A larger integer tensor may carry this many of its elements instead (TensorArg.sample), read at evenly spaced
# positions: timings draw its contents from them rather than using zeros.
SAMPLE_SIZE = 4096
_INTEGER_BYTES = {"int8": 1, "uint8": 1, "int16": 2, "int32": 4, "int64": 8, "bool": 1}


class Config:
    """Meta-parameters (constexpr name -> value) plus num_warps and num_stages.

    Two configs are equal when their values are equal, whatever order the meta-parameters were
    given in; the given order is kept for serialisation.
    """

    __slots__ = ("_params", "num_warps", "num_stages", "_key")

    def __init__(self, params: Mapping[str, Scalar], num_warps: int = 4, num_stages: int = 3):
        for name, value in params.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise AdvisorError(f"config parameter name {name!r} is not an identifier; use the kernel's "
                                   "constexpr names")
            if not isinstance(value, int | float | bool | str):
                raise AdvisorError(f"config parameter {name}={value!r} is not a number, bool or string")
        for name, value in (("num_warps", num_warps), ("num_stages", num_stages)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise AdvisorError(f"config {name}={value!r} must be a positive integer")
        if num_warps & (num_warps - 1):
            raise AdvisorError(f"config num_warps={num_warps} must be a power of two (1..32)")
        object.__setattr__(self, "_params", tuple(params.items()))
        object.__setattr__(self, "num_warps", num_warps)
        object.__setattr__(self, "num_stages", num_stages)
        object.__setattr__(self, "_key", (frozenset(self._params), num_warps, num_stages))

    def __setattr__(self, name, value):
        raise AttributeError("Config is immutable")

    def __reduce__(self):  # pickling (sweep workers) goes through the constructor, not setattr
        return (Config, (dict(self._params), self.num_warps, self.num_stages))

    # --- mapping-like access to the meta-parameters -------------------------------------------
    @property
    def params(self) -> dict[str, Scalar]:
        return dict(self._params)

    def __getitem__(self, name: str) -> Scalar:
        for key, value in self._params:
            if key == name:
                return value
        raise KeyError(name)

    @property
    def program(self) -> tuple:
        """The meta-parameters alone, hashable and in name order: what the compiled program computes. Configs
        that differ only in num_warps / num_stages run one program, which a race-free kernel computes alike."""
        return tuple(sorted(self._params))

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    def replace(self, num_warps: int | None = None, num_stages: int | None = None, **params: Scalar) -> Config:
        merged = dict(self._params)
        merged.update(params)
        return Config(merged, self.num_warps if num_warps is None else num_warps,
                      self.num_stages if num_stages is None else num_stages)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Config) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._params)
        return f"Config({{{inner}}}, num_warps={self.num_warps}, num_stages={self.num_stages})"

    def label(self) -> str:
        """A short human label, e.g. `M64 N128 K64 G8 w8 s3` for the fused-MoE parameters."""
        short = {"BLOCK_SIZE_M": "M", "BLOCK_SIZE_N": "N", "BLOCK_SIZE_K": "K", "GROUP_SIZE_M": "G",
                 "BLOCK_M": "M", "BLOCK_N": "N", "BLOCK_K": "K", "GROUP_M": "G"}
        parts = [f"{short.get(k, k + '=')}{v}" for k, v in self._params]
        return " ".join(parts + [f"w{self.num_warps}", f"s{self.num_stages}"])

    # --- plain dicts and the serving-engine JSON entry --------------------------------------
    def to_dict(self) -> dict[str, Scalar]:
        """Meta-parameters in their order, then num_warps and num_stages: the engine entry layout."""
        out: dict[str, Scalar] = dict(self._params)
        out["num_warps"] = self.num_warps
        out["num_stages"] = self.num_stages
        return out

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any], where: str = "config") -> Config:
        if not isinstance(entry, Mapping):
            raise AdvisorError(f"{where}: expected an object of meta-parameters, got {type(entry).__name__}")
        params = {k: v for k, v in entry.items() if k not in ENGINE_LAUNCH_KEYS}
        num_warps = entry.get("num_warps", 4)
        num_stages = entry.get("num_stages", 3)
        try:
            return cls(params, num_warps=num_warps, num_stages=num_stages)
        except AdvisorError as exc:
            raise AdvisorError(f"{where}: {exc}") from None

    def to_engine_entry(self) -> dict[str, Scalar]:
        """The serving engines' fused-MoE entry, keys in the engines' order; fails if one is missing.

        Other meta-parameters (a vendor's extra knobs) follow the four standard ones in their order.
        """
        params = dict(self._params)
        missing = [k for k in ENGINE_META_KEYS if k not in params]
        if missing:
            raise AdvisorError(f"config {self.label()} is not a fused-MoE config: missing {', '.join(missing)}")
        entry: dict[str, Scalar] = {k: params[k] for k in ENGINE_META_KEYS}
        entry.update((k, v) for k, v in self._params if k not in ENGINE_META_KEYS)
        entry["num_warps"] = self.num_warps
        entry["num_stages"] = self.num_stages
        return entry

    @classmethod
    def from_engine_entry(cls, entry: Mapping[str, Any], where: str = "config entry") -> Config:
        if not isinstance(entry, Mapping):
            raise AdvisorError(f"{where}: expected an object with {', '.join(ENGINE_META_KEYS)}, "
                               f"got {type(entry).__name__}")
        missing = [k for k in ENGINE_META_KEYS + ENGINE_LAUNCH_KEYS if k not in entry]
        if missing:
            raise AdvisorError(f"{where}: missing {', '.join(missing)}; each entry needs "
                               f"{', '.join(ENGINE_META_KEYS + ENGINE_LAUNCH_KEYS)}")
        for key, value in entry.items():
            if key in ENGINE_META_KEYS + ENGINE_LAUNCH_KEYS and (
                    not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise AdvisorError(f"{where}: {key}={value!r} must be a positive integer")
        return cls.from_dict(entry, where)

    # --- triton -------------------------------------------------------------------------------
    def to_triton(self):
        import triton

        return triton.Config(dict(self._params), num_warps=self.num_warps, num_stages=self.num_stages)

    @classmethod
    def from_triton(cls, config) -> Config:
        return cls(dict(config.kwargs), num_warps=config.num_warps, num_stages=config.num_stages)


@dataclass(frozen=True)
class ValueSample:
    """What a trace keeps of an integer tensor too large to keep whole (over MAX_VALUES_BYTES), so that a timing
    fills it with values like the program's rather than zeros, which turn a gather into reads of one row and
    atomics into one contended address (RESULTS 55-56; advisor.measure.launch_run.drawn_from_sample):

    - `values`: up to SAMPLE_SIZE elements read at evenly spaced positions (their spread: hot experts, -1s);
    - `low`, `high`: the smallest and largest element, so drawn indices stay inside the program's range;
    - `sorted`: the whole span was non-decreasing (offsets, sorted ids);
    - `distinct_rows`: the length of its rows (the last, unit-stride dimension) when no row repeats a value
      (a permutation per row, as a sort's indices are), else 0: drawn rows then repeat no value either, so a
      scatter through them writes each element once, as the program's does.
    """

    values: tuple[int, ...]
    low: int
    high: int
    sorted: bool = False
    distinct_rows: int = 0

    def __post_init__(self):
        try:
            object.__setattr__(self, "values", tuple(int(v) for v in self.values))
            for name in ("low", "high", "distinct_rows"):
                object.__setattr__(self, name, int(getattr(self, name)))
        except (TypeError, ValueError):
            raise AdvisorError("a sample's values, low, high and distinct_rows must be integers") from None
        object.__setattr__(self, "sorted", bool(self.sorted))
        if not 0 < len(self.values) <= SAMPLE_SIZE:
            raise AdvisorError(f"a sample holds 1 to {SAMPLE_SIZE} values, not {len(self.values)}")
        if not self.low <= min(self.values) <= max(self.values) <= self.high:
            raise AdvisorError(f"a sample's values must lie within its low {self.low} and high {self.high}")
        if self.distinct_rows < 0 or self.distinct_rows > self.high - self.low + 1:
            raise AdvisorError(f"distinct_rows {self.distinct_rows}: rows of that many distinct values do not fit "
                               f"in {self.low}..{self.high}")

    def to_dict(self) -> dict[str, Any]:
        return {"values": list(self.values), "low": self.low, "high": self.high, "sorted": self.sorted,
                "distinct_rows": self.distinct_rows}

    @classmethod
    def from_dict(cls, data: Any, tensor: str) -> ValueSample:
        try:
            if not isinstance(data, Mapping) or not isinstance(data.get("values"), list):
                raise AdvisorError("it must be an object with a list of values")
            return cls(tuple(data["values"]), data.get("low", min(data["values"], default=0)),
                       data.get("high", max(data["values"], default=0)), data.get("sorted", False),
                       data.get("distinct_rows", 0))
        except AdvisorError as exc:
            raise AdvisorError(f"tensor {tensor}: sample: {exc}; give {{\"values\": [integers], \"low\", "
                               "\"high\", \"sorted\", \"distinct_rows\"}} or drop it") from None


@dataclass(frozen=True)
class TensorArg:
    """A tensor argument as the kernel sees it: shape, dtype name (`bfloat16`) and strides in elements.

    With `block_shape` it is a TMA tensor descriptor over that shape and strides, loading blocks of
    that shape (a `triton.tools.tensor_descriptor.TensorDescriptor` argument).

    `values`: the contents of a small integer tensor (routing tables, offsets; at most
    MAX_VALUES_BYTES), element i being the one at the data pointer + i elements (the flat contents of
    a contiguous tensor), so the generic ceiling can evaluate control flow that reads them.

    `sample`: for a larger integer tensor, what a timing needs to fill it with values like the program's
    (ValueSample); not contents: the ceiling does not read it.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    stride: tuple[int, ...]
    block_shape: tuple[int, ...] | None = None
    values: tuple[int, ...] | None = None
    sample: ValueSample | None = None

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        object.__setattr__(self, "stride", tuple(int(s) for s in self.stride))
        if self.block_shape is not None:
            object.__setattr__(self, "block_shape", tuple(int(s) for s in self.block_shape))
            if len(self.block_shape) != len(self.shape):
                raise AdvisorError(f"tensor descriptor {self.name}: block {self.block_shape} and shape "
                                   f"{self.shape} differ in rank")
        if len(self.shape) != len(self.stride):
            raise AdvisorError(f"tensor {self.name}: shape {self.shape} and stride {self.stride} differ in rank")
        if any(s < 0 for s in self.shape):
            raise AdvisorError(f"tensor {self.name}: negative size in shape {self.shape}")
        if self.values is not None:
            if self.dtype not in _INTEGER_BYTES:
                raise AdvisorError(f"tensor {self.name}: values are kept for integer tensors only, not {self.dtype}; "
                                   "drop its values")
            if len(self.values) * _INTEGER_BYTES[self.dtype] > MAX_VALUES_BYTES:
                raise AdvisorError(f"tensor {self.name}: {len(self.values)} values exceed {MAX_VALUES_BYTES} bytes; "
                                   "keep the values of small tensors only")
            try:
                object.__setattr__(self, "values", tuple(int(v) for v in self.values))
            except (TypeError, ValueError):
                raise AdvisorError(f"tensor {self.name}: values must be a list of integers") from None
        if self.sample is not None and self.dtype not in _INTEGER_BYTES:
            raise AdvisorError(f"tensor {self.name}: a sample is kept for integer tensors only, not {self.dtype}; "
                               "drop its sample")

    @classmethod
    def contiguous(cls, name: str, shape: Iterable[int], dtype: str) -> TensorArg:
        shape = tuple(int(s) for s in shape)
        stride, step = [], 1
        for size in reversed(shape):
            stride.append(step)
            step *= max(size, 1)
        return cls(name, shape, dtype, tuple(reversed(stride)))

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "shape": list(self.shape), "dtype": self.dtype,
                               "stride": list(self.stride)}
        if self.block_shape is not None:
            out["block_shape"] = list(self.block_shape)
        if self.values is not None:
            out["values"] = list(self.values)
        if self.sample is not None:
            out["sample"] = self.sample.to_dict()
        return out


def _tensor_from_dict(t: Mapping[str, Any]) -> TensorArg:
    name = t["name"]
    return TensorArg(name, tuple(t["shape"]), t["dtype"], tuple(t["stride"]),
                     tuple(t["block_shape"]) if t.get("block_shape") is not None else None,
                     tuple(t["values"]) if t.get("values") is not None else None,
                     ValueSample.from_dict(t["sample"], name) if t.get("sample") is not None else None)


def expand_space(space: Mapping[str, Iterable[Scalar]]) -> list[Config]:
    """Every config of a {parameter: values} dict, in a fixed order (the parameters in the dict's order,
    then num_warps, then num_stages; 4 warps and 3 stages when the dict does not list them)."""
    import itertools

    names = [k for k in space if k not in ("num_warps", "num_stages")]
    out = []
    for values in itertools.product(*(space[n] for n in names), space.get("num_warps", (4,)),
                                    space.get("num_stages", (3,))):
        out.append(Config(dict(zip(names, values[:-2], strict=True)), values[-2], values[-1]))
    return out


def _frozen_items(mapping: Mapping[str, Scalar] | Iterable[tuple[str, Scalar]]) -> tuple[tuple[str, Scalar], ...]:
    items = mapping.items() if isinstance(mapping, Mapping) else mapping
    return tuple((str(k), v) for k, v in items)


def _scalar_items(mapping: Any, what: str) -> tuple[tuple[str, Scalar], ...]:
    """A launch's scalar arguments or constexprs as read from JSON: numbers, bools, strings or null."""
    if not isinstance(mapping, Mapping):
        raise AdvisorError(f"{what} must be an object of name -> value, got {type(mapping).__name__}")
    for name, value in mapping.items():
        if value is not None and not isinstance(value, int | float | bool | str):
            raise AdvisorError(f"{what} {name}={value!r}: a scalar argument is a number, bool, string or null")
    return _frozen_items(mapping)


@dataclass(frozen=True)
class Launch:
    """One launch of a Triton kernel: where the kernel lives, its grid, its arguments and its config.

    `tensors`, `scalars` and `constexprs` keep the kernel's argument order; `config` holds the
    tunable constexprs (tile sizes) with num_warps and num_stages, and `constexprs` the others.
    """

    source: str
    kernel: str
    grid: tuple[int, ...]
    tensors: tuple[TensorArg, ...] = ()
    scalars: tuple[tuple[str, Scalar], ...] = ()
    constexprs: tuple[tuple[str, Scalar], ...] = ()
    config: Config = field(default_factory=lambda: Config({}))

    def __post_init__(self):
        grid = tuple(int(g) for g in self.grid)
        if not 1 <= len(grid) <= 3 or any(g < 0 for g in grid):
            raise AdvisorError(f"launch of {self.kernel}: grid {self.grid} must be 1 to 3 non-negative sizes")
        object.__setattr__(self, "grid", grid)
        object.__setattr__(self, "tensors", tuple(self.tensors))
        object.__setattr__(self, "scalars", _frozen_items(self.scalars))
        object.__setattr__(self, "constexprs", _frozen_items(self.constexprs))

    @property
    def num_programs(self) -> int:
        n = 1
        for g in self.grid:
            n *= g
        return n

    def scalar(self, name: str) -> Scalar:
        for key, value in self.scalars + self.constexprs:
            if key == name:
                return value
        if name in self.config.params:
            return self.config[name]
        raise KeyError(name)

    def tensor(self, name: str) -> TensorArg:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def with_source(self, source: str) -> Launch:
        return Launch(source, self.kernel, self.grid, self.tensors, self.scalars, self.constexprs, self.config)

    def with_config(self, config: Config) -> Launch:
        return Launch(self.source, self.kernel, self.grid, self.tensors, self.scalars, self.constexprs, config)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kernel": self.kernel,
            "grid": list(self.grid),
            "tensors": [t.to_dict() for t in self.tensors],
            "scalars": dict(self.scalars),
            "constexprs": dict(self.constexprs),
            "config": self.config.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "launch") -> Launch:
        if not isinstance(data, Mapping):
            raise AdvisorError(f"{where}: a launch must be an object, got {type(data).__name__}")
        try:
            tensors = tuple(_tensor_from_dict(t) for t in data.get("tensors", ()))
            return cls(
                source=str(data["source"]),
                kernel=str(data["kernel"]),
                grid=tuple(data["grid"]),
                tensors=tensors,
                scalars=_scalar_items(data.get("scalars", {}), "scalars"),
                constexprs=_scalar_items(data.get("constexprs", {}), "constexprs"),
                config=Config.from_dict(data.get("config", {}), f"{where}: config"),
            )
        except AdvisorError as exc:
            message = str(exc)
            raise AdvisorError(message if message.startswith(where) else f"{where}: {message}") from None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise AdvisorError(f"{where}: malformed launch ({exc!r}); it needs source, kernel, grid, "
                               "tensors [{name, shape, dtype, stride}], scalars, constexprs, config") from None

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @property
    def source_path(self) -> Path:
        return Path(self.source)
