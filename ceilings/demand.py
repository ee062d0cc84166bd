"""The generic demand of any Triton kernel launch: compiled SASS x how often each block runs x CTAs.

Works for kernels the advisor knows nothing about, and gives two answers (ARCHITECTURE.md, "Next
shape"):

- the **floor**, which the ceiling uses: what the launch does not determine contributes the least
  work it could. A loop whose bound is unknown runs 0 times, an `if` whose condition is unknown is not
  taken, a CTA that may exit does; compulsory DRAM bytes are, per tensor, the smaller of its
  footprint and the bytes its loads and stores issue (a tensor no access reaches contributes none;
  copies a pipelined loop predicates off and TMA box parts outside the tensor issue none); spill
  code (local-memory loads and stores) counts nothing, another ptxas may allocate without it;
- the **expected** work (`Demand.expected`), for the model's features: the same evaluation, with an
  estimate where the floor takes the least (an unknown loop runs once, each side of an unknown `if`
  half the time, the code after an unknown early exit runs).

What the launch determines is evaluated per CTA (`ceilings.ttir_eval`): exit and branch conditions
on program ids, scalar arguments and the carried contents of small integer tensors; loop bounds from
the same (a persistent grid-stride loop gives each CTA its own trip count). SASS blocks are placed on
those regions by their source lines (`ceilings.sass_map`), CTAs with the same values form one class,
and the roofline takes the busiest SM's share over the classes. Blocks on ptxas's slow paths (a
64-bit remainder past 32 bits) count in neither answer.

Every assumption that changes a number is in the notes.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict

import numpy as np

from ceilings.compile import CompiledKernel, compile_launch
from ceilings.dram import DramTraffic, StreamAccess
from ceilings.latency_floor import block_path_table
from ceilings.launch import Launch
from ceilings.roofline import Demand
from ceilings.sass_map import (
    PIPES,
    QUANTITIES,
    CTAClasses,
    Placement,
    block_weights,
    cta_classes,
    place,
    region_runs,
)
from ceilings.tile_lines import LINE_BYTES, access_lines
from ceilings.ttir_eval import KernelIR, read_kernel_ir

_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1, "int16": 2,
                "int32": 4, "int64": 8, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}
_MMA_DTYPE = (("BF16", "bf16"), ("E4M3", "fp8"), ("E5M2", "fp8"), ("TF32", "tf32"), ("S8", "int8"),
              ("U8", "int8"))
_COLUMN = {q: i for i, q in enumerate(QUANTITIES)}


def generic_demand(launch: Launch, compiled: CompiledKernel | None = None, arch: int = 90) -> Demand:
    """The floor demand of a launch, with the expected demand on `.expected`."""
    compiled = compiled or compile_launch(launch, arch)
    scalars = {k: v for k, v in launch.scalars if isinstance(v, int | bool)}
    values = {t.name: t.values for t in launch.tensors if t.values is not None}
    shapes = {t.name: t.shape for t in launch.tensors if t.block_shape}
    ir = read_kernel_ir(compiled.ttgir, scalars, launch.grid, values, shapes)
    placement = place(compiled.sass, launch.kernel, ir, launch.config.num_warps)
    classes = cta_classes(ir)
    notes = list(placement.notes) + _evaluation_notes(ir, classes)
    lines = access_lines(compiled.ttgir, scalars, launch.grid)
    expected = _demand(launch, compiled, ir, placement, classes, floor=False, notes=notes, lines=lines)
    floor = _demand(launch, compiled, ir, placement, classes, floor=True, notes=notes, lines=lines)
    floor.expected = expected
    floor.binary = expected.binary = binary_digest(compiled, launch)
    return floor


def binary_digest(compiled: CompiledKernel, launch: Launch) -> str:
    """Which program the GPU runs for `launch`: its SASS, registers, shared and local memory, warps per CTA and
    grid. Equal digests run the same instructions on the same data (the launch's arguments are the config's
    only other input), so they take the same time; a knob that changes none of these (Triton pipelines no loop
    of a kernel whose loads feed no dot: num_stages 1-4 compile to one cubin) is not a choice."""
    text = "|".join([compiled.sass, str(compiled.registers), str(compiled.shared_bytes), str(compiled.local_bytes),
                     str(launch.config.num_warps), str(tuple(launch.grid))])
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _mma(placement: Placement) -> tuple[str, str]:
    """(kind, input dtype) of the kernel's MMAs: the input type is a suffix (.BF16, .E4M3, .TF32, ...);
    half precision has none on H*MMA."""
    mmas = [i for i in placement.fn.instructions if i.pipe == "tensor" and i.opcode != "HFMA2"]
    kind = "wgmma" if any(i.opcode.endswith("GMMA") for i in mmas) else "mma_sync"
    if not mmas:
        return kind, "bf16"
    ins = mmas[0]
    default = {"Q": "fp8", "I": "int8"}.get(ins.opcode[0], "fp16")
    return kind, next((name for tag, name in _MMA_DTYPE if f".{tag}" in ins.mods.upper()), default)


def _demand(launch: Launch, compiled: CompiledKernel, ir: KernelIR, placement: Placement, classes: CTAClasses,
            floor: bool, notes: list[str], lines: dict[int, float] | None = None) -> Demand:
    warps = launch.config.num_warps
    weights = block_weights(placement, ir, classes, floor)  # blocks x classes
    per_warp = weights.T @ placement.table  # classes x QUANTITIES
    # One warp's dependency path (stall counts, scoreboard waits, barriers; spill code left out either way).
    path = weights.T @ block_path_table(placement.fn, placement.cfg, warps, compiled.arch)
    spills = float(np.max(per_warp[:, _COLUMN["local"]], initial=0.0))
    spills_left_out = floor and spills and not compiled.built_on_target
    if spills_left_out:
        # Spill code is the register allocator's choice, which differs between ptxas versions and
        # options (ptxas 13.4 spills kernels at 32 registers that ptxas 12.9 builds spill-free with
        # 162): unless this cubin is the one the GPU runs (compiled beside it), the GPU's compile of the
        # same kernel may have none, so the floor counts no local-memory access.
        per_warp[:, _COLUMN["lsu"]] -= per_warp[:, _COLUMN["local"]]
        per_warp[:, _COLUMN["issued"]] -= per_warp[:, _COLUMN["local"]]
        per_warp[:, _COLUMN["issue_cycles"]] -= per_warp[:, _COLUMN["local_cycles"]]
    per_cta = per_warp * warps
    descriptors = [t for t in launch.tensors if t.block_shape]
    tma_bytes = np.zeros(len(classes.counts))
    if descriptors:
        # Each TMA load moves one block of a descriptor; with several descriptors, the average block. A
        # TMA load appears in every warp's stream but only the elected warp's copy is enabled: once per CTA.
        blocks = [math.prod(t.block_shape) * _DTYPE_BYTES.get(t.dtype, 2) for t in descriptors]
        tma_bytes = per_warp[:, _COLUMN["tma_loads"]] * sum(blocks) / len(blocks)
    l2_per_cta = per_cta[:, _COLUMN["global_bytes"]] + tma_bytes
    smem_per_cta = per_cta[:, _COLUMN["shared_bytes"]] + tma_bytes
    flops_per_cta = per_cta[:, _COLUMN["tensor_flops"]]
    wavefronts = _global_wavefronts(ir, classes, floor, lines or {})
    unknown_mma = any(i.pipe == "tensor" and i.opcode != "HFMA2" and not i.mma_flops_per_warp()
                      for i in placement.fn.instructions)
    works = _working(ir, placement, weights)
    counts = classes.counts
    active = float(counts[works].sum())
    share = counts * works / active if active else np.zeros_like(counts)

    def mean(column: np.ndarray) -> float:
        return float(share @ column)

    instructions = {p: mean(per_cta[:, _COLUMN[p]]) for p in PIPES}
    work_of = [(float(n), {**{p: float(per_cta[j, _COLUMN[p]]) for p in PIPES}, "tensor": float(flops_per_cta[j]),
                           "tensor_instructions": float(per_cta[j, _COLUMN["tensor"]]),
                           "smem": float(smem_per_cta[j]), "l1": float(smem_per_cta[j] + LINE_BYTES * wavefronts[j]),
                           **issue_work(per_warp[j], warps, float(path[j]))})
               for j, n in enumerate(counts)]
    l2_bytes = float(counts @ l2_per_cta)
    dram, touched, rewritten, read, written = _dram_bytes(launch, ir, classes, floor, l2_bytes, floor)
    model_bytes = None
    if floor and any(a.mask_from_memory for a in ir.accesses):  # the models were fitted counting those in full
        model_bytes = _dram_bytes(launch, ir, classes, floor, l2_bytes, False)[:3]
        if model_bytes[0] > dram:
            notes = [*notes, f"{sum(a.mask_from_memory for a in ir.accesses)} access(es) masked by values loaded from "
                     f"memory: the floor counts none of their DRAM bytes ({(model_bytes[0] - dram) / 1e6:.1f} MB if "
                     "every element moved), the expected work all"]
    traffic = None if floor else dram_traffic(launch, ir, classes)
    kind, dtype = _mma(placement)
    demand_notes = list(notes)
    if spills_left_out:
        demand_notes.append(f"{spills:g} local-memory (spill) instructions per warp in this compile "
                            f"({compiled.registers} registers): register allocation differs between ptxas "
                            "versions, so the floor counts none of them, the expected work all")
    elif floor and spills:
        demand_notes.append(f"{spills:g} local-memory (spill) instructions per warp, counted in the floor: this cubin "
                            "was built beside the GPU it runs on, by the ptxas that builds it there")
    spread = LINE_BYTES * float(share @ wavefronts) / max(mean(per_cta[:, _COLUMN["global_bytes"]]), 1.0)
    if floor and spread > 2:  # said where warps spread their requests, not for every coalesced kernel
        demand_notes.append(f"tile loads and stores touch {spread:.1f}x the 128-byte lines their bytes fill "
                            f"({float(share @ wavefronts):,.0f} L1 data-pipe wavefronts per CTA, one per line a warp "
                            "request touches): the L1 data stage pays for each, in the 'smem' time with shared memory")
    if floor and unknown_mma:
        demand_notes.append("MMA shape not in the SASS (tcgen05 takes it from a descriptor): tensor FLOPs unknown")
    ctas = launch.num_programs
    return Demand(kernel=launch.kernel, ctas=ctas, active_ctas=round(active), warps_per_cta=warps,
                  tensor_flops_per_cta=None if unknown_mma else mean(flops_per_cta), tensor_dtype=dtype,
                  tensor_kind=kind, instructions_per_cta=instructions, smem_bytes_per_cta=mean(smem_per_cta),
                  l2_bytes=float(counts @ l2_per_cta), dram_bytes=dram, shared_bytes=compiled.shared_bytes,
                  registers=compiled.registers, local_bytes=compiled.local_bytes,
                  # The Triton named: a floor holds for the binary counted, and another Triton's ptxas emits other
                  # code (set 12's quantiser: 11% more ALU work under 3.9 than the 3.6 that ran it, RESULTS 60).
                  source=f"generic (SASS of Triton {compiled.triton_version} x evaluated control flow)"
                  + ("" if floor else ", expected"),
                  notes=demand_notes, cta_classes=work_of, working_set_bytes=touched, dram_traffic=traffic,
                  rewritten_bytes=rewritten, read_bytes=read, written_bytes=written, model_bytes=model_bytes)


def _access_runs(ir: KernelIR, classes: CTAClasses, i: int, floor: bool) -> np.ndarray:
    """Per CTA class, the executions of the IR's access `i` that move data: how often its region runs, times the
    share a scalar predicate or a TMA box's bounds leave on (all where not determined)."""
    return region_runs(ir, ir.accesses[i].region, classes, floor) * np.nan_to_num(classes.access_share[i], nan=1.0)


