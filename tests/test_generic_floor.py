"""The generic path's floor and expected work on small kernels whose counts are known by construction
(tests/fixtures/floor_kernels.py), compiled for sm_90 without a GPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import triton

from ceilings import hardware
from ceilings.compile import compile_launch
from ceilings.demand import generic_demand
from ceilings.errors import AdvisorError
from ceilings.launch import Config, Launch, TensorArg, ValueSample
from ceilings.roofline import Demand, busiest_sm_work, roofline
from ceilings.sass import count_instructions, parse_sass
from ceilings.ttir_eval import loop_trip_counts

ROOT = Path(__file__).resolve().parents[1]
KERNELS = str(Path(__file__).resolve().parent / "fixtures" / "floor_kernels.py")
BLOCK = 1024
WARPS = 4


def launch(kernel, grid, shape, scalars, extra=(), block=BLOCK, constexprs=None):
    tensors = (TensorArg.contiguous("x_ptr", shape, "float32"), TensorArg.contiguous("y_ptr", shape, "float32"))
    return Launch(KERNELS, kernel, grid, tensors + tuple(extra), scalars, constexprs or {},
                  Config({"BLOCK": block}, WARPS, 1))


def total(demand):
    return sum(demand.instructions(p) for p in ("tensor", "fma", "alu", "xu", "lsu", "uniform", "cbu", "adu", "tma"))


def row_bytes(cols=BLOCK):
    return cols * 4 * 2  # one fp32 row read and written


# --- early exits, branches on scalars, data-dependent bounds ---------------------------------------
def test_ctas_past_the_bound_exit_and_a_false_branch_is_not_counted():
    d = generic_demand(launch("guarded_rows", (1100,), (1000, BLOCK), {"n_rows": 1000, "n_cols": BLOCK,
                                                                        "use_exp": 0}))
    assert d.ctas == 1100 and d.active_ctas == 1000
    assert d.l2_bytes == 1000 * row_bytes()           # the 100 CTAs past the bound move nothing
    assert d.instructions("xu") == 0                    # exp2 is behind `use_exp > 0`, false here
    assert d.expected.active_ctas == 1000 and d.expected.instructions("xu") == 0
    assert any("runs in 1000 of 1100 CTAs" in n for n in d.notes)
    # the floor names the Triton whose SASS it counted: another Triton's binary has other work
    assert d.source == f"generic (SASS of Triton {triton.__version__} x evaluated control flow)"
    taken = generic_demand(launch("guarded_rows", (1100,), (1000, BLOCK), {"n_rows": 1000, "n_cols": BLOCK,
                                                                            "use_exp": 3}))
    assert taken.instructions("xu") == 1000 * BLOCK / 32  # one MUFU.EX2 per element, 32 lanes a warp


def test_a_bound_read_from_memory_uses_the_carried_values_or_floors_to_no_work():
    count = TensorArg("count_ptr", (1,), "int32", (1,), values=(700,))
    d = generic_demand(launch("counted_rows", (1024,), (1024, BLOCK), {"n_cols": BLOCK}, [count]))
    assert d.active_ctas == 700 and d.instructions("xu") == 700 * BLOCK / 32
    unknown = TensorArg("count_ptr", (1,), "int32", (1,))
    d = generic_demand(launch("counted_rows", (1024,), (1024, BLOCK), {"n_cols": BLOCK}, [unknown]))
    assert d.active_ctas == 0 and d.instructions("xu") == 0          # every CTA may exit
    assert d.expected.active_ctas == 1024 and d.expected.instructions("xu") == 1024 * BLOCK / 32
    assert any("early exit" in n and "not determined by the launch" in n for n in d.notes)


def test_loop_bounds_from_a_masked_load_of_carried_offsets_are_evaluated():
    """A group's rows run from its predecessor's end (a masked load: `other` for the first group) to its own:
    torchao's jagged-group fp8 scale kernels counted 0.16-0.39x of Nsight Compute's FMA and ALU when such
    bounds were taken at their least (RESULTS 36-37)."""
    ends = (100, 100, 250, 600)  # groups of 100, 0, 150 and 350 rows
    offsets = TensorArg("offsets_ptr", (4,), "int32", (1,), values=ends)
    d = generic_demand(launch("jagged_groups", (4,), (600, BLOCK), {"n_cols": BLOCK}, [offsets]))
    assert d.instructions("xu") == 600 * BLOCK / 32  # one MUFU.EX2 per element of every row of every group
    assert d.busiest_sm_work("xu", 132) == 350 * BLOCK / 32  # the largest group's CTA
    unknown = TensorArg("offsets_ptr", (4,), "int32", (1,))
    assert generic_demand(launch("jagged_groups", (4,), (600, BLOCK), {"n_cols": BLOCK}, [unknown])
                          ).instructions("xu") == 0  # without the values, the least work: none


def test_a_branch_on_a_count_reduced_from_carried_ids_is_evaluated_per_cta():
    """`if tl.sum(ids == adapter) > 0` over a block of carried routing ids (a per-token LoRA kernel): the
    floor counted the work in no CTA and the expected work in half, 50x under a measured launch (RESULTS 55)."""
    import numpy as np

    tiles, adapters, rows = 64, 8, 16
    ids = np.random.default_rng(3).integers(-1, adapters, tiles * rows)
    ids[: 4 * rows] = -1  # four tiles route to no adapter
    carried = TensorArg("ids_ptr", (tiles * rows,), "int32", (1,), values=tuple(int(v) for v in ids))
    d = generic_demand(launch("routed_tiles", (tiles, adapters), (tiles * adapters, BLOCK),
                              {"n_rows": tiles * rows}, [carried], constexprs={"ROWS": rows}))
    working = sum(len(set(ids[t * rows:(t + 1) * rows].tolist()) - {-1}) for t in range(tiles))
    assert 0 < working < tiles * adapters
    assert d.instructions("xu") == working * BLOCK / 32   # one MUFU.EX2 per element of a working CTA
    assert d.expected.instructions("xu") == working * BLOCK / 32
    unknown = TensorArg("ids_ptr", (tiles * rows,), "int32", (1,))
    d = generic_demand(launch("routed_tiles", (tiles, adapters), (tiles * adapters, BLOCK),
                              {"n_rows": tiles * rows}, [unknown], constexprs={"ROWS": rows}))
    assert d.instructions("xu") == 0                       # without the ids: the least work, none
    assert d.expected.instructions("xu") == tiles * adapters * BLOCK / 32 / 2


def test_a_loop_bound_reduced_from_carried_lengths_is_evaluated_per_cta():
    lengths = (3, 9, 1, 4, 0, 0, 2, 0)  # two programs of four sequences: longest 9 and 2
    carried = TensorArg("lengths_ptr", (8,), "int32", (1,), values=lengths)
    d = generic_demand(launch("longest_in_block", (2,), (16, BLOCK), {"n_cols": BLOCK}, [carried],
                              constexprs={"SEQS": 4}))
    assert d.instructions("xu") == (9 + 2) * BLOCK / 32
    assert d.busiest_sm_work("xu", 132) == 9 * BLOCK / 32


# --- loops ----------------------------------------------------------------------------------------
def test_a_grid_stride_loop_gets_its_trip_count_per_cta():
    d = generic_demand(launch("strided_rows", (132,), (1000, BLOCK), {"n_rows": 1000, "n_cols": BLOCK}))
    assert d.l2_bytes == 1000 * row_bytes() and d.instructions("xu") == 1000 * BLOCK / 32
    assert sorted(n for n, _ in d.cta_classes) == [56, 76]   # 1000 = 76 CTAs x 8 rows + 56 x 7
    # The busiest SM runs a CTA of 8 rows: 8 rows of MUFU.EX2.
    assert d.busiest_sm_work("xu", 132) == 8 * BLOCK / 32
    assert any("trip count from program ids, 7 to 8" in n for n in d.notes)
    # Without a grid the bound is unknown, as the old evaluation had it.
    ttgir = compile_launch(launch("strided_rows", (132,), (1000, BLOCK), {"n_rows": 1000, "n_cols": BLOCK})).ttgir
    assert loop_trip_counts(ttgir, {"n_rows": 1000, "n_cols": BLOCK}) == [None]


def test_a_loop_run_backwards_gets_its_trip_count():
    d = generic_demand(launch("reversed_rows", (1,), (100, BLOCK), {"n_rows": 100, "n_cols": BLOCK}))
    # One MUFU.EX2 per element of each of the 100 rows, and up to 3 rows' worth from copies of the body
    # that ptxas peels out of its unrolled loops (counted once per entry); unknown, the floor had none.
    rows = d.instructions("xu") / (BLOCK / 32)
    assert 100 <= rows <= 103
    assert not any("bound depends on memory" in n for n in d.notes)


@pytest.mark.parametrize("cols", [1000, 1003])
def test_an_unrolled_loop_and_its_remainder_count_the_trips_once(cols):
    one = launch("scalar_sum", (1,), (1, cols), {"n_cols": cols})
    d = generic_demand(one)
    # One scalar load per iteration and warp, plus the store: the main loop is unrolled 4x, with a
    # remainder loop and a few copies of the body peeled out of the loops (counted once per entry).
    loads = d.instructions("lsu") / WARPS - 1
    assert cols <= loads <= cols + 4
    assert any("unrolled 4x with a remainder loop" in n for n in d.notes)
    # Weighting the unrolled main loop by the full trip count counted each load about 4 times.
    old = count_instructions(compile_launch(one).sass, "scalar_sum", [cols])
    assert old.per_pipe["lsu"] >= 3.9 * cols


@pytest.mark.parametrize("trips", [32, 33, 35])
def test_a_loop_unrolled_without_a_remainder_loop_counts_each_iteration_once(trips):
    # 128 columns a trip, one fp32 element per thread: one load a warp per trip, the store and the
    # thread-index read. ptxas unrolls the loop 4x and peels up to 3 copies of the body out after it
    # (no remainder loop).
    one = launch("blocked_sum", (1,), (1, 128 * trips), {"n_cols": 128 * trips}, block=128)
    d = generic_demand(one)
    assert d.instructions("lsu") / WARPS == trips + 2
    assert d.expected.instructions("lsu") / WARPS == trips + 2
    assert any("unrolled 4x without a remainder loop" in n for n in d.notes)
    # Weighted by the full trip count, the unrolled loop counted each load 4 times.
    old = count_instructions(compile_launch(one).sass, "blocked_sum", [trips])
    assert old.per_pipe["lsu"] >= 4 * trips


def _cold_callee_left_out(kernel: str, callee: str):
    """The kernel's demand, after checking that none of its 8 calls a thread (8 elements per thread, straight-line
    code) to `callee` is counted, where the old count took each with the subroutine's body."""
    one = launch(kernel, (4,), (4, BLOCK), {"n_cols": 1000})
    compiled = compile_launch(one)
    functions = parse_sass(compiled.sass)
    name = next(name for name in functions if callee in name)
    d = generic_demand(one, compiled)
    old = count_instructions(compiled.sass, kernel, [])
    body = len([i for i in functions[name].instructions if i.pipe not in ("none",)])
    assert sum(old.per_pipe.values()) * WARPS * 4 - total(d) >= 8 * body * WARPS * 4
    assert any(name in n and "not counted" in n for n in d.notes)
    return d


