"""`advisor collect`: the plans it measures and its refusals (the measuring itself needs a GPU)."""

import re

import pytest

from advisor.cli import main
from advisor.measure.collect import build_plan
from ceilings.errors import AdvisorError


def test_plans_cover_the_asked_shapes_and_defaults():
    plan = build_plan("gemm", shapes="6144:2048,256:4096", ms="32,2000", sample=5, seed=2)
    assert sorted({(s.n, s.k, s.m) for s in plan.specs}) == [(256, 4096, 32), (256, 4096, 2000),
                                                              (6144, 2048, 32), (6144, 2048, 2000)]
    from kernels import gemm as g

    for s in plan.specs:  # the default rule's config of every case is measured (a baseline per case)
        assert g.default_config(s.m, s.n, s.k) in plan.configs
    assert len(plan.configs) <= 5 + len(plan.specs)
    # the same seed draws the same sample (a collection can be resumed and reproduced)
    assert build_plan("gemm", shapes="6144:2048", ms="32", sample=5, seed=2).configs[-5:] == plan.configs[-5:]

    moe = build_plan("moe", shapes="deepseek-v2-lite:1", gemms="1,2", ms="8,3000", sample=10)
    assert {(s.gemm, s.m) for s in moe.specs} == {(1, 8), (1, 3000), (2, 8), (2, 3000)}
    att = build_plan("attention", shapes="1000:128:4,512:64")
    assert [(s.seq, s.head_dim, s.m) for s in att.specs] == [(1000, 128, 4), (512, 64, 512)]
    soft = build_plan("softmax", shapes="50257", ms="100")
    assert [(s.cols, s.m) for s in soft.specs] == [(50257, 100)]


@pytest.mark.parametrize("family, kwargs, needle", [
    ("fft", {}, "unknown kernel family 'fft'"),
    ("gemm", {"shapes": "4096"}, "--shapes item '4096'"),
    ("moe", {"shapes": "nomodel:2"}, "unknown model preset 'nomodel'"),
    ("moe", {"gemms": "3"}, "--gemms '3'"),
    ("softmax", {"ms": "a,b"}, "--ms 'a,b'"),
    ("attention", {"shapes": "1024:64:2:9"}, "--shapes item '1024:64:2:9' is SEQ:HEAD_DIM[:BATCH_HEADS]"),
])
def test_bad_options_name_the_input(family, kwargs, needle):
    with pytest.raises(AdvisorError, match="^" + re.escape(needle)):
        build_plan(family, **kwargs)


def test_cli_without_a_gpu_is_a_user_error(capsys, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    assert main(["collect", "softmax", "--out", str(tmp_path), "--shapes", "128", "--ms", "16"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("advisor: error:") and "GPU" in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # nothing half-written
