"""Engine config files: names, byte-identical read/write, nearest-M lookup, errors, the default rule."""

from __future__ import annotations

import json
import os
import re

import pytest

from ceilings.errors import AdvisorError
from ceilings.launch import Config
from kernels.fused_moe import CONFIG_SPACE
from kernels.moe_configs import (
    ENGINE_M_KEYS,
    SHIPPED_DIR,
    ConfigMeta,
    ConfigTable,
    MeasuredEntry,
    config_file_name,
    default_config,
    device_file_name,
    format_config_meta,
    format_config_table,
    get_config,
    meta_path,
    parse_config_text,
    read_config_file,
    read_config_meta,
    write_config_file,
)
from kernels.moe_presets import get_preset

H100 = "NVIDIA H100 80GB HBM3"

# A file in the engines' layout (json.dump with indent=4, then a newline), values made up.
FIXTURE = """\
{
    "triton_version": "3.1.0",
    "1": {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 64,
        "BLOCK_SIZE_K": 128,
        "GROUP_SIZE_M": 1,
        "num_warps": 4,
        "num_stages": 4
    },
    "2": {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 64,
        "BLOCK_SIZE_K": 128,
        "GROUP_SIZE_M": 1,
        "num_warps": 4,
        "num_stages": 5
    },
    "4": {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 128,
        "BLOCK_SIZE_K": 128,
        "GROUP_SIZE_M": 1,
        "num_warps": 4,
        "num_stages": 3
    },
    "8": {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 128,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 1,
        "num_warps": 4,
        "num_stages": 4
    },
    "16": {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 64,
        "BLOCK_SIZE_K": 256,
        "GROUP_SIZE_M": 16,
        "num_warps": 4,
        "num_stages": 2
    },
    "24": {
        "BLOCK_SIZE_M": 32,
        "BLOCK_SIZE_N": 64,
        "BLOCK_SIZE_K": 128,
        "GROUP_SIZE_M": 1,
        "num_warps": 4,
        "num_stages": 3
    },
    "32": {
        "BLOCK_SIZE_M": 32,
        "BLOCK_SIZE_N": 128,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 1,
        "num_warps": 8,
        "num_stages": 4
    },
    "48": {
        "BLOCK_SIZE_M": 32,
        "BLOCK_SIZE_N": 128,
        "BLOCK_SIZE_K": 128,
        "GROUP_SIZE_M": 16,
        "num_warps": 4,
        "num_stages": 3
    },
    "64": {
        "BLOCK_SIZE_M": 64,
        "BLOCK_SIZE_N": 64,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 16,
        "num_warps": 4,
        "num_stages": 4
    },
    "96": {
        "BLOCK_SIZE_M": 64,
        "BLOCK_SIZE_N": 128,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 32,
        "num_warps": 4,
        "num_stages": 3
    },
    "128": {
        "BLOCK_SIZE_M": 64,
        "BLOCK_SIZE_N": 128,
        "BLOCK_SIZE_K": 128,
        "GROUP_SIZE_M": 1,
        "num_warps": 8,
        "num_stages": 3
    },
    "256": {
        "BLOCK_SIZE_M": 64,
        "BLOCK_SIZE_N": 256,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 16,
        "num_warps": 8,
        "num_stages": 4
    },
    "512": {
        "BLOCK_SIZE_M": 128,
        "BLOCK_SIZE_N": 128,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 16,
        "num_warps": 8,
        "num_stages": 3
    },
    "1024": {
        "BLOCK_SIZE_M": 128,
        "BLOCK_SIZE_N": 256,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 32,
        "num_warps": 8,
        "num_stages": 4
    },
    "1536": {
        "BLOCK_SIZE_M": 128,
        "BLOCK_SIZE_N": 256,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 64,
        "num_warps": 8,
        "num_stages": 3
    },
    "2048": {
        "BLOCK_SIZE_M": 256,
        "BLOCK_SIZE_N": 128,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 16,
        "num_warps": 8,
        "num_stages": 4
    },
    "3072": {
        "BLOCK_SIZE_M": 256,
        "BLOCK_SIZE_N": 128,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 32,
        "num_warps": 8,
        "num_stages": 4
    },
    "4096": {
        "BLOCK_SIZE_M": 256,
        "BLOCK_SIZE_N": 256,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 64,
        "num_warps": 8,
        "num_stages": 3
    }
}
"""


