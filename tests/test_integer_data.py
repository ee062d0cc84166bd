"""Integer tensors a host builds on the GPU's device get data in a capture without a GPU
(advisor/capture/integer_data.py): a segment sum's CSR offsets, so the loop they bound is counted per CTA
(RESULTS 56: a held-out segment sum predicted 16x too fast without them)."""

from __future__ import annotations

from pathlib import Path

import torch

from advisor.capture.call import capture_call, capture_call_with_data
from ceilings.demand import generic_demand

CSR = Path(__file__).resolve().parent / "fixtures" / "csr_host_kernels.py"
IDS = torch.randint(0, 16, (1000,), dtype=torch.int64, generator=torch.Generator().manual_seed(0))


def offsets_of(trace):
    launch = trace.launches[0]
    return launch, next(t for t in launch.tensors if t.name == "offsets_ptr")


def test_offsets_a_host_builds_on_the_gpu_carry_their_values_and_bound_the_loop_per_cta():
    call = "segment_sum(randn(1000, 64), randint(0, 16, (1000,), i64), 16)"
    trace, used = capture_call_with_data(CSR, call, "h100")
    launch, offsets = offsets_of(trace)
    assert used
    assert offsets.values == (0, *torch.cumsum(torch.bincount(IDS, minlength=16), 0).tolist())
    # Without data the offsets have no contents and the floor counts the loop in no CTA.
    plain_launch, plain_offsets = offsets_of(capture_call(CSR, call, "h100"))
    assert plain_offsets.values is None
    with_values, without = generic_demand(launch), generic_demand(plain_launch)
    # every row of x is read once (1000 x 64 fp32), against the floor's loop counted in no CTA
    assert 1000 * 64 * 4 <= with_values.dram_bytes <= 1000 * 64 * 4 * 1.05
    assert without.dram_bytes < 1000 * 64 * 4 / 10
    assert with_values.instructions("lsu") > 1.5 * without.instructions("lsu")


def test_a_host_that_needs_its_index_tensor_on_the_gpu_is_captured_without_data():
    call = "segment_sum_on_gpu_only(randn(1000, 64), randint(0, 16, (1000,), i64), 16)"
    trace, used = capture_call_with_data(CSR, call, "h100")
    assert not used and offsets_of(trace)[1].values is None


def test_random_index_tensors_are_drawn_from_a_fixed_seed():
    call = "random_rows(randn(1000, 64), 32)"
    first, used = capture_call_with_data(CSR, call, "h100")
    again, _ = capture_call_with_data(CSR, call, "h100")
    rows = offsets_of(first)[1].values
    assert used and rows == offsets_of(again)[1].values and len(rows) == 33 and 0 <= min(rows) <= max(rows) < 1000
