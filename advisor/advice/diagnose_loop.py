"""Causes of `advisor diagnose` read off a measured loop probe: the K loop's achievable rate and the
per-CTA fixed cost of a tiled kernel, measured on the GPU by `benchmarks/moe_loop_probe.py`.

**The probe.** For each loop shape (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) the kernel runs a
synthetic launch of exactly one wave (SMs x c CTAs, c the CTAs one SM holds), every CTA with real rows
and its operands L2-resident, at two K: the time is launch + fixed + trips x step, so the difference
gives `step` (one K step of c co-resident CTAs: MMA issue and waits, barriers, operand loads from L2,
shared-memory staging) and the intercept gives the fixed cost of a round of c CTAs (index loads,
pipeline fill, drain, epilogue, exit). No sweep row is read: the constants are the probe's.

**The causes.**
- *K-loop rate*: the busiest SM's CTA-steps at the probe's rate (c per `step`) past its binding work
  at the calibrated rates (the ideal's terms, padding and tail included) and past what operand staging
  already named: the tensor pipe's achievable rate for this tile shape in this loop, below the
  calibrated dense rate (wgmma issue and wait per warpgroup, barriers, address arithmetic).
- *CTA ramp*: the probe's fixed cost per round of CTAs, exposed as the fill/drain and epilogue causes
  are (every CTA at one CTA per SM, once when CTAs share an SM), past what those two causes named.
The probe feeds the loop from L2; what DRAM adds (latency in the fill, the DRAM time) stays with the
other causes. A probe measured on one GPU is used for the GPUs of the same compute capability with a
note (the H200 has the H100's SM and clocks: an assumption).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

PROBES = Path(__file__).resolve().parent / "loop_probes"


@dataclass(frozen=True)
class LoopTiming:
    """One loop shape's probe: c co-resident CTAs per SM, one K step of all c, the fixed cost of a round
    of c (launch floor removed), and where it was measured."""

    ctas_per_sm: int
    step_us: float
    fixed_us: float
    gpu: str
    dram_segment_tbs: dict  # DRAM read rate (TB/s) of row segments of so many bytes, and "contiguous"


@functools.lru_cache(maxsize=8)
def _probe_files(arch: int) -> tuple[dict, ...]:
    out = []
    for path in sorted(PROBES.glob("*.json")):
        doc = json.loads(path.read_text())
        if doc.get("arch") == arch:
            out.append(doc)
    return tuple(out)


def loop_key(tiles: tuple[int, int, int], num_warps: int, num_stages: int) -> str:
    return f"M{int(tiles[0])} N{int(tiles[1])} K{int(tiles[2])} w{int(num_warps)} s{int(num_stages)}"


def probe_timing(launch, arch: int, tiles, num_warps: int, num_stages: int, launch_us: float,
                 clock_fraction: float) -> LoopTiming | None:
    """The probe of `launch`'s kernel (name and the constexprs the probe fixed) at this loop shape on a GPU
    of compute capability `arch`, None where none was measured. The probe's short launches run at the
    boost clock; its times are taken at `clock_fraction` of it (the sustained clock under tensor load
    the operand-staging cause also takes, advisor/advice/diagnose_causes.py)."""
    if launch is None or not tiles:
        return None
    constexprs = dict(launch.constexprs)
    for doc in _probe_files(arch):
        if doc["kernel"] != launch.kernel or any(constexprs.get(k) != v for k, v in doc["constexprs"].items()):
            continue
        row = doc["loops"].get(loop_key(tiles, num_warps, num_stages))
        if row is None:
            return None
        k1, k2 = doc["k_steps"]
        trips1, trips2 = k1 / tiles[2], k2 / tiles[2]
        step = (row["us"][1] - row["us"][0]) / (trips2 - trips1)
        fixed = row["us"][0] - trips1 * step - launch_us
        return LoopTiming(int(row["ctas_per_sm"]), max(step, 0.0) / clock_fraction,
                          max(fixed, 0.0) / clock_fraction, doc["gpu"], doc.get("dram_segment_tbs", {}))
    return None


def loop_rate(timing: LoopTiming, busiest_ctas: int, trips: float, busiest_main_us: float,
              staging_us: float) -> tuple[float, str]:
    """(estimate in us, reason) of the busiest SM's K loops at the probe's rate past its binding work and
    the operand staging already named."""
    per_step = timing.step_us / timing.ctas_per_sm          # one CTA-step at c co-resident CTAs
    loop_us = busiest_ctas * trips * per_step
    est = max(0.0, loop_us - busiest_main_us - staging_us)
    why = (f"the loop probe ({timing.gpu}) runs one K step of {timing.ctas_per_sm} co-resident CTA(s) in "
           f"{timing.step_us * 1e3:.0f} ns fed from L2: the busiest SM's {busiest_ctas} CTA(s) x {trips:g} steps take "
           f"{loop_us:.1f} us against {busiest_main_us:.1f} us of binding work at the calibrated rates"
           + (f" and {staging_us:.1f} us of operand staging" if staging_us > 0 else ""))
    return est, why


def cta_ramp(timing: LoopTiming, exposed: int, named_us: float, sm_loop_us: float,
             busiest_main_us: float) -> tuple[float, str]:
    """(estimate in us, reason) of the probe's fixed cost per round of CTAs, exposed `exposed` times, past
    what fill/drain and the epilogue named (`named_us`), and only where the busiest SM's timeline (its
    loops, `sm_loop_us`, then the exposed costs) passes the binding work (`busiest_main_us`, DRAM's
    included): in a DRAM-bound launch other SMs stream while one ramps."""
    total = exposed * timing.fixed_us
    visible = max(0.0, min(total, sm_loop_us + total - max(busiest_main_us, sm_loop_us)))
    why = (f"the loop probe's fixed cost per round of {timing.ctas_per_sm} CTA(s) (index loads, fill, drain, "
           f"epilogue, exit; operands from L2) is {timing.fixed_us:.2f} us, exposed {exposed}x: {total:.1f} us, "
           f"{visible:.1f} us of it past the binding work ({busiest_main_us:.1f} us), of which fill/drain and the "
           f"epilogue named {named_us:.1f}")
    return max(0.0, visible - named_us), why


def dram_slab_reads(timing: LoopTiming, segment_bytes: int, weight_bytes: float, dram_us: float,
                    binding_us: float) -> tuple[float, str]:
    """(estimate in us, reason) of the weights read as row segments of `segment_bytes` (one K step of a
    slab's rows, rows K apart) at the slab probe's rate relative to its contiguous read: the extra DRAM
    time, where DRAM so lengthened passes the binding work (`binding_us`, the loop included)."""
    segment_bytes = int(segment_bytes)
    rate, contiguous = timing.dram_segment_tbs.get(str(segment_bytes)), timing.dram_segment_tbs.get("contiguous")
    if not rate or not contiguous:
        return 0.0, f"no slab probe of {segment_bytes} B row segments"
    extra = max(0.0, weight_bytes / 1e6 * (1.0 / rate - 1.0 / contiguous))   # bytes / (TB/s) -> us
    why = (f"{weight_bytes / 1e6:.0f} MB of weights read in {segment_bytes} B row segments: the slab probe reads them "
           f"at {rate:.2f} TB/s against {contiguous:.2f} contiguous ({timing.gpu}), {extra:.1f} us more DRAM time; "
           f"DRAM {dram_us + extra:.1f} us against {binding_us:.1f} us of binding work")
    return max(0.0, min(extra, dram_us + extra - binding_us)), why


def loop_causes(timing: LoopTiming, named: dict[str, float], busiest_ctas: int, trips: float, exposed: int,
                busiest_main_us: float, busiest_sm_us: float) -> list[tuple[str, float, str]]:
    """The K-loop rate and CTA ramp estimates, given the estimates named before them (`named`), the busiest
    SM's binding work with DRAM (`busiest_main_us`) and without it (`busiest_sm_us`, its own pipes)."""
    staging = named.get("operand staging", 0.0)
    out = [("K-loop rate", *loop_rate(timing, busiest_ctas, trips, busiest_main_us, staging))]
    # The SM's timeline (its loops, then its exposed fixed costs) against DRAM's: a ramp shows only where
    # the SM's timeline passes DRAM's (other SMs keep DRAM busy meanwhile).
    sm_loop = max(busiest_ctas * trips * timing.step_us / timing.ctas_per_sm, busiest_sm_us + staging)
    fill_and_epilogue = named.get("fill/drain", 0.0) + named.get("epilogue", 0.0)
    out.append(("CTA ramp", *cta_ramp(timing, exposed, fill_and_epilogue, sm_loop, busiest_main_us)))
    return out


def probe_note(timing: LoopTiming, gpu_name: str, clock_fraction: float) -> str:
    same = gpu_name in timing.gpu
    return (f"K-loop rate, CTA ramp and DRAM slab reads from the loop probe measured on {timing.gpu} (operands from "
            f"L2; its times taken at {clock_fraction:.2f} of the boost clock it ran at)"
            + ("" if same else f"; {gpu_name} taken as the same SM at the same clock, and its DRAM as reading row "
               "segments at the probe GPU's ratio to contiguous reads"))