def test_the_64_bit_remainder_slow_path_is_not_counted():
    d = _cold_callee_left_out("wide_remainder", "rem_s64")  # taken only when an operand exceeds 32 bits
    assert total(d) == total(d.expected)


def test_the_float64_division_full_routine_is_not_counted():
    d = _cold_callee_left_out("wide_division", "div_rn_f64_full")  # taken only when the range check fails
    assert d.instructions("fp64") > 0  # the inline DFMA refinement stays


def test_an_ieee_division_checks_its_range_on_the_xu_pipe():
    """FCHK on XU, as Nsight Compute counts it: torchao's quantisers' XU counts were one a warp short and their
    FMA counts one over while it sat on FMA (RESULTS 37 item 11)."""
    instructions = [i for f in parse_sass(compile_launch(launch("rn_division", (4,), (4, BLOCK), {"n_cols": 1000}))
                                          .sass).values() for i in f.instructions]
    assert {i.pipe for i in instructions if i.opcode == "FCHK"} == {"xu"}
    assert any(i.opcode == "MUFU" for i in instructions)


def test_float64_instructions_run_on_their_own_pipe_at_its_rate():
    """DFMA/DADD/DMUL/DSETP on the FP64 pipe (64 lanes per SM on an H100: half the FP32 rate), not on FMA:
    torchao's float64-dividing quantisers had FMA counts 1.35-1.74x Nsight Compute's (RESULTS 36)."""
    one = launch("wide_division", (264,), (264, BLOCK), {"n_cols": 1000})
    compiled = compile_launch(one)
    instructions = [i for f in parse_sass(compiled.sass).values() for i in f.instructions]
    assert any(i.opcode == "DFMA" for i in instructions)
    assert {i.pipe for i in instructions if i.opcode in ("DFMA", "DADD", "DMUL", "DSETP")} == {"fp64"}
    d = generic_demand(one, compiled)
    c = roofline(d, hardware.resolve_gpu("h100", calibrated=False).rates)
    spec = hardware.get_spec("h100")
    per_sm_rate = spec.fp64_lanes / 32 * spec.boost_clock_ghz * 1e9  # warp instructions per second on one SM
    assert c.pipelines["fp64"] == pytest.approx(d.busiest_sm_work("fp64", spec.sms) / per_sm_rate * 1e6)
    assert c.pipelines["fp64"] > 0 and spec.fp64_lanes == spec.fp32_lanes // 2


