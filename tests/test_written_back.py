"""In-place writes reach DRAM within the launch beyond what the L2 can hold dirty (`ceilings.roofline.
written_back_bytes`, RESULTS 31), on kernels whose bytes are known by construction
(tests/fixtures/written_back_kernels.py, compiled for sm_90 without a GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ceilings.demand import generic_demand
from ceilings.hardware import resolve_gpu
from ceilings.launch import Config, Launch, TensorArg
from ceilings.roofline import roofline, written_back_bytes

KERNELS = str(Path(__file__).resolve().parent / "fixtures" / "written_back_kernels.py")
H100 = resolve_gpu("h100")
L2 = H100.spec.l2_bytes  # 50 MiB
BLOCK = 1024


def launch(kernel: str, names: tuple[str, ...], elements: int) -> Launch:
    tensors = tuple(TensorArg.contiguous(name, (elements,), "float32") for name in names)
    return Launch(KERNELS, kernel, (elements // BLOCK,), tensors, {}, {"BLOCK": BLOCK}, Config({}, 4, 1))


def dram_us(nbytes: float) -> float:
    return nbytes / (H100.rates.dram_tbs * 1e12) * 1e6


def test_written_back_bytes_are_the_rewritten_bytes_past_the_l2():
    assert written_back_bytes(200.0, 50) == 150.0
    assert written_back_bytes(40.0, 50) == 0.0
    assert written_back_bytes(200.0, None) == 0.0  # no known L2: nothing added


@pytest.mark.parametrize("mib", [128, 256])
def test_a_tensor_scaled_in_place_is_read_once_and_written_back_past_the_l2(mib):
    elements = mib * (1 << 20) // 4
    demand = generic_demand(launch("scale_in_place", ("x_ptr",), elements))
    footprint = elements * 4
    assert demand.dram_bytes == footprint  # the compulsory bytes count x once
    assert demand.rewritten_bytes == footprint  # every byte of x written where it was read
    ceiling = roofline(demand, H100.rates)
    # Read once from DRAM (the working set is past the L2), and of the dirty lines at most the L2's worth can
    # still be in it at the end: the rest is written to DRAM within the launch.
    assert ceiling.pipelines["dram"] == pytest.approx(dram_us(footprint + footprint - L2), rel=1e-9)
    assert any("written in place" in n for n in ceiling.notes)


def test_an_output_tensor_adds_nothing_beyond_its_compulsory_bytes():
    elements = 128 * (1 << 20) // 4
    demand = generic_demand(launch("scale_copy", ("x_ptr", "y_ptr"), elements))
    assert demand.rewritten_bytes == 0.0
    assert demand.dram_bytes == 2 * elements * 4  # x read, y written: as before this rule
    assert roofline(demand, H100.rates).pipelines["dram"] == pytest.approx(dram_us(2 * elements * 4), rel=1e-9)


def test_in_place_bytes_the_l2_can_hold_dirty_add_nothing():
    # x (40 MiB) rewritten, t (40 MiB) only read: the working set (80 MiB) is past the L2, so both are read
    # from DRAM, but x's dirty lines all fit in the 50 MiB L2 at the end: no write-back is certain.
    elements = 40 * (1 << 20) // 4
    demand = generic_demand(launch("scale_in_place_with_table", ("x_ptr", "t_ptr"), elements))
    assert demand.rewritten_bytes == elements * 4
    assert demand.dram_bytes == 2 * elements * 4
    assert roofline(demand, H100.rates).pipelines["dram"] == pytest.approx(dram_us(2 * elements * 4), rel=1e-9)


def test_a_working_set_that_fits_in_the_l2_stays_free_of_dram_time():
    elements = 16 * (1 << 20) // 4  # 16 MiB in place: warm L2, and nothing need leave it
    ceiling = roofline(generic_demand(launch("scale_in_place", ("x_ptr",), elements)), H100.rates)
    assert ceiling.pipelines["dram"] == 0.0


def test_scattered_and_atomic_writes_are_not_taken_as_distinct_rewritten_bytes():
    elements = 128 * (1 << 20) // 4
    index = TensorArg.contiguous("idx_ptr", (elements,), "int32")
    scatter = launch("scale_in_place", ("x_ptr",), elements)
    scatter = Launch(KERNELS, "scatter_in_place", scatter.grid, (*scatter.tensors, index), {}, {"BLOCK": BLOCK},
                     scatter.config)
    assert generic_demand(scatter).rewritten_bytes == 0.0  # repeated indices may write one element many times
    # Every CTA adds into the same 4 KiB: the bytes issued (128 MiB) are not bytes written back.
    assert generic_demand(launch("accumulate_in_place", ("x_ptr",), elements)).rewritten_bytes == 0.0
