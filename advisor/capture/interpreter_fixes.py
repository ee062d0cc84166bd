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

float8: its float32 / float16 / bfloat16 -> float8 (e4m3fn, e5m2) conversion drops the carry of a mantissa that
rounds up (1.97 -> 1.0) and rounds halves up; the patch converts as the GPU's `cvt.rn.satfinite` does (`_fp8_downcast`).

A block used as a Python index (`range(0, tl.cdiv(K, BLOCK_K))`): Triton 3.6's interpreter converts its
one-element array with `int()`, which NumPy 2.5 refuses for arrays of one dimension ("only 0-dimensional arrays
can be converted to Python scalars"; seen on the GPU machines, Triton 3.6.0 with NumPy 2.5.2); Triton 3.9
squeezes the array first, and so does the patch on the versions that do not.

A Python float argument: the GPU passes it as an fp32 scalar (`scale.to(tl.float32)` works there); the
interpreter (3.6 to 3.9) passes the Python float itself ("'float' object has no attribute 'to'"), so it is
wrapped as the interpreter wraps an int.

libdevice's math (`from triton.language.extra.libdevice import tanh`): those functions are stubs that the
compiler resolves to CUDA's libdevice; the interpreter runs the stub, which returns None ("'NoneType' object has
no attribute 'dtype'"), or for the CUDA module's own functions raises "extern_elementwise not supported".
`LibdeviceCalls` computes them with NumPy in the argument's precision for the time of a run (the
elementwise math, predicates and roundings below; an integer bit function is left as it was).
"""

from __future__ import annotations

import math

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
            return handle_cls(_bf16_as_float32(handle.data), tl.float32)
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
    _fp8_downcast(builder_cls, handle_cls, tl)
    builder_cls._advisor_bf16_dot = True
    _squeeze_index(interpreter)
    _float_arguments(interpreter, tl)
    return True


def _bf16_as_float32(bits) -> np.ndarray:
    """bfloat16 values kept as their uint16 bit patterns, as float32 (exact: a bf16 value's bits are the upper half
    of its float32 bits)."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def _fp8_downcast(builder_cls, handle_cls, tl) -> None:
    """float32 / float16 / bfloat16 -> float8 (e4m3fn, e5m2) rounded to nearest even as the GPU's `cvt.rn.satfinite`
    does: the interpreter's own conversion drops the carry when the mantissa rounds up (1.97 -> 1.0, not 2.0: seen
    on set 12's NVFP4 scales, RESULTS 59) and rounds halves up. torch's conversion is round-to-nearest-even and
    saturates e4m3fn at 448, as the GPU's does."""
    import torch

    original = builder_cls.create_fp_to_fp
    targets = {tl.float8e4nv: torch.float8_e4m3fn, tl.float8e5: torch.float8_e5m2}
    wide = {tl.float32: np.float32, tl.float16: np.float16}

    def as_float32(handle):
        scalar = handle.dtype.scalar
        if scalar == tl.bfloat16:
            return _bf16_as_float32(handle.data)
        return np.asarray(handle.data, dtype=wide[scalar]).astype(np.float32)

    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        source, target = src.dtype.scalar, targets.get(dst_type.scalar)
        rtz = "RTZ" in str(rounding_mode)  # round toward zero asked for: the interpreter's own path
        if target is None or rtz or source not in (tl.float32, tl.float16, tl.bfloat16):
            return original(self, src, dst_type, rounding_mode)
        values = torch.from_numpy(np.ascontiguousarray(as_float32(src)))
        bits = values.to(target).view(torch.uint8).numpy().reshape(np.shape(src.data))
        return handle_cls(bits, dst_type.scalar)

    builder_cls.create_fp_to_fp = create_fp_to_fp


def _float_arguments(interpreter, tl) -> None:
    """A Python float argument as the fp32 scalar the GPU passes (module docstring)."""
    convert = getattr(interpreter, "_implicit_cvt", None)
    if convert is None or getattr(convert, "_advisor_floats", False):
        return

    def implicit_cvt(arg):
        if isinstance(arg, float):
            return tl.tensor(interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        return convert(arg)

    implicit_cvt._advisor_floats = True
    interpreter._implicit_cvt = implicit_cvt


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


def _round_half_away(x):
    return np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5))


def _each(f):
    return np.vectorize(f, otypes=[np.float64])


