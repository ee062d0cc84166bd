"""The feature row of a launch for the latency model: its ceiling, its work, its config and its GPU.

Every feature is derived from the Ceiling and Demand of the launch (no measurement), so a row can be
built for any kernel the ceiling covers, on any GPU the spec table knows. Times enter as logs and as
shares of the ceiling, so one model can serve GPUs of different speeds.
"""

from __future__ import annotations

import math
import re

from ceilings.hardware import GPUSpec
from ceilings.launch import Config
from ceilings.roofline import PIPELINES, Ceiling, Demand

_TILE = {"tile_m": re.compile(r"^BLOCK(_SIZE)?_M$"), "tile_n": re.compile(r"^BLOCK(_SIZE)?_N$"),
         "tile_k": re.compile(r"^BLOCK(_SIZE)?_K$"), "group_m": re.compile(r"^GROUP(_SIZE)?_M$")}

FEATURES: tuple[str, ...] = (
    "log_ceiling_us", "binding_index",
    *(f"log_{p}_us" for p in PIPELINES), *(f"share_{p}" for p in PIPELINES if p != "launch"),
    "log_ctas", "log_active_ctas", "active_fraction", "waves", "wave_tail", "busiest_ctas", "ctas_per_sm",
    "num_warps", "num_stages", "tile_m", "tile_n", "tile_k", "group_m", "wgmma", "log_flops_per_cta",
    "log_intensity", "registers", "log_shared", "sms", "clock_ghz", "dram_tbs", "log_tensor_peak",
)


def _log(x: float | None) -> float:
    return math.log(x) if x and x > 0 else -20.0


def tile_sizes(config: Config) -> dict[str, float]:
    out = {name: 0.0 for name in _TILE}
    for key, value in config.params.items():
        for name, pattern in _TILE.items():
            if pattern.match(key) and isinstance(value, int | float):
                out[name] = float(value)
    return out


def feature_row(ceiling: Ceiling, demand: Demand, config: Config, spec: GPUSpec) -> dict[str, float]:
    c = ceiling.ceiling_us
    row: dict[str, float] = {"log_ceiling_us": _log(c), "binding_index": float(PIPELINES.index(ceiling.binding))}
    for p in PIPELINES:
        t = ceiling.pipelines.get(p)
        row[f"log_{p}_us"] = _log(t)
        if p != "launch":
            row[f"share_{p}"] = (t or 0.0) / c if c else 0.0
    per_sm = max(ceiling.ctas_per_sm, 1)
    waves = ceiling.active_ctas / (spec.sms * per_sm)
    flops = demand.tensor_flops_per_cta or 0.0
    row.update({
        "log_ctas": _log(ceiling.ctas), "log_active_ctas": _log(ceiling.active_ctas),
        "active_fraction": ceiling.active_ctas / ceiling.ctas if ceiling.ctas else 0.0,
        "waves": waves, "wave_tail": waves - math.floor(waves) if waves else 0.0,
        "busiest_ctas": float(math.ceil(ceiling.active_ctas / spec.sms)), "ctas_per_sm": float(ceiling.ctas_per_sm),
        "num_warps": float(config.num_warps), "num_stages": float(config.num_stages), **tile_sizes(config),
        "wgmma": 1.0 if demand.tensor_kind == "wgmma" else 0.0, "log_flops_per_cta": _log(flops),
        "log_intensity": _log(flops * ceiling.active_ctas / demand.dram_bytes if demand.dram_bytes else 0.0),
        "registers": float(demand.registers or 0), "log_shared": _log(demand.shared_bytes),
        "sms": float(spec.sms), "clock_ghz": spec.boost_clock_ghz, "dram_tbs": spec.dram_tbs,
        "log_tensor_peak": _log(spec.peak_tensor_tflops(demand.tensor_dtype)),
    })
    return {name: float(row[name]) for name in FEATURES}
