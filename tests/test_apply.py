"""`advisor apply`'s file editing: engine JSON files and @triton.autotune lists, byte-exact, atomic, idempotent."""

from __future__ import annotations

import ast
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from advisor.advice.apply import (
    Edit,
    backup_path,
    check_fits,
    plan_autotune,
    plan_engine_json,
    read_autotune_configs,
    rollback,
    write,
)
from ceilings.errors import AdvisorError
from ceilings.launch import Config
from kernels.moe_configs import SHIPPED_DIR, format_config_table, read_config_file

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "apply"
ENGINE_NAME = "E=128,N=192,device_name=NVIDIA_H100_80GB_HBM3.json"  # a copy of a shipped file
KERNELS_NAME = "autotuned_kernels.py"


def moe(bm: int, bn: int, bk: int, gm: int, warps: int, stages: int) -> Config:
    return Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": gm}, warps, stages)


def mm(bm: int, bn: int, bk: int, gm: int, warps: int, stages: int) -> Config:
    return Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": gm}, warps, stages)


@pytest.fixture
def engine_file(tmp_path) -> Path:
    path = tmp_path / ENGINE_NAME
    shutil.copyfile(FIXTURES / ENGINE_NAME, path)
    return path


@pytest.fixture
def kernel_file(tmp_path) -> Path:
    path = tmp_path / KERNELS_NAME
    shutil.copyfile(FIXTURES / KERNELS_NAME, path)
    return path


