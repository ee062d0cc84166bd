"""The fp8 (e4m3, 128 x 128 block scales) fused-MoE GEMMs of kernels/fused_moe_fp8.py against float32
references over the values the fp8 operands stand for.

Without a GPU these run under Triton's CPU interpreter. Its float32 -> e4m3 cast rounds differently from the
GPU's (one step off at times, and a rounding into the next binade loses its carry: 124.3 becomes 64, not
128), so the GEMM and layer checks quantise with
the torch quantiser, and the Triton quantiser is checked to differ from it only there; on the GPU
`benchmarks/moe_fp8.py` checks the two bit for bit.
"""

from __future__ import annotations

import math

import pytest
import torch
from test_fused_moe import NAN, TOLERANCE, fresh_generator, make_config, random_weights, rel_error
from test_fused_moe_fused import routing

from ceilings.errors import AdvisorError
from kernels import fused_moe as fm
from kernels import fused_moe_fp8 as f8
from kernels.moe_align import moe_align_triton

INTERPRETED = not torch.cuda.is_available()


def test_row_quantiser_reference_scales_each_128_columns_to_448():
    gen, seed = fresh_generator()
    x = torch.randn(5, 300, generator=gen).to(torch.bfloat16)
    x[2, 128:256] = 0.0  # an all-zero group: finite scale, zero values
    q, s = f8.quantize_rows_reference(x)
    assert q.dtype == f8.FP8 and s.shape == (5, 3)
    groups = [x.float()[:, i * 128:(i + 1) * 128].abs().amax(dim=1) for i in range(3)]
    expected = torch.stack(groups, dim=1).clamp_min(1e-12) / 448.0
    assert torch.equal(s, expected), f"seed {seed}"
    assert q.float().abs().max().item() == 448.0  # each group's largest value lands on the fp8 maximum
    assert torch.equal(q[2, 128:256].float(), torch.zeros(128))
    # e4m3 keeps 3 mantissa bits: a relative rounding error of at most 1/16 per value.
    err = (f8.dequantize_rows(q, s) - x.float()).abs()
    assert bool((err <= x.float().abs() / 16 + s.repeat_interleave(128, 1)[:, :300] * 2 ** -9).all()), f"seed {seed}"


@pytest.mark.parametrize("exact", [True, False], ids=["ieee-div", "fast-div"])
@pytest.mark.parametrize("scaling", ["block", "channel"])
def test_triton_row_quantiser_matches_the_reference(scaling, exact):
    gen, seed = fresh_generator()
    x = torch.randn(37, 300, generator=gen).to(torch.bfloat16)
    q, s = f8.quantize_rows(x, scaling, exact)
    q_ref, s_ref = f8.quantize_rows_reference(x, scaling)
    assert torch.allclose(s, s_ref, rtol=1e-6, atol=0), f"seed {seed}"
    got, want = q.float(), q_ref.float()
    differ = got != want
    if INTERPRETED:
        # The interpreter's cast rounds differently: one e4m3 step off, or a dropped carry (half the value).
        got, want = got[differ], want[differ]
        step = torch.exp2(torch.floor(torch.log2(want.abs().clamp_min(2 ** -6))) - 3)
        assert bool(((got - want).abs() <= step).logical_or(got * 2 == want).all()), f"seed {seed}"
        assert differ.float().mean() < 0.1, f"seed {seed}"
    elif exact:
        assert not differ.any(), f"seed {seed}"
    else:  # an approximate quotient can land across a rounding boundary: one e4m3 step, rarely
        step = torch.exp2(torch.floor(torch.log2(want[differ].abs().clamp_min(2 ** -6))) - 3)
        assert bool(((got[differ] - want[differ]).abs() <= step).all()) and differ.float().mean() < 1e-3


