"""LSU counting rules (RESULTS 26): shared-memory matrix stores and memory fences issue on the LSU; the
error barrier after a release fence does not; a block behind a guard on the thread index counts in the warps
that run it (`ceilings.lane_guard`)."""

from pathlib import Path

import pytest

from ceilings.compile import compile_launch
from ceilings.demand import generic_demand
from ceilings.lane_guard import warp_shares
from ceilings.launch import Config, Launch, TensorArg
from ceilings.sass import build_cfg, parse_sass
from ceilings.sass_map import QUANTITIES, place
from ceilings.ttir_eval import read_kernel_ir


def test_stsm_and_fence_issue_on_the_lsu_and_errbar_on_the_adu():
    listing = """
k:
.text.k:
        /*0000*/                   STSM.16.M88.4 [R3], R16 ;
        /*0010*/                   MEMBAR.ALL.CTA ;
        /*0020*/                   FENCE.VIEW.ASYNC.S ;
        /*0030*/                   MEMBAR.ALL.GPU ;
        /*0040*/                   ERRBAR;
        /*0050*/                   ATOMG.E.ADD.STRONG.GPU PT, R5, desc[UR6][R2.64], R7 ;
        /*0060*/                   CCTL.IVALL ;
        /*0070*/                   LDSM.16.M88.4 R20, [R29+UR6] ;
        /*0080*/                   EXIT ;
"""
    pipes = [i.pipe for i in parse_sass(listing)["k"].instructions]
    assert pipes == ["lsu", "lsu", "lsu", "lsu", "adu", "lsu", "lsu", "lsu", "cbu"]


def test_a_shared_matrix_store_moves_its_bytes_through_shared_memory():
    listing = """
k:
.text.k:
        /*0000*/                   STSM.16.M88.4 [R3], R16 ;
        /*0010*/                   STSM.16.M88.2 [R4], R18 ;
        /*0020*/                   EXIT ;
"""
    ir = read_kernel_ir("tt.func public @k() {\n  tt.return\n}\n", {}, (1,), {}, {})
    table = place(listing, "k", ir).table
    column = dict(zip(QUANTITIES, range(len(QUANTITIES)), strict=True))
    assert table[:, column["lsu"]].sum() == 2
    assert table[:, column["shared_bytes"]].sum() == 128 * 4 + 128 * 2



def test_a_vector_reduction_moves_every_lane_element_through_global_memory():
    # REDG.E.ADD.F32x4 adds four floats a lane, ATOMG.E.ADD.F16x8 eight halves: 16 B a lane each, as a
    # 128-bit load; counted at the default 4 B they under-stated a split-K epilogue's bytes 4x.
    listing = """
k:
.text.k:
        /*0000*/                   REDG.E.ADD.F32x4.FTZ.RN.STRONG.GPU desc[UR4][R2.64], R4 ;
        /*0010*/                   ATOMG.E.ADD.F16x8.RN.STRONG.GPU PT, R8, desc[UR4][R2.64], R4 ;
        /*0020*/                   REDG.E.ADD.BF16x2.RN.STRONG.GPU desc[UR4][R2.64], R4 ;
        /*0030*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0040*/                   LDG.E.U8 R9, desc[UR4][R2.64] ;
        /*0050*/                   EXIT ;
"""
    ir = read_kernel_ir("tt.func public @k() {\n  tt.return\n}\n", {}, (1,), {}, {})
    table = place(listing, "k", ir).table
    column = dict(zip(QUANTITIES, range(len(QUANTITIES)), strict=True))
    assert table[:, column["global_bytes"]].sum() == 32 * (16 + 16 + 4 + 16 + 1)

GUARDED = """
k:
.text.k:
        /*0000*/                   S2R R11, SR_TID.X ;
        /*0010*/                   LOP3.LUT P1, RZ, R11, 0x1f, RZ, 0xc0, !PT ;
        /*0020*/                   LOP3.LUT R2, R11, 0x7f, RZ, 0xc0, !PT ;
        /*0030*/                   ISETP.LT.U32.AND P1, PT, R2, 0x20, !P1 ;
        /*0040*/                   STS [R2], R11 ;
        /*0050*/              @!P1 EXIT ;
        /*0060*/                   STG.E desc[UR4][R4.64], R0 ;
        /*0070*/                   EXIT ;
"""


def test_a_block_behind_a_thread_index_guard_counts_in_the_warps_that_run_it():
    fn = parse_sass(GUARDED)["k"]
    # P1 = (tid & 0x1f == 0) and (tid & 0x7f < 32): thread 0 alone, so one warp of four runs the store.
    assert warp_shares(fn, build_cfg(fn), 4).tolist() == [1.0, 0.25]
    assert warp_shares(fn, build_cfg(fn), None).tolist() == [1.0, 1.0]  # warps unknown: every warp


def test_a_guard_on_a_register_the_listing_does_not_determine_counts_every_warp():
    listing = GUARDED.replace("S2R R11, SR_TID.X", "LDG.E R11, desc[UR4][R6.64]")
    fn = parse_sass(listing)["k"]
    assert warp_shares(fn, build_cfg(fn), 4).tolist() == [1.0, 1.0]