def cfg(bm, bn, bk, gm, warps, stages) -> Config:
    return Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": gm},
                  num_warps=warps, num_stages=stages)


# ------------------------------------------------------------------------------------------------
# File names
# ------------------------------------------------------------------------------------------------
def test_file_name_bf16_has_no_dtype():
    assert config_file_name(8, 14336, H100) == "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json"
    assert config_file_name(128, 192, "NVIDIA H200") == "E=128,N=192,device_name=NVIDIA_H200.json"


def test_file_name_with_dtype_and_block_shape():
    assert (config_file_name(8, 7168, H100, "int8_w8a16")
            == "E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3,dtype=int8_w8a16.json")
    assert (config_file_name(256, 128, H100, "fp8_w8a8", (128, 128))
            == "E=256,N=128,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128,128].json")


def test_file_name_device_and_preset():
    assert device_file_name("  NVIDIA A100-SXM4-80GB ") == "NVIDIA_A100-SXM4-80GB"
    shape = get_preset("mixtral-8x7b").shape(2)
    name = config_file_name(shape.num_experts, shape.config_file_n, H100)
    assert name == "E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json"


# ------------------------------------------------------------------------------------------------
# Parse, format, read and write
# ------------------------------------------------------------------------------------------------
def test_fixture_parses():
    table = parse_config_text(FIXTURE)
    assert tuple(table.configs) == ENGINE_M_KEYS
    assert table.extras == {"triton_version": "3.1.0"}
    assert table.configs[1] == cfg(16, 64, 128, 1, 4, 4)
    assert table.configs[64] == cfg(64, 64, 64, 16, 4, 4)
    assert table.configs[4096] == cfg(256, 256, 64, 64, 8, 3)


def test_format_is_byte_identical():
    assert format_config_table(parse_config_text(FIXTURE)) == FIXTURE
    assert FIXTURE.startswith('{\n    "triton_version": "3.1.0",\n    "1": {\n        "BLOCK_SIZE_M": 16,')
    assert FIXTURE.endswith("    }\n}\n")


def test_read_then_write_is_byte_identical(tmp_path):
    source = tmp_path / "in" / config_file_name(8, 7168, H100)
    source.parent.mkdir()
    source.write_bytes(FIXTURE.encode())
    table = read_config_file(source)

    target = tmp_path / "out" / "deeper" / source.name  # parents are created
    assert write_config_file(target, table) == target
    assert target.read_bytes() == source.read_bytes()
    assert os.listdir(target.parent) == [target.name]

    # Writing over an existing file replaces it, again leaving no temporary files.
    table.configs[1] = cfg(32, 32, 64, 1, 4, 2)
    write_config_file(target, table)
    assert os.listdir(target.parent) == [target.name]
    assert read_config_file(target).configs[1] == cfg(32, 32, 64, 1, 4, 2)
    write_config_file(str(target), read_config_file(source))  # str paths too
    assert target.read_bytes() == FIXTURE.encode()


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "E=8,N=7168,device_name=X.json"
    target.write_text(FIXTURE)

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_config_file(target, ConfigTable({1: cfg(16, 32, 64, 1, 4, 2)}))
    assert target.read_text() == FIXTURE
    assert os.listdir(tmp_path) == [target.name]