def test_weight_blocks_round_trip_and_interleave_keeps_scales_in_w1_order():
    gen, seed = fresh_generator()
    w1 = torch.randn(3, 2 * 160, 200, generator=gen).to(torch.bfloat16)  # edge blocks in both dimensions
    q, s = f8.quantize_weights(w1)
    assert s.shape == (3, 3, 2) and q.shape == w1.shape
    assert rel_error(f8.dequantize_weights(q, s), w1) < 0.04, f"seed {seed}"
    weights = f8.Fp8Weights(w1, torch.randn(3, 200, 160, generator=gen).to(torch.bfloat16))
    # Interleaved row 2j + 1 is up row j (row 160 + j of w1).
    assert torch.equal(weights.w1_il[:, 1].float(), q[:, 160].float())
    w1_dq, _ = weights.dequantized()
    assert torch.equal(w1_dq, f8.dequantize_weights(q, s))


def test_channel_scaling_has_one_scale_per_row_and_per_token():
    gen, seed = fresh_generator()
    w = torch.randn(2, 5, 300, generator=gen)
    q, s = f8.quantize_weights(w, "channel")
    assert s.shape == (2, 5, 1)
    assert torch.equal(s[..., 0], w.abs().amax(dim=2) / 448.0), f"seed {seed}"
    assert torch.equal(q.float().abs().amax(dim=2), torch.full((2, 5), 448.0))
    x = torch.randn(7, 300, generator=gen).to(torch.bfloat16)
    for quantise in (f8.quantize_rows, f8.quantize_rows_reference):
        xq, xs = quantise(x, "channel")
        assert xs.shape == (7, 1) and torch.equal(xs[:, 0], x.float().abs().amax(dim=1) / 448.0), f"seed {seed}"
    # (The Triton quantiser's values are checked against the reference's in the test above.)
    assert rel_error(f8.dequantize_rows(xq, xs), x) < 0.05, f"seed {seed}"
    with pytest.raises(AdvisorError, match="scaling='tensor' is not an fp8 scaling scheme; use one of block, channel"):
        f8.quantize_rows(x, "tensor")


GEMM1_CASES = [
    # M, E, top_k, K, I, (BM, BN, BK, GM), routing
    pytest.param(1, 8, 2, 128, 32, (16, 64, 128, 1), "uniform", id="M1-BK128"),
    pytest.param(37, 8, 2, 192, 96, (16, 64, 64, 2), "hot", id="M37-I96-scale-blocks-straddle-gate-up"),
    pytest.param(29, 16, 4, 160, 40, (32, 32, 32, 4), "uniform", id="M29-k4-oddK-idle"),
    pytest.param(20, 6, 2, 256, 64, (64, 128, 64, 1), "hot", id="M20-BM64-hot"),
]


SCALINGS = pytest.mark.parametrize("scaling", ["block", "channel"])


def fp8_case(m, e, top_k, k, inter, kind):
    gen, seed = fresh_generator()
    weights, ids, unused = routing(kind, m, e, top_k, gen)
    hidden = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    w1 = random_weights(e, 2 * inter, k, torch.bfloat16, gen, unused)
    w2 = random_weights(e, k, inter, torch.bfloat16, gen, unused)
    return seed, hidden, w1, w2, weights, ids


@SCALINGS
@pytest.mark.parametrize("persistent", [False, True], ids=["grid", "persistent"])
@pytest.mark.parametrize("m, e, top_k, k, inter, tiles, kind", GEMM1_CASES)
def test_gemm1_fp8_matches_reference(m, e, top_k, k, inter, tiles, kind, persistent, scaling):
    seed, hidden, w1, w2, weights, ids = fp8_case(m, e, top_k, k, inter, kind)
    config = make_config(*tiles)
    fp8 = f8.Fp8Weights(w1, w2, scaling)
    a_q, a_s = f8.quantize_rows_reference(hidden, scaling)
    ref = f8.gemm1_reference(a_q, a_s, fp8.dequantized()[0], ids)
    align = moe_align_triton(ids, (tiles[0],), e)[0]
    # fp16 out: its rounding (2^-11) is small enough to show a misplaced scale or a wrong row.
    c = torch.full((m * top_k, inter), NAN, dtype=torch.float16)
    f8.invoke_fp8_gemm(a_q, a_s, fp8.w1_il, fp8.w1_scales, c, weights, *align, top_k=top_k, config=config,
                       gated=True, persistent=persistent, scaling=scaling)
    assert not torch.isnan(c).any(), f"rows or columns left unwritten (seed {seed})"
    err = rel_error(c, ref)
    assert err < 1e-3, f"relative error {err:.2e} with {config.label()} (seed {seed})"