def _global_wavefronts(ir: KernelIR, classes: CTAClasses, floor: bool, lines: dict[int, float]) -> np.ndarray:
    """Per CTA class, the L1 data-pipe wavefronts of the tile loads and stores `ceilings.tile_lines` determined: each
    access's wavefronts per execution times its executions that move data."""
    out = np.zeros(len(classes.counts))
    for i, access in enumerate(ir.accesses):
        if access.at in lines and access.kind in ("load", "store"):
            out += _access_runs(ir, classes, i, floor) * lines[access.at]
    return out


def issue_work(per_warp: np.ndarray, warps: int, path_cycles: float | None = None) -> dict[str, float]:
    """A CTA's work for the issue floors (`ceilings.roofline`): its warp instructions ("issue"), one warp's
    least cycles from its first issue to its last ("chain": `path_cycles`, the dependency path of
    `ceilings.latency_floor`, or without it the stall counts along its path) and the sum over its warps
    ("warp_cycles"). Every warp of the CTA is counted as running the same path."""
    chain = float(per_warp[_COLUMN["issue_cycles"]]) if path_cycles is None else path_cycles
    return {"issue": float(per_warp[_COLUMN["issued"]] * warps), "chain": chain, "warp_cycles": chain * warps}


def _working(ir: KernelIR, placement: Placement, weights: np.ndarray) -> np.ndarray:
    """Per class, whether its CTAs work: run any code after the kernel's early exits (all of them when
    the kernel has none, or without line information to tell)."""
    after_exit = {r.index for r in ir.regions if r.kind == "block" and sum(r.lines.values()) > 1}
    if not after_exit or not placement.line_info:
        return np.ones(weights.shape[1], dtype=bool)
    chains = {r.index: {a.index for a in ir.ancestors(r.index)} for r in ir.regions}
    blocks = [b for b, region in enumerate(placement.block_region) if chains[region] & after_exit]
    return weights[blocks].sum(axis=0) > 0


