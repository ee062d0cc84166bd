"""SASS loops of a helper inlined at several call sites, from a listing without "inlined at" frames
(Triton 3.6's `nvdisasm -gi` names only the callee's lines there; RESULTS 32: FlagGems `_attn_bwd`, whose
four loops were counted once each, 0.04-0.11 of Nsight Compute's counts on every pipeline).

The fixture's helper loads ROWS rows an iteration; the kernel calls it with ROWS 1 for n_first iterations,
then with ROWS 2 for n_second: by construction one warp issues n_first + 2 * n_second loads in the loops."""

import re
from pathlib import Path

from ceilings.compile import compile_launch
from ceilings.launch import Config, Launch, TensorArg
from ceilings.sass_map import block_weights, cta_classes, place
from ceilings.ttir_eval import read_kernel_ir

KERNELS = str(Path(__file__).resolve().parent / "fixtures" / "lane_guard_kernels.py")
N_FIRST, N_SECOND = 5, 11


def _without_inlined_frames(sass: str) -> str:
    """A listing as Triton 3.6 gives it: each inlined instruction carries the callee's line alone (this
    Triton prints the callee's frame "inlined at" the kernel's line, then the kernel's line)."""
    return re.sub(r'(//## File "[^"]*", line \d+) inlined at "[^"]*", line \d+\n\s*//##[^\n]*\n', r"\1\n", sass)


def _loop_loads(sass: str, ir, classes) -> tuple[float, list]:
    p = place(sass, "two_inlined_loops", ir, 4)
    weights = block_weights(p, ir, classes, floor=True)[:, 0]
    loads = 0.0
    for b, (s, e) in enumerate(p.cfg.blocks):
        if any(b in loop.blocks for loop in p.loops):
            loads += weights[b] * sum(i.opcode == "LDG" for i in p.fn.instructions[s:e])
    return loads, p


def test_loops_of_a_helper_inlined_twice_are_matched_by_the_callee_lines_in_program_order():
    scalars = {"n_first": N_FIRST, "n_second": N_SECOND}
    tensors = (TensorArg.contiguous("x_ptr", (N_FIRST + 2 * N_SECOND, 128), "float32"),
               TensorArg.contiguous("y_ptr", (128,), "float32"))
    launch = Launch(KERNELS, "two_inlined_loops", (1,), tensors, scalars, {}, Config({"BLOCK": 128}, 4, 1))
    compiled = compile_launch(launch)
    ir = read_kernel_ir(compiled.ttgir, scalars, launch.grid)
    classes = cta_classes(ir)
    assert len(ir.loops()) == 2 and all(r.inlined for r in ir.loops())  # ops carrying the helper's lines
    like_36 = _without_inlined_frames(compiled.sass)
    assert "inlined at" in compiled.sass and "inlined at" not in like_36
    with_frames, p_frames = _loop_loads(compiled.sass, ir, classes)
    without, p = _loop_loads(like_36, ir, classes)
    assert p.loop_region == p_frames.loop_region and None not in p.loop_region
    # The first call's loop(s) run n_first times with one load, the second's n_second with two; matched
    # the other way round they would give 2 * n_first + n_second.
    assert with_frames == without == N_FIRST + 2 * N_SECOND
    assert not any("match no loop" in n for n in p.notes)