def test_a_scalar_store_of_a_compiled_row_sum_counts_once_per_cta():
    kernels = str(Path(__file__).resolve().parent / "fixtures" / "lane_guard_kernels.py")
    tensors = (TensorArg.contiguous("x_ptr", (8, 1024), "float32"), TensorArg.contiguous("y_ptr", (8,), "float32"))
    one = Launch(kernels, "row_sum", (8,), tensors, {}, {}, Config({"BLOCK": 1024}, 4, 1))
    compiled = compile_launch(one)
    d = generic_demand(one, compiled)
    ir = read_kernel_ir(compiled.ttgir, {}, one.grid)
    p = place(compiled.sass, "row_sum", ir, 4)
    stores = [b for b, (s, e) in enumerate(p.cfg.blocks) if any(i.opcode == "STG" for i in p.fn.instructions[s:e])]
    assert stores and all(p.warp_share[b] == 0.25 for b in stores)
    all_warps = place(compiled.sass, "row_sum", ir).table[:, QUANTITIES.index("lsu")]
    weighted = p.table[:, QUANTITIES.index("lsu")] * p.warp_share
    # The demand counts each block's LSU work in the warps that run it: 8 CTAs x 4 warps.
    assert d.instructions("lsu") == pytest.approx(8 * 4 * weighted.sum())
    assert weighted.sum() < all_warps.sum()
    assert any("guard on the thread index" in n for n in d.notes)


SCALAR_GUARDED = """
k:
.text.k:
        /*0000*/                   S2R R4, SR_TID.X ;
        /*0010*/                   ULDC UR10, c[0x0][0x220] ;
        /*0020*/                   LOP3.LUT R5, R4, 0x1f, RZ, 0xc0, !PT ;
        /*0030*/                   LOP3.LUT P0, RZ, R4, 0xe0, RZ, 0xc0, !PT ;
        /*0040*/                   ISETP.LT.AND P0, PT, R5, UR10, !P0 ;
        /*0050*/              @!P0 EXIT ;
        /*0060*/                   STG.E desc[UR8][R2.64], R7 ;
        /*0070*/                   EXIT ;
"""


def test_a_thread_guard_anded_with_a_scalar_argument_counts_in_the_warps_that_may_run_it():
    # P0 = (lane < N) and (tid < 32): N is not evaluated per lane, but the AND is false outside warp 0.
    fn = parse_sass(SCALAR_GUARDED)["k"]
    assert warp_shares(fn, build_cfg(fn), 8).tolist() == [1.0, 0.125]
    # ORed with the scalar compare instead, any lane may pass: every warp counts.
    ored = parse_sass(SCALAR_GUARDED.replace("ISETP.LT.AND", "ISETP.LT.OR"))["k"]
    assert warp_shares(ored, build_cfg(ored), 8).tolist() == [1.0, 1.0]


def test_a_64_bit_load_clears_two_registers_not_four():
    # R6 holds tid & 0x7f; LDC.64 R4 writes R4 and R5 only, so the guard on R6 stays known.
    listing = """
k:
.text.k:
        /*0000*/                   S2R R9, SR_TID.X ;
        /*0010*/                   LOP3.LUT R6, R9, 0x7f, RZ, 0xc0, !PT ;
        /*0020*/                   LDC.64 R4, c[0x0][0x220] ;
        /*0030*/                   ISETP.LT.U32.AND P0, PT, R6, 0x20, PT ;
        /*0040*/              @!P0 EXIT ;
        /*0050*/                   STG.E desc[UR6][R4.64], R9 ;
        /*0060*/                   EXIT ;
"""
    fn = parse_sass(listing)["k"]
    assert warp_shares(fn, build_cfg(fn), 4).tolist() == [1.0, 0.25]
    wide = parse_sass(listing.replace("LDC.64 R4", "LDC.128 R4"))["k"]
    assert warp_shares(wide, build_cfg(wide), 4).tolist() == [1.0, 1.0]  # R4-R7 written: R6 unknown


def test_a_compiled_row_scan_stores_from_one_warp_under_a_guard_with_its_length_argument():
    kernels = str(Path(__file__).resolve().parent / "fixtures" / "lane_guard_kernels.py")
    tensors = (TensorArg.contiguous("x_ptr", (4, 32), "float32"), TensorArg.contiguous("y_ptr", (4, 32), "float32"))
    launch = Launch(kernels, "row_prefix_sum", (4,), tensors, {"N": 32}, {}, Config({"BLOCK": 32}, 8, 1))
    compiled = compile_launch(launch)
    ir = read_kernel_ir(compiled.ttgir, {"N": 32}, launch.grid)
    p = place(compiled.sass, "row_prefix_sum", ir, 8)
    lsu = p.table[:, QUANTITIES.index("lsu")]
    stores = [b for b, (s, e) in enumerate(p.cfg.blocks) if any(i.opcode == "STG" for i in p.fn.instructions[s:e])]
    # 32 lanes hold the row; the other 7 warps hold copies and do not store: the store runs in 1 warp of 8.
    assert stores and all(p.warp_share[b] == 1 / 8 for b in stores)
    others = [b for b in p.cfg.reachable if b not in stores]
    expected = 4 * (8 * sum(lsu[b] for b in others) + 1 * sum(lsu[b] for b in stores))
    assert generic_demand(launch, compiled).instructions("lsu") == pytest.approx(expected)