def _dram_bytes(launch: Launch, ir: KernelIR, classes: CTAClasses, floor: bool, l2_bytes: float,
                data_masks: bool) -> tuple[float, float, float, float, float]:
    """(compulsory DRAM bytes, working set, rewritten bytes, read bytes, written bytes): per tensor, the smaller
    of its footprint and the bytes its accesses issue (scalar predicates and TMA bounds evaluated, masks of tensor
    values not; with `data_masks`, an access masked by loaded data counts none); the working set is the same.
    Rewritten: bytes plain stores write, at addresses that do not depend on memory, to tensors the launch also
    reads, which the compulsory bytes count once (the read), not again for the write-back
    (`Demand.rewritten_bytes`). Read and written: the same per-tensor minimum over the loads (and atomics) alone
    and over those plain stores alone (`Demand.written_bytes`)."""
    footprint = {t.name: t.numel * _DTYPE_BYTES.get(t.dtype, 4) for t in launch.tensors}
    issued: dict[str, float] = defaultdict(float)
    read: dict[str, float] = defaultdict(float)
    written: dict[str, float] = defaultdict(float)
    for i, access in enumerate(ir.accesses):
        if access.argument in footprint:
            # Predicated-off copies and TMA box parts outside the tensor move nothing.
            runs = _access_runs(ir, classes, i, floor)
            moved = float(classes.counts @ runs) * access.elements * access.element_bytes
            if data_masks and access.mask_from_memory:
                # Masked by data the launch does not carry (set 15's padding mask turned half a 1 GiB input
                # off: measured down to 0.74 x a floor that counted it all, RESULTS 63): it may move nothing.
                moved = 0.0
            if access.kind == "load":
                moved = min(moved, _distinct_bytes(ir, classes, access, runs))
            issued[access.argument] += moved
            if access.kind in ("load", "atomic"):
                read[access.argument] += moved
            if access.kind == "store" and access.stream is not None:
                # Plain stores at addresses from program ids and scalars: CTAs writing the same element of a
                # tensor they read would race, so their bytes are taken as distinct (as the compulsory count
                # takes loads). Atomics (accumulating into shared elements) and scattered stores are not.
                written[access.argument] += moved
    if not issued:  # no access traced to an argument: the bytes the SASS issues, capped by the tensors
        total = sum(footprint.values())
        total = min(total, l2_bytes) if l2_bytes else total
        return total, total, 0.0, total, 0.0
    dram = sum(min(footprint[name], b) for name, b in issued.items())
    rewritten = sum(min(footprint[name], read[name]) + min(footprint[name], written[name]) - min(footprint[name], b)
                    for name, b in issued.items() if read[name] and written[name])
    return (dram, dram, rewritten, sum(min(footprint[name], b) for name, b in read.items()),
            sum(min(footprint[name], b) for name, b in written.items()))


