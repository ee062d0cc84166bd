"""A grid tile that is a group size (each program writes one value per group, addressed by its program id)
is kept as launched: torchao's fp8 block quantisers spell their quantisation group BLOCK_SIZE, and
`suggest` proposed BLOCK_SIZE=256 for one, a different result (RESULTS 36; advisor.advice.stores)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.advice.stores import group_tiles
from ceilings.compile import load_kernel

STYLES = Path(__file__).resolve().parent / "fixtures" / "styles"

HEADER = '''
import triton
import triton.language as tl

'''

KERNELS = {
    # one scale per program of BLOCK elements, at the program id: a group size
    "block_quant": '''
@triton.jit
def kernel(x_ptr, y_ptr, s_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs).to(tl.float32)
    s = tl.max(tl.abs(x)) / 448.0
    tl.store(y_ptr + offs, x / s)
    tl.store(s_ptr + pid, s)
''',
    # a 2-D block of BLOCK x BLOCK per program, its scale at pid_m * (tiles per row) + pid_n
    "block_quant_2d": '''
@triton.jit
def kernel(x_ptr, y_ptr, s_ptr, M, N, BLOCK: tl.constexpr):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    n = tl.cdiv(N, BLOCK)
    offs_m = pid_m * BLOCK + tl.arange(0, BLOCK)
    offs_n = pid_n * BLOCK + tl.arange(0, BLOCK)
    offs = offs_m[:, None] * N + offs_n[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    s = tl.max(tl.abs(x)) / 448.0
    tl.store(y_ptr + offs, x / s, mask=mask)
    tl.store(s_ptr + pid_m * n + pid_n, s)
''',
    # the same store made by a helper the kernel passes its program id to
    "helper_store": '''
@triton.jit
def _write_scale(ptr, index, value):
    tl.store(ptr + index, value)


@triton.jit
def kernel(x_ptr, y_ptr, s_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, x * 2.0)
    _write_scale(s_ptr, pid, tl.max(x))
''',
    # an elementwise kernel: every store follows the tile
    "elementwise": '''
@triton.jit
def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)
''',
    # a helper given the program id and the tile builds the offsets itself
    "helper_offsets": '''
@triton.jit
def _write_block(ptr, pid, value, B: tl.constexpr):
    offs = pid * B + tl.arange(0, B)
    tl.store(ptr + offs, value)


@triton.jit
def kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid * BLOCK + tl.arange(0, BLOCK))
    _write_block(y_ptr, pid, x * 2.0, BLOCK)
''',
    # a matrix product through tensor descriptors made on the host: offsets scaled by the tiles, no arange
    "descriptor_gemm": '''
@triton.jit
def kernel(a_desc, b_desc, c_desc, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    off_m = (pid_m * BLOCK_M).to(tl.int32)
    off_n = (pid_n * BLOCK_N).to(tl.int32)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, off_n])
        acc = tl.dot(a, b, acc)
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))
''',
    # per-row statistics of a block of rows: the rows follow the tile
    "row_stats": '''
@triton.jit
def kernel(x_ptr, mean_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=(rows[:, None] < M) & (cols[None, :] < N))
        acc += tl.sum(x, axis=1)
    tl.store(mean_ptr + rows, acc / N, mask=rows < M)
''',
}

EXPECTED = {
    "block_quant": ({"BLOCK": {0}}, {"BLOCK"}),
    "block_quant_2d": ({"BLOCK": {0, 1}}, {"BLOCK"}),
    "helper_store": ({"BLOCK": {0}}, {"BLOCK"}),
    "elementwise": ({"BLOCK": {0}}, set()),
    "helper_offsets": ({"BLOCK": {0}}, set()),
    "descriptor_gemm": ({"BLOCK_M": {0}, "BLOCK_N": {1}}, set()),
    "row_stats": ({"BLOCK_M": {0}}, set()),
}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_group_tiles_of_each_kernel(tmp_path, name):
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + KERNELS[name])
    axes, expected = EXPECTED[name]
    assert group_tiles(load_kernel(str(path), "kernel"), axes) == expected


def test_a_tile_on_another_axis_than_the_program_id_the_store_follows_is_free(tmp_path):
    """The 2-D quantiser's scale follows both program ids; a tile that divided only a third axis would be
    free (the axis map decides, not the tile's name)."""
    path = tmp_path / "q.py"
    path.write_text(HEADER + KERNELS["block_quant"])
    assert group_tiles(load_kernel(str(path), "kernel"), {"BLOCK": {1}}) == set()


@pytest.mark.slow  # three `suggest` runs of the torchao-style file in children (about 45 s of CPU on 2 cores)
def test_suggest_keeps_the_quantisation_group_of_a_block_quantiser():
    """As a user runs it: the torchao-style file's absmax quantiser writes one scale per program; every
    config `suggest` ranks keeps BLOCK_SIZE=1024 (before, its neighbours 512 and 2048 were ranked), and it says
    why."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}  # as this suite runs; the factory's kernel is captured all the same
    done = subprocess.run([sys.executable, "-m", "advisor.cli", "suggest", str(STYLES / "torchao_style.py"),
                           "--call", "absmax_scale(randn(512, 8192, f32))", "--format", "json"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    (advice,) = json.loads(done.stdout)["launches"]
    assert advice["kernel"] == "_absmax_scale_kernel"
    assert len(advice["ranked"]) > 1
    assert {c["config"]["BLOCK_SIZE"] for c in advice["ranked"]} == {1024}
    assert any("a group size, not a tile" in n and "BLOCK_SIZE=1024" in n for n in advice["caveats"])


# ------------------------------------------------------------------------------ outputs added into with atomics

SPLIT_K = '''
@triton.jit
def kernel(a_ptr, b_ptr, c_ptr, rows_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
           BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_k = tl.program_id(1)
    # rows gathered through an index tensor: read to compute the address, never written
    rm = tl.load(rows_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    rn = tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(pid_k * BLOCK_K, K, BLOCK_K * SPLIT_K):
        rk = k + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
        acc += tl.dot(a, b)
    c = c_ptr + rm[:, None] * N + rn[None, :]
    if SPLIT_K == 1:
        tl.store(c, acc)
    else:
        tl.atomic_add(c, acc)
'''
MAX_INTO = '''
@triton.jit
def kernel(x_ptr, amax_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_max(amax_ptr, tl.max(tl.abs(tl.load(x_ptr + offs))))
'''


def test_accumulated_outputs_are_what_atomic_adds_write_through(tmp_path):
    from advisor.advice.stores import accumulated_outputs

    for name, text in (("split_k", SPLIT_K), ("max_into", MAX_INTO), ("elementwise", KERNELS["elementwise"])):
        (tmp_path / f"{name}.py").write_text(HEADER + text)
    found = accumulated_outputs(load_kernel(str(tmp_path / "split_k.py"), "kernel"))
    assert "c_ptr" in found and not found & {"a_ptr", "b_ptr", "rows_ptr"}
    assert not accumulated_outputs(load_kernel(str(tmp_path / "max_into.py"), "kernel"))  # zero is no max's identity
    assert accumulated_outputs(load_kernel(str(tmp_path / "elementwise.py"), "kernel")) == set()


def test_a_split_k_config_checks_right_when_its_output_starts_at_zero(tmp_path, monkeypatch):
    """RESULTS 36: the HQQ GEMM's split-K config (its autotune pre-hook zeroes C) was called wrong from random
    contents. Run in the interpreter as `suggest --measure` runs it: the subject names C, and from the
    tensors made so, SPLIT_K 2 matches SPLIT_K 1; from random contents it does not."""
    import torch

    from advisor.advice.subjects import LaunchSubject
    from advisor.measure import launch_run
    from advisor.measure.timing import MeasurementError
    from ceilings.hardware import resolve_gpu
    from ceilings.launch import Config, Launch, TensorArg

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    path = tmp_path / "split_k.py"
    path.write_text(HEADER + SPLIT_K)
    m, n, k = 32, 16, 64
    rows = tuple(range(m))
    launch = Launch(str(path), "kernel", (m // 16, 1), (
        TensorArg.contiguous("a_ptr", (m, k), "float32"), TensorArg.contiguous("b_ptr", (k, n), "float32"),
        TensorArg.contiguous("c_ptr", (m, n), "float32"),
        TensorArg("rows_ptr", (m,), "int32", (1,), values=rows)),
        (("M", m), ("N", n), ("K", k)), (), Config({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "SPLIT_K": 1}, 4, 2))
    subject = LaunchSubject(launch, resolve_gpu("h100"))
    assert subject.accumulated() == {"c_ptr"}

    spec = importlib.util.spec_from_file_location("split_k_interpreted", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # decorated under TRITON_INTERPRET=1: runs on the CPU

    def outputs(split: int, zeroed) -> dict:
        t = launch_run.make_tensors(launch, device="cpu", zeroed=zeroed)
        module.kernel[(m // 16, split)](t["a_ptr"], t["b_ptr"], t["c_ptr"], t["rows_ptr"], m, n, k, BLOCK_M=16,
                                     BLOCK_N=16, BLOCK_K=16, SPLIT_K=split)
        return t

    for zeroed, right in ((subject.accumulated(), True), ((), False)):
        ref, split = outputs(1, zeroed), outputs(2, zeroed)
        noise = launch_run.run_noise(ref, outputs(1, zeroed))
        if right:
            launch_run.check_outputs(split, ref, noise, 1e-3, "SPLIT_K 2")
            assert torch.allclose(ref["c_ptr"], ref["a_ptr"] @ ref["b_ptr"], atol=1e-3)
        else:
            with pytest.raises(MeasurementError, match="c_ptr differs"):
                launch_run.check_outputs(split, ref, noise, 1e-3, "SPLIT_K 2")
