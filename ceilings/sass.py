"""Generic per-pipeline instruction counts of any compiled kernel, from its SASS and TTGIR.

1. Parse `nvdisasm -c -gi -hex` output into instructions with addresses, labels, branch targets,
   source lines and the stall count of each instruction's control bits (`Instruction.stall`).
2. Build the control-flow graph of the kernel function, find natural loops (back edges to a
   dominating block), and nest them.
3. `weigh` / `count_instructions`: match the SASS loops, outermost first in address order, to the
   loops of the final TTGIR, whose bounds are evaluated on the launch's scalar arguments
   (`ttir_eval`); a loop that cannot be matched or whose bound cannot be evaluated counts one
   iteration. This is the simple count (benchmarks use it); the generic demand places blocks on the
   IR's regions by source line instead (`ceilings.sass_map`) and evaluates branches and exits too.
4. Weight each instruction by the trip counts of the loops around it and classify its opcode into
   the pipelines Nsight Compute reports (tensor, fma, alu, xu, lsu, uniform, cbu, adu, tma).

Counts are warp-level instructions executed by one warp of one CTA; a predicated-off instruction
still issues and counts, as in `sm__inst_executed_pipe_*`.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

# SASS opcode (its first dot-separated part) -> the pipeline whose `sm__inst_executed_pipe_*` counter
# Nsight Compute increments for it on Hopper, from the pipeline descriptions of Nsight Compute's
# Kernel Profiling Guide ("Pipelines") and NVIDIA's answers on its forum, not fitted on any kernel:
# - FMA: "most FP32 arithmetic (FADD, FMUL, FMAD) ... integer multiplication (IMUL, IMAD) ... integer
#   dot products"; on GH100 FP16x2 is issued to the FMA pipes too. IMAD.MOV/.SHL/.IADD are IMADs.
#   VIADD, sm_90's integer add that ptxas uses beside IADD3 as it used IMAD.IADD before, to spread
#   integer adds over both pipes: on the corpus's ncu counts FMA was short and ALU over by exactly the
#   VIADDs (FlagGems rotary: 1.88 M VIADD, ALU 1.36x ncu's); with VIADD on the FMA pipe, FMA is within
#   10% of ncu on 150 of 181 launches instead of 138, in each of the four libraries held out in turn
#   (RESULTS 17), and the fused-MoE kernel's own GPU SASS (RESULTS 6) moves the same way.
# - ALU: "most bit manipulation and logic instructions ... integer instructions, excluding IMAD and
#   IMUL" and fast FP32-to-FP16 conversion (F2FP): so LEA, SHF, IABS, VIMNMX are ALU, as are FP32
#   compares and min/max; I2FP (the sm_86+ int-to-FP32 conversion) too: on the corpus's ncu counts
#   the XU held MUFU alone where a kernel had both (issue 14).
# - XU: transcendentals (MUFU) and the other int<->float conversions; and FCHK, the range check of an IEEE
#   division (`tl.div_rn`) before its reciprocal: on FMA, torchao's blockwise quantisers counted FMA one a warp
#   over ncu's and XU one a warp short (0.80-0.91x); on XU both match exactly (RESULTS 37 item 11).
# - FP64: "the FP64 pipe executes FP64 instructions" (NVIDIA's answer on the forum for GV100; on GH100 the FP64
#   units share a dispatch port with the tensor cores, not the FMA pipe): DFMA, DADD, DMUL, DSETP, DMNMX. On
#   FMA they made torchao's float64-dividing quantisers' FMA count 1.35-1.74x ncu's (RESULTS 36), and FMA time
#   (FFMA + DFMA at the FP32 rate) could exceed the true max(FFMA at FP32's, DFMA at FP64's): no floor.
# - ADU (address divergence unit): "branches/jumps and indexed constant loads" and "block-level
#   barrier instructions" (BAR; seen on a layer-norm kernel, issue 14). Not on the LSU: there the
#   fused-MoE kernel's exact SASS (RESULTS section 6) matched ncu on 24 of 24 launches without BAR
#   and on 10 of 24 with it, though Liger's block reductions lack about one LSU instruction per BAR.
# - LSU also: STSM (a store to shared memory, as STS and LDSM are) and FENCE (a memory fence, as MEMBAR
#   is: FENCE.VIEW.ASYNC orders generic against async-proxy accesses). On the GPU's own Triton 3.6 compiles
#   of the corpus (RESULTS 26), ncu's LSU count exceeded ours by exactly the STSM count on 22 launches and
#   by the FENCE count on 8, with MEMBAR already on the LSU beside each FENCE. ERRBAR (issued after a
#   MEMBAR before a release atomic) is not on the LSU: where MEMBAR, ERRBAR, ATOM and CCTL came in equal
#   numbers, LSU was over by one of them and ADU short by as much (RESULTS 26).
# - Uniform: the uniform datapath, "instructions where all threads use the same input and generate the
#   same output": every U* ALU opcode, UMOV, UISETP and ULDC included.
# - CBU (convergence barrier unit): warp-level convergence, calls, returns, exits.
# - Tensor: MMA instructions, and HFMA2.MMA, an FP16x2 FMA that ptxas places on the tensor (MMA)
#   datapath (seen on Nsight Compute, issue 14): see `Instruction.pipe`.
# BRA, DEPBAR and NOP count in no per-pipe counter (benchmarks/RESULTS.md section 4).
PIPE_OF_OPCODE: dict[str, str] = {}
for _pipe, _ops in {
    "tensor": "HGMMA HMMA QGMMA IGMMA BGMMA IMMA BMMA DMMA UTCHMMA UTCQMMA UTCIMMA UTCMMA",
    "fma": "FFMA FADD FMUL FFMA32I FADD32I FMUL32I FSWZADD HFMA2 HADD2 HMUL2 IMAD IMUL IMAD32I IDP "
           "VIADD",
    "fp64": "DFMA DADD DMUL DSETP DMNMX",
    "alu": "IADD3 IADD IADD32I LOP3 LOP LOP32I SHL SHR ISETP FSETP PSETP HSETP2 SEL FSEL IMNMX "
           "VIADDMNMX FMNMX HMNMX2 SGXT PRMT BMSK F2FP MOV MOV32I P2R R2P PLOP3 CSET CSETP ISCADD "
           "FLO BREV IMNMX3 VABSDIFF VABSDIFF4 BFE BFI CS2R R2UR LEA SHF IABS VIMNMX I2FP",
    "xu": "MUFU I2F F2I F2F FRND I2I F2IP POPC FCHK",
    "lsu": "LDG STG LDS STS LD ST LDL STL LDSM LDGSTS ATOM ATOMS ATOMG RED REDG CCTL CCTLL MEMBAR "
           "SHFL MATCH QSPC LDGDEPBAR STSM FENCE",
    "uniform": "UIADD3 ULEA USHF USEL ULOP3 ULOP UIMAD USGXT UPRMT UFLO UPOPC UBREV UBMSK "
               "VOTEU UP2UR UR2UP UPLOP3 UCLEA UIABS UIMNMX USETMAXREG ULEPC UCGABAR_ARV UCGABAR_WAIT "
               "UMOV UISETP ULDC UVIADD UVIMNMX USHL USHR UF2FP",
    "tma": "UTMALDG UTMASTG UTMAPF UTMACCTL UBLKCP UBLKRED UBLKPF UTMACMDFLUSH UTMAREDG",
    "cbu": "BRX JMP JMX CALL RET EXIT BSSY BSYNC WARPSYNC BREAK KILL NANOSLEEP YIELD BMOV",
    "adu": "WARPGROUP ELECT SYNCS VOTE S2R LDC ACQBULK ARRIVES B2R R2B S2UR BAR ERRBAR",
    "none": "NOP BRA DEPBAR",
}.items():
    for _op in _ops.split():
        PIPE_OF_OPCODE[_op] = _pipe
MMA_OPCODES = frozenset(op for op, pipe in PIPE_OF_OPCODE.items() if pipe == "tensor")
# Subroutines ptxas calls only on a slow path: 64-bit integer division and remainder when an operand
# does not fit in 32 bits (the inline fast path handles the rest), and the special-input paths of
# floating-point division, reciprocal and square root: `..._f32_slowpath`, and for float64 the
# `..._f64_full` / `_mediumpath` routines, called after the inline reciprocal-and-DFMA sequence only when
# its range check fails (seen on torchao's fp8 quantisers, which divide in float64: the routine's 41
# ALU instructions a call, eight calls a warp, had made the ALU floor 1.3-1.5x the measured time).
# Blocks that call them are cold; leaving work out keeps a floor a floor.
COLD_CALLEE = re.compile(r"__cuda_sm\d+x?_(?:div|rem)_[su]64|slowpath|_f64_(?:full|mediumpath)")
_LINE_INFO = re.compile(r"line (\d+)")

_INSTR = re.compile(r"^\s*/\*(?P<addr>[0-9a-f]{4,})\*/\s+(?P<pred>@!?U?P[T0-9]+\s+)?(?P<op>[A-Z][A-Z0-9_]*)"
                    r"(?P<mods>(?:\.[A-Za-z0-9_]+)*)(?P<rest>[^;]*);")
_LABEL = re.compile(r"^(?P<name>[.$\w]+):\s*$")
_TARGET = re.compile(r"`\((?P<label>[^)]+)\)")
# `-hex` prints each 128-bit instruction as two 64-bit words, the second alone on the next line.
_HIGH_WORD = re.compile(r"^\s*/\*\s*0x(?P<word>[0-9a-f]{16})\s*\*/\s*$")
_LOW_WORD = re.compile(r"\s*/\*\s*0x[0-9a-f]{16}\s*\*/\s*$")
_MMA_SHAPE = re.compile(r"\.(\d+)x(\d+)x(\d+)")
_HMMA_SHAPE = re.compile(r"\.(\d{2})(\d)(\d{1,2})\b")


@dataclass
class Instruction:
    addr: int
    opcode: str
    mods: str
    text: str
    predicated: bool
    target: str | None = None
    line: int | None = None  # source line of the outermost frame (`nvdisasm -gi`), None without line info
    stall: int | None = None  # stall count of the control bits (`nvdisasm -hex`), None without encodings
    control: int | None = None  # the encoding's high 64-bit word, control bits included (`ceilings.latency_floor`)

    @property
    def issue_cycles(self) -> int:
        """Cycles at least between this instruction's issue and the next of the same warp: its stall
        count (`stall_count`), and at least 1 (a warp issues at most one instruction a cycle); 1 where
        the listing has no encodings."""
        return max(self.stall or 1, 1)

    @property
    def pipe(self) -> str:
        if self.opcode == "HFMA2" and ".MMA" in self.mods:
            return "tensor"
        if self.opcode == "S2R" and "SR_TID" in self.text:
            # Special-register reads go to the LSU (Profiling Guide), yet on the corpus's ncu counts only
            # one S2R a warp of elementwise kernels was there: taken as the thread index's (issue 14).
            return "lsu"
        return PIPE_OF_OPCODE.get(self.opcode, "other")

    def mma_flops_per_warp(self) -> float:
        """FLOPs one warp's execution of this MMA instruction does (0 for other instructions).

        HGMMA m64nNk16 is issued by the 4 warps of a warpgroup together: 2*64*N*K / 4 per warp.
        HMMA.16816 is one warp's 16x8x16 product: 2*16*8*16.
        """
        if self.opcode not in MMA_OPCODES:
            return 0.0
        shape = _MMA_SHAPE.search(self.mods)
        if shape and self.opcode.endswith("GMMA"):
            m, n, k = (int(x) for x in shape.groups())
            return 2.0 * m * n * k / 4
        shape = _HMMA_SHAPE.match(self.mods)
        if shape:
            m, n, k = (int(x) for x in shape.groups())
            return 2.0 * m * n * k
        return 0.0


def stall_count(high_word: int) -> int:
    """The stall count in the control bits of a Volta-and-later instruction, from the high 64-bit word of
    its encoding: bits 105-108 of the 128-bit instruction (bits 41-44 of the high word), then yield (109),
    write and read barrier (110-112, 113-115), wait mask (116-121) and reuse flags (122-125), as Jia et
    al. decode them ("Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking", 2018, section
    2.1). The scheduler waits that many cycles before it issues the warp's next instruction; scoreboard
    waits only add to it. Checked on sm_90 SASS: a dependent FFMA chain carries 4 (the FMA latency), an
    independent one 1 (tests/test_issue_floor.py)."""
    return (high_word >> 41) & 0xF


@dataclass
class Function:
    name: str
    instructions: list[Instruction]
    labels: dict[str, int]  # label -> index of the instruction that follows it


def parse_sass(text: str) -> dict[str, Function]:
    """Functions of an `nvdisasm -c` listing, keyed by name (the kernel and any called subroutines)."""
    functions: dict[str, Function] = {}
    current: Function | None = None
    pending_labels: list[str] = []
    source_line: int | None = None
    for line in text.splitlines():
        if line.lstrip().startswith("//##"):
            # `-gi` prints the inlining chain one frame per comment, outermost last; the last
            # `line N` of the last comment is the kernel's own line.
            found = _LINE_INFO.findall(line)
            source_line = int(found[-1]) if found else source_line
            continue
        label = _LABEL.match(line.strip())
        if label and not line.strip().startswith("."):
            name = label.group("name")
            if not name.startswith(".text"):
                current = functions.setdefault(name, Function(name, [], {}))
                pending_labels = []
                source_line = None
                continue
        if label and line.strip().startswith(".L"):
            pending_labels.append(label.group("name"))
            continue
        m = _INSTR.match(line)
        if not m:
            high = _HIGH_WORD.match(line)
            if high and current is not None and current.instructions and current.instructions[-1].stall is None:
                current.instructions[-1].control = int(high.group("word"), 16)
                current.instructions[-1].stall = stall_count(current.instructions[-1].control)
            continue
        if current is None:
            continue
        target = _TARGET.search(m.group("rest"))
        text = _LOW_WORD.sub("", line).strip()  # the instruction as without -hex: readers of operands use it
        instr = Instruction(int(m.group("addr"), 16), m.group("op"), m.group("mods"), text,
                            bool(m.group("pred")), target.group("label") if target else None, source_line)
        for name in pending_labels:
            current.labels[name] = len(current.instructions)
        pending_labels = []
        current.instructions.append(instr)
    # Labels are global in the listing; make every function able to resolve jumps into itself.
    return functions


# ----------------------------------------------------------------------------------------------
# Control flow and loops.
# ----------------------------------------------------------------------------------------------
@dataclass
class Loop:
    header: int              # block index
    blocks: set[int]
    depth: int = 0
    parent: Loop | None = None
    first_addr: int = 0
    trips: float = 1.0
    trips_source: str = "unknown: counted once"


@dataclass
class CFG:
    blocks: list[tuple[int, int]]          # [start, end) instruction index ranges
    succ: dict[int, set[int]]
    loops: list[Loop] = field(default_factory=list)
    reachable: set[int] = field(default_factory=set)


def build_cfg(fn: Function) -> CFG:
    instrs = fn.instructions
    n = len(instrs)
    leaders = {0}
    for i, ins in enumerate(instrs):
        if ins.opcode in ("BRA", "BRX", "JMP", "EXIT", "RET", "BREAK", "KILL") and i + 1 < n:
            leaders.add(i + 1)
        if ins.target and ins.target in fn.labels:
            leaders.add(fn.labels[ins.target])
    starts = sorted(x for x in leaders if x < n)
    blocks = [(s, starts[j + 1] if j + 1 < len(starts) else n) for j, s in enumerate(starts)]
    block_of = {s: j for j, (s, _) in enumerate(blocks)}
    succ: dict[int, set[int]] = defaultdict(set)
    for j, (_, e) in enumerate(blocks):
        last = instrs[e - 1]
        if last.target and last.target in fn.labels and last.opcode in ("BRA", "BRX", "JMP"):
            succ[j].add(block_of[fn.labels[last.target]])
        unconditional_end = last.opcode in ("EXIT", "RET", "KILL", "BRA", "JMP") and not last.predicated
        if not unconditional_end and j + 1 < len(blocks):
            succ[j].add(j + 1)
    cfg = CFG(blocks, succ)
    cfg.reachable = _reachable(cfg)
    cfg.loops = _natural_loops(cfg, [instrs[s].addr for s, _ in blocks])
    return cfg


def _reachable(cfg: CFG) -> set[int]:
    seen, stack = {0}, [0]
    while stack:
        for nxt in cfg.succ[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def dominators(cfg: CFG) -> list[set[int]]:
    n = len(cfg.blocks)
    pred: dict[int, set[int]] = defaultdict(set)
    for a, bs in cfg.succ.items():
        for b in bs:
            pred[b].add(a)
    everything = set(range(n))
    dom = [everything.copy() for _ in range(n)]
    dom[0] = {0}
    changed = True
    while changed:
        changed = False
        for b in range(1, n):
            ps = [dom[p] for p in pred[b]]
            new = ({b} | set.intersection(*ps)) if ps else {b}
            if new != dom[b]:
                dom[b], changed = new, True
    return dom


def _natural_loops(cfg: CFG, block_addrs: list[int]) -> list[Loop]:
    dom = dominators(cfg)
    pred: dict[int, set[int]] = defaultdict(set)
    for a, bs in cfg.succ.items():
        for b in bs:
            pred[b].add(a)
    by_header: dict[int, set[int]] = {}
    for tail, heads in cfg.succ.items():
        if tail not in cfg.reachable:
            continue  # code after the last EXIT (a trap loop) never runs
        for head in heads:
            if head in dom[tail]:  # back edge tail -> head
                body = {head, tail}  # the walk stops at the header, which is already in the body
                stack = [tail] if tail != head else []
                while stack:
                    x = stack.pop()
                    for p in pred[x]:
                        if p not in body:
                            body.add(p)
                            stack.append(p)
                by_header.setdefault(head, set()).update(body)
    loops = [Loop(header=h, blocks=b, first_addr=block_addrs[h]) for h, b in by_header.items()]
    loops.sort(key=lambda lp: (-len(lp.blocks), lp.first_addr))
    for i, loop in enumerate(loops):
        parents = [p for p in loops[:i] if loop.blocks <= p.blocks and p is not loop]
        loop.parent = min(parents, key=lambda p: len(p.blocks)) if parents else None
    for loop in loops:
        depth, p = 0, loop.parent
        while p:
            depth, p = depth + 1, p.parent
        loop.depth = depth
    # Pre-order of the loop nest (children by address), the order of the loops in the source and IR.
    ordered: list[Loop] = []

    def visit(parent: Loop | None):
        for child in sorted((lp for lp in loops if lp.parent is parent), key=lambda lp: lp.first_addr):
            ordered.append(child)
            visit(child)

    visit(None)
    return ordered


# ----------------------------------------------------------------------------------------------
# Counting.
# ----------------------------------------------------------------------------------------------
@dataclass
class InstructionCounts:
    """Per-warp instruction counts of one CTA by pipeline, tensor FLOPs per warp, and how loops were weighed."""

    per_pipe: dict[str, float]
    tensor_flops: float
    mma_kinds: Counter
    loops: list[dict]
    notes: list[str]

    def scaled(self, warps: int) -> InstructionCounts:
        return InstructionCounts({k: v * warps for k, v in self.per_pipe.items()}, self.tensor_flops * warps,
                                 self.mma_kinds, self.loops, self.notes)


@dataclass
class WeightedCode:
    """A kernel function with each basic block's execution count for one warp of one CTA."""

    fn: Function
    cfg: CFG
    weights: list[float]
    loops: list[Loop]
    notes: list[str]
    callees: Counter

    def instructions(self):
        """(instruction, times executed) over the reachable code of the kernel function."""
        for j, (s, e) in enumerate(self.cfg.blocks):
            if j in self.cfg.reachable:
                for ins in self.fn.instructions[s:e]:
                    yield ins, self.weights[j]


