"""Regression tests of issue 12's "crashes and wrong exits", "wrong answers" and "inconsistent checks":
every bad input exits 2 with one line naming it, a config that cannot run is a finding (exit 1, SARIF
rule config-cannot-run, a github error annotation) in `suggest` and has no ceiling in `ceiling`/`predict`
(exit 2), and every config passes the one validator (ceilings/validate.py) before a model sees it."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from advisor.cli import main
from ceilings.hardware import get_spec
from ceilings.launch import Config
from ceilings.validate import config_problem, structural_problem

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
H100_NAME = "E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json"
H100_FILE = ROOT / "kernels/configs" / H100_NAME
FAST = ["--no-confirm", "--top-k", "1"]


def run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "Traceback" not in out.out
    return code, out.out, out.err


def user_error(args, capsys, *needles):
    """Exit 2, nothing on stdout, one line on stderr naming each needle."""
    code, out, err = run(args, capsys)
    assert code == 2, err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("advisor: error:"), err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def entry(bm=64, bn=64, bk=64, gm=1, w=4, s=3):
    return {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": gm, "num_warps": w,
            "num_stages": s}


def engine_file(tmp_path, entries: dict, name: str = H100_NAME) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({str(k): v for k, v in entries.items()}, indent=4) + "\n")
    return path


# ------------------------------------------------------------------------------------------ the validator

@pytest.mark.parametrize("params, warps, stages, needle", [
    ({"BLOCK_SIZE_M": 7, "BLOCK_SIZE_N": 64}, 4, 3, "BLOCK_SIZE_M=7 is not a power of two"),
    ({"BLOCK_SIZE_M": 2**40, "BLOCK_SIZE_N": 64}, 4, 3, "over Triton's"),
    ({"BLOCK_M": 2048, "BLOCK_N": 1024}, 4, 3, "2048 x 1024"),
    ({"BLOCK_M": 0}, 4, 3, "must be a positive integer"),
    ({"BLOCK_M": 64.0}, 4, 3, "must be a positive integer"),
    ({"BLOCK_M": "64"}, 4, 3, "must be a positive integer"),
    ({"GROUP_SIZE_M": 0}, 4, 3, "GROUP_SIZE_M=0"),
    ({"BLOCK_M": 64}, 64, 3, "num_warps=64"),
])
def test_structural_problems(params, warps, stages, needle):
    why = structural_problem(Config(params, warps, stages))
    assert why and needle in why


def test_a_bool_under_a_block_like_name_is_a_flag_not_a_size():
    # kernels/fused_moe_fp8_gemv.py's BLOCK_SCALED=False stopped `advisor ceiling --call` on it.
    assert structural_problem(Config({"BLOCK_ROWS": 16, "BLOCK_K": 512, "BLOCK_SCALED": False}, 4, 1)) is None
    assert "BLOCK_K=48 is not a power of two" in structural_problem(
        Config({"BLOCK_K": 48, "BLOCK_SCALED": True}, 4, 1))


def test_valid_configs_pass_and_the_precheck_is_asked():
    h100, l4 = get_spec("h100"), get_spec("l4")
    config = Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 7}, 8, 4)
    assert config_problem(config, h100) is None
    assert config_problem(config, l4, lambda c: "too big for an L4") == "too big for an L4"
    # A precheck that reads a parameter the config lacks: the config is not one of the kernel's.
    assert "does not set" in config_problem(Config({"BLOCK_M": 64}), h100, lambda c: c["BLOCK_SIZE_K"])


# ------------------------------------------------------------------------ suggest: configs that cannot run

@pytest.mark.parametrize("gpu", ["l4", "l40s", "rtx4090", "a10g"])
def test_h100_file_on_a_smaller_gpu_is_a_finding_not_a_crash(gpu, capsys):
    code, out, _ = run(["suggest", H100_FILE, "--gpu", gpu, "--tokens", "1024", "--format", "json", *FAST], capsys)
    doc = json.loads(out)  # strict JSON: no Infinity for the time of a config that cannot run
    (launch,) = doc["launches"]
    assert code == 1 and launch["cannot_run"] and launch["gpu"] == get_spec(gpu).name
    assert launch["current"]["predicted_us"] is None and launch["speedup"] is None
    assert launch["best"]["predicted_us"] > 0 and launch["best"]["label"] != launch["current"]["label"]


def test_cannot_run_is_sarif_rule_ta002_and_a_github_error(capsys):
    code, out, _ = run(["suggest", H100_FILE, "--gpu", "l4", "--tokens", "64,1024", "--format", "sarif", *FAST],
                       capsys)
    log = json.loads(out)
    rules = {r["ruleId"] for r in log["runs"][0]["results"]}
    assert code == 1 and "TA002" in rules
    for r in log["runs"][0]["results"]:
        if r["ruleId"] == "TA002":
            assert r["level"] == "error" and "cannot run on NVIDIA L4" in r["message"]["text"]
            assert r["properties"]["reason"]
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(log, json.loads((FIXTURES / "sarif-2.1.0-subset.schema.json").read_text()))
    code, out, _ = run(["suggest", H100_FILE, "--gpu", "l4", "--tokens", "1024", "--format", "github", *FAST], capsys)
    assert code == 1 and out.startswith("::error file=") and "title=triton-advisor config-cannot-run::" in out


@pytest.mark.parametrize("bad, needle", [
    (entry(bm=7), "BLOCK_SIZE_M=7 is not a power of two"),
    (entry(bm=2**40), "over Triton's"),
    (entry(bm=128, bn=256, bk=256, w=8, s=5), "shared memory"),  # tiles overflow shared memory on an H100
    (entry(w=64), "num_warps=64"),
])
def test_entry_that_cannot_run_is_a_finding_with_its_reason(bad, needle, tmp_path, capsys):
    path = engine_file(tmp_path, {64: bad})
    code, out, _ = run(["suggest", path, "--format", "json", *FAST], capsys)
    (launch,) = json.loads(out)["launches"]
    assert code == 1 and needle in launch["cannot_run"] and needle in launch["why"]
    assert launch["current"]["predicted_us"] is None  # never a (better) predicted time for it
    code, out, _ = run(["suggest", path, *FAST], capsys)
    assert code == 1 and "can't run" in out and needle in " ".join(out.split())


def test_block_size_m_7_never_passes_with_exit_0(tmp_path, capsys):
    path = engine_file(tmp_path, {64: entry(bm=7)})
    code, _, _ = run(["suggest", path, "--min-speedup", "100", "--format", "json", *FAST], capsys)
    assert code == 1  # a config that cannot run is a finding whatever --min-speedup says


def test_apply_replaces_an_entry_that_cannot_run(tmp_path, capsys):
    path = engine_file(tmp_path, {64: entry(bm=7)})
    before = path.read_bytes()
    code, out, _ = run(["apply", path, "--dry-run", *FAST], capsys)
    assert code == 0 and '-        "BLOCK_SIZE_M": 7,' in out and path.read_bytes() == before


# ------------------------------------------------------------------- ceiling / predict: no ceiling, exit 2

@pytest.mark.parametrize("command", ["ceiling", "predict"])
@pytest.mark.parametrize("gpu, config, needle", [
    ("l4", "M256 N256 K256 G1 w4 s5", "cannot run on NVIDIA L4"),
    ("h100", "M7 N32 K64 G1 w4 s3", "BLOCK_SIZE_M=7 is not a power of two"),
    ("h100", json.dumps(entry(bm=2**40)), "over Triton's"),
])
def test_ceiling_of_a_config_that_cannot_run_is_refused(command, gpu, config, needle, capsys):
    line = user_error([command, "kernels/fused_moe.py", "--preset", "mixtral-8x7b", "--tokens", "64", "--gpu", gpu,
                       "--config", config], capsys, needle, "no ceiling")
    assert "waves" not in line


def test_shape_kernel_ceiling_validates_its_config(capsys):
    user_error(["ceiling", "kernels/gemm.py", "--shape", "64,64,64", "--config",
                json.dumps({"BLOCK_M": 7, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 1})], capsys, "BLOCK_M=7")


def test_launch_file_ceiling_validates_its_config(tmp_path, capsys):
    launch = json.loads((FIXTURES / "matmul_launch.json").read_text())
    launch["source"] = str(FIXTURES / "matmul_kernel.py")
    launch["config"]["BLOCK_M"] = 96
    path = tmp_path / "launch.json"
    path.write_text(json.dumps(launch))
    user_error(["ceiling", path], capsys, "BLOCK_M=96 is not a power of two", str(path))


# ---------------------------------------------------------------------------------------- unreadable input

@pytest.mark.parametrize("command", ["ceiling", "predict"])
def test_binary_json_is_a_user_error(command, tmp_path, capsys):
    path = tmp_path / "launch.json"
    path.write_bytes(bytes(range(256)) * 4)
    user_error([command, path], capsys, str(path))


@pytest.mark.parametrize("content, needle", [
    (bytes(range(256)) * 8, "cannot be read as a CSV"),
    (b"a,b\n1,2\n", "no column status"),
    (b"\x1f\x8b\x08\x00garbage", "cannot be read as a CSV"),
])
def test_train_on_a_non_sweep_file_is_a_user_error(content, needle, tmp_path, capsys):
    path = tmp_path / ("sweep.csv.gz" if content.startswith(b"\x1f\x8b") else "sweep.csv")
    path.write_bytes(content)
    user_error(["train", "--data", path, "--out", tmp_path / "model"], capsys, str(path), needle)


def test_train_names_the_row_of_a_malformed_sweep(tmp_path, capsys):
    path = tmp_path / "sweep.csv"
    path.write_text("status,gpu,kernel,shape,M,us\nok,NVIDIA H100 80GB HBM3,gemm_kernel,N64_K64,16,not-a-number\n")
    user_error(["train", "--data", path, "--out", tmp_path / "model"], capsys, f"{path}: row 1")


# ---------------------------------------------------------------------------------- one check, one message

def _v2_trace(tmp_path) -> Path:
    launch = json.loads((FIXTURES / "matmul_launch.json").read_text())
    launch["source"] = str(FIXTURES / "matmul_kernel.py")
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"format": "triton-advisor-trace", "version": 2, "gpu": None, "launches": [launch]}))
    return path


def test_version_2_trace_is_refused_alike_by_ceiling_predict_and_suggest(tmp_path, capsys):
    path = _v2_trace(tmp_path)
    lines = {user_error([command, path, *([] if command != "suggest" else FAST)], capsys, "trace version 2")
             for command in ("ceiling", "predict", "suggest")}
    assert len(lines) == 1


def test_configs_gpu_typo_is_a_user_error(tmp_path, capsys):
    user_error(["configs", "--preset", "mixtral-8x7b", "--gpu", "h10"], capsys, "'h10'")
    # A GPU the advisor has no numbers for, but with a tuned file, is still looked up.
    name = "E=8,N=14336,device_name=NVIDIA_A800.json"
    (tmp_path / name).write_text(json.dumps({"1": entry()}))
    code, out, _ = run(["configs", "--preset", "mixtral-8x7b", "--gpu", "NVIDIA A800", "--config-dir", tmp_path,
                        "--tokens", "1", "--format", "json"], capsys)
    assert code == 0 and json.loads(out)["configs"][0]["tuned"]


@pytest.mark.parametrize("command", ["suggest", "apply"])
def test_missing_config_dir_is_a_user_error(command, capsys):
    user_error([command, "kernels/fused_moe.py", "--preset", "mixtral-8x7b", "--config-dir", "/nope"], capsys,
               "--config-dir /nope")


@pytest.mark.parametrize("command", ["suggest", "apply"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0.5"])
def test_min_speedup_must_be_a_finite_factor(command, value, capsys):
    user_error([command, "kernels/fused_moe.py", "--preset", "mixtral-8x7b", f"--min-speedup={value}"], capsys,
               f"--min-speedup {float(value)}")


@pytest.mark.slow
def test_tokens_select_engine_file_entries(capsys):
    code, out, _ = run(["suggest", H100_FILE, "--tokens", "64,1024", "--format", "json", *FAST], capsys)
    assert code in (0, 1)
    assert [d["launch"] for d in json.loads(out)["launches"]] == ["mixtral-8x7b TP2 M=64", "mixtral-8x7b TP2 M=1024"]
    user_error(["suggest", H100_FILE, "--tokens", "50"], capsys, "no entry for --tokens 50", "1,16,64")


def test_tokens_with_a_trace_is_refused(capsys):
    user_error(["suggest", FIXTURES / "matmul_launch.json", "--tokens", "64"], capsys, "--tokens")
    user_error(["suggest", "kernels/gemm.py", "--shape", "64,64,64", "--tokens", "64"], capsys, "--tokens")


def test_ceiling_tokens_0_names_tokens_0(capsys):
    user_error(["ceiling", "kernels/fused_moe.py", "--preset", "mixtral-8x7b", "--tokens", "0"], capsys,
               "--tokens 0")
    line = user_error(["ceiling", "kernels/fused_moe.py", "--preset", "mixtral-8x7b"], capsys, "give --tokens")
    assert "--preset and" not in line


def test_file_key_0_is_reported_as_the_entry(tmp_path, capsys):
    path = engine_file(tmp_path, {0: entry(), 64: entry()})
    line = user_error(["suggest", path, *FAST], capsys, 'entry "0"', path.name)
    assert "--tokens" not in line


@pytest.mark.parametrize("command", ["suggest", "ceiling"])
def test_json_errors_read_once(command, tmp_path, capsys):
    path = (tmp_path / H100_NAME) if command == "suggest" else tmp_path / "launch.json"
    path.write_text('{"64": {"BLOCK_SIZE_M": "unterminated')
    line = user_error([command, path], capsys, "Unterminated string starting at")
    assert "at at" not in line


@pytest.mark.parametrize("args", [
    ["suggest"], ["suggest", "kernels/gemm.py", "--top-k", "x"], ["nope"], ["ceiling", "x", "--gemm", "3"],
])
def test_argument_errors_are_one_line(args, capsys):
    user_error(args, capsys)


def test_help_and_version_return_0(capsys):
    assert main(["--version"]) == 0
    assert main(["suggest", "--help"]) == 0
    assert "Exit 0" in capsys.readouterr().out


def test_measure_without_a_gpu_is_a_user_error(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    user_error(["suggest", "kernels/fused_moe.py", "--preset", "mixtral-8x7b", "--measure", "2"], capsys,
               "--measure 2")


def test_kernel_file_that_exits_at_import_is_a_user_error(tmp_path, capsys):
    path = tmp_path / "exits.py"
    path.write_text("import sys\nsys.exit(3)\n")
    user_error(["suggest", path, "--trace", FIXTURES / "matmul_launch.json"], capsys, str(path), "SystemExit")


# ------------------------------------------------------------------------------------ the text at 80 columns

def test_text_report_fits_80_columns_and_explains_itself(capsys):
    from advisor.advice import report
    from advisor.advice.moe import engine_file_subjects
    from advisor.advice.suggest import advise
    from ceilings.hardware import resolve_gpu

    advices = advise(engine_file_subjects(H100_FILE, gpu=resolve_gpu("l4"), tokens=[1, 1024]), top_k=1,
                     confirm=False)
    report.render_text(advices, 1.05, width=80)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    header = next(line for line in lines if "launch" in line)
    for name in ("launch", "current", "suggested", "gain", "bound"):
        assert f" {name} " in f" {header} "  # whole words, never cut to `sugges…`
    assert "…" not in out
    assert "NVIDIA L4" in lines[0] and "predicted" in lines[0] and "mixtral-8x7b TP2" in lines[0]
    text = " ".join(out.split())
    assert "headroom:" in text and "w = num_warps" in text and "s = num_stages" in text
    assert "G = GROUP_SIZE_M" in text and "can't run" in text
    # Numbers are never wrapped: each time sits whole on one line.
    for a in advices:
        if not a.cannot_run:
            assert f"{a.time_of(a.current):.1f}" in out
    assert math.isinf(advices[1].current.predicted_us)


def test_pass_counts_note_is_gone():
    from advisor.advice.moe import layer
    from ceilings.hardware import resolve_gpu

    subject = layer("mixtral-8x7b", 64, 2, resolve_gpu("h100"))
    (c,) = subject.ceilings([subject.current])
    assert not any("pass counts" in n for n in c.notes)


def test_shipped_file_copy_unchanged_by_suggest(tmp_path, capsys):
    path = tmp_path / H100_NAME
    shutil.copy(H100_FILE, path)
    before = path.read_bytes()
    run(["suggest", path, "--gpu", "l4", "--tokens", "1", *FAST], capsys)
    assert path.read_bytes() == before


# ------------------------------------------------------------------------- what the fuzz suite found

def test_non_ascii_digit_key_is_a_user_error(tmp_path, capsys):
    path = tmp_path / H100_NAME
    path.write_text(json.dumps({"²": entry()}))
    user_error(["suggest", path], capsys, path.name, "'²'")


def test_list_valued_scalar_in_a_launch_is_a_user_error(tmp_path, capsys):
    launch = json.loads((FIXTURES / "matmul_launch.json").read_text())
    launch["source"] = str(FIXTURES / "matmul_kernel.py")
    launch["scalars"]["M"] = [2048]
    path = tmp_path / "launch.json"
    path.write_text(json.dumps(launch))
    user_error(["ceiling", path], capsys, "M=[2048]")


@pytest.mark.parametrize("source", ["0", "not_there.py"])
def test_trace_of_a_missing_kernel_file_is_a_user_error(source, tmp_path, capsys):
    launch = json.loads((FIXTURES / "matmul_launch.json").read_text())
    launch["source"] = source
    path = tmp_path / "launch.json"
    path.write_text(json.dumps(launch))
    user_error(["suggest", path, *FAST], capsys, source)


def test_utf16_kernel_file_is_a_user_error(tmp_path, capsys):
    path = tmp_path / "k16.py"
    path.write_bytes((FIXTURES / "matmul_kernel.py").read_text().encode("utf-16"))
    user_error(["suggest", path, "--trace", FIXTURES / "matmul_launch.json", *FAST], capsys, str(path))


# ------------------------------------------------------------------------------- XGBoost is optional

@pytest.mark.parametrize("args", [["train", "--data", "benchmarks/data/none.csv"],
                                  ["calibrate", "--tune", "--sweep", "benchmarks/data/none.csv"]])
def test_training_without_xgboost_says_how_to_install_it(args, monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "xgboost", None)  # `import xgboost` raises ImportError
    user_error(args, capsys, "needs XGBoost", "pip install 'triton-advisor[train]'")


def test_predicting_needs_no_xgboost(monkeypatch, capsys):
    import sys

    from advisor.model import predict

    monkeypatch.setitem(sys.modules, "xgboost", None)
    monkeypatch.setattr(predict, "_LOADED", {})
    code, out, _ = run(["predict", "kernels/fused_moe.py", "--preset", "mixtral-8x7b", "--tokens", "64", "--format",
                        "json"], capsys)
    assert code == 0 and json.loads(out)["predicted_us"] > 0


def test_a_compile_error_names_the_file_line_statement_and_message(tmp_path):
    """Triton's CompilationError counts lines from the kernel's `def` and puts its message after the
    source it quotes; the one line a user gets names the file's line, the statement and the message."""
    from ceilings.compile import compile_launch
    from ceilings.errors import AdvisorError
    from ceilings.launch import Launch, TensorArg

    path = tmp_path / "bad.py"
    path.write_text("import triton\nimport triton.language as tl\nfrom triton.language.extra import libdevice\n\n\n"
                    "@triton.jit\ndef act_kernel(x_ptr, n, BLOCK: tl.constexpr):\n"
                    "    offs = tl.arange(0, BLOCK)\n"
                    "    x = tl.load(x_ptr + offs, mask=offs < n)\n"
                    "    y = libdevice.tanh(x)\n"
                    "    tl.store(x_ptr + offs, y, mask=offs < n)\n")
    launch = Launch(str(path), "act_kernel", (1,), (TensorArg.contiguous("x_ptr", (64,), "bfloat16"),), {"n": 64},
                    {}, Config({"BLOCK": 64}, 4, 3))
    with pytest.raises(AdvisorError) as info:
        compile_launch(launch, 90)
    message = str(info.value)
    assert "\n" not in message and "bad.py:10" in message and "`y = libdevice.tanh(x)`" in message
    assert "bfloat16" in message  # libdevice's own complaint: no tanh for this type
