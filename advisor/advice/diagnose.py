"""Where a launch loses time: the gap between the ideal and the measured (or predicted) time, split
into named causes that the ceiling's own terms quantify.

The times, bottom up:
- **ideal**: the launch's useful work spread evenly over the chip at its sustained rates (useful
  tensor FLOPs where the kernel family knows them, the compulsory DRAM bytes, every other pipeline's
  total) plus the launch floor: what RESULTS and the issues call the roofline floor;
- **ceiling**: the advisor's ceiling of this config (padded tiles, the busiest SM); shown, not used
  as a base: it takes the busiest SM at its boost peak, so it may lie below ideal + padding + tail;
- **time**: measured (`--measured`, or `--measure` on a GPU), else the latency model's prediction.

The causes, each a time estimate in us with a one-line reason, in this order, each capped at what is
left of the gap (so they never sum past it); "unexplained" is the rest:
1. padding: tile rows past each expert's (or the problem's) real rows, when the tensor pipe binds;
2. exit-only CTAs: CTAs launched only to exit, each an L2 round trip in a CTA slot; and grid dispatch: where an
   empty kernel of the launch's grid and CTA size (calibrated, `ceilings.latency_floor`) takes longer than the
   ideal, the excess (less the exit-only CTAs' part of it);
3. tail wave and imbalance: the busiest SM's work against the average SM's (`Demand.busiest_sm_work`);
4. fill and drain of the K loop: per CTA, one load latency plus the shorter of a trip's load and a
   trip's work (the software pipeline's prologue and epilogue, whatever its num_stages); exposed for
   every CTA at one CTA per SM, once when several CTAs share an SM and hide one another;
5. epilogue: the output tile leaving the SM after the loop, at the SM's share of the L2 rate;
6. memory latency: num_stages - 1 operand tiles in flight per CTA, times the CTAs an SM holds, against
   the bytes Little's law needs in flight (latency x the rate the binding pipeline consumes them);
7. operand staging: the shared-memory bytes an MMA loop (warpgroup or warp-level) writes and re-reads,
   at 128 B per clock at the sustained clock, past the busiest SM's binding work
   (advisor/advice/diagnose_causes.py);
8. K-loop rate: the busiest SM's K steps at the rate a measured loop probe of this kernel and loop shape
   reached (operands from L2) past the binding work and operand staging (advisor/advice/diagnose_loop.py);
9. CTA ramp: the probe's fixed cost per round of CTAs, exposed as fill/drain is, past fill/drain and the
   epilogue, where the SM's timeline passes DRAM's (same module);
10. L2 re-reads: weight slabs read again from DRAM when the CTAs sharing them run waves apart past the
   L2 size in the grouped launch order (advisor/advice/diagnose_l2.py);
11. DRAM writes: the output's bytes at the write cost the calibration's read/write and read probes imply,
   past the binding work (advisor/advice/diagnose_causes.py);
12. atomics: the bytes the launch's global reductions and atomics add (RED/ATOM in the SASS, vector forms
   whole, times their executions), at the calibration's atomic-add rate into a buffer on the same side of
   the L2 as the tensors the kernel adds into, counted in full (advisor/advice/diagnose_causes.py);
13. DRAM slab reads: the weights read as one K step's row segments at the probe's measured rate for such
   segments against its contiguous rate, past the binding work (advisor/advice/diagnose_loop.py);
14. serialisation the SASS shows: calls of ptxas's 64-bit division/remainder subroutine, register
   spills (local loads and stores);
15. unexplained.
Two diagnoses side by side (a change's before and after): advisor/advice/diagnose_compare.py.
A family's shape may describe a kernel variant beyond its tiles (kernels/moe_fused_demand.py's spec does):
`output_tile_bytes(config)` (what one tile's epilogue writes), `output_dram_bytes()` (an output written once
however many tiles add into it), `mma_dots` (dots per K step over one A tile) and `persistent` (tiles ordered
over the real M blocks, waves no wider than the programs); without them a tile writes BLOCK_M x BLOCK_N.

Load latencies and the sustained clock are figures for Hopper (cited below and in diagnose_causes);
on other GPUs causes 2, 4, 6, 7, 8, 9 and 12 are left out with a note, as are 8, 9 and 12 wherever no
loop probe of the kernel and loop shape was measured. Every assumption that
changes a number is a note on the Diagnosis.
About 520 lines: the causes, the SASS reading they need and the text bar share one model (each cause's
estimate reads the ones before it); causes that need the tile's MMA geometry live in
advisor/advice/diagnose_causes.py, those read off a measured loop probe in advisor/advice/diagnose_loop.py.
"""

from __future__ import annotations

import math
import re
import textwrap
from dataclasses import dataclass, field

from advisor.advice.diagnose_causes import (
    SUSTAINED_CLOCK_FRACTION,
    atomic_bytes,
    atomic_rates,
    atomics,
    dram_writes,
    load_latency_cycles,
    operand_staging,
    read_write_rates,
)
from advisor.advice.diagnose_l2 import l2_rereads, weight_reuse
from advisor.advice.diagnose_loop import dram_slab_reads, loop_causes, probe_note, probe_timing, resolution_bands
from ceilings.errors import AdvisorError
from ceilings.latency_floor import empty_kernel_floor
from ceilings.launch import Config
from ceilings.roofline import Ceiling, Demand

