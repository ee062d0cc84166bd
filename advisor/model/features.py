"""The feature row of a launch for the latency model: its ceiling, its work, its config and its GPU.

Every feature is derived from the Ceiling and Demand of the launch (no measurement), so a row can be
built for any kernel the ceiling covers, on any GPU the spec table knows. Times enter as logs and as
shares of the ceiling, so one model can serve GPUs of different speeds.

TRANSFER_FEATURES (issue 15) describe the work and the machine, never a kernel's name or family, so
what the model learns on one library's kernels can apply to another's: occupancy in warps, bytes in
flight per SM against the latency-bandwidth product, instructions per byte and per warp, the working
set against the L2, how balanced the pipelines are, how far the generic path's expected work lies above
its floor, and the generic path's notes as flags (code counted once, control flow that depends on data,
CTAs of uneven work). A model uses the features its meta names (`LatencyModel.columns`), so a model
trained before a feature was added keeps working.
"""

from __future__ import annotations

import math
import re

from ceilings.dram import expected_dram_for
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
TRANSFER_FEATURES: tuple[str, ...] = (
    "occupancy_warps", "log_inflight_vs_lbp", "log_instructions_per_byte", "log_instructions_per_warp",
    "log_working_set_vs_l2", "share_launch", "share_second", "share_sum", "log_expected_over_floor",
    "generic_path", "note_counted_once", "note_data_dependent", "note_uneven_ctas", "log_spill",
    "log_expected_dram_vs_floor", "share_expected_dram", "log_expected_dram_vs_ceiling", "log_grid_ctas_per_sm",
    "log_ceiling_per_wave", "log_grid_warps_vs_capacity", "share_latency",
)
FEATURES = FEATURES + TRANSFER_FEATURES
# What `advisor train` fits on unless told otherwise: the features of the shipped model. Held out by
# library, the transfer features did not help on the corpus (benchmarks/RESULTS.md section 14: an inner
# leave-one-library-out chose them for 1 of 4 libraries), so they are opt-in until they do.
DEFAULT_FEATURES: tuple[str, ...] = tuple(f for f in FEATURES if f not in TRANSFER_FEATURES)

# Loaded DRAM latency assumed for the latency-bandwidth product. Only its order matters: within one GPU
# a constant factor shifts the feature by a constant, which a tree split does not see.
_DRAM_LATENCY_S = 600e-9
_ISSUE_PIPES = ("fma", "alu", "xu", "lsu", "fp64")  # fp64: on "fma" before it had a pipe of its own
# Phrases of the generic path's notes (ceilings/demand.py, sass.py, sass_map.py), as flags.
_NOTE_FLAGS = {
    "note_counted_once": ("counted once", "counts it 0 times", "counts what follows 0 times"),
    "note_data_dependent": ("depends on memory", "not determined by the launch"),
    "note_uneven_ctas": ("trip count from program ids", "exit condition evaluated per CTA"),
}


def _log(x: float | None) -> float:
    return math.log(x) if x and x > 0 else -20.0


def stored_feature(row: dict[str, float], name: str) -> float:
    """A feature of a row stored before the feature existed takes the value of a launch without that work
    (log of nothing, a zero share): rows stored before the FP64 pipe (RESULTS 37) counted its work on "fma"."""
    return float(row.get(name, _log(None) if name.startswith("log_") else 0.0))


def tile_sizes(config: Config) -> dict[str, float]:
    out = {name: 0.0 for name in _TILE}
    for key, value in config.params.items():
        for name, pattern in _TILE.items():
            if pattern.match(key) and isinstance(value, int | float):
                out[name] = float(value)
    return out


def feature_row(ceiling: Ceiling, demand: Demand, config: Config, spec: GPUSpec) -> dict[str, float]:
    ceiling = ceiling.model_view or ceiling  # the ceiling as the models were trained on (roofline.Ceiling)
    demand = demand.for_model()  # and the bytes (roofline.Demand.model_bytes)
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
    row.update(transfer_features(ceiling, demand, spec))
    return {name: float(row[name]) for name in FEATURES}


def _instructions(demand: Demand) -> float:
    return sum(demand.instructions(p) for p in _ISSUE_PIPES)