def files_in(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


# ------------------------------------------------------------------------------------------------
# Engine fused-MoE JSON files.
# ------------------------------------------------------------------------------------------------
ENGINE_AFTER = """\
{
    "triton_version": "3.6.0",
    "1": {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 32,
        "BLOCK_SIZE_K": 256,
        "GROUP_SIZE_M": 1,
        "num_warps": 4,
        "num_stages": 3
    },
    "16": {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 64,
        "BLOCK_SIZE_K": 128,
        "GROUP_SIZE_M": 1,
        "num_warps": 4,
        "num_stages": 4
    },
    "32": {
        "BLOCK_SIZE_M": 32,
        "BLOCK_SIZE_N": 64,
        "BLOCK_SIZE_K": 128,
        "GROUP_SIZE_M": 8,
        "num_warps": 4,
        "num_stages": 3
    },
    "64": {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 64,
        "BLOCK_SIZE_K": 128,
        "GROUP_SIZE_M": 64,
        "num_warps": 4,
        "num_stages": 2
    },
    "256": {
        "BLOCK_SIZE_M": 32,
        "BLOCK_SIZE_N": 128,
        "BLOCK_SIZE_K": 128,
        "GROUP_SIZE_M": 16,
        "num_warps": 4,
        "num_stages": 2
    },
    "1024": {
        "BLOCK_SIZE_M": 64,
        "BLOCK_SIZE_N": 128,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 64,
        "num_warps": 8,
        "num_stages": 3
    },
    "4096": {
        "BLOCK_SIZE_M": 128,
        "BLOCK_SIZE_N": 128,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 1,
        "num_warps": 4,
        "num_stages": 3
    }
}
"""

# M=32 is new, M=16 replaced, M=1 given with the config it already has.
ENGINE_ENTRIES = {32: moe(32, 64, 128, 8, 4, 3), 16: moe(16, 64, 128, 1, 4, 4), 1: moe(16, 32, 256, 1, 4, 3)}


def test_engine_update_is_byte_exact_and_keeps_a_backup(engine_file):
    before = engine_file.read_bytes()
    edit = plan_engine_json(engine_file, ENGINE_ENTRIES)
    assert edit.changed and edit.before == before and engine_file.read_bytes() == before  # planning writes nothing
    assert edit.after.decode() == ENGINE_AFTER
    assert edit.what == f"3 entries of {engine_file.stem} (M=1, 16, 32)"
    diff = edit.diff()
    assert diff.startswith(f"--- a/{str(engine_file).lstrip('/')}\n+++ b/{str(engine_file).lstrip('/')}\n")
    assert '+    "32": {\n' in diff and '-        "GROUP_SIZE_M": 32,\n' in diff
    saved = write(edit)
    assert saved == backup_path(engine_file) == engine_file.with_name(ENGINE_NAME + ".bak")
    assert engine_file.read_text() == ENGINE_AFTER
    assert saved.read_bytes() == before
    assert files_in(engine_file.parent) == {ENGINE_NAME, ENGINE_NAME + ".bak"}  # no temp file left
    # kernels.moe_configs reads the result back and its own writer formats it the same
    table = read_config_file(engine_file)
    assert table.configs[32] == ENGINE_ENTRIES[32] and list(table.configs) == [1, 16, 32, 64, 256, 1024, 4096]
    assert format_config_table(table) == ENGINE_AFTER


def test_engine_rerun_is_idempotent(engine_file):
    write(plan_engine_json(engine_file, ENGINE_ENTRIES))
    backup_path(engine_file).unlink()
    stamp = engine_file.stat().st_mtime_ns
    again = plan_engine_json(engine_file, ENGINE_ENTRIES)
    assert not again.changed and again.diff() == ""
    assert write(again) is None
    assert engine_file.read_text() == ENGINE_AFTER and engine_file.stat().st_mtime_ns == stamp
    assert files_in(engine_file.parent) == {ENGINE_NAME}  # no new .bak


@pytest.mark.parametrize("path", sorted(SHIPPED_DIR.glob("*.json")), ids=lambda p: p.name)
def test_shipped_files_with_their_own_entries_do_not_change(path):
    edit = plan_engine_json(path, read_config_file(path).configs)
    assert not edit.changed and edit.diff() == ""


def test_new_engine_file_has_sorted_keys_and_engine_layout(tmp_path):
    path = tmp_path / "E=8,N=7168,device_name=NVIDIA_H200.json"
    edit = plan_engine_json(path, {64: moe(64, 128, 64, 16, 4, 4), 1: moe(16, 64, 128, 1, 4, 4),
                                   16: moe(16, 64, 256, 1, 4, 3)})
    assert edit.before is None and edit.digest == "" and edit.changed
    assert edit.what == "3 entries of E=8,N=7168,device_name=NVIDIA_H200 (M=1, 16, 64), new file"
    assert edit.diff().startswith(f"--- /dev/null\n+++ b/{str(path).lstrip('/')}\n")
    assert write(edit) is None  # nothing to back up
    assert path.read_text() == """\
{
    "1": {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 64,
        "BLOCK_SIZE_K": 128,
        "GROUP_SIZE_M": 1,
        "num_warps": 4,
        "num_stages": 4
    },
    "16": {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 64,
        "BLOCK_SIZE_K": 256,
        "GROUP_SIZE_M": 1,
        "num_warps": 4,
        "num_stages": 3
    },
    "64": {
        "BLOCK_SIZE_M": 64,
        "BLOCK_SIZE_N": 128,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 16,
        "num_warps": 4,
        "num_stages": 4
    }
}
"""
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0600
    assert files_in(tmp_path) == {path.name}


def test_engine_file_keeps_crlf_line_ends(engine_file):
    engine_file.write_bytes(engine_file.read_bytes().replace(b"\n", b"\r\n"))
    assert plan_engine_json(engine_file, ENGINE_ENTRIES).after == ENGINE_AFTER.replace("\n", "\r\n").encode()


def test_engine_file_keeps_its_own_indent_and_entry_layout(tmp_path):
    path = tmp_path / "E=8,N=64,device_name=X.json"
    # 2-space indent, no final newline, an entry whose keys are not in the engines' order
    path.write_text('{\n  "8": {\n    "num_warps": 4,\n    "num_stages": 2,\n    "BLOCK_SIZE_M": 16,\n'
                    '    "BLOCK_SIZE_N": 32,\n    "BLOCK_SIZE_K": 64,\n    "GROUP_SIZE_M": 1\n  }\n}')
    edit = plan_engine_json(path, {2: moe(16, 32, 64, 1, 4, 5)})
    assert edit.after.decode() == (
        '{\n'
        '  "2": {\n    "BLOCK_SIZE_M": 16,\n    "BLOCK_SIZE_N": 32,\n    "BLOCK_SIZE_K": 64,\n'
        '    "GROUP_SIZE_M": 1,\n    "num_warps": 4,\n    "num_stages": 5\n  },\n'
        '  "8": {\n    "num_warps": 4,\n    "num_stages": 2,\n    "BLOCK_SIZE_M": 16,\n'
        '    "BLOCK_SIZE_N": 32,\n    "BLOCK_SIZE_K": 64,\n    "GROUP_SIZE_M": 1\n  }\n}')
    # the same config for M=8, given in another order: equal, so nothing changes
    assert not plan_engine_json(path, {8: moe(16, 32, 64, 1, 4, 2)}).changed


@pytest.mark.parametrize("text, message", [
    ('{"1": {"BLOCK_SIZE_M": 16,,}}', "not valid JSON"),
    ('[1, 2]', "top level must be an object"),
    ('{"1": {"BLOCK_SIZE_M": 16, "num_warps": 4}}', "missing BLOCK_SIZE_N"),
    ('{"1": {"BLOCK_SIZE_M": 16}, "1": {"BLOCK_SIZE_M": 32}}', "appears twice"),
])
def test_engine_refuses_unparseable_files(tmp_path, text, message):
    path = tmp_path / "E=8,N=64,device_name=X.json"
    path.write_text(text)
    with pytest.raises(AdvisorError, match=message) as exc:
        plan_engine_json(path, {1: moe(16, 32, 64, 1, 4, 3)})
    assert str(path) in str(exc.value)
    assert path.read_text() == text and files_in(tmp_path) == {path.name}


def test_engine_refuses_a_config_that_is_not_fused_moe(engine_file):
    with pytest.raises(AdvisorError, match=r"M=8: config M64 N64 w4 s3 is not a fused-MoE config"):
        plan_engine_json(engine_file, {8: Config({"BLOCK_M": 64, "BLOCK_N": 64})})


# ------------------------------------------------------------------------------------------------
# @triton.autotune lists in source.
# ------------------------------------------------------------------------------------------------
KERNELS_HEAD = '''\
"""Two kernels for the `advisor apply` tests: a plain one and an autotuned one — written for these tests."""

import triton
import triton.language as tl

# Tile sizes measured on an H100 (µs per launch, median of 100) — keep the list short.


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)


@triton.autotune(
    configs=[  # fastest first
'''
KERNELS_TAIL = '''\
    ],
    key=['M', 'N', 'K'],  # re-tune when a size changes
)
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        x = tl.load(a_ptr + rm[:, None] * stride_am + (k * BLOCK_K + rk)[None, :] * stride_ak)
        y = tl.load(b_ptr + (k * BLOCK_K + rk)[:, None] * stride_bk + rn[None, :] * stride_bn)
        acc += tl.dot(x, y)  # fp32 accumulate — «exact» enough
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(tl.float16))
'''
KERNELS_LIST = '''\
        # small problems
        triton.Config({'BLOCK_M': 64, 'BLOCK_N': 64, 'BLOCK_K': 32, 'GROUP_M': 8}, num_warps=4, num_stages=4),
        triton.Config({'BLOCK_M':128,'BLOCK_N': 64, 'BLOCK_K': 32, 'GROUP_M': 8},  num_stages=4, num_warps=4),
        # large problems: 128×256 tiles
        triton.Config(
            {'BLOCK_M': 128, 'BLOCK_N': 256, 'BLOCK_K': 64, 'GROUP_M': 8},
            8, 3,
        ),
'''
KERNELS_BEFORE = KERNELS_HEAD + KERNELS_LIST + KERNELS_TAIL

KERNELS_AFTER_ADD = KERNELS_HEAD + '''\
        triton.Config({'BLOCK_M': 32, 'BLOCK_N': 32, 'BLOCK_K': 64, 'GROUP_M': 4}, num_warps=2, num_stages=5),
        triton.Config({'BLOCK_M': 256, 'BLOCK_N': 128, 'BLOCK_K': 64, 'GROUP_M': 8}, num_warps=8, num_stages=3),
''' + KERNELS_LIST + KERNELS_TAIL

KERNELS_AFTER_REPLACE = KERNELS_HEAD + '''\
        triton.Config({'BLOCK_M': 256, 'BLOCK_N': 128, 'BLOCK_K': 64, 'GROUP_M': 8}, num_warps=8, num_stages=3),
        triton.Config({'BLOCK_M': 64, 'BLOCK_N': 64, 'BLOCK_K': 32, 'GROUP_M': 8}, num_warps=4, num_stages=4),
''' + KERNELS_TAIL

# Two new ones; the third equals the list's positional `8, 3` entry, given in another key order.
ADD = [mm(32, 32, 64, 4, 2, 5), mm(256, 128, 64, 8, 8, 3),
       Config({"GROUP_M": 8, "BLOCK_K": 64, "BLOCK_N": 256, "BLOCK_M": 128}, num_warps=8, num_stages=3)]
REPLACE = [mm(256, 128, 64, 8, 8, 3), mm(64, 64, 32, 8, 4, 4)]


def list_span(data: bytes) -> tuple[int, int]:
    """Byte offsets of the `[` and just past the `]` of the fixture's configs list."""
    tree = ast.parse(data)
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.keyword) and n.arg == "configs").value
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    return starts[node.lineno - 1] + node.col_offset, starts[node.end_lineno - 1] + node.end_col_offset