_ONE_HALF_SQRT2 = 1 / math.sqrt(2)
# libdevice name -> (NumPy function of the arguments' arrays, what it returns: "float" in the arguments'
# precision, "int32" a 0/1 predicate as libdevice's is)
_NUMPY = {
    **{name: (getattr(np, name), "float") for name in (
        "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "sin", "cos", "tan", "sinh",
        "cosh", "tanh", "floor", "ceil", "trunc", "rint", "fmod", "hypot", "copysign", "nextafter", "ldexp")},
    "asin": (np.arcsin, "float"), "acos": (np.arccos, "float"), "atan": (np.arctan, "float"),
    "atan2": (np.arctan2, "float"), "asinh": (np.arcsinh, "float"), "acosh": (np.arccosh, "float"),
    "atanh": (np.arctanh, "float"), "abs": (np.abs, "float"), "nearbyint": (np.rint, "float"),
    "round": (_round_half_away, "float"), "exp10": (lambda x: np.power(10.0, x), "float"),
    "rsqrt": (lambda x: 1 / np.sqrt(x), "float"), "rsqrt_rn": (lambda x: 1 / np.sqrt(x), "float"),
    "rcbrt": (lambda x: 1 / np.cbrt(x), "float"), "pow": (np.power, "float"),
    "fmax": (np.fmax, "float"), "fmin": (np.fmin, "float"), "fdim": (lambda a, b: np.maximum(a - b, 0), "float"),
    "fma": (lambda a, b, c: a * b + c, "float"), "remainder": (lambda a, b: a - b * np.rint(a / b), "float"),
    "sinpi": (lambda x: np.sin(np.pi * x), "float"), "cospi": (lambda x: np.cos(np.pi * x), "float"),
    "erf": (_each(math.erf), "float"), "erfc": (_each(math.erfc), "float"),
    "lgamma": (_each(math.lgamma), "float"), "tgamma": (_each(math.gamma), "float"),
    "normcdf": (_each(lambda x: 0.5 * math.erfc(-x * _ONE_HALF_SQRT2)), "float"),
    "saturatef": (lambda x: np.clip(x, 0.0, 1.0), "float"),
    "isnan": (np.isnan, "int32"), "isinf": (np.isinf, "int32"), "isfinited": (np.isfinite, "int32"),
    "finitef": (np.isfinite, "int32"), "signbit": (np.signbit, "int32"),
    **{f"fast_{name}f": (f, "float") for name, f in (
        ("exp", np.exp), ("exp10", lambda x: np.power(10.0, x)), ("log", np.log), ("log2", np.log2),
        ("log10", np.log10), ("sin", np.sin), ("cos", np.cos), ("tan", np.tan), ("pow", np.power))},
    "fast_dividef": (np.divide, "float"),
    **{f"{op}_{mode}": (f, "float") for op, f in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                                                   ("div", np.divide), ("sqrt", np.sqrt),
                                                   ("rcp", lambda x: 1 / x))
       for mode in ("rn", "rz", "rd", "ru")},
}
_MODULES = ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice")


def _numpy_call(name: str):
    """libdevice's `name` computed with NumPy on the interpreter's tensors."""
    compute, returns = _NUMPY[name]

    def call(*args, **_ignored):  # _semantic and the like
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle

        tensors = [a for a in args if isinstance(a, tl.tensor)]
        dtype = next((t.dtype.scalar for t in tensors if t.dtype.scalar.is_floating()), tl.float32)
        precision = np.float64 if dtype == tl.float64 else np.float32
        dtype = tl.float64 if precision is np.float64 else tl.float32
        arrays = [np.asarray(a.handle.data if isinstance(a, tl.tensor) else getattr(a, "value", a)).astype(precision)
                  for a in args]
        with np.errstate(all="ignore"):
            out = np.asarray(compute(*arrays))
        out_dtype, out = (tl.int32, out.astype(np.int32)) if returns == "int32" else (dtype, out.astype(precision))
        block = next((t.type for t in tensors if t.type.is_block()), None)
        ty = tl.block_type(out_dtype, list(out.shape)) if block is not None else out_dtype
        return tl.tensor(TensorHandle(out, out_dtype), ty)

    call.__name__ = name
    return call


class LibdeviceCalls:
    """For the time of an interpreted run, libdevice's math computed with NumPy (module docstring): `cover(fn)`
    for each Python function the run interprets (the kernel, its helpers), `restore()` after."""

    def __init__(self):
        self._saved: list[tuple[dict, str, object]] = []  # (namespace, name, what it held): a module's or globals
        self._modules_done = False

    def _swap(self, names: dict, key: str, libdevice_name: str) -> None:
        self._saved.append((names, key, names[key]))
        names[key] = _numpy_call(libdevice_name)

    def cover(self, fn) -> None:
        import sys

        if not self._modules_done:  # `libdevice.tanh` and `tl.extra.libdevice.tanh` go through the modules
            self._modules_done = True
            for module in (sys.modules.get(m) for m in _MODULES):
                for name in _NUMPY:
                    if module is not None and name in vars(module):
                        self._swap(vars(module), name, name)
        names = getattr(fn, "__globals__", {})
        for key, value in list(names.items()):
            if getattr(value, "__module__", None) in _MODULES and getattr(value, "__name__", None) in _NUMPY:
                self._swap(names, key, value.__name__)

    def restore(self) -> None:
        while self._saved:
            names, name, value = self._saved.pop()
            names[name] = value
