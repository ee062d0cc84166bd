"""Expected DRAM bytes (`ceilings.dram`, RESULTS 26): re-reads past the L2 and writes still in it at the end,
on synthetic accesses whose answer is known by construction, and the per-CTA stream ids of the IR."""

import numpy as np

from ceilings.dram import DramTraffic, StreamAccess, expected_dram_bytes
from ceilings.ttir_eval import read_kernel_ir

MB = 1 << 20


def gemm_traffic(m_tiles: int, n_tiles: int, tile_bytes: float) -> DramTraffic:
    """A GEMM grid (x = pid_n fastest): CTA i reads A's row of tiles i // n_tiles and B's column i % n_tiles,
    each `tile_bytes`, and writes its own output tile."""
    ctas = m_tiles * n_tiles
    pid = np.arange(ctas)
    moved = np.full(ctas, tile_bytes)
    return DramTraffic({"a": m_tiles * tile_bytes, "b": n_tiles * tile_bytes, "c": ctas * 1.0 * MB},
                       [StreamAccess("a", "load", moved, pid // n_tiles),
                        StreamAccess("b", "load", moved, pid % n_tiles),
                        StreamAccess("c", "store", np.full(ctas, 1.0 * MB), pid)])


def test_operands_that_fit_in_the_l2_are_read_once_and_outputs_that_fit_are_not_written():
    traffic = gemm_traffic(8, 8, 1 * MB)  # A and B 8 MB each, C 64 MB
    read, written = expected_dram_bytes(traffic, l2_bytes=100 * MB, resident_ctas=16)
    assert read == 16 * MB and written == 0.0  # everything stays in a 100 MB L2; nothing written back in the kernel


def test_a_column_operand_is_read_again_each_row_when_the_l2_is_too_small():
    traffic = gemm_traffic(8, 8, 1 * MB)
    # 8 CTAs a wave = one row of tiles: A's tile once, all of B each wave; 10 MB of L2 holds a wave's A and B
    # (9 MB) but not B across the output tiles written in between.
    read, written = expected_dram_bytes(traffic, l2_bytes=10 * MB, resident_ctas=8)
    assert read > 16 * MB
    assert read <= 8 * MB + 8 * 8 * MB
    assert 0 < written < 64 * MB  # written back as evicted, the last ones still in the L2


def test_a_row_read_twice_by_each_cta_is_read_again_only_when_a_wave_does_not_fit():
    ctas, row = 64, 1.0 * MB
    pid = np.arange(ctas)
    twice = DramTraffic({"x": ctas * row}, [StreamAccess("x", "load", np.full(ctas, row), pid),
                                          StreamAccess("x", "load", np.full(ctas, row), pid)])
    fits, _ = expected_dram_bytes(twice, l2_bytes=64 * MB, resident_ctas=8)
    spills, _ = expected_dram_bytes(twice, l2_bytes=4 * MB, resident_ctas=8)
    assert fits == ctas * row
    assert spills == ctas * row + ctas * row * (1 - 4 / 8)  # each wave's 8 MB over a 4 MB L2


def test_a_gathered_access_counts_its_compulsory_bytes():
    traffic = DramTraffic({"table": 10 * MB}, [StreamAccess("table", "load", np.full(100, 1.0 * MB), None)])
    assert expected_dram_bytes(traffic, l2_bytes=1 * MB, resident_ctas=4) == (10 * MB, 0.0)


GEMM_IR = """
module {
  tt.func public @k(%a: !tt.ptr<f16> loc(#loc), %b: !tt.ptr<f16> loc(#loc), %n_tiles: i32 loc(#loc)) {
    %pid = tt.get_program_id x : i32 loc(#loc)
    %pm = arith.divsi %pid, %n_tiles : i32 loc(#loc)
    %pn = arith.remsi %pid, %n_tiles : i32 loc(#loc)
    %ra = tt.splat %pm : i32 -> tensor<64xi32> loc(#loc)
    %pa = tt.splat %a : !tt.ptr<f16> -> tensor<64x!tt.ptr<f16>> loc(#loc)
    %qa = tt.addptr %pa, %ra : tensor<64x!tt.ptr<f16>>, tensor<64xi32> loc(#loc)
    %va = tt.load %qa : tensor<64x!tt.ptr<f16>> loc(#loc)
    %rb = tt.splat %pn : i32 -> tensor<64xi32> loc(#loc)
    %pb = tt.splat %b : !tt.ptr<f16> -> tensor<64x!tt.ptr<f16>> loc(#loc)
    %qb = tt.addptr %pb, %rb : tensor<64x!tt.ptr<f16>>, tensor<64xi32> loc(#loc)
    %vb = tt.load %qb : tensor<64x!tt.ptr<f16>> loc(#loc)
    %idx = arith.fptosi %va : tensor<64xf16> to tensor<64xi32> loc(#loc)
    %qg = tt.addptr %pb, %idx : tensor<64x!tt.ptr<f16>>, tensor<64xi32> loc(#loc)
    %vg = tt.load %qg : tensor<64x!tt.ptr<f16>> loc(#loc)
    tt.return loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc("k.py":1:0)
"""


def test_stream_ids_follow_the_program_ids_a_pointer_derives_from():
    ir = read_kernel_ir(GEMM_IR, {"n_tiles": 4}, (12,))
    a, b, gathered = ir.accesses
    assert len(set(a.stream.tolist())) == 3 and len(set(b.stream.tolist())) == 4
    assert a.stream[0] == a.stream[3] != a.stream[4]   # CTAs 0-3 share A's row of tiles
    assert b.stream[0] == b.stream[4] != b.stream[1]   # CTAs 0, 4, 8 share B's column
    assert gathered.stream is None                     # addressed by loaded values


def test_the_feature_is_the_expected_bytes_over_the_floor_on_a_compiled_launch():
    import math
    from pathlib import Path

    from advisor.model.features import feature_row
    from ceilings.demand import generic_demand
    from ceilings.dram import L2_SHARE, expected_dram_bytes
    from ceilings.hardware import get_spec, rates_for
    from ceilings.launch import Config, Launch, TensorArg
    from ceilings.roofline import roofline

    kernels = str(Path(__file__).resolve().parent / "fixtures" / "lane_guard_kernels.py")
    tensors = (TensorArg.contiguous("x_ptr", (8, 1024), "float32"), TensorArg.contiguous("y_ptr", (8,), "float32"))
    one = Launch(kernels, "row_sum", (8,), tensors, {}, {}, Config({"BLOCK": 1024}, 4, 1))
    demand = generic_demand(one)
    spec = get_spec("h100")
    ceiling = roofline(demand, rates_for(spec.name))
    read, written = expected_dram_bytes(demand.expected.dram_traffic, spec.l2_bytes * L2_SHARE,
                                        spec.sms * ceiling.ctas_per_sm)
    # 8 rows of 4 KiB read once, the 32 bytes of sums still in the L2 at the end.
    assert (read, written) == (8 * 4096, 0.0)
    row = feature_row(ceiling, demand, one.config, spec)
    assert row["log_expected_dram_vs_floor"] == math.log(8 * 4096 / demand.dram_bytes)
