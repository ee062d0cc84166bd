"""The decode-time fp8 GEMVs (kernels/fused_moe_fp8_gemv.py) against float32 references over 16-bit
activations and the values the fp8 weights stand for; under Triton's CPU interpreter without a GPU."""

from __future__ import annotations

import pytest
import torch
from test_fused_moe import NAN, TOLERANCE, make_config, rel_error
from test_fused_moe_fp8 import fp8_case

from ceilings.errors import AdvisorError
from ceilings.launch import Config
from kernels import fused_moe as fm
from kernels import fused_moe_fp8 as f8
from kernels import fused_moe_fp8_gemv as gv

CASES = [
    # M, E, top_k, K (hidden), I, (BLOCK_SIZE_N (weight rows), BLOCK_SIZE_K, warps), routing
    pytest.param(1, 8, 2, 256, 64, (16, 128, 4), "uniform", id="M1"),
    pytest.param(3, 8, 2, 384, 96, (8, 256, 2), "hot", id="M3-hot-K-past-last-step-I96"),
    pytest.param(2, 16, 4, 200, 40, (32, 128, 4), "uniform", id="M2-k4-oddK-I40-partial-rows"),
    pytest.param(3, 16, 6, 256, 64, (8, 128, 2), "uniform", id="M3-k6-experts-padded-to-8"),
]
SCALINGS = pytest.mark.parametrize("scaling", ["block", "channel"])


def gemv_config(rows, bk, warps):
    return Config({"BLOCK_SIZE_M": 1, "BLOCK_SIZE_N": rows, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 1},
                  num_warps=warps, num_stages=1)


@SCALINGS
@pytest.mark.parametrize("m, e, top_k, k, inter, tile, kind", CASES)
def test_gemv_gemms_match_the_weight_only_references(m, e, top_k, k, inter, tile, kind, scaling):
    seed, hidden, w1, w2, weights, ids = fp8_case(m, e, top_k, k, inter, kind)
    fp8 = f8.Fp8Weights(w1, w2, scaling)
    w1_dq, w2_dq = fp8.dequantized()
    config = gemv_config(*tile)
    act = gv.gemv_gemm1(hidden.to(torch.float16), fp8, ids, config)  # fp16: its rounding shows a wrong scale
    assert act.shape == (m * top_k, inter) and act.dtype == torch.float16
    err = rel_error(act, f8.gemm1_reference(hidden, None, w1_dq, ids))
    assert err < 1e-3, f"GEMM1 relative error {err:.2e} with {config.label()} (seed {seed})"
    act = torch.randn(m * top_k, inter, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)
    out = gv.gemv_gemm2(act, fp8, weights, ids, torch.float32, config)
    ref = fm.fused_moe_gemm_reference(act.float(), w2_dq, ids, 1, weights).view(m, top_k, -1).sum(dim=1)
    err = rel_error(out, ref)
    assert err < 1e-5, f"GEMM2 relative error {err:.2e} with {config.label()} (seed {seed})"


@SCALINGS
def test_gemv_layer_matches_the_tiled_weight_only_layer(scaling):
    seed, hidden, w1, w2, weights, ids = fp8_case(4, 8, 2, 128, 48, "hot")
    fp8 = f8.Fp8Weights(w1, w2, scaling)
    out = gv.fused_moe_fp8_gemv(hidden, fp8, weights, ids, gemv_config(16, 128, 4))
    assert out.dtype == torch.bfloat16 and not torch.isnan(out).any(), f"seed {seed}"
    assert rel_error(out, f8.layer_reference(hidden, fp8, weights, ids, weight_only=True)) < TOLERANCE
    tiled = f8.fused_moe_fp8(hidden, fp8, weights, ids, make_config(16, 64, 64, 1), form="w8a16")
    assert rel_error(out, tiled.float()) < TOLERANCE, f"seed {seed}"
    # The layer's own entry point runs the same GEMVs for form="gemv".
    assert torch.equal(f8.fused_moe_fp8(hidden, fp8, weights, ids, gemv_config(16, 128, 4), form="gemv"), out)


def test_gemv_bad_inputs_name_the_fix():
    seed, hidden, w1, w2, weights, ids = fp8_case(2, 4, 2, 128, 32, "uniform")
    fp8 = f8.Fp8Weights(w1, w2, "block")
    with pytest.raises(AdvisorError, match="BLOCK_SIZE_K=64 does not fit 128-column block scales"):
        gv.gemv_gemm1(hidden, fp8, ids, gemv_config(16, 64, 4))
    with pytest.raises(AdvisorError, match="must be powers of two"):
        gv.gemv_gemm1(hidden, fp8, ids, gemv_config(12, 128, 4))
    with pytest.raises(AdvisorError, match="a GEMV config has BLOCK_SIZE_M=1"):
        gv.gemv_gemm1(hidden, fp8, ids, make_config(16, 64, 128, 1))
    with pytest.raises(AdvisorError, match="takes bf16 or fp16 hidden states; got torch.float32"):
        gv.gemv_gemm1(hidden.float(), fp8, ids)
    with pytest.raises(AdvisorError, match=r"the weights take \[M, 128\]"):
        gv.gemv_gemm1(hidden[:, :64], fp8, ids)
    with pytest.raises(AdvisorError, match=r"GEMM2 takes \[M \* top_k, I\] = \[4, 32\]"):
        gv.gemv_gemm2(torch.full((4, 16), NAN, dtype=torch.bfloat16), fp8, weights, ids)


SHIPPED = sorted(p for p in (f8.config_path(8, 1, "x", "channel", 1).parents[1]).rglob("*.json") if "gemv" in p.parts)


def test_gemv_files_ship_for_each_shape_and_scheme_on_the_h100():
    for scaling in ("block", "channel"):
        for e, inter in ((8, 7168), (64, 1280), (128, 192)):
            for gemm in (1, 2):
                path = f8.config_path(e, inter, "NVIDIA H100 80GB HBM3", scaling, gemm, "gemv")
                assert path in SHIPPED, path


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: "/".join(p.parts[-3:]))
def test_shipped_gemv_file_holds_gemv_tiles_from_one_token_up_with_their_times(path):
    from kernels import moe_configs

    scaling = "block" if "block_shape" in path.name else "channel"
    table = moe_configs.read_config_file(path)
    keys = sorted(table.configs)
    # The tuner walks the engines' counts up from one and keeps those where the GEMV layer won.
    assert keys == [m for m in moe_configs.ENGINE_M_KEYS if m <= keys[-1]]
    for config in table.configs.values():
        gv.check_config(config, scaling)
    meta = moe_configs.read_config_meta(path)
    assert sorted(meta.measured) == keys and all(entry.us > 0 for entry in meta.measured.values())
    assert all(meta.measured[m].config == table.configs[m] for m in keys)