def test_fixture_is_what_the_tests_expect(kernel_file):
    assert kernel_file.read_text(encoding="utf-8") == KERNELS_BEFORE


def test_read_autotune_configs_gives_configs_and_lines(kernel_file):
    assert read_autotune_configs(kernel_file) == [(mm(64, 64, 32, 8, 4, 4), 19), (mm(128, 64, 32, 8, 4, 4), 20),
                                                  (mm(128, 256, 64, 8, 8, 3), 22)]
    assert read_autotune_configs(kernel_file, "matmul_kernel") == read_autotune_configs(kernel_file)


def test_autotune_add_is_byte_exact(kernel_file):
    before = kernel_file.read_bytes()
    edit = plan_autotune(kernel_file, None, ADD)
    assert edit.what == ("add 2 configs to the @triton.autotune list of matmul_kernel: M32 N32 K64 G4 w2 s5, "
                         "M256 N128 K64 G8 w8 s3")
    assert edit.after.decode("utf-8") == KERNELS_AFTER_ADD
    start, end = list_span(before)
    assert edit.after[:start] == before[:start]  # everything outside the list: identical
    assert edit.after[len(edit.after) - (len(before) - end):] == before[end:]
    assert write(edit).read_bytes() == before
    assert kernel_file.read_bytes() == KERNELS_AFTER_ADD.encode("utf-8")
    assert [c for c, _ in read_autotune_configs(kernel_file)] == ADD[:2] + [c for c, _ in
                                                                         read_autotune_configs(FIXTURES / KERNELS_NAME)]