# --- bytes ------------------------------------------------------------------------------------------
def test_dram_bytes_of_a_kernel_touching_half_its_tensors():
    d = generic_demand(launch("guarded_rows", (500,), (1000, BLOCK), {"n_rows": 1000, "n_cols": BLOCK,
                                                                       "use_exp": 0}))
    assert d.dram_bytes == 500 * row_bytes()          # half of x read, half of y written
    footprint = 2 * 1000 * BLOCK * 4
    assert d.dram_bytes == footprint / 2


def test_rows_several_ctas_read_count_once_in_the_dram_floor():
    # 4 CTAs read each of 1000 rows of x, which has 4000: the floor's x bytes are the 1000 rows read, not the
    # 4000 row reads issued (equal to x's footprint, which alone capped them before).
    x = TensorArg.contiguous("x_ptr", (4000, BLOCK), "float32")
    y = TensorArg.contiguous("y_ptr", (4000, BLOCK), "float32")
    d = generic_demand(Launch(KERNELS, "shared_rows", (4000,), (x, y), {"n_cols": BLOCK}, {"GROUP": 4},
                              Config({"BLOCK": BLOCK}, WARPS, 1)))
    assert d.dram_bytes == 1000 * BLOCK * 4 + 4000 * BLOCK * 4
    assert d.l2_bytes == 2 * 4000 * BLOCK * 4            # every CTA still moves its row through the L2


