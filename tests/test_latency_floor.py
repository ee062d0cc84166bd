"""The latency floors (RESULTS 25): the control bits' scoreboards, a warp's dependency path on kernels whose
dependent latencies are known by construction (tests/fixtures/latency_kernels.py, compiled for sm_90 without
a GPU), and the empty-kernel floor of a grid."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ceilings.compile import compile_launch
from ceilings.demand import generic_demand
from ceilings.hardware import resolve_gpu
from ceilings.latency_floor import (
    BARRIER_CYCLES,
    MIN_LATENCY_CYCLES,
    block_path_cycles,
    block_path_table,
    control_bits,
    empty_kernel_floor,
)
from ceilings.launch import Config, Launch, TensorArg
from ceilings.roofline import Demand, roofline
from ceilings.sass import build_cfg, parse_sass

KERNELS = str(Path(__file__).resolve().parent / "fixtures" / "latency_kernels.py")
H100 = resolve_gpu("h100")
LDG, MUFU = MIN_LATENCY_CYCLES[90]["LDG"], MIN_LATENCY_CYCLES[90]["MUFU"]


def launch(kernel: str, dtype: str, constexprs: dict, warps: int = 1, grid: int = 1) -> Launch:
    tensors = (TensorArg.contiguous("x_ptr", (1024,), dtype), TensorArg.contiguous("y_ptr", (1024,), dtype))
    return Launch(KERNELS, kernel, (grid,), tensors, {}, constexprs, Config({}, warps, 1))


def word(stall=1, write=7, read=7, wait=0) -> int:
    return (wait << 52) | (read << 49) | (write << 46) | (stall << 41)


def test_the_control_bits_give_the_scoreboards_each_instruction_sets_and_waits_on():
    c = control_bits(word(stall=4, write=2, read=7, wait=0b000101) | (1 << 45) | (0b1111 << 58))
    assert (c.stall, c.yield_flag, c.write_barrier, c.read_barrier, c.wait_mask) == (4, True, 2, None, 0b101)
    assert control_bits(0x000FC80000000005).write_barrier is None  # a dependent FFMA of sm_90: no scoreboard
    assert control_bits(0x004FC80000000000).wait_mask == 0b000100


LISTING = """\
kernel:
        /*0000*/                   LDG.E R2, desc[UR4][R2.64] ;
                                   /* 0x{ldg:016x} */
        /*0010*/                   FADD R4, R2, R2 ;
                                   /* 0x{use:016x} */
        /*0020*/               @P0 LDG.E R6, desc[UR4][R6.64] ;
                                   /* 0x{pldg:016x} */
        /*0030*/                   FADD R8, R6, R6 ;
                                   /* 0x{puse:016x} */
        /*0040*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
                                   /* 0x{bar:016x} */
        /*0050*/                   EXIT ;
                                   /* 0x{exit:016x} */
