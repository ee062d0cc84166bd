"""Fuzzing the advisor's inputs (issue 12, point 5): engine config JSON, launch traces, CLI argument vectors
and kernel files (syntax, encodings, sizes). For every input the CLI, run in-process, exits 0, 1 or 2, never
lets an exception through (no traceback), and changes no file unless `apply` wrote it and said so.

The default run keeps to the CI budget: a bounded number of examples per test (2,000 and more in all,
about a minute of CPU); `pytest -m slow tests/test_fuzz.py` runs each test with ten times as many.
To keep one example to milliseconds, the searches rank a thin slice of each kernel's config space
(every config still passes the validator, the ceiling and the model); tests/test_suggest.py covers the
whole spaces. (A little over 400 lines: the five inputs share one harness, one budget and the check
that the budget adds up, which would not survive a split.)
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import traceback
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from advisor.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
KERNEL_SOURCE = (FIXTURES / "matmul_kernel.py").read_text()
LAUNCH = json.loads((FIXTURES / "matmul_launch.json").read_text())
LAUNCH["source"] = str(FIXTURES / "matmul_kernel.py")
ENGINE_NAMES = ("E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json", "E=8,N=7168,device_name=NVIDIA_L4.json",
                "E=128,N=192,device_name=NVIDIA_H200.json", "E=8,N=7168,device_name=NVIDIA_X1.json",
                "E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json", "configs.json")
WATCHED = [*sorted((ROOT / "kernels/configs").glob("*.json")), *sorted(FIXTURES.rglob("*.*"))]


def _budget(examples: int, slow_examples: int | None = None):
    """Bounded examples, no deadline (a first compile of a kernel may take seconds); the slow run: 10x, or
    `slow_examples`."""
    common = dict(deadline=None, derandomize=True, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                         HealthCheck.data_too_large, HealthCheck.filter_too_much])
    return settings(max_examples=examples, **common), settings(max_examples=slow_examples or 10 * examples, **common)


@pytest.fixture(scope="module", autouse=True)
def thin_spaces():
    """Rank a slice of each space with the numpy export of the model (XGBoost's predictor costs tens of
    milliseconds per call on a few rows): the pipeline is the same, the time per example a hundredth."""
    from advisor.advice import subjects
    from advisor.model import predict

    numpy_model = predict.LatencyModel.load(boosters=False)
    spaces = {}

    def thin(self):  # every 160th config of the fused-MoE space, every 40th of the others
        if self.family.name not in spaces:
            space = self.family.space()
            spaces[self.family.name] = space[::160 if len(space) > 1000 else 40]
        return list(spaces[self.family.name])

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(predict, "model_for", lambda gpu=None: numpy_model)
        mp.setattr(subjects.FamilySubject, "space", thin)
        mp.setattr(subjects.LaunchSubject, "max_configs", 1)
        yield


def _digests(paths) -> dict:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.is_file()}


def cli(argv: list[str]) -> tuple[int, str, str]:
    """`advisor ARGV` in-process: its exit code, stdout and stderr; a test failure for an escaped exception."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except BaseException:  # noqa: BLE001  (what reaches a user as a traceback)
            pytest.fail(f"advisor {argv!r} raised:\n{traceback.format_exc()}")
    assert code in (0, 1, 2), (argv, code, err.getvalue())
    assert "Traceback" not in err.getvalue(), (argv, err.getvalue())
    if code == 2:
        assert len(err.getvalue().strip().splitlines()) == 1, (argv, err.getvalue())
    return code, out.getvalue(), err.getvalue()


# ----------------------------------------------------------------------------------------- value strategies

INTS = st.one_of(st.sampled_from([0, 1, -1, 7, 16, 32, 64, 128, 256, 512, 2**31, 2**40, 2**64]),
                 st.integers(-10, 10_000))
