"""`--call` without a GPU, where part of the data is real: launches whose tensors all hold data run in Triton's
interpreter, so a later launch's guard reads what they computed (advisor/capture/nogpu.py). Fixture:
tests/fixtures/routed_kernels.py (a count of the rows routed to expert 0, then a row kernel guarded by it)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from advisor.capture.call import capture_call
from advisor.cli import main
from ceilings.demand import generic_demand
from ceilings.errors import AdvisorError

ROUTED = Path(__file__).resolve().parent / "fixtures" / "routed_kernels.py"


def launches(call: str):
    return {x.kernel: x for x in (getattr(r, "launch", r) for r in capture_call(ROUTED, call, "h100").launches)}


def tensor(launch, name):
    return next(t for t in launch.tensors if t.name == name)


def test_a_count_run_on_data_reaches_the_guard_of_the_launch_after_it():
    expected = int((torch.randint(0, 4, (1024,), dtype=torch.int32, generator=torch.Generator().manual_seed(0))
                    == 0).sum())
    rows = launches("layer(randn(1024, 256), randint(4, 1024, i32))")["rows_kernel"]
    assert tensor(rows, "n_ptr").values == (expected,)
    # The floor counts the exp of the rows under the count only: against every row working, expected / 1024.
    counted = generic_demand(rows)
    everything = generic_demand(dataclasses.replace(rows, tensors=tuple(
        dataclasses.replace(t, values=(1024,)) if t.name == "n_ptr" else t for t in rows.tensors)))
    xu = [sum(n * w.get("xu", 0.0) for n, w in d.cta_classes) for d in (counted, everything)]
    assert xu[0] == pytest.approx(xu[1] * expected / 1024, rel=1e-6) and xu[0] > 0


def test_what_a_launch_not_run_may_write_is_unknown_after_it_not_what_was_there_before():
    """The count reads x (no data): it is not run, so n holds whatever torch.empty left, which the row
    kernel's launch must not carry as its contents (its guard is then not determined: the floor)."""
    rows = launches("layer_counted_on_gpu(randn(1024, 256), randint(4, 1024, i32))")["rows_kernel"]
    assert tensor(rows, "n_ptr").values is None
    assert any("not determined by the launch" in note for note in generic_demand(rows).notes)


def test_a_launch_not_run_forgets_only_what_it_stores_into():
    """The row kernel reads n and stores y: run without data for x it is not run, and n keeps its contents for
    the next launch when the caller says what a kernel stores into (the commands pass the source's stores);
    without that, every data tensor of a launch not run is forgotten."""
    from advisor.advice.stores import stored_outputs

    call = "rows_twice(randn(64, 128), randint(4, 64, i32))"
    told = [getattr(r, "launch", r) for r in capture_call(ROUTED, call, "h100", written=stored_outputs).launches]
    blind = [getattr(r, "launch", r) for r in capture_call(ROUTED, call, "h100").launches]
    from ceilings.compile import load_kernel

    assert "n_ptr" not in stored_outputs(load_kernel(str(ROUTED), "rows_kernel")) >= {"y_ptr"}
    assert [tensor(x, "n_ptr").values is not None for x in told if x.kernel == "rows_kernel"] == [True, True]
    assert [tensor(x, "n_ptr").values is not None for x in blind if x.kernel == "rows_kernel"] == [True, False]


def test_tensors_without_data_stay_unknown():
    rows = launches("layer(randn(1024, 256), zeros(1024, i32))")["rows_kernel"]
    assert tensor(rows, "n_ptr").values is None