def _expected_dram_vs_floor(demand: Demand, ceiling: Ceiling, spec: GPUSpec) -> float:
    expected = demand.expected if demand.expected is not None else demand
    dram = expected_dram_for(expected.dram_traffic, spec.l2_bytes, spec.sms * max(ceiling.ctas_per_sm, 1))
    if dram is None or not demand.dram_bytes:
        return 0.0
    return math.log(max(dram, 1.0) / demand.dram_bytes)


def transfer_features(ceiling: Ceiling, demand: Demand, spec: GPUSpec) -> dict[str, float]:
    """The TRANSFER_FEATURES of a launch (module docstring)."""
    c = ceiling.ceiling_us
    active = max(ceiling.active_ctas, 1)
    # CTAs resident on the busiest SM at once: its occupancy, or fewer when the grid is small.
    resident = min(max(ceiling.ctas_per_sm, 1), math.ceil(active / spec.sms))
    # Bytes in flight, by proxy: the DRAM bytes of the CTAs resident on one SM (how a CTA's bytes spread
    # over its main-loop iterations is not in the demand).
    dram_per_cta = demand.dram_bytes / active
    lbp = spec.dram_tbs * 1e12 / spec.sms * _DRAM_LATENCY_S  # bytes one SM must have in flight to stream
    instructions = _instructions(demand)
    working_set = demand.working_set_bytes if demand.working_set_bytes is not None else demand.dram_bytes
    shares = sorted(((t or 0.0) / c if c else 0.0 for p, t in ceiling.pipelines.items()
                     if p not in ("launch", "l2")), reverse=True)
    expected = demand.expected
    spread = 0.0
    if expected is not None:
        # Warp instructions and bytes / 32 (a warp's 32 lanes) on one scale: how much more work the generic
        # path expects than the floor it can prove.
        floor_work = _instructions(demand) + demand.dram_bytes / 32
        spread = math.log(max(_instructions(expected) + expected.dram_bytes / 32, 1.0) / max(floor_work, 1.0))
    notes = " ".join(ceiling.notes)
    row = {
        "occupancy_warps": resident * demand.warps_per_cta / spec.max_warps_per_sm,
        "log_inflight_vs_lbp": _log(resident * dram_per_cta / lbp),
        "log_instructions_per_byte": _log(32 * instructions / demand.dram_bytes if demand.dram_bytes else 0.0),
        "log_instructions_per_warp": _log(instructions / active / max(demand.warps_per_cta, 1)),
        "log_working_set_vs_l2": _log(working_set / spec.l2_bytes if working_set else 0.0),
        "share_launch": (ceiling.pipelines.get("launch") or 0.0) / c if c else 0.0,
        "share_second": shares[1] if len(shares) > 1 else 0.0,
        "share_sum": sum(shares),
        "log_expected_over_floor": spread,
        "generic_path": 1.0 if demand.source.startswith("generic") else 0.0,
        "log_spill": _log(demand.local_bytes),
        # DRAM bytes as a profiler would count them (re-reads past the L2, outputs left in it: ceilings.dram)
        # over the compulsory bytes of the floor; 0 where the demand has no access trace (exact families).
        "log_expected_dram_vs_floor": _expected_dram_vs_floor(demand, ceiling, spec),
    }
    # Derived from the above and the ceiling (RESULTS 33 step 3, chosen on a design split of three libraries):
    # the expected DRAM time against the ceiling, the whole grid against the machine, the latency terms.
    expected_dram_us = (ceiling.pipelines.get("dram") or 0.0) * math.exp(row["log_expected_dram_vs_floor"])
    row.update({
        "share_expected_dram": expected_dram_us / c if c else 0.0,
        "log_expected_dram_vs_ceiling": _log(expected_dram_us / c if c else 0.0),
        "log_grid_ctas_per_sm": _log(active / spec.sms),
        "log_ceiling_per_wave": _log(c / max(ceiling.waves, 1e-3)),
        "log_grid_warps_vs_capacity": _log(active * demand.warps_per_cta / (spec.sms * spec.max_warps_per_sm)),
        "share_latency": max(ceiling.pipelines.get("chain") or 0.0, ceiling.pipelines.get("launch") or 0.0) / c
        if c else 0.0,
    })
    for flag, phrases in _NOTE_FLAGS.items():
        row[flag] = 1.0 if any(p in notes for p in phrases) else 0.0
    return row