def test_warm_l2_is_assumed_only_when_the_working_set_fits():
    rates = hardware.rates_for("h100", use_calibration=False)
    # The softmax tutorial's case: 4096 x 4096 fp32 read and written by a persistent grid: 128 MiB.
    big = generic_demand(launch("strided_rows", (132,), (4096, 4096), {"n_rows": 4096, "n_cols": 4096},
                                block=4096))
    assert big.dram_bytes == 2 * 4096 * 4096 * 4
    c = roofline(big, rates)
    assert c.pipelines["dram"] == pytest.approx(big.dram_bytes / (rates.dram_tbs * 1e12) * 1e6)
    assert c.binding == "dram" and not any("warm L2" in n for n in c.notes)
    small = roofline(generic_demand(launch("strided_rows", (132,), (256, 4096), {"n_rows": 256, "n_cols": 4096},
                                           block=4096)), rates)
    assert small.pipelines["dram"] == 0.0 and any("warm L2: the 8.4 MB working set" in n for n in small.notes)


# --- the busiest SM over CTA classes -----------------------------------------------------------------
def test_busiest_sm_work_is_a_lower_bound_over_any_assignment():
    assert busiest_sm_work([(5, 3.0)], 2) == 9.0                  # ceil(5 / 2) CTAs of 3
    assert busiest_sm_work([(1, 2.0), (2, 1.0)], 2) == 2.0         # {2} and {1, 1}
    assert busiest_sm_work([(1, 10.0), (3, 1.0)], 2) == 10.0       # the largest CTA alone
    assert busiest_sm_work([(3, 4.0), (1, 1.0)], 2) == 8.0         # two of the three 4s share an SM
    uniform = Demand("k", ctas=10, active_ctas=10, warps_per_cta=4, instructions_per_cta={"fma": 7.0})
    assert uniform.busiest_sm_work("fma", 4) == 3 * 7.0


