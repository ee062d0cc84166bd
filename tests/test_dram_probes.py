"""The DRAM read/write probe of `advisor calibrate` (`kernels.probes.read_write_kernel`): it must write every
element of its output from its input, or the rate it reports would price bytes the stream never moved."""

from __future__ import annotations

import pytest
import torch

from kernels.probes import read_write_kernel


@pytest.mark.parametrize("block", [64, 256])
def test_the_read_write_stream_writes_each_input_plus_one(device, block):
    n = 8 * block
    src = torch.randn(n, device=device, generator=torch.Generator(device=device).manual_seed(3))
    dst = torch.full_like(src, float("nan"))
    read_write_kernel[(n // block,)](src, dst, BLOCK=block)
    assert torch.equal(dst, src + 1.0)