# Load-to-use latency on Hopper from pointer-chasing microbenchmarks on an H800 (the GH100 SM and
# memory system of the H100 SXM): about 480 cycles from global memory (DRAM), about 260 for an L2 hit
# (Luo et al., "Benchmarking and Dissecting the Nvidia Hopper GPU Architecture", IPDPS 2024,
# arXiv:2402.13499, memory-latency table). Cycles, by compute capability.
LOAD_LATENCY_CYCLES = {90: {"dram": 480.0, "l2": 260.0}}
# Dependent integer instructions (IMAD, IADD3, LOP3) issue about 4 cycles apart on one warp (same paper,
# instruction-latency table): the length of a software division's dependency chain per instruction.
DEPENDENT_ISSUE_CYCLES = 4.0
OVERNAMED = 1.10  # estimates past this multiple of the gap get a note (within it: the estimates' own resolution)
_SOFTWARE_DIVISION = re.compile(r"__cuda_sm\d+x?_(?:div|rem)_[su]64")
_INPUT_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "tf32": 4}
_SM_KEYS = ("tensor", "fma", "alu", "xu", "lsu", "fp64", "smem")
_FP_FMA = ("FFMA", "FMUL", "FADD", "FFMA32I", "FMUL32I", "FADD32I", "HFMA2", "HMUL2", "HADD2")


@dataclass
class Cause:
    name: str
    us: float            # the share of the gap attributed (capped so the causes never pass the gap)
    estimate_us: float   # the estimate before capping
    why: str
    resolution_us: float = 0.0  # a change under this between two diagnoses is not resolved (probe causes)

    def to_json(self) -> dict:
        return {"name": self.name, "us": round(self.us, 3), "estimate_us": round(self.estimate_us, 3),
                "why": self.why, "resolution_us": round(self.resolution_us, 3)}


@dataclass
class Diagnosis:
    label: str
    gpu: str
    config: Config
    time_us: float
    basis: str           # "measured" or "predicted"
    ideal_us: float
    ceiling_us: float
    causes: list[Cause]  # the named causes, then "unexplained"
    notes: list[str] = field(default_factory=list)

    @property
    def gap_us(self) -> float:
        return max(0.0, self.time_us - self.ideal_us)

    @property
    def unexplained_us(self) -> float:
        return next((c.us for c in self.causes if c.name == "unexplained"), 0.0)

    @property
    def explained_share(self) -> float:
        """Share of the gap between ideal and time that named causes account for."""
        return 1.0 - self.unexplained_us / self.gap_us if self.gap_us > 0 else 1.0

    @property
    def explained_share_above_ceiling(self) -> float:
        """Share of the gap between the ceiling and the time that named causes account for."""
        above = self.time_us - self.ceiling_us
        return max(0.0, 1.0 - self.unexplained_us / above) if above > 0 else 1.0

    def cause(self, name: str) -> float:
        return next((c.us for c in self.causes if c.name == name), 0.0)

    def estimate(self, name: str) -> float:
        """A cause's estimate before capping (0 where it was not estimated)."""
        return next((c.estimate_us for c in self.causes if c.name == name), 0.0)

    def to_json(self) -> dict:
        return {"launch": self.label, "gpu": self.gpu, "config": self.config.label(), "basis": self.basis,
                "time_us": round(self.time_us, 3), "ideal_us": round(self.ideal_us, 3),
                "ceiling_us": round(self.ceiling_us, 3), "gap_us": round(self.gap_us, 3),
                "causes": [c.to_json() for c in self.causes], "unexplained_us": round(self.unexplained_us, 3),
                "explained_share": round(self.explained_share, 4),
                "explained_share_above_ceiling": round(self.explained_share_above_ceiling, 4),
                "notes": self.notes}


# ------------------------------------------------------------------------------------------- entry points

def diagnose(subject, config: Config | None = None, time_us: float | None = None,
             basis: str = "measured") -> Diagnosis:
    """The diagnosis of `subject` (an advisor.advice.search.Subject) run with `config` (default: its
    current one) taking `time_us` (default: the model's prediction, basis "predicted"). The TUI's
    Explain screen calls this, or `diagnose_advice` for a row of `advisor suggest`."""
    from advisor.advice.subjects import LayerSubject
    from ceilings.validate import config_problem, launch_problem

    config = config or subject.current
    if time_us is not None and not (math.isfinite(time_us) and time_us > 0):
        raise AdvisorError(f"measured time {time_us}: give a positive number of microseconds, e.g. --measured 518")
    why = config_problem(config, subject.spec, subject.precheck)
    if why:
        raise AdvisorError(f"{subject.label}: {config.label()} cannot run on {subject.spec.name}: {why}")
    if isinstance(subject, LayerSubject):
        return _diagnose_layer(subject, config, time_us, basis)
    if time_us is None:
        (cand,) = subject.predict([config])
        ceiling, time_us, basis = cand.ceiling, cand.predicted_us, "predicted"
    else:
        (ceiling,) = subject.ceilings([config])
    why = launch_problem(ceiling, subject.spec)
    if why:
        raise AdvisorError(f"{subject.label}: {config.label()} cannot run on {subject.spec.name}: {why}")
    return _diagnose(subject, config, ceiling, time_us, basis)


