"""The L1 data-pipe wavefronts of tile loads and stores (`ceilings.tile_lines`): lines per warp request from each
lane's address under the layout, against counts known by construction and the H200's measured ones (RESULTS 62:
Nsight Compute counted one wavefront per 128-byte line a request touches), and how the ceiling uses them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ceilings import hardware
from ceilings.compile import compile_launch
from ceilings.demand import generic_demand
from ceilings.launch import Config, Launch, TensorArg
from ceilings.roofline import roofline
from ceilings.tile_lines import Blocked, access_lines, request_lines

KERNELS = str(Path(__file__).resolve().parent / "fixtures" / "strided_tiles.py")
ONE_WARP_ROW = Blocked(spt=(1,), tpw=(32,), wpc=(1,), order=(0,))


def lanes(group: int, stride: int, n: int = 32) -> np.ndarray:
    k = np.arange(n)
    return (k // group) * stride + k % group


# (group, stride in elements, element bytes, lines per request): the H200's Nsight Compute counts (RESULTS 62)
MEASURED = [(32, 0, 4, 1), (1, 2, 4, 2), (1, 4, 4, 4), (1, 8, 4, 8), (1, 16, 4, 16), (1, 32, 4, 32), (1, 288, 4, 32),
            (2, 1024, 2, 16), (4, 288, 4, 8), (8, 288, 4, 4), (16, 288, 4, 2), (32, 0, 2, 1), (1, 4, 2, 2)]


@pytest.mark.parametrize("group,stride,elem,want", MEASURED)
def test_a_warp_request_costs_the_lines_its_lanes_touch_as_measured(group, stride, elem, want):
    offsets = np.arange(32) if group == 32 else lanes(group, stride)
    assert request_lines(offsets, np.ones(32, dtype=bool), elem, ONE_WARP_ROW) == want


def test_masked_lanes_touch_nothing_and_copies_count_once():
    offsets = lanes(1, 32)  # 32 lines
    on = np.arange(32) < 5
    assert request_lines(offsets, on, 4, ONE_WARP_ROW) == 5
    assert request_lines(offsets, np.zeros(32, dtype=bool), 4, ONE_WARP_ROW) == 0
    # 32 elements under a layout of 4 warps x 32 lanes: warps 1-3 hold copies of warp 0's elements
    four_warps = Blocked(spt=(1,), tpw=(32,), wpc=(4,), order=(0,))
    assert request_lines(offsets, np.ones(32, dtype=bool), 4, four_warps) == 32


def test_a_thread_s_contiguous_elements_are_one_vector_and_the_alignment_is_the_kindest():
    # 4 contiguous fp32 a thread, lanes contiguous: 512 bytes a request, 4 lines (measured: 4 wavefronts)
    vec = Blocked(spt=(4,), tpw=(32,), wpc=(1,), order=(0,))
    assert request_lines(np.arange(128), np.ones(128, dtype=bool), 4, vec) == 4
    # the same bytes misaligned by 8 bytes would touch 5 lines; the base's alignment is not known: 4 counted
    assert request_lines(np.arange(128) + 2, np.ones(128, dtype=bool), 4, vec) == 4
    # a warp's 128 contiguous bytes 8 bytes into a base known 16-byte aligned (`tt.divisibility = 16`) cross a line
    # wherever the base lies: 2; aligned to an element only, the base may sit 8 bytes before a line: 1
    row = np.arange(32) + 2
    assert request_lines(row, np.ones(32, dtype=bool), 4, ONE_WARP_ROW, alignment=16) == 2
    assert request_lines(row, np.ones(32, dtype=bool), 4, ONE_WARP_ROW) == 1
    # two rows a warp (lanes along the fastest dimension of a 2-D tile): row r at r * 4096 elements
    tile = Blocked(spt=(1, 1), tpw=(2, 16), wpc=(1, 1), order=(1, 0))
    offsets = np.arange(2)[:, None] * 4096 + np.arange(16)[None, :]
    assert request_lines(offsets, np.ones((2, 16), dtype=bool), 4, tile) == 2


def _gather(group, stride, n, ctas, dtype="bfloat16", block=128, warps=4):
    src = TensorArg.contiguous("x_ptr", ((n // group + 1) * stride + group,), dtype)
    dst = TensorArg.contiguous("y_ptr", (n,), dtype)
    return Launch(KERNELS, "grouped_gather", (ctas,), (src, dst), {"n": n},
                  {"GROUP": group, "STRIDE": stride}, Config({"BLOCK": block}, warps, 1))


def test_a_compiled_strided_gather_costs_its_lines_and_binds_the_ceiling_where_the_model_view_does_not():
    # pairs of bf16 2048 bytes apart (set 13's pixel shuffle read): 16 lines for each 32 elements
    n, ctas = 8 * 128, 8
    launch = _gather(2, 1024, n, ctas)
    compiled = compile_launch(launch)
    lines = access_lines(compiled.ttgir, dict(launch.scalars), launch.grid)
    loads, stores = sorted(lines.values(), reverse=True)
    assert loads == 128 / 32 * 16          # 4 requests a CTA, 16 lines each
    assert stores == 4                     # each warp's 32 contiguous bf16: 64 bytes, one line a warp
    demand = generic_demand(launch, compiled)
    per_cta = dict(demand.cta_classes[0][1])
    assert per_cta["l1"] == pytest.approx(per_cta["smem"] + 128 * (loads + stores))
    rates = hardware.rates_for("h200")
    ceiling = roofline(demand, rates)
    sms = rates.spec.sms
    want_us = demand.busiest_sm_work("l1", sms) / (rates.smem_tbs * 1e12 / sms) * 1e6
    assert ceiling.pipelines["smem"] == pytest.approx(want_us) and want_us > 0
    # the models' features keep shared-memory time alone, as they were fitted
    assert ceiling.model_view is not None
    assert ceiling.model_view.pipelines["smem"] == pytest.approx(
        demand.busiest_sm_work("smem", sms) / (rates.smem_tbs * 1e12 / sms) * 1e6)
    # 68 lines for the 512 bytes a CTA loads and stores (17 x 128 / 128): said, as the kernel's author needs to know
    assert any("touch 17.0x the 128-byte lines their bytes fill" in note for note in demand.notes)
    # a contiguous copy touches the lines its bytes fill: nothing said
    assert not any("128-byte lines" in note for note in generic_demand(_gather(1, 1, n, ctas)).notes)


def test_the_last_cta_s_masked_tail_counts_only_its_live_lanes():
    # 8 CTAs of 128 elements, n leaves the last one 40: two requests (32 and 8 elements), 16 + 4 lines
    launch = _gather(2, 1024, 7 * 128 + 40, 8)
    lines = access_lines(compile_launch(launch).ttgir, dict(launch.scalars), launch.grid)
    assert max(lines.values()) == pytest.approx((7 * 64 + 16 + 4) / 8)


def test_addresses_read_from_memory_count_nothing():
    x = TensorArg.contiguous("x_ptr", (4096,), "float32")
    idx = TensorArg.contiguous("idx_ptr", (1024,), "int32")
    y = TensorArg.contiguous("y_ptr", (1024,), "float32")
    launch = Launch(KERNELS, "gathered_rows", (8,), (x, idx, y), {}, {}, Config({"BLOCK": 128}, 4, 1))
    lines = access_lines(compile_launch(launch).ttgir, {}, launch.grid)
    # the index load and the store are contiguous (4 lines each); the gathered load is not counted
    assert sorted(lines.values()) == [4.0, 4.0]


def test_a_pointer_carried_around_a_loop_and_advanced_for_every_lane_keeps_its_pattern():
    x = TensorArg.contiguous("x_ptr", (64, 1024), "float32")
    y = TensorArg.contiguous("y_ptr", (1024,), "float32")
    launch = Launch(KERNELS, "column_walk", (8,), (x, y), {"rows": 64, "cols": 1024}, {},
                    Config({"BLOCK": 128}, 4, 1))
    lines = access_lines(compile_launch(launch).ttgir, dict(launch.scalars), launch.grid)
    assert sorted(lines.values()) == [4.0, 4.0]  # 512 contiguous bytes each: the row load and the store


def test_a_prediction_is_never_under_the_ceiling_shown_though_the_model_scales_its_own_view():
    from advisor.model.features import FEATURES, feature_row
    from advisor.model.predict import at_least_the_floor, model_for, predict_ceilings
    from ceilings.hardware import resolve_gpu
    from ceilings.roofline import model_ceiling_us

    # a gather of pairs 512 B apart over 8 M elements: the L1 stage binds, the models' view lies well under it
    launch = _gather(2, 256, 1 << 23, (1 << 23) // 1024, block=1024)
    gpu = resolve_gpu("h200")
    demand = generic_demand(launch)
    ceiling = roofline(demand, gpu.rates, launch.config.to_dict())
    assert ceiling.binding == "smem" and model_ceiling_us(ceiling) < 0.5 * ceiling.ceiling_us
    model = model_for(gpu)
    x = np.array([[feature_row(ceiling, demand, launch.config, gpu.spec)[f] for f in FEATURES]], dtype=np.float32)
    raw_mid = model.predict_us(np.array([model_ceiling_us(ceiling)]), x)[0][0]
    assert raw_mid < ceiling.ceiling_us  # the model alone would predict a time no launch can reach
    got = predict_ceilings([ceiling], gpu=gpu)[0]
    assert got["predicted_us"] == pytest.approx(ceiling.ceiling_us, rel=1e-3)
    assert min(got["predicted_interval_us"]) >= ceiling.ceiling_us * (1 - 1e-3)
    # times over the floor are kept as they are
    mid, lo = at_least_the_floor([ceiling], np.array([2 * ceiling.ceiling_us]), np.array([0.5 * ceiling.ceiling_us]))
    assert mid[0] == 2 * ceiling.ceiling_us and lo[0] == ceiling.ceiling_us
