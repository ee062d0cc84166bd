"""Make Triton's CPU interpreter (TRITON_INTERPRET=1) compute what the GPU computes, across the versions users have.

bfloat16:

Triton's CPU interpreter keeps bfloat16 values as their uint16 bit patterns, and
- its `create_dot` passes them to `np.matmul` unconverted, so a bf16 dot multiplies bit patterns
  (triton-lang/triton issue 11584, answered "not supported yet", Triton 3.9);
- its float32 -> bfloat16 cast truncates, where the GPU's `cvt.rn.bf16.f32` rounds to nearest even,
  which doubles the rounding error of every bf16 output.
The tests check bf16 kernels on the CPU, and the advisor runs launches in the interpreter to check what a
config computes (advisor.advice.result_check, the no-GPU capture's launches on data), so both widen bf16 dot
operands to float32 (exact: a bf16
value's bits are the upper half of its float32 bits; tensor cores also multiply bf16 exactly and
accumulate in float32) and round float32 -> bf16 casts to nearest even.

A block used as a Python index (`range(0, tl.cdiv(K, BLOCK_K))`): Triton 3.6's interpreter converts its
one-element array with `int()`, which NumPy 2.5 refuses for arrays of one dimension ("only 0-dimensional arrays
can be converted to Python scalars"; seen on the GPU machines, Triton 3.6.0 with NumPy 2.5.2); Triton 3.9
squeezes the array first, and so does the patch on the versions that do not.
"""

from __future__ import annotations

import numpy as np


def install() -> bool:
    """Patch the interpreter's dot, cast and block index; returns False when this Triton has no such interpreter
    hook."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return False
    builder_cls = getattr(interpreter, "InterpreterBuilder", None)
    handle_cls = getattr(interpreter, "TensorHandle", None)
    if builder_cls is None or handle_cls is None or getattr(builder_cls, "_advisor_bf16_dot", False):
        return builder_cls is not None
    original = builder_cls.create_dot

    def widen(handle):
        if getattr(handle.dtype, "scalar", handle.dtype) == tl.bfloat16:
            bits = handle.data.astype(np.uint32) << 16
            return handle_cls(bits.view(np.float32), tl.float32)
        return handle

    def create_dot(self, a, b, d, *args, **kwargs):
        return original(self, widen(a), widen(b), d, *args, **kwargs)

    original_cast = builder_cls.cast_impl

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            bits = np.ascontiguousarray(src.data, dtype=np.float32).view(np.uint32).astype(np.uint64)
            rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
            nan = np.isnan(src.data)
            rounded[nan] = 0x7FC0
            return handle_cls(rounded, tl.bfloat16)
        return original_cast(self, src, dst_type)

    builder_cls.create_dot = create_dot
    builder_cls.cast_impl = cast_impl
    builder_cls._advisor_bf16_dot = True
    _squeeze_index(interpreter)
    return True


def _squeeze_index(interpreter) -> None:
    """A block's `__index__` through a squeezed array (module docstring), where the interpreter sets it up per run."""
    patch_tensor = getattr(interpreter, "_patch_lang_tensor", None)
    if patch_tensor is None or getattr(patch_tensor, "_advisor_squeezed", False):
        return

    def patched(tensor, scope):
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).squeeze()))

    patched._advisor_squeezed = True
    interpreter._patch_lang_tensor = patched