def test_autotune_add_is_idempotent(kernel_file):
    write(plan_autotune(kernel_file, "matmul_kernel", ADD))
    backup_path(kernel_file).unlink()
    again = plan_autotune(kernel_file, "matmul_kernel", ADD)
    assert not again.changed and again.diff() == "" and again.what.endswith("all already there")
    assert write(again) is None
    assert kernel_file.read_text(encoding="utf-8") == KERNELS_AFTER_ADD
    assert files_in(kernel_file.parent) == {KERNELS_NAME}


def test_autotune_replace_is_byte_exact_and_idempotent(kernel_file):
    before = kernel_file.read_bytes()
    edit = plan_autotune(kernel_file, "matmul_kernel", REPLACE, mode="replace")
    assert edit.after.decode("utf-8") == KERNELS_AFTER_REPLACE
    start, end = list_span(before)
    assert edit.after[:start] == before[:start]
    assert edit.after[len(edit.after) - (len(before) - end):] == before[end:]
    assert "-        # large problems: 128×256 tiles\n" in edit.diff()
    write(edit)
    assert kernel_file.read_text(encoding="utf-8") == KERNELS_AFTER_REPLACE
    again = plan_autotune(kernel_file, "matmul_kernel", REPLACE, mode="replace")
    assert not again.changed and write(again) is None


def test_autotune_keeps_crlf_line_ends(kernel_file):
    kernel_file.write_bytes(KERNELS_BEFORE.replace("\n", "\r\n").encode("utf-8"))
    edit = plan_autotune(kernel_file, None, ADD)
    assert edit.after == KERNELS_AFTER_ADD.replace("\n", "\r\n").encode("utf-8")


def test_autotune_kernel_names(kernel_file):
    with pytest.raises(AdvisorError, match="kernel scale_kernel has no @triton.autotune.*matmul_kernel"):
        plan_autotune(kernel_file, "scale_kernel", ADD)
    with pytest.raises(AdvisorError, match="no kernel nope; autotuned kernels here: matmul_kernel"):
        plan_autotune(kernel_file, "nope", ADD)


def edit_source(tmp_path, source: str, kernel: str | None, configs: list[Config], mode: str = "add") -> str:
    path = tmp_path / "k.py"
    path.write_text(source, encoding="utf-8")
    return plan_autotune(path, kernel, configs, mode).after.decode("utf-8")


def test_several_autotuned_kernels_need_a_name(tmp_path):
    source = ("import triton\n\n\n@triton.autotune(configs=[triton.Config({'B': 1})], key=[])\n@triton.jit\n"
              "def a(x):\n    pass\n\n\n@triton.autotune(configs=[triton.Config({'B': 2})], key=[])\n@triton.jit\n"
              "def b(x):\n    pass\n")
    with pytest.raises(AdvisorError, match=r"2 autotuned kernels \(a, b\); name the one"):
        edit_source(tmp_path, source, None, [Config({"B": 4})])
    assert edit_source(tmp_path, source, "b", [Config({"B": 4})]) == source.replace(
        "[triton.Config({'B': 2})]", "[triton.Config({'B': 4}, num_warps=4, num_stages=3), triton.Config({'B': 2})]")


