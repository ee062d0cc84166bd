"""The ceiling: GPU specs and calibration, IR trip counts, SASS analysis, demand models, roofline, CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from ceilings import hardware
from ceilings.errors import AdvisorError
from ceilings.launch import Config, Launch
from ceilings.roofline import Demand, occupancy, roofline
from ceilings.sass import build_cfg, count_instructions, early_exit_counts, parse_sass
from ceilings.ttir_eval import function_arguments, loop_trip_counts
from kernels.moe_bench import MoEGemmSpec, describe_launch
from kernels.moe_demand import moe_gemm_demand, padded_blocks

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SASS = (FIXTURES / "moe_mma_sync_sm90.sass").read_text()
TTGIR = (FIXTURES / "moe_mma_sync_sm90.ttgir").read_text()
LAUNCH = Launch.from_dict(json.loads((FIXTURES / "moe_mma_sync_launch.json").read_text()))


def cfg(bm, bn, bk, g=1, w=4, s=3):
    return Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": g}, w, s)


# --- hardware ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["NVIDIA H100 80GB HBM3", "NVIDIA_H100_80GB_HBM3", "h100", "H100", " h100-sxm "])
def test_spec_lookup_accepts_torch_file_and_short_names(name):
    assert hardware.get_spec(name).name == "NVIDIA H100 80GB HBM3"


def test_unknown_gpu_lists_the_known_ones():
    with pytest.raises(AdvisorError, match="unknown GPU 'TPU v5'.*NVIDIA H200"):
        hardware.get_spec("TPU v5")


def test_specs_are_complete_where_sources_give_numbers():
    required = ("L4", "L40S", "A10G", "A100", "H100", "H800", "H20", "H200", "4090", "B200", "PCIe")
    names = " ".join(hardware.known_names())
    assert all(r in names for r in required)
    for spec in hardware.SPECS:
        assert spec.sms > 0 and spec.boost_clock_ghz > 0 and spec.dram_tbs > 0
        assert spec.tensor_flops["bf16"] > 0 and spec.fp32_lanes > 0 and spec.smem_per_block <= spec.smem_per_sm
    h100, h200 = hardware.get_spec("h100"), hardware.get_spec("h200")
    assert h100.tensor_flops == h200.tensor_flops and h200.dram_tbs > h100.dram_tbs
    # 4096 bf16 FLOP per SM per clock x 132 SMs x 1.98 GHz
    assert h100.peak_tensor_tflops("bf16") == pytest.approx(4096 * 132 * 1.98e9 / 1e12)
    assert "l2_bytes" in hardware.get_spec("b200").unknown


def test_shipped_calibrations_load_and_replace_spec_rates():
    for gpu in ("NVIDIA H100 80GB HBM3", "NVIDIA H200"):
        cal, path = hardware.load_calibration(gpu, [hardware.SHIPPED_CALIBRATIONS])
        assert cal is not None and path.endswith(hardware.calibration_file_name(gpu))
        rates = hardware.rates_for(gpu, cal, path)
        assert rates.tensor_tflops["bf16"] == cal.values["tensor_bf16_tflops"]
        assert rates.dram_tbs == cal.values["dram_read_tbs"] and rates.source["tensor"] == path
        assert rates.tensor_tflops["bf16"] < hardware.get_spec(gpu).peak_tensor_tflops("bf16")
    spec_only = hardware.rates_for("h100", use_calibration=False)
    assert spec_only.source["tensor"] == "spec" and spec_only.dram_tbs == 3.35


@pytest.mark.parametrize("text, match", [
    ("{not json", "not a calibration file"),
    ('{"gpu": "NVIDIA H100 80GB HBM3"}', "not a calibration file"),
    ('{"gpu": "x", "values": {"warp_speed": 9}}', "unknown calibration keys"),
])
def test_bad_calibration_file_is_a_user_error(text, match):
    with pytest.raises(AdvisorError, match=match):
        hardware.Calibration.from_json(text, "cal.json")


def test_calibration_round_trip(tmp_path):
    cal = hardware.Calibration("NVIDIA H200", {"dram_read_tbs": 4.4, "launch_us": 0.95}, {"date": "2026-11-22"})
    (tmp_path / hardware.calibration_file_name("NVIDIA H200")).write_text(cal.to_json())
    loaded, _ = hardware.load_calibration("h200", [tmp_path])
    assert loaded == cal


# --- trip counts from the IR -------------------------------------------------------------------
def test_trip_counts_from_the_fixture_ttgir():
    scalars = {k: v for k, v in LAUNCH.scalars if isinstance(v, int)}
    assert "K" in function_arguments(TTGIR)
    assert loop_trip_counts(TTGIR, scalars) == [32]  # cdiv(4096, 128)
    assert loop_trip_counts(TTGIR, {**scalars, "K": 4000}) == [32]
    assert loop_trip_counts(TTGIR, {**scalars, "K": 128}) == [1]
    assert loop_trip_counts(TTGIR, {k: v for k, v in scalars.items() if k != "K"}) == [None]


def test_trip_count_arithmetic_follows_c_semantics():
    ir = """tt.func public @k(%n: i32 loc("n"), %m: i32 loc("m")) attributes {noinline = false} {
    %c0 = arith.constant 0 : i32
    %c3 = arith.constant 3 : i32
    %c7 = arith.constant 7 : i32
    %q = arith.divsi %n, %c3 : i32
    %r = arith.remsi %n, %c3 : i32
    %big = arith.cmpi sgt, %q, %c7 : i32
    %ub = arith.select %big, %q, %c7 : i32
    %x:2 = scf.for %i = %c0 to %ub step %c3 iter_args(%a = %c0, %b = %c0) -> (i32, i32) : i32 {
      %y = scf.for %j = %r to %m step %c3 iter_args(%a2 = %c0) -> (i32) : i32 {
        scf.yield %a2 : i32
      }
      %z = scf.for %j = %c0 to %q step %c3 iter_args(%a3 = %c0) -> (i32) : i32 {
        scf.yield %a3 : i32
      }
    }
    tt.return
  }"""
    # n = -10: C division truncates toward zero (q = -3, r = -1); the select keeps 7.
    assert loop_trip_counts(ir, {"n": -10, "m": 5}) == [3, 2, 0]
    assert loop_trip_counts(ir, {"n": 30, "m": 5}) == [4, 2, 4]
    assert loop_trip_counts(ir, {"n": 30}) == [4, None, 4]


# --- SASS ----------------------------------------------------------------------------------------
def test_sass_parsing_and_classification_on_the_fixture():
    functions = parse_sass(SASS)
    assert "fused_moe_kernel" in functions
    ops = {ins.opcode: ins.pipe for ins in functions["fused_moe_kernel"].instructions}
    assert ops["HMMA"] == "tensor" and ops["LDGSTS"] == "lsu" and ops["IMAD"] == "fma"
    assert ops["MUFU"] == "xu" and ops["ISETP"] == "alu" and ops["EXIT"] == "cbu"
    hmma = next(i for i in functions["fused_moe_kernel"].instructions if i.opcode == "HMMA")
    assert hmma.mma_flops_per_warp() == 2 * 16 * 8 * 16


def test_sass_counts_match_the_exact_tensor_flops():
    counts = count_instructions(SASS, "fused_moe_kernel", [32])
    assert len(counts.loops) == 1 and counts.loops[0]["trips"] == 32
    # One CTA of 4 warps: a 16 x 64 tile over K = 4096.
    assert counts.tensor_flops * 4 == 2 * 16 * 64 * 4096
    once = count_instructions(SASS, "fused_moe_kernel", [None])
    assert once.per_pipe["tensor"] * 32 == pytest.approx(counts.per_pipe["tensor"])
    idle = early_exit_counts(SASS, "fused_moe_kernel")
    assert idle and idle["cbu"] == 1 and "tensor" not in idle


def test_cfg_finds_nested_loops_and_ignores_spin_waits_and_dead_code():
    listing = """
