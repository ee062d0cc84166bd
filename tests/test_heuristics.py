"""A kernel's @triton.heuristics follow every config the advice ranks, compiles and times
(advisor/advice/heuristics.py, LaunchSubject.launch_for)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from advisor.advice.heuristics import heuristic_values, with_heuristics
from advisor.advice.subjects import LaunchSubject
from ceilings.compile import kernel_heuristics, launch_arguments
from ceilings.hardware import resolve_gpu
from ceilings.launch import Config, Launch, TensorArg

KERNELS = str(Path(__file__).resolve().parent / "fixtures" / "heuristic_kernels.py")


def _mm_launch(M=64, N=64, K=136, block_k=8) -> Launch:
    # K = 136 = 17 x 8: BLOCK_K 8 divides it, 16 and 32 do not
    tensors = (TensorArg.contiguous("a_ptr", (M, K), "float32"), TensorArg.contiguous("b_ptr", (K, N), "float32"),
               TensorArg.contiguous("c_ptr", (M, N), "float32"))
    return Launch(KERNELS, "masked_mm_kernel", (M // 16, N // 16), tensors, {"M": M, "N": N, "K": K},
                  {"EVEN_K": K % block_k == 0}, Config({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": block_k}, 4, 2))


def test_the_file_s_heuristics_are_found_outermost_first():
    assert [list(v) for v in kernel_heuristics(KERNELS, "masked_mm_kernel")] == [["EVEN_K"]]
    assert [list(v) for v in kernel_heuristics(KERNELS, "scaled_rows_kernel")] == [["TILES"], ["ONE_TILE", "WIDE"]]


def test_values_follow_the_config_and_stack():
    launch = _mm_launch()
    heur = kernel_heuristics(KERNELS, "masked_mm_kernel")
    assert heuristic_values(heur, launch, launch.config.replace(BLOCK_K=8)) == {"EVEN_K": True}
    assert heuristic_values(heur, launch, launch.config.replace(BLOCK_K=32)) == {"EVEN_K": False}
    rows = Launch(KERNELS, "scaled_rows_kernel", (4,), (TensorArg.contiguous("x_ptr", (4, 300), "float32"),
                                                        TensorArg.contiguous("out_ptr", (4,), "float32")),
                  {"N": 300}, {"TILES": 3, "ONE_TILE": False, "WIDE": True}, Config({"BLOCK_N": 128}, 4, 2))
    got = heuristic_values(kernel_heuristics(KERNELS, "scaled_rows_kernel"), rows, Config({"BLOCK_N": 512}, 4, 2))
    assert got == {"TILES": 1, "ONE_TILE": True, "WIDE": True}  # the inner heuristic saw the outer's TILES
    assert dict(with_heuristics(rows, got).constexprs) == got


def test_the_subject_launches_each_config_with_its_own_values():
    launch = _mm_launch()
    subject = LaunchSubject(launch, resolve_gpu("h100"))
    assert subject.launch_for(launch.config) == launch
    for block_k, even in ((8, True), (16, False), (32, False)):
        made = subject.launch_for(launch.config.replace(BLOCK_K=block_k))
        assert dict(made.constexprs)["EVEN_K"] is even and made.config["BLOCK_K"] == block_k
    assert not any("heuristics" in n for n in subject.notes)


def test_a_config_launched_with_its_heuristics_computes_the_product():
    """Run under the interpreter: BLOCK_K = 32 with the recorded EVEN_K = True would read past A and B
    (the unmasked program); with the value the heuristic gives it is the reference product."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("heuristic_kernels_run", KERNELS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # under the suite's TRITON_INTERPRET=1
    inner = module.masked_mm_kernel.fn  # the JIT function: constexprs exactly as the launch gives them
    launch = _mm_launch()
    subject = LaunchSubject(launch, resolve_gpu("h100"))
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 136, generator=gen), torch.randn(136, 64, generator=gen)
    for block_k in (8, 32):
        c = torch.full((64, 64), float("nan"))
        made = subject.launch_for(launch.config.replace(BLOCK_K=block_k))
        args, kwargs = launch_arguments(subject.fn, made, {"a_ptr": a, "b_ptr": b, "c_ptr": c})
        inner[made.grid](*args, **kwargs)
        torch.testing.assert_close(c, a @ b, rtol=1e-3, atol=1e-3)


def test_a_heuristic_that_needs_data_keeps_the_launched_value_with_a_note():
    launch = Launch(KERNELS, "data_rows_kernel", (4,), (TensorArg.contiguous("x_ptr", (4, 100), "float32"),
                                                        TensorArg.contiguous("out_ptr", (4,), "float32")),
                    {"N": 100}, {"ALIGNED": True}, Config({"BLOCK_N": 128}, 4, 2))
    subject = LaunchSubject(launch, resolve_gpu("h100"))
    made = subject.launch_for(Config({"BLOCK_N": 256}, 4, 2))
    assert dict(made.constexprs) == {"ALIGNED": True}
    assert sum("could not be evaluated" in n and "ALIGNED" in n for n in subject.notes) == 1
    subject.launch_for(Config({"BLOCK_N": 512}, 4, 2))
    assert sum("could not be evaluated" in n for n in subject.notes) == 1  # noted once


@pytest.mark.slow  # searches the heuristic kernel's space, compiling it for sm_90 (about 14 s on 2 busy cores)
def test_knobs_a_heuristic_sets_are_not_searched():
    """BLOCK_N and num_warps come from N (FlagGems' softmax sets num_warps so): a config with other values
    would launch the heuristic's, so the search keeps only configs the heuristics leave as they are."""
    launch = Launch(KERNELS, "row_softmax_kernel", (64,), (TensorArg.contiguous("x_ptr", (256, 2000), "float32"),
                                                           TensorArg.contiguous("out_ptr", (256, 2000), "float32")),
                    {"N": 2000}, {}, Config({"BLOCK_M": 4, "BLOCK_N": 2048}, 8, 2))
    subject = LaunchSubject(launch, resolve_gpu("h100"))
    space = subject.space()
    assert launch.config in space and len(space) > 1
    assert all(c["BLOCK_N"] == 2048 and c.num_warps == 8 for c in space)
    assert {c.num_stages for c in space} > {2}  # a free knob moves
    # BLOCK_N covers each row whole (cdiv(N, BLOCK_N) = 1 tiles no grid axis since RESULTS 54), so it is kept as
    # launched before the heuristics are asked; num_warps is the heuristics' alone
    assert sum("num_warps is set by the kernel's @triton.heuristics" in n for n in subject.notes) == 1
    assert sum("kept as launched: BLOCK_N=2048" in n for n in subject.notes) == 1
    made = subject.launch_for(Config({"BLOCK_M": 8, "BLOCK_N": 1024}, 4, 2))  # asked for anyway: what runs
    assert made.config == Config({"BLOCK_M": 8, "BLOCK_N": 2048}, 8, 2) and dict(made.constexprs) == {}