TILE_SCALE_CASES = [
    # M, E, top_k, K, I, (BM, BN, BK, GM): every tile's weight rows in one 128-row scale group per half
    pytest.param(37, 8, 2, 256, 128, (16, 256, 128, 2), id="gate-and-up-groups-BN_OUT128"),
    pytest.param(29, 16, 4, 384, 192, (32, 128, 64, 1), id="I192-up-half-starts-mid-group"),
    pytest.param(20, 6, 2, 128, 64, (64, 32, 32, 1), id="BN_OUT16-K-steps-share-a-group"),
]


@pytest.mark.parametrize("persistent", [False, True], ids=["grid", "persistent"])
@pytest.mark.parametrize("weight_only", [False, True], ids=["w8a8", "w8a16"])
@pytest.mark.parametrize("m, e, top_k, k, inter, tiles", TILE_SCALE_CASES)
def test_tile_scales_give_the_per_column_form_s_result(m, e, top_k, k, inter, tiles, weight_only, persistent):
    """Block scales applied as one number per A row where the tile's rows share a scale group (GEMM1: its gate
    half and its up half; GEMM2: all of them) against the reference and the per-column form."""
    seed, hidden, w1, w2, weights, ids = fp8_case(m, e, top_k, k, inter, "hot")
    config = make_config(*tiles)
    fp8 = f8.Fp8Weights(w1, w2, "block")
    w1_dq, w2_dq = fp8.dequantized()
    a_q, a_s = (hidden, None) if weight_only else f8.quantize_rows_reference(hidden, "block")
    align = moe_align_triton(ids, (tiles[0],), e)[0]
    config2 = make_config(tiles[0], min(tiles[1], 128), tiles[2], tiles[3])  # GEMM2: BN output columns
    assert f8.tile_scales_fit(config, True, inter, "block") and f8.tile_scales_fit(config2, False, k, "block")
    ref = f8.gemm1_reference(a_q, a_s, w1_dq, ids) if not weight_only else f8.gemm1_reference(hidden, None, w1_dq, ids)
    outs = {}
    for tile_scales in (False, True):
        c = torch.full((m * top_k, inter), NAN, dtype=torch.float16)
        f8.invoke_fp8_gemm(a_q, a_s, fp8.w1_il, fp8.w1_scales, c, weights, *align, top_k=top_k, config=config,
                           gated=True, persistent=persistent, tile_scales=tile_scales)
        err = rel_error(c, ref)
        assert err < 1e-3, f"GEMM1 tile_scales={tile_scales}: relative error {err:.2e} (seed {seed})"
        outs[tile_scales] = c.float()
    assert rel_error(outs[True], outs[False]) < 1e-3
    act = torch.randn(m * top_k, inter, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)
    b_q, b_s = (act, None) if weight_only else f8.quantize_rows_reference(act, "block")
    b_in = act.float() if weight_only else f8.dequantize_rows(b_q, b_s)
    ref2 = fm.fused_moe_gemm_reference(b_in, w2_dq, ids, 1, weights).view(m, top_k, -1).sum(dim=1)
    out = torch.zeros((m, k), dtype=torch.float32)
    f8.invoke_fp8_gemm(b_q, b_s, fp8.w2, fp8.w2_scales, out, weights, *align, top_k=top_k, config=config2,
                       gated=False, tile_scales=True)
    err = rel_error(out, ref2)
    assert err < 1e-5, f"GEMM2 with tile scales: relative error {err:.2e} (seed {seed})"


