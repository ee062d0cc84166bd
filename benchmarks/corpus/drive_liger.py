"""Liger-Kernel (liger-kernel 0.8.5): its Triton ops forward and backward over LLM training shapes.

Calls the autograd Functions of `liger_kernel.ops.<op>` (the default Triton implementations, never a
backend replacement). Run under `advisor record`, see README.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus_driver import Driver, backward  # noqa: E402


def main() -> None:
    d = Driver("liger")
    import capture_extras
    import torch
    import torch.nn.functional as F
    from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
    from liger_kernel.ops.dyt import LigerDyTFunction
    from liger_kernel.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction
    from liger_kernel.ops.fused_linear_cross_entropy import LigerFusedLinearCrossEntropyFunction
    from liger_kernel.ops.geglu import LigerGELUMulFunction
    from liger_kernel.ops.group_norm import LigerGroupNormFunction
    from liger_kernel.ops.jsd import LigerJSDFunction
    from liger_kernel.ops.kl_div import LigerKLDivLossFunction
    from liger_kernel.ops.layer_norm import LigerLayerNormFunction
    from liger_kernel.ops.poly_norm import LigerPolyNormFunction
    from liger_kernel.ops.qwen2vl_mrope import LigerQwen2VLMRopeFunction
    from liger_kernel.ops.relu_squared import LigerReLUSquaredFunction
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    from liger_kernel.ops.rope import LigerRopeFunction
    from liger_kernel.ops.softmax import LigerSoftmaxFunction
    from liger_kernel.ops.sparsemax import LigerSparsemaxFunction
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction
    from liger_kernel.ops.tvd import LigerTVDLossFunction

    capture_extras.install()
    bf16, f32 = torch.bfloat16, torch.float32
    tokens = d.pick(8192, 64)
    hidden = d.pick(4096, 64)
    inter = d.pick(14336, 96)

    for vocab in (d.pick(32000, 200), d.pick(128256, 300)):
        def ce(vocab=vocab):
            logits = d.randn(tokens, vocab, grad=True)
            target = d.randint(vocab, tokens)
            loss = LigerCrossEntropyFunction.apply(logits, target, None, -100, 0.0, 0.0, "mean")[0]
            (loss * 2.0).backward()  # grad_output != 1 runs the element-wise scaling kernel too
        d.case(f"cross_entropy_v{vocab}", ce)

    def flce():
        x = d.randn(d.pick(4096, 32), hidden, grad=True)
        w = d.randn(d.pick(128256, 300), hidden, grad=True, scale=0.02)
        target = d.randint(w.shape[0], x.shape[0])
        loss = LigerFusedLinearCrossEntropyFunction.apply(x, w, target)[0]
        loss.backward()
    d.case("fused_linear_cross_entropy", flce)

    for rows, cols in ((tokens, hidden), (tokens, d.pick(8192, 128)), (d.pick(4096 * 32, 4096), d.pick(128, 16))):
        def rms(rows=rows, cols=cols):
            x = d.randn(rows, cols, grad=True)
            w = d.randn(cols, grad=True)
            backward(LigerRMSNormFunction.apply(x, w, 1e-6))
        d.case(f"rms_norm_{rows}x{cols}", rms)

    def layer_norm():
        x = d.randn(tokens, hidden, grad=True)
        w, b = d.randn(hidden, grad=True), d.randn(hidden, grad=True)
        backward(LigerLayerNormFunction.apply(x, w, b, 1e-5))
    d.case("layer_norm", layer_norm)

    def fused_add_rms_norm():
        x, r = d.randn(tokens, hidden, grad=True), d.randn(tokens, hidden, grad=True)
        w = d.randn(hidden, grad=True)
        backward(LigerFusedAddRMSNormFunction.apply(x, r, w, 1e-6))
    d.case("fused_add_rms_norm", fused_add_rms_norm)

    def poly_norm():
        x = d.randn(tokens, hidden, grad=True)
        w = d.randn(3, dtype=f32, grad=True, scale=0.3)
        b = torch.randn((), device=d.device, dtype=f32, requires_grad=True)  # a scalar bias, as the op expects
        backward(LigerPolyNormFunction.apply(x, w, b, 1e-6))
    d.case("poly_norm", poly_norm)

    def dyt():
        x = d.randn(tokens, hidden, grad=True)
        alpha = d.randn(1, dtype=f32, grad=True)
        gamma, beta = d.randn(hidden, grad=True), d.randn(hidden, grad=True)
        backward(LigerDyTFunction.apply(x, alpha, gamma, beta))
    d.case("dyt", dyt)

    def group_norm():
        channels, groups = d.pick(64, 8), d.pick(8, 2)
        x = d.randn(d.pick(32, 2), channels, d.pick(4096, 32), grad=True)
        w, b = d.randn(channels, grad=True), d.randn(channels, grad=True)
        backward(LigerGroupNormFunction.apply(x, w, b, channels, groups, 1e-6))
    d.case("group_norm", group_norm)

    seq, heads, kv_heads, head_dim = d.pick(4096, 16), d.pick(32, 4), d.pick(8, 2), d.pick(128, 16)

    def rope():
        q = d.randn(1, heads, seq, head_dim, grad=True)
        k = d.randn(1, kv_heads, seq, head_dim, grad=True)
        cos, sin = d.randn(1, seq, head_dim), d.randn(1, seq, head_dim)
        q2, k2 = LigerRopeFunction.apply(q, k, cos, sin)
        torch.autograd.backward((q2, k2), (torch.randn_like(q2), torch.randn_like(k2)))
    d.case("rope", rope)

    def mrope():
        q = d.randn(1, d.pick(28, 4), seq, head_dim, grad=True)
        k = d.randn(1, d.pick(4, 2), seq, head_dim, grad=True)
        cos, sin = d.randn(3, 1, seq, head_dim), d.randn(3, 1, seq, head_dim)
        section = d.pick([16, 24, 24], [2, 3, 3])
        q2, k2 = LigerQwen2VLMRopeFunction.apply(q, k, cos, sin, section)
        torch.autograd.backward((q2, k2), (torch.randn_like(q2), torch.randn_like(k2)))
    d.case("qwen2vl_mrope", mrope)

    def swiglu():
        a, b = d.randn(tokens, inter, grad=True), d.randn(tokens, inter, grad=True)
        backward(LigerSiLUMulFunction.apply(a, b))
    d.case("swiglu", swiglu)

    def geglu():
        a, b = d.randn(tokens, inter, grad=True), d.randn(tokens, inter, grad=True)
        backward(LigerGELUMulFunction.apply(a, b))
    d.case("geglu", geglu)

    def relu_squared():
        backward(LigerReLUSquaredFunction.apply(d.randn(tokens, inter, grad=True)))
    d.case("relu_squared", relu_squared)

    for cols in (hidden, d.pick(32000, 200)):
        def softmax(cols=cols):
            backward(LigerSoftmaxFunction.apply(d.randn(d.pick(4096, 32), cols, grad=True)))
        d.case(f"softmax_{cols}", softmax)

    def sparsemax():
        backward(LigerSparsemaxFunction.apply(d.randn(d.pick(8192, 32), d.pick(1024, 64), grad=True), -1))
    d.case("sparsemax", sparsemax)

    rows, vocab = d.pick(4096, 32), d.pick(32000, 200)

    def kl_div():
        y_pred = F.log_softmax(d.randn(rows, vocab, dtype=f32), -1).requires_grad_(True)
        y_true = F.softmax(d.randn(rows, vocab, dtype=f32), -1)
        backward(LigerKLDivLossFunction.apply(y_pred, y_true, "batchmean", False, 1e-10))
    d.case("kl_div", kl_div)

    def jsd():
        student = F.log_softmax(d.randn(rows, vocab, dtype=f32), -1).to(bf16).requires_grad_(True)
        teacher = F.log_softmax(d.randn(rows, vocab, dtype=f32), -1).to(bf16)
        backward(LigerJSDFunction.apply(student, teacher, None, 0.5, -100))
    d.case("jsd", jsd)

    def tvd():
        p = F.softmax(d.randn(rows, vocab, dtype=f32), -1).requires_grad_(True)
        q = F.softmax(d.randn(rows, vocab, dtype=f32), -1)
        backward(LigerTVDLossFunction.apply(p, q, None, "batchmean", -100))
    d.case("tvd", tvd)

    d.finish()


if __name__ == "__main__":
    main()
