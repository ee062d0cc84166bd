"""`advisor suggest` and `advisor apply`: formats, exit codes, locations, refusals, edits on real-looking files."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.advice.moe import gemm_subject
from advisor.advice.search import search
from advisor.advice.subjects import grid_rule, neighbours
from advisor.cli import main
from ceilings.hardware import resolve_gpu
from ceilings.launch import Config, Launch

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
H100_FILE = ROOT / "kernels/configs/E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json"


def run_cli(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_search_ranks_the_whole_moe_space_and_explains():
    advice = search(gemm_subject("qwen3-30b-a3b", 64, tp=4, gemm=1, gpu=resolve_gpu("h100")), top_k=4, confirm=False)
    assert advice.considered == 1920
    assert sum(advice.pruned.values()) > 0  # configs over the GPU's shared memory or registers are never ranked
    ranked = advice.ranked
    assert 1 <= len(ranked) <= 4
    assert all(a.predicted_us <= b.predicted_us for a, b in zip(ranked, ranked[1:], strict=False))
    for c in ranked:
        assert c.ceiling.ceiling_us <= c.interval[0] <= c.predicted_us <= c.interval[1]
    assert advice.speedup >= 1.0 and advice.why and advice.current.ceiling.binding in advice.why + str(
        advice.to_json()["binding"])


def test_suggest_json_and_exit_codes(capsys):
    args = ["suggest", "kernels/fused_moe.py", "--preset", "mixtral-8x7b", "--tp", "2", "--tokens", "1,4096",
            "--format", "json", "--no-confirm"]
    code, out, _ = run_cli(args + ["--min-speedup", "1.0001"], capsys)
    doc = json.loads(out)
    launches = doc["launches"]
    assert [d["launch"] for d in launches] == ["mixtral-8x7b TP2 M=1", "mixtral-8x7b TP2 M=4096"]
    for d in launches:
        assert d["speedup"] == pytest.approx(d["current"]["predicted_us"] / d["best"]["predicted_us"], rel=1e-3)
        assert d["location"]["path"].endswith("E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json")
    assert code == (1 if any(d["speedup"] > 1.0001 for d in launches) else 0)
    code, _, _ = run_cli(args + ["--min-speedup", "100"], capsys)
    assert code == 0


def test_github_annotations_point_at_the_entry_used(capsys, tmp_path):
    path = tmp_path / H100_FILE.name
    shutil.copy(H100_FILE, path)
    code, out, _ = run_cli(["suggest", str(path), "--format", "github", "--min-speedup", "1.0", "--no-confirm"],
                           capsys)
    lines = [line for line in out.splitlines() if line]
    assert code == 1 and lines
    text = path.read_text().splitlines()
    for line in lines:
        m = re.match(r"^::warning file=([^,]+),line=(\d+),title=triton-advisor [0-9.]+x::(.+)$", line)
        assert m, line
        assert Path(m.group(1).replace("%2C", ",").replace("%3A", ":")).name == path.name
        entry = re.search(r"M=(\d+):", m.group(3)).group(1)
        assert text[int(m.group(2)) - 1].strip().startswith(f'"{entry}":')


def test_sarif_is_valid_and_rule_ids_are_stable(capsys):
    jsonschema = pytest.importorskip("jsonschema")
    code, out, _ = run_cli(["suggest", "kernels/gemm.py", "--shape", "16,4096,4096", "--shape", "4096,4096,4096",
                            "--format", "sarif", "--min-speedup", "1.0", "--no-confirm"], capsys)
    log = json.loads(out)
    schema = json.loads((FIXTURES / "sarif-2.1.0-subset.schema.json").read_text())
    jsonschema.validate(log, schema)
    run = log["runs"][0]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["TA001", "TA002"]
    assert code == (1 if run["results"] else 0)
    for r in run["results"]:
        assert r["ruleId"] == "TA001"
        loc = r["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uri"] == "kernels/gemm.py"
        assert (ROOT / "kernels/gemm.py").read_text().splitlines()[loc["region"]["startLine"] - 1].startswith(
            "def default_config(")
    with pytest.raises(jsonschema.ValidationError):  # the schema does reject a broken log
        jsonschema.validate({"version": "2.1.0", "runs": [{"tool": {}}]}, schema)


@pytest.mark.parametrize("args, needle", [
    (["suggest", "kernels/fused_moe.py"], "give --preset"),
    (["suggest", "nowhere.py"], "nowhere.py does not exist"),
    (["suggest", "kernels/gemm.py", "--shape", "1,2"], "--shape '1,2'"),
    (["suggest", "kernels/fused_moe.py", "--preset", "x"], "unknown model preset 'x'"),
    (["suggest", "kernels/fused_moe.py", "--preset", "mixtral-8x7b", "--gpu", "tpu"], "unknown GPU 'tpu'"),
    (["suggest", "kernels/fused_moe.py", "--preset", "mixtral-8x7b", "--min-speedup", "0.5"], "--min-speedup 0.5"),
    (["suggest", str(ROOT / "kernels/configs/E=128,N=192,device_name=NVIDIA_H100_80GB_HBM3.json")],
     "choose one with --preset"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle, capsys):
    code, out, err = run_cli(args, capsys)
    assert code == 2 and out == ""
    assert err.startswith("advisor: error:") and needle in err and len(err.strip().splitlines()) == 1


def test_suggest_never_imports_textual():
    code = ("import sys; from advisor.cli import main; "
            "rc = main(['suggest', 'kernels/gemm.py', '--shape', '256,4096,4096', '--format', 'json', "
            "'--no-confirm']); print('TEXTUAL', 'textual' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("TEXTUAL False")


def test_grid_rule_and_neighbours_of_a_tutorial_matmul():
    launch = Launch.from_dict(json.loads((FIXTURES / "matmul_launch.json").read_text()))
    grid = grid_rule(launch)
    assert grid(launch.config) == (512,)   # cdiv(2048, 128) x cdiv(4096, 128)
    assert grid(launch.config.replace(BLOCK_M=64, BLOCK_N=256)) == (32 * 16,)
    space = neighbours(launch.config)
    assert launch.config in space and launch.config.replace(BLOCK_K=32) in space
    assert launch.config.replace(num_warps=4) in space and len(space) == len(set(space))


def test_apply_engine_file_diff_dry_run_write_idempotent(capsys, tmp_path):
    path = tmp_path / "E=64,N=1280,device_name=NVIDIA_H100_80GB_HBM3.json"
    shutil.copy(ROOT / "kernels/configs" / path.name, path)
    before = path.read_bytes()
    args = ["apply", str(path), "--min-speedup", "1.0", "--no-confirm"]
    code, out, err = run_cli(args + ["--dry-run"], capsys)
    assert code == 0 and path.read_bytes() == before and "dry run" in err
    if "nothing to change" in out:
        pytest.skip("the model finds nothing to change in this file")
    assert out.startswith("--- a/") and "+++ b/" in out
    code, out2, err = run_cli(args, capsys)
    assert code == 0 and out2 == out
    assert (tmp_path / (path.name + ".bak")).read_bytes() == before
    after = json.loads(path.read_text())
    doc = json.loads(before)
    assert list(after) == list(doc)  # the same M keys in the same (numeric) order
    code, out3, _ = run_cli(args, capsys)
    assert code == 0 and "nothing to change" in out3 and json.loads(path.read_text()) == after


def _matmul_file_and_trace(tmp_path, kernel_text: str):
    """The fixture matmul written as `kernel_text`, and a trace of its launch at M64 N64 K32 G8 w4 s2."""
    kernel = tmp_path / "matmul_kernel.py"
    kernel.write_text(kernel_text)
    launch = json.loads((FIXTURES / "matmul_launch.json").read_text())
    launch["config"] = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4, "num_stages": 2}
    launch["grid"] = [32 * 64]
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(launch))
    return kernel, trace


def test_apply_adds_the_suggestion_to_an_autotune_list(capsys, tmp_path, monkeypatch):
    # the list alone: a config past it, which apply adds, is tests/test_autotuned_pick.py's
    monkeypatch.setattr("advisor.advice.subjects.LaunchSubject.list_climb_rounds", 0)
    src = (FIXTURES / "matmul_kernel.py").read_text()
    decorated = src.replace("@triton.jit\n", (
        "@triton.autotune(\n"
        "    configs=[  # tuned by hand\n"
        "        triton.Config({'BLOCK_M': 128, 'BLOCK_N': 128, 'BLOCK_K': 64, 'GROUP_M': 8}, num_warps=8, "
        "num_stages=3),\n"
        "        triton.Config({'BLOCK_M': 64, 'BLOCK_N': 64, 'BLOCK_K': 32, 'GROUP_M': 8}, num_warps=4, "
        "num_stages=2),\n"
        "    ],\n"
        "    key=['M', 'N', 'K'],\n"
        ")\n@triton.jit\n"), 1)
    kernel, trace = _matmul_file_and_trace(tmp_path, decorated)
    code, out, err = run_cli(["suggest", str(kernel), "--trace", str(trace), "--format", "json",
                              "--min-speedup", "1.0", "--no-confirm"], capsys)
    assert code in (0, 1), err
    (d,) = json.loads(out)["launches"]
    assert d["considered"] == 2 and d["location"]["what"] == "autotune configs"
    best = Config.from_dict(d["best"]["config"])
    code, out, err = run_cli(["apply", str(kernel), "--trace", str(trace), "--min-speedup", "1.0", "--no-confirm"],
                             capsys)
    assert code == 0, err
    # The best config is one the list already has: nothing to add, the file is untouched.
    assert best in (Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, 8, 3),
                    Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, 4, 2))
    assert kernel.read_text() == decorated


def test_prune_keeps_the_predicted_fastest_autotune_configs():
    """advisor.prune's ranking on a tutorial-style matmul: it keeps top_k of the list, in the list's own
    objects, and they are the configs the search ranks first."""
    import torch
    import triton

    import advisor
    from advisor.advice.autotune import Pruner, rank
    from ceilings.compile import load_kernel

    fn = load_kernel(str(FIXTURES / "matmul_kernel.py"), "matmul_kernel")
    configs = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=w, num_stages=3)
               for bm, bn, w in ((32, 32, 4), (128, 128, 8), (64, 64, 4))]
    m, n, k = 2048, 2048, 1024
    a, b, c = torch.empty(m, k, dtype=torch.float16), torch.empty(k, n, dtype=torch.float16), torch.empty(m, n)
    named = dict(a_ptr=a, b_ptr=b, c_ptr=c, M=m, N=n, K=k, stride_am=k, stride_ak=1, stride_bk=n, stride_bn=1,
                 stride_cm=n, stride_cn=1)
    kept = rank(fn, configs, named, {}, top_k=2)
    assert len(kept) == 2 and all(any(x is y for y in configs) for x in kept)
    # 32x32 tiles on a 2048 x 2048 output do 4x the operand traffic of 64x64: never among the best two
    assert configs[0] not in kept
    assert advisor.prune(top_k=2)["early_config_prune"].top_k == 2
    # called outside an autotuner, the pruner keeps every config (and says why) instead of failing
    with pytest.warns(UserWarning, match="timing every config"):
        assert Pruner(2)(configs, named) == configs


# The rollback itself runs by default (a wrong result); a slower one, the same path after a timing, with -m slow.
@pytest.mark.parametrize("outcome", [pytest.param("slower", marks=pytest.mark.slow), "wrong"])
def test_apply_verify_rolls_back_a_slower_or_wrong_config(outcome, capsys, tmp_path, monkeypatch):
    """--verify measures before and after (a fake GPU here) and restores the file when the new config is
    slower or gives a wrong result."""
    from advisor.advice.subjects import FamilySubject
    from advisor.measure.timing import MeasurementError

    path = tmp_path / "E=64,N=1280,device_name=NVIDIA_H100_80GB_HBM3.json"
    shutil.copy(ROOT / "kernels/configs" / path.name, path)
    before = path.read_bytes()
    plan = run_cli(["apply", str(path), "--min-speedup", "1.0", "--no-confirm", "--dry-run"], capsys)[1]
    if "nothing to change" in plan:
        pytest.skip("the model finds nothing to change in this file")

    def fake_measurer(self):
        current = self.current

        def run(config):
            if config == current:
                return 100.0
            if outcome == "wrong":
                raise MeasurementError("output differs from the reference")
            return 120.0
        return run

    import torch

    monkeypatch.setattr(FamilySubject, "measurer", fake_measurer)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # --verify checks for a GPU first
    code, out, err = run_cli(["apply", str(path), "--min-speedup", "1.0", "--no-confirm", "--verify"], capsys)
    assert code == 1 and "rolled back" in err
    assert path.read_bytes() == before


def test_apply_refuses_configs_that_do_not_fit_the_files_gpu(capsys, tmp_path):
    """Advice computed for an H100 forced into an L4's file: the H100's large tiles need more shared memory
    than an L4 block has, so nothing is written."""
    path = tmp_path / "E=8,N=7168,device_name=NVIDIA_L4.json"
    shutil.copy(H100_FILE, path)
    before = path.read_bytes()
    code, out, err = run_cli(["apply", str(path), "--gpu", "h100", "--min-speedup", "1.0", "--no-confirm",
                              "--force-gpu"], capsys)
    assert code == 2 and "does not fit NVIDIA L4" in err and len(err.strip().splitlines()) == 1
    assert path.read_bytes() == before and not (tmp_path / (path.name + ".bak")).exists()


def test_a_recorded_trace_of_shipped_kernels_is_advised_with_their_exact_model(tmp_path, capsys):
    """record -> suggest: launches of the shipped GEMM and softmax in a trace become their exact shape
    subjects (the whole config space, semantic demand), with the counts of the trace."""
    prog = tmp_path / "prog.py"
    prog.write_text("import torch\nfrom kernels import gemm, softmax\n"
                    "a = torch.randn(64, 128, dtype=torch.float16); b = torch.randn(128, 96, dtype=torch.float16)\n"
                    "for _ in range(2):\n    gemm.gemm(a, b)\nsoftmax.softmax(torch.randn(32, 300))\n")
    trace = tmp_path / "trace.json"
    env = {**__import__("os").environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "advisor.cli", "record", "--out", str(trace), "--", sys.executable,
                        str(prog)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    code, out, err = run_cli(["suggest", str(trace), "--format", "json", "--no-confirm"], capsys)
    assert code in (0, 1), err
    launches = json.loads(out)["launches"]
    assert [d["launch"] for d in launches] == ["gemm M,N,K=64,96,128", "softmax ROWS,COLS=32,300"]
    assert launches[0]["current"]["config"]["BLOCK_M"] and launches[1]["current"]["config"]["ROWS_PER_PROGRAM"]
    assert launches[0]["considered"] > 100  # the module's whole CONFIG_SPACE, not a compile-budget sample


def test_an_autotune_list_that_tunes_some_parameters_keeps_the_others_as_launched(capsys, tmp_path, monkeypatch):
    """Issue 15 (FLA's l2norm): the recorder files a constexpr the host passes (BLOCK_K here) under the config
    with the tuned ones, and an autotune list without it had every config pruned as 'sets other
    parameters'; the list's configs keep the launched value, and apply writes them without it."""
    src = (FIXTURES / "matmul_kernel.py").read_text()
    listed = ("@triton.autotune(\n"
              "    configs=[\n"
              "        triton.Config({'BLOCK_M': 128, 'BLOCK_N': 128, 'GROUP_M': 8}, num_warps=8, num_stages=3),\n"
              "        triton.Config({'BLOCK_M': 64, 'BLOCK_N': 64, 'GROUP_M': 8}, num_warps=4, num_stages=2),\n"
              "    ],\n"
              "    key=['M', 'N', 'K'],\n"
              ")\n@triton.jit\n")
    monkeypatch.setattr("advisor.advice.subjects.LaunchSubject.list_climb_rounds", 0)  # the list alone
    kernel, trace = _matmul_file_and_trace(tmp_path, src.replace("@triton.jit\n", listed, 1))
    code, out, err = run_cli(["suggest", str(kernel), "--trace", str(trace), "--format", "json",
                              "--min-speedup", "1.0", "--no-confirm"], capsys)
    assert code in (0, 1), err
    (d,) = json.loads(out)["launches"]
    assert d["considered"] == 2 and d["pruned"] == {}
    assert all(c["config"]["BLOCK_K"] == 32 for c in d["ranked"]) and len(d["ranked"]) == 2

    from advisor.advice.suggest import advise, plan_apply, subjects_for

    (advice,) = advise(subjects_for(str(kernel), trace=str(trace)), confirm=False)
    advice.ranked = [c for c in advice.ranked if c.config["BLOCK_M"] == 128] or advice.ranked
    assert advice.best.config["BLOCK_K"] == 32 and advice.best.config != advice.current.config
    # The list has that config (without BLOCK_K): nothing to add; with BLOCK_K it would be added as a new one.
    (edit,) = plan_apply([advice], min_speedup=0.0)
    assert not edit.changed


def test_the_grid_follows_a_tile_whose_size_is_a_constexpr():
    """Issue 15 (GemLite's gemv, N and K passed as constexprs): the grid kept 3584 CTAs for BLOCK_SIZE_N 1
    instead of 14336, so that config was predicted (3.5x) and timed at a quarter of its work."""
    from advisor.advice.launch_rule import launch_rule
    from advisor.capture.trace import read_trace

    launch = read_trace(FIXTURES / "matmul_launch.json").launches[0]
    scalars = dict(launch.scalars)
    sizes = {"N": scalars.pop("N"), "K": scalars.pop("K")}
    as_constexprs = Launch(launch.source, launch.kernel, launch.grid, launch.tensors, tuple(scalars.items()),
                           tuple(sizes.items()), launch.config)
    rule = launch_rule(as_constexprs)
    assert rule.grid(launch.config) == (512,)
    assert rule.grid(launch.config.replace(BLOCK_N=64)) == (1024,)
    assert rule.grid(launch.config.replace(BLOCK_M=64, BLOCK_N=256)) == (512,)
