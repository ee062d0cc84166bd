"""The `advisor` command line, run as a user runs it: in a subprocess, checking output and exit codes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernels.moe_configs import SHIPPED_DIR, config_file_name, read_config_file
from kernels.moe_presets import PRESETS, TP_SIZES, get_preset

ROOT = Path(__file__).resolve().parents[1]


def advisor(*args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, "COLUMNS": "120", **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "advisor.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)


def test_help_lists_the_subcommands():
    result = advisor("--help")
    assert result.returncode == 0
    for command in ("presets", "configs", "ceiling", "calibrate", "tune"):
        assert command in result.stdout


def test_presets_json_lists_every_preset_and_tp():
    result = advisor("presets", "--format", "json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert {(r["preset"], r["tp"]) for r in rows} == {(p, tp) for p in PRESETS for tp in TP_SIZES}
    mixtral = next(r for r in rows if r["preset"] == "mixtral-8x7b" and r["tp"] == 2)
    assert mixtral["gemm1_k_n"] == [4096, 14336] and mixtral["experts"] == 8 and mixtral["top_k"] == 2


def test_configs_reads_the_shipped_tuned_file():
    result = advisor("configs", "--preset", "Qwen/Qwen3-30B-A3B", "--tp", "4", "--gpu", "h100",
                     "--tokens", "1,48,4096", "--format", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["config_file"] == "E=128,N=192,device_name=NVIDIA_H100_80GB_HBM3.json"
    table = read_config_file(SHIPPED_DIR / doc["config_file"])
    for row in doc["configs"]:
        assert row["tuned"] and row["source"].endswith(doc["config_file"])
        assert row["config"] == table.lookup(row["tokens"]).to_engine_entry()


def test_configs_falls_back_to_the_default_rule_and_says_so():
    result = advisor("configs", "--preset", "deepseek-v2-lite", "--tp", "8", "--gpu", "NVIDIA L4")
    assert result.returncode == 0, result.stderr
    assert "│ default rule" in result.stdout and "│ tuned file" not in result.stdout
    assert "E=64,N=176,device_name=NVIDIA_L4.json" in result.stdout


def test_configs_prefers_a_config_dir(tmp_path):
    name = config_file_name(8, 7168, "NVIDIA H100 80GB HBM3")
    (tmp_path / name).write_text(json.dumps({"8": {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64,
                                                   "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 2}}))
    result = advisor("configs", "--preset", "mixtral-8x7b", "--tp", "2", "--tokens", "1", "--config-dir",
                     str(tmp_path), "--format", "json")
    assert result.returncode == 0, result.stderr
    row = json.loads(result.stdout)["configs"][0]
    assert row["source"] == str(tmp_path / name)
    assert row["config"]["BLOCK_SIZE_M"] == 32 and row["config"]["num_stages"] == 2


@pytest.mark.parametrize("args, named", [
    (("configs", "--preset", "llama-moe"), "llama-moe"),
    (("configs", "--preset", "mixtral-8x7b", "--tp", "3"), "3"),
    (("configs", "--preset", "mixtral-8x7b", "--config-dir", "/nonexistent/folder"), "/nonexistent/folder"),
])
def test_user_errors_exit_2_with_one_line(args, named):
    result = advisor(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("advisor: error:") and named in lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_bad_config_file_in_config_dir_is_a_user_error(tmp_path):
    name = config_file_name(8, 7168, "NVIDIA H100 80GB HBM3")
    (tmp_path / name).write_text("{not json")
    result = advisor("configs", "--preset", "mixtral-8x7b", "--tp", "2", "--config-dir", str(tmp_path))
    assert result.returncode == 2
    assert name in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_bad_token_list_exits_2():
    result = advisor("configs", "--preset", "mixtral-8x7b", "--tokens", "1,x")
    assert result.returncode == 2 and "token counts" in result.stderr


def test_tune_without_a_gpu_is_a_user_error():
    result = advisor("tune", "--preset", "qwen3-30b-a3b", "--tp", "4", env_extra={"CUDA_VISIBLE_DEVICES": ""})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and "GPU" in result.stderr


def test_headless_commands_never_load_textual():
    code = ("import sys; from advisor.cli import main; rc = main(['configs', '--preset', 'mixtral-8x7b', "
            "'--format', 'json']); assert rc == 0; print('textual' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"


def test_shipped_config_files_are_valid_and_canonical():
    from kernels.fused_moe import CONFIG_SPACE, resource_precheck

    files = sorted(SHIPPED_DIR.glob("*.json"))
    assert files, "the project ships tuned config files"
    names = {config_file_name(p.shape(tp).num_experts, p.shape(tp).config_file_n, gpu)
             for p in PRESETS.values() for tp in TP_SIZES if p.intermediate % tp == 0
             for gpu in ("NVIDIA H100 80GB HBM3", "NVIDIA H200")}
    for path in files:
        assert path.name in names, f"{path.name} matches no preset shape"
        table = read_config_file(path)
        from kernels.moe_configs import format_config_table

        assert format_config_table(table) == path.read_text(), f"{path.name} is not in the engines' layout"
        for config in table.configs.values():
            for key, values in CONFIG_SPACE.items():
                value = config.num_warps if key == "num_warps" else config.num_stages if key == "num_stages" \
                    else config[key]
                assert value in values
            assert resource_precheck(config, 227 * 1024) is None
    assert get_preset("mixtral-8x7b")


# ------------------------------------------------------------------------------------ compile progress

class _Terminal:
    """A text stream that says it is a terminal (as a person's stderr is) and keeps what was written."""

    def __init__(self) -> None:
        import io

        self.buffer = io.StringIO()

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return self.buffer.write(text)

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        raise OSError("no descriptor")


def test_compile_progress_is_drawn_on_a_terminals_stderr_and_nowhere_else(monkeypatch, capsys):
    from advisor import commands

    with commands.compile_progress() as progress:  # pytest's captured stderr is no terminal
        assert progress is None
    assert capsys.readouterr() == ("", "")
    assert not commands.stderr_is_terminal()

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert commands.stderr_is_terminal()
    with commands.compile_progress() as progress:
        for done in range(4):
            progress(done, 3, "compiling 3 configs of add_kernel for sm_90")
    drawn = terminal.buffer.getvalue()
    assert "compiling 3 configs of add_kernel for sm_90" in drawn and "3/3" in drawn
    assert capsys.readouterr().out == ""


def _run_with_stderr_on_a_terminal(args: list[str], env: dict) -> tuple[int, str, str]:
    """The CLI with stdout on a pipe and stderr on a pseudo-terminal: (exit code, stdout, the terminal's text)."""
    import os
    import pty
    import threading

    leader, follower = pty.openpty()
    drawn = bytearray()

    def read() -> None:  # drained while it runs: a full terminal buffer would stall the program
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                return
            if not chunk:
                return
            drawn.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc = subprocess.run([sys.executable, "-m", "advisor.cli", *args], stdout=subprocess.PIPE, stderr=follower,
                              cwd=ROOT, env=env, timeout=300)
    finally:
        os.close(follower)
    reader.join(10)
    os.close(leader)
    return proc.returncode, proc.stdout.decode(), drawn.decode(errors="replace")


@pytest.mark.timeout(600)
@pytest.mark.slow
def test_ceiling_and_suggest_show_compile_progress_on_a_terminal_and_print_the_same(tmp_path):
    """Cold compiles: with stderr on a terminal the compiles are counted there; stdout (text and JSON) is the
    same byte for byte as with stderr on a pipe, where nothing but diagnostics is written."""
    import os

    fixture = str(ROOT / "tests" / "fixtures" / "styles" / "tut01_vector_add.py")
    call = "add(randn(98432), randn(98432))"

    def cold_env(name: str) -> dict:
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env.update(COLUMNS="120", TERM="xterm-256color", TRITON_ADVISOR_HOME=str(tmp_path / name / "home"),
                   TRITON_CACHE_DIR=str(tmp_path / name / "triton"), TRITON_ADVISOR_WORKERS="1")
        return env

    ceiling = ["ceiling", fixture, "--call", call]
    piped = subprocess.run([sys.executable, "-m", "advisor.cli", *ceiling], capture_output=True, text=True,
                           cwd=ROOT, env=cold_env("piped"), timeout=300)
    assert piped.returncode == 0 and "compil" not in piped.stderr, piped.stderr  # cold, and nothing said of it
    code, out, drawn = _run_with_stderr_on_a_terminal(ceiling, cold_env("terminal"))
    assert code == 0 and out == piped.stdout, drawn
    assert "compiling 1 config of add_kernel for sm_90" in drawn and "Traceback" not in drawn, drawn

    # suggest compiles the space cold on the terminal; the same command piped afterwards prints the same.
    suggest = ["suggest", fixture, "--call", call, "--format", "json"]
    code, out, drawn = _run_with_stderr_on_a_terminal(suggest, cold_env("suggest"))
    assert re.search(r"compiling \d+ configs of add_kernel for sm_90", drawn) and "Traceback" not in drawn, drawn
    piped = subprocess.run([sys.executable, "-m", "advisor.cli", *suggest], capture_output=True, text=True,
                           cwd=ROOT, env=cold_env("suggest"), timeout=300)
    assert piped.returncode == code and piped.stdout == out, piped.stderr


def test_a_package_of_the_same_name_earlier_on_the_path_is_named_not_a_traceback(tmp_path):
    # cuda-triton-multiarch installs a top-level `kernels`; ahead of this project on PYTHONPATH it was imported
    # in its place and `suggest` died in an AttributeError traceback.
    import os

    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "__init__.py").write_text("")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    code = "import sys; from tui.entry import main; sys.exit(main(['presets']))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                            timeout=120)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "`kernels`" in lines[0] and str(tmp_path / "kernels") in lines[0]
    assert "PYTHONPATH" in lines[0]
    mine = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert mine.returncode == 0, mine.stderr