def weigh(sass: str, kernel: str, loop_trips: list[float | None]) -> tuple[WeightedCode, dict[str, Function]]:
    """Match SASS loops to the IR's loops (pre-order) and weight every block by its loops' trips."""
    functions = parse_sass(sass)
    if kernel not in functions:
        raise ValueError(f"no function {kernel} in the SASS listing")
    fn = functions[kernel]
    cfg = build_cfg(fn)
    notes: list[str] = []
    sass_loops = [lp for lp in cfg.loops if not is_spin_wait(fn, cfg, lp)]
    spin = len(cfg.loops) - len(sass_loops)
    if spin:
        notes.append(f"{spin} spin-wait loop(s) counted once per entry")
    for loop, trips in zip(sass_loops, loop_trips, strict=False):
        if trips is not None:
            loop.trips, loop.trips_source = float(trips), "TTGIR scf.for bound"
    if len(sass_loops) != len(loop_trips):
        notes.append(f"{len(sass_loops)} SASS loops against {len(loop_trips)} TTGIR loops: matched in order")
    weights = [1.0] * len(cfg.blocks)
    for loop in sass_loops:
        for b in loop.blocks:
            weights[b] *= loop.trips
    code = WeightedCode(fn, cfg, weights, sass_loops, notes, Counter())
    for ins, times in code.instructions():
        if ins.opcode == "CALL" and ins.target in functions:
            code.callees[ins.target] += times
    return code, functions