def diagnose_ceiling(subject, config: Config, ceiling: Ceiling, time_us: float, basis: str = "measured",
                     read_sass: bool = True, m_runs: list[int] | None = None) -> Diagnosis:
    """The diagnosis of a ceiling computed elsewhere (a sweep row's exact routing, say) at `time_us`.
    `read_sass=False` skips the compile: no software division or spill cause, said in a note.
    `m_runs`: the active M blocks per weight matrix in M order (a routing's per-expert blocks), where
    known; else spread evenly over the shape's matrices."""
    if not (math.isfinite(time_us) and time_us > 0):
        raise AdvisorError(f"measured time {time_us}: give a positive number of microseconds, e.g. --measured 518")
    sass = None if read_sass else _Sass()
    dx = _diagnose(subject, config, ceiling, time_us, basis, sass, m_runs)
    if not read_sass:
        dx.notes.append("SASS not read: software division and register spills not estimated")
    return dx


def diagnose_advice(advice) -> Diagnosis | None:
    """The diagnosis of an Advice's current config at the time the advice judges it by (None when the
    config cannot run, or its ceiling carries no work to take apart)."""
    if advice.cannot_run or advice.current.ceiling.demand is None:
        return None
    cur = advice.current
    measured = advice.measured and cur.measured_us is not None
    return diagnose(advice.subject, cur.config, cur.measured_us if measured else None)


def _diagnose_layer(layer, config: Config, time_us: float | None, basis: str) -> Diagnosis:
    """Launches run one after another: each part diagnosed at its own predicted time (scaled so the parts
    add up to a measured layer time), causes added by name."""
    cands = [p.predict([config])[0] for p in layer.parts]
    predicted = sum(c.predicted_us for c in cands)
    scale = time_us / predicted if time_us is not None and predicted else 1.0
    parts = [_diagnose(p, config, c.ceiling, c.predicted_us * scale, basis if time_us is not None else "predicted")
             for p, c in zip(layer.parts, cands, strict=True)]
    causes: dict[str, Cause] = {}
    for d in parts:
        for c in d.causes:
            if c.name in causes:
                causes[c.name].us += c.us
                causes[c.name].estimate_us += c.estimate_us
                causes[c.name].why += f"; {c.why}"
                causes[c.name].resolution_us += c.resolution_us
            else:
                causes[c.name] = Cause(c.name, c.us, c.estimate_us, c.why, c.resolution_us)
    notes = [f"{len(parts)} launches one after another ({', '.join(p.label for p in layer.parts)}): causes added"]
    if time_us is not None:
        notes.append("the measured layer time split over its launches in proportion to their predicted times")
    notes += list(dict.fromkeys(n for d in parts for n in d.notes))
    return Diagnosis(layer.label, parts[0].gpu, config, sum(d.time_us for d in parts), parts[0].basis,
                     sum(d.ideal_us for d in parts), sum(d.ceiling_us for d in parts),
                     list(causes.values()), notes)


# ------------------------------------------------------------------------------------------- the model

@dataclass
class _Loop:
    """The K loop of one CTA: trips, operand bytes per trip, output bytes after the loop, stages."""

    trips: float
    bytes_per_trip: float
    epilogue_bytes: float
    stages: int
    tiles: tuple[int, int, int] | None = None  # (BLOCK_M, BLOCK_N, BLOCK_K) of a tiled config
    element_bytes: int = 2


@dataclass
class _Sass:
    division_calls: float = 0.0   # per warp
    division_body: int = 0        # instructions of the subroutine
    division_names: tuple = ()
    spill_bytes: float = 0.0      # per warp: local loads and stores
    atomic_bytes: float = 0.0     # per warp: bytes its global reductions and atomics add
    atomic_footprint: float = 0.0  # bytes of the floating tensors the kernel adds into
    store_footprint: float | None = None  # bytes of the tensors it writes with plain stores (None: not read)
    store_element: int = 0        # the widest element among them
    trips: float | None = None    # the longest loop whose bound the launch determines
    mma_loop_fma: float = 0.0     # per warp: FMA-pipe instructions in loops that issue warpgroup MMAs


def _per_sm_rate(key: str, demand: Demand, rates) -> float | None:
    """Sustained work per second of one SM on `key` (FLOPs, warp instructions, shared bytes)."""
    spec = rates.spec
    if key == "tensor":
        chip = rates.tensor_tflops.get(demand.tensor_dtype)
        if chip is None or demand.tensor_flops_per_cta is None:
            return None
        kind = spec.mma_sync_fraction if demand.tensor_kind == "mma_sync" else 1.0
        return chip * kind * 1e12 / spec.sms
    chip = {"fma": rates.fma_tflops * 1e12 / 2 / 32, "alu": rates.alu_ginst * 1e9, "xu": rates.xu_ginst * 1e9,
            "lsu": rates.lsu_ginst * 1e9, "fp64": rates.fp64_ginst * 1e9, "smem": rates.smem_tbs * 1e12}[key]
    return chip / spec.sms


