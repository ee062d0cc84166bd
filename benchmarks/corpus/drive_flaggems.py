"""FlagGems (flag-gems 5.0.2): its Triton ATen ops and fused ops over LLM shapes, forward and backward.

ATen ops go through `flag_gems.use_gems(include=[...])` (the library's own dispatch, one include list per
case so that only the op under test is FlagGems'); fused ops are called from `flag_gems.fused`. Inputs are
made outside the context. Run under `advisor record`, see README.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus_driver import Driver, backward  # noqa: E402


def main() -> None:
    d = Driver("flaggems")
    import capture_extras
    import flag_gems
    import torch
    import torch.nn.functional as F
    from flag_gems.fused.cross_entropy_loss import cross_entropy_loss
    from flag_gems.fused.fused_add_rms_norm import fused_add_rms_norm
    from flag_gems.fused.moe_align_block_size import moe_align_block_size
    from flag_gems.fused.rotary_embedding import apply_rotary_pos_emb
    from flag_gems.fused.silu_and_mul import silu_and_mul
    from flag_gems.fused.skip_layernorm import skip_layer_norm
    from flag_gems.fused.topk_softmax import topk_softmax
    from flag_gems.ops.attention import scaled_dot_product_attention
    from flag_gems.ops.per_token_group_quant_fp8 import per_token_group_quant_fp8
    from flag_gems.ops.rms_norm import rms_norm
    from flag_gems.ops.w8a8_block_fp8_matmul import w8a8_block_fp8_matmul

    capture_extras.install()
    bf16, f32 = torch.bfloat16, torch.float32
    tokens, hidden, inter = d.pick(8192, 64), d.pick(4096, 64), d.pick(14336, 96)
    vocab = d.pick(128256, 300)

    def gems(ops, fn):
        def run():
            with flag_gems.use_gems(include=ops):
                fn()
        return run

    for m, k, n in ((tokens, hidden, hidden), (tokens, hidden, inter), (d.pick(16, 4), hidden, inter)):
        a, b = d.randn(m, k), d.randn(k, n, scale=0.02)
        d.case(f"mm_{m}x{k}x{n}", gems(["mm"], lambda a=a, b=b: torch.mm(a, b)))
    x, w, bias = d.randn(d.pick(4096, 32), hidden), d.randn(hidden, hidden, scale=0.02), d.randn(hidden)
    d.case("addmm", gems(["addmm"], lambda: torch.addmm(bias, x, w)))
    q, kt = d.randn(32, d.pick(2048, 16), d.pick(128, 16)), d.randn(32, d.pick(128, 16), d.pick(2048, 16))
    d.case("bmm", gems(["bmm"], lambda: torch.bmm(q, kt)))
    wv, xv = d.randn(inter, hidden, scale=0.02), d.randn(hidden)
    d.case("mv", gems(["mv"], lambda: torch.mv(wv, xv)))

    def softmax():
        x = d.randn(d.pick(4096, 32), d.pick(32000, 200), grad=True)
        backward(torch.softmax(x, -1))
    d.case("softmax", gems(["softmax", "softmax_backward"], softmax))

    def aten_cross_entropy():
        logits = d.randn(tokens, d.pick(32000, 200), grad=True)
        F.cross_entropy(logits, d.randint(logits.shape[1], tokens)).backward()
    d.case("log_softmax_nll", gems(["log_softmax", "log_softmax_backward", "nll_loss_forward",
                                    "nll_loss_backward"], aten_cross_entropy))

    def fused_cross_entropy():
        logits = d.randn(tokens, vocab, grad=True)
        cross_entropy_loss(logits, d.randint(vocab, tokens)).backward()
    d.case("fused_cross_entropy", fused_cross_entropy)

    def layer_norm():
        x = d.randn(tokens, hidden, grad=True)
        w, b = d.randn(hidden, grad=True), d.randn(hidden, grad=True)
        backward(F.layer_norm(x, (hidden,), w, b, 1e-5))
    d.case("layer_norm", gems(["layer_norm", "layer_norm_backward"], layer_norm))

    def rms():
        x, w = d.randn(tokens, hidden, grad=True), d.randn(hidden, grad=True)
        backward(rms_norm(x, [hidden], w, 1e-6))
    d.case("rms_norm", rms)

    def group_norm():
        x = d.randn(d.pick(16, 2), d.pick(64, 8), d.pick(4096, 32), grad=True)
        w, b = d.randn(x.shape[1], grad=True), d.randn(x.shape[1], grad=True)
        backward(F.group_norm(x, d.pick(8, 2), w, b, 1e-6))
    d.case("group_norm", gems(["group_norm", "group_norm_backward"], group_norm))

    def fused_add_rms():
        x, r, w = d.randn(tokens, hidden), d.randn(tokens, hidden), d.randn(hidden)
        fused_add_rms_norm(x, r, [hidden], w, 1e-6)
    d.case("fused_add_rms_norm", fused_add_rms)

    def skip_ln():
        x, r = d.randn(tokens, hidden), d.randn(tokens, hidden)
        skip_layer_norm(x, r, [hidden], d.randn(hidden), d.randn(hidden), 1e-5)
    d.case("skip_layer_norm", skip_ln)

    def embedding():
        weight = d.randn(vocab, hidden, grad=True, scale=0.02)
        backward(F.embedding(d.randint(vocab, tokens), weight))
    d.case("embedding", gems(["embedding", "embedding_backward", "embedding_dense_backward"], embedding))

    seq, heads, head_dim = d.pick(4096, 32), d.pick(32, 2), d.pick(128, 16)

    def attention():
        q, k, v = (d.randn(1, heads, seq, head_dim, grad=True) for _ in range(3))
        backward(scaled_dot_product_attention(q, k, v, is_causal=True))
    d.case("attention", attention)

    def rope():
        q = d.randn(seq, heads, head_dim)
        k = d.randn(seq, d.pick(8, 2), head_dim)
        cos, sin = d.randn(seq, head_dim // 2), d.randn(seq, head_dim // 2)
        apply_rotary_pos_emb(q, k, cos, sin, d.randint(seq, seq))
    d.case("rotary_embedding", rope)

    def swiglu():
        backward(silu_and_mul(d.randn(tokens, inter, grad=True), d.randn(tokens, inter, grad=True)))
    d.case("silu_and_mul", swiglu)

    rows = d.pick(64, 8)  # a decode batch: sampling over the vocabulary
    logits = d.randn(rows, vocab)
    probs = torch.softmax(logits.float(), -1)
    d.case("argmax", gems(["argmax"], lambda: torch.argmax(logits, -1)))
    d.case("topk", gems(["topk"], lambda: torch.topk(logits, 50, -1)))
    d.case("sort", gems(["sort"], lambda: torch.sort(probs, -1, descending=True)))
    d.case("cumsum", gems(["cumsum"], lambda: torch.cumsum(probs, -1)))
    x = d.randn(tokens, hidden)
    d.case("sum_dim", gems(["sum_dim"], lambda: x.sum(-1)))
    d.case("mean_dim", gems(["mean_dim"], lambda: x.float().mean(-1)))
    d.case("var_mean", gems(["var_mean"], lambda: torch.var_mean(x.float(), -1)))
    d.case("amax", gems(["amax"], lambda: torch.amax(x, -1)))
    d.case("vector_norm", gems(["vector_norm"], lambda: torch.linalg.vector_norm(x.float(), dim=-1)))
    table = d.randn(vocab, hidden)
    ids = d.randint(vocab, tokens)
    d.case("index_select", gems(["index_select"], lambda: torch.index_select(table, 0, ids)))
    big = d.randn(tokens, d.pick(32000, 200))
    d.case("gather", gems(["gather"], lambda: torch.gather(big, 1, d.randint(big.shape[1], tokens, 1))))

    experts, top_k = d.pick(64, 8), d.pick(8, 2)

    def moe_routing():
        gating = d.randn(tokens, experts, dtype=f32)
        weights = torch.empty(tokens, top_k, dtype=f32, device=d.device)
        indices = torch.empty(tokens, top_k, dtype=torch.int32, device=d.device)
        token_expert = torch.empty(tokens, top_k, dtype=torch.int32, device=d.device)
        topk_softmax(weights, indices, token_expert, gating, True)
        moe_align_block_size(indices, 64, experts)
    d.case("moe_routing", moe_routing)

    def fp8_gemm():
        x = d.randn(d.pick(4096, 32), hidden)
        xq, xs = per_token_group_quant_fp8(x, 128 if not d.small else 16)
        wq = d.randn(inter, hidden, dtype=f32, scale=0.02).to(torch.float8_e4m3fn)
        block = 128 if not d.small else 16
        ws = d.randn(-(-inter // block), -(-hidden // block), dtype=f32, scale=0.01).abs()
        w8a8_block_fp8_matmul(xq, wq, xs, ws, [block, block], bf16)
    d.case("fp8_block_gemm", fp8_gemm)

    d.finish()


if __name__ == "__main__":
    main()
