"""`advisor apply` where a kernel's config is written at its launch (`kernel[grid](..., num_warps=4)`):
the literals replaced byte for byte, missing num_warps / num_stages added, and every case it cannot edit
safely refused with the line to change (advisor/advice/launch_edit.py)."""

from __future__ import annotations

import pytest

from advisor.advice.edit import write
from advisor.advice.launch_edit import plan_launch_literals
from ceilings.errors import AdvisorError
from ceilings.launch import Config

HOST = '''import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def scale(x, y, block_from_host=1024):
    grid = (triton.cdiv(x.numel(), {block}),)
    scale_kernel[grid](x, y, x.numel(), BLOCK={block}{extra})  # the launch
    return y
'''


def kernel_file(tmp_path, block="256", extra=", num_warps=4, num_stages=2", more=""):
    path = tmp_path / "scale.py"
    path.write_text(HOST.format(block=block, extra=extra) + more)
    return path


def test_literals_at_the_launch_are_replaced_and_nothing_else(tmp_path):
    path = kernel_file(tmp_path)
    before = path.read_bytes()
    edit = plan_launch_literals(path, "scale_kernel", Config({"BLOCK": 256}, 4, 2), Config({"BLOCK": 1024}, 8, 2))
    assert edit.before == before and b"BLOCK=1024, num_warps=8, num_stages=2)  # the launch" in edit.after
    assert edit.after == before.replace(b"BLOCK=256, num_warps=4", b"BLOCK=1024, num_warps=8")
    write(edit)
    assert path.read_bytes() == edit.after and (tmp_path / "scale.py.bak").read_bytes() == before


def test_triton_defaults_not_written_are_added_as_keywords(tmp_path):
    path = kernel_file(tmp_path, extra="")
    edit = plan_launch_literals(path, "scale_kernel", Config({"BLOCK": 256}, 4, 3), Config({"BLOCK": 256}, 8, 1))
    assert b"BLOCK=256, num_warps=8, num_stages=1)  # the launch" in edit.after


@pytest.mark.parametrize("block, extra, more, current, says", [
    ("block_from_host", "", "", Config({"BLOCK": 1024}, 4, 3), "BLOCK is passed as `block_from_host`"),
    ("256", ", num_warps=4", "\n\ndef again(x, y):\n    scale_kernel[(1,)](x, y, 1, BLOCK=256)\n",
     Config({"BLOCK": 256}), "launched at lines 13, 18"),
    ("256", ", **opts", "", Config({"BLOCK": 256}, 4, 3), "num_warps is not a keyword of the launch"),
])
def test_what_cannot_be_edited_safely_is_refused_with_its_line(tmp_path, block, extra, more, current, says):
    path = kernel_file(tmp_path, block=block, extra=extra, more=more)
    before = path.read_bytes()
    best = Config({"BLOCK": 512}, 8, current.num_stages)
    with pytest.raises(AdvisorError, match="scale") as err:
        plan_launch_literals(path, "scale_kernel", current, best)
    assert says in str(err.value)
    assert path.read_bytes() == before and not (tmp_path / "scale.py.bak").exists()


NAMED = '''import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def scale(x, y{param}):
    BLOCK = 256{again}
    grid = (triton.cdiv(x.numel(), BLOCK),)
    scale_kernel[grid](x, y, x.numel(), BLOCK=BLOCK, num_warps=4)
    return y
'''


def test_a_name_bound_once_to_the_literal_is_edited_where_it_is_bound(tmp_path):
    """`BM = 4` ... `BM=BM` (a user's fp8 quantisation, RESULTS 51): the binding's literal is replaced, so the host's
    grid, written from the same name, follows the new tile."""
    path = tmp_path / "scale.py"
    path.write_text(NAMED.format(param="", again=""))
    before = path.read_bytes()
    edit = plan_launch_literals(path, "scale_kernel", Config({"BLOCK": 256}, 4, 3), Config({"BLOCK": 1024}, 8, 3))
    assert edit.after == before.replace(b"BLOCK = 256", b"BLOCK = 1024").replace(b"num_warps=4", b"num_warps=8")


