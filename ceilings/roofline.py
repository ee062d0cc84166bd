"""Per-pipeline time of a launch's work on a GPU, the binding pipeline, and the ceiling.

A `Demand` is the work of one launch: for SM-local pipelines (tensor, fma, alu, xu, lsu, smem) the
work of one CTA that does the main work, and how many such CTAs there are; for the shared memory
system (L2, DRAM) chip-wide bytes. The busiest SM runs at least ceil(active CTAs / SMs) of those CTAs
(pigeonhole), so each SM-local pipeline needs at least that many CTAs' work divided by one SM's
rate. ceiling_us = the largest pipeline time + the launch floor (the measured time of an empty
kernel launched back to back in a CUDA graph), or, on the generic path, the measured time of an empty kernel
of the same grid and CTA size where that is larger (`ceilings.latency_floor`; the "launch" pipeline then
binds and holds it).

DRAM bytes are the demand's compulsory bytes (left out when the working set fits in the L2 and launches run
back to back), plus, of the bytes a launch writes in place (`Demand.rewritten_bytes`), what the L2 cannot still
hold dirty when it ends (`written_back_bytes`). Every byte is charged at the read rate: mixes of reads and
writes in the corpus's own kernels ran at 0.93-0.99 of it (benchmarks/RESULTS.md section 63).

When CTAs differ in work (`Demand.cta_classes`: a persistent grid-stride loop gives some CTAs one
row more; CTAs past a bound exit at once), the busiest SM's share of each pipeline is bounded below
by `busiest_sm_work`: the larger of the average over SMs and, for every k, the k+1 smallest of the
k x SMs + 1 largest CTAs (some SM runs k+1 of them), whatever the order the hardware hands them out.

Two floors do not belong to a pipeline (`issue_floors`; the generic path gives the work they need):
"issue": an SM's 4 sub-partitions issue at most one warp instruction a cycle each, whatever the pipe,
so the busiest SM's warp instructions / (4 x clock); "chain": a warp issues its next instruction no
sooner than its stall count allows (the control bits, `ceilings.sass.stall_count`) nor before the results it
waits on can have come (`ceilings.latency_floor`: measured least latencies of loads, shuffles, MUFU, barriers),
so it lasts at least its dependency path, and the busiest SM, with at most max_warps_per_sm warps
resident, at least its warps' sums over that many. Both at the boost clock, the highest the SM runs.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from ceilings.hardware import GPUSpec, Rates
from ceilings.latency_floor import empty_kernel_floor

# "issue" and "chain" come last so that the positions of the others (the model's binding_index) stay.
# fp64 last: a model's `binding_index` feature is a pipeline's place in this tuple.
PIPELINES = ("tensor", "fma", "alu", "xu", "lsu", "smem", "l2", "dram", "launch", "issue", "chain", "fp64")
# Warp schedulers (SM sub-partitions) per SM, each issuing at most one warp instruction a cycle: Volta
# to Blackwell (the Volta, Ampere and Hopper architecture whitepapers: "four processing blocks").
SUB_PARTITIONS = 4


@dataclass
class Demand:
    kernel: str
    ctas: int                          # CTAs launched
    active_ctas: int                   # CTAs that do the main work (the rest exit early)
    warps_per_cta: int
    tensor_flops_per_cta: float | None = 0.0  # None: the kernel does tensor work of unknown size
    tensor_dtype: str = "bf16"
    tensor_kind: str = "wgmma"         # "wgmma" (warpgroup MMA) or "mma_sync" (warp MMA)
    # Warp-level instructions per active CTA, by pipeline.
    instructions_per_cta: dict[str, float] = field(default_factory=dict)
    smem_bytes_per_cta: float = 0.0
    l2_bytes: float = 0.0              # chip-wide bytes between L2 and the SMs
    dram_bytes: float = 0.0            # chip-wide compulsory DRAM bytes
    shared_bytes: int | None = None    # per CTA, for occupancy
    registers: int | None = None       # per thread, for occupancy
    source: str = "semantic"
    notes: list[str] = field(default_factory=list)
    # CTAs grouped by identical work: (CTAs, per-CTA work: "tensor" FLOPs, warp instructions by
    # pipeline, "smem" bytes). None: every active CTA does the per-CTA work above.
    cta_classes: list[tuple[float, dict[str, float]]] | None = None
    working_set_bytes: float | None = None  # bytes the launch touches, for the warm-L2 test (None: dram_bytes)
    local_bytes: int | None = None     # local memory per thread (register spills)
    expected: Demand | None = None     # the expected work where this one is a floor (generic path)
    dram_traffic: object | None = None  # ceilings.dram.DramTraffic of the expected work (generic path)
    # Bytes written to tensors the launch also reads (in place), which dram_bytes counts once: the roofline
    # adds what of them the L2 cannot still hold dirty when the launch ends (`written_back_bytes`).
    rewritten_bytes: float = 0.0
    # Of the compulsory bytes, those loads (and atomics) read and those plain stores write (the generic path; 0:
    # not split), for comparison with a profiler's DRAM reads and writes (`demand_detail`).
    read_bytes: float = 0.0
    written_bytes: float = 0.0
    # (DRAM bytes, working set, rewritten bytes) as the shipped models were fitted on them, where the floor's
    # differ: an access masked by loaded data counted in full (RESULTS 63). None: the same (`for_model`).
    model_bytes: tuple[float, float, float] | None = None
    # What the GPU runs, where the generic path compiled it: a digest of the SASS, its registers, shared and local
    # memory, the warps per CTA and the grid. Two configs of one launch with the same digest are one program (a
    # num_stages with no loop to pipeline): one time for both. None: not known (an exact demand model).
    binary: str | None = None

    def for_model(self) -> Demand:
        """This demand with the bytes the shipped models were fitted on (`model_bytes`)."""
        if self.model_bytes is None:
            return self
        dram, working_set, rewritten = self.model_bytes
        return dataclasses.replace(self, dram_bytes=dram, working_set_bytes=working_set, rewritten_bytes=rewritten,
                                   model_bytes=None)

    def busiest_sm_work(self, key: str, sms: int) -> float:
        """A lower bound on the busiest SM's share of `key` ("tensor", a pipeline, "smem")."""
        if not self.cta_classes:
            per_cta = {"tensor": self.tensor_flops_per_cta or 0.0, "smem": self.smem_bytes_per_cta}.get(
                key, self.instructions_per_cta.get(key, 0.0))
            return math.ceil(self.active_ctas / sms) * per_cta if self.active_ctas else 0.0
        return busiest_sm_work([(n, w.get(key, 0.0)) for n, w in self.cta_classes], sms)

    def l1_key(self) -> str:
        """The work key of the L1 data stage: "l1" (shared-memory bytes plus 128 B per line a global tile request
        touches, `ceilings.tile_lines`) where the generic path counted it, else "smem"."""
        return "l1" if self.cta_classes and any("l1" in w for _, w in self.cta_classes) else "smem"

    def instructions(self, pipe: str) -> float:
        """Chip-wide warp instructions of a pipeline (`sm__inst_executed_pipe_*`)."""
        if self.cta_classes:
            key = "tensor_instructions" if pipe == "tensor" else pipe
            return sum(n * w.get(key, 0.0) for n, w in self.cta_classes)
        return self.active_ctas * self.instructions_per_cta.get(pipe, 0.0)

    def total(self, key: str) -> float:
        """Chip-wide `key` ("tensor" FLOPs, a pipeline's warp instructions, "smem" bytes)."""
        if self.cta_classes:
            return sum(n * w.get(key, 0.0) for n, w in self.cta_classes)
        per_cta = {"tensor": self.tensor_flops_per_cta or 0.0, "smem": self.smem_bytes_per_cta}.get(
            key, self.instructions_per_cta.get(key, 0.0))
        return self.active_ctas * per_cta