def test_extras_and_sorting():
    table = ConfigTable({64: cfg(64, 64, 64, 1, 4, 3), 8: cfg(16, 64, 64, 1, 4, 3)}, {"triton_version": "x"})
    assert list(table.configs) == [8, 64]
    text = format_config_table(table)
    assert list(parse_config_text(text).configs) == [8, 64]
    assert text.index('"triton_version"') < text.index('"8"') < text.index('"64"')
    # A file without extras stays without.
    bare = ConfigTable({1: cfg(16, 64, 64, 1, 4, 3)})
    assert parse_config_text(format_config_table(bare)).extras == {}


# ------------------------------------------------------------------------------------------------
# Nearest-M lookup
# ------------------------------------------------------------------------------------------------
def test_lookup_tie_goes_to_the_smaller_key():
    small, large = cfg(16, 64, 64, 1, 4, 3), cfg(32, 128, 64, 1, 4, 3)
    table = ConfigTable({32: large, 16: small})
    assert table.lookup(24) == small  # tie
    assert table.lookup(23) == small
    assert table.lookup(25) == large
    assert table.lookup(16) == small and table.lookup(32) == large
    assert table.lookup(1) == small and table.lookup(0) == small
    assert table.lookup(10**6) == large  # beyond the largest key


@pytest.mark.parametrize("m, key", [
    (1, 1), (3, 2), (6, 4), (12, 8), (20, 16), (21, 24), (40, 32), (41, 48), (80, 64), (81, 96),
    (100, 96), (192, 128), (193, 256), (1280, 1024), (1281, 1536), (4095, 4096), (8192, 4096), (10**7, 4096),
])
def test_lookup_fixture(m, key):
    table = parse_config_text(FIXTURE)
    assert table.lookup(m) == table.configs[key]


def test_lookup_empty_table():
    with pytest.raises(AdvisorError, match="empty"):
        ConfigTable({}).lookup(16)


# ------------------------------------------------------------------------------------------------
# Bad files
# ------------------------------------------------------------------------------------------------
ENTRY = '{"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": 4'


@pytest.mark.parametrize("text, detail", [
    pytest.param('{"1": ' + ENTRY + ', "num_stages": 3}', "JSON", id="invalid-json"),
    pytest.param("", "JSON", id="empty-file"),
    pytest.param("[1, 2, 3]\n", "object", id="list"),
    pytest.param('"hello"\n', "object", id="string"),
    pytest.param('{"1": ' + ENTRY + "}}\n", "num_stages", id="entry-missing-num_stages"),
    pytest.param('{"1": ' + ENTRY + ', "num_stages": 0}}\n', "num_stages", id="entry-zero"),
    pytest.param('{"1": ' + ENTRY + ', "num_stages": true}}\n', "num_stages", id="entry-bool"),
    pytest.param('{"1": ' + ENTRY + ', "num_stages": "3"}}\n', "num_stages", id="entry-string"),
    pytest.param('{"1": 5}\n', "entry '1'", id="entry-not-object"),
    pytest.param('{"abc": ' + ENTRY + ', "num_stages": 3}}\n', "'abc'", id="non-numeric-key"),
    pytest.param('{"triton_version": "3.1.0"}\n', "no token-count", id="no-entries"),
    pytest.param("{}\n", "no token-count", id="empty-object"),
])
def test_bad_file(tmp_path, text, detail):
    path = tmp_path / "E=8,N=7168,device_name=Bad.json"
    path.write_text(text)
    with pytest.raises(AdvisorError) as info:
        read_config_file(path)
    message = str(info.value)
    assert str(path) in message
    assert detail in message


def test_entry_error_names_the_entry(tmp_path):
    path = tmp_path / "bad.json"
    last_entry_end = '"num_warps": 8,\n        "num_stages": 3\n    }\n}\n'
    assert FIXTURE.endswith(last_entry_end)
    path.write_text(FIXTURE.replace(last_entry_end, '"num_warps": 8\n    }\n}\n'))
    with pytest.raises(AdvisorError, match=re.escape(f"{path}: entry '4096'")):
        read_config_file(path)


def test_missing_file(tmp_path):
    path = tmp_path / "nowhere" / "E=8,N=7168,device_name=X.json"
    with pytest.raises(AdvisorError, match="does not exist") as info:
        read_config_file(path)
    assert str(path) in str(info.value)


