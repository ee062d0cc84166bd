"""GemLite (gemlite 0.6.0.post2): low-bit GEMM / GEMV kernels and activation quantisation, inference only.

Quantises Llama-3-8B-sized projections (4096 -> 14336 and back) with GemLite's own helpers and runs each
at a decode batch (1), a small batch (16) and a prefill (4096 tokens), which select its GEMV, split-K
GEMM and GEMM kernels. The shipped per-GPU config cache is cleared first, so each kernel autotunes over
its list (the library's "fast" setting) instead of reading one config per shape: that list is what the
corpus times. Run under `advisor record`, see README.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus_driver import Driver  # noqa: E402


def main() -> None:
    d = Driver("gemlite")
    import capture_extras
    import gemlite
    import torch
    from gemlite.bitpack import unpack_over_rows_triton
    from gemlite.helper import (
        A16W4_HQQ_INT,
        A16W4_MXFP,
        A16W8_FP8,
        A16W8_INT8,
        A8W4_HQQ_INT_dynamic,
        A8W4_MXFP_dynamic,
        A8W8_fp8_dynamic,
        A8W8_int8_dynamic,
        A8W8_MXFP_dynamic,
    )

    capture_extras.install()
    gemlite.reset_config()
    bf16 = torch.bfloat16
    device = "cuda:0"
    batches = (1, 16, d.pick(4096, 64))
    shapes = ((d.pick(4096, 64), d.pick(14336, 128)), (d.pick(14336, 128), d.pick(4096, 64)))  # (in, out)
    group = 64 if not d.small else 32

    def hqq_weights(k, n, bits):
        w_q = torch.randint(0, 2 ** bits, (n, k), dtype=torch.uint8, device=device)
        scales = d.randn(n, k // group, scale=0.01).abs() + 1e-3
        zeros = torch.full((n, k // group), 2 ** (bits - 1), dtype=bf16, device=device)
        return w_q, scales, zeros

    def layers(k, n):
        """(label, function making the quantised layer) for each scheme."""
        def linear():
            layer = torch.nn.Linear(k, n, bias=False, dtype=bf16, device=device)
            torch.nn.init.normal_(layer.weight, std=0.02)
            return layer
        return [
            ("a16w8_int8", lambda: A16W8_INT8(device=device, dtype=bf16).from_weights(linear().weight)),
            ("a16w8_fp8", lambda: A16W8_FP8(device=device, dtype=bf16).from_weights(linear().weight)),
            ("a16w4_hqq", lambda: A16W4_HQQ_INT(device=device, dtype=bf16).from_weights(*hqq_weights(k, n, 4))),
            ("a8w8_int8_dyn", lambda: A8W8_int8_dynamic(device=device, dtype=bf16).from_weights(linear().weight)),
            ("a8w8_fp8_dyn", lambda: A8W8_fp8_dynamic(device=device, dtype=bf16).from_weights(linear().weight)),
            ("a8w4_hqq_dyn", lambda: A8W4_HQQ_INT_dynamic(device=device, dtype=bf16).from_weights(
                *hqq_weights(k, n, 4))),
            ("a8w8_fp8_block", lambda: A8W8_fp8_dynamic(device=device, dtype=bf16, block_quant=True).from_weights(
                linear().weight)),
            ("a16w4_mxfp", lambda: A16W4_MXFP(device=device, dtype=bf16).from_linear(linear())),
            ("a8w8_mxfp_dyn", lambda: A8W8_MXFP_dynamic(device=device, dtype=bf16).from_linear(linear())),
            ("a8w4_mxfp_dyn", lambda: A8W4_MXFP_dynamic(device=device, dtype=bf16).from_linear(linear())),
        ]

    for k, n in shapes:
        for label, make in layers(k, n):
            made = {}

            def build(make=make, made=made):
                made["layer"] = make()
            d.case(f"{label}_{k}x{n}_pack", build)
            if "layer" not in made:
                continue
            for m in batches:
                x = d.randn(m, k)
                d.case(f"{label}_{k}x{n}_m{m}", lambda lay=made["layer"], x=x: lay(x))
            if label == "a16w4_hqq":  # the plain GEMV, which the automatic choice passes over for 4-bit
                x = d.randn(1, k)
                d.case(f"{label}_{k}x{n}_gemv", lambda lay=made["layer"], x=x: lay.forward_manual(x, "GEMV"))
                # the packed weights back to 4-bit values (what dequantisation and checkpoint export do)
                d.case(f"{label}_{k}x{n}_unpack",
                       lambda lay=made["layer"], k=k: unpack_over_rows_triton(lay.W_q, 4, k, torch.uint8))
            del made["layer"]
    d.finish()


if __name__ == "__main__":
    main()
