"""Model presets: the five shipped models, their per-rank shapes and name lookup."""

from __future__ import annotations

import pytest

from ceilings.errors import AdvisorError
from kernels.moe_presets import PRESETS, TP_SIZES, MoEShape, get_preset

NAMES = ["mixtral-8x7b", "qwen2-57b-a14b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v2-lite"]


def test_all_presets_exist():
    assert sorted(PRESETS) == sorted(NAMES)
    for name in NAMES:
        assert get_preset(name) is PRESETS[name]
        assert PRESETS[name].name == name


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_shape_per_tp(name, tp):
    preset = PRESETS[name]
    shape = preset.shape(tp)
    assert isinstance(shape, MoEShape)
    assert shape.intermediate * tp == preset.intermediate
    assert (shape.num_experts, shape.top_k, shape.hidden) == (preset.num_experts, preset.top_k, preset.hidden)
    assert shape.gemm1() == (preset.num_experts, preset.top_k, preset.hidden, 2 * shape.intermediate)
    assert shape.gemm2() == (preset.num_experts, preset.top_k, shape.intermediate, preset.hidden)
    assert shape.gemm1_n == 2 * shape.intermediate
    assert shape.config_file_n == shape.intermediate
    assert shape.dtype == "bfloat16"
    assert preset.shape() == preset.shape(1)


@pytest.mark.parametrize("name, tp, gemm1", [
    ("mixtral-8x7b", 1, (8, 2, 4096, 28672)),
    ("mixtral-8x7b", 2, (8, 2, 4096, 14336)),
    ("qwen2-57b-a14b", 2, (64, 8, 3584, 2560)),
    ("qwen3-30b-a3b", 4, (128, 8, 2048, 384)),
    ("qwen3-235b-a22b", 8, (128, 8, 4096, 384)),
    ("deepseek-v2-lite", 1, (64, 6, 2048, 2816)),
])
def test_gemm1_shapes(name, tp, gemm1):
    assert get_preset(name).shape(tp).gemm1() == gemm1


@pytest.mark.parametrize("alias, name", [
    ("Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b"),
    ("mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b"),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
    ("Qwen/Qwen2-57B-A14B", "qwen2-57b-a14b"),
    ("Qwen/Qwen3-235B-A22B", "qwen3-235b-a22b"),
    ("deepseek-ai/DeepSeek-V2-Lite", "deepseek-v2-lite"),
    ("  MIXTRAL_8x7B ", "mixtral-8x7b"),
])
def test_get_preset_aliases(alias, name):
    assert get_preset(alias) is PRESETS[name]


@pytest.mark.parametrize("name", ["llama-3-8b", "mistralai/Mixtral-8x22B-v0.1", "deepseek-ai/DeepSeek-V2",
                                  "qwen3", ""])
def test_unknown_preset_lists_known_ones(name):
    with pytest.raises(AdvisorError, match="unknown model preset") as info:
        get_preset(name)
    for known in NAMES:
        assert known in str(info.value)


@pytest.mark.parametrize("tp", [0, 3, 6, 16, -1])
def test_bad_tp(tp):
    with pytest.raises(AdvisorError, match="tensor-parallel") as info:
        get_preset("mixtral-8x7b").shape(tp)
    assert str(TP_SIZES) in str(info.value)


def test_presets_are_frozen():
    with pytest.raises(AttributeError):
        PRESETS["mixtral-8x7b"].top_k = 4
    with pytest.raises(AttributeError):
        PRESETS["mixtral-8x7b"].shape(2).intermediate = 1