def test_one_line_list_after_non_ascii_text_on_the_same_line(tmp_path):
    # ast's columns are UTF-8 byte offsets: the `µ` before the list must not shift the edit
    source = ('import triton\n\n\n@triton.autotune(key=["µs"], configs=[triton.Config({"B": 1}, num_warps=4, '
              'num_stages=3)])  # ±\n@triton.jit\ndef k(x):\n    pass\n')
    assert edit_source(tmp_path, source, "k", [Config({"B": 2}, 8, 2)]) == (
        'import triton\n\n\n@triton.autotune(key=["µs"], configs=[triton.Config({"B": 2}, num_warps=8, num_stages=2), '
        'triton.Config({"B": 1}, num_warps=4, num_stages=3)])  # ±\n@triton.jit\ndef k(x):\n    pass\n')
    assert edit_source(tmp_path, source, "k", [Config({"B": 2}, 8, 2), Config({"B": 3})], "replace") == (
        'import triton\n\n\n@triton.autotune(key=["µs"], configs=[triton.Config({"B": 2}, num_warps=8, num_stages=2), '
        'triton.Config({"B": 3}, num_warps=4, num_stages=3)])  # ±\n@triton.jit\ndef k(x):\n    pass\n')


def test_imported_config_name_hanging_list_and_positional_style(tmp_path):
    source = ("from triton import Config, autotune, jit\n\n\n"
              "@autotune(configs=[Config({'B': 1}, 4, 3),\n"
              "                   Config({'B': 2}, 4, 3)],  # é\n"
              "          key=['n'])\n@jit\ndef k(x, n):\n    pass\n")
    assert edit_source(tmp_path, source, None, [Config({"B": 4}, 2, 2), Config({"B": 2})]) == (
        "from triton import Config, autotune, jit\n\n\n"
        "@autotune(configs=[Config({'B': 4}, 2, 2),\n"
        "                   Config({'B': 1}, 4, 3),\n"
        "                   Config({'B': 2}, 4, 3)],  # é\n"
        "          key=['n'])\n@jit\ndef k(x, n):\n    pass\n")


def test_empty_list(tmp_path):
    source = 'import triton\n\n\n@triton.autotune(configs=[], key=["n"])\n@triton.jit\ndef k(x, n):\n    pass\n'
    assert edit_source(tmp_path, source, None, [Config({"B": 4}, 2, 2)]) == (
        'import triton\n\n\n@triton.autotune(configs=[\n    triton.Config({"B": 4}, num_warps=2, num_stages=2),\n'
        '], key=["n"])\n@triton.jit\ndef k(x, n):\n    pass\n')


MODULE_LIST = """\
import triton

# configs shared by both kernels
CONFIGS = [
    triton.Config({"BLOCK": 128}, num_warps=4, num_stages=2),
]


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def k1(x, n):
    pass


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def k2(x, n):
    pass
"""


def test_list_bound_to_a_module_level_name_is_edited_where_it_is_written(tmp_path):
    path = tmp_path / "k.py"
    path.write_text(MODULE_LIST)
    edit = plan_autotune(path, "k1", [Config({"BLOCK": 256}, 8, 3)])
    assert edit.after.decode() == MODULE_LIST.replace(
        "CONFIGS = [\n", 'CONFIGS = [\n    triton.Config({"BLOCK": 256}, num_warps=8, num_stages=3),\n')
    assert "(CONFIGS, line 4, shared with k2)" in edit.what
    assert read_autotune_configs(path, "k2") == [(Config({"BLOCK": 128}, 4, 2), 5)]


@pytest.mark.parametrize("configs_source, message", [
    ("configs=get_configs()", r"k\.py:\d+: the autotune configs of k are computed \(get_configs\(\)\)"),
    ("configs=[triton.Config({'B': b}) for b in (1, 2)]", r"k\.py:\d+: the autotune configs of k are computed"),
    ("configs=BASE + [triton.Config({'B': 2})]", "are computed"),
    ("configs=MADE", r"k\.py:4: the autotune configs of k are computed \(get_configs\(\)\) by MADE at line 4"),
    ("configs=GROWN", "GROWN is changed at line 6"),
    ("configs=UNKNOWN", "UNKNOWN is not defined in this file"),
])
def test_computed_lists_are_refused(tmp_path, configs_source, message):
    source = ("import triton\n\nBASE = [triton.Config({'B': 1})]\nMADE = get_configs()\nGROWN = []\n"
              "GROWN.append(triton.Config({'B': 1}))\n\n\n"
              f"@triton.autotune({configs_source}, key=[])\n@triton.jit\ndef k(x):\n    pass\n")
    path = tmp_path / "k.py"
    path.write_text(source)
    with pytest.raises(AdvisorError, match=message):
        plan_autotune(path, "k", [Config({"B": 4})])
    assert path.read_text() == source and files_in(tmp_path) == {"k.py"}


