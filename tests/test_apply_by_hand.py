"""`advisor apply` on autotune lists built by code: the file is never rewritten; apply says which list
(function and lines) gets which `triton.Config(...)` line, and leaves nothing behind."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from advisor.advice.search import Advice, Candidate, Location, Subject
from advisor.advice.suggest import plan_apply
from advisor.cli import main
from ceilings.errors import AdvisorError
from ceilings.hardware import resolve_gpu
from ceilings.launch import Config

STYLES = Path(__file__).resolve().parent / "fixtures" / "styles"
NEW = Config({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, 2, 3)
LISTED = Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, 4, 4)
CURRENT = Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}, 8, 3)


class _Built(Subject):
    """A launch of an autotuned kernel whose list is built by code (what `declared_space` finds)."""

    def __init__(self, path: Path, kernel: str, current: Config):
        self.kernel, self.label, self.current = kernel, f"{kernel} launch", current
        self.gpu = resolve_gpu("h100", calibrated=False)
        self.location = Location(str(path), 31, "autotune configs built by code (the list get_autotune_config() "
                                                "returns)")


def advice_for(path: Path, best: Config, kernel: str = "matmul_kernel", current: Config = CURRENT) -> Advice:
    cur = Candidate(current, None, 300.0, (280.0, 320.0))
    return Advice(_Built(path, kernel, current), cur, [Candidate(best, None, 200.0, (180.0, 220.0)), cur], 4,
                  Counter())


@pytest.fixture
def matmul(tmp_path) -> Path:
    path = tmp_path / "tut03_matmul.py"
    shutil.copyfile(STYLES / "tut03_matmul.py", path)
    return path


def test_a_config_missing_from_a_function_built_list_is_a_hand_edit_naming_function_and_lines(matmul):
    hand: list = []
    assert plan_apply([advice_for(matmul, NEW)], by_hand=hand) == []
    (edit,) = hand
    assert edit.configs == (NEW,)
    # The literal list get_cuda_autotune_config returns, written in the file's own style.
    assert edit.where == "the list get_cuda_autotune_config() returns (lines 19-28)" and edit.line == 19
    assert edit.lines == ("triton.Config({'BLOCK_SIZE_M': 32, 'BLOCK_SIZE_N': 64, 'BLOCK_SIZE_K': 32, "
                          "'GROUP_SIZE_M': 8}, num_warps=2, num_stages=3)",)
    assert f"{matmul}:19: the autotune configs of matmul_kernel are built by code" in edit.message()
    # The pasted line is Python that builds exactly the config advised.
    import triton

    assert Config.from_triton(eval(edit.lines[0], {"triton": triton})) == NEW


def test_without_a_list_for_hand_edits_the_first_is_one_error_line(matmul):
    with pytest.raises(AdvisorError, match=r"tut03_matmul.py:19: .* add triton.Config\(\{'BLOCK_SIZE_M': 32"):
        plan_apply([advice_for(matmul, NEW)])


def test_a_config_the_built_list_already_holds_needs_no_change(matmul):
    hand: list = []
    assert plan_apply([advice_for(matmul, LISTED)], by_hand=hand) == [] and hand == []


def test_cli_apply_prints_the_hand_edit_exits_1_and_leaves_the_file_byte_identical(matmul, monkeypatch, capsys):
    before = matmul.read_bytes()
    monkeypatch.setattr("advisor.commands._advices", lambda args: [advice_for(matmul, NEW)])
    assert main(["apply", str(matmul), "--call", "matmul(randn(64, 64, f16), randn(64, 64, f16))"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"{matmul}:19: add to the list get_cuda_autotune_config() returns (lines 19-28)")
    assert "\n    triton.Config({'BLOCK_SIZE_M': 32, 'BLOCK_SIZE_N': 64, 'BLOCK_SIZE_K': 32, 'GROUP_SIZE_M': 8}, " \
           "num_warps=2, num_stages=3),\n" in out
    assert matmul.read_bytes() == before
    assert sorted(p.name for p in matmul.parent.iterdir()) == ["tut03_matmul.py"]  # no .bak, no temp file


COMPREHENSION = '''import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (64, 128) for w in (4, 8)],
    key=["n"],
)
@triton.jit
def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
'''


def test_a_comprehension_built_list_points_at_the_comprehension(tmp_path):
    path = tmp_path / "scale.py"
    path.write_text(COMPREHENSION)
    best = Config({"BLOCK": 256}, 4, 3)
    hand: list = []
    plan_apply([advice_for(path, best, "scale_kernel", Config({"BLOCK": 64}, 4, 3))], by_hand=hand)
    (edit,) = hand
    assert edit.line == 6 and "make it also yield these configs" in edit.where
    assert edit.lines == ('triton.Config({"BLOCK": 256}, num_warps=4, num_stages=3)',)
    assert path.read_text() == COMPREHENSION