def test_tile_scales_refuse_a_tile_across_scale_groups():
    _, hidden, w1, w2, weights, ids = fp8_case(4, 8, 2, 128, 96, "uniform")
    fp8 = f8.Fp8Weights(w1, w2, "block")
    a_q, a_s = f8.quantize_rows_reference(hidden, "block")
    config = make_config(16, 128, 64, 1)  # 64 output columns: I = 96 puts the up half's tiles across groups
    assert not f8.tile_scales_fit(config, True, 96, "block") and not f8.tile_scales_fit(config, True, 128, "channel")
    c = torch.empty((8, 96), dtype=torch.bfloat16)
    with pytest.raises(AdvisorError, match="do not share a 128-row scale group"):
        f8.invoke_fp8_gemm(a_q, a_s, fp8.w1_il, fp8.w1_scales, c, weights, *moe_align_triton(ids, (16,), 8)[0],
                           top_k=2, config=config, gated=True, tile_scales=True)


@SCALINGS
@pytest.mark.parametrize("m, e, top_k, k, inter, tiles, kind", GEMM1_CASES[1:])
def test_gemm2_fp8_accumulates_weighted_rows(m, e, top_k, k, inter, tiles, kind, scaling):
    seed, hidden, w1, w2, weights, ids = fp8_case(m, e, top_k, k, inter, kind)
    config = make_config(*tiles)
    fp8 = f8.Fp8Weights(w1, w2, scaling)
    act = torch.randn(m * top_k, inter, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)
    a_q, a_s = f8.quantize_rows_reference(act, scaling)
    rows = fm.fused_moe_gemm_reference(f8.dequantize_rows(a_q, a_s), fp8.dequantized()[1], ids, 1, weights)
    ref = rows.view(m, top_k, -1).sum(dim=1)
    align = moe_align_triton(ids, (tiles[0],), e)[0]
    out = torch.zeros((m, k), dtype=torch.float32)
    f8.invoke_fp8_gemm(a_q, a_s, fp8.w2, fp8.w2_scales, out, weights, *align, top_k=top_k, config=config,
                       gated=False, scaling=scaling)
    err = rel_error(out, ref)
    assert err < 1e-5, f"relative error {err:.2e} with {config.label()} (seed {seed})"
    # The other GEMM2 form: each (token, expert) pair's weighted row stored (fp16: rounding 2^-11), summed after.
    stored = torch.full((m * top_k, k), NAN, dtype=torch.float16)
    f8.invoke_fp8_gemm(a_q, a_s, fp8.w2, fp8.w2_scales, stored, weights, *align, top_k=top_k, config=config,
                       gated=False, scaling=scaling, sum_topk=False)
    assert not torch.isnan(stored).any(), f"pairs left unwritten (seed {seed})"
    err = rel_error(stored.float(), rows)
    assert err < 1e-3, f"stored rows: relative error {err:.2e} with {config.label()} (seed {seed})"


@SCALINGS
@pytest.mark.parametrize("fuse_sum", [True, False], ids=["sum-by-atomics", "stores-then-sum"])
@pytest.mark.parametrize("kind", ["uniform", "hot"])
def test_fp8_layer_matches_its_reference_and_stays_near_bf16(kind, fuse_sum, scaling, monkeypatch):
    if INTERPRETED:
        monkeypatch.setattr(f8, "quantize_rows", f8.quantize_rows_reference)
    seed, hidden, w1, w2, weights, ids = fp8_case(29, 8, 2, 128, 48, kind)
    fp8 = f8.Fp8Weights(w1, w2, scaling)
    out = f8.fused_moe_fp8(hidden, fp8, weights, ids, make_config(16, 64, 64, 2), make_config(32, 64, 32, 1),
                           fuse_sum=fuse_sum)
    assert out.dtype == torch.bfloat16 and out.shape == hidden.shape and not torch.isnan(out).any(), f"seed {seed}"
    assert rel_error(out, f8.layer_reference(hidden, fp8, weights, ids)) < TOLERANCE, f"seed {seed}"
    # What fp8 costs against the bf16 layer: a few per cent (3 mantissa bits, 128-wide scales).
    assert rel_error(out, fm.fused_moe_reference(hidden, w1, w2, weights, ids)) < 0.08, f"seed {seed}"


