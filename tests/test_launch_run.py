"""Measuring a traced launch: inputs made from shapes and strides, and the check of a config's outputs
(advisor.measure.launch_run). The GPU parts are timed elsewhere; the inputs and the check run on the CPU."""

import contextlib
import math

import pytest
import torch

from advisor.measure import launch_run
from advisor.measure.timing import MeasurementError
from ceilings.launch import Config, Launch, TensorArg


def _launch(*tensors):
    return Launch("k.py", "k", (1,), tensors=tuple(tensors), config=Config({"BLOCK": 16}, 4, 2))


def test_a_broadcast_input_with_stride_0_is_made_and_restored_through_its_buffer():
    # A bias broadcast over rows (stride 0) cannot be written through its view: copy_ into it fails.
    launch = _launch(TensorArg("bias", (64, 128), "float32", (0, 1)), TensorArg("out", (64, 128), "float32", (128, 1)))
    pristine, buffers = {}, {}
    launch_run.make_tensors(launch, device="cpu", storage=pristine)
    work = launch_run.make_tensors(launch, device="cpu", storage=buffers)
    assert work["bias"].stride() == (0, 1) and buffers["bias"].numel() == 128
    with pytest.raises(RuntimeError):
        work["bias"].copy_(torch.ones(64, 128))
    work["out"].zero_()
    for name, flat in pristine.items():  # what launch_measurer's restore does
        buffers[name].copy_(flat)
    assert torch.equal(work["out"], launch_run.make_tensors(launch, device="cpu")["out"])


def test_a_kernel_that_is_not_bit_stable_is_held_to_its_own_spread():
    gen = torch.Generator().manual_seed(0)
    ref = {"acc": torch.randn(4096, generator=gen), "idx": torch.arange(10)}
    again = {"acc": ref["acc"] * (1 + 5e-3 * torch.randn(4096, generator=gen)), "idx": ref["idx"].clone()}
    noise = launch_run.run_noise(ref, again)
    assert 1e-3 < noise["acc"] < 1e-2 and noise["idx"] == 0.0
    # A config as far from the reference as the reference is from itself passes at a 1e-3 tolerance...
    launch_run.check_outputs(again, ref, noise, 1e-3, "k")
    # ...a wrong one does not, and neither does a changed integer output the reference repeats exactly.
    with pytest.raises(MeasurementError, match="acc differs"):
        launch_run.check_outputs({"acc": -ref["acc"], "idx": ref["idx"]}, ref, noise, 1e-3, "k")
    with pytest.raises(MeasurementError, match="idx differs"):
        launch_run.check_outputs({"acc": ref["acc"], "idx": ref["idx"] + 1}, ref, noise, 1e-3, "k")


def test_a_bit_stable_output_keeps_the_tolerance_and_overflow_in_the_same_places_is_no_error():
    ref = {"y": torch.tensor([1.0, 2.0, math.inf, -math.inf, math.nan])}
    noise = launch_run.run_noise(ref, {"y": ref["y"].clone()})
    assert noise == {"y": 0.0}
    launch_run.check_outputs({"y": torch.tensor([1.0, 2.001, math.inf, -math.inf, math.nan])}, ref, noise, 1e-2, "k")
    with pytest.raises(MeasurementError):
        launch_run.check_outputs({"y": torch.tensor([1.0, 2.0, 5.0, -math.inf, math.nan])}, ref, noise, 1e-2, "k")
    with pytest.raises(MeasurementError):
        launch_run.check_outputs({"y": torch.tensor([1.0, 2.5, math.inf, -math.inf, math.nan])}, ref, noise, 1e-2, "k")


def test_float8_outputs_are_compared_without_a_traceback():
    # torch has no nan_to_num for float8 (RESULTS 36: `suggest --measure 4` on torchao's fp8 quantisers ended in a
    # traceback); a float8 output is compared as float32.
    ref = {"q": (torch.randn(256, generator=torch.Generator().manual_seed(1)) * 100).to(torch.float8_e4m3fn)}
    noise = launch_run.run_noise(ref, {"q": ref["q"].clone()})
    assert noise == {"q": 0.0}
    launch_run.check_outputs({"q": ref["q"].clone()}, ref, noise, 1e-2, "k")
    with pytest.raises(MeasurementError, match="q differs"):
        launch_run.check_outputs({"q": (ref["q"].float() * -1).to(torch.float8_e4m3fn)}, ref, noise, 1e-2, "k")


def test_an_output_the_reference_does_not_repeat_is_not_checked():
    ref = {"y": torch.tensor([1.0, math.inf]), "n": torch.tensor([3])}
    again = {"y": torch.tensor([math.inf, 1.0]), "n": torch.tensor([4])}  # overflow moved; a counter raced
    noise = launch_run.run_noise(ref, again)
    assert noise == {"y": math.inf, "n": math.inf}
    launch_run.check_outputs({"y": torch.tensor([7.0, 8.0]), "n": torch.tensor([9])}, ref, noise, 1e-2, "k")


