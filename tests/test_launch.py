"""Config, TensorArg and Launch: equality, immutability and their dict / engine / triton forms."""

from __future__ import annotations

import dataclasses
import json
import math
import pickle

import pytest

from ceilings.errors import AdvisorError
from ceilings.launch import Config, Launch, TensorArg

ENGINE_KEYS = ["BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages"]


def moe_config(bm=64, bn=128, bk=64, gm=16, num_warps=4, num_stages=3) -> Config:
    return Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": gm},
                  num_warps=num_warps, num_stages=num_stages)


# ------------------------------------------------------------------------------------------------
# Config
# ------------------------------------------------------------------------------------------------
def test_config_equality_ignores_parameter_order():
    a = Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 32}, num_warps=8, num_stages=4)
    b = Config({"BLOCK_SIZE_K": 32, "BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128}, num_warps=8, num_stages=4)
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1
    assert {a: "x"}[b] == "x"
    # ... while each keeps the order it was given in.
    assert list(a.params) == ["BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"]
    assert list(b.params) == ["BLOCK_SIZE_K", "BLOCK_SIZE_M", "BLOCK_SIZE_N"]


@pytest.mark.parametrize("other", [
    moe_config(bm=32),
    moe_config(gm=1),
    moe_config(num_warps=8),
    moe_config(num_stages=4),
    Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64}, num_warps=4, num_stages=3),
])
def test_config_inequality(other):
    assert moe_config() != other
    assert moe_config() != other.to_dict()  # not equal to a plain dict either


def test_config_is_immutable():
    config = moe_config()
    with pytest.raises(AttributeError):
        config.num_warps = 8
    with pytest.raises(AttributeError):
        config.BLOCK_SIZE_M = 16
    params = config.params
    params["BLOCK_SIZE_M"] = 16
    assert config["BLOCK_SIZE_M"] == 64
    entry = config.to_dict()
    entry["num_warps"] = 8
    assert config.num_warps == 4


def test_config_access_and_replace():
    config = moe_config()
    assert config["BLOCK_SIZE_N"] == 128
    assert config.get("BLOCK_SIZE_N") == 128
    assert config.get("kpack") is None and config.get("kpack", 2) == 2
    with pytest.raises(KeyError):
        config["kpack"]
    changed = config.replace(BLOCK_SIZE_M=16, num_warps=8)
    assert changed["BLOCK_SIZE_M"] == 16 and changed.num_warps == 8 and changed.num_stages == 3
    assert list(changed.params) == list(config.params)
    assert config["BLOCK_SIZE_M"] == 64  # the original is untouched
    assert config.label() == "M64 N128 K64 G16 w4 s3"


def test_engine_entry_key_order():
    config = moe_config()
    entry = config.to_engine_entry()
    assert list(entry) == ENGINE_KEYS
    assert entry == {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 16,
                     "num_warps": 4, "num_stages": 3}


def test_engine_entry_round_trip():
    entry = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1,
             "num_warps": 4, "num_stages": 5}
    config = Config.from_engine_entry(entry)
    assert config == moe_config(16, 64, 128, 1, 4, 5)
    back = config.to_engine_entry()
    assert back == entry
    assert list(back) == ENGINE_KEYS
    assert json.dumps(back, indent=4) == json.dumps(entry, indent=4)


def test_engine_entry_needs_the_moe_parameters_in_engine_order():
    with pytest.raises(AdvisorError, match="GROUP_SIZE_M"):
        Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64}).to_engine_entry()
    # A vendor's extra knob (ROCm files carry e.g. kpack) survives, after the four standard keys.
    extra = Config({"kpack": 2, **moe_config().params})
    entry = extra.to_engine_entry()
    assert list(entry) == ENGINE_KEYS[:4] + ["kpack"] + ENGINE_KEYS[4:]
    assert Config.from_engine_entry(entry) == extra
    # Parameters given in another order (e.g. from a triton.Config) still write in the engines' order.
    shuffled = Config(dict(reversed(list(moe_config().params.items()))), num_warps=4, num_stages=3)
    assert list(shuffled.to_engine_entry()) == ENGINE_KEYS