def test_kernels_compile_after_an_interpreted_launch(tmp_path):
    """The interpreter swaps triton.language's functions for its own; left swapped, every later compile failed.
    Run in a process that compiles (this suite's interprets, and compiles in a child)."""
    call = "layer(randn(64, 128), randint(4, 64, i32))"
    script = "\n".join([
        "from pathlib import Path",
        "from advisor.capture.call import capture_call",
        "from ceilings.compile import compile_launch",
        f"launches = capture_call(Path({str(ROUTED)!r}), {call!r}, 'h100').launches",
        "rows = [getattr(x, 'launch', x) for x in launches][-1]",
        "print(rows.tensors[-1].values, compile_launch(rows, 90, use_cache=False).registers > 0)"])
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=str(tmp_path / "triton"), TRITON_ADVISOR_HOME=str(tmp_path / "advisor"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "True" and done.stdout.startswith("(")


@pytest.mark.parametrize("call, says", [
    ("layer(randn(8, 16), randint(0, 8, i32))", "randint(0, 8, i32): the bounds need low < high"),
    ("layer(randn(8, 16), randint(4))", "randint(4): the bounds need low < high and the sizes at least one size"),
    ("layer(randn(8, 16), randint(4, (8,), (2,)))", "randint(4, (8,), (2,)): give the bound and the sizes"),
    ("layer(randn(8, 16), randint(0, 4, 9, (8,)))", "randint(0, 4, 9, (8,)): give the bound and the sizes"),
    ("layer(randn(8, 16), randint(4, 8, i32, dtype=i32))", "got two dtypes"),
])
def test_bad_randint_is_one_line_and_exit_2(capsys, call, says):
    with pytest.raises(AdvisorError, match=r"randint\("):
        capture_call(ROUTED, call, "h100")
    assert main(["ceiling", str(ROUTED), "--call", call]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_kernel_hash_n_picks_the_nth_launch_of_a_kernel(capsys):
    """A layer launches one kernel twice: `--kernel NAME#N` picks one, as `diagnose --measured` needs."""
    call = "layer_twice(randn(64, 128), randint(4, 64, i32))"
    assert main(["ceiling", str(ROUTED), "--call", call, "--kernel", "rows_kernel#2", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ctas"] == 32  # the second launch: half the rows
    assert main(["ceiling", str(ROUTED), "--call", call, "--kernel", "rows_kernel#3"]) == 2
    err = capsys.readouterr().err
    assert "--kernel rows_kernel#3: rows_kernel has 2 launch(es) here; give rows_kernel#1 to rows_kernel#2" in err
    assert main(["diagnose", str(ROUTED), "--call", call, "--kernel", "rows_kernel", "--measured", "5"]) == 2
    assert "NAME#2 for a kernel's second launch" in capsys.readouterr().err
    assert main(["diagnose", str(ROUTED), "--call", call, "--kernel", "rows_kernel#1", "--measured", "5",
                 "--format", "json"]) == 0
    capsys.readouterr()
    assert main(["suggest", str(ROUTED), "--call", call, "--kernel", "row_kernel", "--no-confirm"]) == 2
    err = capsys.readouterr().err.strip().splitlines()  # a misspelt name: the kernels there are named
    assert len(err) == 1 and "no launch of kernel 'row_kernel'; its kernels: " in err[0] and "rows_kernel" in err[0]


def test_a_layers_trace_given_with_its_file_keeps_the_other_files_kernels(tmp_path):
    """`suggest FILE --trace` (and the TUI) on a layer's trace: the file takes the launches of the kernels it
    defines; the align, defined in another file, keeps its own source (it had re-sourced every launch to FILE
    and stopped at the align: 'has no Triton kernel _align_count_kernel'). In a process that compiles: this
    suite's interpreter builds the layer's imported kernels as interpreted ones, which a capture cannot see."""
    script = "\n".join([
        "import json, sys",
        "from pathlib import Path",
        "from advisor.advice.suggest import subjects_for",
        "from advisor.capture.call import record_call",
        "from ceilings.hardware import resolve_gpu",
        "layer, out = sys.argv[1], sys.argv[2]",
        "call = (\"fused_moe_fp8(randn(8, 256, bf16), Fp8Weights(randn(4, 128, 256, bf16), randn(4, 256, 64, bf16), \"",
        "        \"'block'), rand(8, 2), randint(4, 8, 2, i32), form='w8a8')\")",
        "record_call(layer, call, out, 'h100')",
        "subjects = subjects_for(layer, trace=out, gpu=resolve_gpu('h100'))",
        "print(json.dumps({s.kernel: Path(s.launch.source).name for s in subjects}))"])
    layer = Path(__file__).resolve().parents[1] / "kernels" / "fused_moe_fp8.py"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", script, str(layer), str(tmp_path / "layer.json")], capture_output=True,
                          text=True, env=env, timeout=300, cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-2000:]
    # the quantiser is imported into the layer's file, so that file has it too (the same kernel)
    assert json.loads(done.stdout.splitlines()[-1]) == {
        "_align_count_kernel": "moe_align.py", "_align_scatter_kernel": "moe_align.py",
        "quantize_rows_kernel": "fused_moe_fp8.py", "fused_moe_fp8_kernel": "fused_moe_fp8.py"}


def test_randint_as_torch_writes_it():
    from advisor.capture.call import helpers

    randint = helpers()["randint"]
    seeded = torch.Generator().manual_seed(0)
    made = randint(-128, 127, (64, 32), helpers()["i8"])
    assert made.dtype == torch.int8 and made.shape == (64, 32) and made.device.type == "cpu"
    assert torch.equal(made, torch.randint(-128, 127, (64, 32), dtype=torch.int8, generator=seeded))
    assert int(made.min()) < 0  # the low bound is kept, not read as the high one
    assert randint(5, (7,)).tolist() == randint(5, 7).tolist()  # torch's sizes tuple and the short form agree