def test_non_literal_elements(tmp_path):
    source = ("import triton\n\nB = 64\n\n\n@triton.autotune(configs=[\n    triton.Config({'B': B}),\n], key=[])\n"
              "@triton.jit\ndef k(x):\n    pass\n")
    with pytest.raises(AdvisorError, match=r"k\.py:7: an autotune config of k is not a literal"):
        edit_source(tmp_path, source, "k", [Config({"B": 4})])
    with pytest.raises(AdvisorError, match=r"k\.py:7: .*the autotune space cannot be read"):
        read_autotune_configs(tmp_path / "k.py")
    # replacing does not need to read them
    assert edit_source(tmp_path, source, "k", [Config({"B": 4})], "replace") == source.replace(
        "triton.Config({'B': B}),", "triton.Config({'B': 4}, num_warps=4, num_stages=3),")


def test_unparseable_python_is_refused(tmp_path):
    path = tmp_path / "k.py"
    path.write_text("import triton\n\n@triton.autotune(configs=[triton.Config({'B': 1})], key=[]\ndef k(:\n")
    with pytest.raises(AdvisorError, match=r"k\.py:\d+: cannot parse the file"):
        plan_autotune(path, None, [Config({"B": 4})])
    with pytest.raises(AdvisorError, match="no @triton.autotune kernel"):
        edit_source(tmp_path, "def f():\n    pass\n", None, [Config({"B": 4})])


# ------------------------------------------------------------------------------------------------
# Writing: refusals, mode, rollback; resource checks.
# ------------------------------------------------------------------------------------------------
def test_write_keeps_the_mode(kernel_file):
    kernel_file.chmod(0o640)
    saved = write(plan_autotune(kernel_file, None, ADD))
    assert stat.S_IMODE(kernel_file.stat().st_mode) == 0o640 == stat.S_IMODE(saved.stat().st_mode)


def test_write_refuses_a_file_changed_since_it_was_read(kernel_file, tmp_path):
    edit = plan_autotune(kernel_file, None, ADD)
    kernel_file.write_text(KERNELS_BEFORE + "# edited meanwhile\n", encoding="utf-8")
    with pytest.raises(AdvisorError, match=f"{kernel_file} changed since it was read; run again"):
        write(edit)
    assert kernel_file.read_text(encoding="utf-8") == KERNELS_BEFORE + "# edited meanwhile\n"
    assert files_in(tmp_path) == {KERNELS_NAME}  # no .bak
    # a planned new file that appeared in the meantime
    path = tmp_path / "E=8,N=64,device_name=X.json"
    edit = plan_engine_json(path, {1: moe(16, 32, 64, 1, 4, 3)})
    path.write_text("{}\n")
    with pytest.raises(AdvisorError, match="changed since it was read"):
        write(edit)
    assert path.read_text() == "{}\n"


def test_rollback_restores_the_old_bytes(engine_file):
    before = engine_file.read_bytes()
    saved = write(plan_engine_json(engine_file, ENGINE_ENTRIES))
    assert engine_file.read_bytes() != before
    rollback(engine_file, saved)
    assert engine_file.read_bytes() == before
    assert files_in(engine_file.parent) == {ENGINE_NAME, ENGINE_NAME + ".bak"}
    with pytest.raises(AdvisorError, match="does not exist; nothing to restore"):
        rollback(engine_file, engine_file.with_name("missing.bak"))


def test_edit_diff_is_empty_without_change(tmp_path):
    edit = Edit(tmp_path / "x", b"a\n", b"a\n", "d", "nothing")
    assert not edit.changed and edit.diff() == ""
    edit = Edit(Path("x.py"), b"a\nb", b"a\nc", "d", "one line")
    assert edit.diff() == ("--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n"
                           "+c\n\\ No newline at end of file\n")