def _diagnose(subject, config: Config, ceiling: Ceiling, time_us: float, basis: str,
              sass: _Sass | None = None, m_runs: list[int] | None = None) -> Diagnosis:
    d, rates, spec = ceiling.demand, subject.gpu.rates, subject.spec
    if d is None:
        raise AdvisorError(f"{subject.label}: its ceiling carries no demand (the work behind it): nothing to diagnose")
    sms, launch_us = spec.sms, rates.launch_us
    notes: list[str] = []
    rate = {k: _per_sm_rate(k, d, rates) for k in _SM_KEYS}
    rate = {k: r for k, r in rate.items() if r}
    dram_us = ceiling.pipelines.get("dram") or 0.0
    # shared memory's time is the L1 data stage's, global tile requests' lines included (as the ceiling counts it)
    key = {"smem": d.l1_key()}
    total = {k: d.total(key.get(k, k)) for k in rate}
    useful = subject.useful_flops() if "tensor" in rate else None
    ideal_work = dict(total, tensor=min(useful, total["tensor"])) if useful is not None else dict(total)
    if useful is None and total.get("tensor"):
        notes.append("useful tensor work unknown for this launch (masks not evaluated): padding not separated")

    def chip_us(work: dict[str, float]) -> dict[str, float]:
        return {k: w / (rate[k] * sms) * 1e6 for k, w in work.items()}

    ideal_t, padded_t = chip_us(ideal_work), chip_us(total)
    busiest_t = {k: d.busiest_sm_work(key.get(k, k), sms) / rate[k] * 1e6 for k in rate}
    ideal_main = max([*ideal_t.values(), dram_us])
    padded_main = max([*padded_t.values(), dram_us])
    busiest_main = max([*busiest_t.values(), dram_us])
    binding = max(busiest_t, key=busiest_t.get) if busiest_t and max(busiest_t.values()) >= dram_us else "dram"
    ideal_us = ideal_main + launch_us
    if busiest_main + launch_us > ceiling.ceiling_us * 1.001:
        notes.append(f"ideal + padding + tail ({busiest_main + launch_us:.1f} us) lies above the ceiling "
                     f"({ceiling.ceiling_us:.1f} us): the ceiling takes the busiest SM at its boost clock, the "
                     "diagnosis at the sustained rate")

    active = max(d.active_ctas, 1)
    per_sm = max(ceiling.ctas_per_sm, 1)
    busiest_ctas = math.ceil(active / sms)
    resident = min(per_sm, busiest_ctas)
    resident_per_sm = per_sm
    exposed = busiest_ctas if resident == 1 else 1  # CTAs whose fill and epilogue no other CTA hides
    clock_hz = rates.clock_ghz * 1e9
    latency, latency_source = load_latency_cycles(getattr(subject.gpu, "calibration", None),
                                                  LOAD_LATENCY_CYCLES.get(spec.arch), clock_hz)
    if latency is not None:
        notes.append(f"load latency {latency['l2']:.0f} cycles from L2, {latency['dram']:.0f} from DRAM: "
                     + (f"measured ({latency_source})" if latency_source else
                        "documented for the architecture (Luo et al.; `advisor calibrate` on this GPU measures it)"))
    sass = _read_sass(subject, config, notes) if sass is None else sass
    loop = _loop(subject, config, d, sass, notes)
    mem_rate = (rates.l2_tbs or rates.dram_tbs) * 1e12 / sms  # one SM's share of the L2 rate, bytes/s

    estimates: list[tuple[str, float, str]] = []
    bands: dict[str, float] = {}  # resolution of the probe causes' estimates
    pad_pct = 1 - ideal_work.get("tensor", 0) / total["tensor"] if total.get("tensor") else 0.0
    estimates.append(("padding", padded_main - ideal_main,
                      f"{pad_pct:.0%} of the tensor work is tile padding"
                      + ("" if padded_main > ideal_main else ", off the binding path (another pipeline binds)")))
    exit_ctas = max(0, d.ctas - d.active_ctas)
    if latency is not None:
        l2_us = latency["l2"] / clock_hz * 1e6
        waves = math.ceil(exit_ctas / (sms * per_sm)) if exit_ctas else 0
        estimates.append(("exit-only CTAs", waves * l2_us,
                          f"{exit_ctas} of {d.ctas} CTAs only exit: {waves} round(s) of CTA slots at one L2 "
                          f"round trip ({latency['l2']:.0f} cycles) each"))
    dispatch = empty_kernel_floor(rates.empty_kernel_us, d.ctas, d.warps_per_cta) if rates.empty_kernel_us else None
    if dispatch is not None and dispatch > ideal_us:
        # An empty kernel of the same grid and CTA size (measured) takes this long: starting and retiring that many
        # CTAs costs more than the launch's work at the chip's rates. The exit-only CTAs above are part of it.
        named_exits = sum(e for n, e, _ in estimates if n == "exit-only CTAs")
        estimates.append(("grid dispatch", max(0.0, dispatch - ideal_us - named_exits),
                          f"an empty kernel of {d.ctas} CTAs of {d.warps_per_cta} warps takes {dispatch:.1f} us on "
                          f"this GPU (calibrated), {dispatch - ideal_us:.1f} us past the ideal: fewer, larger CTAs "
                          "start and retire faster"))
    waves_f = active / sms
    estimates.append(("tail wave", busiest_main - padded_main,
                      f"the busiest SM runs {busiest_ctas} CTAs against {waves_f:.2f} on average ({binding} "
                      "work of the busiest SM over the average)"))
    if loop is not None and latency is not None and loop.trips > 0:
        frac = min(1.0, d.dram_bytes / d.l2_bytes) if d.l2_bytes else 1.0
        lat_s = (frac * latency["dram"] + (1 - frac) * latency["l2"]) / clock_hz
        trip_s = (busiest_main * 1e-6) / busiest_ctas / loop.trips  # one trip of one CTA at the binding rate
        load_s = loop.bytes_per_trip / mem_rate
        fill = lat_s + min(load_s, trip_s)
        estimates.append(("fill/drain", exposed * fill * 1e6,
                          f"per CTA {loop.trips:g} trips of {trip_s * 1e6:.3f} us; prologue and epilogue of the "
                          f"software pipeline cost {fill * 1e6:.2f} us ({lat_s * 1e6:.2f} us latency + one trip), "
                          f"exposed {exposed}x ({resident} CTA(s) per SM)"))
        epi = loop.epilogue_bytes / mem_rate
        estimates.append(("epilogue", exposed * epi * 1e6,
                          f"{loop.epilogue_bytes / 1024:.0f} KB of output per CTA leaves after the loop at the SM's "
                          f"share of L2 ({mem_rate / 1e9:.0f} GB/s): {epi * 1e6:.2f} us, exposed {exposed}x"))
        in_flight = resident * max(loop.stages - 1, 1) * loop.bytes_per_trip
        need_rate = loop.bytes_per_trip / trip_s if trip_s > 0 else 0.0
        needed = lat_s * need_rate
        loop_bytes = busiest_ctas * loop.trips * loop.bytes_per_trip
        loss = loop_bytes * (lat_s / in_flight - 1 / need_rate) if in_flight < needed and need_rate else 0.0
        estimates.append(("memory latency", loss * 1e6,
                          f"{in_flight / 1024:.0f} KB in flight per SM ({resident} CTA(s) x {max(loop.stages - 1, 1)}"
                          f" stage(s) x {loop.bytes_per_trip / 1024:.0f} KB) against {needed / 1024:.0f} KB that "
                          f"{lat_s * 1e6:.2f} us of latency x {need_rate / 1e9:.0f} GB/s needs"))
        if need_rate > mem_rate * 1.05:
            notes.append(f"the operand stream needs {need_rate * sms / 1e12:.1f} TB/s between L2 and the SMs, above "
                         f"the {mem_rate * sms / 1e12:.1f} TB/s L2 probe; not counted as a cause: kernels have moved "
                         "more than the probe reads (benchmarks/RESULTS.md section 4)")
    clock_fraction = SUSTAINED_CLOCK_FRACTION.get(spec.arch)
    shape = getattr(subject, "shape", None)
    if loop is not None and loop.tiles and "tensor" in rate and rates.smem_tbs and clock_fraction:
        estimates.append(("operand staging", *operand_staging(
            loop.tiles, config.num_warps, d.tensor_kind, loop.element_bytes, loop.trips, busiest_ctas,
            rates.smem_tbs * 1e12 / sms * clock_fraction, rate["tensor"], busiest_main,
            getattr(shape, "mma_dots", 1))))
        if estimates[-1][1] > 0:
            notes.append(f"operand staging takes shared memory at {clock_fraction:.2f} of the boost clock (the "
                         "sustained clock under tensor load, measured on an H100: ANCHORS section 6)")
    elif loop is not None and loop.tiles and clock_fraction is None:
        notes.append(f"no measured sustained clock for {spec.name}: operand staging not estimated")
    if sass.mma_loop_fma and "fma" in rate:
        # Work a K loop does with each step's product (block scales' promotion) waits for that step's warpgroup MMA,
        # and the next step's MMA for it: on the busiest SM, time beside the MMAs rather than under them.
        scaling_us = busiest_ctas * config.num_warps * sass.mma_loop_fma / rate["fma"] * 1e6
        estimates.append(("MMA-result scaling", scaling_us,
                          f"{sass.mma_loop_fma:g} floating-point FMA-pipe instructions a warp in the warpgroup-MMA "
                          f"loop (each step's product scaled before the next step's MMA), {busiest_ctas} CTAs on the "
                          "busiest SM: at most this, where the scaling does not overlap the MMAs"))
    probe = None
    if loop is not None and loop.tiles and clock_fraction:
        # The tensor pipe's share of the time (padded work at the calibrated rate): what sets the power.
        load = padded_t["tensor"] / max(time_us - launch_us, 1e-9) if "tensor" in padded_t else None
        probe = probe_timing(_launch(subject, config), spec.arch, loop.tiles, config.num_warps, config.num_stages,
                             launch_us, clock_fraction, spec.name, load)
    if probe is not None:
        estimates += loop_causes(probe, dict((n, e) for n, e, _ in estimates), busiest_ctas, loop.trips, exposed,
                                 busiest_main, max(busiest_t.values(), default=0.0))
        notes.append(probe_note(probe, spec.name))
        bands = resolution_bands(probe, busiest_ctas, loop.trips, exposed)
    elif loop is not None and loop.tiles:
        notes.append("no loop probe of this kernel and loop shape on this GPU: K-loop rate and CTA ramp not "
                     "estimated (benchmarks/moe_loop_probe.py measures one)")
    reuse = weight_reuse(shape, config, loop.tiles, d.active_ctas, d.ctas, m_runs) if loop is not None else None
    # A persistent grid's programs are the waves' width where they are fewer than the CTAs the SMs hold.
    wave_ctas = min(sms * resident_per_sm, d.ctas) if getattr(shape, "persistent", False) else sms * resident_per_sm
    if reuse is None and loop is not None and loop.tiles:
        notes.append("L2 re-reads not estimated: the launch's shape does not name its N (a kernel family's shape does)")
    if reuse is not None and spec.l2_bytes:
        estimates.append(("L2 re-reads", *l2_rereads(
            reuse[0], reuse[1], reuse[2], reuse[3], wave_ctas, loop.tiles,
            loop.trips * loop.tiles[2], loop.element_bytes, spec.l2_bytes, rates.dram_tbs * 1e12,
            loop.epilogue_bytes)))
        if estimates[-1][1] > 0:
            notes.append(f"L2 re-reads take the {spec.l2_bytes / 1e6:.0f} MB L2 as one least-recently-used cache and "
                         "CTAs in lockstep waves; the re-read bytes are counted on top of the loop (an upper bound)")
    rates_rw = read_write_rates(getattr(subject.gpu, "calibration", None))
    if loop is not None and loop.epilogue_bytes and rates_rw:
        tile_fraction = ideal_work["tensor"] / total["tensor"] if total.get("tensor") else 1.0
        written = active * loop.epilogue_bytes * tile_fraction
        if _generic(subject) and sass.store_footprint is not None and loop.tiles:
            # A launch read from its source: its tiles write the stored tensors' type (an fp8 GEMM's bf16 rows), at
            # most once each (a gated tile writes half its columns; atomics are their own cause).
            tiled = active * loop.tiles[0] * loop.tiles[1] * sass.store_element * tile_fraction
            written = min(tiled, sass.store_footprint)
        if getattr(shape, "output_dram_bytes", None) and shape.output_dram_bytes() is not None:
            written = shape.output_dram_bytes()  # atomics into one output: its bytes, not the tiles'
        rw_rate, read_rate, borrowed = rates_rw
        estimates.append(("DRAM writes", *dram_writes(written, rw_rate, read_rate, dram_us, busiest_main)))
        if borrowed:
            notes.append(f"DRAM writes priced by the read/write and read probes of {borrowed}: the calibration in "
                         "use has no read/write probe (`advisor calibrate` on this GPU measures it)")
    elif loop is not None and loop.epilogue_bytes:
        notes.append(f"no calibrated DRAM read/write probe for {spec.name}: DRAM writes not estimated "
                     "(`advisor calibrate` on this GPU measures it)")
    if sass.atomic_bytes:
        rates_atomic = atomic_rates(getattr(subject.gpu, "calibration", None))
        if rates_atomic and spec.l2_bytes:
            estimates.append(("atomics", *atomics(sass.atomic_bytes * config.num_warps * active,
                                                  sass.atomic_footprint, spec.l2_bytes, rates_atomic)))
        else:
            notes.append(f"no calibrated atomic-add probe for {spec.name}: atomics not estimated")
    if probe is not None and reuse is not None and dram_us:
        # The weights each used matrix streams once: its N x K (padded) slabs, within the compulsory bytes.
        weight_bytes = min(d.dram_bytes, sum(r > 0 for r in reuse[0]) * shape.n * loop.trips * loop.tiles[2]
                           * loop.element_bytes)
        # The SM's timeline past the binding work: what the causes on it (staging, loop, fill, epilogue, ramp) named.
        sm_extra = sum(e for n, e, _ in estimates if n in ("operand staging", "K-loop rate", "fill/drain", "epilogue",
                                                          "CTA ramp"))
        estimates.append(("DRAM slab reads", *dram_slab_reads(
            probe, loop.tiles[2] * loop.element_bytes, weight_bytes, dram_us, busiest_main + sm_extra)))
    if latency is None:
        notes.append(f"no documented load latency for {spec.name}: exit-only CTAs, fill/drain, epilogue and memory "
                     "latency not estimated")
    if sass.division_calls:
        chain = sass.division_calls * sass.division_body * DEPENDENT_ISSUE_CYCLES / clock_hz
        estimates.append(("software division", busiest_ctas * chain / resident * 1e6,
                          f"{sass.division_calls:g} call(s) per warp of {', '.join(sass.division_names)} "
                          f"({sass.division_body} dependent instructions; ptxas takes it for operands past 32 "
                          "bits: at most this)"))
    if sass.spill_bytes:
        spill = busiest_ctas * sass.spill_bytes * config.num_warps / (rates.smem_tbs * 1e12 / sms)
        estimates.append(("register spills", spill * 1e6,
                          f"{sass.spill_bytes * config.num_warps / 1024:.0f} KB of local loads and stores per CTA "
                          f"({d.local_bytes or 0} B per thread spilled) through the SM's L1"))
    elif d.local_bytes:
        notes.append(f"{d.local_bytes} B per thread of local memory, but no local loads or stores were counted")

    causes, left = [], max(0.0, time_us - ideal_us)
    if time_us < ideal_us:
        notes.append(f"the time ({time_us:.1f} us) is under the ideal ({ideal_us:.1f} us): nothing to explain")
    for name, estimate, why in estimates:
        share = min(max(estimate, 0.0), left)
        left -= share
        causes.append(Cause(name, share, max(estimate, 0.0), why, bands.get(name, 0.0)))
    causes.append(Cause("unexplained", left, left, "what the causes above do not account for"))
    named = sum(c.estimate_us for c in causes[:-1])
    if time_us > ideal_us and named > OVERNAMED * (time_us - ideal_us):
        # The shares are capped in order; say when the estimates themselves pass the gap (RESULTS 48: the probe
        # causes of short launches), so that "100% explained" is not read as every estimate being right.
        notes.append(f"the causes' estimates sum to {named / (time_us - ideal_us):.2f}x the gap: at least one is "
                     "too large; each is capped at what the ones listed before it left")
    return Diagnosis(subject.label, spec.name, config, time_us, basis, ideal_us, ceiling.ceiling_us, causes,
                     notes + list(ceiling.notes))


