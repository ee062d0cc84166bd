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
other causes. Each kernel variant has its own probe file (`kernels/fused_moe_fused.py`'s persistent and
fused forms included), so `--compare` sees both sides of a kernel change. A probe of the GPU itself is
taken first; else one of another GPU of the same compute capability, with a note.

**Rounds.** A probe that also ran two rounds per SM (R = 2: another wave of CTAs the hardware refills,
or another tile of the same programs in a persistent loop) gives the fixed cost of a further round apart
from the first one's (which also holds the CTAs' launch): the ramp is first + (rounds - 1) x further.

**Clock.** The probe's short launches run near the boost clock, the sweeps' back-to-back graphs of heavy
launches under the power limit well below it. A probe that recorded the SM clock (clock64 against event
time, around each loop shape; benchmarks/moe_probe_clock.py) and the clock of the sweeps' protocol on a
heavy launch has its times scaled by their ratio; an older probe by the sustained-clock fraction of
ANCHORS section 6.
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
    fixed_us: float         # the first round's (with the CTAs' launch)
    gpu: str
    dram_segment_tbs: dict  # DRAM read rate (TB/s) of row segments of so many bytes, and "contiguous"
    next_fixed_us: float | None = None  # each further round's, where the probe ran two rounds
    clock: str = ""         # how the probe's times were brought to the sweeps' clock
    # What two probes of one K loop differ by (the probe file's "resolution": a relative step, us per first
    # and per further round, already at the sweeps' clock): changes under it are not resolved.
    resolution: dict | None = None

    def ramp_us(self, rounds: int) -> float:
        """Fixed costs of `rounds` rounds of CTAs (or of tiles of one persistent program)."""
        if rounds <= 0:
            return 0.0
        further = self.fixed_us if self.next_fixed_us is None else self.next_fixed_us
        return self.fixed_us + (rounds - 1) * further


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


def _probe_doc(launch, arch: int, gpu_name: str | None) -> dict | None:
    """The probe of `launch`'s kernel and variant (the constexprs the probe fixed, among the launch's constexprs
    or its config: a launch read from its source files flags named like tiles, BLOCK_SCALED, TILE_SCALES, with
    the config): the GPU's own first, else another GPU's of the same compute capability."""
    constexprs = {**launch.config.params, **dict(launch.constexprs)}
    docs = [d for d in _probe_files(arch) if d["kernel"] == launch.kernel
            and all(constexprs.get(k) == v for k, v in d["constexprs"].items())]
    docs.sort(key=lambda d: d["gpu"] != gpu_name)
    return docs[0] if docs else None


def probe_timing(launch, arch: int, tiles, num_warps: int, num_stages: int, launch_us: float,
                 clock_fraction: float, gpu_name: str | None = None,
                 tensor_load: float | None = None) -> LoopTiming | None:
    """The probe of `launch`'s kernel at this loop shape on a GPU of compute capability `arch` (named
    `gpu_name`: its own probe first), None where none was measured. Times are brought to the sweeps' clock:
    by the recorded ratio of the probe's SM clock to the sweeps' protocol's, else taken at `clock_fraction`
    of the boost clock the probe is assumed to have run at (the sustained clock operand staging takes,
    advisor/advice/diagnose_causes.py). Where the probe file also gives the tensor load of the launch its
    sweep clock was read on, and `tensor_load` (the diagnosed launch's tensor-pipe time at the calibrated
    rate over its time) is given, the clock drop is taken in proportion to the load, up to the
    reference's: the power limit, which sets the clock, is reached by tensor work."""
    if launch is None or not tiles:
        return None
    doc = _probe_doc(launch, arch, gpu_name)
    row = doc["loops"].get(loop_key(tiles, num_warps, num_stages)) if doc else None
    if row is None:
        return None
    k1, k2 = doc["k_steps"]
    trips = (k1 / tiles[2], k2 / tiles[2])
    us, us2 = row["us"], row.get("us_r2")
    step = (us[1] - us[0]) / (trips[1] - trips[0])
    if us2:  # two rounds: their slope is two rounds' steps; both slopes measure the same step
        step = (step + (us2[1] - us2[0]) / (trips[1] - trips[0]) / 2) / 2
    fixed = us[0] - trips[0] * step - launch_us
    further = (sum(us2) - sum(us)) / 2 - (trips[0] + trips[1]) / 2 * step if us2 else None
    # One clock for the whole probe (its median): nvidia-smi read the boost clock throughout both probes,
    # while single clock64 readings around one loop shape scattered by the spin's own launch jitter.
    clocks = doc.get("clock", {})
    probe_mhz, sweep_mhz = clocks.get("probe_median_mhz"), clocks.get("sweep_protocol_mhz")
    reference_load = clocks.get("sweep_protocol_tensor_load")
    if probe_mhz and sweep_mhz:
        scale = probe_mhz / sweep_mhz
        clock = (f"its times scaled by its SM clock ({probe_mhz:.0f} MHz) over the sweeps' protocol's on a heavy "
                 f"launch ({sweep_mhz:.0f} MHz), both clock64 against event time")
        if reference_load and tensor_load is not None:
            weight = min(1.0, max(tensor_load, 0.0) / reference_load)
            scale = 1.0 + (scale - 1.0) * weight
            clock += (f", in proportion to the tensor load ({tensor_load:.2f} against the heavy launch's "
                      f"{reference_load:.2f}): x{scale:.2f}")
    else:
        scale = 1.0 / clock_fraction
        clock = f"its times taken at {clock_fraction:.2f} of the boost clock it is assumed to have run at"
    res = doc.get("resolution")
    resolution = ({"step_rel": res["step_rel"], "first_us": res["first_us"] * scale,
                   "further_us": res["further_us"] * scale} if res else None)
    return LoopTiming(int(row["ctas_per_sm"]), max(step, 0.0) * scale, max(fixed, 0.0) * scale, doc["gpu"],
                      doc.get("dram_segment_tbs", {}),
                      None if further is None else max(further, 0.0) * scale, clock, resolution)