def test_the_program_leaves_a_triton_interpret_of_the_shell_off():
    # TRITON_INTERPRET=1, common where there is no GPU, made the fp8 kernel's JIT helpers (another module's,
    # imported with the file) interpreter functions, and the compile for sm_90 failed: "internal error".
    import os

    call = "gemm2_only(256, 8, 2, 256, 128, 'channel', 'M64 N128 K128 G1 w4 s4', False)"
    args = [sys.executable, "-m", "tui.entry", "predict", "benchmarks/fp8_moe_generic_check.py", "--kernel",
            "fused_moe_fp8_kernel", "--call", call, "--gpu", "h100", "--format", "json"]
    result = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=300,
                            env={**os.environ, "TRITON_INTERPRET": "1"})
    assert result.returncode == 0, result.stderr[-1000:]
    doc = json.loads(result.stdout)
    assert (doc[-1] if isinstance(doc, list) else doc)["predicted_us"] > 0


def test_an_unexpected_exception_is_one_line_and_exit_2(monkeypatch, capsys):
    from advisor import cli

    def broken(args):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setitem(cli.COMMANDS, "presets", broken)
    monkeypatch.delenv("ADVISOR_TRACEBACK", raising=False)
    assert cli.main(["presets"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("advisor: internal error: RuntimeError: boom (a bug in triton-advisor")
    monkeypatch.setenv("ADVISOR_TRACEBACK", "1")
    with pytest.raises(RuntimeError, match="boom"):
        cli.main(["presets"])
