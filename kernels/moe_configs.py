"""Fused-MoE configs as data: the serving engines' JSON files, nearest-M lookup, and a default rule.

File names and content follow the engines (ANCHORS section 2):
`E={E},N={N},device_name={name}[,dtype=...][,block_shape=[bn,bk]].json` holding
`{"<M>": {"BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages"}}`,
written with a 4-space indent and a final newline. Other top-level keys (the engines record
`"triton_version"`) are kept and written before the token counts, where the engines put them, so a
file in the engines' layout reads and writes back byte-identical.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ceilings.errors import AdvisorError
from ceilings.files import atomic_write
from ceilings.launch import Config

SHIPPED_DIR = Path(__file__).resolve().parent / "configs"

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
    """Configs by token count M, plus the file's other top-level keys in their order."""

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


def parse_config_text(text: str, where: str = "config file") -> ConfigTable:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AdvisorError(f"{where}: not valid JSON ({exc.msg}: line {exc.lineno}); fix or regenerate "
                           "the file") from None
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


def format_config_table(table: ConfigTable) -> str:
    return json.dumps(table.to_json_object(), indent=4) + "\n"


def write_config_file(path: str | os.PathLike, table: ConfigTable) -> Path:
    """Write atomically: a temporary file in the same folder, then a rename over the target."""
    path = Path(path)
    text = format_config_table(table)
    atomic_write(path, text.encode())
    return path


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
            if path.exists():
                return read_config_file(path).lookup(m), str(path)
    return default_config(m, num_experts, top_k), "default rule"
