"""The operand-staging cause of `advisor diagnose` on dense GEMMs whose shared-memory traffic is known by
construction: 132 tiles (one CTA per SM, no tail) of 64 x 256 on two warpgroups (they split N, so each
wgmma is m64n128k16 and re-reads the A slice), of 128 x 256 (two warpgroups along M: exactly the 32 FLOP
per byte shared memory feeds the tensor pipe at its peak) and of 16 x 64 on four warps (warp-level MMAs,
each warp reading all 16 rows of A). Shared memory runs at 128 B/clock x the boost clock x 1.37 / 1.67
(ANCHORS section 6); the layouts assumed are checked against what Triton emits. The DRAM-write cause on a
GEMM whose output (134 MB) dwarfs what it reads (priced by the read/write probe), and on one whose writes
hide under tensor work."""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
from pathlib import Path

import pytest

from advisor.advice import moe
from advisor.advice.ceiling import parse_config
from advisor.advice.diagnose import diagnose
from advisor.advice.diagnose_causes import (
    SUSTAINED_CLOCK_FRACTION,
    mma_sync_layout,
    staged_bytes_per_k_step,
    wgmma_layout,
)
from ceilings.compile import compile_launch
from tests.test_diagnose import GPU, SMS, check_sums, gemm

SMEM_RATE = GPU.rates.smem_tbs * 1e12 / SMS * SUSTAINED_CLOCK_FRACTION[90]  # one SM, bytes/s

LONG = 10_000.0


@pytest.mark.parametrize(("tile", "warps", "layout"), [
    ((64, 256), 8, (1, 128)),    # one 64-row slice: the second warpgroup takes half of N
    ((128, 256), 8, (2, 256)),   # one warpgroup per 64 rows
    ((256, 128), 8, (2, 128)),   # two warpgroups along M, each two slices
    ((128, 128), 4, (1, 128)),   # one warpgroup, two slices
    ((64, 512), 4, (1, 256)),    # an instruction is at most 256 wide
])
def test_warpgroups_go_along_m_first(tile, warps, layout):
    assert wgmma_layout(*tile, warps) == layout


def test_staged_bytes_count_writes_and_every_instructions_reads():
    # 64 x 256 x 64 on 8 warps: tiles written (64 + 256) x 64 x 2 B; two m64n128k16 per k16 step, each
    # reading 64 + 128 rows of 16 columns: (64 + 128) x 64 x 2 B per instruction column over the K step.
    assert staged_bytes_per_k_step(64, 256, 64, 8, 2) == (64 + 256) * 64 * 2 + 2 * (64 + 128) * 64 * 2
    # 128 x 256 on 8 warps: exactly 2 x 128 x 256 x 64 FLOP at 32 FLOP per byte.
    assert staged_bytes_per_k_step(128, 256, 64, 8, 2) == 2 * 128 * 256 * 64 / 32


def staging(d):
    return next((c for c in d.causes if c.name == "operand staging"), None)


def test_a_64_row_tile_on_two_warpgroups_waits_on_shared_memory():
    subject = gemm("768,2816,4096", bm=64, bn=256, bk=64, warps=8)  # 12 x 11 = 132 tiles
    (ceiling,) = subject.ceilings([subject.current])
    assert ceiling.active_ctas == SMS and ceiling.ctas_per_sm == 1 and ceiling.binding == "tensor"
    rate = GPU.rates.tensor_tflops["bf16"] * 1e12 / SMS        # one SM's calibrated tensor rate
    trips = 4096 // 64
    staged_us = trips * ((64 + 256) * 64 * 2 + 2 * (64 + 128) * 64 * 2) / SMEM_RATE * 1e6
    tensor_us = 2 * 64 * 256 * 4096 / rate * 1e6
    assert staged_us > tensor_us
    d = diagnose(subject, time_us=LONG)
    cause = staging(d)
    assert cause.estimate_us == pytest.approx(staged_us - tensor_us, rel=1e-9)
    assert "m64n128k16" in cause.why and "23.3 FLOP per byte" in cause.why
    assert any("ANCHORS section 6" in n for n in d.notes)
    check_sums(d)


