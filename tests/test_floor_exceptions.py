"""The generic floor's corpus exceptions (issue 14, RESULTS 17), each on a small kernel or listing whose counts
are known by construction (tests/fixtures/exception_kernels.py), compiled for sm_90 without a GPU."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ceilings.compile import compile_launch
from ceilings.demand import generic_demand
from ceilings.launch import Config, Launch, TensorArg
from ceilings.sass import build_cfg, parse_sass
from ceilings.unroll import induction_unroll

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
    # The same cubin built beside the GPU that runs it: its spill code is what runs, so the floor counts it.
    on_target = generic_demand(one, replace(compiled, built_on_target=True))
    assert on_target.instructions("lsu") == d.expected.instructions("lsu") == 4 * (64 + 64 + 5 + 1 + local)
    assert any("counted in the floor" in n for n in on_target.notes)
    assert not compiled.built_on_target  # this machine has no GPU: compiled as for another machine's


# --- a loop run a constant number of times, counted in bytes ----------------------------------------------
def counted_listing(copies: int, start: str, bound: str, join: bool = False) -> str:
    """A kernel with one loop of `copies` body copies (a load and an FADD each), its counter R17 (the low
    half of a 64-bit byte offset) set by `start` before the loop, stepped by 0x700 and compared with
    `bound` for the back edge; `join`: a branch target between the start and the loop."""
    pre = [start, "MOV R15, RZ ;"] + (["@P3 BRA `(.L_x_9) ;"] if join else [])
    body = []
    for k in range(copies):
        body += [f"LDG.E R{20 + k}, desc[UR4][R2.64+{hex(0x80 * k)}] ;", f"FADD R40, R40, R{20 + k} ;"]
    body += ["IADD3 R17, P0, R17, 0x700, RZ ;", "IADD3.X R15, RZ, R15, RZ, P0, !PT ;",
             f"ISETP.NE.U32.AND P0, PT, R17, {bound}, PT ;", "ISETP.NE.U32.AND.EX P0, PT, R15, RZ, PT, P0 ;"]
    lines, address = ["kernel:"], 0
    for text in pre:
        lines.append(f"        /*{address:04x}*/                   {text}")
        address += 16
    if join:
        lines.append(".L_x_9:")
        lines.append(f"        /*{address:04x}*/                   NOP ;")
        address += 16
    lines.append(".L_x_1:")
    for text in body:
        lines.append(f"        /*{address:04x}*/                   {text}")
        address += 16
    lines += [f"        /*{address:04x}*/              @P0 BRA `(.L_x_1) ;",
              f"        /*{address + 16:04x}*/                   EXIT ;"]
    return "\n".join(lines)


@pytest.mark.parametrize("copies, start, bound, trips, join, expected", [
    (14, "HFMA2.MMA R17, -RZ, RZ, 0, 0 ;", "0x3800", 112, False, 14),  # 0x3800 / 0x700 = 8 passes of 14
    (14, "MOV R17, RZ ;", "0x3800", 112, False, 14),
    (16, "IMAD.MOV.U32 R17, RZ, RZ, 0x700 ;", "0x3800", 112, False, 16),  # from 0x700: 7 passes of 16
    (14, "MOV R17, RZ ;", "0x3800", 8, False, 1),       # 8 passes for 8 trips: one copy a pass
    (14, "MOV R17, RZ ;", "0x3800", 113, False, 1),     # 8 passes cannot make 113 trips
    (7, "MOV R17, RZ ;", "0x3800", 112, False, 1),      # 7 copies cannot be 14
    (14, "MOV R17, RZ ;", "R9", 112, False, 1),         # a bound in a register: passes unknown
    (14, "MOV R17, R9 ;", "0x3800", 112, False, 1),     # a start in a register: passes unknown
    (14, "MOV R17, RZ ;", "0x3800", 112, True, 1),      # another path joins before the loop
])
def test_a_constant_pass_count_of_a_byte_counter_gives_the_unroll(copies, start, bound, trips, join, expected):
    fn = parse_sass(counted_listing(copies, start, bound, join))["kernel"]
    cfg = build_cfg(fn)
    (loop,) = cfg.loops
    # The IR loop steps its induction variable by 1; the counter steps 0x700 bytes a pass.
    assert induction_unroll(fn, cfg, loop, 1, trips) == expected
    assert induction_unroll(fn, cfg, loop, 1, None) == 1  # trip count not one constant: no unroll


# --- opcode -> pipeline ------------------------------------------------------------------------------------
def test_viadd_issues_on_the_fma_pipe_and_iadd3_on_the_alu():
    listing = """
k:
.text.k:
        /*0000*/                   VIADD R0, R1, 0x80 ;
        /*0010*/                   IADD3 R2, R3, 0x80, RZ ;
        /*0020*/                   IMAD.IADD R4, R5, 0x1, R6 ;
        /*0030*/                   VIADDMNMX R7, R8, 0x1, R9, !PT ;
        /*0040*/                   EXIT ;
