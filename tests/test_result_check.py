"""A proposed config checked in Triton's interpreter, without a GPU, against the launch's own config
(advisor.advice.result_check): one that computes another result is found and never named."""

from __future__ import annotations

import textwrap
from collections import Counter
from types import SimpleNamespace

import pytest

from advisor.advice import result_check
from advisor.advice.search import INTERPRETED_SAME, INTERPRETED_WRONG, Candidate, _results_checked
from ceilings.launch import Config

# One scale per K tile, read at the tile's start: right while the tile stays inside one scale group
# (BLOCK_K <= GROUP), another result past it (the fault of RESULTS 52's int4 GEMV, written anew for the test).
GROUP_SCALED = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _scaled_sum_kernel(X, S, OUT, K, GROUP: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    acc = tl.zeros([BLOCK_R], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(X + rows[:, None] * K + cols[None, :])
        s = tl.load(S + rows * (K // GROUP) + k0 // GROUP)
        acc += tl.sum(x, axis=1) * s
    tl.store(OUT + rows, acc)


def scaled_sum(x, s):
    out = torch.empty(x.shape[0], device=x.device, dtype=torch.float32)
    _scaled_sum_kernel[(x.shape[0] // 16,)](x, s, out, x.shape[1], GROUP=64, BLOCK_R=16, BLOCK_K=32)
    return out
'''

# Row sums stored per row and added into one total with an atomic: only whole grids compare.
ATOMIC_TOTAL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _row_total_kernel(X, ROWS, TOTAL, K, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK_K], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        acc += tl.load(X + row * K + k0 + tl.arange(0, BLOCK_K))
    total = tl.sum(acc, axis=0)
    tl.store(ROWS + row, total)
    tl.atomic_add(TOTAL, total)


def row_total(x):
    rows = torch.empty(x.shape[0], device=x.device, dtype=torch.float32)
    total = torch.zeros(1, device=x.device, dtype=torch.float32)
    _row_total_kernel[(x.shape[0],)](x, rows, total, x.shape[1], BLOCK_K=64)
    return rows, total
'''


# libdevice's tanh and erf (as the stub module and through it), a Python float scale and an optional pointer
# passed as None: three things Triton's interpreter could not run (RESULTS 53's "not checked" rows).
GELU_LIBDEVICE = '''
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.language.extra.libdevice import erf, tanh


@triton.jit
def _gelu_kernel(X, BIAS, Y, N, scale, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    row = tl.program_id(1).to(tl.int64) * N
    ok = cols < N
    x = tl.load(X + row + cols, mask=ok, other=0.0).to(tl.float32)
    if HAS_BIAS:
        x += tl.load(BIAS + cols, mask=ok, other=0.0).to(tl.float32)
    exact = 0.5 * x * (1 + erf(x * 0.7071067811865476))
    approx = 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
    y = (exact + approx + libdevice.rsqrt(x * x + 1.0)) * scale.to(tl.float32)
    tl.store(Y + row + cols, y, mask=ok)


def gelu_sum(x, bias=None, scale=0.5):
    y = torch.empty_like(x)
    _gelu_kernel[(triton.cdiv(x.shape[1], 128), x.shape[0])](x, bias, y, x.shape[1], scale,
                                                             HAS_BIAS=bias is not None, BLOCK=128)
    return y
'''


# Rows gathered through a table of row starts read at pid * STEP: STEP = 1 is the table's layout; another STEP
# reads past the table, far enough (8 GiB per program) that the interpreter touches unmapped memory and dies.
ROW_TABLE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _gather_rows_kernel(X, STARTS, OUT, D, STEP: tl.constexpr, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    start = tl.load(STARTS + pid * STEP)
    cols = tl.arange(0, BLOCK_D)
    row = tl.load(X + start * D + cols, mask=cols < D, other=0.0)
    tl.store(OUT + pid * D + cols, row, mask=cols < D)


def gather_rows(x, starts):
    out = torch.empty((starts.shape[0], x.shape[1]), device=x.device, dtype=x.dtype)
    _gather_rows_kernel[(starts.shape[0],)](x, starts, out, x.shape[1], STEP=1, BLOCK_D=128)
    return out
'''


def test_a_config_that_kills_the_interpreter_is_not_named_and_the_check_goes_on(tmp_path):
    """Set 11's block-sparse matmul: a block size past its row pointers' layout read past them, the interpreter
    died (SIGSEGV), and the config was named unchecked ("the interpreter failed: no message")."""
    subject = _subject(tmp_path, ROW_TABLE, "gather_rows.py",
                       "gather_rows(randn(64, 100), torch.arange(63, -1, -1, dtype=i64))")
    past, wider = _with(subject, STEP=1 << 30), _with(subject, BLOCK_D=256)
    verdicts = result_check.check(subject, [past, wider], limit=120)
    assert verdicts.of[past].startswith("the interpreter was killed by SIGSEGV running it")
    assert verdicts.of[wider] == result_check.SAME and verdicts.unchecked == ""


def test_libdevice_math_a_float_scalar_and_a_none_pointer_run_in_the_interpreter_as_on_the_gpu(tmp_path):
    """Numbers against torch, and the interpreter's libdevice stubs put back after the run."""
    import sys

    import torch
    import triton.language.extra.libdevice as stub

    from advisor.capture.nogpu import bind, interpret
    from ceilings.compile import load_kernel

    path = tmp_path / "gelu_sum.py"
    path.write_text(textwrap.dedent(GELU_LIBDEVICE))
    fn = load_kernel(str(path), "_gelu_kernel")
    x = torch.randn(3, 200)
    y = torch.full_like(x, float("nan"))
    interpret(fn, (2, 3), bind(fn, (x, None, y, 200, 0.75), {"HAS_BIAS": False, "BLOCK": 128}))
    exact = 0.5 * x * (1 + torch.erf(x / 2 ** 0.5))
    approx = 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
    torch.testing.assert_close(y, (exact + approx + torch.rsqrt(x * x + 1)) * 0.75, rtol=1e-5, atol=1e-5)
    assert stub.tanh(1.0) is None and fn.fn.__globals__["erf"] is stub.erf  # stubs again after the run
    assert "triton.language.extra.cuda.libdevice" in sys.modules


def test_a_kernel_using_libdevice_floats_and_none_is_checked_not_left_unchecked(tmp_path):
    subject = _subject(tmp_path, GELU_LIBDEVICE, "gelu_sum.py", "gelu_sum(randn(64, 1000), scale=0.25)")
    other = Config({**subject.current.params, "BLOCK": 256}, 4, 3)
    verdicts = result_check.check(subject, [other], limit=120)
    assert verdicts.unchecked == "" and verdicts.of == {other: result_check.SAME}


def _subject(tmp_path, source: str, name: str, call: str):
    from advisor.advice.suggest import subjects_for
    from ceilings.hardware import resolve_gpu

    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    subjects = list(subjects_for(str(path), call=call, gpu=resolve_gpu("h100")))
    assert len(subjects) == 1
    return subjects[0]


@pytest.fixture(scope="module")
def scaled(tmp_path_factory):
    return _subject(tmp_path_factory.mktemp("scaled"), GROUP_SCALED, "scaled_sum.py",
                    "scaled_sum(randn(256, 512), randn(256, 8))")


def _with(subject, **params) -> Config:
    return Config({**subject.current.params, **params}, 4, 3)


def test_a_k_tile_past_the_scale_group_is_found_to_compute_another_result_and_one_inside_it_the_same(scaled):
    past, inside = _with(scaled, BLOCK_K=128), _with(scaled, BLOCK_K=64)
    verdicts = result_check.check(scaled, [past, inside], limit=120)
    assert verdicts.sampled  # no atomics: a sample of programs, compared where both wrote
    assert verdicts.of[past].startswith("OUT differs from the reference: relative error")
    assert verdicts.of[inside] == result_check.SAME
    assert verdicts.unchecked == ""


def test_every_candidate_is_checked_in_rank_order_and_one_past_the_limit_is_said_unchecked(scaled, monkeypatch):
    inside, past, further = _with(scaled, BLOCK_K=16), _with(scaled, BLOCK_K=128), _with(scaled, BLOCK_K=256)
    verdicts = result_check.check(scaled, [inside, past], limit=120)
    assert verdicts.of[inside] == result_check.SAME and verdicts.of[past] != result_check.SAME
    monkeypatch.setattr(result_check, "MAX_CANDIDATES", 2)
    capped = result_check.check(scaled, [inside, past, further], limit=120)
    assert further not in capped.of


def test_warps_and_stages_twins_and_the_current_program_are_not_run(scaled):
    twin = Config(dict(scaled.current.params), 8, 2)  # the current config's program: nothing to check
    assert result_check.check(scaled, [twin], limit=120).of == {}


def test_a_check_turned_off_says_nothing_and_one_out_of_time_says_so(scaled, monkeypatch):
    past = _with(scaled, BLOCK_K=128)
    monkeypatch.setenv(result_check.INTERPRET_S_ENV, "0")
    off = result_check.check(scaled, [past])
    assert off.of == {} and off.unchecked == ""  # the search then lists its finalists as they were
    late = result_check.check(scaled, [past], limit=0.001)
    assert late.of == {} and "interpreter" in late.unchecked and result_check.INTERPRET_S_ENV in late.unchecked


def test_a_kernel_with_atomics_runs_its_whole_grid(tmp_path):
    subject = _subject(tmp_path, ATOMIC_TOTAL, "row_total.py", "row_total(randn(64, 256))")
    other = Config({**subject.current.params, "BLOCK_K": 128}, 4, 3)
    verdicts = result_check.check(subject, [other], limit=120)
    assert not verdicts.sampled
    assert verdicts.of == {other: result_check.SAME}


def test_sampled_programs_are_the_first_two_the_middle_and_the_last_along_each_axis():
    assert result_check.sampled_programs((9,)) == {(0, 0, 0), (1, 0, 0), (4, 0, 0), (8, 0, 0)}
    assert result_check.sampled_programs((1, 2)) == {(0, 0, 0), (0, 1, 0)}
    assert len(result_check.sampled_programs((100, 100, 100))) == 64


def _cand(label: str, k: int, warps: int = 4) -> Candidate:
    return Candidate(Config({"BLOCK_K": k}, warps, 3), SimpleNamespace(), 1.0, (1.0, 1.0), [label])


def test_the_search_drops_a_config_found_wrong_and_its_twins_and_names_the_next_with_the_check_said():
    wrong, twin, right, after = _cand("a", 128), _cand("b", 128, warps=8), _cand("c", 64), _cand("d", 32)
    ranked = [wrong, twin, right, after]
    verdicts = result_check.Verdicts({wrong.config: "OUT differs from the reference: relative error 1.7 > 0.01",
                                      right.config: result_check.SAME}, "", sampled=True)
    subject = SimpleNamespace(current=Config({"BLOCK_K": 16}, 4, 3), result_check=lambda configs: verdicts,
                              confirm=lambda config: (None, []))
    pruned = Counter()
    kept, notes = _results_checked(subject, ranked[:3], ranked, pruned, want=2)
    assert [c.config for c in kept] == [right.config, after.config]
    assert pruned[INTERPRETED_WRONG] == 2
    assert kept[0].notes[0].startswith(INTERPRETED_SAME)
    assert notes == [f"1 config {INTERPRETED_WRONG} (the first, second, middle and last programs along each grid axis, "
                     "on random data), not listed nor its num_warps / num_stages twins: K128 w4 s3 (OUT differs: "
                     "relative error 1.7)"]


def test_the_config_the_search_would_name_unchecked_says_why():
    first = _cand("a", 128)
    verdicts = result_check.Verdicts({}, "one run of the launch in the interpreter takes over 20 s")
    subject = SimpleNamespace(current=Config({"BLOCK_K": 16}, 4, 3), result_check=lambda configs: verdicts,
                              confirm=lambda config: (None, []))
    kept, notes = _results_checked(subject, [first], [first], Counter(), want=1)
    assert kept == [first] and notes == []
    assert first.notes[0] == "not checked in Triton's interpreter: one run of the launch in the interpreter takes " \
                             "over 20 s"


def test_a_config_that_spills_where_the_current_does_not_is_listed_after_those_that_do_not():
    from advisor.advice.search import SPILL_NOTE, _confirmed, spill_bytes

    fast_spilling, slower, slowest = _cand("a", 128), _cand("b", 64), _cand("c", 32)
    notes = {128: ["240 B per thread of register spills"], 64: [], 32: []}
    subject = SimpleNamespace(confirm=lambda config: (None, list(notes[config.params["BLOCK_K"]])))
    finalists, spilling = _confirmed(subject, [fast_spilling, slower, slowest], 2, True, True, Counter())
    assert finalists == [slower, slowest] and spilling == [fast_spilling]
    assert fast_spilling.notes[0] == SPILL_NOTE.format(240) and spill_bytes(fast_spilling.notes) == 240
    # room left: listed last; where the current config spills too, ranked as predicted
    assert _confirmed(subject, [fast_spilling, slower], 3, True, True, Counter())[0] == [slower, fast_spilling]
    again = _cand("a", 128)
    assert _confirmed(subject, [again, slower], 2, True, False, Counter())[0] == [again, slower]


def test_a_block_used_as_an_index_is_squeezed_first_as_numpy_2_5_requires():
    """Triton 3.6's interpreter turns a one-element block into an index with int(array), which NumPy 2.5 refuses
    for arrays of one dimension (seen on the GPU machines); the patch squeezes it first."""
    import operator

    import numpy as np
    from triton.runtime import interpreter

    from advisor.capture import interpreter_fixes

    class Strict(np.ndarray):  # NumPy 2.5's rule on any NumPy: only a 0-d array converts to a Python int
        def __int__(self):
            if self.ndim:
                raise TypeError("only 0-dimensional arrays can be converted to Python scalars")
            return int(self.item())

    interpreter_fixes.install()
    assert interpreter._patch_lang_tensor._advisor_squeezed

    class Block:
        handle = SimpleNamespace(data=np.array([7]).view(Strict))

    scope = interpreter._LangPatchScope()
    interpreter._patch_lang_tensor(Block, scope)
    try:
        assert operator.index(Block()) == 7
    finally:
        scope.restore()


def test_a_limit_that_is_not_a_number_of_seconds_is_one_line_and_exit_2(tmp_path, monkeypatch):
    import subprocess
    import sys

    path = tmp_path / "scaled_sum.py"
    path.write_text(textwrap.dedent(GROUP_SCALED))
    env = {**__import__("os").environ, result_check.INTERPRET_S_ENV: "soon"}
    done = subprocess.run([sys.executable, "-m", "tui.entry", "suggest", str(path), "--call",
                           "scaled_sum(randn(256, 512), randn(256, 8))"], capture_output=True, text=True, env=env)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith(
        "TRITON_ADVISOR_INTERPRET_S='soon': give the seconds the interpreter check of a search may take, a number "
        "of 0 or more (0 turns it off)")
    assert "Traceback" not in done.stderr
