"""`advisor record` and the launch trace format (advisor/capture/record.py, advisor/capture/trace.py, docs/trace.md).

The recording tests run a small program in a child process: under TRITON_INTERPRET=1 here (the
interpreter capture path), through Triton's launch hooks where a GPU runs the kernels.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from advisor.capture.record import child_command, record, record_main
from advisor.capture.trace import FORMAT, VERSION, Trace, dedupe, is_trace, read_trace, write_trace
from ceilings.errors import AdvisorError
from ceilings.launch import Config, Launch, TensorArg

FIXTURES = Path(__file__).resolve().parent / "fixtures"

# Where the child puts its tensors: conftest sets TRITON_INTERPRET=1 without CUDA, and the child inherits it.
_DEVICE = textwrap.dedent("""
    import os
    import torch
    DEVICE = "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") in ("", "0") else "cpu"
""")

ADD_PROGRAM = _DEVICE + textwrap.dedent("""
    import sys
    import triton
    import triton.language as tl


    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK_SIZE: tl.constexpr, USE_ALPHA: tl.constexpr):
        offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offs < n
        y = tl.load(y_ptr + offs, mask=mask)
        if USE_ALPHA:
            y = y * alpha
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + y, mask=mask)


    def add(x, y):
        out = torch.empty_like(x)
        grid = lambda meta: (triton.cdiv(x.numel(), meta["BLOCK_SIZE"]),)
        add_kernel[grid](x, y, out, x.numel(), 0.5, BLOCK_SIZE=32, USE_ALPHA=True, num_warps=2)
        return out


    x = torch.ones(64, device=DEVICE)
    for _ in range(3):
        assert float(add(x, x)[0]) == 1.5
    wide = torch.ones(4, 96, device=DEVICE, dtype=torch.float16)[:, :48]   # strided: (96, 1)
    add(wide, wide)
    sys.exit(int(sys.argv[1]))
""")

AUTOTUNE_PROGRAM = _DEVICE + textwrap.dedent("""
    import triton
    import triton.language as tl

    timings = iter([2.0, 1.0])                      # the second config wins


    def bench(fn, quantiles=None, **kwargs):        # stands in for do_bench, which needs a GPU
        fn()
        return [next(timings)] * 3


    @triton.autotune(configs=[triton.Config({"BLOCK": 16}, num_warps=2, num_stages=1),
                              triton.Config({"BLOCK": 32}, num_warps=8, num_stages=2)], key=["n"], do_bench=bench)
    @triton.jit
    def bump(x_ptr, n, BLOCK: tl.constexpr, OUT: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, (tl.load(x_ptr + offs, mask=offs < n) + 1).to(OUT), mask=offs < n)


    x = torch.zeros(64, device=DEVICE)
    for _ in range(2):
        bump[lambda meta: (triton.cdiv(64, meta["BLOCK"]),)](x, 64, OUT=tl.float32)