def test_a_128_by_256_tile_on_two_warpgroups_loses_nothing_to_staging():
    d = diagnose(gemm("1536,2816,4096", bm=128, bn=256, bk=64, warps=8), time_us=LONG)
    assert staging(d).estimate_us == 0.0 and "32.0 FLOP per byte" in staging(d).why
    assert not any("ANCHORS section 6" in n for n in d.notes)
    check_sums(d)


def test_warp_level_mmas_read_a_once_per_warp_along_n():
    subject = gemm("2112,704,4096", bm=16, bn=64, bk=64, warps=4, stages=3)  # 132 x 11 tiles
    (ceiling,) = subject.ceilings([subject.current])
    assert ceiling.demand.tensor_kind == "mma_sync" and mma_sync_layout(16, 64, 4) == (1, 4)
    busiest = math.ceil(ceiling.active_ctas / SMS)
    per_step = (16 + 64) * 64 * 2 + (16 * 4 + 64 * 1) * 64 * 2
    staged_us = busiest * (4096 // 64) * per_step / SMEM_RATE * 1e6
    d = diagnose(subject, time_us=LONG)
    cause = staging(d)
    assert 0 < cause.estimate_us < staged_us and "1 x 4 warps" in cause.why
    # What it adds is the staging past the busiest SM's binding work: here the demand's own shared
    # memory (one write and one read of each tile) at the boost clock.
    assert ceiling.binding == "smem"
    binding_us = ceiling.demand.busiest_sm_work("smem", SMS) / (GPU.rates.smem_tbs * 1e12 / SMS) * 1e6
    assert cause.estimate_us == pytest.approx(staged_us - binding_us, rel=1e-9)
    check_sums(d)


@pytest.mark.parametrize("label", ["M64 N256 K64 G1 w8 s3", "M256 N128 K64 G1 w8 s3", "M64 N32 K64 G1 w8 s3",
                                   "M32 N64 K128 G1 w8 s3", "M16 N256 K64 G1 w8 s3"])
def test_the_layouts_are_what_triton_emits(label):
    family = moe.family()
    config = parse_config(label, family)
    spec, _ = moe.gemm_spec("mixtral-8x7b", 1024, 2, 1)
    ttgir = compile_launch(family.describe_launch(spec, config, 90), 90).ttgir
    (mma,) = set(re.findall(r"#ttg\.nvidia_mma<\{[^}]*\}>", ttgir))
    warps = [int(v) for v in re.search(r"warpsPerCTA = \[(\d+), (\d+)\]", mma).groups()]
    bm, bn, nw = config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"], config.num_warps
    if "versionMajor = 3" in mma:
        inst_n = int(re.search(r"instrShape = \[16, (\d+), 16\]", mma)[1])
        assert wgmma_layout(bm, bn, nw) == (warps[0] // 4, inst_n)
    else:
        assert mma_sync_layout(bm, bn, nw) == tuple(warps)


def test_staging_is_capped_by_the_gap():
    subject = gemm("768,2816,4096", bm=64, bn=256, bk=64, warps=8)
    d = diagnose(subject, time_us=LONG)
    short = d.ideal_us + 0.5 * sum(c.estimate_us for c in d.causes if c.name != "unexplained")
    d = diagnose(subject, time_us=short)
    check_sums(d)
    assert d.unexplained_us == pytest.approx(0.0, abs=1e-9) and staging(d).us < staging(d).estimate_us


def test_a_written_byte_costs_what_the_read_write_probe_leaves_past_the_reads():
    from advisor.advice.diagnose_causes import dram_writes

    # A stream of equal reads and writes at 3 TB/s, reads alone at 4: a written byte costs 2 / 3 - 1 / 4 ps (2.4 TB/s),
    # so 1 GB written costs 1e9 x (2 / 3 - 2 / 4) / 1e12 s = 166.7 us more than at the read rate.
    us, why = dram_writes(1e9, 3e12, 4e12, dram_us=300.0, busiest_main_us=0.0)
    assert us == pytest.approx(1e9 * (2 / 3 - 2 / 4) / 1e12 * 1e6, rel=1e-12)
    assert ("1000.0 MB of output written at 2.40 TB/s (the calibration's read/write probe 3.00 TB/s over reads at "
            "4.00)") in why
    # Only what passes the binding work counts: DRAM 300 + 166.7 us against 400 us of tensor work.
    assert dram_writes(1e9, 3e12, 4e12, dram_us=300.0, busiest_main_us=400.0)[0] == pytest.approx(66.6667, rel=1e-5)
    # A stream that runs at the read rate: writes cost nothing beyond reads.
    assert dram_writes(1e9, 4e12, 4e12, dram_us=300.0, busiest_main_us=0.0)[0] == 0.0


def test_output_written_to_dram_costs_what_the_read_write_probe_says():
    # 8192 x 8192 outputs of a K = 64 product: 134 MB written against 2 MB read, DRAM binds.
    from advisor.advice.diagnose_causes import read_write_rates

    subject = gemm("8192,8192,64", bm=128, bn=256, bk=64, warps=8)
    (ceiling,) = subject.ceilings([subject.current])
    assert ceiling.binding == "dram"
    rw, read, borrowed = read_write_rates(GPU.calibration)
    assert borrowed is None  # the shipped H100 calibration has its own probe
    assert rw < read  # the shipped H100 calibration: the mixed stream runs under the read rate
    written = 8192 * 8192 * 2
    d = diagnose(subject, time_us=LONG)
    cause = next(c for c in d.causes if c.name == "DRAM writes")
    assert cause.estimate_us == pytest.approx(written * (2 / rw - 2 / read) * 1e6, rel=1e-9)
    assert cause.estimate_us > 0
    assert f"134.2 MB of output written at {1 / (2 / rw - 1 / read) / 1e12:.2f} TB/s" in cause.why
    check_sums(d)


def test_a_calibration_without_the_read_write_probe_borrows_the_shipped_one_and_says_so(tmp_path, monkeypatch):
    # A user's H100 calibration written before `dram_rw_tbs` existed: its reads at 3.0 TB/s, no read/write probe.
    from advisor.advice.diagnose_causes import read_write_rates
    from ceilings.hardware import SHIPPED_CALIBRATIONS, resolve_gpu

    shipped = SHIPPED_CALIBRATIONS / "NVIDIA_H100_80GB_HBM3.json"
    old = json.loads(shipped.read_text())
    old["values"] = {k: v for k, v in old["values"].items() if k != "dram_rw_tbs"} | {"dram_read_tbs": 3.0}
    (tmp_path / "calibration").mkdir()
    (tmp_path / "calibration" / shipped.name).write_text(json.dumps(old))
    monkeypatch.setenv("TRITON_ADVISOR_HOME", str(tmp_path))
    gpu = resolve_gpu("h100")
    assert gpu.calibration == str(tmp_path / "calibration" / shipped.name)
    rw, read, borrowed = read_write_rates(gpu.calibration)
    values = json.loads(shipped.read_text())["values"]
    assert (rw, read, borrowed) == (values["dram_rw_tbs"] * 1e12, values["dram_read_tbs"] * 1e12, str(shipped))
    d = diagnose(gemm("8192,8192,64", gpu=gpu), time_us=LONG)
    cause = next(c for c in d.causes if c.name == "DRAM writes")
    assert cause.estimate_us == pytest.approx(8192 * 8192 * 2 * (2 / rw - 2 / read) * 1e6, rel=1e-9)
    assert any(n.startswith(f"DRAM writes priced by the read/write and read probes of {shipped}") for n in d.notes)


def test_without_a_read_write_probe_anywhere_the_cause_is_not_estimated_and_a_note_says_so():
    # The H200's calibrations (shipped) have no read/write probe yet: no cause, no crash, a note.
    from ceilings.hardware import resolve_gpu

    gpu = resolve_gpu("h200")
    d = diagnose(gemm("8192,8192,64", gpu=gpu), time_us=LONG)
    assert all(c.name != "DRAM writes" for c in d.causes)
    assert any(n.startswith("no calibrated DRAM read/write probe for NVIDIA H200") for n in d.notes), d.notes
    check_sums(d)


def test_writes_hidden_under_tensor_work_cost_nothing():
    d = diagnose(gemm("1536,2816,4096", bm=128, bn=256, bk=64, warps=8), time_us=LONG)  # tensor-bound
    assert next(c for c in d.causes if c.name == "DRAM writes").estimate_us == 0.0


# --- atomics: the adds a launch sends to L2 at the calibration's measured atomic-add rate --------------------------
@pytest.mark.parametrize("opcode, mods, lane_bytes", [
    ("REDG", "E.ADD.F32x4.FTZ.RN.STRONG.GPU", 16), ("REDG", "E.ADD.F32.FTZ.RN.STRONG.GPU", 4),
    ("RED", "E.ADD.F16x2.RN.STRONG.GPU", 4), ("ATOMG", "E.ADD.64.STRONG.GPU", 8), ("ATOMS", "ADD", 0),
    ("STG", "E.128", 0)])
def test_atomic_bytes_count_a_vector_reduction_whole(opcode, mods, lane_bytes):
    from advisor.advice.diagnose_causes import atomic_bytes

    assert atomic_bytes(opcode, mods) == 32 * lane_bytes


def test_atomics_take_the_rate_of_their_side_of_the_l2():
    from advisor.advice.diagnose_causes import atomics

    us, why = atomics(3.2e8, 40e6, 50 << 20, (3.2e12, 2.8e12))
    assert us == pytest.approx(100.0) and "within the 52 MB L2" in why
    assert atomics(2.8e8, 60e6, 50 << 20, (3.2e12, 2.8e12))[0] == pytest.approx(100.0)


def test_diagnose_names_the_atomic_adds_of_a_kernel_that_sums_rows_into_one():
    """65,536 rows of 256 float32 added into one row by atomics: 67 MB at the H100 calibration's 3.2 TB/s."""
    from advisor.cli import main

    fixture = Path(__file__).resolve().parent / "fixtures" / "routed_kernels.py"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["diagnose", str(fixture), "--call", "add_rows(randn(65536, 256))", "--measured", "100",
                     "--gpu", "h100", "--format", "json"]) == 0
    doc = json.loads(out.getvalue())
    doc = doc[0] if isinstance(doc, list) else doc
    (cause,) = [c for c in doc["causes"] if c["name"] == "atomics"]
    rate = json.loads((Path(__file__).resolve().parents[1] / "ceilings" / "calibration" /
                       "NVIDIA_H100_80GB_HBM3.json").read_text())["values"]["atomic_add_l2_tbs"]
    assert cause["estimate_us"] == pytest.approx(65536 * 256 * 4 / (rate * 1e12) * 1e6, rel=1e-3)


def test_a_generic_launch_writes_its_stored_tensors_type_not_its_operands():
    """An fp8 GEMM storing bf16: 8192 x 8192 outputs of 2 bytes (it had counted the tiles at the operands' 1)."""
    from advisor.cli import main

    fixture = Path(__file__).resolve().parent / "fixtures" / "routed_kernels.py"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["diagnose", str(fixture), "--call", "fp8_gemm(randn(8192, 1024, f8), randn(1024, 8192, f8))",
                     "--measured", "200", "--gpu", "h100", "--format", "json"]) == 0
    doc = json.loads(out.getvalue())
    doc = doc[0] if isinstance(doc, list) else doc
    (cause,) = [c for c in doc["causes"] if c["name"] == "DRAM writes"]
    assert f"{8192 * 8192 * 2 / 1e6:.1f} MB of output written" in cause["why"]