GOOD_ENTRY = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1,
              "num_warps": 4, "num_stages": 3}


@pytest.mark.parametrize("change, named", [
    pytest.param({"num_stages": None}, "num_stages", id="missing-num_stages"),
    pytest.param({"BLOCK_SIZE_K": None}, "BLOCK_SIZE_K", id="missing-BLOCK_SIZE_K"),
    pytest.param({"BLOCK_SIZE_M": "16"}, "BLOCK_SIZE_M", id="string"),
    pytest.param({"BLOCK_SIZE_N": 64.0}, "BLOCK_SIZE_N", id="float"),
    pytest.param({"GROUP_SIZE_M": True}, "GROUP_SIZE_M", id="bool"),
    pytest.param({"num_warps": False}, "num_warps", id="bool-false"),
    pytest.param({"BLOCK_SIZE_K": 0}, "BLOCK_SIZE_K", id="zero"),
    pytest.param({"num_stages": -2}, "num_stages", id="negative"),
    pytest.param({"num_warps": 3}, "num_warps", id="warps-not-power-of-two"),
    pytest.param({"GROUP_SIZE_M": None, "num_warps": None}, "GROUP_SIZE_M", id="missing-two"),
])
def test_engine_entry_errors_name_the_entry(change, named):
    entry = dict(GOOD_ENTRY)
    for key, value in change.items():
        if value is None:
            del entry[key]
        else:
            entry[key] = value
    where = "E=8,N=7168,device_name=X.json: entry '64'"
    with pytest.raises(AdvisorError) as info:
        Config.from_engine_entry(entry, where)
    message = str(info.value)
    assert where in message
    assert named in message
    assert "\n" not in message


@pytest.mark.parametrize("entry", [[16, 64, 128, 1, 4, 3], "BLOCK_SIZE_M=16", 16, None])
def test_engine_entry_must_be_an_object(entry):
    with pytest.raises(AdvisorError, match="entry '1'"):
        Config.from_engine_entry(entry, "entry '1'")


def test_engine_entry_error_default_location():
    with pytest.raises(AdvisorError, match="config entry"):
        Config.from_engine_entry({"BLOCK_SIZE_M": 16})


@pytest.mark.parametrize("num_warps", [3, 6, 12, 0, -4, True, 4.0, "4"])
def test_bad_num_warps_rejected(num_warps):
    with pytest.raises(AdvisorError, match="num_warps"):
        Config({"BLOCK_SIZE_M": 16}, num_warps=num_warps)


@pytest.mark.parametrize("num_stages", [0, -1, False, 2.0, "3"])
def test_bad_num_stages_rejected(num_stages):
    with pytest.raises(AdvisorError, match="num_stages"):
        Config({"BLOCK_SIZE_M": 16}, num_stages=num_stages)


@pytest.mark.parametrize("params", [{"not an identifier": 1}, {"1ABC": 1}, {"X": [1, 2]}, {"X": None},
                                    {"X": {"a": 1}}])
def test_bad_params_rejected(params):
    with pytest.raises(AdvisorError):
        Config(params)


@pytest.mark.parametrize("num_warps", [1, 2, 4, 8, 16, 32])
def test_power_of_two_warps_accepted(num_warps):
    assert Config({}, num_warps=num_warps).num_warps == num_warps


def test_dict_round_trip():
    config = Config({"BLOCK": 64, "EVEN": True, "SCALE": 0.5, "MODE": "fast"}, num_warps=2, num_stages=1)
    data = config.to_dict()
    assert list(data) == ["BLOCK", "EVEN", "SCALE", "MODE", "num_warps", "num_stages"]
    assert Config.from_dict(data) == config
    assert Config.from_dict(json.loads(json.dumps(data))) == config
    assert Config.from_dict({"BLOCK": 64}) == Config({"BLOCK": 64}, num_warps=4, num_stages=3)


def test_from_dict_errors_name_the_location():
    with pytest.raises(AdvisorError, match="my launch: config"):
        Config.from_dict([1, 2], "my launch: config")
    with pytest.raises(AdvisorError, match="my launch: config.*num_warps"):
        Config.from_dict({"BLOCK": 64, "num_warps": 5}, "my launch: config")


