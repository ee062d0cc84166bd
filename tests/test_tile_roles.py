"""Tiles a search may change: a tile each program covers whole (no grid axis or loop follows it) keeps
its launched value, since another value computes a different result (advisor/advice/tile_roles.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from advisor.advice.suggest import subjects_for
from advisor.advice.tile_roles import _loops_over
from ceilings.compile import load_kernel
from ceilings.hardware import resolve_gpu

STYLES = Path(__file__).resolve().parent / "fixtures" / "styles"


def test_loop_tiles_are_found_in_ranges_and_through_names_and_helpers(tmp_path):
    path = tmp_path / "kernels.py"
    path.write_text(textwrap.dedent("""
        import triton
        import triton.language as tl

        @triton.jit
        def _row_sum(x_ptr, n, STEP: tl.constexpr):
            acc = tl.zeros([STEP], dtype=tl.float32)
            for off in tl.range(0, n, STEP):
                acc += tl.load(x_ptr + off + tl.arange(0, STEP), mask=off + tl.arange(0, STEP) < n)
            return tl.sum(acc)

        @triton.jit
        def covers(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(y_ptr + tl.program_id(0), tl.sum(tl.load(x_ptr + offs, mask=offs < n)))

        @triton.jit
        def trips(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            num = tl.cdiv(n, BLOCK)
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for i in range(num):
                acc += tl.load(x_ptr + i * BLOCK + tl.arange(0, BLOCK))
            tl.store(y_ptr, tl.sum(acc))

        @triton.jit
        def helper_loops(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            tl.store(y_ptr, _row_sum(x_ptr, n, BLOCK))

        @triton.jit
        def _stages(x):
            # a sorting network over a tensor: log2 of its length in stages, not a walk over the data
            n_dims: tl.constexpr = _log2(x.shape[0])
            for i in tl.static_range(1, n_dims + 1):
                x = tl.maximum(x, tl.flip(x, 0))
            return x

        @triton.jit
        def _log2(n: tl.constexpr):
            return tl.constexpr(n.bit_length() - 1)

        @triton.jit
        def sorts(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            # FlagGems' topk stage 2: one program sorts all n candidates, BLOCK = next_power_of_2(n)
            cols = tl.arange(0, BLOCK)
            vals = tl.load(x_ptr + cols, mask=cols < n, other=0.0)
            tl.store(y_ptr + cols, _stages(vals), mask=cols < n)
    """))
    assert _loops_over(load_kernel(path, "covers"), "BLOCK") is False
    assert _loops_over(load_kernel(path, "trips"), "BLOCK") is True
    assert _loops_over(load_kernel(path, "helper_loops"), "BLOCK") is True
    assert _loops_over(load_kernel(path, "sorts"), "BLOCK") is False  # a tensor's length sets that loop


@pytest.mark.slow  # its warps and stages climb compiles a dozen softmax configs (about a minute on 2 cores, cold)
def test_a_row_softmax_keeps_its_block_size():
    (softmax,) = subjects_for(str(STYLES / "tut02_fused_softmax.py"), call="softmax(randn(4096, 781))",
                              gpu=resolve_gpu("h100"))
    space = softmax.space()
    assert len(space) > 1 and {c["BLOCK_SIZE"] for c in space} == {1024}  # 512 would drop columns 512..780
    assert any("kept as launched: BLOCK_SIZE=1024" in n for n in softmax.notes)


@pytest.mark.slow  # the climb compiles a dozen block sizes and their warps (about two minutes on 2 cores, cold)
def test_a_vector_add_may_change_its_block_size():
    (add,) = subjects_for(str(STYLES / "tut01_vector_add.py"), call="add(randn(98432, f32), randn(98432, f32))",
                          gpu=resolve_gpu("h100"))
    # its grid lambda follows BLOCK_SIZE: the first neighbourhood halves it, and the climb may go on from there
    # (how far it climbs follows the model's ranking: powers of two, within what one CTA holds)
    assert {512, 1024} <= {c["BLOCK_SIZE"] for c in add.space()} <= {1 << k for k in range(7, 14)}
    assert not any("kept as launched" in n for n in add.notes)


@pytest.mark.slow  # searches the layer norm's block sizes, compiling each for sm_90 (about 20 s on 2 busy cores)
def test_a_layer_norm_whose_loop_walks_the_row_may_change_its_block_size():
    (norm,) = subjects_for(str(STYLES / "tut05_layer_norm.py"), call="layer_norm_fwd(randn(4096, 8192, f16), (8192,), "
                           "randn(8192, f16), randn(8192, f16))", gpu=resolve_gpu("h100"))
    assert len({c["BLOCK_SIZE"] for c in norm.space()}) > 1  # a loop walks the row in BLOCK_SIZE steps


def test_a_liger_style_rms_norm_keeps_the_block_its_host_sized_from_the_row():
    (norm,) = subjects_for(str(STYLES / "liger_style.py"), call="rms_norm_forward(randn(8, 4096, bf16), "
                           "randn(4096, bf16), 1e-6)", gpu=resolve_gpu("h100"))
    assert norm.rule.padded == []  # Y_row_stride = round_up(1, 4096) is a coincidence of numbers, not padding
    assert {c["BLOCK_SIZE"] for c in norm.space()} == {4096}