def _distinct_bytes(ir: KernelIR, classes: CTAClasses, access, runs: np.ndarray) -> float:
    """The bytes a load reads counting CTAs that address the same data (equal stream ids) once: a sliding-window
    decode's four query heads of one KV head read one window, which the floor counted four times (set 6's H100
    rows ran 1.4x faster than that floor, RESULTS 60). Only where every CTA was evaluated and the addresses are
    known; otherwise infinity (no cap)."""
    if access.stream is None or ir.share != 1:
        return float("inf")
    # CTAs of one stream run the same loop over the same data: the largest of them stands for the stream.
    most = np.zeros(int(access.stream.max()) + 1)
    np.maximum.at(most, access.stream, _bytes_per_cta(ir, classes, access, runs))
    return float(most.sum())


def _bytes_per_cta(ir: KernelIR, classes: CTAClasses, access, runs: np.ndarray) -> np.ndarray:
    """Per evaluated CTA, the bytes an access moves given its class's `runs`."""
    member = classes.member if classes.member is not None else np.zeros(ir.evaluated, dtype=np.int64)
    return runs[member] * access.elements * access.element_bytes


def dram_traffic(launch: Launch, ir: KernelIR, classes: CTAClasses) -> DramTraffic:
    """The expected accesses per evaluated CTA, for `ceilings.dram.expected_dram_bytes`."""
    footprint = {t.name: float(t.numel * _DTYPE_BYTES.get(t.dtype, 4)) for t in launch.tensors}
    accesses = []
    for i, access in enumerate(ir.accesses):
        if access.argument in footprint:
            runs = _access_runs(ir, classes, i, False)
            accesses.append(StreamAccess(access.argument, access.kind, _bytes_per_cta(ir, classes, access, runs),
                                         access.stream))
    return DramTraffic(footprint, accesses, ir.share)