def test_integer_tensors_get_the_contents_the_trace_recorded():
    # A gather's indices as `advisor record` keeps them (element i at the data pointer + i): timed with
    # zeros instead, every program read one row (RESULTS 34c: index_select 14x faster than with its own).
    index = TensorArg("index", (3, 2), "int64", (1, 3), values=(5, 0, 7, 1, 2, 9))  # transposed: strides (1, 3)
    launch = _launch(TensorArg("inp", (10, 4), "float32", (4, 1)), index, TensorArg("count", (4,), "int32", (1,)))
    pristine = {}
    t = launch_run.make_tensors(launch, device="cpu", storage=pristine)
    assert pristine["index"].tolist() == [5, 0, 7, 1, 2, 9]
    assert t["index"].tolist() == [[5, 1], [0, 2], [7, 9]]
    assert t["count"].tolist() == [0, 0, 0, 0]  # nothing recorded: zeros, in bounds of anything
    assert t["inp"].abs().sum() > 0


def test_the_warm_up_keeps_the_gpu_busy_for_its_time_in_doubling_batches():
    # a fake GPU: each launch costs 0.1 ms of (simulated) wall time once synchronised
    from advisor.measure.timing import warm_until

    now, queued, syncs = [0.0], [0], []

    def launch():
        queued[0] += 1

    def sync():
        now[0] += queued[0] * 1e-4
        syncs.append(queued[0])
        queued[0] = 0

    calls = warm_until(launch, sync, lambda: now[0], 0.05)
    assert now[0] >= 0.05 and calls == sum(syncs) == 2 ** len(syncs) - 1  # 1, 2, 4, ... launches per batch
    assert now[0] < 2 * 0.05 + 1e-9  # never more than about twice the time asked for


def test_a_threshold_mask_that_flips_a_few_elements_in_another_summation_order_is_no_error():
    # A top-p mask over 512 x 152,064 logits: another BLOCK_V sums the nucleus in another order and moves its edge
    # by an element in a row or two (RESULTS 56: set 8's mask, every other config called wrong on its real indices).
    gen = torch.Generator().manual_seed(3)
    ref = {"out": torch.randn(400_000, generator=gen)}
    ref["out"][torch.randperm(400_000, generator=gen)[:40_000]] = -math.inf
    noise = launch_run.run_noise(ref, {"out": ref["out"].clone()})
    edge = ref["out"].clone()
    edge[ref["out"].isfinite().nonzero()[:2, 0]] = -math.inf  # two kept elements dropped, one dropped kept
    edge[ref["out"].isneginf().nonzero()[:1, 0]] = 0.5
    launch_run.check_outputs({"out": edge}, ref, noise, 1e-2, "k")
    # a config that masks a whole row differently (2,000 elements) is wrong
    row = ref["out"].clone()
    row[:2000] = -math.inf
    with pytest.raises(MeasurementError, match="relative error inf"):
        launch_run.check_outputs({"out": row}, ref, noise, 1e-2, "k")
    # and the values kept in both are still held to the tolerance
    with pytest.raises(MeasurementError, match="out differs"):
        launch_run.check_outputs({"out": edge * 1.1}, ref, noise, 1e-2, "k")


@pytest.mark.gpu
def test_a_config_that_writes_past_its_tensors_does_not_fail_the_configs_timed_after_it():
    # RESULTS 61: one config whose grid ran past a decode step's state wrote over the GPU allocations beside it, the
    # reference outputs among them, and every config timed after it was "wrong" by a relative error of 1.
    import triton
    import triton.language as tl

    @triton.jit
    def double_rows(x_ptr, y_ptr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs) * 2.0)  # no mask: a grid past the rows writes past y

    n = 4096
    launch = Launch(__file__, "double_rows", (n // 256,), tensors=(TensorArg.contiguous("x_ptr", (n,), "float32"),
                                                                   TensorArg.contiguous("y_ptr", (n,), "float32")),
                    config=Config({"BLOCK": 256}, 4, 2))
    past = Config({"BLOCK": 256}, 4, 3)  # the same program on a grid 16 times too long

    def launch_of(config: Config) -> Launch:
        grid = (16 * n // 256,) if config == past else (n // config["BLOCK"],)
        return Launch(launch.source, launch.kernel, grid, launch.tensors, {}, {}, config)

    measure = launch_run.launch_measurer(double_rows, launch, launch_of, "double_rows")
    with contextlib.suppress(MeasurementError):
        measure(past)  # its first n outputs are right: it may pass the check, and its timing writes past y again
    for config in (Config({"BLOCK": 128}, 4, 2), Config({"BLOCK": 256}, 8, 2)):
        assert measure(config) > 0
