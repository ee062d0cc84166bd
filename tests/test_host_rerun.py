"""A captured call re-run per config with the config written into the host code, as `advisor apply` writes it
(`advisor.capture.call.relauncher`), and only program-order groups searched as group knobs
(`advisor.advice.config_space`): two faults a fifth set of user-style kernels showed (RESULTS 52).

The scatter below sizes its grid from tiles the host binds once (`BLOCK_H = 8`, then `cdiv(heads, BLOCK_H)`), and
its integer arguments happen to fit the launch rule's forms: a stride (128) equals a padded size of `block_size`
(round_up(16 + 16 (8 - 1), 8)) and the token axis (8192) equals 16 x cdiv(cache blocks, BLOCK_D) x 16. From the
numbers alone the rule moved the grid with BLOCK_D, which the kernel never tiles its grid by; it claimed 18x
from a grid of an eighth of the tokens."""

from __future__ import annotations

import pytest

from advisor.advice.config_space import around, neighbours
from advisor.advice.suggest import subjects_for
from ceilings.hardware import resolve_gpu
from ceilings.launch import Config

SCATTER = '''import torch
import triton
import triton.language as tl


@triton.jit
def paged_scatter_kernel(src, dst, slots, heads, dim, page, s_t, s_h, s_p, s_o, s_hh,
                         BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    slot = tl.load(slots + t)
    to = (slot // page) * s_p + (slot % page) * s_o + h[:, None] * s_hh
    fro = src + t.to(tl.int64) * s_t + h[:, None] * s_h
    for d0 in range(0, dim, BLOCK_D):
        d = d0 + tl.arange(0, BLOCK_D)
        m = (h[:, None] < heads) & (d[None, :] < dim)
        tl.store(dst + to + d[None, :], tl.load(fro + d[None, :], mask=m), mask=m)


def paged_scatter(src, cache, slots):
    tokens, heads, dim = src.shape
    BLOCK_H = 8
    BLOCK_D = 64
    grid = (tokens, triton.cdiv(heads, BLOCK_H))
    paged_scatter_kernel[grid](src, cache, slots, heads, dim, cache.shape[1], src.stride(0), src.stride(1),
                               cache.stride(0), cache.stride(1), cache.stride(2), BLOCK_H=BLOCK_H, BLOCK_D=BLOCK_D,
                               num_warps=2)
    return cache
'''
CALL = "paged_scatter(randn(8192, 32, 128, bf16), zeros(2048, 16, 32, 128, bf16), randint(0, 32768, (8192,), i64))"


@pytest.fixture(scope="module")
def scatter(tmp_path_factory):
    path = tmp_path_factory.mktemp("host") / "paged_scatter.py"
    path.write_text(SCATTER)
    (subject,) = subjects_for(path, call=CALL, gpu=resolve_gpu("h100"))
    return path, subject


def test_the_grid_of_another_config_is_the_one_the_edited_host_code_computes(scatter):
    path, subject = scatter
    assert subject.launch.grid == (8192, 4)
    for block_h, block_d in ((8, 128), (8, 32), (1, 512), (4, 64), (16, 64)):
        config = subject.current.replace(BLOCK_H=block_h, BLOCK_D=block_d)
        assert subject.launch_for(config).grid == (8192, -(-32 // block_h)), config.label()
    # the file itself is never written: the edited host code runs in its place
    assert path.read_text() == SCATTER


def test_a_tile_the_grid_does_not_follow_does_not_change_the_work(scatter):
    _, subject = scatter
    wide = subject.current.replace(BLOCK_D=128)
    current, wider = subject.ceilings([subject.current, wide])
    assert wider.active_ctas == current.active_ctas == 8192 * 4
    # a copy of every element either way: the DRAM floor of the two configs is the same
    assert wider.pipelines["dram"] == pytest.approx(current.pipelines["dram"], rel=0.01)


def test_a_config_the_host_does_not_write_as_a_literal_falls_back_to_the_launch_override(tmp_path):
    path = tmp_path / "scatter_from_args.py"
    path.write_text(SCATTER.replace("def paged_scatter(src, cache, slots):", "def paged_scatter(src, cache, slots, "
                                    "block_d=64):").replace("    BLOCK_D = 64\n", "    BLOCK_D = block_d\n"))
    (subject,) = subjects_for(path, call=CALL, gpu=resolve_gpu("h100"))
    # BLOCK_D comes from an argument: apply cannot write it, so the host is re-run with the kernel's meta-parameter
    # overridden; the grid does not depend on BLOCK_D
    config = subject.current.replace(BLOCK_D=128)
    assert subject.relaunch(config, edited_only=True) is None
    assert subject.relaunch(config).grid == (8192, 4)


@pytest.mark.parametrize("name, searched", [("GROUP_SIZE_M", True), ("GROUP_M", True), ("GROUP_N", True),
                                             ("GROUP", False), ("GROUP_SIZE", False), ("GROUPS", False)])
def test_only_a_program_order_group_is_a_knob(name, searched):
    config = Config({name: 8, "BLOCK_M": 64}, 4, 3)
    values = {c.params[name] for c in around(config)} | {c.params[name] for c in neighbours(config)}
    assert values == ({4, 8, 16} if searched else {8})
