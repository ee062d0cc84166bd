"""Kernel files the product path must open and bind as their library does: a file inside a package
with relative imports, and a kernel that declares a constexpr between runtime parameters."""

from __future__ import annotations

import textwrap

from ceilings.compile import compile_launch, launch_arguments, load_kernel
from ceilings.launch import Config, Launch, TensorArg

KERNEL = '''
import triton
import triton.language as tl

from .helpers import double


@triton.jit
def scaled_copy(x_ptr, BLOCK: tl.constexpr, y_ptr, n, SCALE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, double(tl.load(x_ptr + offs, mask=mask)) * SCALE, mask=mask)


@triton.jit
def doubled_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, double(tl.load(x_ptr + offs, mask=mask)), mask=mask)
'''
HELPERS = '''
import triton


@triton.jit
def double(x):
    return x + x
'''


def package(tmp_path):
    root = tmp_path / "mylib" / "ops"
    root.mkdir(parents=True)
    (tmp_path / "mylib" / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "helpers.py").write_text(textwrap.dedent(HELPERS))
    (root / "copy.py").write_text(textwrap.dedent(KERNEL))
    return root / "copy.py"


def tensors():
    return (TensorArg.contiguous("x_ptr", (4096,), "float32"), TensorArg.contiguous("y_ptr", (4096,), "float32"))


def test_a_kernel_file_with_relative_imports_opens_inside_its_package(tmp_path):
    path = package(tmp_path)
    fn = load_kernel(path, "doubled_copy")
    assert fn.fn.__name__ == "doubled_copy" and not fn.__globals__.get("__advisor_skipped__")
    # The helper came through the relative import: the kernel compiles (it calls `double`).
    launch = Launch(str(path), "doubled_copy", (4,), tensors(), {"n": 4096}, {}, Config({"BLOCK": 1024}, 4, 1))
    assert "STG" in compile_launch(launch, use_cache=False).sass


def test_runtime_arguments_after_a_constexpr_bind_by_name(tmp_path):
    path = package(tmp_path)
    launch = Launch(str(path), "scaled_copy", (4,), tensors(), {"n": 4096}, {"SCALE": 3}, Config({"BLOCK": 1024}, 4, 1))
    fn = load_kernel(path, "scaled_copy")
    args, kwargs = launch_arguments(fn, launch)
    assert len(args) == 1 and set(kwargs) == {"BLOCK", "y_ptr", "n", "SCALE"}
    compiled = compile_launch(launch, use_cache=False)
    assert compiled.sass and "LDG" in compiled.sass and "STG" in compiled.sass