SCALARS = st.one_of(INTS, st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(),
                    st.text(max_size=8))
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                         max_size=3), max_leaves=6)
ENTRY_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")
POWERS = st.sampled_from([16, 32, 64, 128, 256])


@st.composite
def engine_entries(draw):
    """An entry: mostly the six keys with plausible or extreme values, sometimes keys missing or added."""
    entry = {"BLOCK_SIZE_M": draw(POWERS), "BLOCK_SIZE_N": draw(POWERS), "BLOCK_SIZE_K": draw(POWERS),
             "GROUP_SIZE_M": draw(st.sampled_from([1, 8, 16, 32])), "num_warps": draw(st.sampled_from([4, 8])),
             "num_stages": draw(st.sampled_from([2, 3, 4, 5]))}
    for key in draw(st.lists(st.sampled_from(ENTRY_KEYS), max_size=2)):
        entry[key] = draw(st.one_of(INTS, SCALARS))
    if draw(st.booleans()) and draw(st.booleans()):
        del entry[draw(st.sampled_from(ENTRY_KEYS))]
    if draw(st.integers(0, 5)) == 0:
        entry[draw(st.text(min_size=1, max_size=8))] = draw(SCALARS)
    return entry


KEYS = st.one_of(st.sampled_from(["1", "16", "64", "4096", "0", "-1", "064", " 64", "64.0", "1e3", "", "²",
                                  "１２", "triton_version"]), st.integers(1, 10_000).map(str))
ENCODINGS = st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "latin-1"])


@st.composite
def damaged(draw, text: str) -> bytes:
    """The text encoded one way or another, maybe cut short, maybe with bytes spliced in."""
    data = text.encode(draw(ENCODINGS), errors="replace")
    if draw(st.integers(0, 3)) == 0:
        data = data[:draw(st.integers(0, len(data)))]
    if draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    return data


@st.composite
def engine_files(draw) -> tuple[str, bytes]:
    shape = draw(st.integers(0, 6))
    if shape == 0:
        doc = draw(JSON)
    else:
        doc = {draw(KEYS): draw(engine_entries()) for _ in range(draw(st.integers(1, 3)))}
        if shape == 1:
            doc["triton_version"] = draw(SCALARS)
    return draw(st.sampled_from(ENGINE_NAMES)), draw(damaged(json.dumps(doc, indent=4)))


# ---------------------------------------------------------------------------------- engine config files

ENGINE_SETTINGS, ENGINE_SLOW = _budget(200)


_engine_views = [("h100", "json"), ("l4", "sarif"), ("h200", "github"), ("a10g", "text")]


def _engine_case(tmp_path_factory, name: str, data: bytes) -> None:
    folder = tmp_path_factory.mktemp("engine")
    path = folder / name
    path.write_bytes(data)
    gpu, format_ = _engine_views[len(data) % len(_engine_views)]
    cli(["suggest", str(path), "--gpu", gpu, "--format", format_, "--no-confirm", "--top-k", "1"])
    assert path.read_bytes() == data
    code, _, err = cli(["apply", str(path), "--no-confirm", "--top-k", "1", "--min-speedup", "1.0"])
    if path.read_bytes() != data:
        assert code == 0 and f"wrote {path}" in err, "the file changed but apply did not say it wrote it"
        from kernels.moe_configs import read_config_file

        read_config_file(path)  # what apply wrote reads back
    leftovers = {p.name for p in folder.iterdir()} - {name, name + ".bak"}
    assert not leftovers, leftovers


@ENGINE_SETTINGS
@given(case=engine_files())
def test_fuzz_engine_config_files(case, tmp_path_factory):
    _engine_case(tmp_path_factory, *case)


@pytest.mark.slow
@ENGINE_SLOW
@given(case=engine_files())
def test_fuzz_engine_config_files_long(case, tmp_path_factory):
    _engine_case(tmp_path_factory, *case)


# ------------------------------------------------------------------------------------------ launch traces