def busiest_sm_work(classes: list[tuple[float, float]], sms: int) -> float:
    """The least work the busiest of `sms` SMs can get, CTAs given as (count, work) pairs."""
    counts = np.asarray([max(0, round(n)) for n, _ in classes], dtype=np.int64)
    works = np.asarray([w for _, w in classes], dtype=float)
    if counts.sum() == 0:
        return 0.0
    order = np.argsort(-works)
    each = np.repeat(works[order], counts[order])  # every CTA's work, largest first
    prefix = np.concatenate([[0.0], np.cumsum(each)])
    k = np.arange((len(each) - 1) // sms + 1)
    # The k+1 smallest of the k*sms+1 largest: positions k*sms-k .. k*sms (0-based).
    grouped = prefix[k * sms + 1] - prefix[k * sms - k]
    return float(max(prefix[-1] / sms, grouped.max()))


@dataclass
class Ceiling:
    gpu: str
    kernel: str
    config: dict
    ceiling_us: float
    binding: str
    pipelines: dict[str, float | None]
    ctas: int
    active_ctas: int
    waves: float
    ctas_per_sm: int
    rates_source: dict[str, str]
    demand_source: str
    notes: list[str] = field(default_factory=list)
    demand: Demand | None = field(default=None, repr=False, compare=False)  # the work behind the ceiling
    # The same ceiling with the terms the shipped models were trained on: the chain floor by the warp and CTA
    # limits alone (before the compiled kernel's occupancy tightened it) and shared-memory time without the
    # global tile accesses' L1 wavefronts (RESULTS 62); None where they agree. The models' features come from it
    # (`advisor.model.features.feature_row`): fed the tighter chain, the transfer model ranked configs of
    # held-out sets worse (RESULTS 61).
    model_view: Ceiling | None = field(default=None, repr=False, compare=False)

    def to_json(self, detail: bool = False) -> dict:
        """The ARCHITECTURE.md contract, plus the active CTAs and where the numbers came from; with
        `detail`, the work behind it (`demand_detail`) to compare with a profiler."""
        doc = {"gpu": self.gpu, "kernel": self.kernel, "config": self.config,
                "ceiling_us": round(self.ceiling_us, 3), "binding": self.binding,
                "pipelines": {k: (None if v is None else round(v, 3)) for k, v in self.pipelines.items()},
                "ctas": self.ctas, "active_ctas": self.active_ctas, "waves": round(self.waves, 3),
                "ctas_per_sm": self.ctas_per_sm, "rates_source": self.rates_source,
                "demand_source": self.demand_source, "notes": self.notes}
        if detail and self.demand is not None:
            doc["detail"] = demand_detail(self.demand)
        return doc


_DETAIL_PIPES = ("tensor", "fma", "alu", "xu", "lsu", "fp64", "uniform", "cbu", "adu", "tma")


def demand_detail(demand: Demand) -> dict:
    """Chip-wide work of a launch as a profiler reports it: warp instructions by pipeline
    (`sm__inst_executed_pipe_*`), tensor FLOPs, bytes, resources and the CTAs that work; for the generic
    path the floor the ceiling uses and the expected work next to it."""

    def work(d: Demand) -> dict:
        return {"instructions": {p: round(d.instructions(p), 1) for p in _DETAIL_PIPES
                                 if p in d.instructions_per_cta or d.cta_classes},
                "tensor_flops": round(d.total("tensor"), 1),
                "bytes": {"l2": round(d.l2_bytes, 1), "dram": round(d.dram_bytes, 1),
                          "dram_read": round(d.read_bytes, 1), "dram_written": round(d.written_bytes, 1),
                          "shared": round(d.total("smem"), 1), "l1_data_stage": round(d.total(d.l1_key()), 1)},
                "working_set_bytes": round(d.working_set_bytes if d.working_set_bytes is not None else d.dram_bytes, 1),
                "ctas": d.ctas, "working_ctas": d.active_ctas}

    out = {"registers": demand.registers, "spill_bytes_per_thread": demand.local_bytes,
           "shared_bytes_per_cta": demand.shared_bytes, "warps_per_cta": demand.warps_per_cta,
           "floor": work(demand), "notes": list(demand.notes)}
    if demand.expected is not None:
        out["expected"] = work(demand.expected)
    return out


def issue_floors(demand: Demand, spec: GPUSpec) -> tuple[float | None, float | None, float | None]:
    """(issue, chain, chain by the limits) floors in us, or None where the demand has no issue counts (the exact
    families).

    issue: the busiest SM's warp instructions over SUB_PARTITIONS x the boost clock.
    chain: the larger of one warp's dependency path (any CTA that runs lasts that long) and the busiest
    SM's sum over its warps divided by the warps that can be resident at once: the warp and CTA limits and,
    where the demand carries them, the registers and shared memory of the compiled kernel. That is the binary
    that runs when the launch runs with this Triton (a floor is the floor of the binary timed: another
    Triton's assembler may allocate otherwise, benchmarks/RESULTS.md section 60), and `occupancy` counts no
    fewer CTAs than the driver fits, so the floor stays one.
    chain by the limits: the same with the warp and CTA limits alone, the chain the shipped models were trained on
    (`Ceiling.model_view`).
    """
    classes = demand.cta_classes
    if not classes or not any("issue" in work for _, work in classes):
        return None, None, None
    clock = spec.boost_clock_ghz * 1e9
    sms = spec.sms
    issue_us = demand.busiest_sm_work("issue", sms) / (SUB_PARTITIONS * clock) * 1e6
    longest = max((work.get("chain", 0.0) for n, work in classes if round(n) > 0), default=0.0)
    warps = max(demand.warps_per_cta, 1)
    by_limits = min(spec.max_warps_per_sm, spec.max_blocks_per_sm * warps)
    per_sm = occupancy(spec, warps, demand.registers, demand.shared_bytes)
    # a CTA that does not fit cannot launch: no residency to bound with
    resident = min(by_limits, per_sm * warps) if per_sm > 0 else by_limits
    busiest = demand.busiest_sm_work("warp_cycles", sms)

    def chain_us(warps_resident: int) -> float:
        return max(longest, busiest / warps_resident) / clock * 1e6

    return issue_us, chain_us(resident), chain_us(by_limits)


def _dram_us(demand: Demand, spec: GPUSpec, rates: Rates, warm_l2: bool, notes: list[str]) -> float:
    """The DRAM time of a demand's compulsory bytes (none where the working set fits in a warm L2) and of the
    in-place bytes the L2 cannot still hold dirty at the end, at the read rate; says why in `notes`."""
    dram_bytes = demand.dram_bytes
    # The working set is what the launch touches (the expected bytes where the DRAM bytes are a
    # floor): a floor that fits says nothing about whether the data does.
    working_set = demand.working_set_bytes if demand.working_set_bytes is not None else demand.dram_bytes
    if warm_l2 and spec.l2_bytes and dram_bytes and working_set <= spec.l2_bytes:
        dram_bytes = 0.0
        notes.append(f"warm L2: the {working_set / 1e6:.1f} MB working set fits in the {spec.l2_bytes >> 20} MB L2, "
                     "so back-to-back launches may not touch DRAM; DRAM time left out")
    rewritten = written_back_bytes(demand.rewritten_bytes, spec.l2_bytes)
    if rewritten:
        dram_bytes += rewritten
        notes.append(f"{demand.rewritten_bytes / 1e6:.1f} MB written in place: at most the {spec.l2_bytes >> 20} MB L2 "
                     f"can still hold them dirty when the launch ends, so {rewritten / 1e6:.1f} MB reach DRAM in it")
    return dram_bytes / (rates.dram_tbs * 1e12) * 1e6


def written_back_bytes(rewritten: float, l2_bytes: int | None) -> float:
    """DRAM bytes a launch must write back of `rewritten` bytes it writes in place (in addition to the
    compulsory bytes, which count those lines once, as read): every store leaves its line dirty in the L2
    (write-back), a dirty line leaves it only by a write to DRAM, and at most the L2's capacity of dirty lines
    is left when the launch ends; so at least `rewritten` - L2 bytes are written to DRAM during the launch,
    whatever the replacement policy or what the L2 held when the launch began. 0 without a known L2 size."""
    if not l2_bytes:
        return 0.0
    return max(0.0, rewritten - l2_bytes)


def occupancy(spec: GPUSpec, warps_per_cta: int, registers: int | None, shared_bytes: int | None) -> int:
    """CTAs that fit on one SM at once, limited by warps, blocks, registers and shared memory."""
    limits = [spec.max_blocks_per_sm, spec.max_warps_per_sm // max(warps_per_cta, 1)]
    if registers:
        # Registers are allocated per warp in units of 256 (8 per thread, rounded up).
        per_warp = math.ceil(registers * 32 / 256) * 256
        limits.append(spec.registers_per_sm // (per_warp * warps_per_cta))
    if shared_bytes is not None:
        reserved = 1024  # the driver reserves 1 KB of shared memory per CTA on sm_80 and newer
        limits.append(spec.smem_per_sm // (shared_bytes + reserved))
    return max(0, min(limits))


def roofline(demand: Demand, rates: Rates, config: dict | None = None, warm_l2: bool = True) -> Ceiling:
    """The ceiling of `demand` on a GPU with `rates`.

    warm_l2: the launch runs back to back with launches touching the same data (a CUDA graph of one
    launch repeated, as the sweeps time it). If its compulsory bytes fit in the L2, they may all be
    served from there and DRAM time does not bound it; a larger working set streamed in the same
    order every launch evicts itself, so it comes from DRAM again (the sweeps bear this out:
    benchmarks/RESULTS.md section 5).
    """
    spec = rates.spec
    sms = spec.sms
    notes = list(demand.notes)

    # Tensor work has two floors: the busiest SM at its own peak (the spec rate at boost clock: a
    # lightly loaded chip runs at boost), and all the work at the chip's sustained rate (calibrated:
    # under sustained tensor load the clock drops, ANCHORS section 6).
    chip_rate = rates.tensor_tflops.get(demand.tensor_dtype)
    sm_rate = spec.tensor_flops.get(demand.tensor_dtype)
    kind = spec.mma_sync_fraction if demand.tensor_kind == "mma_sync" else 1.0
    tensor_us: float | None = 0.0
    if demand.tensor_flops_per_cta is None:
        tensor_us = None
    elif demand.tensor_flops_per_cta:
        if chip_rate is None or sm_rate is None:
            tensor_us = None
            notes.append(f"{spec.name} has no known {demand.tensor_dtype} tensor rate; tensor time unknown")
        else:
            busiest_sm = demand.busiest_sm_work("tensor", sms) / (sm_rate * kind * spec.boost_clock_ghz * 1e9)
            whole_chip = demand.total("tensor") / (chip_rate * kind * 1e12)
            tensor_us = max(busiest_sm, whole_chip) * 1e6

    def issue_us(pipe: str, warp_instr_per_s_chip: float) -> float:
        return demand.busiest_sm_work(pipe, sms) / (warp_instr_per_s_chip / sms) * 1e6

    fma_instr_rate = rates.fma_tflops * 1e12 / 2 / 32  # FMAs/s over 32 lanes -> warp instructions/s
    dram_us = _dram_us(demand, spec, rates, warm_l2, notes)
    def smem_us(key: str) -> float:
        return demand.busiest_sm_work(key, sms) / (rates.smem_tbs * 1e12 / sms) * 1e6

    l1_key = demand.l1_key()
    pipelines: dict[str, float | None] = {
        "tensor": tensor_us,
        "fma": issue_us("fma", fma_instr_rate),
        "alu": issue_us("alu", rates.alu_ginst * 1e9),
        "xu": issue_us("xu", rates.xu_ginst * 1e9),
        "lsu": issue_us("lsu", rates.lsu_ginst * 1e9),
        # The L1's data stage: shared-memory bytes and, on the generic path, 128 B for each line a global tile
        # access's warp request touches (`ceilings.tile_lines`); both pass it at 128 B a cycle per SM.
        "smem": smem_us(l1_key),
        "l2": None if rates.l2_tbs is None else demand.l2_bytes / (rates.l2_tbs * 1e12) * 1e6,
        "dram": dram_us,
        "launch": rates.launch_us,
    }
    fp64_us = issue_us("fp64", rates.fp64_ginst * 1e9)
    if fp64_us > 0:  # a pipeline only kernels with FP64 instructions use: listed where it has work
        pipelines["fp64"] = fp64_us
    issue_us, chain_us, chain_by_limits = issue_floors(demand, spec)
    if issue_us is not None:  # the generic path's; the exact families' ceilings keep their pipelines
        pipelines.update(issue=issue_us, chain=chain_us)
    if rates.l2_tbs is None:
        notes.append(f"L2 bandwidth of {spec.name} unknown (run `advisor calibrate`); L2 time left out")
    # No launch runs faster than an empty kernel of its grid and CTA size (the GPU starts and retires CTAs at a
    # bounded rate; `ceilings.latency_floor`): where that is the larger, the launch binds at that time.
    dispatch = (empty_kernel_floor(rates.empty_kernel_us, demand.ctas, demand.warps_per_cta)
                if issue_us is not None else None)
    binding, ceiling, pipelines = _bind(pipelines, rates.launch_us, dispatch)
    if binding == "launch" and dispatch is not None and ceiling == dispatch:
        notes.append(f"an empty kernel of {demand.ctas} CTAs of {demand.warps_per_cta} warps takes {dispatch:.2f} us "
                     "on this GPU (calibrated): starting and retiring the grid binds")
    per_sm = occupancy(spec, demand.warps_per_cta, demand.registers, demand.shared_bytes)
    if per_sm == 0:
        notes.append("the CTA does not fit on an SM (registers or shared memory); it cannot launch")
    waves = demand.active_ctas / (sms * per_sm) if per_sm else float("inf")
    out = Ceiling(gpu=spec.name, kernel=demand.kernel, config=config or {}, ceiling_us=ceiling, binding=binding,
                  pipelines=pipelines, ctas=demand.ctas, active_ctas=demand.active_ctas, waves=waves,
                  ctas_per_sm=per_sm, rates_source=rates.source, demand_source=demand.source, notes=notes,
                  demand=demand)
    # The models were fitted on shared-memory time alone, on the chain by the warp and CTA limits and on DRAM
    # bytes that counted accesses masked by loaded data in full.
    smem_alone = pipelines["smem"] if l1_key == "smem" else smem_us("smem")
    model_dram = dram_us if demand.model_bytes is None else _dram_us(demand.for_model(), spec, rates, warm_l2, [])
    if chain_by_limits != chain_us or smem_alone != pipelines["smem"] or model_dram != dram_us:
        model_pipes = {**pipelines, "smem": smem_alone, "dram": model_dram}
        if issue_us is not None:
            model_pipes["chain"] = chain_by_limits
        model_binding, model_ceiling, model_pipes = _bind(model_pipes, rates.launch_us, dispatch)
        out.model_view = dataclasses.replace(out, ceiling_us=model_ceiling, binding=model_binding,
                                             pipelines=model_pipes)
    return out


def model_ceiling_us(ceiling: Ceiling) -> float:
    """The ceiling the models' predictions scale (`Ceiling.model_view`): a prediction is this times the model's
    predicted measured / ceiling, as in the rows it was fitted on."""
    return (ceiling.model_view or ceiling).ceiling_us


def _bind(pipelines: dict[str, float | None], launch_us: float,
          dispatch: float | None) -> tuple[str, float, dict[str, float | None]]:
    """(binding, ceiling us, pipelines) of per-pipeline times: the largest work term plus the launch overhead, or
    the empty kernel's time of the grid where that is larger (then "launch" binds and carries it)."""
    # The L2 rate is a probe's reach, not a roof: on an H100 the probe reads 7.4-8.7 TB/s while the
    # fused-MoE kernel moves up to ~10.6 TB/s through L2 (benchmarks/RESULTS.md). Its time is shown
    # but does not set the ceiling until a probe reaches the hardware's limit.
    work = {k: v for k, v in pipelines.items() if k not in ("launch", "l2") and v is not None}
    binding = max(work, key=work.get) if work else "launch"
    ceiling = (work[binding] if work else 0.0) + launch_us
    if dispatch is not None and dispatch > ceiling:
        return "launch", dispatch, {**pipelines, "launch": dispatch}
    return binding, ceiling, pipelines
