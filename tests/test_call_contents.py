"""A `--call`'s index tensors that its host code computes from data (a sort's indices) have no contents without a
GPU; before timing, the call runs once for real and the launch takes the contents or the sample that run recorded
(advisor/capture/call_contents.py). Here the real run is Triton's interpreter on the CPU (conftest sets
TRITON_INTERPRET=1), as a GPU run would be."""

from __future__ import annotations

import textwrap

from advisor.capture.call_contents import lacks_contents, program_contents, with_contents
from ceilings.launch import Config, Launch, TensorArg

SCATTER = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def scatter_rows(x_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        ok = offs < n
        dst = tl.load(idx_ptr + offs, mask=ok, other=0)
        tl.store(out_ptr + dst, tl.load(x_ptr + offs, mask=ok), mask=ok)


    def sorted_scatter(x, small):
        order = torch.sort(x, descending=True).indices                  # int64, computed from the data
        picked = torch.sort(small).indices.to(torch.int32)
        out = torch.empty_like(x)
        scatter_rows[(1,)](x, order, out, 64, BLOCK=64)                # only the first 64: a quick interpreted run
        scatter_rows[(1,)](small, picked, torch.empty_like(small), small.numel(), BLOCK=64)
        return out
''')
CALL = "sorted_scatter(randn(140000, f32), randn(64, f32))"


def test_a_call_run_for_real_gives_the_sort_indices_a_timing_needs(tmp_path):
    from advisor.advice.suggest import subjects_for

    path = tmp_path / "scatter.py"
    path.write_text(SCATTER)
    big, small = subjects_for(str(path), call=CALL)
    assert lacks_contents(big.launch) and big.launch.tensor("idx_ptr").sample is None   # meta: no data here
    run = program_contents(path, CALL, device="cpu")
    assert run is not None and [r.kernel for r in run] == ["scatter_rows", "scatter_rows"]
    timed = with_contents(big.launch, run)
    sample = timed.tensor("idx_ptr").sample
    # 140,000 int64 (1.07 MiB): a sample; the indices of one sort, a permutation of 0..139999
    assert (sample.low, sample.high, sample.distinct_rows, sample.sorted) == (0, 139_999, 140_000, False)
    assert len(set(sample.values)) == len(sample.values) == 4096 and not lacks_contents(timed)
    assert timed.tensor("x_ptr") == big.launch.tensor("x_ptr") and timed.grid == big.launch.grid
    assert sorted(with_contents(small.launch, run).tensor("idx_ptr").values) == list(range(64))  # small: whole

    # the subject asks for the run once, when a timing first needs it, and keeps the no-GPU launch for the rest
    calls = []
    big.program_contents = lambda: calls.append(1) or run
    assert big.timed_launch(run=False) is big.launch and not calls
    assert big.timed_launch().tensor("idx_ptr").sample == sample and big.timed_launch() is big.timed_launch()
    assert calls == [1] and big.launch.tensor("idx_ptr").sample is None


def test_a_run_that_fails_or_differs_leaves_the_launch_as_it_was(tmp_path):
    path = tmp_path / "scatter.py"
    path.write_text(SCATTER)
    assert program_contents(path, "sorted_scatter(randn(3, 2, f32), randn(64, f32))", device="cpu") is None
    ids = TensorArg("idx_ptr", (8,), "int32", (1,))
    launch = Launch(str(path), "scatter_rows", (1,), (ids,), (), (), Config({"BLOCK": 64}, 4, 3))
    longer = Launch(str(path), "scatter_rows", (1,), (TensorArg("idx_ptr", (9,), "int32", (1,), values=range(9)),),
                    (), (), Config({"BLOCK": 64}, 4, 3))
    assert with_contents(launch, [longer]) is launch and lacks_contents(launch) and not lacks_contents(longer)
    # an autotuned kernel's real run launches the config its autotuner picked, on the same tensors: taken
    picked = Launch(str(path), "scatter_rows", (2,), (TensorArg("idx_ptr", (8,), "int32", (1,), values=range(8)),),
                    (), (), Config({"BLOCK": 32}, 4, 3))
    assert with_contents(launch, [longer, picked]).tensor("idx_ptr").values == tuple(range(8))