def _evaluation_notes(ir: KernelIR, classes: CTAClasses) -> list[str]:
    """What the evaluation of the IR decided for the whole launch, one note per loop or branch."""
    notes = []
    if ir.share > 1:
        notes.append(f"the grid of {ir.ctas} CTAs evaluated on {ir.evaluated} evenly spaced CTAs")
    counts = classes.counts
    for r in ir.regions:
        where = f"line {r.line}" if r.line is not None else "an unknown line"
        if r.kind in ("for", "while"):
            trips = classes.trips[r.index]
            if np.isnan(trips).all():
                notes.append(f"loop at {where}: bound depends on memory or loop-carried values: the floor counts "
                             "it 0 times, the expected work once")
            elif trips.min() != trips.max():
                notes.append(f"loop at {where}: trip count from program ids, {trips.min():g} to {trips.max():g} "
                             "per CTA: the busiest SM's share counted")
        elif r.kind == "then" and r.condition is None:
            notes.append(f"branch at {where}: condition not determined by the launch: the floor counts neither "
                         "side, the expected work half of each")
        elif r.kind == "block" and r.condition is None and sum(r.lines.values()) > 1:
            notes.append(f"early exit before line {next(iter(r.lines))}: condition not determined by the launch: the "
                         "floor counts what follows 0 times, the expected work once")
        elif r.kind == "block" and sum(r.lines.values()) > 1:
            taken = float(counts @ np.nan_to_num(classes.condition[r.index]))
            if 0 < taken < counts.sum() or taken == 0:
                notes.append(f"code from line {next(iter(r.lines))} runs in {taken:g} of {counts.sum():g} CTAs "
                             "(exit condition evaluated per CTA)")
    return notes