def test_unreadable_file(tmp_path):
    folder = tmp_path / "a_folder.json"
    folder.mkdir()
    with pytest.raises(AdvisorError, match="cannot be read") as info:
        read_config_file(folder)
    assert str(folder) in str(info.value)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(AdvisorError) as info:
        read_config_file(binary)
    assert str(binary) in str(info.value)


def test_parse_default_location():
    with pytest.raises(AdvisorError, match="config file"):
        parse_config_text("nope")


# ------------------------------------------------------------------------------------------------
# The default rule and get_config
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("num_experts, top_k", [(8, 2), (64, 8), (128, 8), (64, 6), (1, 1), (256, 8)])
def test_default_config_in_space(num_experts, top_k):
    last_bm = 0
    for m in range(1, 8193):
        config = default_config(m, num_experts, top_k)
        for key, value in config.to_engine_entry().items():
            assert value in CONFIG_SPACE[key], f"M={m}: {key}={value}"
        assert config["BLOCK_SIZE_M"] >= last_bm, f"BLOCK_SIZE_M shrinks at M={m}"
        last_bm = config["BLOCK_SIZE_M"]


def test_get_config_default_rule(tmp_path):
    for device in ("Made Up GPU 9000", None, ""):
        config, source = get_config(64, 8, 7168, 2, device)
        assert source == "default rule"
        assert config == default_config(64, 8, 2)
    # A folder without a matching file falls back too.
    (tmp_path / config_file_name(8, 7168, "Another GPU")).write_text(FIXTURE)
    fallback = get_config(5, 8, 7168, 2, "Made Up GPU 9000", tmp_path)
    assert fallback == (default_config(5, 8, 2), "default rule")


def test_get_config_reads_config_dir(tmp_path):
    device = "Made Up GPU 9000"
    path = tmp_path / config_file_name(8, 7168, device)
    path.write_text(FIXTURE)
    table = parse_config_text(FIXTURE)
    for m, key in [(24, 24), (20, 16), (1, 1), (5000, 4096)]:
        config, source = get_config(m, 8, 7168, 2, device, config_dir=tmp_path)
        assert config == table.configs[key]
        assert source == str(path)
    config, source = get_config(24, 8, 7168, 2, device, config_dir=str(tmp_path))
    assert source == str(path)
    # Another N (or E) is another file.
    assert get_config(24, 8, 3584, 2, device, tmp_path)[1] == "default rule"
    assert get_config(24, 16, 7168, 2, device, tmp_path)[1] == "default rule"


def test_get_config_bad_file_in_config_dir(tmp_path):
    (tmp_path / config_file_name(8, 7168, "Made Up GPU 9000")).write_text("{}\n")
    with pytest.raises(AdvisorError, match="no token-count"):
        get_config(24, 8, 7168, 2, "Made Up GPU 9000", tmp_path)


def test_shipped_configs_are_well_formed():
    # kernels/configs/ may be absent in a fresh checkout while it holds no files (git keeps no empty folders).
    assert SHIPPED_DIR.name == "configs" and SHIPPED_DIR.parent.name == "kernels"
    pattern = re.compile(r"E=\d+,N=\d+,device_name=[^,/ ]+(,dtype=\w+)?(,block_shape=\[\d+,\d+\])?\.json")
    for path in SHIPPED_DIR.glob("*.json"):
        assert pattern.fullmatch(path.name), path.name
        table = read_config_file(path)
        assert format_config_table(table) == path.read_text(), f"{path.name} does not round-trip"
        for config in table.configs.values():
            for key, value in config.to_engine_entry().items():
                assert value in CONFIG_SPACE[key], f"{path.name}: {key}={value}"