"""
    assert [i.pipe for i in parse_sass(listing)["k"].instructions] == ["fma", "alu", "fma", "alu", "cbu"]


# --- a loop counted down in a uniform register ------------------------------------------------------------
def uniform_listing(copies: int, decrement: str) -> str:
    """A loop of `copies` body copies whose iterations left are kept in the uniform register UR11 (the
    64-bit pair UR11:UR5), stepped by `decrement` and compared with zero for the back edge."""
    body = []
    for k in range(copies):
        body += [f"LDG.E R{20 + k}, desc[UR6][R2.64+{hex(0x100 * k)}] ;", f"FFMA R40, R{20 + k}, R41, R40 ;"]
    body += [decrement, "UIADD3.X UR5, UR5, -0x1, URZ, UP0, !UPT ;", "ISETP.NE.U32.AND P0, PT, RZ, UR11, PT ;",
             "ISETP.NE.U32.AND.EX P0, PT, RZ, UR5, PT, P0 ;"]
    lines = ["kernel:", "        /*0000*/                   ULDC UR11, c[0x0][0x210] ;", ".L_x_0:"]
    lines += [f"        /*{16 * (i + 1):04x}*/                   {text}" for i, text in enumerate(body)]
    n = len(body) + 1
    lines += [f"        /*{16 * n:04x}*/               @P0 BRA `(.L_x_0) ;",
              f"        /*{16 * (n + 1):04x}*/                   EXIT ;"]
    return "\n".join(lines)


@pytest.mark.parametrize("copies, decrement, expected", [
    (8, "UIADD3 UR11, UP0, UR11, -0x8, URZ ;", 8),   # 8 heads a pass, counted down by 8
    (4, "UIADD3 UR11, UP0, UR11, -0x4, URZ ;", 4),
    (6, "UIADD3 UR11, UP0, UR11, -0x8, URZ ;", 1),   # 6 copies cannot be 8x
    (8, "UIADD3 UR12, UP0, UR12, -0x8, URZ ;", 1),   # not the register the back edge tests
])
def test_a_uniform_down_counter_gives_the_unroll(copies, decrement, expected):
    fn = parse_sass(uniform_listing(copies, decrement))["kernel"]
    cfg = build_cfg(fn)
    (loop,) = cfg.loops
    assert induction_unroll(fn, cfg, loop, 1) == expected


# --- copies peeled around a main loop and its remainder loop ----------------------------------------------
@pytest.mark.parametrize("warps", [4, 8])
@pytest.mark.parametrize("chunks", [1, 2, 3, 5, 7, 9])
def test_copies_peeled_around_an_unrolled_loop_and_its_remainder_count_nothing(chunks, warps):
    cols = 1024 * chunks
    tensors = tuple(TensorArg.contiguous(name, (4, cols), "bfloat16") for name in ("x_ptr", "g_ptr", "y_ptr"))
    one = Launch(KERNELS, "chunked_rows", (4,), tensors, {"n_cols": cols}, {}, Config({"BLOCK": 1024}, warps, 3))
    d = generic_demand(one)
    assert any("unrolled 4x with a remainder loop" in n for n in d.notes)
    # Per warp: two loads and a store a chunk (1024 bf16 over the CTA's threads: one access each), and
    # the thread-index read. ptxas peels a first chunk before the 4x main loop and a 2-chunk after it:
    # counted on top, they made 3 copies too many (6 of Liger's sparsemax backward's 8-warp config).
    assert d.instructions("lsu") == 4 * warps * (3 * chunks + 1)
    assert d.expected.instructions("lsu") == d.instructions("lsu")


def test_a_machine_is_beside_its_target_only_when_nvidia_smi_lists_that_architecture(monkeypatch, tmp_path):
    import subprocess
    from pathlib import Path as RealPath

    import ceilings.compile as compile_module

    answers = {"out": "9.0\n", "rc": 0}

    class Dev(type(RealPath())):
        def glob(self, pattern):  # an NVIDIA device node, whatever this machine has
            return iter([tmp_path / "nvidia0"]) if str(self) == "/dev" else super().glob(pattern)

    def fake_run(command, **kw):
        assert command[0] == "nvidia-smi" and "--query-gpu=compute_cap" in command
        return subprocess.CompletedProcess(command, answers["rc"], answers["out"], "")

    monkeypatch.setattr(compile_module, "Path", Dev)
    monkeypatch.setattr(compile_module.subprocess, "run", fake_run)
    ask = compile_module.gpu_here.__wrapped__  # not the per-process cache
    assert ask(90) and not ask(100)
    answers.update(out="8.0\n9.0\n")
    assert ask(90)
    answers.update(rc=9, out="")
    assert not ask(90)

    def missing(command, **kw):
        raise FileNotFoundError("nvidia-smi")
    monkeypatch.setattr(compile_module.subprocess, "run", missing)
    assert not ask(90)
