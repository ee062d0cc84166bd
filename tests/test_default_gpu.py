"""Without --gpu, advice is for this machine's GPU where torch sees one (an H200 machine was advised as an H100,
so `calibrate --kernel`'s timings, keyed to the H200, never reached `suggest`), else the H100."""

from __future__ import annotations

import json

import pytest
import torch

from advisor.advice.suggest import default_gpu_name, subjects_for
from advisor.cli import main
from ceilings.errors import AdvisorError


@pytest.fixture
def machine(monkeypatch):
    def have(name: str | None):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: name is not None)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    return have


def test_no_gpu_means_the_h100(machine):
    machine(None)
    assert default_gpu_name() == "h100"


def test_the_machines_gpu_is_the_default(machine):
    machine("NVIDIA H200")
    assert default_gpu_name() == "NVIDIA H200"
    (subject,) = subjects_for("kernels/gemm.py", shapes=["4096,4096,4096"])
    assert subject.spec.name == "NVIDIA H200"
    # a call of a kernel file's host code is captured without running it, by a stand-in driver: it answers as
    # this machine's GPU too (it answered as the H100 whatever the machine had)
    call = "w8_matmul(randn(16, 512, bf16), randint(-128, 127, (512, 1024), i8), randn(1024, f32))"
    (subject,) = subjects_for("benchmarks/user_kernels/w8_gemm.py", call=call)
    assert subject.spec.name == "NVIDIA H200"


def test_an_unknown_gpu_asks_for_gpu(machine):
    machine("NVIDIA GeForce GTX 1080")
    with pytest.raises(AdvisorError, match=r"this machine's GPU is 'NVIDIA GeForce GTX 1080'.*give --gpu"):
        default_gpu_name()


def test_the_ceiling_command_follows_the_machine_and_gpu_overrides_it(machine, capsys):
    machine("NVIDIA H200")
    assert main(["ceiling", "kernels/gemm.py", "--shape", "4096,4096,4096", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["gpu"] == "NVIDIA H200"
    assert main(["ceiling", "kernels/gemm.py", "--shape", "4096,4096,4096", "--gpu", "h100", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["gpu"] == "NVIDIA H100 80GB HBM3"
    machine("NVIDIA GeForce GTX 1080")
    assert main(["ceiling", "kernels/gemm.py", "--shape", "4096,4096,4096"]) == 2
    err = capsys.readouterr().err
    assert "give --gpu" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
