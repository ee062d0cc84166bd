"""LSU counting rules (RESULTS 26): shared-memory matrix stores and memory fences issue on the LSU; the
error barrier after a release fence does not."""

from ceilings.sass import parse_sass
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