# ------------------------------------------------------------------------------------------- the launch

def _launch(subject, config: Config):
    from advisor.advice.subjects import FamilySubject, LaunchSubject

    if isinstance(subject, LaunchSubject):
        return subject.launch_for(config)
    if isinstance(subject, FamilySubject) and subject.family.describe_launch is not None:
        return subject.family.describe_launch(subject.shape, config, subject.gpu.arch)
    return None


def _generic(subject) -> bool:
    """A launch the advisor knows from its source and arguments (no kernel family's shape)."""
    from advisor.advice.subjects import LaunchSubject

    return isinstance(subject, LaunchSubject)


def _read_sass(subject, config: Config, notes: list[str]) -> _Sass:
    """Division calls, spill traffic and the longest determined loop, from the compiled SASS and TTGIR."""
    from ceilings.compile import compile_launch
    from ceilings.sass import weigh
    from ceilings.sass_map import access_bytes
    from ceilings.ttir_eval import loop_trip_counts

    launch = _launch(subject, config)
    if launch is None:
        notes.append("no launch to compile: serialisation in the SASS not read")
        return _Sass()
    try:
        compiled = compile_launch(launch, subject.gpu.arch)
        scalars = {k: v for k, v in launch.scalars if isinstance(v, int | bool)}
        trips = loop_trip_counts(compiled.ttgir, scalars)
        code, functions = weigh(compiled.sass, launch.kernel, trips)
    except AdvisorError as exc:
        notes.append(f"SASS not read ({exc}): serialisation not estimated")
        return _Sass()
    except Exception as exc:  # the compiler's own errors: the diagnosis goes on without the SASS
        notes.append(f"SASS not read ({type(exc).__name__}): serialisation not estimated")
        return _Sass()
    out = _Sass(trips=max((t for t in trips if t), default=None))
    names = set()
    for ins, times in code.instructions():
        if ins.opcode == "CALL" and ins.target and _SOFTWARE_DIVISION.search(ins.target):
            out.division_calls += times
            out.division_body = max(out.division_body, len(functions.get(ins.target, code.fn).instructions))
            names.add(ins.target)
        elif ins.opcode in ("LDL", "STL"):
            out.spill_bytes += times * access_bytes(ins)
        else:
            out.atomic_bytes += times * atomic_bytes(ins.opcode, ins.mods)
    out.division_names = tuple(sorted(names))
    out.mma_loop_fma = mma_loop_fma(code)
    from advisor.advice.operands import ELEMENT_BYTES
    from advisor.advice.stores import accumulated_tensors, stored_outputs
    from ceilings.compile import load_kernel

    fn = load_kernel(launch.source, launch.kernel)
    added = accumulated_tensors(fn, [(t.name, t.dtype) for t in launch.tensors]) if out.atomic_bytes else set()
    out.atomic_footprint = sum(t.numel * ELEMENT_BYTES.get(t.dtype, 4) for t in launch.tensors if t.name in added)
    stored = stored_outputs(fn)
    if stored is not None:
        plain = [t for t in launch.tensors if t.name in stored and t.name not in added]
        out.store_footprint = float(sum(t.numel * ELEMENT_BYTES.get(t.dtype, 4) for t in plain))
        out.store_element = max((ELEMENT_BYTES.get(t.dtype, 4) for t in plain), default=0)
    return out