LAUNCH_PATHS = [("source",), ("kernel",), ("grid",), ("grid", 0), ("tensors",), ("tensors", 0), ("tensors", 0, "shape"),
                ("tensors", 1, "dtype"), ("tensors", 2, "stride"), ("scalars",), ("scalars", "M"), ("scalars", "K"),
                ("constexprs",), ("config",), ("config", "BLOCK_M"), ("config", "BLOCK_K"), ("config", "num_warps"),
                ("config", "num_stages"), ("config", "GROUP_M"), ("count",), ("line",)]


def _set(doc, path, value):
    node = doc
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        node.pop(path[-1])
    else:
        node[path[-1]] = value


_DELETE = object()


@st.composite
def traces(draw) -> bytes:
    launch = json.loads(json.dumps(LAUNCH))
    for path in draw(st.lists(st.sampled_from(LAUNCH_PATHS), max_size=3)):
        value = draw(st.one_of(st.just(_DELETE), INTS, JSON, POWERS))
        with contextlib.suppress(KeyError, IndexError, TypeError, AttributeError):  # a parent already mutated
            _set(launch, path, value)
    wrapper = draw(st.integers(0, 4))
    if wrapper == 0:
        doc = launch
    elif wrapper == 1:
        doc = [launch] * draw(st.integers(0, 2))
    elif wrapper == 2:
        doc = {"launches": [launch]}
    else:
        doc = {"format": draw(st.sampled_from(["triton-advisor-trace", "other", 3])),
               "version": draw(st.one_of(st.sampled_from([1, 2, 0]), SCALARS)),
               "gpu": draw(st.sampled_from([None, "NVIDIA H100 80GB HBM3", "NVIDIA L4", "tpu", 5])),
               "program": draw(st.one_of(st.just(["python", "x.py"]), JSON)), "launches": [launch]}
        if wrapper == 4:
            doc.pop(draw(st.sampled_from(list(doc))))
    return draw(damaged(json.dumps(doc)))


TRACE_SETTINGS, TRACE_SLOW = _budget(100)


