"""Integer tensors a host builds on the GPU's device get data in a capture without a GPU
(advisor/capture/integer_data.py): a segment sum's CSR offsets, so the loop they bound is counted per CTA
(RESULTS 56: a held-out segment sum predicted 16x too fast without them)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from advisor.capture.call import capture_call, capture_call_with_data
from ceilings.demand import generic_demand
from ceilings.errors import AdvisorError

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


def test_a_host_that_cannot_run_without_data_in_its_own_ids_is_captured_with_it():
    """Set 10's LoRA expand buckets tokens by adapter ids it draws on the GPU (argsort, bincount): without data the
    capture failed ("bincount ... Meta tensors") and the launch could not be advised at all."""
    call = "rows_by_bucket(randn(1000, 64), 16)"
    with pytest.raises(AdvisorError, match="bincount"):
        capture_call(CSR, call, "h100")
    trace, used = capture_call_with_data(CSR, call, "h100")
    offsets = offsets_of(trace)[1].values
    assert used and len(offsets) == 17 and offsets[0] == 0 and offsets[-1] == 1000
    assert all(a <= b for a, b in zip(offsets, offsets[1:], strict=False))  # a cumsum of counts


def test_a_host_that_fails_either_way_says_why_without_data():
    with pytest.raises(AdvisorError, match="no_such_function"):
        capture_call_with_data(CSR, "no_such_function(randn(4, 4))", "h100")


def test_offsets_the_call_builds_on_the_cpu_keep_their_values_when_the_host_moves_them_to_the_gpu():
    """Set 11's block-sparse matmul moves the CSR row pointers its call builds (`torch.arange(0, 65) * 16`) to the
    input's device; the move used to drop their data, so every block row's loop ran 0 times in the ceiling, the
    interpreter check and the timings."""
    call = "segment_sum_given_offsets(randn(1000, 64), torch.arange(0, 11, dtype=i64) * 100)"
    trace, used = capture_call_with_data(CSR, call, "h100")
    launch, offsets = offsets_of(trace)
    assert used and offsets.dtype == "int32" and offsets.values == tuple(range(0, 1001, 100))
    assert offsets_of(capture_call(CSR, call, "h100"))[1].values is None  # without data: the move drops them
    # every row of x is read once now (1000 x 64 fp32)
    assert 1000 * 64 * 4 <= generic_demand(launch).dram_bytes <= 1000 * 64 * 4 * 1.05
