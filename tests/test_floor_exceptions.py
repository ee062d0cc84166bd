"""The generic floor's corpus exceptions (issue 14, RESULTS 17), each on a small kernel or listing whose counts
are known by construction (tests/fixtures/exception_kernels.py), compiled for sm_90 without a GPU."""

from __future__ import annotations

from pathlib import Path

from ceilings.compile import compile_launch
from ceilings.demand import generic_demand
from ceilings.launch import Config, Launch, TensorArg
from ceilings.sass import parse_sass

KERNELS = str(Path(__file__).resolve().parent / "fixtures" / "exception_kernels.py")


def row_launch(kernel: str, rows: int, block: int, warps: int) -> Launch:
    tensors = (TensorArg.contiguous("x_ptr", (rows, block), "float32"),
               TensorArg.contiguous("y_ptr", (rows, block), "float32"))
    return Launch(KERNELS, kernel, (rows,), tensors, {}, {}, Config({"BLOCK": block}, warps, 1))


def test_spill_code_counts_in_the_expected_work_not_the_floor():
    one = row_launch("spilled_row", 4, 8192, 1)
    compiled = compile_launch(one)
    assert compiled.local_bytes > 0  # 256 fp32 values a thread: more than its registers
    local = sum(1 for i in parse_sass(compiled.sass)["spilled_row"].instructions if i.opcode in ("LDL", "STL"))
    assert local > 0
    d = generic_demand(one, compiled)
    # Per warp (one per CTA): 8192 / (32 lanes x 4 fp32) 128-bit loads and as many stores, 5 shuffles
    # for the warp's max, the thread-index read; the spill loads and stores on top in the expected work.
    assert d.instructions("lsu") == 4 * (64 + 64 + 5 + 1)
    assert d.expected.instructions("lsu") == 4 * (64 + 64 + 5 + 1 + local)
    assert any("local-memory (spill)" in n and "floor counts none" in n for n in d.notes)
