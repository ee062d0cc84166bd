"""The engine config files we ship and write load in the engines.

The default suite reads every shipped file, every file `advisor apply` writes and every file the
`advisor tune` writer writes with `read_as_strictest_engine`, a reader as strict as the strictest engine
release we support (vLLM 0.9.2: `{int(key): entry for key, entry in json.load(f).items()}`, each entry passed
to the kernel as its keyword arguments). The `slow` test loads the same files with vLLM 0.9.2's own
`get_config_file_name` / `get_moe_configs` / `try_get_optimal_moe_config` (tests/engine_loader.py, in a
subprocess). It needs vLLM importable: `pip install --no-deps vllm==0.9.2` plus the modules its fused-MoE
package imports, or `pip install .[engines]` in an environment of its own (vLLM pins its torch); a folder
holding a `--target` install can be given in TRITON_ADVISOR_ENGINE_PATH. Its cost (2026-11-22): the wheel is 383 MB
(1.1 GB installed, mostly CUDA libraries the loader never loads), the modules its import needs about 180 MB
(cachetools cloudpickle psutil regex pyyaml pyzmq transformers==4.53.2 huggingface_hub==0.33.4 tqdm tokenizers
safetensors requests idna urllib3 certifi charset_normalizer packaging filelock fsspec msgspec pydantic
pydantic_core typing_inspection annotated_types blake3 pillow pybase64 compressed_tensors loguru, all --no-deps),
and the import about 40 s: too heavy for every CI run, hence `slow`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.advice.apply import plan_engine_json, write
from advisor.measure import moe_tune
from ceilings.launch import Config
from kernels.moe_bench import MoEGemmSpec
from kernels.moe_configs import SHIPPED_DIR, config_file_name, read_config_file, write_config_file
from kernels.moe_presets import get_preset

# The kernel's keyword arguments in an engine entry (vLLM 0.9.2 passes the entry as **config).
ENGINE_ENTRY_KEYS = {"BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages"}
_FILE_NAME = re.compile(r"E=(\d+),N=(\d+),device_name=([^,]+)\.json")
SHIPPED = sorted(SHIPPED_DIR.glob("*.json"))


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError(f"duplicate keys {sorted(k for k in set(keys) if keys.count(k) > 1)}")
    return dict(pairs)


def read_as_strictest_engine(text: str) -> dict[int, dict]:
    """The file as vLLM 0.9.2 reads and uses it, with nothing forgiven: every top-level key a token count,
    in increasing order (the engine breaks ties of its nearest-key lookup by file order), every entry exactly
    the kernel's six keyword arguments as positive integers, no key twice."""
    obj = json.loads(text, object_pairs_hook=_no_duplicates)
    if not isinstance(obj, dict) or not obj:
        raise ValueError("top level must be a non-empty object")
    out: dict[int, dict] = {}
    for key, entry in obj.items():
        if not re.fullmatch(r"[0-9]+", key):
            raise ValueError(f"key {key!r} is not a token count (int({key!r}) fails in vLLM 0.9.2)")
        if not isinstance(entry, dict) or set(entry) != ENGINE_ENTRY_KEYS:
            raise ValueError(f"entry {key!r}: keys {sorted(entry) if isinstance(entry, dict) else entry!r} are not "
                             f"the kernel's {sorted(ENGINE_ENTRY_KEYS)}")
        for name, value in entry.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"entry {key!r}: {name}={value!r} is not a positive integer")
        out[int(key)] = entry
    if list(out) != sorted(out):
        raise ValueError(f"token counts {list(out)} are not in increasing order")
    return out


def moe(bm, bn, bk, gm, warps, stages) -> Config:
    return Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": gm}, warps, stages)


def written_by_apply(folder: Path) -> list[Path]:
    """A new file apply creates, and a shipped file apply adds to and replaces an entry of."""
    folder.mkdir(parents=True, exist_ok=True)
    new = folder / "E=8,N=7168,device_name=NVIDIA_L40S.json"
    write(plan_engine_json(new, {256: moe(64, 128, 64, 16, 4, 3), 1: moe(16, 32, 128, 1, 4, 3)}))
    changed = folder / SHIPPED[0].name
    shutil.copy(SHIPPED[0], changed)
    first = min(read_config_file(changed).configs)
    write(plan_engine_json(changed, {first: moe(32, 64, 64, 8, 4, 2), 3000: moe(128, 128, 64, 1, 8, 3)}),
          backup=False)
    return [new, changed]


def written_by_tune(folder: Path) -> list[Path]:
    """`advisor tune --write-config` on a sweep: its table and side file through the same functions."""
    e, top_k, k, n = get_preset("mixtral-8x7b").shape(2).gemm1()
    specs = [MoEGemmSpec(e, top_k, k, n, m) for m in (1, 64)]
    rows = []
    for spec, config, us in ((specs[0], moe(16, 32, 128, 1, 4, 3), 80.0), (specs[0], moe(16, 64, 128, 1, 4, 3), 90.0),
                             (specs[1], moe(64, 128, 128, 1, 4, 4), 313.0)):
        rows.append({"kernel": moe_tune.KERNEL, "shape": spec.shape_label, "M": str(spec.m), "status": "ok",
                     "us": str(us), "triton": "3.6.0", "num_warps": str(config.num_warps),
                     "num_stages": str(config.num_stages), **{p: str(v) for p, v in config.params.items()}})
    device = "NVIDIA H100 80GB HBM3"
    path = folder / config_file_name(e, get_preset("mixtral-8x7b").shape(2).config_file_n, device)
    write_config_file(path, moe_tune.tuned_table(rows, specs), moe_tune.tuned_meta(rows, specs, device, "t.csv"))
    return [path]


