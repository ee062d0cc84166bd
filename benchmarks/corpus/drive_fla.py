"""flash-linear-attention (fla-core 0.6.0): chunked linear-attention ops and its fused modules.

Forward and backward of the chunked kernels over a training shape (batch 1, 4096 tokens, 16 heads of
128), a decode step of the recurrent kernel, and the fused norm, convolution, rotary and loss modules.
Gates are log-decays (log-sigmoid of random values), as the models feed them. Run under `advisor
record`, see README.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus_driver import Driver, backward  # noqa: E402


def main() -> None:
    d = Driver("fla")
    import capture_extras
    import torch
    import torch.nn.functional as F
    from fla.modules.causal_conv1d.ops import causal_conv1d
    from fla.modules.fused_cross_entropy.ops import cross_entropy_loss
    from fla.modules.fused_linear_cross_entropy.ops import fused_linear_cross_entropy_loss
    from fla.modules.norm.fused_norm_gate import rms_norm_gated
    from fla.modules.norm.l2norm import l2norm
    from fla.modules.norm.layernorm import layer_norm, rms_norm
    from fla.modules.rotary.ops import rotary_embedding
    from fla.ops import (
        chunk_delta_rule,
        chunk_gated_delta_rule,
        chunk_gla,
        chunk_kda,
        chunk_linear_attn,
        chunk_retention,
        chunk_simple_gla,
        fused_recurrent_gated_delta_rule,
    )

    capture_extras.install()
    bf16, f32 = torch.bfloat16, torch.float32
    B, T, H, K = 1, d.pick(4096, 64), d.pick(16, 2), d.pick(128, 32)

    def qkv(grad=True):
        return (d.randn(B, T, H, K, grad=grad) for _ in range(3))

    def log_decay(*shape):
        return F.logsigmoid(d.randn(*shape, dtype=f32)).requires_grad_(True)

    def betas():
        return torch.sigmoid(d.randn(B, T, H, dtype=f32)).to(bf16).requires_grad_(True)

    # With Triton < 3.7.1 on Hopper, fla refuses the backward of gated chunk kernels (wrong results in
    # chunk_bwd_dqkwg, its issue #640) and raises there: for this op and chunk_simple_gla the trace holds
    # the forward launches and the backward ones made before that point, and the case is reported failed.
    def gdn():
        q, k, v = qkv()
        backward(chunk_gated_delta_rule(q, k, v, log_decay(B, T, H), betas(), use_qk_l2norm_in_kernel=True))
    d.case("chunk_gated_delta_rule", gdn)

    def kda():
        q, k, v = qkv()
        backward(chunk_kda(q, k, v, log_decay(B, T, H, K), betas(), use_qk_l2norm_in_kernel=True))
    d.case("chunk_kda", kda)

    def delta():
        q, k, v = qkv()
        backward(chunk_delta_rule(q, k, v, betas(), use_qk_l2norm_in_kernel=True))
    d.case("chunk_delta_rule", delta)

    def gla():
        q, k, v = qkv()
        backward(chunk_gla(q, k, v, log_decay(B, T, H, K) / 16))
    d.case("chunk_gla", gla)

    def simple_gla():
        q, k, v = qkv()
        backward(chunk_simple_gla(q, k, v, log_decay(B, T, H)))
    d.case("chunk_simple_gla", simple_gla)

    def retention():
        q, k, v = qkv()
        backward(chunk_retention(q, k, v))
    d.case("chunk_retention", retention)

    def linear_attn():
        q, k, v = qkv()
        backward(chunk_linear_attn(q, k, v))
    d.case("chunk_linear_attn", linear_attn)

    def recurrent_decode():
        n = d.pick(64, 4)  # a decode batch: one token each, carrying a state per sequence
        q, k, v = (d.randn(n, 1, H, K) for _ in range(3))
        state = d.randn(n, H, K, K, dtype=f32)
        g = F.logsigmoid(d.randn(n, 1, H, dtype=f32))
        beta = torch.sigmoid(d.randn(n, 1, H, dtype=f32)).to(bf16)
        fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, initial_state=state, output_final_state=True,
                                         use_qk_l2norm_in_kernel=True)
    d.case("fused_recurrent_gated_delta_rule", recurrent_decode)

    tokens, hidden = d.pick(8192, 64), d.pick(4096, 64)

    def norm(is_rms):
        def run():
            x = d.randn(tokens, hidden, grad=True)
            w = d.randn(hidden, dtype=f32, grad=True)
            b = None if is_rms else d.randn(hidden, dtype=f32, grad=True)
            backward(rms_norm(x, w, b) if is_rms else layer_norm(x, w, b))
        return run
    d.case("rms_norm", norm(True))
    d.case("layer_norm", norm(False))

    def norm_gate():
        x, g = d.randn(tokens, H * K, grad=True), d.randn(tokens, H * K, grad=True)
        backward(rms_norm_gated(x, g, d.randn(H * K, dtype=f32, grad=True), None))
    d.case("rms_norm_gated", norm_gate)

    def l2():
        backward(l2norm(d.randn(B * T * H, K, grad=True)))
    d.case("l2norm", l2)

    def conv():
        x = d.randn(B, T, d.pick(4096, 64), grad=True)
        w = d.randn(x.shape[-1], 4, grad=True)
        backward(causal_conv1d(x, w, activation="silu"))
    d.case("causal_conv1d", conv)

    def rotary():
        x = d.randn(B, T, H, K, grad=True)
        cos, sin = d.randn(T, K // 2), d.randn(T, K // 2)
        backward(rotary_embedding(x, cos, sin))
    d.case("rotary_embedding", rotary)

    vocab = d.pick(128256, 300)

    def ce():
        logits = d.randn(d.pick(4096, 32), vocab, grad=True)
        loss = cross_entropy_loss(logits, d.randint(vocab, logits.shape[0]))[0]
        loss.mean().backward()
    d.case("fused_cross_entropy", ce)

    def flce():
        x = d.randn(d.pick(4096, 32), hidden, grad=True)
        w = d.randn(vocab, hidden, grad=True, scale=0.02)
        fused_linear_cross_entropy_loss(x, d.randint(vocab, x.shape[0]), w).backward()
    d.case("fused_linear_cross_entropy", flce)

    d.finish()


if __name__ == "__main__":
    main()
