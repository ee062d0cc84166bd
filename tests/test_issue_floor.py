"""The issue-slot and dependency-chain floors (issue 14): stall counts decoded from the control bits, checked on
kernels whose dependency chains are known by construction (tests/fixtures/issue_kernels.py, compiled for sm_90
without a GPU), and the roofline's two floors on demands whose counts are given."""

from __future__ import annotations

from pathlib import Path

import pytest

from ceilings.compile import compile_launch
from ceilings.demand import generic_demand
from ceilings.hardware import resolve_gpu
from ceilings.latency_floor import MIN_LATENCY_CYCLES
from ceilings.launch import Config, Launch, TensorArg
from ceilings.roofline import SUB_PARTITIONS, Demand, roofline
from ceilings.sass import build_cfg, parse_sass, stall_count

KERNELS = str(Path(__file__).resolve().parent / "fixtures" / "issue_kernels.py")
H100 = resolve_gpu("h100")
CLOCK = H100.spec.boost_clock_ghz * 1e9


def launch(kernel: str, elements: int, grid: int = 1, warps: int = 1, scalars=None, constexprs=None) -> Launch:
    tensors = (TensorArg.contiguous("x_ptr", (elements,), "float32"),
               TensorArg.contiguous("y_ptr", (elements,), "float32"))
    return Launch(KERNELS, kernel, (grid,), tensors, scalars or {}, constexprs or {}, Config({}, warps, 1))


def reachable(compiled, kernel):
    fn = parse_sass(compiled.sass)[kernel]
    cfg = build_cfg(fn)
    return [ins for j, (s, e) in enumerate(cfg.blocks) if j in cfg.reachable for ins in fn.instructions[s:e]]


# --- the control bits --------------------------------------------------------------------------------------
def test_stall_count_is_bits_41_to_44_of_the_high_word():
    for stall in range(16):
        # yield, barriers "none" (7), a wait mask and reuse flags around it must not leak in
        word = (0b1010 << 58) | (0b000001 << 52) | (7 << 49) | (7 << 46) | (1 << 45) | (stall << 41) | 0x1F00
        assert stall_count(word) == stall
    assert stall_count(0x000FC80000000005) == 4  # a dependent FFMA of sm_90 (nvdisasm -hex)
    assert stall_count(0x000FE20000000800) == 1


LISTING = """\
kernel:
        /*0000*/                   FFMA R5, R0, R0, 1.5 ;                  /* 0x3fc0000000057423 */
                                                                           /* 0x004fc80000000000 */
        /*0010*/                   FFMA R5, R0, R5, 1.5 ;                  /* 0x3fc0000000057423 */
                                                                           /* 0x000fca0000000005 */
        /*0020*/                   EXIT ;                                  /* 0x000000000000794d */
                                                                           /* 0x000fea0003800000 */
"""


def test_a_listing_with_encodings_gives_each_instruction_its_stall_and_one_without_counts_one_cycle():
    fn = parse_sass(LISTING)["kernel"]
    assert [(i.opcode, i.stall, i.issue_cycles) for i in fn.instructions] == [("FFMA", 4, 4), ("FFMA", 5, 5),
                                                                             ("EXIT", 5, 5)]
    bare = "\n".join(line for line in LISTING.splitlines() if not line.strip().startswith("/* 0x"))
    assert [(i.stall, i.issue_cycles) for i in parse_sass(bare)["kernel"].instructions] == [(None, 1)] * 3