def count_instructions(sass: str, kernel: str, loop_trips: list[float | None],
                       weighed: tuple[WeightedCode, dict[str, Function]] | None = None) -> InstructionCounts:
    """Weighted per-pipeline counts of one warp of one CTA.

    `loop_trips`: trip counts of the kernel's loops in IR order (the pre-order of the loop nest);
    None where the bound could not be evaluated. `weighed`: the result of `weigh` for the same
    arguments, when the caller already has it.
    """
    code, functions = weighed or weigh(sass, kernel, loop_trips)
    per_pipe: Counter = Counter()
    kinds: Counter = Counter()
    flops = 0.0
    unknown_shapes: set[str] = set()
    for ins, times in code.instructions():
        per_pipe[ins.pipe] += times
        if ins.opcode in MMA_OPCODES:
            each = ins.mma_flops_per_warp()
            if not each:
                unknown_shapes.add(ins.opcode)
            flops += times * each
            kinds[ins.opcode] += times
    notes = list(code.notes)
    if unknown_shapes:
        # Blackwell's tcgen05 MMAs (UTC*MMA) take their shape from a descriptor, not the opcode.
        notes.append(f"MMA shape not in the SASS of {', '.join(sorted(unknown_shapes))}: tensor FLOPs unknown")
        flops = float("nan")
    for callee, times in code.callees.items():
        for ins in functions[callee].instructions:
            per_pipe[ins.pipe] += times
        notes.append(f"subroutine {callee} called {times:g} times per warp, its body counted once per call")
    per_pipe.pop("none", None)
    loops_info = [{"first_addr": hex(lp.first_addr), "depth": lp.depth, "trips": lp.trips,
                   "source": lp.trips_source} for lp in code.loops]
    return InstructionCounts(dict(per_pipe), flops, kinds, loops_info, notes)


def early_exit_counts(sass: str, kernel: str) -> dict[str, float] | None:
    """Per-pipeline counts of one warp of a CTA that leaves by the kernel's first EXIT, straight
    from the entry (a guard like `if pid_m * BM >= num_tokens_post_padded: return`); None if the
    entry path reaches no EXIT before a branch."""
    fn = parse_sass(sass)[kernel]
    counts: Counter = Counter()
    for ins in fn.instructions:
        counts[ins.pipe] += 1
        if ins.opcode == "EXIT":
            counts.pop("none", None)
            return dict(counts)
        if ins.opcode in ("BRA", "JMP", "BRX", "CALL", "RET"):
            return None
    return None


def is_spin_wait(fn: Function, cfg: CFG, loop: Loop) -> bool:
    """A loop of one or two blocks that only polls a barrier (SYNCS ... TRYWAIT) and branches."""
    instrs = [fn.instructions[i] for b in loop.blocks for i in range(*cfg.blocks[b])]
    return len(instrs) <= 4 and any(i.opcode == "SYNCS" and "TRYWAIT" in i.mods for i in instrs)