def test_bad_inputs_name_the_fix():
    gen, _ = fresh_generator()
    fp8 = f8.Fp8Weights(torch.randn(2, 64, 128, generator=gen), torch.randn(2, 128, 32, generator=gen))
    a_q, a_s = f8.quantize_rows_reference(torch.randn(3, 128, generator=gen))
    ids = torch.tensor([[0, 1], [1, 0], [0, 1]], dtype=torch.int32)
    align = moe_align_triton(ids, (16,), 2)[0]
    c = torch.empty((6, 32), dtype=torch.bfloat16)
    weights = torch.full((3, 2), 0.5)
    with pytest.raises(AdvisorError, match="BLOCK_SIZE_K=256 .* use 32, 64 or 128"):
        f8.invoke_fp8_gemm(a_q, a_s, fp8.w1_il, fp8.w1_scales, c, weights, *align, top_k=2,
                           config=make_config(16, 64, 256, 1), gated=True)
    with pytest.raises(AdvisorError, match="quantize with quantize_rows"):
        f8.invoke_fp8_gemm(a_q.float(), a_s, fp8.w1_il, fp8.w1_scales, c, weights, *align,
                           top_k=2, config=make_config(16, 64, 64, 1), gated=True)
    with pytest.raises(AdvisorError, match="weight-only.* takes none; pass a_scales None"):
        f8.invoke_fp8_gemm(a_q.float().to(torch.bfloat16), a_s, fp8.w1_il, fp8.w1_scales, c, weights, *align,
                           top_k=2, config=make_config(16, 64, 64, 1), gated=True)
    with pytest.raises(AdvisorError, match="fp8 A needs its scales"):
        f8.invoke_fp8_gemm(a_q, None, fp8.w1_il, fp8.w1_scales, c, weights, *align,
                           top_k=2, config=make_config(16, 64, 64, 1), gated=True)
    with pytest.raises(AdvisorError, match="the w8a16 form takes bf16 or fp16 hidden states; got torch.float32"):
        f8.fused_moe_fp8(torch.randn(3, 128, generator=gen), fp8, weights, ids, make_config(16, 64, 64, 1),
                         form="w8a16")
    with pytest.raises(AdvisorError, match="form='w4a16' is not an fp8 layer form; use one of w8a8, w8a16, gemv"):
        f8.fused_moe_fp8(torch.randn(3, 128, generator=gen), fp8, weights, ids, form="w4a16")
    with pytest.raises(AdvisorError, match=r"block scales here are .* \(quantize with scaling='block'\)"):
        f8.invoke_fp8_gemm(a_q, a_s[:, :0], fp8.w1_il, fp8.w1_scales, c, weights, *align, top_k=2,
                           config=make_config(16, 64, 64, 1), gated=True)
    a_c, s_c = f8.quantize_rows_reference(torch.randn(3, 128, generator=gen), "channel")
    f8.invoke_fp8_gemm(a_c, s_c, *f8.quantize_weights(torch.randn(2, 64, 128, generator=gen), "channel")[:1],
                       f8.quantize_weights(torch.randn(2, 64, 128, generator=gen), "channel")[1], c, weights, *align,
                       top_k=2, config=make_config(16, 64, 256, 1), gated=True, scaling="channel")  # any BLOCK_SIZE_K
    w2_rows = torch.empty((6, 128), dtype=torch.float32)  # GEMM2's stored rows are 16-bit, one per pair
    a2_q, a2_s = f8.quantize_rows_reference(torch.randn(6, 32, generator=gen))
    with pytest.raises(AdvisorError, match="GEMM2 with sum_topk=False writes bf16 or fp16; C is torch.float32"):
        f8.invoke_fp8_gemm(a2_q, a2_s, fp8.w2, fp8.w2_scales, w2_rows, weights, *align, top_k=2,
                           config=make_config(16, 64, 32, 1), gated=False, sum_topk=False)
    with pytest.raises(AdvisorError, match=r"C is \(3, 128\); this GEMM writes \[6, 128\]"):
        f8.invoke_fp8_gemm(a2_q, a2_s, fp8.w2, fp8.w2_scales, w2_rows[:3].bfloat16(), weights, *align, top_k=2,
                           config=make_config(16, 64, 32, 1), gated=False, sum_topk=False)
    with pytest.raises(AdvisorError, match="quantize_rows takes a 2-D"):
        f8.quantize_rows(torch.randn(2, 3, 128))
    assert math.isfinite(float(a_s.min()))