def test_a_literal_at_the_launch_edits_the_hosts_binding_of_the_same_name_too(tmp_path):
    """`BLOCK = 256; grid = (cdiv(n, BLOCK),)` ... `BLOCK=256` at the launch (a user's row-wise top-k mask, RESULTS
    56): both change, or the edited launch would run the new tile on the old grid, a part of the output."""
    path = tmp_path / "scale.py"
    path.write_text(NAMED.format(param="", again="").replace("BLOCK=BLOCK", "BLOCK=256"))
    before = path.read_bytes()
    edit = plan_launch_literals(path, "scale_kernel", Config({"BLOCK": 256}, 4, 3), Config({"BLOCK": 1024}, 8, 3))
    assert edit.after == before.replace(b"256", b"1024").replace(b"num_warps=4", b"num_warps=8")
    # a binding of another value, or bound twice, is the host's own: only the launch's literal changes
    for again in ("\n    BLOCK = 128", "\n    if x.numel() < 4096:\n        BLOCK = 256"):
        path.write_text(NAMED.format(param="", again=again).replace("BLOCK=BLOCK", "BLOCK=256"))
        edit = plan_launch_literals(path, "scale_kernel", Config({"BLOCK": 256}, 4, 3), Config({"BLOCK": 1024}, 4, 3))
        assert edit.after.count(b"1024") == 1 and b"BLOCK=1024, num_warps=4" in edit.after


@pytest.mark.parametrize("param, again, says", [
    (", BLOCK=256", "", "BLOCK is passed as `BLOCK`"),  # a parameter: the caller's choice
    ("", "\n    if x.numel() < 4096:\n        BLOCK = 128", "BLOCK is passed as `BLOCK`"),  # bound twice
])
def test_a_name_bound_otherwise_is_refused(tmp_path, param, again, says):
    path = tmp_path / "scale.py"
    path.write_text(NAMED.format(param=param, again=again))
    with pytest.raises(AdvisorError, match=says):
        plan_launch_literals(path, "scale_kernel", Config({"BLOCK": 256}, 4, 3), Config({"BLOCK": 1024}, 8, 3))


def test_a_file_without_the_launch_says_where_to_write_it(tmp_path):
    path = tmp_path / "only_kernel.py"
    path.write_text(HOST.split("def scale(")[0])
    with pytest.raises(AdvisorError, match="no launch `scale_kernel\\[grid\\]"):
        plan_launch_literals(path, "scale_kernel", Config({"BLOCK": 256}), Config({"BLOCK": 512}))


@pytest.mark.slow
def test_apply_does_not_write_an_unmeasured_close_call_into_a_launch(tmp_path, monkeypatch):
    """A launch's own config changes what runs: a predicted gain within the model's error is refused unless
    --verify will measure it (section 49: the batched GEMM's `w2 s1`, predicted 1.25x, ran 0.88x)."""
    import dataclasses

    from advisor.advice import search
    from advisor.advice.suggest import advise, plan_apply, subjects_for

    path = kernel_file(tmp_path)
    (advice,) = advise(subjects_for(str(path), call="scale(randn(1 << 20), randn(1 << 20))"), top_k=3,
                       confirm=False)
    other = next(c for c in advice.ranked if c.config != advice.current.config)
    picked = dataclasses.replace(advice, ranked=[other, *[c for c in advice.ranked if c is not other]])
    monkeypatch.setattr(search, "close_call", lambda a, model=None: ["within the model's error"])
    with pytest.raises(AdvisorError, match="within the model's error, and would replace the launch's own config"):
        plan_apply([picked], min_speedup=0.0, close_calls=False)
    (edit,) = plan_apply([picked], min_speedup=0.0, close_calls=True)  # --verify: measured after writing
    assert f"BLOCK={other.config['BLOCK']}".encode() in edit.after and edit.before == path.read_bytes()


def test_the_config_location_of_a_launch_written_config_is_its_launch_call(tmp_path):
    """Annotations (`--format github`, SARIF) and the TUI's "config at" point where `apply` edits: the launch."""
    from advisor.advice.suggest import subjects_for

    path = kernel_file(tmp_path)
    (subject,) = subjects_for(str(path), call="scale(randn(1 << 20), randn(1 << 20))")
    lines = path.read_text().splitlines()
    assert subject.location.what == "kernel" and "# the launch" in lines[subject.location.line - 1]
    path = kernel_file(tmp_path, more="\n\ndef again(x, y):\n    scale_kernel[(1,)](x, y, 1, BLOCK=256)\n")
    (subject,) = subjects_for(str(path), call="scale(randn(1 << 20), randn(1 << 20))")
    assert lines[subject.location.line - 1].startswith("def scale_kernel")  # two launches: the kernel itself