test_kernel:
.text.test_kernel:
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/               @P0 EXIT ;
.L_x_0:
        /*0020*/                   FFMA R1, R1, R2, R3 ;
.L_x_1:
        /*0030*/                   FFMA R1, R1, R2, R3 ;
        /*0040*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0050*/               @P1 BRA `(.L_x_1) ;
        /*0060*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P2, [UR4], R5 ;
        /*0070*/               @!P2 BRA `(.L_x_3) ;
.L_x_2:
        /*0080*/               @P3 BRA `(.L_x_0) ;
        /*0090*/                   EXIT ;
.L_x_3:
        /*00a0*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P2, [UR4], R5 ;
        /*00b0*/              @!P2 BRA `(.L_x_3) ;
        /*00c0*/                   BRA `(.L_x_2) ;
.L_x_4:
        /*00d0*/                   BRA `(.L_x_4);
"""
    fn = parse_sass(listing)["test_kernel"]
    cfg_ = build_cfg(fn)
    assert len([lp for lp in cfg_.loops if lp.parent is None]) == 1
    counts = count_instructions(listing, "test_kernel", [10, 5])
    # outer loop x10 around one FFMA, inner loop x5 x10 around another: 10 + 50; LSU: the loads and the
    # thread-index read
    assert counts.per_pipe["fma"] == 60 and counts.per_pipe["lsu"] == 50 + 1
    assert any("spin-wait" in n for n in counts.notes)


# --- demand and roofline -------------------------------------------------------------------------
def test_moe_semantic_model_against_hand_counts():
    spec = MoEGemmSpec(num_experts=4, top_k=2, k=256, n=128, m=8)
    counts = [5, 3, 0, 8]
    d = moe_gemm_demand(spec, cfg(16, 64, 128), arch=90, counts=counts)
    assert d.active_ctas == 3 * 2           # experts 0, 1, 3 fill one 16-row block each; N = 2 x 64
    assert d.ctas == (80 // 16) * 2         # grid for the worst routing: 16 + 4 x 15 rows -> 80
    assert d.tensor_flops_per_cta == 2 * 16 * 64 * 256 and d.tensor_kind == "mma_sync"
    assert d.dram_bytes == 2 * (3 * 128 * 256 + 8 * 256 + 16 * 128) + 4 * (16 + 5)
    assert d.smem_bytes_per_cta == 2 * 2 * (16 + 64) * 256
    wg = moe_gemm_demand(spec, cfg(64, 128, 64, w=8), arch=90, counts=counts)
    assert wg.tensor_kind == "wgmma" and wg.active_ctas == 3
    assert moe_gemm_demand(spec, cfg(64, 128, 64, w=8), arch=80, counts=counts).tensor_kind == "mma_sync"


def test_expected_padding_without_counts():
    spec = MoEGemmSpec(num_experts=8, top_k=2, k=64, n=64, m=4096)
    blocks, routed = padded_blocks(spec, 128)
    # 1024 rows per expert on average: 8 blocks each, a ninth about half the time
    assert 8 * 8 < blocks < 8 * 9 + 1 and routed == pytest.approx(8.0)
    one = MoEGemmSpec(num_experts=128, top_k=8, k=64, n=64, m=1)
    blocks, routed = padded_blocks(one, 16)
    assert blocks == pytest.approx(8.0) and routed == pytest.approx(8.0)


def test_roofline_takes_the_busiest_sm_and_adds_the_launch():
    rates = hardware.rates_for("h100", use_calibration=False)
    d = Demand(kernel="k", ctas=200, active_ctas=133, warps_per_cta=4, tensor_flops_per_cta=1e9,
               instructions_per_cta={"lsu": 1000}, dram_bytes=1e6, l2_bytes=1e15)
    c = roofline(d, rates)
    per_sm = 4096 * 1.98e9
    assert c.pipelines["tensor"] == pytest.approx(2 * 1e9 / per_sm * 1e6)  # 133 CTAs: 2 on the busiest SM
    assert c.binding == "tensor" and c.ceiling_us == pytest.approx(c.pipelines["tensor"] + rates.launch_us)
    assert c.pipelines["l2"] is None  # the spec sheet gives no L2 rate
    rates_l2 = hardware.rates_for("h100")
    c2 = roofline(d, rates_l2)
    assert c2.pipelines["l2"] > c2.pipelines["tensor"] and c2.binding != "l2"  # shown, never binding
    doc = c.to_json()
    assert set(doc["pipelines"]) == {"tensor", "fma", "alu", "xu", "lsu", "smem", "l2", "dram", "launch"}
    assert {"gpu", "kernel", "config", "ceiling_us", "binding", "ctas", "waves", "ctas_per_sm"} <= set(doc)


def test_occupancy_limits():
    h100 = hardware.get_spec("h100")
    assert occupancy(h100, 8, None, None) == 8                  # 64 warps / 8
    assert occupancy(h100, 8, 191, None) == 1                   # 192 regs x 256 threads of 64K
    assert occupancy(h100, 4, 64, 98304) == 2                   # (96 + 1) KB twice in 228 KB
    assert occupancy(h100, 4, 64, 300 * 1024) == 0


# --- compile without a GPU, and the generic path ------------------------------------------------
def test_compile_for_sm90_without_a_gpu_and_its_cache(tmp_path, monkeypatch):
    from ceilings.compile import _fake_dtype, compile_launch
    from ceilings.demand import generic_demand

    monkeypatch.setenv("TRITON_ADVISOR_HOME", str(tmp_path))
    spec = MoEGemmSpec(8, 2, 4096, 14336, 256)
    for config, b_tma in ((cfg(16, 64, 128, w=4, s=4), False), (cfg(128, 256, 64, w=8, s=3), True)):
        launch = describe_launch(MoEGemmSpec(8, 2, 4096, 14336, 256, b_tma=b_tma), config)
        compiled = compile_launch(launch)
        assert compiled.arch == 90 and compiled.shared_bytes > 0 and compiled.registers > 0
        assert ("HGMMA" if b_tma else "HMMA") in compiled.sass
        assert (tmp_path / "compile" / f"{compiled.key}.json").exists()
        with monkeypatch.context() as patch:  # a second compile of the same launch is a cache hit
            patch.setattr("triton.compile", lambda *a, **k: pytest.fail("compiled again"))
            patch.setattr("ceilings.compile._compile_in_child", lambda *a, **k: pytest.fail("compiled again"))
            assert compile_launch(launch) == compiled
        # The launch carries no routing values, so the exit on num_tokens_post_padded is unknown: the
        # floor assumes every CTA may exit, the expected work that they all run the K loop.
        floor = generic_demand(launch, compiled)
        generic, exact = floor.expected, moe_gemm_demand(spec, config)
        assert floor.active_ctas == 0 and floor.tensor_flops_per_cta == 0.0
        assert generic.tensor_flops_per_cta == pytest.approx(exact.tensor_flops_per_cta, rel=0.02)
        assert generic.tensor_kind == exact.tensor_kind
        assert generic.dram_bytes == pytest.approx(exact.dram_bytes, rel=0.02)
    assert _fake_dtype("bfloat16") is _fake_dtype("bfloat16")
    with pytest.raises(AdvisorError, match="sm_75"):
        compile_launch(launch, arch=75)


def test_kernel_file_errors(tmp_path):
    from ceilings.compile import load_kernel

    with pytest.raises(AdvisorError, match="does not exist"):
        load_kernel(tmp_path / "missing.py")
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n    pass\n")
    with pytest.raises(AdvisorError, match=r"bad.py:1: syntax error"):
        load_kernel(bad)
    plain = tmp_path / "plain.py"
    plain.write_text("x = 1\n")
    with pytest.raises(AdvisorError, match="defines no Triton kernel"):
        load_kernel(plain)
    two = tmp_path / "two.py"
    two.write_text("import triton\nimport triton.language as tl\n\n@triton.jit\ndef a(x):\n    pass\n\n"
                   "@triton.autotune(configs=[triton.Config({})], key=[])\n@triton.jit\ndef b(x):\n    pass\n")
    assert load_kernel(two, "b").__name__ == "b"
    with pytest.raises(AdvisorError, match="no Triton kernel 'c'; it defines a, b"):
        load_kernel(two, "c")
    with pytest.raises(AdvisorError, match="several Triton kernels"):
        load_kernel(two)


# --- the command ---------------------------------------------------------------------------------
def advisor(*args):
    return subprocess.run([sys.executable, "-m", "advisor.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def test_ceiling_cli_json_for_a_preset():
    r = advisor("ceiling", "kernels/fused_moe.py", "--preset", "mixtral-8x7b", "--tp", "2", "--tokens", "4096",
                "--gpu", "h100", "--config", "M128 N256 K64 G16 w8 s3", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["binding"] == "tensor" and doc["config"]["BLOCK_SIZE_N"] == 256
    flops = 2 * 4096 * 2 * 4096 * 14336
    assert doc["ceiling_us"] > flops / (hardware.get_spec("h100").peak_tensor_tflops() * 1e12) * 1e6
    assert doc["rates_source"]["tensor"].endswith("NVIDIA_H100_80GB_HBM3.json")
    assert math.isclose(doc["ceiling_us"], max(v for k, v in doc["pipelines"].items() if k not in ("launch", "l2")
                                               and v is not None) + doc["pipelines"]["launch"], rel_tol=1e-3)


def test_ceiling_cli_text_and_generic_launch_file():
    r = advisor("ceiling", str(FIXTURES / "moe_mma_sync_launch.json"), "--gpu", "h200")
    assert r.returncode == 0, r.stderr
    assert "binding" in r.stdout and "fused_moe_kernel on NVIDIA H200" in r.stdout and "generic" in r.stdout


@pytest.mark.parametrize("args, named", [
    (("ceiling", "kernels/fused_moe.py", "--preset", "mixtral-8x7b", "--tokens", "16", "--gpu", "v100x"), "v100x"),
    (("ceiling", "kernels/fused_moe.py", "--tokens", "16"), "--preset"),
    (("ceiling", "kernels/fused_moe.py", "--preset", "mixtral-8x7b", "--tokens", "16", "--config", "M16"), "M16"),
    (("ceiling", "README.md"), "README.md"),
    (("ceiling", "missing.json"), "missing.json"),
])
def test_ceiling_cli_user_errors(args, named):
    r = advisor(*args)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "Traceback" not in r.stderr


def test_generic_path_on_a_kernel_this_project_did_not_write():
    from ceilings.demand import generic_demand

    launch = Launch.from_dict(json.loads((FIXTURES / "matmul_launch.json").read_text()))
    launch = launch.with_source(str(FIXTURES / "matmul_kernel.py"))
    demand = generic_demand(launch)
    m, n, k = 2048, 4096, 1024
    assert demand.tensor_flops_per_cta * demand.ctas == pytest.approx(2 * m * n * k, rel=0.02)
    assert demand.tensor_kind == "wgmma" and demand.tensor_dtype == "fp16"
    c = roofline(demand, hardware.rates_for("h100"))
    assert c.binding == "tensor" and c.ctas == (m // 128) * (n // 128)


def test_ceiling_cli_on_a_kernel_file_with_a_launch():
    r = advisor("ceiling", str(FIXTURES / "matmul_kernel.py"), "--launch", str(FIXTURES / "matmul_launch.json"),
                "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kernel"] == "matmul_kernel"


# Each case runs the CLI twice in a child (7 s on 2 busy cores): the syntax error in the default run, all with -m slow.
@pytest.mark.parametrize("source, kernel, named", [
    pytest.param("matmul_kernel.py", "matmul", "no Triton kernel 'matmul'; it defines matmul_kernel",
                 marks=pytest.mark.slow),
    pytest.param("no_kernels.py", None, "defines no Triton kernel", marks=pytest.mark.slow),
    ("broken.py", None, "broken.py:2: syntax error"),
])
def test_ceiling_cli_kernel_file_errors(tmp_path, source, kernel, named):
    (tmp_path / "no_kernels.py").write_text("def f():\n    return 1\n")
    (tmp_path / "broken.py").write_text("import triton\ndef f(:\n")
    path = FIXTURES / source if source == "matmul_kernel.py" else tmp_path / source
    args = ["ceiling", str(path), "--launch", str(FIXTURES / "matmul_launch.json")]
    r = advisor(*args, *(["--kernel", kernel] if kernel else []))
    assert r.returncode == 2 and named in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = advisor("ceiling", str(path), *(["--kernel", kernel] if kernel else []))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_ceiling_cli_for_the_shipped_gemm():
    r = advisor("ceiling", "kernels/gemm.py", "--shape", "8192,8192,8192", "--format", "json", "--no-calibration")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    h100 = hardware.get_spec("h100")
    assert doc["binding"] == "tensor" and doc["demand_source"].startswith("semantic")
    # 64 x 64 tiles of 128 x 128 on 132 SMs: the busiest SM runs ceil(4096 / 132) = 32 of them.
    tile = 2 * 128 * 128 * 8192
    per_sm = h100.tensor_flops["bf16"] * h100.boost_clock_ghz * 1e9
    assert doc["pipelines"]["tensor"] == pytest.approx(32 * tile / per_sm * 1e6, rel=1e-3)
    assert doc["ctas"] == 4096 and doc["waves"] == pytest.approx(4096 / (132 * doc["ctas_per_sm"]), abs=1e-3)
    r = advisor("ceiling", "kernels/gemm.py", "--shape", "8192,8192")
    assert r.returncode == 2 and "M,N,K" in r.stderr


@pytest.mark.slow  # a CLI child like the shipped GEMM's test, which stays in the default run
def test_ceiling_cli_for_the_shipped_softmax():
    r = advisor("ceiling", "kernels/softmax.py", "--shape", "16384,8192", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["kernel"] == "softmax_kernel" and doc["binding"] == "dram" and doc["pipelines"]["tensor"] == 0.0
    bytes_moved = 2 * 16384 * 8192 * 2
    assert doc["pipelines"]["dram"] == pytest.approx(bytes_moved / (3.11e12) * 1e6, rel=0.01)
    r = advisor("ceiling", "kernels/softmax.py")
    assert r.returncode == 2 and "ROWS,COLS" in r.stderr


@pytest.mark.slow
def test_ceiling_and_diagnose_of_any_kernel_take_config_as_its_label_prints_it():
    # `--config` was ignored for a launch file or --call (the current config's ceiling shown) and a label with
    # NAME=value parts was refused: now the ceiling is the config's, its grid from the launch rule.
    base = json.loads(advisor("ceiling", str(FIXTURES / "matmul_launch.json"), "--format", "json").stdout)
    r = advisor("ceiling", str(FIXTURES / "matmul_launch.json"), "--config", "M64 N64 K32 G8 w4 s3", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["config"] == {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4, "num_stages": 3}
    assert base["ctas"] == (2048 // 128) * (4096 // 128) and doc["ctas"] == (2048 // 64) * (4096 // 64)
    # The same config as JSON, with the kernel's own names, and by NAME=value parts.
    for given in ('{"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4}',
                  "BLOCK_M=64 BLOCK_N=64 BLOCK_K=32 GROUP_M=8 w4 s3"):
        other = json.loads(advisor("ceiling", str(FIXTURES / "matmul_launch.json"), "--config", given,
                                   "--format", "json").stdout)
        assert other["config"] == doc["config"] and other["ceiling_us"] == doc["ceiling_us"]
    r = advisor("ceiling", str(FIXTURES / "matmul_launch.json"), "--config", "M64 TILE=3 w4 s3")
    assert r.returncode == 2 and r.stdout == ""
    assert "has no parameter TILE" in r.stderr and "BLOCK_M=128" in r.stderr and len(r.stderr.splitlines()) == 1


def test_generic_labels_parse_into_the_kernels_names():
    from advisor.advice.ceiling import fit_config, parse_config

    current = Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "EVEN_K": True, "SCALE": 0.5}, 4, 3)
    label = parse_config("M128 N32 EVEN_K=False SCALE=0.25 w8 s2")
    assert fit_config(label, current, "k") == Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 32, "EVEN_K": False,
                                                      "SCALE": 0.25}, 8, 2)
    assert fit_config(parse_config(current.label()), current, "k") == current  # the printed label reads back
    assert fit_config(parse_config("N16 w4 s3"), current, "k")["BLOCK_SIZE_M"] == 64  # unnamed: kept