# Weight-only (w8a16): A stays bf16, the fp8 weights widen exactly to bf16 in registers, so the kernel's
# only rounding against the float32 reference over the dequantised weights is its own output's.
@SCALINGS
@pytest.mark.parametrize("m, e, top_k, k, inter, tiles, kind", GEMM1_CASES[:3])
def test_weight_only_gemms_match_the_reference_over_16_bit_activations(m, e, top_k, k, inter, tiles, kind,
                                                                       scaling):
    seed, hidden, w1, w2, weights, ids = fp8_case(m, e, top_k, k, inter, kind)
    config = make_config(*tiles)
    fp8 = f8.Fp8Weights(w1, w2, scaling)
    w1_dq, w2_dq = fp8.dequantized()
    align = moe_align_triton(ids, (tiles[0],), e)[0]
    c = torch.full((m * top_k, inter), NAN, dtype=torch.float16)
    f8.invoke_fp8_gemm(hidden, None, fp8.w1_il, fp8.w1_scales, c, weights, *align, top_k=top_k, config=config,
                       gated=True, scaling=scaling)
    assert not torch.isnan(c).any(), f"rows or columns left unwritten (seed {seed})"
    err = rel_error(c, f8.gemm1_reference(hidden, None, w1_dq, ids))
    assert err < 1e-3, f"GEMM1 relative error {err:.2e} with {config.label()} (seed {seed})"
    act = torch.randn(m * top_k, inter, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)
    out = torch.zeros((m, k), dtype=torch.float32)
    f8.invoke_fp8_gemm(act, None, fp8.w2, fp8.w2_scales, out, weights, *align, top_k=top_k, config=config,
                       gated=False, scaling=scaling)
    ref = fm.fused_moe_gemm_reference(act.float(), w2_dq, ids, 1, weights).view(m, top_k, -1).sum(dim=1)
    err = rel_error(out, ref)
    assert err < 1e-5, f"GEMM2 relative error {err:.2e} with {config.label()} (seed {seed})"


@SCALINGS
def test_weight_only_layer_matches_its_reference_and_is_nearer_bf16_than_w8a8(scaling, monkeypatch):
    if INTERPRETED:
        monkeypatch.setattr(f8, "quantize_rows", f8.quantize_rows_reference)
    seed, hidden, w1, w2, weights, ids = fp8_case(29, 8, 2, 128, 48, "hot")
    fp8 = f8.Fp8Weights(w1, w2, scaling)
    configs = make_config(16, 64, 64, 2), make_config(32, 64, 32, 1)
    out = f8.fused_moe_fp8(hidden, fp8, weights, ids, *configs, form="w8a16")
    assert out.dtype == torch.bfloat16 and not torch.isnan(out).any(), f"seed {seed}"
    ref = f8.layer_reference(hidden, fp8, weights, ids, weight_only=True)
    assert rel_error(out, ref) < TOLERANCE, f"seed {seed}"
    assert rel_error(out, f8.layer_reference(hidden, fp8, weights, ids)) > TOLERANCE  # the activations' rounding
    bf16 = fm.fused_moe_reference(hidden, w1, w2, weights, ids)
    w8a8 = f8.fused_moe_fp8(hidden, fp8, weights, ids, *configs, form="w8a8")
    assert rel_error(out, bf16) < rel_error(w8a8, bf16), "weights alone cost less than weights and activations"


@pytest.fixture
def fp8_config_dir(tmp_path, monkeypatch):
    from kernels import moe_configs

    monkeypatch.setattr(moe_configs, "SHIPPED_DIR", tmp_path)
    return tmp_path


def _write_measured(scaling, gemm, form, us_by_m, gpu="Test GPU", fuse_sum=True):
    from kernels import moe_configs

    config = make_config(16, 64, 128, 1) if form != "gemv" else make_config(1, 16, 512, 1)
    path = f8.config_path(8, 64, gpu, scaling, gemm, form, fuse_sum)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = moe_configs.ConfigMeta(gpu, "3.6.0", {m: moe_configs.MeasuredEntry(config, us, 6)
                                                 for m, us in us_by_m.items()}, "test")
    moe_configs.write_config_file(path, moe_configs.ConfigTable({m: config for m in us_by_m}), meta)
    return path