""")


def _gpu() -> str | None:
    return torch.cuda.get_device_name() if torch.cuda.is_available() else None


def _def_line(path: Path, name: str) -> int:
    lines = path.read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.startswith(f"def {name}("))


# ----------------------------------------------------------------------------------------------
# Recording.
# ----------------------------------------------------------------------------------------------
def test_record_captures_and_dedupes_launches(tmp_path, capfd):
    prog = tmp_path / "prog.py"
    prog.write_text(ADD_PROGRAM)
    out = tmp_path / "traces" / "add.json"
    assert record_main([sys.executable, str(prog), "0"], str(out)) == 0
    assert "recorded 4 launches of 1 kernel (2 distinct) -> " in capfd.readouterr().err

    assert is_trace(out)
    data = json.loads(out.read_text())
    assert (data["format"], data["version"], data["gpu"]) == (FORMAT, VERSION, _gpu())
    assert data["program"] == [sys.executable, str(prog), "0"] and data["created"]

    trace = read_trace(out)
    assert trace.gpu == _gpu() and trace.counts == [3, 1] and trace.total == 4 and trace.kernels == ["add_kernel"]
    assert trace.lines == [_def_line(prog, "add_kernel")] * 2
    first, second = trace.launches
    assert first.kernel == "add_kernel" and Path(first.source).resolve() == prog.resolve()
    assert first.grid == (2,)
    assert first.tensors == tuple(TensorArg(name, (64,), "float32", (1,)) for name in ("x_ptr", "y_ptr", "out_ptr"))
    assert dict(first.scalars) == {"n": 64, "alpha": 0.5}
    assert dict(first.constexprs) == {"USE_ALPHA": True}
    assert first.config == Config({"BLOCK_SIZE": 32}, num_warps=2, num_stages=3)
    # The other shape: a strided float16 view, its own grid.
    assert second.grid == (6,)
    assert second.tensors[0] == TensorArg("x_ptr", (4, 48), "float16", (96, 1))
    assert dict(second.scalars) == {"n": 192, "alpha": 0.5}
    assert second.config == first.config


def test_record_propagates_exit_status_and_keeps_launches(tmp_path, capfd):
    prog = tmp_path / "prog.py"
    prog.write_text(ADD_PROGRAM)
    out = tmp_path / "add.json"
    assert record_main(["python", str(prog), "3"], str(out)) == 3
    err = capfd.readouterr().err
    assert "exited with status 3" in err and "recorded 4 launches" in err
    assert read_trace(out).counts == [3, 1]


def test_record_autotune_records_the_chosen_config_not_the_benchmarks(tmp_path):
    prog = tmp_path / "tuned.py"
    prog.write_text(AUTOTUNE_PROGRAM)
    result = record(["python3", str(prog)], tmp_path / "tuned.json")
    assert result.returncode == 0
    (launch, line, count), (other, _, other_count) = result.trace.entries()
    assert (launch.kernel, line, count) == ("bump", _def_line(prog, "bump"), 2)
    assert launch.config == Config({"BLOCK": 32}, num_warps=8, num_stages=2)
    assert launch.grid == (2,) and dict(launch.constexprs) == {"OUT": "float32"}
    # the config it did not choose: the launch the host's grid function gives it, probed once, never run
    assert other.config == Config({"BLOCK": 16}, num_warps=2, num_stages=1)
    assert (other.grid, other_count, dict(other.constexprs)) == ((4,), 1, {"OUT": "float32"})
    assert result.trace.meta["autotune_groups"] == [[0, 1]]
    assert result.summary.startswith("recorded 2 launches of 1 kernel (2 distinct; 1 autotuned")  # the program's 2


def test_a_launch_whose_integer_contents_change_every_call_gets_its_configs_probed_once(tmp_path):
    prog = tmp_path / "routed.py"
    prog.write_text(AUTOTUNE_PROGRAM
                    .replace("def bump(x_ptr, n,", "def bump(x_ptr, ids_ptr, n,")
                    .replace("for _ in range(2):", "for step in range(3):")
                    .replace("](x, 64, OUT=tl.float32)",
                             "](x, torch.full((4,), step, dtype=torch.int32, device=DEVICE), 64, OUT=tl.float32)"))
    result = record(["python3", str(prog)], tmp_path / "routed.json")
    assert result.returncode == 0
    entries = result.trace.entries()
    chosen = [launch for launch, _, _ in entries if launch.config.params["BLOCK"] == 32]
    assert [launch.tensor("ids_ptr").values for launch in chosen] == [(0,) * 4, (1,) * 4, (2,) * 4]
    assert len(entries) == 4 and result.trace.meta["autotune_groups"] == [[0, 1]]  # the first call's alone


def test_suggest_ranks_a_recorded_autotune_group_on_the_host_grids(tmp_path):
    """A GPU recording's autotune group is the subject's space, each config on the grid the host code gave
    it, not the launch rule's guess: 96 // BLOCK programs is no grid the rule can explain from the launch."""
    from advisor.advice.suggest import trace_subjects

    prog = tmp_path / "tuned.py"
    prog.write_text(AUTOTUNE_PROGRAM.replace('triton.cdiv(64, meta["BLOCK"])', '96 // meta["BLOCK"]'))
    result = record(["python3", str(prog)], tmp_path / "tuned.json")
    (subject,) = trace_subjects(tmp_path / "tuned.json")
    small = Config({"BLOCK": 16}, num_warps=2, num_stages=1)
    assert subject.current == Config({"BLOCK": 32}, num_warps=8, num_stages=2)
    assert set(subject.space()) == {subject.current, small}
    assert subject.launch_for(small).grid == (6,) and subject.precheck(small) is None
    assert subject.rule(small).grid == (3,)  # what the rule alone would have run it on
    assert result.trace.meta["autotune_groups"] == [[0, 1]]
    # recorded on a GPU, the group's first entry is the autotuner's choice: it stays the current config
    assert result.trace.meta["autotune_chosen"] is True and not subject.autotuner_picks
    (nogpu,) = trace_subjects(tmp_path / "tuned.json", trace=record(["python3", str(prog)], tmp_path / "cpu.json",
                                                                      no_gpu="h100").trace)
    assert nogpu.autotuner_picks and read_trace(tmp_path / "cpu.json").meta["autotune_chosen"] is False


