"""Shared test setup.

Without a CUDA device the Triton kernels run under Triton's CPU interpreter. `@triton.jit` reads
TRITON_INTERPRET when it decorates a kernel, that is when `kernels.fused_moe` is first imported, so
this file sets it at import time, before pytest imports any test module.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest
import torch

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent

# `tests/` is not a package: make its helpers importable, and the repo's packages importable under a
# plain `pytest` too (`python -m pytest` adds the working directory by itself).
for folder in (str(TESTS_DIR), str(REPO_ROOT)):
    if folder not in sys.path:
        sys.path.insert(0, folder)

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

from advisor.capture import interpreter_fixes  # noqa: E402  (needs sys.path above)

if INTERPRETED:
    interpreter_fixes.install()

# A folder of this run for the per-kernel timings of module-scoped fixtures (each test gets its own below), and
# one for the user's calibrations, tuned models and compiles: a developer's own calibration (say one of an older
# version, without a probe a test prices by) must not change what the shipped one gives. Test modules resolve
# GPUs at import, so both are set before any of them loads.
for variable, prefix in (("TRITON_ADVISOR_CACHE", "advisor-test-cache-"),
                         ("TRITON_ADVISOR_HOME", "advisor-test-home-")):
    if variable not in os.environ:
        os.environ[variable] = tempfile.mkdtemp(prefix=prefix)

# The default run's searches compile at most this many configs per launch (the product's budget is 32: a cold
# search of the tutorial matmul compiles up to 80 configs, minutes on 2 cores); tests marked slow search with the
# product's own budget (`_the_products_search_budget_when_slow`).
os.environ.setdefault("TRITON_ADVISOR_COMPILE_BUDGET", "6")

# Where the kernel tests put their tensors: the GPU when there is one and the interpreter is off.
DEVICE = "cuda" if HAS_CUDA and not INTERPRETED else "cpu"


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU; torch sees none")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture
def products_search_budget(monkeypatch):
    """The product's own search budget: every slow test's, and a test's whose searches compile little."""
    monkeypatch.delenv("TRITON_ADVISOR_COMPILE_BUDGET", raising=False)


@pytest.fixture(autouse=True)
def _the_products_search_budget_when_slow(request):
    if request.node.get_closest_marker("slow"):
        request.getfixturevalue("products_search_budget")


@pytest.fixture
def device() -> str:
    return DEVICE


@pytest.fixture(autouse=True)
def _kernel_timings_of_this_test(tmp_path_factory, monkeypatch):
    """Timings the advisor keeps per kernel (advisor.model.kernel_calibration) go to a folder of each
    test: a developer's own cache, or another test's fake timings, never change what a test predicts."""
    monkeypatch.setenv("TRITON_ADVISOR_CACHE", str(tmp_path_factory.mktemp("advisor-cache")))
    # The search's check of a proposed config in Triton's interpreter (advisor.advice.result_check) starts a
    # child per search: off for the suite's searches; tests/test_result_check.py runs it with its own limits.
    monkeypatch.setenv("TRITON_ADVISOR_INTERPRET_S", "0")
