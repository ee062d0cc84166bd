"""A process running Triton's CPU interpreter compiles through one long-lived child (`ceilings.compile_child`):
the same child for every compile, a kernel file's new text compiled after it changed, the compile cache of the
TRITON_ADVISOR_HOME in force at each compile, the child's errors raised here, and a dead child replaced."""

from __future__ import annotations

import os
import signal

import pytest

from ceilings import compile_child
from ceilings.errors import AdvisorError
from ceilings.launch import Config, Launch, TensorArg

KERNEL = """
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, {body}, mask=offs < n)
"""


def launch_of(path, block=1024) -> Launch:
    tensors = (TensorArg.contiguous("x_ptr", (4096,), "float32"), TensorArg.contiguous("y_ptr", (4096,), "float32"))
    return Launch(str(path), "scale_kernel", (4,), tensors, {"n": 4096}, {}, Config({"BLOCK": block}, 4, 1))


@pytest.fixture
def fresh_child():
    compile_child.stop()
    yield
    compile_child.stop()


def test_one_child_compiles_every_launch_and_follows_the_file_and_the_cache_folder(tmp_path, monkeypatch,
                                                                                  fresh_child):
    kernel = tmp_path / "scale.py"
    kernel.write_text(KERNEL.format(body="x * 2.0"))
    monkeypatch.setenv("TRITON_ADVISOR_HOME", str(tmp_path / "home_a"))
    first = compile_child.compile_in_child(launch_of(kernel), 90, True)
    pid = compile_child._child.pid
    assert first.registers > 0 and "STG" in first.sass and "MUFU.EX2" not in first.sass
    assert (tmp_path / "home_a" / "compile" / f"{first.key}.json").exists()

    kernel.write_text(KERNEL.format(body="tl.exp(x)"))  # the same file, another kernel body
    monkeypatch.setenv("TRITON_ADVISOR_HOME", str(tmp_path / "home_b"))
    second = compile_child.compile_in_child(launch_of(kernel), 90, True)
    assert compile_child._child.pid == pid
    assert "MUFU.EX2" in second.sass and second.key != first.key
    assert (tmp_path / "home_b" / "compile" / f"{second.key}.json").exists()
    assert not (tmp_path / "home_a" / "compile" / f"{second.key}.json").exists()


def test_the_childs_errors_are_raised_here_and_a_dead_child_is_replaced(tmp_path, monkeypatch, fresh_child):
    kernel = tmp_path / "scale.py"
    kernel.write_text(KERNEL.format(body="x + 1.0"))
    monkeypatch.setenv("TRITON_ADVISOR_HOME", str(tmp_path))
    with pytest.raises(AdvisorError, match="scale_kernel does not compile for sm_90 with BLOCK=1000"):
        compile_child.compile_in_child(launch_of(kernel, block=1000), 90, False)  # tl.arange needs a power of 2
    pid = compile_child._child.pid
    os.kill(pid, signal.SIGKILL)
    compile_child._child.wait()
    compiled = compile_child.compile_in_child(launch_of(kernel), 90, False)
    assert compiled.registers > 0 and compile_child._child.pid != pid


class _Interrupted:
    """A child's output that raises KeyboardInterrupt while the parent waits for a reply (Ctrl-C mid-compile)."""

    def readline(self):
        raise KeyboardInterrupt


def test_ctrl_c_while_waiting_kills_the_child_so_no_reply_answers_the_next_request(tmp_path, monkeypatch,
                                                                                  fresh_child):
    kernel = tmp_path / "scale.py"
    kernel.write_text(KERNEL.format(body="x * 3.0"))
    monkeypatch.setenv("TRITON_ADVISOR_HOME", str(tmp_path))
    first = compile_child.compile_in_child(launch_of(kernel, block=256), 90, True)
    child = compile_child._child
    real_output, child.stdout = child.stdout, _Interrupted()
    with pytest.raises(KeyboardInterrupt):
        compile_child.compile_in_child(launch_of(kernel, block=512), 90, False)
    assert child.poll() is not None and compile_child._child is None
    real_output.close()
    again = compile_child.compile_in_child(launch_of(kernel, block=1024), 90, True)
    assert compile_child._child is not child
    # the reply is the 1024 block's (a second request for it is a hit in the cache it wrote), not the first
    # one's, nor the interrupted 512 block's
    assert again.key == compile_child.compile_in_child(launch_of(kernel, block=1024), 90, True).key
    assert again.key not in (first.key, compile_child.compile_in_child(launch_of(kernel, block=512), 90, True).key)
