"""The compulsory DRAM bytes split into what loads read and what plain stores write (`Demand.read_bytes`,
`Demand.written_bytes`, `advisor ceiling --detail`'s `dram_read` / `dram_written`, to set beside a profiler's
dram__bytes_read / dram__bytes_write), on kernels whose bytes are known by construction
(tests/fixtures/written_back_kernels.py, compiled for sm_90 without a GPU). The floor charges both at the read
rate (RESULTS 63: the corpus's read/write mixes ran at 0.93-0.99 of it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ceilings.demand import generic_demand
from ceilings.hardware import resolve_gpu
from ceilings.launch import Config, Launch, TensorArg
from ceilings.roofline import roofline

KERNELS = str(Path(__file__).resolve().parent / "fixtures" / "written_back_kernels.py")
H100 = resolve_gpu("h100")
BLOCK = 1024
MIB = 1 << 20


def launch(kernel: str, names: tuple[str, ...], elements: int, extra: tuple = ()) -> Launch:
    tensors = tuple(TensorArg.contiguous(name, (elements,), "float32") for name in names) + extra
    return Launch(KERNELS, kernel, (elements // BLOCK,), tensors, {}, {"BLOCK": BLOCK}, Config({}, 4, 1))


@pytest.mark.parametrize("mib", [64, 256])
def test_a_copy_reads_its_input_and_writes_its_output(mib):
    nbytes = mib * MIB
    demand = generic_demand(launch("scale_copy", ("x_ptr", "y_ptr"), nbytes // 4))
    assert (demand.read_bytes, demand.written_bytes, demand.dram_bytes) == (nbytes, nbytes, 2 * nbytes)
    detail = roofline(demand, H100.rates).to_json(detail=True)["detail"]["floor"]["bytes"]
    assert (detail["dram_read"], detail["dram_written"], detail["dram"]) == (nbytes, nbytes, 2 * nbytes)
    # Both at the read rate: the floor is the same as before the split.
    assert roofline(demand, H100.rates).pipelines["dram"] == pytest.approx(
        2 * nbytes / (H100.rates.dram_tbs * 1e12) * 1e6, rel=1e-9)


def test_an_in_place_update_reads_and_writes_the_same_bytes():
    nbytes = 256 * MIB
    demand = generic_demand(launch("scale_in_place", ("x_ptr",), nbytes // 4))
    assert (demand.read_bytes, demand.written_bytes, demand.dram_bytes) == (nbytes, nbytes, nbytes)


def test_a_table_only_read_adds_to_the_reads():
    nbytes = 40 * MIB
    demand = generic_demand(launch("scale_in_place_with_table", ("x_ptr", "t_ptr"), nbytes // 4))
    assert (demand.read_bytes, demand.written_bytes) == (2 * nbytes, nbytes)


def test_scattered_stores_and_atomics_are_not_counted_as_distinct_written_bytes():
    nbytes = 128 * MIB
    index = (TensorArg.contiguous("idx_ptr", (nbytes // 4,), "int32"),)
    scatter = generic_demand(launch("scatter_in_place", ("x_ptr",), nbytes // 4, index))
    assert scatter.written_bytes == 0.0  # repeated indices may write one element many times
    assert scatter.read_bytes == scatter.dram_bytes  # the index and x, both read
    accumulate = generic_demand(launch("accumulate_in_place", ("x_ptr",), nbytes // 4))
    assert accumulate.written_bytes == 0.0 and accumulate.read_bytes > 0  # atomics read-modify-write