def _trace_case(tmp_path_factory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("trace") / "launch.json"
    path.write_bytes(data)
    before = _digests(WATCHED)
    cli(["ceiling", str(path), "--format", "json"])
    cli(["predict", str(path), "--gpu", "l4"])
    cli(["suggest", str(path), "--format", "github", "--no-confirm", "--top-k", "1"])
    assert path.read_bytes() == data and _digests(WATCHED) == before


@TRACE_SETTINGS
@given(data=traces())
def test_fuzz_launch_traces(data, tmp_path_factory):
    _trace_case(tmp_path_factory, data)


@pytest.mark.slow
@TRACE_SLOW
@given(data=traces())
def test_fuzz_launch_traces_long(data, tmp_path_factory):
    _trace_case(tmp_path_factory, data)


# --------------------------------------------------------------------------------- CLI argument vectors

TARGETS = ["kernels/fused_moe.py", "kernels/gemm.py", "kernels/softmax.py", "kernels/attention.py",
           str(FIXTURES / "matmul_launch.json"), str(FIXTURES / "matmul_kernel.py"), "nowhere.py", "kernels",
           str(FIXTURES / "moe_mma_sync_sm90.sass"), "kernels/configs/E=8,N=7168,device_name=NVIDIA_H200.json"]
OPTION_VALUES = {
    "--preset": st.sampled_from(["mixtral-8x7b", "qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", "llama", ""]),
    "--tp": st.sampled_from(["1", "2", "3", "8", "0", "-2", "x"]),
    "--tokens": st.sampled_from(["1", "64", "1,4096", "0", "-5", "x", "1,,2", "99999999999999999999"]),
    "--gpu": st.sampled_from(["h100", "h200", "l4", "NVIDIA L4", "b200", "a100", "h10", "", "tpu"]),
    "--shape": st.sampled_from(["64,64,64", "16,4096,4096", "256,1024", "4,512,64", "1,2", "0,0,0", "a,b,c",
                                "64,64,64,64"]),
    "--config": st.sampled_from(["M64 N128 K64 G8 w4 s3", "M7 N32 K64 G1 w4 s3", "{}", "[]", "{", "null",
                                 json.dumps({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 1}),
                                 json.dumps({"BLOCK_SIZE_M": 2**40, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64,
                                             "GROUP_SIZE_M": 1})]),
    "--gemm": st.sampled_from(["1", "2", "3"]),
    "--format": st.sampled_from(["text", "json", "github", "sarif", "xml"]),
    "--min-speedup": st.sampled_from(["1.05", "1.0", "0.9", "nan", "inf", "x"]),
    "--top-k": st.sampled_from(["1", "0", "-1", "x"]),
    "--kernel": st.sampled_from(["matmul_kernel", "gemm_kernel", "nope"]),
    "--launch": st.sampled_from([str(FIXTURES / "matmul_launch.json"), "missing.json", "kernels/gemm.py"]),
    "--trace": st.sampled_from([str(FIXTURES / "matmul_launch.json"), "missing.json"]),
    "--config-dir": st.sampled_from(["/nope", "kernels/configs", str(FIXTURES)]),
    "--data": st.sampled_from([str(FIXTURES / "matmul_launch.json"), "missing.csv", "kernels"]),
    "--measure": st.sampled_from(["-1", "x"]),
}
FLAGS = ["--no-confirm", "--no-calibration", "--dry-run", "--help", "--version", "--", "-x", "--bogus"]


@st.composite
def argvs(draw) -> list[str]:
    command = draw(st.sampled_from(["presets", "configs", "ceiling", "predict", "suggest", "apply", "train", "nope"]))
    argv = [command]
    if command in ("ceiling", "predict", "suggest", "apply") and draw(st.integers(0, 9)):
        argv.append(draw(st.sampled_from(TARGETS)))
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.integers(0, 9))
        if kind < 7:
            option = draw(st.sampled_from(sorted(OPTION_VALUES)))
            argv += [option, draw(OPTION_VALUES[option])]
        elif kind < 9:
            argv.append(draw(st.sampled_from(FLAGS)))
        else:
            argv.append(draw(st.text(max_size=6)))
    if command in ("suggest", "apply"):
        argv += ["--no-confirm", "--top-k", "1", "--tokens", "64"]  # bounded work (the last value wins)
    if command == "apply":
        argv.append("--dry-run")  # never writes into the repository's files
    if command == "train" and "--data" not in argv:
        argv += ["--data", "missing.csv"]  # never trains on the whole dataset here
    return argv


ARGV_SETTINGS, ARGV_SLOW = _budget(500)


def _argv_case(argv: list[str]) -> None:
    before = _digests(WATCHED)
    cli(argv)
    assert _digests(WATCHED) == before, argv


@ARGV_SETTINGS
@given(argv=argvs())
def test_fuzz_cli_arguments(argv):
    _argv_case(argv)


@pytest.mark.slow
@ARGV_SLOW
@given(argv=argvs())
def test_fuzz_cli_arguments_long(argv):
    _argv_case(argv)


# ------------------------------------------------------------------------------------------- kernel files

SNIPPETS = ["def (", "\x00", "raise SystemExit(4)\n", "import sys\nsys.exit()\n", "import no_such_module_x\n",
            "raise ValueError('at import')\n", "1/0\n", "print('noise')\n", "@triton.jit\ndef matmul_kernel(x):\n"
            "    pass\n", "matmul_kernel = 3\n", "\t  \x0c", "'''", "é", "\ud800", "# " + "x" * 100_000 + "\n",
            "async def f(:\n", "@triton.autotune(configs=[triton.Config({'BLOCK_M': 7})], key=[])\n"]