def test_gemv_is_the_form_up_to_the_largest_count_its_file_holds(fp8_config_dir):
    assert f8.choose_form(1, 8, 64, "Test GPU", "channel") == "w8a8"  # no GEMV file
    _write_measured("channel", 1, "w8a16", {1: 1.0, 1024: 1.0})
    _write_measured("channel", 2, "w8a16", {1: 1.0, 1024: 1.0})
    assert f8.choose_form(1, 8, 64, "Test GPU", "channel") == "w8a8"  # w8a16 only when asked for
    path = _write_measured("channel", 1, "gemv", {1: 3.0, 2: 4.0, 4: 7.0})
    assert path.parent.name == "gemv" and "dtype=fp8_w8a16" in path.name
    assert f8.config_path(8, 64, "Test GPU", "channel", 2, "gemv").parent.parent.name == "gemv"
    assert [f8.choose_form(m, 8, 64, "Test GPU", "channel") for m in (1, 3, 4, 5, 4096)] == [
        "gemv", "gemv", "gemv", "w8a8", "w8a8"]
    assert f8.choose_form(1, 8, 64, "Test GPU", "block") == "w8a8"  # another scheme's files
    assert f8.choose_form(1, 8, 64, "Other GPU", "channel") == "w8a8"  # another GPU's
    assert f8.choose_form(1, 8, 64, None, "channel") == "w8a8"  # the CPU
    with pytest.raises(AdvisorError, match="form='w4a16' is not an fp8 layer form"):
        f8.config_path(8, 64, "Test GPU", "channel", 1, "w4a16")
    (c1, src1), (c2, src2) = f8.layer_configs(1, 8, 64, 2, "Test GPU", "channel", form="w8a16")
    assert "fp8_w8a16" in src1 and "fp8_w8a16" in src2 and c1 == make_config(16, 64, 128, 1)
    (c1, src1), (c2, src2) = f8.layer_configs(2, 8, 64, 2, "Test GPU", "channel", form="gemv")
    assert "/gemv/" in src1 and c1 == make_config(1, 16, 512, 1) and src2 == "default GEMV tile"
    assert f8.layer_configs(1, 8, 64, 2, "Test GPU", "block", form="gemv")[0][1] == "default GEMV tile"


def test_gemm2_form_is_the_one_its_files_timed_faster_at_the_nearest_count(fp8_config_dir):
    """GEMM2's two forms have a folder each (gemm2: the sum by atomics; gemm2_stores: rows, then a sum); the
    layer takes the form whose side file timed it faster at the token count nearest M (a tie: the smaller
    count, the engines' rule) by more than a timing's noise, atomics without both."""
    assert f8.choose_fuse_sum(64, 8, 64, "Test GPU", "block") is True  # no files
    atomics = _write_measured("block", 2, "w8a8", {16: 5.0, 1024: 90.0, 4096: 100.0})
    assert atomics.parent.name == "gemm2" and f8.choose_fuse_sum(1024, 8, 64, "Test GPU", "block") is True
    stores = _write_measured("block", 2, "w8a8", {16: 6.0, 1024: 80.0, 4096: 98.0}, fuse_sum=False)
    assert stores.parent.name == "gemm2_stores"
    # 2% faster at 4096 is within one timing's noise (FORM_NOISE): the atomics stay.
    assert [f8.choose_fuse_sum(m, 8, 64, "Test GPU", "block") for m in (1, 16, 520, 521, 1024, 4096)] == [
        True, True, True, False, False, True]
    assert f8.choose_fuse_sum(4096, 8, 64, "Test GPU", "channel") is True  # another scheme's files
    assert f8.choose_fuse_sum(4096, 8, 64, None, "block") is True  # the CPU
    assert f8.layer_configs(4096, 8, 64, 2, "Test GPU", "block", fuse_sum=False)[1][1] == str(stores)
    assert f8.layer_configs(4096, 8, 64, 2, "Test GPU", "block")[1][1] == str(atomics)