"""


def test_a_waiting_instruction_issues_no_sooner_than_its_producers_least_latency():
    text = LISTING.format(ldg=word(stall=1, write=2), use=word(stall=1, wait=0b100), pldg=word(stall=1, write=3),
                          puse=word(stall=1, wait=0b1000), bar=word(stall=1), exit=word(stall=5))
    code = parse_sass(text)["kernel"].instructions
    # LDG (33 to its reader), FADD 1, the predicated LDG 1 (its lanes may all be off: no latency), FADD 1, then the
    # barrier holds a 1-warp CTA's warp BARRIER_CYCLES[1] and a 32-warp CTA's BARRIER_CYCLES[32].
    assert block_path_cycles(code, warps=1) == LDG + 1 + 1 + 1 + BARRIER_CYCLES[90][1] + 5
    assert block_path_cycles(code, warps=32) == LDG + 1 + 1 + 1 + BARRIER_CYCLES[90][32] + 5
    assert block_path_cycles(code[1:], warps=1) == 1 + 1 + 1 + BARRIER_CYCLES[90][1] + 5  # producer outside


def test_a_pointer_chase_waits_one_load_latency_per_step_and_an_exp_chain_one_mufu_latency():
    for kernel, dtype, latency in (("pointer_chase", "int32", LDG), ("exp_chain", "float32", MUFU)):
        for steps in (12,):  # the compile the demand below reads too
            compiled = compile_launch(launch(kernel, dtype, {"STEPS": steps}))
            fn = parse_sass(compiled.sass)[kernel]
            cfg = build_cfg(fn)
            path = block_path_table(fn, cfg, warps=1).sum()
            stalls = sum(fn.instructions[i].issue_cycles for j, (s, e) in enumerate(cfg.blocks) if j in cfg.reachable
                         for i in range(s, e))
            # Each step is one more dependent load (or MUFU) on the path: at least its latency; and the path is
            # never under the stall counts alone (the chain floor before).
            assert path >= steps * latency and path >= stalls
            assert stalls < steps * latency
        demand = generic_demand(launch(kernel, dtype, {"STEPS": 12}))
        chain = roofline(demand, H100.rates).pipelines["chain"]
        assert chain >= 12 * latency / (H100.spec.boost_clock_ghz * 1e3)


def test_a_block_reduction_waits_for_its_shuffles_shared_loads_and_barrier():
    compiled = compile_launch(launch("row_sums", "float32", {"BLOCK": 1024}, warps=4))
    fn = parse_sass(compiled.sass)["row_sums"]
    path = block_path_table(fn, build_cfg(fn), warps=4).sum()
    shuffles = sum(1 for i in fn.instructions if i.opcode == "SHFL")
    assert shuffles >= 5
    # Every shuffle result is read by the next step of the reduction: one SHFL latency each, and the barrier.
    assert path >= shuffles * MIN_LATENCY_CYCLES[90]["SHFL"] + BARRIER_CYCLES[90][4]


TABLE = {1: [(1, 1.0), (100, 1.5), (200, 2.0), (400, 3.0)], 8: [(1, 1.2), (100, 1.6), (200, 2.2), (400, 3.6)]}


def test_the_empty_kernel_floor_is_taken_from_below_between_measured_grids():
    assert empty_kernel_floor(TABLE, 100, 1) == 1.5
    assert empty_kernel_floor(TABLE, 300, 1) == 2.5           # the 100-200 secant extended: 2.0 + 100 x 0.005
    assert abs(empty_kernel_floor(TABLE, 150, 1) - (1.5 + 0.5 / 99 * 50)) < 1e-12  # the 1-100 secant
    assert empty_kernel_floor(TABLE, 100, 8) == 1.5            # more warps: the least over sizes <= 8
    assert empty_kernel_floor(TABLE, 100, 4) == 1.5            # 4 warps: only the 1-warp measurement is under it
    assert empty_kernel_floor({8: TABLE[8]}, 100, 4) is None   # no measured size <= 4 warps
    assert empty_kernel_floor(TABLE, 0, 1) is None
    assert empty_kernel_floor({}, 100, 1) is None


def test_a_launch_whose_grid_costs_more_than_its_work_binds_on_launch():
    demand = generic_demand(launch("exp_chain", "float32", {"STEPS": 1}, grid=1))
    rates = replace(H100.rates, empty_kernel_us={1: [(1, 0.9), (1_000, 1.5), (500_000, 300.0)]})
    few = roofline(demand, rates)
    assert few.binding != "launch" or few.ceiling_us == few.pipelines["launch"]
    many = replace(demand, ctas=400_000, active_ctas=400_000,
                   cta_classes=[(400_000.0, w) for _, w in demand.cta_classes])
    ceiling = roofline(many, rates)
    floor = empty_kernel_floor(rates.empty_kernel_us, 400_000, 1)
    assert floor > 200 and ceiling.binding == "launch" and ceiling.ceiling_us == floor
    assert any("empty kernel" in n for n in ceiling.notes)


def test_the_exact_families_keep_their_ceiling_without_issue_counts():
    demand = Demand(kernel="k", ctas=10**6, active_ctas=10**6, warps_per_cta=1, instructions_per_cta={"fma": 1.0})
    rates = replace(H100.rates, empty_kernel_us={1: [(1, 0.9), (10**6, 600.0)]})
    assert roofline(demand, rates).binding != "launch"


def test_the_shipped_calibrations_carry_an_empty_kernel_table_for_each_corpus_gpu():
    for name in ("h100", "h200"):
        table = resolve_gpu(name).rates.empty_kernel_us
        assert {1, 4, 32} <= set(table)
        grids = [g for g, _ in table[1]]
        assert grids == sorted(grids) and grids[0] == 1 and grids[-1] > 500_000