@st.composite
def kernel_files(draw) -> bytes:
    text = KERNEL_SOURCE
    if draw(st.booleans()):
        text = text[:draw(st.integers(0, len(text)))]
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(SNIPPETS)) + text[at:]
    if draw(st.integers(0, 9)) == 0:
        text = text * draw(st.integers(2, 40))  # sizes: the same definitions many times over
    return draw(damaged(text))


# About a second an example (a file's capture and search): 25 in the default suite, the slow run's 1,000 as before.
KERNEL_SETTINGS, KERNEL_SLOW = _budget(25, 1000)


def _kernel_case(tmp_path_factory, data: bytes) -> None:
    # One file name per content: a module is imported once per path in a process.
    path = tmp_path_factory.mktemp("kernel") / f"k_{hashlib.sha256(data).hexdigest()[:16]}.py"
    path.write_bytes(data)
    launch = str(FIXTURES / "matmul_launch.json")
    cli(["ceiling", str(path), "--launch", launch, "--format", "json"])
    cli(["suggest", str(path), "--trace", launch, "--no-confirm", "--top-k", "1"])
    cli(["suggest", str(path)])
    cli(["apply", str(path), "--trace", launch, "--no-confirm", "--top-k", "1", "--dry-run"])
    assert path.read_bytes() == data


@KERNEL_SETTINGS
@given(data=kernel_files())
def test_fuzz_kernel_files(data, tmp_path_factory):
    _kernel_case(tmp_path_factory, data)


@pytest.mark.slow
@KERNEL_SLOW
@given(data=kernel_files())
def test_fuzz_kernel_files_long(data, tmp_path_factory):
    _kernel_case(tmp_path_factory, data)


# ------------------------------------------------------------------------------------------ the validator

CONFIGS = st.builds(lambda params, w, s: (params, w, s),
                    st.dictionaries(st.sampled_from(["BLOCK_M", "BLOCK_SIZE_N", "block_k", "TILE_X", "BLOCK",
                                                     "GROUP_M", "GROUP_SIZE_M", "EVEN_K", "SPLIT"]),
                                    st.one_of(INTS, SCALARS), max_size=5),
                    st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128]), st.integers(1, 10))
VALIDATOR_SETTINGS, VALIDATOR_SLOW = _budget(1200)  # cheap (no compile): keeps the default run at 2,000+


def _validator_case(case, gpu: str) -> None:
    from ceilings.errors import AdvisorError
    from ceilings.hardware import get_spec
    from ceilings.launch import Config
    from ceilings.validate import config_problem, is_tile_param

    params, warps, stages = case
    try:
        config = Config(params, warps, stages)
    except AdvisorError:
        return
    why = config_problem(config, get_spec(gpu), lambda c: None)
    if why is None:  # what passes is what Triton can build: power-of-two blocks within its limit
        for name, value in config.params.items():
            if is_tile_param(name) and not isinstance(value, bool):  # a bool there is a flag (BLOCK_SCALED)
                assert isinstance(value, int) and value > 0 and value & (value - 1) == 0 and value <= 2**20
        assert warps * 32 <= 1024
    else:
        assert isinstance(why, str) and why


GPUS = st.sampled_from(["h100", "h200", "l4", "a10g", "b200", "rtx4090"])


@VALIDATOR_SETTINGS
@given(case=CONFIGS, gpu=GPUS)
def test_fuzz_validator(case, gpu):
    _validator_case(case, gpu)


@pytest.mark.slow
@VALIDATOR_SLOW
@given(case=CONFIGS, gpu=GPUS)
def test_fuzz_validator_long(case, gpu):
    _validator_case(case, gpu)


def test_budget_is_at_least_2000_examples():
    total = sum(s.max_examples for s in (ENGINE_SETTINGS, TRACE_SETTINGS, ARGV_SETTINGS, KERNEL_SETTINGS,
                                         VALIDATOR_SETTINGS))
    assert total >= 2000