def test_check_fits_names_the_config_and_the_reason():
    from kernels.fused_moe import resource_precheck

    check_fits([moe(64, 64, 64, 1, 4, 3)], 232448, resource_precheck)  # fits an H100
    with pytest.raises(AdvisorError) as exc:
        check_fits([moe(64, 64, 64, 1, 4, 3), moe(256, 256, 128, 1, 4, 4)], 232448, resource_precheck)
    message = str(exc.value)
    assert message.startswith("config does not fit the GPU (232448 B shared memory), nothing written: "
                              "M256 N256 K128 G1 w4 s4: accumulator needs 512 registers per thread")
    with pytest.raises(AdvisorError, match="M128 N256 K64 G8 w8 s3: it has no parameter BLOCK_SIZE_M"):
        check_fits([mm(128, 256, 64, 8, 8, 3)], 232448, resource_precheck)


# ------------------------------------------------------------------------------------------------
# apply keeps its promises (issue 12): a hand edit is never overwritten, read-only and immutable files
# are refused without a stray .bak, an entry's own keys stay, a file named for one GPU is not given
# another's advice unless forced, --verify needs a GPU before anything is written.
# ------------------------------------------------------------------------------------------------
def test_a_hand_edit_between_read_and_write_is_refused(engine_file):
    edit = plan_engine_json(engine_file, ENGINE_ENTRIES)  # apply reads the file ...
    hand_edit = engine_file.read_text().replace('"num_warps": 4', '"num_warps": 8', 1)
    engine_file.write_text(hand_edit)  # ... someone saves the file ...
    with pytest.raises(AdvisorError, match="changed since it was read; run again"):
        write(edit)  # ... apply writes: refused, the hand edit stays
    assert engine_file.read_text() == hand_edit
    assert files_in(engine_file.parent) == {ENGINE_NAME}


def test_a_hand_edit_while_apply_writes_is_refused(engine_file, monkeypatch):
    """The bytes are compared again immediately before the rename, after the new file and backup are staged."""
    import advisor.advice.edit as edit_module

    edit = plan_engine_json(engine_file, ENGINE_ENTRIES)
    hand_edit = engine_file.read_text() + "\n"
    staged = []

    def stage_then_someone_saves(path, data, mode):
        tmp = real_stage(path, data, mode)
        staged.append(tmp)
        engine_file.write_text(hand_edit)
        return tmp

    real_stage = edit_module.stage
    monkeypatch.setattr(edit_module, "stage", stage_then_someone_saves)
    with pytest.raises(AdvisorError, match="changed while it was being written; nothing written"):
        write(edit)
    assert staged and engine_file.read_text() == hand_edit
    assert files_in(engine_file.parent) == {ENGINE_NAME}  # no .bak, no temporary files


def test_unknown_keys_inside_an_entry_are_kept(tmp_path):
    path = tmp_path / "E=8,N=7168,device_name=AMD_Instinct_MI300X.json"
    path.write_text('{\n    "1": {\n        "BLOCK_SIZE_M": 16,\n        "BLOCK_SIZE_N": 32,\n'
                    '        "BLOCK_SIZE_K": 64,\n        "GROUP_SIZE_M": 1,\n        "num_warps": 4,\n'
                    '        "num_stages": 2,\n        "waves_per_eu": 0,\n        "kpack": 2\n    }\n}\n')
    write(plan_engine_json(path, {1: moe(32, 64, 128, 8, 8, 2)}))
    assert read_config_file(path).configs[1].params == {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128,
                                                        "GROUP_SIZE_M": 8, "waves_per_eu": 0, "kpack": 2}
    assert list(json.loads(path.read_text())["1"]) == [
        "BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages", "waves_per_eu",
        "kpack"]


def test_a_read_only_file_is_refused(engine_file):
    before = engine_file.read_bytes()
    engine_file.chmod(0o444)
    with pytest.raises(AdvisorError, match=r"is read-only \(mode 444\); make it writable \(chmod u\+w\)"):
        write(plan_engine_json(engine_file, ENGINE_ENTRIES))
    assert engine_file.read_bytes() == before and stat.S_IMODE(engine_file.stat().st_mode) == 0o444
    assert files_in(engine_file.parent) == {ENGINE_NAME}


def test_a_file_that_cannot_be_replaced_leaves_no_bak(engine_file, monkeypatch):
    """An immutable file (chattr +i) refuses the rename over it: nothing written, an earlier .bak untouched."""
    earlier = backup_path(engine_file)
    earlier.write_text("an earlier backup\n")
    before = engine_file.read_bytes()
    real_replace = os.replace

    def immutable(src, dst):
        if Path(dst) == engine_file:
            raise PermissionError(1, "Operation not permitted")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", immutable)
    with pytest.raises(AdvisorError, match="cannot be written .*Operation not permitted.*immutable"):
        write(plan_engine_json(engine_file, ENGINE_ENTRIES))
    assert engine_file.read_bytes() == before and earlier.read_text() == "an earlier backup\n"
    assert files_in(engine_file.parent) == {ENGINE_NAME, earlier.name}