def test_a_dependent_fma_chain_waits_the_fma_latency_and_an_independent_one_does_not():
    steps = 16
    dep = compile_launch(launch("dependent_chain", 32, constexprs={"STEPS": steps}))
    code = reachable(dep, "dependent_chain")
    ffma = [k for k, ins in enumerate(code) if ins.opcode == "FFMA"]
    assert len(ffma) == steps
    # Between two dependent FFMAs the warp waits at least 4 cycles (the FMA latency on Hopper), whatever
    # ptxas interleaves between them.
    for a, b in zip(ffma, ffma[1:], strict=False):
        assert sum(ins.issue_cycles for ins in code[a:b]) >= 4
    assert sum(1 for k in ffma if code[k].stall == 4) >= steps // 2

    ind = compile_launch(launch("independent_chains", 256, constexprs={"STEPS": 4}))
    stalls = sorted(ins.stall for ins in reachable(ind, "independent_chains") if ins.opcode == "FFMA")
    assert len(stalls) == 32 and stalls[len(stalls) // 2] <= 2


# --- the generic demand's issue work ------------------------------------------------------------------------
def test_the_demand_counts_every_issued_instruction_and_the_stall_sum_of_a_straight_line_kernel():
    one = launch("dependent_chain", 32, grid=3, warps=2, constexprs={"STEPS": 16})
    code = reachable(compile_launch(one), "dependent_chain")
    # 32 elements over two warps: the second warp's lanes hold none and leave at the `@P0 EXIT` on bit 5 of
    # the thread index, so the store after it runs in the first warp only (`ceilings.lane_guard`).
    after = code[next(k for k, ins in enumerate(code) if ins.opcode == "EXIT") + 1:]
    d = generic_demand(one)
    (n, work), = d.cta_classes
    assert n == 3
    assert work["issue"] == 2 * len(code) - len(after)  # every reachable instruction (BRA, NOP too) once a warp
    # The chain is the dependency path (tests/test_latency_floor.py): the stall sum of what the warps run (the
    # guarded store runs in one of the two), and the wait on the load the first FFMA reads (an LDG's least
    # latency, `ceilings.latency_floor`).
    stalls = sum(ins.issue_cycles for ins in code) - sum(ins.issue_cycles for ins in after) / 2
    assert work["chain"] >= stalls + MIN_LATENCY_CYCLES[90]["LDG"] - 8
    assert work["warp_cycles"] == 2 * work["chain"]
    assert work["chain"] >= 4 * 15 + len(code) - len(after)  # 15 dependent steps of >= 4 cycles


def test_a_loop_adds_its_trips_times_its_chain():
    def work(trips):
        (_, w), = generic_demand(launch("dependent_loop", 32, scalars={"n": trips})).cta_classes
        return w

    small, large = work(64), work(128)
    # Four dependent FMAs a trip: at least 4 x 4 cycles and 4 instructions a trip more for 64 more trips.
    assert large["chain"] - small["chain"] >= 64 * 16
    assert large["issue"] - small["issue"] >= 64 * 4
    # Everything here is decided by the launch: the expected work's chain is the floor's.
    d = generic_demand(launch("dependent_loop", 32, scalars={"n": 128}))
    assert d.expected is not None and d.expected.cta_classes[0][1]["chain"] == large["chain"]


# --- the roofline's floors ------------------------------------------------------------------------------------
def demand(ctas: int, warps: int, issue_per_warp: float, chain: float) -> Demand:
    work = {"issue": issue_per_warp * warps, "chain": chain, "warp_cycles": chain * warps}
    return Demand(kernel="k", ctas=ctas, active_ctas=ctas, warps_per_cta=warps, source="generic",
                  cta_classes=[(float(ctas), work)])


def test_the_issue_floor_is_the_busiest_sms_instructions_over_its_four_schedulers():
    sms = H100.spec.sms
    c = roofline(demand(3 * sms, 8, 10_000, 10_000), H100.rates)
    assert c.pipelines["issue"] == pytest.approx(3 * 8 * 10_000 / (SUB_PARTITIONS * CLOCK) * 1e6)
    assert c.binding == "issue"
    # One CTA more puts 4 on some SM.
    c4 = roofline(demand(3 * sms + 1, 8, 10_000, 10_000), H100.rates)
    assert c4.pipelines["issue"] == pytest.approx(4 * 8 * 10_000 / (SUB_PARTITIONS * CLOCK) * 1e6)


def test_the_chain_floor_is_one_warps_stall_sum_or_the_busiest_sms_over_its_resident_warps():
    sms = H100.spec.sms
    few = roofline(demand(2 * sms, 1, 100, 50_000), H100.rates)  # two one-warp CTAs an SM: the chain binds
    assert few.pipelines["chain"] == pytest.approx(50_000 / CLOCK * 1e6)
    assert few.binding == "chain"
    # 64 CTAs of 32 warps an SM, at most 64 warps resident: 64 x 32 x chain / 64 warp-cycles.
    many = roofline(demand(64 * sms, 32, 100, 1_000), H100.rates)
    assert many.pipelines["chain"] == pytest.approx(64 * 32 * 1_000 / 64 / CLOCK * 1e6)


def test_the_chain_floor_counts_only_the_warps_the_compiled_kernels_registers_and_shared_memory_let_reside():
    sms = H100.spec.sms
    d = demand(8 * sms, 8, 100, 1_000)
    free = roofline(d, H100.rates).pipelines["chain"]  # 8 CTAs of 8 warps an SM: 64 warps resident
    assert free == pytest.approx(8 * 8 * 1_000 / 64 / CLOCK * 1e6)
    # 255 registers a thread: 8 x 32 x 256 = 65,536 registers a CTA, the whole file: one CTA an SM at a time.
    d.registers = 255
    assert roofline(d, H100.rates).pipelines["chain"] == pytest.approx(8 * 8 * 1_000 / 8 / CLOCK * 1e6)
    # 100 KB of shared memory a CTA (+ 1 KB the driver keeps): two CTAs in the 228 KB.
    d.registers, d.shared_bytes = 32, 100 * 1024
    assert roofline(d, H100.rates).pipelines["chain"] == pytest.approx(8 * 8 * 1_000 / 16 / CLOCK * 1e6)
    # A CTA that does not fit runs nowhere: the warp and CTA limits stay the bound.
    d.shared_bytes = 300 * 1024
    assert roofline(d, H100.rates).pipelines["chain"] == pytest.approx(free)


def test_the_models_see_the_chain_they_were_trained_on_and_scale_that_ceiling():
    # A chain-bound launch whose compiled occupancy (one CTA an SM) tightens the floor 8x: the ceiling shown binds
    # there, while the models' features and the ceiling their ratio multiplies stay those of the chain by the warp
    # and CTA limits (fed the tighter chain, the transfer model ranked held-out sets' configs worse, RESULTS 61).
    from advisor.model.features import feature_row
    from ceilings.roofline import model_ceiling_us

    d = demand(8 * H100.spec.sms, 8, 100, 200_000)
    d.registers = 255
    c = roofline(d, H100.rates)
    by_limits = 8 * 8 * 200_000 / 64 / CLOCK * 1e6
    assert c.pipelines["chain"] == pytest.approx(8 * by_limits) and c.binding == "chain"
    view = c.model_view
    assert view is not None and view.pipelines["chain"] == pytest.approx(by_limits)
    assert model_ceiling_us(c) == view.ceiling_us < c.ceiling_us
    d.registers = None
    free = roofline(d, H100.rates)
    assert free.model_view is None and model_ceiling_us(free) == free.ceiling_us
    config = Config({}, 8, 1)
    assert feature_row(c, d, config, H100.spec)["log_chain_us"] == feature_row(free, d, config, H100.spec)[
        "log_chain_us"]


def test_demands_without_issue_counts_keep_their_pipelines():
    d = Demand(kernel="k", ctas=132, active_ctas=132, warps_per_cta=4, instructions_per_cta={"fma": 1000.0})
    c = roofline(d, H100.rates)
    assert "issue" not in c.pipelines and "chain" not in c.pipelines and c.binding == "fma"



def test_the_encodings_change_no_operand_reading():
    # The unroll readers parse operands from the instruction's text: with -hex, each line ends in its low
    # word, which must not read as an operand (the 14x byte-counter unroll of RESULTS 17 was lost so, and
    # its loop weighted 14 times too many).
    from ceilings.unroll import induction_unroll
    from tests.test_floor_exceptions import counted_listing

    bare = counted_listing(14, "MOV R17, RZ ;", "0x3800")
    lines = []
    for line in bare.splitlines():
        if "/*" in line:
            line += "  /* 0x0000000402007981 */\n" + " " * 75 + "/* 0x000fc80000000005 */"
        lines.append(line)
    fn = parse_sass("\n".join(lines))["kernel"]
    assert all(i.stall == 4 and "0x0000000402007981" not in i.text for i in fn.instructions)
    assert [i.text for i in fn.instructions] == [i.text for i in parse_sass(bare)["kernel"].instructions]
    cfg = build_cfg(fn)
    (loop,) = cfg.loops
    assert induction_unroll(fn, cfg, loop, 1, 112) == 14