# ------------------------------------------------------------------------------------------------ default suite

def test_there_are_shipped_files():
    assert len(SHIPPED) >= 6


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_file_reads_in_the_strictest_engine(path):
    entries = read_as_strictest_engine(path.read_text())
    table = read_config_file(path)
    assert {m: Config.from_engine_entry(e) for m, e in entries.items()} == table.configs


def test_files_written_by_apply_and_tune_read_in_the_strictest_engine(tmp_path):
    for path in written_by_apply(tmp_path / "apply") + written_by_tune(tmp_path / "tune"):
        entries = read_as_strictest_engine(path.read_text())
        assert {m: Config.from_engine_entry(e) for m, e in entries.items()} == read_config_file(path).configs
    assert sorted(p.name for p in (tmp_path / "tune").iterdir()) == [
        "E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json", "E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json.meta"]


@pytest.mark.parametrize("text, why", [
    ('{"triton_version": "3.6.0", "1": ENTRY}', "not a token count"),
    ('{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, "num_warps": 4}}',
     "keys"),
    ('{"1": ENTRY, "1": ENTRY}', "duplicate"),
    ('{"16": ENTRY, "1": ENTRY}', "increasing"),
    ('{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, "num_warps": 4, '
     '"num_stages": true}}', "positive integer"),
])
def test_the_strict_reader_refuses_what_the_engine_would_not_take(text, why):
    entry = '{"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, "num_warps": 4, ' \
            '"num_stages": 3}'
    with pytest.raises(ValueError, match=why):
        read_as_strictest_engine(text.replace("ENTRY", entry))


# ------------------------------------------------------------------------------------------------ vLLM 0.9.2

def _engine_env() -> dict:
    env = dict(os.environ)
    extra = os.environ.get("TRITON_ADVISOR_ENGINE_PATH")
    if extra:
        env["PYTHONPATH"] = os.pathsep.join([extra, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _load_with_vllm(tmp_path: Path, groups: list[tuple[str, list[Path]]], ms: list[int]) -> dict:
    """Copy each group's files into a `configs` folder of its own and load them all in one vLLM process."""
    request = []
    for i, (device, paths) in enumerate(groups):
        folder = tmp_path / f"engine{i}" / "configs"
        folder.mkdir(parents=True)
        for path in paths:
            shutil.copy(path, folder / path.name)
        request.append({"folder": str(folder), "device": device, "files": [
            {"E": int(_FILE_NAME.fullmatch(p.name).group(1)), "N": int(_FILE_NAME.fullmatch(p.name).group(2)),
             "ms": ms} for p in paths]})
    (tmp_path / "request.json").write_text(json.dumps({"groups": request}))
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("engine_loader.py")),
                           str(tmp_path / "request.json")], capture_output=True, text=True, env=_engine_env(),
                          timeout=600)
    if done.returncode == 3:
        pytest.skip(f"vLLM 0.9.2 is not importable here ({done.stderr.strip()[-200:]}); see this module's docstring")
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _device(path: Path) -> str:
    return _FILE_NAME.fullmatch(path.name).group(3).replace("_", " ")


@pytest.mark.slow
def test_vllm_092_loads_every_shipped_and_written_file(tmp_path):
    written = written_by_apply(tmp_path / "apply") + written_by_tune(tmp_path / "tune")
    # One group per file: a written file may have a shipped file's name.
    files = SHIPPED + written
    result = _load_with_vllm(tmp_path / "engine", [(_device(p), [p]) for p in files], list(range(1, 8193)))
    assert result["vllm"] == "0.9.2"
    for path, (got,) in zip(files, result["groups"], strict=True):
        assert got["name"] == path.name and got["error"] is None, (path, got["error"])
        table = read_config_file(path)
        assert {int(k): Config.from_engine_entry(v) for k, v in got["configs"].items()} == table.configs
        for m, entry in got["lookups"].items():  # the engine picks the entry our lookup picks
            assert Config.from_engine_entry(entry) == table.lookup(int(m)), (path.name, m)


@pytest.mark.slow
def test_vllm_092_fails_on_a_triton_version_key(tmp_path):
    """The test above can fail: the layout the shipped files had before fails in vLLM 0.9.2's loader."""
    old = tmp_path / SHIPPED[0].name
    old.write_text(json.dumps({"triton_version": "3.6.0", **json.loads(SHIPPED[0].read_text())}, indent=4) + "\n")
    ((got,),) = _load_with_vllm(tmp_path / "engine", [(_device(old), [old])], [1])["groups"]
    assert "invalid literal for int()" in got["error"]
