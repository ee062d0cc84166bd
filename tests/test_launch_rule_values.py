"""The launch rule follows tiles by the recorded launch's values where no name ties a tile to its size
(issue 15 point 4; advisor/advice/grid_values.py): cdiv(M, BLOCK_ROW_SIZE), cdiv(V, BV) * heads; and it
keeps an axis as recorded, with a note, where two explanations explain it equally."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.advice.launch_rule import launch_rule
from advisor.advice.tile_roles import covering_tiles
from ceilings.compile import load_kernel
from ceilings.launch import Config, Launch, TensorArg

STYLES = Path(__file__).resolve().parent / "fixtures" / "styles"
NORM_BWD = str(STYLES / "row_block_norm_bwd.py")


def _t(name: str, *shape: int) -> TensorArg:
    return TensorArg.contiguous(name, shape, "bfloat16")


def norm_backward(rows: int = 8192, cols: int = 4096, block_rows: int = 8, block_cols: int = 2048,
                  kernel: str = "rows_backward_kernel") -> Launch:
    """A layer-norm backward's launch: grid cdiv(M, BLOCK_ROW_SIZE), M no spelling of ROW."""
    return Launch(NORM_BWD, kernel, (-(-rows // block_rows),),
                  (_t("dy_ptr", rows, cols), _t("x_ptr", rows, cols), _t("rstd_ptr", rows), _t("dx_ptr", rows, cols)),
                  (("M", rows), ("N", cols)), (),
                  Config({"BLOCK_ROW_SIZE": block_rows, "BLOCK_COL_SIZE": block_cols}, 16, 2))


# ------------------------------------------------------------------------------ followed by value

def test_a_row_block_grid_follows_its_tile_though_its_size_is_not_named_after_it():
    """RESULTS 21 item 6: BLOCK_ROW_SIZE 1 was evaluated on 1024 CTAs instead of 8192 and claimed 18.6x."""
    launch = norm_backward()
    rule = launch_rule(launch)
    assert rule.grid(launch.config) == (1024,)
    assert rule.grid(launch.config.replace(BLOCK_ROW_SIZE=1)) == (8192,)
    assert rule.grid(launch.config.replace(BLOCK_ROW_SIZE=4)) == (2048,)
    assert rule.grid(launch.config.replace(BLOCK_COL_SIZE=1024)) == (1024,)  # the loop tile moves no axis
    assert rule(launch.config.replace(BLOCK_ROW_SIZE=32)).grid == (256,)
    assert any("cdiv(M, BLOCK_ROW_SIZE)" in n and "values" in n for n in rule.notes())


def test_the_subject_of_a_row_block_kernel_file_launches_each_config_at_its_grid():
    from advisor.advice.subjects import LaunchSubject
    from ceilings.hardware import resolve_gpu

    launch = norm_backward()
    space = [launch.config.replace(BLOCK_ROW_SIZE=r) for r in (1, 4, 8, 16)]
    subject = LaunchSubject(launch, resolve_gpu("h100"), space=space)
    assert [subject.launch_for(c).grid for c in space] == [(8192,), (2048,), (1024,), (512,)]
    assert any("BLOCK_ROW_SIZE" in n for n in subject.notes)


def test_a_column_block_grid_follows_the_other_tile():
    """The weight-gradient kernel beside it grids over cdiv(N, BLOCK_COL_SIZE)."""
    launch = norm_backward(block_rows=128, block_cols=8, kernel="cols_backward_kernel")
    launch = Launch(launch.source, launch.kernel, (512,), launch.tensors, launch.scalars, (), launch.config)
    rule = launch_rule(launch)
    assert rule.grid(launch.config.replace(BLOCK_COL_SIZE=4)) == (1024,)
    assert rule.grid(launch.config.replace(BLOCK_ROW_SIZE=64)) == (512,)


def test_short_tile_names_follow_their_size_times_a_batch_factor():
    """Linear-attention style: grid (cdiv(V, BV) * H,) with V and H constexprs; BK a loop tile."""
    tensors = (_t("k", 1, 4096, 16, 128), _t("v", 1, 4096, 16, 128), _t("h", 1, 64, 16, 128, 128))
    consts = (("H", 16), ("K", 128), ("V", 128), ("BT", 64))
    one_axis = Launch(NORM_BWD, "k", (64,), tensors, (("T", 4096),), consts, Config({"BV": 32}, 2, 2))
    rule = launch_rule(one_axis)
    assert rule.grid(one_axis.config.replace(BV=64)) == (32,)
    # both tiles on one axis: cdiv(K, BK) * cdiv(V, BV) * H
    both = Launch(NORM_BWD, "k", (256,), tensors, (("T", 4096),), consts, Config({"BK": 32, "BV": 32}, 1, 2))
    rule = launch_rule(both)
    assert rule.grid(both.config.replace(BV=64)) == (128,)
    assert rule.grid(both.config.replace(BK=64, BV=64)) == (64,)
    # (cdiv(V, BV) * chunks, heads): the factor 16 is the other axis's heads, so the chunks (64) it is
    two_axes = Launch(NORM_BWD, "k", (128, 16), tensors, (("T", 4096),), consts, Config({"BK": 32, "BV": 64}, 2, 2))
    rule = launch_rule(two_axes)
    assert rule.grid(two_axes.config.replace(BV=128)) == (64, 16)
    assert rule.grid(two_axes.config.replace(BK=64)) == (128, 16)


def test_a_tile_of_one_follows_only_a_size_named_after_it_that_is_the_whole_axis():
    tensors = (_t("q", 1, 4096, 16, 128),)
    launch = Launch(NORM_BWD, "k", (4096, 16), tensors, (("T", 4096),), (("H", 16), ("K", 128)),
                    Config({"BK": 128, "BH": 1}, 1, 3))
    rule = launch_rule(launch)
    assert rule.grid(launch.config.replace(BH=2)) == (4096, 8)
    assert rule.grid(launch.config.replace(BK=64)) == (4096, 16)  # cdiv(K, BK) = 1 explains nothing
    # without the name, a tile of 1 explains nothing (cdiv(4096, 1) * 2 would read as a rule): the axis stays
    unnamed = Launch(NORM_BWD, "k", (8192,), (_t("x", 4096, 64),), (("B", 2),), (),
                     Config({"ROWS_PER_PROGRAM": 1}, 4, 3))
    assert launch_rule(unnamed).grid(unnamed.config.replace(ROWS_PER_PROGRAM=2)) == (8192,)


def test_a_split_k_axis_counts_the_parameter_itself():
    """GemLite style: grid (cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N), SPLIT_K), N and K constexprs."""
    tensors = (_t("a_ptr", 16, 4096), _t("b_ptr", 4096, 14336), _t("c_ptr", 16, 14336))
    config = Config({"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 8, "SPLIT_K": 4},
                    4, 5)
    launch = Launch(NORM_BWD, "k", (448, 4), tensors, (("M", 16),), (("N", 14336), ("K", 4096)), config)
    rule = launch_rule(launch)
    assert rule.grid(config.replace(SPLIT_K=1)) == (448, 1)
    assert rule.grid(config.replace(BLOCK_SIZE_N=64, SPLIT_K=2)) == (224, 2)
    assert rule.grid(config.replace(GROUP_SIZE_M=4, BLOCK_SIZE_K=64)) == (448, 4)
    assert any("axis 1 = SPLIT_K" in n for n in rule.notes())


# ------------------------------------------------------------------------------ refusing to guess

def test_two_tiles_that_explain_an_axis_equally_keep_it_with_a_note():
    launch = norm_backward(rows=4096, cols=4096, block_rows=64, block_cols=64, kernel="rows_flat_kernel")
    rule = launch_rule(launch)
    assert rule.grid(launch.config.replace(BLOCK_ROW_SIZE=32)) == (64,)
    assert rule.grid(launch.config.replace(BLOCK_COL_SIZE=32)) == (64,)
    (note,) = [n for n in rule.notes() if "kept as recorded" in n]
    assert "BLOCK_COL_SIZE" in note and "BLOCK_ROW_SIZE" in note
    assert rule.unsure == {"BLOCK_ROW_SIZE", "BLOCK_COL_SIZE"}


def test_a_search_ranks_no_config_whose_grid_would_be_a_guess():
    """Where an axis is kept for two equal explanations, a config changing either tile is left out (its
    speed-up would come from the recorded grid), unless the caller knows the grid (a variant)."""
    from advisor.advice.subjects import LaunchSubject
    from ceilings.hardware import resolve_gpu

    launch = norm_backward(rows=4096, cols=4096, block_rows=64, block_cols=64, kernel="rows_flat_kernel")
    smaller = launch.config.replace(BLOCK_ROW_SIZE=32)
    subject = LaunchSubject(launch, resolve_gpu("h100"), space=[launch.config, smaller])
    assert "BLOCK_ROW_SIZE" in subject.precheck(smaller) and "does not tell" in subject.precheck(smaller)
    assert subject.precheck(launch.config.replace(num_warps=8)) is None
    known = LaunchSubject(launch, resolve_gpu("h100"), space=[launch.config, smaller],
                          variants={smaller: Launch(launch.source, launch.kernel, (128,), launch.tensors,
                                                    launch.scalars, (), smaller)})
    assert known.precheck(smaller) is None and known.launch_for(smaller).grid == (128,)


def test_a_tile_that_explains_two_axes_equally_keeps_both():
    launch = Launch(NORM_BWD, "k", (64, 64), (_t("x", 4096, 4096),), (), (), Config({"BLOCK_ROWS": 64}, 4, 3))
    rule = launch_rule(launch)
    assert rule.grid(launch.config.replace(BLOCK_ROWS=32)) == (64, 64)
    assert sum("kept as recorded" in n for n in rule.notes()) == 2


def test_two_sizes_of_different_values_that_explain_an_axis_equally_keep_it():
    launch = Launch(NORM_BWD, "k", (32,), (_t("x", 4090, 8), _t("y", 4096, 8)), (), (),
                    Config({"BLOCK_ROWS": 128}, 4, 3))
    rule = launch_rule(launch)
    assert rule.grid(launch.config.replace(BLOCK_ROWS=4)) == (32,)  # 1023 or 1024: not guessed
    assert any("kept as recorded" in n for n in rule.notes())
    same = Launch(NORM_BWD, "k", (32,), (_t("x", 4096, 8), _t("y", 4096, 8)), (), (), Config({"BLOCK_ROWS": 128}, 4, 3))
    assert launch_rule(same).grid(same.config.replace(BLOCK_ROWS=4)) == (1024,)  # one value: one explanation


def test_a_tile_whose_value_an_argument_also_has_is_not_guessed():
    """Per-token group quantisation style: one program per group of 128 (grid 4096 * 4096 / group_size),
    BLOCK = next_power_of_2(group_size) = 128 covers the group: cdiv(4096, BLOCK) * 4096 is the same number
    as cdiv(4096, group_size) * 4096, which no config changes."""
    tensors = (_t("y", 4096, 4096), _t("y_q", 4096, 4096), _t("y_s", 4096, 32))
    launch = Launch(NORM_BWD, "k", (131072,), tensors, (("group_size", 128), ("n_cols", 4096)), (),
                    Config({"BLOCK": 128}, 1, 1))
    rule = launch_rule(launch)
    assert rule.grid(launch.config.replace(BLOCK=256)) == (131072,)
    (note,) = rule.notes()
    assert "group_size" in note and "kept as recorded" in note


def test_a_rows_axis_that_is_itself_a_size_is_not_explained_by_a_loop_tile():
    """A loop-style row kernel: one program per row (4 rows), BLOCK 1024 walking 4096 columns: cdiv(4096,
    1024) = 4 is a coincidence as likely as "one program per row"; the axis is kept."""
    launch = Launch(NORM_BWD, "k", (4,), (_t("x", 4, 4096), _t("y", 4, 4096)), (), (), Config({"BLOCK": 1024}, 4, 3))
    rule = launch_rule(launch)
    assert rule.grid(launch.config.replace(BLOCK=2048)) == (4,)


def test_a_size_a_named_tile_explains_does_not_explain_another_axis_by_coincidence():
    """Attention style: grid (cdiv(M, BLOCK_M), Z * H) with M = 2048, Z * H = 2 * 16 = 32 = cdiv(2048, 64):
    BLOCK_N (a loop tile, 64) does not take the batch axis through M's value."""
    tensors = (_t("q", 2, 16, 2048, 64), _t("o", 2, 16, 2048, 64))
    launch = Launch(NORM_BWD, "k", (16, 32), tensors, (("M", 2048),), (), Config({"BLOCK_M": 128, "BLOCK_N": 64}, 4, 3))
    rule = launch_rule(launch)
    assert rule.grid(launch.config.replace(BLOCK_M=64)) == (32, 32)
    assert rule.grid(launch.config.replace(BLOCK_N=32)) == (16, 32)
    assert not any("axis 1" in n for n in rule.notes())


def test_an_axis_of_one_and_a_tile_as_large_as_its_size_explain_nothing():
    launch = Launch(NORM_BWD, "k", (4096, 1, 1), (_t("x", 4096, 512),), (), (), Config({"BLOCK_D": 512}, 4, 3))
    rule = launch_rule(launch)
    assert rule.grid(launch.config.replace(BLOCK_D=256)) == (4096, 1, 1)
    assert rule.notes() == []


# ------------------------------------------------------------------------------ a tile no axis follows

def test_a_tile_no_axis_follows_is_kept_and_tile_roles_decides_whether_it_is_fixed():
    rows, cols = 8192, 4000
    launch = Launch(NORM_BWD, "rows_cover_kernel", (rows // 4,), (_t("x_ptr", rows, cols), _t("y_ptr", rows)),
                    (("n_rows", rows), ("n_cols", cols)), (), Config({"BLOCK_ROWS": 4, "BLOCK_N": 4096}, 4, 3))
    rule = launch_rule(launch)
    assert rule.grid(launch.config.replace(BLOCK_ROWS=8)) == (rows // 8,)
    assert rule.grid(launch.config.replace(BLOCK_N=2048)) == (rows // 4,)  # BLOCK_N is on no axis
    grid_tiles = {name for combo, _ in rule.axes for name, _ in combo}
    assert grid_tiles == {"BLOCK_ROWS"}
    # each program covers the row whole: the search keeps BLOCK_N; the backward's column tile loops: free
    assert covering_tiles(load_kernel(NORM_BWD, "rows_cover_kernel"), launch.config.params, rule) == {"BLOCK_N"}
    bwd = norm_backward()
    assert covering_tiles(load_kernel(NORM_BWD, "rows_backward_kernel"), bwd.config.params, launch_rule(bwd)) == set()


# ------------------------------------------------------------------------------ a grid the host sizes

ROWS_KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def rows_scale_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK_ROW: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    {body}
'''
STRIDED = '''programs = tl.num_programs(0)
    for start in tl.range(pid * BLOCK_ROW, n_rows, programs * BLOCK_ROW):
        rows = start + tl.arange(0, BLOCK_ROW)[:, None]
        cols = tl.arange(0, BLOCK_SIZE)[None, :]
        mask = (rows < n_rows) & (cols < n_cols)
        tl.store(y_ptr + rows * n_cols + cols, tl.load(x_ptr + rows * n_cols + cols, mask=mask) * 2.0, mask=mask)'''
ONE_BLOCK = '''rows = pid * BLOCK_ROW + tl.arange(0, BLOCK_ROW)[:, None]
    cols = tl.arange(0, BLOCK_SIZE)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    tl.store(y_ptr + rows * n_cols + cols, tl.load(x_ptr + rows * n_cols + cols, mask=mask) * 2.0, mask=mask)'''


def test_a_grid_the_kernel_strides_a_loop_by_is_kept_for_every_config(tmp_path):
    """Liger's block RMS-norm backward in this shape: 132 programs (the SM count) over 2,112 rows of 16, which
    cdiv(n_rows, BLOCK_ROW) explains by coincidence; following it halved the grid at BLOCK_ROW 32 and left
    half the per-program partial sums unwritten (RESULTS 34c)."""
    def launch(body: str) -> Launch:
        path = tmp_path / f"rows_{len(body)}.py"
        path.write_text(ROWS_KERNEL.format(body=body))
        return Launch(str(path), "rows_scale_kernel", (132,), (_t("x_ptr", 2112, 1024), _t("y_ptr", 2112, 1024)),
                      (("n_rows", 2112), ("n_cols", 1024)), (), Config({"BLOCK_ROW": 16, "BLOCK_SIZE": 1024}, 4, 3))

    strided = launch(STRIDED)
    rule = launch_rule(strided)
    assert rule.grid(strided.config.replace(BLOCK_ROW=32)) == (132,)
    assert any("strides a loop by tl.num_programs(0)" in n for n in rule.notes())
    one_block = launch(ONE_BLOCK)  # the same numbers, one block per program: the grid follows the tile
    assert launch_rule(one_block).grid(one_block.config.replace(BLOCK_ROW=32)) == (66,)


HIST_KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def bins_kernel(x_ptr, out_ptr, m, n, tiles_per_cta, TILE_N: tl.constexpr, BINS: tl.constexpr):
    pid = tl.program_id(0)
    pid_n = pid // m
    row = pid % m
    span: tl.constexpr = TILE_N * tiles_per_cta
    start = span * pid_n
    acc = tl.zeros((BINS,), dtype=tl.int32)
    for off in range(start, tl.minimum(start + span, n), TILE_N):
        cols = off + tl.arange(0, TILE_N)
        key = tl.load(x_ptr + row * n + cols, mask=cols < n, other=0) & (BINS - 1)
        acc += tl.histogram(key, BINS)
    tl.atomic_add(out_ptr + row * BINS + tl.arange(0, BINS), acc)
'''


def test_a_tile_that_sets_a_programs_share_of_an_unexplained_axis_is_not_ranked(tmp_path):
    """FlagGems' radix-sort histogram in this shape: grid m * cdiv(n, tiles_per_cta * TILE_N) = 64 * 16, which
    no cdiv term of the numbers explains; keeping the grid at TILE_N 512 left half the columns uncounted
    (RESULTS 34c). The tile scales the program id, so configs that change it are not ranked."""
    path = tmp_path / "bins.py"
    path.write_text(HIST_KERNEL)
    launch = Launch(str(path), "bins_kernel", (1024,), (_t("x_ptr", 64, 128256), _t("out_ptr", 64, 16)),
                    (("m", 64), ("n", 128256), ("tiles_per_cta", 8)), (),
                    Config({"TILE_N": 1024, "BINS": 16}, 4, 3))
    rule = launch_rule(launch)
    assert "TILE_N" in (rule.unknown_grid(launch.config.replace(TILE_N=512)) or "")
    # the bins stride a row's output by the program id too: not a share of work, but a change of layout the
    # recorded launch does not tell either, so left unranked as well (conservative)
    assert "BINS" in (rule.unknown_grid(launch.config.replace(BINS=32)) or "")
    assert rule.unknown_grid(Config(launch.config.params, 8, 4)) is None  # warps and stages move no grid
    assert any("scales a program id by BINS, TILE_N" in n for n in rule.notes())


# ------------------------------------------------------------------------------ a tile a loop walks

EXPERT_CAST = '''
import triton
import triton.language as tl


@triton.jit
def expert_cast_kernel(x_ptr, y_ptr, K, N, BLOCK_SIZE_K: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    e = tl.program_id(0)
    n = tl.program_id(1) * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    for k0 in range(0, K, BLOCK_SIZE_K):
        k = k0 + tl.arange(0, BLOCK_SIZE_K)
        x = tl.load(x_ptr + e * K * N + k[:, None] * N + n[None, :])
        tl.store(y_ptr + e * K * N + k[:, None] * N + n[None, :], x * 2.0)
'''


def test_a_tile_the_kernel_walks_its_size_by_explains_no_grid_axis(tmp_path):
    """torchao's colwise fp8 cast, in this shape: a program per expert (E = 128) walks K = 2048 in steps of
    BLOCK_SIZE_K = 128, and 128 = cdiv(2048, 128) x 8 by coincidence; the rule read the expert axis as following
    BLOCK_SIZE_K, so BLOCK_SIZE_K = 256 would launch 64 experts' programs instead of 128 (RESULTS 37)."""
    path = tmp_path / "expert_cast.py"
    path.write_text(EXPERT_CAST)
    experts, k, n = 128, 2048, 768
    launch = Launch(str(path), "expert_cast_kernel", (experts, n // 64),
                    (_t("x_ptr", experts, k, n), _t("y_ptr", experts, k, n)), (("K", k), ("N", n)), (),
                    Config({"BLOCK_SIZE_K": 128, "BLOCK_SIZE_N": 64}, 4, 3))
    rule = launch_rule(launch)
    assert rule.grid(launch.config.replace(BLOCK_SIZE_K=256)) == (experts, n // 64)
    assert rule.grid(launch.config.replace(BLOCK_SIZE_N=128)) == (experts, n // 128)  # the grid tile still moves


ROW_SUM = '''
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, y_ptr, N, TILE_N: tl.constexpr, ONE_TILE_PER_CTA: tl.constexpr):
    row = tl.program_id(0)
    if ONE_TILE_PER_CTA:
        cols = tl.arange(0, TILE_N)
        total = tl.sum(tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0), axis=0)
    else:
        acc = tl.zeros((TILE_N,), dtype=tl.float32)
        for start in range(0, N, TILE_N):
            cols = start + tl.arange(0, TILE_N)
            acc += tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
        total = tl.sum(acc, axis=0)
    tl.store(y_ptr + row, total)
'''


@pytest.mark.parametrize("one_tile", [True, False])
def test_a_tile_is_covering_on_the_side_of_a_constexpr_branch_the_launch_takes(tmp_path, one_tile):
    """FlagGems' row sum in the style written here: with ONE_TILE_PER_CTA (the host sets it when TILE_N >= N) each
    program covers its row in one tile, and a smaller TILE_N sums part of it; the loop on the other side of the
    branch made TILE_N read as a loop tile, and `suggest` proposed TILE_N=2048 for N = 4096 (RESULTS 37)."""
    path = tmp_path / "row_sum.py"
    path.write_text(ROW_SUM)
    rows, n = 8192, 4096
    launch = Launch(str(path), "row_sum_kernel", (rows,), (_t("x_ptr", rows, n), _t("y_ptr", rows)), (("N", n),),
                    (("ONE_TILE_PER_CTA", one_tile),), Config({"TILE_N": 4096 if one_tile else 1024}, 8, 3))
    covering = covering_tiles(load_kernel(str(path), "row_sum_kernel"), launch.config.params, launch_rule(launch))
    assert covering == ({"TILE_N"} if one_tile else set())


SWIZZLED = '''
import triton
import triton.language as tl


@triton.jit
def swizzled_kernel(a_ptr, c_ptr, M1, N1, K1, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    per_group = GROUP_M * tl.cdiv(N1, BLOCK_N)
    first_m = (pid // per_group) * GROUP_M
    pid_m = first_m + (pid % per_group) % GROUP_M
    pid_n = (pid % per_group) // GROUP_M
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + rows[:, None] * N1 + cols[None, :], tl.load(a_ptr + rows[:, None] * K1 + cols[None, :]))
'''


def test_a_matmul_swizzle_group_never_divides_the_grid(tmp_path):
    """xformers' tiled matmul: 512 programs = cdiv(M1, BLOCK_M) cdiv(N1, BLOCK_N) with no size named for a tile,
    and by value also K1 / GROUP_M = 4096 / 8, which the rule took: another BLOCK_M kept 512 programs. A group
    of Triton's program-order swizzle sets the order of the programs, not their number."""
    src = tmp_path / "swizzled.py"
    src.write_text(SWIZZLED)
    launch = Launch(str(src), "swizzled_kernel", (512,),
                    (_t("a_ptr", 4096, 4096), _t("c_ptr", 4096, 4096)), (("M1", 4096), ("N1", 4096), ("K1", 4096)),
                    (), Config({"BLOCK_M": 128, "BLOCK_N": 256, "GROUP_M": 8}, 8, 3))
    rule = launch_rule(launch)
    assert not any("GROUP_M" in n and "cdiv" in n for n in rule.notes()), rule.notes()
    # the two sizes tie by value (all 4096): the grid is kept, and a config that changes a tile is not ranked
    assert rule.unknown_grid(launch.config.replace(BLOCK_M=64)) and rule(launch.config) == launch


# ------------------------------------------------------------------------------ a kernel file of this project

GEMV_FILE = Path(__file__).resolve().parents[1] / "kernels" / "fused_moe_fp8_gemv.py"


@pytest.mark.parametrize("experts, hidden, rows, top_k", [(128, 2048, 384, 8), (8, 4096, 14336, 2)])
def test_a_gemv_grid_follows_its_row_tile_and_not_its_k_step_in_a_helper(experts, hidden, rows, top_k):
    """kernels/fused_moe_fp8_gemv.py, captured from a call without a GPU: grid (cdiv(2I, BLOCK_ROWS), pairs).
    BLOCK_K is the K step of a loop in a JIT helper (`range(0, tl.cdiv(K, BLOCK_K))`), so cdiv(K, BLOCK_K)
    explains no axis (it had read 24 row blocks as 4 K steps x 6); the 8 pairs of axis 1 equal cdiv(128
    experts, BLOCK_ROWS = 16), but the kernel multiplies only program_id(0) by BLOCK_ROWS."""
    from advisor.capture.call import capture_call

    call = (f"gemv_gemm1(randn(1, {hidden}, bf16), Fp8Weights(randn({experts}, {rows}, {hidden}, bf16), "
            f"randn({experts}, {hidden}, {rows // 2}, bf16), 'channel'), torch.arange({top_k}, dtype=i32)"
            f".view(1, {top_k}), DEFAULT_CONFIG)")
    (launch,) = [getattr(x, "launch", x) for x in capture_call(GEMV_FILE, call, "h100").launches]
    rule = launch_rule(launch)
    assert launch.grid == (rows // 16, top_k) and not rule.unsure
    assert rule.grid(launch.config.replace(BLOCK_ROWS=4)) == (rows // 4, top_k)
    assert rule.grid(launch.config.replace(BLOCK_K=128)) == launch.grid


def test_a_padded_size_is_described_with_its_base_name_whole():
    """round_up(U + k*(t-1), t) with U = num_valid_tokens: the k of the form is replaced, not the k in the name
    (it read `num_valid_to128ens`)."""
    from advisor.advice.launch_rule import PaddedSize

    padded = PaddedSize("EM", "BLOCK_SIZE_M", "num_valid_tokens", 32768, 128, "round_up(U + k*(t-1), t)")
    assert padded.describe() == "EM = round_up(num_valid_tokens + 128*(t-1), t) with t = BLOCK_SIZE_M"


SQUARE_BMM = '''
import triton
import triton.language as tl


@triton.jit
def square_bmm_kernel(a_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr):
    pid_m, pid_n, batch = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    tl.store(c_ptr + batch * M * N + rows[:, None] * N + cols[None, :], tl.load(a_ptr + rows[:, None] * K))
'''


def test_program_ids_unpacked_from_a_tuple_tell_a_square_grid_apart(tmp_path):
    """A batched GEMM with M = N (a user's kernel, benchmarks/user_kernels/batched_gemm.py): cdiv(M, BM) and
    cdiv(N, BN) explain axes 0 and 1 equally by value, and the batch axis 64 read as cdiv(256, BM) x 8. The
    kernel binds its program ids from a tuple, which the rule did not follow: every axis was kept and no tile
    searched. Each program id scales one tile, so each axis has one explanation, and the batch none."""
    src = tmp_path / "square_bmm.py"
    src.write_text(SQUARE_BMM)
    launch = Launch(str(src), "square_bmm_kernel", (8, 8, 64),
                    (_t("a_ptr", 64, 256, 128), _t("c_ptr", 64, 256, 256)), (("M", 256), ("N", 256), ("K", 128)),
                    (), Config({"BM": 32, "BN": 32}, 4, 2))
    rule = launch_rule(launch)
    assert rule.grid(launch.config.replace(BM=64)) == (4, 8, 64)
    assert rule.grid(launch.config.replace(BN=128)) == (8, 2, 64)
    assert not rule.unknown_grid(launch.config.replace(BM=64, BN=64)), rule.notes()


# A head-dim tile as long as its named size (BLOCK_HALF = HALF) on a (tokens, head blocks) grid, and a row tile
# as long as its named size (BLOCK_M = M) that the kernel scales its program id by: written for the test.
ONE_TILE_LONG = '''
import triton
import triton.language as tl


@triton.jit
def rope_kernel(q_ptr, out_ptr, n_heads, HALF: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr):
    tok = tl.program_id(0)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    i = tl.arange(0, BLOCK_HALF)
    mask = (heads < n_heads)[:, None] & (i < HALF)[None, :]
    row = q_ptr + tok * n_heads * 2 * HALF + heads[:, None] * 2 * HALF
    x1 = tl.load(row + i[None, :], mask=mask)
    x2 = tl.load(row + HALF + i[None, :], mask=mask)
    out = out_ptr + tok * n_heads * 2 * HALF + heads[:, None] * 2 * HALF
    tl.store(out + i[None, :], x2, mask=mask)
    tl.store(out + HALF + i[None, :], x1, mask=mask)


@triton.jit
def rows_kernel(x_ptr, y_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    tl.store(y_ptr + rows[:, None] * N + cols[None, :], tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask),
             mask=mask)
'''


def test_a_tile_one_tile_long_follows_an_axis_only_where_the_kernel_scales_its_program_id_by_it(tmp_path):
    """RESULTS 54: BLOCK_HALF = HALF = 64 read as tiling the 16,384 token programs (cdiv(HALF, BLOCK_HALF) x
    16,384): BLOCK_HALF 16 launched 65,536 programs, which ran past q and made the GPU fault."""
    path = tmp_path / "one_tile_long.py"
    path.write_text(ONE_TILE_LONG)
    q, out = _t("q_ptr", 16384, 32, 128), _t("out_ptr", 16384, 32, 128)
    rope = Launch(str(path), "rope_kernel", (16384, 4), (q, out), (("n_heads", 32),), (("HALF", 64),),
                  Config({"BLOCK_H": 8, "BLOCK_HALF": 64}, 4, 3))
    rule = launch_rule(rope)
    assert rule.grid(rope.config.replace(BLOCK_HALF=16)) == (16384, 4)
    assert rule.grid(rope.config.replace(BLOCK_H=32, BLOCK_HALF=32)) == (16384, 1)
    x, y = _t("x_ptr", 16, 4096), _t("y_ptr", 16, 4096)
    rows = Launch(str(path), "rows_kernel", (1, 64), (x, y), (("M", 16), ("N", 4096)), (),
                  Config({"BLOCK_M": 16, "BLOCK_N": 64}, 4, 3))
    assert launch_rule(rows).grid(rows.config.replace(BLOCK_M=8)) == (2, 64)


def test_a_tile_a_loop_steps_by_from_a_constant_start_counts_no_programs():
    """RESULTS 54: a paged decode walks each sequence by BLOCK_N (`range(0, seq_len, BLOCK_N)`); its 4 sequences
    also read as cdiv(256, BLOCK_N = 64), so BLOCK_N was left unranked. The same numbers on the row kernel that
    walks its columns by BLOCK_COL_SIZE: the rows' tile explains the grid, the loop's tile never."""
    launch = norm_backward(rows=4096, cols=4096, block_rows=64, block_cols=64)
    rule = launch_rule(launch)
    assert rule.unsure == set()
    assert rule.grid(launch.config.replace(BLOCK_COL_SIZE=32)) == (64,)
    assert rule.grid(launch.config.replace(BLOCK_ROW_SIZE=32)) == (128,)


# An implicit-GEMM convolution in the NHWC style (written for the test): the batch is `N`, the output channels
# `K`, and BLOCK_N tiles the channels; the pixels' count M is computed in the kernel. And a chunk-state kernel whose
# first axis is cdiv(hdim, BLOCK_P) * cdiv(dstate, BLOCK_N), neither named after its tile.
MASKED_SIZES = '''
import triton
import triton.language as tl


@triton.jit
def conv_kernel(x_ptr, w_ptr, y_ptr, N, H, W, C, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    M = N * H * W
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_k = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row = offs_m // W
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for c0 in range(0, C, BLOCK_K):
        cc = c0 + tl.arange(0, BLOCK_K)
        a = tl.load(x_ptr + offs_m[:, None] * C + cc[None, :], mask=(offs_m < M)[:, None] & (cc < C)[None, :]
                    & (row < N * H)[:, None], other=0.0)
        b = tl.load(w_ptr + cc[:, None] * K + offs_k[None, :], mask=(cc < C)[:, None] & (offs_k < K)[None, :],
                    other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(y_ptr + offs_m[:, None] * K + offs_k[None, :], acc, mask=(offs_m < M)[:, None] & (offs_k < K)[None, :])


@triton.jit
def chunk_state_kernel(x_ptr, b_ptr, s_ptr, hdim, dstate, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_pn = tl.program_id(0)
    num_pb = tl.cdiv(hdim, BLOCK_P)
    pid_p = pid_pn % num_pb
    pid_n = pid_pn // num_pb
    offs_p = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + offs_p, mask=offs_p < hdim, other=0.0)
    b = tl.load(b_ptr + offs_n, mask=offs_n < dstate, other=0.0)
    tl.store(s_ptr + offs_p[:, None] * dstate + offs_n[None, :], x[:, None] * b[None, :],
             mask=(offs_p < hdim)[:, None] & (offs_n < dstate)[None, :])
'''


def test_a_grid_tile_follows_the_size_its_offsets_are_masked_against_over_its_name(tmp_path):
    """RESULTS 55: read by its name, a convolution's BLOCK_N tiled the batch N = 4 (one tile long), so every other
    BLOCK_N kept the 4 channel programs and computed part of the output (the GPU found 14 of 17 configs wrong);
    a chunk-state kernel's axis read as padded sizes that the numbers happened to fit."""
    path = tmp_path / "masked_sizes.py"
    path.write_text(MASKED_SIZES)
    conv = Launch(str(path), "conv_kernel", (512, 4), (_t("x_ptr", 4, 128, 128, 512), _t("w_ptr", 512, 512),
                                                       _t("y_ptr", 4, 128, 128, 512)),
                  (("N", 4), ("H", 128), ("W", 128), ("C", 512), ("K", 512)), (),
                  Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32}, 8, 3))
    rule = launch_rule(conv)
    assert rule.grid(conv.config.replace(BLOCK_N=16)) == (512, 32)
    assert rule.grid(conv.config.replace(BLOCK_M=64, BLOCK_K=64)) == (1024, 4)
    state = Launch(str(path), "chunk_state_kernel", (2,), (_t("x_ptr", 64), _t("b_ptr", 128), _t("s_ptr", 64, 128)),
                   (("hdim", 64), ("dstate", 128)), (), Config({"BLOCK_P": 64, "BLOCK_N": 64}, 4, 2))
    rule = launch_rule(state)
    assert rule.grid(state.config.replace(BLOCK_N=16)) == (8,)
    assert rule.grid(state.config.replace(BLOCK_P=32, BLOCK_N=128)) == (2,)


# ------------------------------------------------------------------------------ the axis a program id names

STEP = str(STYLES / "head_state_step.py")


def test_a_tile_the_kernel_scales_one_axiss_program_id_by_moves_that_axis_only():
    """RESULTS 61: a decode step's heads axis (128 x 32 = 4,096) also divides by cdiv(V, BLOCK_V) = 4, and was read
    as cdiv(V, BLOCK_V) x 1,024: BLOCK_V = 16 ran 8,192 programs over 4,096 heads and the GPU faulted."""
    launch = Launch(STEP, "head_state_step", (4096, 4),
                    (TensorArg.contiguous("s_ptr", (128, 32, 128, 128), "float32"),
                     _t("k_ptr", 128, 32, 128), _t("v_ptr", 128, 32, 128)),
                    (("K", 128), ("V", 128)), (), Config({"BLOCK_K": 128, "BLOCK_V": 32}, 4, 3))
    rule = launch_rule(launch)
    assert rule.grid(launch.config) == (4096, 4)
    assert rule.grid(launch.config.replace(BLOCK_V=16)) == (4096, 8)
    assert rule.grid(launch.config.replace(BLOCK_V=64)) == (4096, 2)


def test_names_bound_from_one_helpers_result_follow_its_program_id():
    """`pid_m, pid_n = helper(tl.program_id(0), ...)`: both tiles scale axis 0's program id (GemLite's split-K GEMM
    names its tiles so), so the one axis follows both."""
    launch = Launch(STEP, "tile_pair_step", (32 * 16, 2), (TensorArg.contiguous("x_ptr", (4096, 2048), "float32"),
                                                            TensorArg.contiguous("ws_ptr", (2, 4096, 2048), "float32")),
                    (("M", 4096), ("N", 2048)), (), Config({"BLOCK_M": 128, "BLOCK_N": 128}, 4, 3))
    from advisor.advice.launch_rule import file_defs, pid_scaled_axes

    kernel = file_defs(launch)["tile_pair_step"]
    assert pid_scaled_axes(kernel, {"BLOCK_M", "BLOCK_N"}) == {"BLOCK_M": {0, 1}, "BLOCK_N": {0, 1}}
    rule = launch_rule(launch)
    assert rule.grid(launch.config.replace(BLOCK_M=64)) == (64 * 16, 2)
    assert rule.grid(launch.config.replace(BLOCK_N=256)) == (32 * 8, 2)