def test_scaling_each_steps_product_in_a_warpgroup_mma_loop_is_named():
    """16 K steps of a 128 x 128 tile on 4 warps, each step's product scaled (one FFMA per accumulator element:
    128 a thread) before it is added: 2,048 FFMAs a warp, on the busiest SM (32 of 4,096 CTAs) at the calibrated
    FMA rate. The same GEMM accumulating in the MMA has no such work and no such cause."""
    from advisor.cli import main

    fixture = Path(__file__).resolve().parent / "fixtures" / "routed_kernels.py"

    def causes(call):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["diagnose", str(fixture), "--call", call, "--measured", "200", "--gpu", "h100",
                         "--format", "json"]) == 0
        doc = json.loads(out.getvalue())
        return {c["name"]: c for c in (doc[0] if isinstance(doc, list) else doc)["causes"]}

    scaled = causes("scaled_fp8_gemm(randn(8192, 1024, f8), randn(1024, 8192, f8), rand(16, 8192))")
    cause = scaled["MMA-result scaling"]
    assert cause["why"].startswith("2048 floating-point FMA-pipe instructions a warp")
    fma_per_sm = GPU.rates.fma_tflops * 1e12 / 2 / 32 / SMS
    assert cause["estimate_us"] == pytest.approx(32 * 4 * 2048 / fma_per_sm * 1e6, rel=1e-4)  # printed to 3 places
    assert "MMA-result scaling" not in causes("fp8_gemm(randn(8192, 1024, f8), randn(1024, 8192, f8))")