def test_a_really_immutable_file_leaves_no_bak(engine_file):
    import subprocess

    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(engine_file)],
                                                        capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here (needs root and a file system that has it)")
    try:
        with pytest.raises(AdvisorError, match="cannot be written"):
            write(plan_engine_json(engine_file, ENGINE_ENTRIES))
        assert files_in(engine_file.parent) == {ENGINE_NAME}
    finally:
        subprocess.run(["chattr", "-i", str(engine_file)], check=True)


def test_an_unwritable_folder_leaves_no_bak(engine_file, monkeypatch):
    import advisor.advice.edit as edit_module

    def no_room(path, data, mode):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(edit_module, "stage", no_room)
    with pytest.raises(AdvisorError, match="cannot be written .*Permission denied"):
        write(plan_engine_json(engine_file, ENGINE_ENTRIES))
    assert files_in(engine_file.parent) == {ENGINE_NAME}


ONE_ENTRY = {1: moe(16, 32, 128, 1, 4, 3)}


@pytest.fixture
def h100_file(tmp_path) -> Path:
    """An engine file named for the H100 with one entry (one launch to advise: the CLI tests stay quick)."""
    from kernels.moe_configs import ConfigTable, write_config_file

    return write_config_file(tmp_path / "E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json", ConfigTable(ONE_ENTRY))


def test_advice_for_another_gpu_is_refused_unless_forced(h100_file, capsys):
    from advisor.cli import main

    before = h100_file.read_bytes()
    assert main(["apply", str(h100_file), "--gpu", "h200", "--no-confirm", "--min-speedup", "1.0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "is read on NVIDIA H100 80GB HBM3, but the advice is for NVIDIA H200" in err
    assert "--force-gpu" in err
    assert h100_file.read_bytes() == before and files_in(h100_file.parent) == {h100_file.name}
    # Forced: the H200's advice goes into the H100's file.
    assert main(["apply", str(h100_file), "--gpu", "h200", "--no-confirm", "--min-speedup", "1.0",
                 "--force-gpu", "--dry-run"]) == 0
    assert "is read on" not in capsys.readouterr().err


def test_verify_without_a_gpu_writes_nothing(h100_file, capsys):
    import torch

    from advisor.cli import main

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    before = h100_file.read_bytes()
    assert main(["apply", str(h100_file), "--verify", "--min-speedup", "1.0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("advisor: error: --verify measures each launch on a GPU and torch sees none")
    assert "\n" not in err
    assert h100_file.read_bytes() == before and files_in(h100_file.parent) == {h100_file.name}


def test_apply_checks_every_file_before_writing_any(tmp_path, engine_file, capsys, monkeypatch):
    """The second file is read-only: the first is not written either."""
    from advisor import commands

    other = tmp_path / "other" / ENGINE_NAME
    other.parent.mkdir()
    shutil.copyfile(engine_file, other)
    other.chmod(0o444)
    edits = [plan_engine_json(engine_file, ENGINE_ENTRIES), plan_engine_json(other, ENGINE_ENTRIES)]
    monkeypatch.setattr(commands, "_advices", lambda args: [])
    monkeypatch.setattr("advisor.advice.suggest.plan_apply", lambda *a, **k: edits)
    before = engine_file.read_bytes()
    from advisor.cli import main

    assert main(["apply", str(engine_file)]) == 2
    assert "read-only" in capsys.readouterr().err
    assert engine_file.read_bytes() == before and files_in(engine_file.parent) == {ENGINE_NAME, "other"}


def test_apply_restores_what_it_wrote_when_a_later_file_fails(tmp_path, engine_file, capsys, monkeypatch):
    from advisor import commands
    from advisor.cli import main

    other = tmp_path / "other" / ENGINE_NAME
    other.parent.mkdir()
    shutil.copyfile(engine_file, other)
    edits = [plan_engine_json(engine_file, ENGINE_ENTRIES), plan_engine_json(other, ENGINE_ENTRIES)]
    other.write_text(other.read_text() + "\n")  # a hand edit of the second file after it was read
    monkeypatch.setattr(commands, "_advices", lambda args: [])
    monkeypatch.setattr("advisor.advice.suggest.plan_apply", lambda *a, **k: edits)
    before = engine_file.read_bytes()
    assert main(["apply", str(engine_file)]) == 2
    err = capsys.readouterr().err
    assert "changed since it was read" in err and "the 1 file(s) written before it were restored" in err
    assert engine_file.read_bytes() == before
