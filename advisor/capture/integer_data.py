"""Integer tensors the host code makes with data, in a capture without a GPU.

A `--call` runs the host code on tensors without data (torch `meta` tensors standing for CUDA ones,
`ceilings.standin`). Index tensors a host builds itself from sizes or from `randint` data then had no contents
either, because it asks for them on the GPU (`torch.zeros(S + 1, dtype=torch.int64, device=x.device)` for a
segment sum's CSR offsets, `torch.randint(0, V, (B, L), device=table.device)` for an embedding bag's ids):
a loop bounded by them was counted once in the expected work and the prediction was 16x too fast on a held-out
segment sum (RESULTS 56). Here integer factories asked for on the GPU make a CPU tensor with data instead
(random ones from one generator seeded at the capture's start), up to MAX_BYTES each, so what the host computes
from them (a cumsum into offsets, a sort's permutation) has data too and the trace carries it
(`TensorArg.values`, `TensorArg.sample`). `empty` stays without data: its contents are whatever a kernel writes.
Likewise an integer tensor with data that the host moves to the GPU (`row_ptr.to(a.device)`, `.cuda()`: CSR
pointers the call builds on the CPU with `torch.arange` or `randint`) stays on the CPU with its data, in the dtype
asked for; without this the move made it a tensor without data and a block-sparse matmul's row pointers were
zeros, every loop empty, in the ceiling, the interpreter check and the timings alike (set 11, RESULTS 59).

A host may treat a CPU tensor otherwise than a CUDA one (`if ids.is_cuda`, a device check that raises), so the
capture with this on is used only where it makes the same launches as the capture without it
(`advisor.capture.call.capture_call_with_data`).
"""

from __future__ import annotations

MAX_BYTES = 64 << 20  # per tensor: the capture's own memory, on a machine that holds the host's index tensors


def integer_factories_mode():
    """A TorchFunctionMode that makes integer tensors asked for on the GPU on the CPU, with data. Pushed inside
    the stand-in environment's meta mode, it sees the device the host code asked for before that mode turns it
    into meta."""
    import torch
    from torch.overrides import TorchFunctionMode

    from ceilings.standin import _is_gpu_device

    factories = {torch.zeros, torch.ones, torch.full, torch.arange, torch.randint, torch.randperm, torch.tensor}
    random = {torch.randint, torch.randperm}
    generator = torch.Generator().manual_seed(0)

    moves = {torch.Tensor.to, torch.Tensor.cuda}

    def integer(t) -> bool:
        return not (t.is_floating_point() or t.is_complex())

    def has_integer_data(t) -> bool:
        return isinstance(t, torch.Tensor) and t.device.type == "cpu" and integer(t)

    class IntegerFactories(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func in moves and args and has_integer_data(args[0]):
                moved = func(*args, **kwargs)  # through the meta mode below: to the GPU (meta) or not, its dtype
                if moved.is_meta and integer(moved):
                    return args[0].to(dtype=moved.dtype)
                return moved
            if func not in factories or not _is_gpu_device(kwargs.get("device")):
                return func(*args, **kwargs)
            shaped = func(*args, **kwargs)  # without data (the meta mode below): its dtype and size
            if not integer(shaped) or shaped.numel() * shaped.element_size() > MAX_BYTES:
                return shaped
            kwargs["device"] = "cpu"
            if func in random and kwargs.get("generator") is None:
                kwargs["generator"] = generator
            return func(*args, **kwargs)

    return IntegerFactories()