def test_a_measured_load_latency_replaces_the_documented_one_and_the_note_names_its_file(tmp_path, monkeypatch):
    # An H100 PCIe has no calibration: the documented latencies. The H100's shipped calibration carries the pointer
    # chase's; a user's calibration with latencies twice those makes the K loop's fill (latency + one trip, per
    # exposed CTA) one shipped latency longer per exposed CTA.
    from advisor.advice.diagnose import LOAD_LATENCY_CYCLES
    from advisor.advice.diagnose_causes import calibrated_values, load_latency_cycles
    from ceilings.hardware import SHIPPED_CALIBRATIONS, resolve_gpu

    pcie = diagnose(gemm("4096,4096,8192", gpu=resolve_gpu("NVIDIA H100 PCIe")), time_us=LONG)
    assert any("documented for the architecture" in n for n in pcie.notes), pcie.notes
    shipped = SHIPPED_CALIBRATIONS / "NVIDIA_H100_80GB_HBM3.json"
    clock_hz = GPU.rates.clock_ghz * 1e9
    measured, source = load_latency_cycles(str(shipped), LOAD_LATENCY_CYCLES[90], clock_hz)
    values = json.loads(shipped.read_text())["values"]
    assert source == str(shipped) and measured == pytest.approx(
        {"l2": values["l2_latency_ns"] * clock_hz * 1e-9, "dram": values["dram_latency_ns"] * clock_hz * 1e-9})
    first = diagnose(gemm("4096,4096,8192", gpu=resolve_gpu("h100")), time_us=LONG)
    assert any(n.endswith(f"measured ({shipped})") for n in first.notes), first.notes

    (tmp_path / "calibration").mkdir()
    mine = tmp_path / "calibration" / shipped.name
    cal = json.loads(shipped.read_text())
    cal["values"] |= {k: 2 * values[k] for k in ("l2_latency_ns", "dram_latency_ns")}
    mine.write_text(json.dumps(cal))
    monkeypatch.setenv("TRITON_ADVISOR_HOME", str(tmp_path))
    calibrated_values.cache_clear()  # a calibration file is read once a process
    second = diagnose(gemm("4096,4096,8192", gpu=resolve_gpu("h100")), time_us=LONG)
    assert any(n.endswith(f"measured ({mine})") for n in second.notes), second.notes
    fills = [next(c for c in d.causes if c.name == "fill/drain") for d in (first, second)]
    latency_us, exposed = map(float, re.search(r"\(([\d.]+) us latency.*exposed (\d+)x", fills[0].why).groups())
    assert fills[1].estimate_us - fills[0].estimate_us == pytest.approx(exposed * latency_us, rel=0.05)
    check_sums(second)