def mma_loop_fma(code) -> float:
    """Floating-point FMA-pipe instructions one warp executes in the loops that issue warpgroup MMAs (weighted by
    their trips), each block once however deeply nested: what a K loop does with each step's product on the CUDA
    cores. Integer multiply-adds (addresses) issue on the same pipe but are not the product's work."""
    blocks: set[int] = set()
    for loop in code.loops:
        if any(ins.opcode.endswith("GMMA") for j in loop.blocks  # warpgroup MMAs, as ceilings.demand tells them
               for ins in code.fn.instructions[slice(*code.cfg.blocks[j])]):
            blocks |= set(loop.blocks)
    return float(sum(code.weights[j] for j in blocks if j in code.cfg.reachable
                     for ins in code.fn.instructions[slice(*code.cfg.blocks[j])] if ins.opcode in _FP_FMA))


def _loop(subject, config: Config, d: Demand, sass: _Sass, notes: list[str]) -> _Loop | None:
    """The K loop: for a tiled config (BLOCK_M/N/K), trips = per-CTA tensor FLOPs / one tile product's
    and the A and B tiles per trip; otherwise the longest determined loop of the IR and the demand's
    per-CTA L2 bytes per trip."""
    from advisor.advice.operands import operand_element_bytes
    from advisor.model.features import tile_sizes

    # Operand tiles hold the MMA's input type; without tensor work, the widest tensor of the launch.
    size = _INPUT_BYTES.get(d.tensor_dtype) if d.tensor_flops_per_cta else None
    if size is None:
        launch = _launch(subject, config)
        size = (operand_element_bytes(launch) or 2) if launch is not None else 2
    t = tile_sizes(config)
    bm, bn, bk = t["tile_m"], t["tile_n"], t["tile_k"]
    if bm and bn and bk and d.tensor_flops_per_cta:
        trips = d.tensor_flops_per_cta / (2 * bm * bn * bk)
        # A shape that knows its epilogue (a fused kernel variant's) says what one tile sends out.
        out_bytes = getattr(getattr(subject, "shape", None), "output_tile_bytes", None)
        epilogue = out_bytes(config) if out_bytes else bm * bn * size
        return _Loop(trips, (bm + bn) * bk * size, epilogue, config.num_stages, (bm, bn, bk), size)
    if sass.trips:
        per_cta = d.l2_bytes / max(d.active_ctas, 1)
        notes.append(f"no BLOCK_M/N/K tiles: the loop of {sass.trips:g} trips takes the demand's {per_cta / 1024:.0f} "
                     "KB per CTA evenly; no epilogue separated")
        return _Loop(float(sass.trips), per_cta / sass.trips, 0.0, config.num_stages)
    notes.append("no loop whose trip count the launch determines: fill/drain, epilogue and latency not estimated")
    return None