def test_config_pickles():
    config = Config({"BLOCK_SIZE_N": 64, "BLOCK_SIZE_M": 16, "EVEN": True}, num_warps=8, num_stages=5)
    back = pickle.loads(pickle.dumps(config))
    assert back == config and hash(back) == hash(config)
    assert list(back.params) == list(config.params)
    launch = sample_launch()
    assert pickle.loads(pickle.dumps(launch)) == launch


def test_triton_round_trip():
    triton = pytest.importorskip("triton")
    config = moe_config(num_warps=8, num_stages=5)
    tc = config.to_triton()
    assert isinstance(tc, triton.Config)
    assert tc.kwargs == config.params
    assert tc.num_warps == 8 and tc.num_stages == 5
    assert Config.from_triton(tc) == config
    assert list(Config.from_triton(tc).params) == list(config.params)
    native = triton.Config({"BLOCK_SIZE_K": 32, "BLOCK_SIZE_M": 16}, num_warps=2, num_stages=2)
    assert Config.from_triton(native) == Config({"BLOCK_SIZE_M": 16, "BLOCK_SIZE_K": 32}, 2, 2)


# ------------------------------------------------------------------------------------------------
# TensorArg
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape, stride", [
    ((4096,), (1,)),
    ((37, 4096), (4096, 1)),
    ((8, 14336, 4096), (14336 * 4096, 4096, 1)),
    ((2, 3, 4, 5), (60, 20, 5, 1)),
    ((0, 3), (3, 1)),
    ((3, 0, 2), (2, 2, 1)),
    ((), ()),
])
def test_tensor_arg_contiguous(shape, stride):
    t = TensorArg.contiguous("w", shape, "bfloat16")
    assert t.shape == shape and t.stride == stride
    assert t.numel == math.prod(shape)