# --- opcode -> pipeline -------------------------------------------------------------------------------
def test_pipelines_follow_nsight_computes_units():
    listing = """
k:
.text.k:
        /*0000*/                   HFMA2.MMA R0, -RZ, RZ, 0, 0 ;
        /*0010*/                   HFMA2 R1, R2, R3, R4 ;
        /*0020*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0030*/                   LEA R2, P0, R3, R4, 0x2 ;
        /*0040*/                   ULDC UR4, c[0x0][0x0] ;
        /*0050*/                   IMAD.MOV.U32 R5, RZ, RZ, R6 ;
        /*0060*/                   S2R R7, SR_TID.X ;
        /*0070*/                   S2R R8, SR_CTAID.X ;
        /*0080*/                   I2FP.F32.S32 R9, R7 ;
        /*0090*/                   MUFU.EX2 R10, R9 ;
        /*00a0*/                   EXIT ;
"""
    pipes = [i.pipe for i in parse_sass(listing)["k"].instructions]
    assert pipes == ["tensor", "fma", "adu", "alu", "uniform", "fma", "lsu", "adu", "alu", "xu", "cbu"]
    counts = count_instructions(listing, "k", [])
    assert counts.tensor_flops == 0 and counts.per_pipe["tensor"] == 1  # HFMA2.MMA does no MMA work


# --- launch values and the CLI --------------------------------------------------------------------------
def test_tensor_values_round_trip_and_are_checked():
    t = TensorArg("ids", (3,), "int32", (1,), values=(4, 0, 2))
    assert TensorArg("ids", (3,), "int32", (1,), values=[4, 0, 2]) == t
    doc = launch("counted_rows", (8,), (8, BLOCK), {"n_cols": BLOCK}, [t]).to_dict()
    assert doc["tensors"][-1]["values"] == [4, 0, 2] and "values" not in doc["tensors"][0]
    assert Launch.from_dict(doc).tensor("ids").values == (4, 0, 2)
    with pytest.raises(AdvisorError, match="integer tensors only"):
        TensorArg("w", (2,), "float32", (1,), values=(1, 2))
    with pytest.raises(AdvisorError, match="exceed 1048576 bytes"):
        TensorArg("ids", (270000,), "int32", (1,), values=tuple(range(270000)))
    big = TensorArg("ids", (270000,), "int32", (1,), sample=ValueSample((5, 1, 9), 0, 9, distinct_rows=10))
    doc = big.to_dict()
    assert doc["sample"] == {"values": [5, 1, 9], "low": 0, "high": 9, "sorted": False, "distinct_rows": 10}
    assert "values" not in doc
    again = Launch.from_dict(launch("counted_rows", (8,), (8, BLOCK), {"n_cols": BLOCK}, [big]).to_dict())
    assert again.tensor("ids") == big
    with pytest.raises(AdvisorError, match="sample is kept for integer tensors only"):
        TensorArg("w", (2,), "float32", (1,), sample=ValueSample((1, 2), 1, 2))
    with pytest.raises(AdvisorError, match="1 to 4096 values"):
        ValueSample(tuple(range(5000)), 0, 5000)
    with pytest.raises(AdvisorError, match="within its low 2"):
        ValueSample((1, 5), 2, 5)
    with pytest.raises(AdvisorError, match="do not fit"):
        ValueSample((1, 5), 0, 5, distinct_rows=7)
    bad = launch("counted_rows", (8,), (8, BLOCK), {"n_cols": BLOCK}, [big]).to_dict()
    bad["tensors"][-1]["sample"] = [1, 2]
    with pytest.raises(AdvisorError, match=r"launch: tensor ids: sample: it must be an object"):
        Launch.from_dict(bad)