ROUTING_PROGRAM = _DEVICE + textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def gather_rows(x_ptr, ids_ptr, offsets_ptr, big_ptr, out_ptr, n_ids, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        start = tl.load(offsets_ptr + pid)
        if start >= n_ids:
            return
        offs = start + tl.arange(0, BLOCK)
        rows = tl.load(ids_ptr + offs, mask=offs < n_ids, other=0)
        tl.store(out_ptr + offs, tl.load(x_ptr + rows) + tl.load(big_ptr + offs).to(tl.float32), mask=offs < n_ids)


    ids = torch.tensor([3, 1, 2, 0, 7, 5], dtype=torch.int32, device=DEVICE)
    offsets = torch.arange(0, 16, 4, dtype=torch.int64, device=DEVICE)[::2]      # strided view: [0, 8]
    big = torch.zeros(262145, dtype=torch.int32, device=DEVICE)                 # 1 MiB + 4 bytes
    x = torch.arange(8, dtype=torch.float32, device=DEVICE)
    out = torch.zeros(16, device=DEVICE)
    gather_rows[(2,)](x, ids, offsets, big, out, ids.numel(), BLOCK=4)
""")


def test_record_keeps_the_contents_of_small_integer_tensors(tmp_path):
    prog = tmp_path / "routing.py"
    prog.write_text(ROUTING_PROGRAM)
    result = record(["python", str(prog)], tmp_path / "routing.json")
    assert result.returncode == 0
    (launch, _, _), = result.trace.entries()
    tensors = {t.name: t for t in launch.tensors}
    assert tensors["ids_ptr"].values == (3, 1, 2, 0, 7, 5)
    # A strided view keeps the span its strides reach from the data pointer: element i at pointer + i.
    assert tensors["offsets_ptr"].stride == (2,) and tensors["offsets_ptr"].values == (0, 4, 8)
    assert tensors["big_ptr"].values is None                # over 1 MiB: a sample of it instead
    big = tensors["big_ptr"].sample
    assert len(big.values) == 4096 and set(big.values) == {0} and (big.low, big.high) == (0, 0)
    assert big.sorted and big.distinct_rows == 0 and tensors["ids_ptr"].sample is None
    assert tensors["x_ptr"].values is None and tensors["out_ptr"].values is None  # not integers
    raw = json.loads((tmp_path / "routing.json").read_text())["launches"][0]["tensors"]
    assert [t.get("values") for t in raw][:2] == [None, [3, 1, 2, 0, 7, 5]]


def test_values_are_not_read_from_tensors_without_data():
    from advisor.capture import boot
    from ceilings import launch as launch_module

    assert (boot.MAX_VALUES_BYTES, boot._INTEGER_BYTES) == (launch_module.MAX_VALUES_BYTES,
                                                           launch_module._INTEGER_BYTES)
    tensors: list = []
    boot._argument("ids", torch.empty(8, dtype=torch.int32, device="meta"), tensors, {})
    boot._argument("flags", torch.tensor([True, False]), tensors, {})
    boot._argument("empty", torch.empty(0, dtype=torch.int64), tensors, {})
    assert [t.get("values") for t in tensors] == [None, [1, 0], None]


def test_large_integer_tensors_keep_a_sample_and_whether_they_are_sorted():
    """Over MAX_VALUES_BYTES an integer tensor keeps SAMPLE_SIZE elements at evenly spaced positions and whether the
    whole span is non-decreasing: a timing draws its indices from them instead of zeros (RESULTS 56)."""
    from advisor.capture import boot
    from ceilings import launch as launch_module

    assert boot.SAMPLE_SIZE == launch_module.SAMPLE_SIZE
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 256, (300_000,), dtype=torch.int32, generator=gen)   # 1.2 MB
    offsets = torch.arange(0, 900_000, 3, dtype=torch.int64)
    late = offsets.clone()
    late[-1] = 0                                    # one step down at the very end: not sorted
    boot._argument("chunked", offsets, [], {})       # warm-up: nothing kept from a call without a list
    saved = boot._SORTED_CHUNK
    boot._SORTED_CHUNK = 1000                        # chunk borders must not hide a step down
    try:
        tensors: list = []
        perm = torch.stack([torch.randperm(1000, generator=gen) for _ in range(140)])   # a sort's indices per row
        for name, t in (("ids", ids), ("offsets", offsets), ("late", late), ("rows", ids.view(1000, 300).t()),
                        ("perm", perm)):
            boot._argument(name, t, tensors, {})
        boot._argument("probe", ids, tensors, {}, keep_values=False)
    finally:
        boot._SORTED_CHUNK = saved
    got = {t["name"]: t.get("sample") for t in tensors}
    assert got["ids"]["values"] == ids[::73][:4096].tolist() and not got["ids"]["sorted"]
    assert (got["ids"]["low"], got["ids"]["high"]) == (int(ids.min()), int(ids.max()))
    assert got["offsets"]["values"] == offsets[::73][:4096].tolist() and got["offsets"]["sorted"]
    assert got["offsets"]["distinct_rows"] == 300_000 and got["ids"]["distinct_rows"] == 0
    assert not got["late"]["sorted"] and got["late"]["distinct_rows"] == 0    # 0 twice
    assert len(got["rows"]["values"]) == 4096 and got["probe"] is None   # a transposed view; a probe reads nothing
    assert got["perm"]["distinct_rows"] == 1000 and got["perm"]["low"] == 0 and got["perm"]["high"] == 999
    assert all("values" not in t for t in tensors)


def test_record_module_and_bad_programs(tmp_path, capfd):
    (tmp_path / "quiet.py").write_text("import sys\nsys.exit(7)\n")
    result = record(["python", "-m", "quiet"], tmp_path / "m.json", cwd=tmp_path)
    assert result.returncode == 7 and result.trace.launches == [] and is_trace(tmp_path / "m.json")

    assert record_main(["python", str(tmp_path / "missing.py")], str(tmp_path / "x.json")) == 2
    assert "missing.py does not exist" in capfd.readouterr().err
    for argv in ([], ["python"], ["python", "-m"], ["python", "-u"]):
        with pytest.raises(AdvisorError, match="advisor record"):
            child_command(argv, "capture.json")


@pytest.mark.parametrize("argv", [
    ["record", "k.py", "--call", "f()"],
    ["record", "k.py", "--out=t.json"],
    ["record", "python", "prog.py", "--no-gpu"],
])
def test_record_options_after_the_program_are_refused(argv, tmp_path, monkeypatch, capsys):
    from advisor.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "comes after" in err and "put record's options first" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # nothing run, no trace written


def test_child_command_forms(tmp_path):
    script = tmp_path / "p.py"
    script.write_text("")
    boot = str(Path(__file__).resolve().parents[1] / "advisor" / "capture" / "boot.py")
    assert child_command(["python3", "-u", "-X", "dev", str(script), "a"], "c.json") == [
        sys.executable, "-u", "-X", "dev", boot, "c.json", "script", str(script), "a"]
    assert child_command([str(script), "--flag"], "c.json")[-3:] == ["script", str(script), "--flag"]
    assert child_command([sys.executable, "-m", "pkg.mod", "x"], "c.json")[-4:] == ["c.json", "module", "pkg.mod", "x"]


# ----------------------------------------------------------------------------------------------
# The trace format.
# ----------------------------------------------------------------------------------------------
def _launch(n: int = 64, source: str = "/k/add.py") -> Launch:
    return Launch(source, "add_kernel", (n // 32,), (TensorArg.contiguous("x_ptr", (n,), "bfloat16"),),
                  {"n": n}, {"USE_ALPHA": False}, Config({"BLOCK_SIZE": 32}, num_warps=4, num_stages=2))


def test_write_then_read_is_identical(tmp_path):
    trace = Trace([_launch(64), _launch(128)], [5, 1], [12, None], "NVIDIA H100 80GB HBM3", ["python", "p.py"],
                  "2026-05-01T12:00:00+00:00", {"note": "by hand"})
    path = write_trace(tmp_path / "t.json", trace)
    assert read_trace(path) == trace
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temporary file left behind
    write_trace(path, read_trace(path))
    assert read_trace(path) == trace


def test_dedupe_adds_counts_in_first_seen_order():
    a, b = _launch(64), _launch(128)
    assert dedupe([a, (b, 2), (a, 7, 3), a]) == [(a, 7, 5), (b, None, 2)]
    assert Trace([a, b, a], [1, 2, 3]).deduped().counts == [4, 2]


@pytest.mark.parametrize("content, message", [
    (None, "no such trace file"),
    ("{not json", "not valid JSON"),
    ('{"format": "chrome-trace", "version": 1, "launches": []}', "format is 'chrome-trace'"),
    (json.dumps({"format": FORMAT, "version": VERSION + 1, "launches": []}), "newer than this advisor reads"),
    (json.dumps({"format": FORMAT, "version": VERSION, "launches": [{"kernel": "k", "grid": [1]}]}),
     "launch 0: malformed launch"),
    (json.dumps({"format": FORMAT, "version": VERSION, "launches": [{**_launch().to_dict(), "count": 0}]}),
     "launch 0: count 0 must be a positive integer"),
    (json.dumps({"format": FORMAT, "version": VERSION}), 'needs a "launches" list'),
    ('"a string"', "neither a trace"),
])
def test_read_trace_errors_name_the_file(tmp_path, content, message):
    path = tmp_path / "bad_trace.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(AdvisorError, match=message) as info:
        read_trace(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_plain_launch_files_read_as_traces(tmp_path):
    trace = read_trace(FIXTURES / "matmul_launch.json")
    assert trace.counts == [1] and trace.lines == [None] and trace.gpu is None
    (launch,) = trace.launches
    assert launch.kernel == "matmul_kernel" and launch.source == str(FIXTURES / "matmul_kernel.py")
    assert launch.config["BLOCK_M"] == 128 and launch.tensor("a_ptr").shape == (2048, 1024)
    assert not is_trace(FIXTURES / "matmul_launch.json")

    raw = json.loads((FIXTURES / "matmul_launch.json").read_text())
    (tmp_path / "list.json").write_text(json.dumps([raw, raw]))
    (tmp_path / "wrapped.json").write_text(json.dumps({"launches": [raw]}))
    assert read_trace(tmp_path / "list.json").counts == [1, 1]
    assert read_trace(tmp_path / "wrapped.json").launches[0].source == str(tmp_path / "matmul_kernel.py")
