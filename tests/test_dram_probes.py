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


def test_the_calibration_probe_reports_bytes_read_and_written_per_second_and_refuses_a_wrong_result(monkeypatch):
    from advisor.measure import calibrate
    from ceilings.errors import AdvisorError

    n = 8 * 4096
    src, dst = torch.randn(n), torch.empty(n)
    launches = []
    monkeypatch.setattr(calibrate, "_graph_us", lambda fn, launches_per_graph=10: launches.append(fn()) or 2.0)
    # 2 us for n floats read and n written: 2 * 4 * n bytes / 2e-6 s, in TB/s.
    assert calibrate.probe_dram_read_write(torch, src, dst) == pytest.approx(2 * 4 * n / 2e-6 / 1e12)
    assert len(launches) == 3 and torch.equal(dst, src + 1.0)  # three shapes timed, the result right

    from kernels import probes

    monkeypatch.setattr(probes, "read_write_kernel", _Broken())
    with pytest.raises(AdvisorError, match="read/write probe stored wrong values"):
        calibrate.probe_dram_read_write(torch, src, dst)
    with pytest.raises(AdvisorError, match="multiple of 4096"):
        calibrate.probe_dram_read_write(torch, torch.randn(1000), torch.empty(1000))


class _Broken:
    """A stand-in kernel that leaves its output unwritten."""

    def __getitem__(self, grid):
        return lambda *args, **kwargs: None
