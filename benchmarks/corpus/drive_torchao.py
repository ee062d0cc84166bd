"""torchao (torchao 0.18.0): its Triton quantisation and low-precision GEMM kernels over LLM shapes.

The fifth library of the corpus and the only one no choice of this project was made on (sections 12-34 of
RESULTS fitted counting rules, floors and models on the other four): its points are held out for the
ceiling's soundness, the transfer model and the advice. Calls torchao's public Python entry points (fp8
blockwise inference and training kernels, MoE fp8 scaling kernels, tensorwise fp8 casts, MX-format casts,
the HQQ int4 mixed GEMM, the int8 training GEMM, FP8 attention input quantisation); never its code. Run
under `advisor record`, see README.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus_driver import Driver  # noqa: E402


def main() -> None:
    d = Driver("torchao")
    import capture_extras
    import torch

    capture_extras.install()
    fp8 = torch.float8_e4m3fn
    tokens = d.pick(8192, 256)
    hidden = d.pick(4096, 256)
    inter = d.pick(14336, 512)
    dev = d.device

    # fp8 blockwise inference (DeepSeek-V3 style 1x128 activations, 128x128 weights)
    from torchao.kernel import blockwise_quantization as bq

    x = d.randn(tokens, hidden)
    w = d.randn(inter, hidden, scale=0.02)
    made: dict = {}

    def act_quant():
        made["a"] = bq.fp8_blockwise_act_quant(x)
    d.case("blockwise_act_quant", act_quant)

    def weight_quant():
        made["w"] = bq.fp8_blockwise_weight_quant(w)
    d.case("blockwise_weight_quant", weight_quant)
    if "w" in made:
        d.case("blockwise_weight_dequant", lambda: bq.fp8_blockwise_weight_dequant(*made["w"]))
    if "a" in made and "w" in made:
        for m in (16, tokens):
            def gemm(m=m):
                a, a_s = bq.fp8_blockwise_act_quant(x[:m].contiguous())
                bq.blockwise_fp8_gemm(a, a_s, *made["w"])
            d.case(f"blockwise_fp8_gemm_m{m}", gemm)

    # fp8 blockwise training kernels
    from torchao.prototype.blockwise_fp8_training import kernels as bt

    for name in ("triton_fp8_blockwise_act_quant_lhs", "triton_fp8_blockwise_act_quant_rhs",
                 "triton_fp8_blockwise_act_quant_transposed_lhs"):
        d.case(name, lambda name=name: getattr(bt, name)(x))
    for name in ("triton_fp8_blockwise_weight_quant_rhs", "triton_fp8_blockwise_weight_quant_transposed_rhs"):
        d.case(name, lambda name=name: getattr(bt, name)(w))

    def training_gemms():
        a, a_s = bt.triton_fp8_blockwise_act_quant_lhs(x)
        b, b_s = bt.triton_fp8_blockwise_weight_quant_transposed_rhs(w)  # (K, N) column-major
        bt.triton_fp8_gemm_1x128_128x128(a, b, a_s, b_s)
    d.case("triton_fp8_gemm_1x128_128x128", training_gemms)

    def training_gemm_128x1():
        go = d.randn(tokens, inter)
        a, a_s = bt.triton_fp8_blockwise_act_quant_lhs(go)  # dX = dY @ W: K = inter
        b, b_s = bt.triton_fp8_blockwise_act_quant_rhs(w)    # (inter, hidden), scales 128x1
        bt.triton_fp8_gemm_1x128_128x1(a, b, a_s, b_s)
    d.case("triton_fp8_gemm_1x128_128x1", training_gemm_128x1)

    # MoE training: per-expert fp8 scales (Qwen3-30B-A3B-like experts)
    from torchao.prototype.moe_training.kernels import float8_rowwise as fr
    from torchao.prototype.moe_training.kernels import jagged_float8_scales as jf

    experts, e_hidden, e_inter = d.pick(128, 4), d.pick(2048, 128), d.pick(768, 128)
    w3d = d.randn(experts, e_hidden, e_inter, scale=0.02)
    for name in ("triton_fp8_rowwise_3d_transpose_rhs", "triton_fp8_rowwise_3d_transpose_rhs_fused_reduction",
                 "triton_fp8_colwise_3d_scale_and_cast"):
        d.case(name, lambda name=name: getattr(fr, name)(w3d))
    d.case("triton_fp8_rowwise_2d_scale_and_cast", lambda: fr.triton_fp8_rowwise_2d_scale_and_cast(x))

    routed = d.pick(32768, 512)
    xr = d.randn(routed, e_hidden)
    # uneven groups, as routing makes them: random cut points, multiples of 16 rows
    cuts = torch.sort(torch.randint(1, routed // 16, (experts - 1,), device=dev) * 16).values
    offsets = torch.cat([cuts, torch.tensor([routed], device=dev)]).to(torch.int32)
    d.case("triton_fp8_per_group_rowwise_scales", lambda: jf.triton_fp8_per_group_rowwise_scales(xr, offsets))
    d.case("triton_fp8_per_group_colwise_scales", lambda: jf.triton_fp8_per_group_colwise_scales(xr, offsets))
    xr2 = d.randn(routed, e_hidden)
    d.case("triton_fp8_per_group_colwise_scales_dual",
           lambda: jf.triton_fp8_per_group_colwise_scales_dual(xr, xr2, offsets))

    # tensorwise fp8 casts without torch.compile
    from torchao.float8.float8_training_tensor import LinearMMConfig
    from torchao.prototype.float8nocompile.kernels import fp8_dynamic_tensorwise as tw

    for name in ("hp_to_fp8_row_major", "hp_to_fp8_row_major_t", "hp_to_fp8_col_major",
                 "hp_to_fp8_col_major_t", "hp_to_fp8_row_and_col_major", "hp_to_fp8_row_major_t_and_non_t",
                 "hp_to_fp8_col_major_t_and_non_t"):
        for algo in (tw.KernelAlgorithm.ATOMIC_MAX, tw.KernelAlgorithm.REDUCTION):
            d.case(f"{name}_{algo.name.lower()}",
                   lambda name=name, algo=algo: getattr(tw, name)(x, fp8, LinearMMConfig(), algo=algo))

    # MX formats (mxfp8 casts along either dimension, dequantisation, scale swizzle)
    from torchao.prototype.mx_formats import kernels as mx

    mx_made: dict = {}

    def mx_dim0():
        mx_made["dim0"] = mx.triton_to_mxfp8_dim0(x)
    d.case("triton_to_mxfp8_dim0", mx_dim0)
    d.case("triton_to_mxfp8_dim1", lambda: mx.triton_to_mxfp8_dim1(x))
    if "dim0" in mx_made:
        d.case("triton_mxfp8_dequant_dim0", lambda: mx.triton_mxfp8_dequant_dim0(*mx_made["dim0"], torch.bfloat16))
        d.case("triton_mx_block_rearrange", lambda: mx.triton_mx_block_rearrange(mx_made["dim0"][1]))

    # HQQ int4 weights, fused dequantisation GEMM (decode and prefill)
    from torchao.prototype.hqq.mixed_mm import pack_2xint4, triton_mixed_mm

    group = 128
    wq = torch.randint(0, 16, (hidden, inter), dtype=torch.uint8, device=dev)  # (K, N)
    packed = pack_2xint4(wq)
    scales = d.randn(hidden // group, inter, scale=0.01).abs() + 1e-3
    zeros = torch.full((hidden // group, inter), 8.0, dtype=torch.bfloat16, device=dev)
    for m in (16, tokens):
        a = d.randn(m, hidden)
        d.case(f"hqq_mixed_mm_m{m}", lambda a=a: triton_mixed_mm(a, packed, scales, zeros, group_size=group))

    # int8 GEMM of int8 training (row and column scales)
    from torchao.prototype.quantized_training.int8_mm import scaled_int8_mm

    b8 = torch.randint(-127, 128, (hidden, inter), dtype=torch.int8, device=dev)
    col = d.randn(inter).abs() + 0.01
    for m in (16, tokens):
        a8 = torch.randint(-127, 128, (m, hidden), dtype=torch.int8, device=dev)
        row = d.randn(m).abs() + 0.01
        d.case(f"scaled_int8_mm_m{m}", lambda a8=a8, row=row: scaled_int8_mm(a8, b8, row, col))

    # FP8 attention: per-head quantisation of Q, K, V (with and without RoPE fused)
    from torchao.prototype.attention.quantization.triton_qkv_quantization import triton_fp8_sdpa_quantize
    from torchao.prototype.attention.quantization.triton_rope_qkv_quantization import triton_fp8_rope_sdpa_quantize

    batch, heads, seq, head_dim = 1, d.pick(32, 4), d.pick(4096, 128), d.pick(128, 64)
    q, k, v = (d.randn(batch, heads, seq, head_dim) for _ in range(3))
    d.case("fp8_sdpa_quantize", lambda: triton_fp8_sdpa_quantize(q, k, v))

    def rope_quantize():
        angles = torch.arange(seq, device=dev, dtype=torch.float32)[:, None] * torch.arange(
            head_dim // 2, device=dev, dtype=torch.float32)[None, :] * 1e-3
        cos, sin = torch.cos(angles).repeat(1, 2), torch.sin(angles).repeat(1, 2)  # [S, D]
        ql, kl, vl = (t.transpose(1, 2).contiguous() for t in (q, k, v))  # [B, S, H, D]
        triton_fp8_rope_sdpa_quantize(ql, kl, vl, cos, sin)
    d.case("fp8_rope_sdpa_quantize", rope_quantize)
    d.finish()


if __name__ == "__main__":
    main()
