"""Tiles as authors name them: BM / BN / BK of a hand-written GEMM and a bare BLOCK are tiles the search may
change where a grid axis or a loop follows them; a tile launched under 16 (a few heads per program) may be halved.
Before, only BLOCK_X / BLOCK_SIZE_X / TILE_X were searched, so a split-K GEMM written with BM, BN, BK had only its
num_warps and num_stages searched, and RoPE's BLOCK_H = 4 was never moved (tiles stopped at 16)."""

from __future__ import annotations

from pathlib import Path

from advisor.advice.config_space import _knob_values, around
from advisor.advice.grid_values import tile_dim
from advisor.advice.launch_rule import launch_rule
from advisor.advice.tile_roles import covering_tiles
from ceilings.compile import load_kernel
from ceilings.launch import Config, Launch, TensorArg

USER = Path(__file__).resolve().parents[1] / "benchmarks" / "user_kernels"


def test_tile_names_as_authors_write_them():
    assert [tile_dim(n) for n in ("BLOCK_SIZE_M", "BLOCK_M", "TILE_N", "BM", "BK", "BT", "M_BLOCK", "XBLOCK")] \
        == ["M", "M", "N", "M", "K", "T", "M", "X"]
    assert [tile_dim(n) for n in ("BLOCK", "BLOCK_SIZE", "TILE_SIZE")] == ["SIZE"] * 3
    assert [tile_dim(n) for n in ("SPLIT_K", "GROUP_SIZE_M", "NUM_STAGES", "EVEN_K", "B", "HEAD_DIM")] == [None] * 6


def test_a_tile_launched_under_16_may_be_halved_and_one_of_16_is_not():
    assert _knob_values("BLOCK_H", 4) == [2, 4, 8]
    assert _knob_values("BM", 16) == [16, 32]  # 16 may feed tl.dot, which takes nothing smaller
    assert _knob_values("BLOCK", 4096) == [2048, 4096, 8192]  # a 1-D block, as BLOCK_SIZE
    assert _knob_values("SPLIT_K", 4) == [4]  # not a tile: the result's partial sums depend on it
    space = around(Config({"BM": 16, "BN": 64, "BK": 64, "SPLIT_K": 4}, 4, 3))
    assert {c["BN"] for c in space} == {32, 64, 128} and {c["BK"] for c in space} == {32, 64, 128}
    assert {c["SPLIT_K"] for c in space} == {4}


def _splitk(m: int) -> Launch:
    """benchmarks/user_kernels/splitk_gemm.py as its host launches it: grid (cdiv(M, 16) * cdiv(N, 64), 4)."""
    n, k = 11008, 4096
    tensors = tuple(TensorArg.contiguous(name, shape, "bf16" if name != "c_ptr" else "fp32")
                    for name, shape in (("a_ptr", (m, k)), ("b_ptr", (k, n)), ("c_ptr", (m, n))))
    scalars = (("M", m), ("N", n), ("K", k), ("stride_am", k), ("stride_bk", n), ("stride_cm", n))
    grid = (-(-m // 16) * -(-n // 64), 4)
    return Launch(str(USER / "splitk_gemm.py"), "splitk_matmul_kernel", grid, tensors, scalars, (),
                  Config({"BM": 16, "BN": 64, "BK": 64, "SPLIT_K": 4}, 4, 3))


def test_short_named_gemm_tiles_move_the_grid_or_walk_the_loop():
    fn = load_kernel(str(USER / "splitk_gemm.py"), "splitk_matmul_kernel")
    launch = _splitk(32)
    rule = launch_rule(launch)
    assert rule.grid(launch.config.replace(BN=128)) == (172, 4)
    assert rule.grid(launch.config.replace(BM=32)) == (172, 4)
    assert rule.grid(launch.config.replace(BK=128)) == (344, 4)  # BK walks K: no program more or fewer
    assert covering_tiles(fn, dict(launch.config.params), rule) == set()
    # at 8 rows one BM tile covers M, and the kernel masks BM's rows by M and scales axis 0's program id by BM:
    # axis 0 follows BM as at 32 rows (RESULTS 55; before, no axis followed it and BM was kept as launched)
    skinny = _splitk(8)
    assert launch_rule(skinny).grid(skinny.config.replace(BM=4)) == (344, 4)
    assert covering_tiles(fn, dict(skinny.config.params), launch_rule(skinny)) == set()


def test_a_bare_block_each_row_covers_whole_is_kept():
    fn = load_kernel(str(USER / "layernorm_fwd.py"), "layer_norm_fwd_kernel")
    x = TensorArg.contiguous("x_ptr", (8192, 4096), "bf16")
    tensors = (x, TensorArg.contiguous("w_ptr", (4096,), "bf16"), TensorArg.contiguous("b_ptr", (4096,), "bf16"),
               TensorArg.contiguous("y_ptr", (8192, 4096), "bf16"), TensorArg.contiguous("mean_ptr", (8192,), "fp32"),
               TensorArg.contiguous("rstd_ptr", (8192,), "fp32"))
    launch = Launch(str(USER / "layernorm_fwd.py"), "layer_norm_fwd_kernel", (8192,), tensors,
                    (("stride_x", 4096), ("stride_y", 4096), ("N", 4096), ("eps", 1e-5)), (),
                    Config({"BLOCK": 4096}, 16, 3))
    assert covering_tiles(fn, {"BLOCK": 4096}, launch_rule(launch)) == {"BLOCK"}