# ------------------------------------------------------------------------------------------- text

def render_lines(dx: Diagnosis, width: int = 80) -> list[str]:
    """The diagnosis as plain lines of at most `width` characters: a bar of us per cause."""
    head = f"{dx.label} on {dx.gpu}, {dx.config.label()}"
    lines = textwrap.wrap(head, width) + textwrap.wrap(
        f"{dx.basis} {dx.time_us:.1f} us; ceiling {dx.ceiling_us:.1f} us; ideal {dx.ideal_us:.1f} us (useful work "
        f"at the chip's sustained rates): gap {dx.gap_us:.1f} us, {dx.explained_share:.0%} explained "
        f"({dx.explained_share_above_ceiling:.0%} of the {max(0.0, dx.time_us - dx.ceiling_us):.1f} us above the "
        "ceiling)", width)
    name_w = 18
    bar_w = width - name_w - 8 - 4 - 1 - 4  # name, "%8.1f", " us ", " ", "100%"
    top = max((c.us for c in dx.causes), default=0.0) or 1.0
    lines.append("")
    for c in dx.causes:
        cells = c.us / top * bar_w
        bar = "█" * int(cells) + ("▌" if cells - int(cells) >= 0.5 else "")
        share = f"{c.us / dx.gap_us:4.0%}" if dx.gap_us else "  - "
        lines.append(f"{c.name:<{name_w}}{c.us:8.1f} us {bar:<{bar_w}} {share}".rstrip())
        if c.us > 0 or c.name != "unexplained":
            lines += textwrap.wrap(c.why, width, initial_indent="    ", subsequent_indent="    ")
    for note in dx.notes:
        lines += textwrap.wrap(f"note: {note}", width, subsequent_indent="      ")
    return lines