# ------------------------------------------------------------------------------------------------
# Side files: what a file's configs rest on, kept out of the engines' file (issue 12)
# ------------------------------------------------------------------------------------------------
def test_side_file_round_trip_and_the_engine_file_gets_no_key(tmp_path):
    meta = ConfigMeta(H100, "3.6.0", {64: MeasuredEntry(cfg(64, 128, 128, 1, 4, 4), 313.0024, 347)}, "s.csv")
    path = write_config_file(tmp_path / config_file_name(8, 7168, H100), ConfigTable({64: cfg(64, 128, 128, 1, 4, 4)}),
                             meta)
    assert meta_path(path).name == path.name + ".meta"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name, path.name + ".meta"]
    assert list(json.loads(path.read_text())) == ["64"]  # token counts only
    back = read_config_meta(path)
    assert back == ConfigMeta(H100, "3.6.0", {64: MeasuredEntry(cfg(64, 128, 128, 1, 4, 4), 313.002, 347)}, "s.csv")
    assert format_config_meta(back) == meta_path(path).read_text()
    assert read_config_meta(tmp_path / "E=1,N=1,device_name=None.json") is None


def test_a_file_with_a_triton_version_key_keeps_it_and_nothing_adds_one(tmp_path):
    """Newer engine tuners write "triton_version": such a file keeps its own key; tables built here have none."""
    table = parse_config_text(FIXTURE)
    assert format_config_table(table) == FIXTURE
    assert '"triton_version"' not in format_config_table(ConfigTable(table.configs))


@pytest.mark.parametrize("text, detail", [
    ("{oops", "not valid JSON"),
    ('{"measured": {}}', "device_name"),
    ('{"device_name": "X", "measured": [1]}', "measured"),
    ('{"device_name": "X", "measured": {"a": {}}}', "token count"),
    ('{"device_name": "X", "measured": {"1": {"config": {}, "us": 0, "compared": 1}}}', "positive time"),
    ('{"device_name": "X", "measured": {"1": {"config": {}, "us": 1.5, "compared": 1}}}', "missing"),
])
def test_bad_side_file(tmp_path, text, detail):
    path = tmp_path / config_file_name(8, 7168, H100)
    meta_path(path).write_text(text)
    with pytest.raises(AdvisorError) as info:
        read_config_meta(path)
    assert str(meta_path(path)) in str(info.value) and detail in str(info.value)


@pytest.mark.parametrize("path", sorted(SHIPPED_DIR.glob("*.json")), ids=lambda p: p.name)
def test_shipped_files_have_side_files_of_their_measurements(path):
    """Each shipped entry was the fastest timed config of the sweep named in its side file, on the file's GPU."""
    meta = read_config_meta(path)
    assert meta is not None and meta.triton_version == "3.6.0"
    assert device_file_name(meta.device_name) in path.name
    assert (SHIPPED_DIR.parents[1] / meta.source).exists()
    assert {m: e.config for m, e in meta.measured.items()} == read_config_file(path).configs
    assert all(e.compared > 50 and e.us > 0 for e in meta.measured.values())


def test_layer_lookups_follow_a_rewritten_file_and_a_removed_one(tmp_path):
    """get_config keeps a file's table between calls (the layers' hot path) but reads the file again once it
    is rewritten (apply, a tuner) and stops using it once it is gone."""
    path = tmp_path / config_file_name(8, 7168, "Some GPU")
    write_config_file(path, ConfigTable({1: cfg(16, 32, 64, 1, 4, 2)}))
    assert get_config(1, 8, 7168, 2, "Some GPU", tmp_path) == (cfg(16, 32, 64, 1, 4, 2), str(path))
    write_config_file(path, ConfigTable({1: cfg(64, 128, 64, 8, 8, 3)}))
    os.utime(path, ns=(1, 1))  # a rewrite within the file system's time resolution still changes the stamp
    assert get_config(1, 8, 7168, 2, "Some GPU", tmp_path)[0] == cfg(64, 128, 64, 8, 8, 3)
    path.unlink()
    assert get_config(1, 8, 7168, 2, "Some GPU", tmp_path)[1] == "default rule"
