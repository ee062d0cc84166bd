"""Fused-MoE configs as data: the serving engines' JSON files, nearest-M lookup, and a default rule.

File names and content follow the engines (ANCHORS section 2):
`E={E},N={N},device_name={name}[,dtype=...][,block_shape=[bn,bk]].json` holding
`{"<M>": {"BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages"}}`,
written with a 4-space indent and a final newline.

Every key of a file this project writes is a token count: vLLM up to 0.9.2 (and SGLang of the same
time) read a file as `{int(key): value}` and fail on any other key. Newer engine tuners add a
`"triton_version"` key; a file that has one keeps it (written before the token counts, where the
engines put it, so the file reads and writes back byte-identical), but nothing here adds one. What we
know about a file's configs (the Triton version, the GPU, which entries were measured and how fast)
goes to a side file beside it, `<file name>.meta` (JSON), which the engines never open: they look
config files up by their exact name.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ceilings.errors import AdvisorError
from ceilings.files import atomic_write
from ceilings.launch import Config

SHIPPED_DIR = Path(__file__).resolve().parent / "configs"
# Tuned for `kernels.fused_moe_fused`'s GEMM1 with SiLU-and-mul in its epilogue (same file format and names).
FUSED_DIR = SHIPPED_DIR / "fused"

# The token counts the engines' tuners write (ANCHORS section 2).
ENGINE_M_KEYS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096)


def device_file_name(device_name: str) -> str:
    """`torch.cuda.get_device_name()` as the engines put it in file names: spaces become `_`."""
    return device_name.strip().replace(" ", "_")


def config_file_name(num_experts: int, n: int, device_name: str, dtype: str | None = None,
                     block_shape: tuple[int, int] | None = None) -> str:
    """N is the intermediate size per rank (w2.shape[2]); dtype is omitted for bf16/fp16 activations,
    as the engines name those files, and given for quantised ones (`fp8_w8a8`, `int8_w8a16`, ...)."""
    name = f"E={num_experts},N={n},device_name={device_file_name(device_name)}"
    if dtype and dtype not in ("bfloat16", "float16", "bf16", "fp16"):
        name += f",dtype={dtype}"
    if block_shape:
        name += f",block_shape=[{block_shape[0]},{block_shape[1]}]"
    return name + ".json"


@dataclass
class ConfigTable:
    """Configs by token count M, plus the top-level keys of a read file that are not token counts, in
    their order (kept when the file is written back; tables built here have none)."""

    configs: dict[int, Config]
    extras: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        self.configs = dict(sorted(self.configs.items()))

    def lookup(self, m: int) -> Config:
        """The config of the key nearest to M; on a tie, the smaller key (the engines' rule)."""
        if not self.configs:
            raise AdvisorError("the config table is empty; add at least one token count")
        best = min(self.configs, key=lambda key: (abs(key - m), key))
        return self.configs[best]

    def to_json_object(self) -> dict[str, Any]:
        obj: dict[str, Any] = dict(self.extras)
        for m, config in self.configs.items():
            obj[str(m)] = config.to_engine_entry()
        return obj


def _json_object(text: str, where: str, fix: str) -> Any:
    """The parsed JSON of a config file or its side file, or one line naming the file, the error and the fix."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise AdvisorError(f"{where}: not valid JSON ({exc.msg}: line {exc.lineno}); {fix}") from None


def parse_config_text(text: str, where: str = "config file") -> ConfigTable:
    obj = _json_object(text, where, "fix or regenerate the file")
    if not isinstance(obj, dict):
        raise AdvisorError(f"{where}: top level must be an object of token count -> config")
    configs: dict[int, Config] = {}
    extras: dict[str, Any] = {}
    for key, value in obj.items():
        if key.isascii() and key.isdigit():  # not str.isdigit alone: '²' is a digit int() refuses
            configs[int(key)] = Config.from_engine_entry(value, f"{where}: entry {key!r}")
        elif isinstance(value, dict):
            raise AdvisorError(f"{where}: key {key!r} is not a token count; keys must be integers like \"64\"")
        else:
            extras[key] = value
    if not configs:
        raise AdvisorError(f"{where}: no token-count entries; expected keys like \"1\", \"64\", \"4096\"")
    return ConfigTable(configs, extras)


def read_config_file(path: str | os.PathLike) -> ConfigTable:
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise AdvisorError(f"config file {path} does not exist; check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AdvisorError(f"config file {path} cannot be read ({exc.__class__.__name__}); check its "
                           "permissions and encoding") from None
    return parse_config_text(text, str(path))


# Tables the layers looked up, by path, kept while the file's mtime and size stay the same: a layer call
# reads its files' entries, not the files (reading and parsing them took 45-180 us of CPU per call on this
# project's machine, against a 6 us decode layer on the GPU). A file rewritten in place (`advisor apply`,
# a tuner) is read again at the next call.
_READ: dict[str, tuple[tuple[int, int], Any]] = {}


def _cached(stamped: str | os.PathLike, read) -> Any:
    """`read()` of the file `stamped`, read again only once its mtime or size changed; None where no file is."""
    try:
        stat = os.stat(stamped)
    except OSError:
        return None
    stamp = (stat.st_mtime_ns, stat.st_size)
    hit = _READ.get(os.fspath(stamped))
    if hit is None or hit[0] != stamp:
        hit = _READ[os.fspath(stamped)] = (stamp, read())
    return hit[1]


def cached_config_file(path: str | os.PathLike) -> ConfigTable | None:
    """`read_config_file` for lookups on a hot path (the table is shared: do not change it), or None where
    no file is."""
    return _cached(path, lambda: read_config_file(path))


def faster_form(files: dict[Any, str | os.PathLike], m: int, margin: float = 1.0) -> Any:
    """Of config files tuned for different forms of one GEMM (key -> path, the form in use first), the key
    whose side file measured the form fastest at its token count nearest M, where another form must beat the
    first by more than `margin` (its time x margin under the first's); None when a file or its measured times
    are missing (the caller's default then)."""
    times = {}
    for key, path in files.items():
        meta = _cached(meta_path(path), lambda path=path: read_config_meta(path))
        if not meta or not meta.measured:
            return None
        nearest = min(meta.measured, key=lambda k: (abs(k - m), k))
        times[key] = meta.measured[nearest].us
    if not times:
        return None
    first = next(iter(times))
    best = min(times, key=times.get)
    return best if times[best] * margin < times[first] else first


def format_config_table(table: ConfigTable) -> str:
    return json.dumps(table.to_json_object(), indent=4) + "\n"


def write_config_file(path: str | os.PathLike, table: ConfigTable, meta: ConfigMeta | None = None) -> Path:
    """Write atomically: a temporary file in the same folder, then a rename over the target; `meta` goes
    to the side file (`meta_path`), never into the engines' file."""
    path = Path(path)
    text = format_config_table(table)
    atomic_write(path, text.encode())
    if meta is not None:
        write_config_meta(path, meta)
    return path


# ------------------------------------------------------------------------------------------------
# The side file: where a file's configs come from (the engines never read it).
# ------------------------------------------------------------------------------------------------
META_SUFFIX = ".meta"


def meta_path(path: str | os.PathLike) -> Path:
    """The side file of a config file: its full name plus `.meta` (not `*.json`, so globs of config files
    and the engines' exact-name lookup never pick it up)."""
    path = Path(path)
    return path.with_name(path.name + META_SUFFIX)


@dataclass(frozen=True)
class MeasuredEntry:
    """An entry's config timed on the file's GPU: the fastest of `compared` configs timed for that M.

    `us` is the time of the launch that was swept (GEMM1 of the layer for `advisor tune`)."""

    config: Config
    us: float
    compared: int


@dataclass
class ConfigMeta:
    """A config file's provenance: the GPU and Triton version its configs were measured with, the entries
    measured (by token count) and the sweep they come from."""

    device_name: str
    triton_version: str | None = None
    measured: dict[int, MeasuredEntry] = field(default_factory=dict)
    source: str = ""

    def to_json_object(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"device_name": self.device_name}
        if self.triton_version:
            obj["triton_version"] = self.triton_version
        if self.source:
            obj["source"] = self.source
        obj["measured"] = {str(m): {"config": e.config.to_engine_entry(), "us": round(e.us, 3),
                                    "compared": e.compared} for m, e in sorted(self.measured.items())}
        return obj


def parse_config_meta(text: str, where: str = "config side file") -> ConfigMeta:
    obj = _json_object(text, where, "fix or delete the side file (the config file beside it does not need it)")
    if not isinstance(obj, dict) or not isinstance(obj.get("device_name"), str):
        raise AdvisorError(f"{where}: expected an object with a \"device_name\"; fix or delete the side file")
    measured: dict[int, MeasuredEntry] = {}
    records = obj.get("measured", {})
    if not isinstance(records, dict):
        raise AdvisorError(f"{where}: \"measured\" must map token counts to records; fix or delete the side file")
    for key, record in records.items():
        what = f"{where}: measured entry {key!r}"
        if not key.isascii() or not key.isdigit() or not isinstance(record, dict):
            raise AdvisorError(f"{what} must be a token count holding {{\"config\", \"us\", \"compared\"}}")
        us, compared = record.get("us"), record.get("compared")
        if not (isinstance(us, int | float) and not isinstance(us, bool) and math.isfinite(us) and us > 0
                and isinstance(compared, int) and not isinstance(compared, bool) and compared >= 1):
            raise AdvisorError(f"{what}: \"us\" must be a positive time and \"compared\" a positive count")
        measured[int(key)] = MeasuredEntry(Config.from_engine_entry(record.get("config"), what), float(us), compared)
    version = obj.get("triton_version")
    return ConfigMeta(obj["device_name"], version if isinstance(version, str) else None, measured,
                      obj.get("source", "") if isinstance(obj.get("source"), str) else "")


def read_config_meta(path: str | os.PathLike) -> ConfigMeta | None:
    """The side file of config file `path`, or None when it has none."""
    side = meta_path(path)
    try:
        text = side.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise AdvisorError(f"side file {side} cannot be read ({exc.__class__.__name__}); check its permissions "
                           "or delete it") from None
    return parse_config_meta(text, str(side))


def format_config_meta(meta: ConfigMeta) -> str:
    return json.dumps(meta.to_json_object(), indent=4) + "\n"


def write_config_meta(path: str | os.PathLike, meta: ConfigMeta) -> Path:
    """Write the side file of config file `path` atomically; returns the side file's path."""
    side = meta_path(path)
    atomic_write(side, format_config_meta(meta).encode())
    return side


def default_config(m: int, num_experts: int, top_k: int) -> Config:
    """A reasonable untuned config, chosen by the expected rows per expert (M * top_k / E).

    Few rows per expert: the launch streams weights, so small M tiles, many N tiles and deep
    pipelining keep DRAM busy. Many rows: larger tiles raise the FLOPs per byte of shared memory.
    """
    rows_per_expert = m * top_k / max(num_experts, 1)
    if rows_per_expert <= 16:
        params, warps, stages = (16, 64, 128, 1), 4, 4
    elif rows_per_expert <= 48:
        params, warps, stages = (32, 64, 128, 1), 4, 4
    elif rows_per_expert <= 192:
        params, warps, stages = (64, 128, 64, 16), 4, 4
    else:
        params, warps, stages = (128, 128, 64, 16), 8, 4
    bm, bn, bk, gm = params
    return Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": gm},
                  num_warps=warps, num_stages=stages)


def shipped_config_path(num_experts: int, n: int, device_name: str, dtype: str | None = None) -> Path | None:
    path = SHIPPED_DIR / config_file_name(num_experts, n, device_name, dtype)
    return path if path.exists() else None


def get_config(m: int, num_experts: int, n: int, top_k: int, device_name: str | None = None,
               config_dir: str | os.PathLike | None = None) -> tuple[Config, str]:
    """The config the shipped kernel uses for M tokens, and where it came from.

    Looks in `config_dir` (if given), then the shipped files, for this device; else the default rule.
    """
    if device_name:
        name = config_file_name(num_experts, n, device_name)
        for folder in ([Path(config_dir)] if config_dir else []) + [SHIPPED_DIR]:
            path = folder / name
            table = cached_config_file(path)
            if table is not None:
                return table.lookup(m), str(path)
    return default_config(m, num_experts, top_k), "default rule"