def test_ceiling_cli_detail(tmp_path):
    one = launch("guarded_rows", (1100,), (1000, BLOCK), {"n_rows": 1000, "n_cols": BLOCK, "use_exp": 0})
    path = tmp_path / "launch.json"
    path.write_text(one.to_json())
    r = subprocess.run([sys.executable, "-m", "advisor.cli", "ceiling", str(path), "--format", "json", "--detail"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    detail = doc["detail"]
    assert {"registers", "spill_bytes_per_thread", "shared_bytes_per_cta", "floor", "expected", "notes"} <= set(detail)
    floor = detail["floor"]
    assert floor["working_ctas"] == 1000 and floor["ctas"] == 1100 and floor["instructions"]["xu"] == 0
    assert floor["bytes"]["l2"] == 1000 * row_bytes() and floor["bytes"]["dram"] == 1000 * row_bytes()
    assert {"tensor", "fma", "alu", "xu", "lsu", "uniform", "adu", "cbu"} <= set(floor["instructions"])
    plain = subprocess.run([sys.executable, "-m", "advisor.cli", "ceiling", str(path), "--format", "json"],
                           capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert "detail" not in json.loads(plain.stdout)


def test_a_load_masked_by_loaded_flags_counts_nothing_in_the_dram_floor():
    # x (32768 rows, 128 MiB) is read only where an int8 flag read from memory is set: the launch does not carry
    # the flags, so the floor counts none of x (all flags could be 0), the expected work all of it. Before, the
    # floor counted all of x, and a padding mask that kept half the rows ran at 0.74 x that floor (RESULTS 63).
    rows, per_cta = 32768, 32
    x = TensorArg.contiguous("x_ptr", (rows, BLOCK), "float32")
    y = TensorArg.contiguous("y_ptr", (rows // per_cta, BLOCK), "float32")
    flags = TensorArg.contiguous("flags_ptr", (rows,), "int8")
    d = generic_demand(Launch(KERNELS, "rows_kept_by_flags", (rows // per_cta,), (x, y, flags), {"n_cols": BLOCK},
                              {"ROWS": per_cta}, Config({"BLOCK": BLOCK}, WARPS, 1)))
    y_bytes, flag_bytes = rows // per_cta * BLOCK * 4, rows
    assert d.dram_bytes == y_bytes + flag_bytes
    assert (d.read_bytes, d.written_bytes) == (flag_bytes, y_bytes)
    assert d.expected.dram_bytes == rows * BLOCK * 4 + y_bytes + flag_bytes
    assert any("masked by values loaded from memory" in n for n in d.notes)
    # The models were fitted with such accesses counted in full: their view keeps x.
    assert d.for_model().dram_bytes == d.expected.dram_bytes
    rates = hardware.rates_for("h100")
    c = roofline(d, rates)
    assert c.model_view.pipelines["dram"] > c.pipelines["dram"]