def resolution_bands(timing: LoopTiming, busiest_ctas: int, trips: float, exposed: int) -> dict[str, float]:
    """us under which a change of the K-loop rate or CTA ramp estimate between two probed kernels is not
    resolved: the probe file's relative step difference over the busiest SM's loops, and its first- and
    further-round differences over the exposed rounds (none where the file gives no resolution)."""
    r = timing.resolution
    if not r:
        return {}
    loop_us = busiest_ctas * trips * timing.step_us / timing.ctas_per_sm
    ramp = r["first_us"] + max(exposed - 1, 0) * r["further_us"] if exposed > 0 else 0.0
    return {"K-loop rate": r["step_rel"] * loop_us, "CTA ramp": ramp}


def loop_rate(timing: LoopTiming, busiest_ctas: int, trips: float, busiest_main_us: float,
              staging_us: float, scaling_us: float = 0.0) -> tuple[float, str]:
    """(estimate in us, reason) of the busiest SM's K loops at the probe's rate past its binding work and
    what the loop's own causes already named (operand staging, MMA-result scaling: the probe's step holds both)."""
    per_step = timing.step_us / timing.ctas_per_sm          # one CTA-step at c co-resident CTAs
    loop_us = busiest_ctas * trips * per_step
    est = max(0.0, loop_us - busiest_main_us - staging_us - scaling_us)
    named = [f"{us:.1f} us of {name}" for name, us in (("operand staging", staging_us),
                                                        ("MMA-result scaling", scaling_us)) if us > 0]
    why = (f"the loop probe ({timing.gpu}) runs one K step of {timing.ctas_per_sm} co-resident CTA(s) in "
           f"{timing.step_us * 1e3:.0f} ns fed from L2: the busiest SM's {busiest_ctas} CTA(s) x {trips:g} steps take "
           f"{loop_us:.1f} us against {busiest_main_us:.1f} us of binding work at the calibrated rates"
           + (f" and {' and '.join(named)}" if named else ""))
    return est, why


def cta_ramp(timing: LoopTiming, exposed: int, named_us: float, sm_loop_us: float,
             busiest_main_us: float) -> tuple[float, str]:
    """(estimate in us, reason) of the probe's fixed cost per round of CTAs, exposed `exposed` times, past
    what fill/drain and the epilogue named (`named_us`), and only where the busiest SM's timeline (its
    loops, `sm_loop_us`, then the exposed costs) passes the binding work (`busiest_main_us`, DRAM's
    included): in a DRAM-bound launch other SMs stream while one ramps."""
    total = timing.ramp_us(exposed)
    visible = max(0.0, min(total, sm_loop_us + total - max(busiest_main_us, sm_loop_us)))
    per_round = (f"{timing.fixed_us:.2f} us" if timing.next_fixed_us is None else
                 f"{timing.fixed_us:.2f} us for the first, {timing.next_fixed_us:.2f} us for each further one")
    why = (f"the loop probe's fixed cost per round of {timing.ctas_per_sm} CTA(s) (index loads, fill, drain, "
           f"epilogue, exit; operands from L2) is {per_round}, exposed {exposed}x: {total:.1f} us, "
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
    staging, scaling = named.get("operand staging", 0.0), named.get("MMA-result scaling", 0.0)
    out = [("K-loop rate", *loop_rate(timing, busiest_ctas, trips, busiest_main_us, staging, scaling))]
    # The SM's timeline (its loops, then its exposed fixed costs) against DRAM's: a ramp shows only where
    # the SM's timeline passes DRAM's (other SMs keep DRAM busy meanwhile).
    sm_loop = max(busiest_ctas * trips * timing.step_us / timing.ctas_per_sm, busiest_sm_us + staging + scaling)
    fill_and_epilogue = named.get("fill/drain", 0.0) + named.get("epilogue", 0.0)
    out.append(("CTA ramp", *cta_ramp(timing, exposed, fill_and_epilogue, sm_loop, busiest_main_us)))
    return out


def probe_note(timing: LoopTiming, gpu_name: str) -> str:
    same = gpu_name in timing.gpu
    return (f"K-loop rate, CTA ramp and DRAM slab reads from the loop probe measured on {timing.gpu} (operands from "
            f"L2; {timing.clock})"
            + ("" if same else f"; {gpu_name} taken as the same SM at the same clock, and its DRAM as reading row "
               "segments at the probe GPU's ratio to contiguous reads"))