def test_tensor_arg_is_frozen_and_normalised():
    t = TensorArg("a", [4, 8], "float16", [8, 1])
    assert t.shape == (4, 8) and t.stride == (8, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.shape = (1,)
    assert hash(t) == hash(TensorArg("a", (4, 8), "float16", (8, 1)))
    assert t.to_dict() == {"name": "a", "shape": [4, 8], "dtype": "float16", "stride": [8, 1]}


def test_tensor_arg_rejects_bad_shapes():
    with pytest.raises(AdvisorError, match="rank"):
        TensorArg("a", (4, 8), "bfloat16", (1,))
    with pytest.raises(AdvisorError, match="negative"):
        TensorArg("a", (4, -1), "bfloat16", (1, 1))


# ------------------------------------------------------------------------------------------------
# Launch
# ------------------------------------------------------------------------------------------------
def sample_launch(**overrides) -> Launch:
    fields = dict(
        source="kernels/fused_moe.py",
        kernel="fused_moe_kernel",
        grid=(120,),
        tensors=(TensorArg.contiguous("a", (37, 4096), "bfloat16"),
                 TensorArg.contiguous("b", (8, 14336, 4096), "bfloat16"),
                 TensorArg("c", (74, 14336), "bfloat16", (14336, 1))),
        scalars={"N": 14336, "K": 4096, "EM": 592, "top_k": 2},
        constexprs=[("MUL_ROUTED_WEIGHT", False), ("EVEN_K", True), ("compute_type", "bfloat16"),
                    ("scale", 0.5)],
        config=moe_config(),
    )
    fields.update(overrides)
    return Launch(**fields)


def test_launch_round_trip():
    launch = sample_launch()
    data = launch.to_dict()
    assert data["grid"] == [120]
    assert data["config"] == moe_config().to_dict()
    assert list(data["scalars"]) == ["N", "K", "EM", "top_k"]
    back = Launch.from_dict(data)
    assert back == launch and hash(back) == hash(launch)
    assert Launch.from_dict(json.loads(launch.to_json())) == launch
    assert back.constexprs == launch.constexprs  # order kept


def test_launch_equality_and_accessors():
    launch = sample_launch()
    assert launch == sample_launch()
    assert launch != sample_launch(grid=(121,))
    assert launch != sample_launch(config=moe_config(bm=16))
    assert launch.with_config(moe_config(bm=16)) == sample_launch(config=moe_config(bm=16))
    assert sample_launch(grid=[4, 3, 2]).num_programs == 24
    assert launch.scalar("K") == 4096
    assert launch.scalar("EVEN_K") is True
    assert launch.scalar("BLOCK_SIZE_M") == 64
    assert launch.tensor("b").shape == (8, 14336, 4096)
    with pytest.raises(KeyError):
        launch.scalar("nothing")
    with pytest.raises(KeyError):
        launch.tensor("nothing")
    with pytest.raises(dataclasses.FrozenInstanceError):
        launch.grid = (1,)


def test_launch_minimal_dict():
    launch = Launch.from_dict({"source": "k.py", "kernel": "k", "grid": [1, 2]})
    assert launch.tensors == () and launch.scalars == () and launch.config == Config({})


@pytest.mark.parametrize("grid", [(), (1, 1, 1, 1), (4, -1), (-1,)])
def test_bad_grid(grid):
    with pytest.raises(AdvisorError, match="grid"):
        sample_launch(grid=grid)
    data = sample_launch().to_dict()
    data["grid"] = list(grid)
    with pytest.raises(AdvisorError):
        Launch.from_dict(data)


def _without(key):
    data = sample_launch().to_dict()
    del data[key]
    return data


def _tensor_edit(**edit):
    data = sample_launch().to_dict()
    data["tensors"][0].update(edit)
    return data


def _edit(**edit):
    data = sample_launch().to_dict()
    data.update(edit)
    return data


@pytest.mark.parametrize("data", [
    pytest.param(_without("source"), id="no-source"),
    pytest.param(_without("kernel"), id="no-kernel"),
    pytest.param(_without("grid"), id="no-grid"),
    pytest.param(_edit(grid=5), id="grid-not-a-list"),
    pytest.param(_edit(grid=["x"]), id="grid-not-numbers"),
    pytest.param(_edit(tensors=[{"name": "a", "shape": [4]}]), id="tensor-no-stride"),
    pytest.param(_edit(tensors=[[4, 8]]), id="tensor-not-an-object"),
    pytest.param(_tensor_edit(shape=[4, "many"]), id="tensor-shape-not-numbers"),
    pytest.param(_tensor_edit(shape=5), id="tensor-shape-not-a-list"),
    pytest.param(_edit(scalars=[1, 2]), id="scalars-not-pairs"),
    pytest.param(_edit(config={"BLOCK_SIZE_M": 16, "num_warps": 3}), id="config-bad-warps"),
    pytest.param(_edit(config=[16, 64]), id="config-not-an-object"),
])
def test_malformed_launch_dict(data):
    with pytest.raises(AdvisorError, match="trace.json"):
        Launch.from_dict(data, "trace.json")


@pytest.mark.parametrize("data", [
    pytest.param(_tensor_edit(stride=[1]), id="tensor-rank-mismatch"),
    pytest.param(_tensor_edit(shape=[37, -1]), id="tensor-negative-size"),
    pytest.param(_edit(grid=[]), id="grid-empty"),
    pytest.param(_edit(grid=[1, 1, 1, 1]), id="grid-4d"),
])
def test_launch_value_errors_are_advisor_errors(data):
    with pytest.raises(AdvisorError):
        Launch.from_dict(data, "trace.json")


@pytest.mark.parametrize("data", [
    pytest.param(_tensor_edit(stride=[1]), id="tensor-rank-mismatch"),
    pytest.param(_edit(grid=[]), id="grid-empty"),
])
def test_launch_value_errors_name_the_location(data):
    with pytest.raises(AdvisorError, match="trace.json"):
        Launch.from_dict(data, "trace.json")


@pytest.mark.parametrize("data", [[1, 2], "launch", None])
def test_launch_dict_must_be_an_object(data):
    with pytest.raises(AdvisorError, match="trace.json"):
        Launch.from_dict(data, "trace.json")
