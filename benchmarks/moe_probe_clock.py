"""The SM clock during `benchmarks/moe_loop_probe.py` (issue 16): what the probe's times must be scaled by
before `advisor diagnose` compares them with sweep times taken at another clock.

Two readings, both on the GPU the probe runs on:
- **clock64 against event time** (`spin_clock_mhz`): `torch.cuda._sleep(cycles)` spins one thread on
  clock64 until `cycles` SM cycles have passed; CUDA events time it, so cycles / us is the SM clock in
  MHz at that moment. Taken just before and just after each loop shape's timings (the clock moves over
  milliseconds; a 0.2 ms spin reads the state the probe's replays left).
- **nvidia-smi** (`SmiSampler`): `nvidia-smi --query-gpu=... -lms 20` in the background for the whole
  run, kept as its own log; each shape's window [start, end] is joined to the samples taken in it.
`sweep_clock` runs a launch under the sweeps' protocol (CUDA graph of 10 launches, 3 warm-ups, 20
replays) and then back to back for about a second, reading the clock after each: the clock the sweeps'
times were taken at, measured instead of assumed.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from pathlib import Path

SPIN_CYCLES = 400_000  # 0.2 ms at the H100's 1.98 GHz boost: long against the events' 0.5 us resolution
SMI_FIELDS = "timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu"


def spin_clock_mhz(cycles: int = SPIN_CYCLES) -> float:
    """SM clock (MHz) now: clock64 cycles spun over the CUDA events' microseconds."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return cycles / (start.elapsed_time(end) * 1e3)


class SmiSampler:
    """nvidia-smi's SM clock every 20 ms into `log` (a CSV), from start() to stop(); `window(t0, t1)` is
    the median SM clock of the samples whose wall time lies in [t0, t1] (None where none did)."""

    def __init__(self, log: Path):
        self.log, self.proc, self.samples = Path(log), None, []

    def start(self) -> SmiSampler:
        try:
            self._fh = self.log.open("w")
            self.proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,nounits",
                                          "-lms", "20"], stdout=self._fh, stderr=subprocess.DEVNULL)
        except OSError:
            self.proc = None
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self._fh.close()
            self.samples = list(parse_smi_log(self.log.read_text()))

    def window(self, t0: float, t1: float) -> float | None:
        inside = [mhz for t, mhz in self.samples if t0 <= t <= t1]
        return statistics.median(inside) if inside else None


def parse_smi_log(text: str):
    """(epoch seconds, SM MHz) of each data line of an nvidia-smi CSV log (its timestamps are local time
    'YYYY/MM/DD HH:MM:SS.mmm', which is UTC on the device machines)."""
    import calendar

    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 2 or not parts[1].replace(".", "").isdigit():
            continue  # the header, or a sample nvidia-smi could not read
        stamp, _, frac = parts[0].partition(".")
        try:
            t = calendar.timegm(time.strptime(stamp, "%Y/%m/%d %H:%M:%S")) + float(f"0.{frac or 0}")
        except ValueError:
            continue
        yield t, float(parts[1])


def sweep_clock(run, seconds: float = 1.0) -> dict:
    """The clock under the sweeps' protocol for `run` (a no-argument launch): after time_launch's graph
    of 10 launches and 20 replays, and after `seconds` of the same graph replayed back to back."""
    import torch

    from advisor.measure.timing import time_launch

    idle = spin_clock_mhz()
    us = time_launch(run, launches_per_graph=10, replays=20, warmup=3).us
    after_protocol = spin_clock_mhz()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        run()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        for _ in range(10):
            run()
    end = time.monotonic() + seconds
    replays = 0
    while time.monotonic() < end:
        graph.replay()
        replays += 1
        if replays % 8 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    sustained = spin_clock_mhz()
    return {"us": round(us, 3), "idle_mhz": round(idle, 1), "after_protocol_mhz": round(after_protocol, 1),
            "after_sustained_mhz": round(sustained, 1), "sustained_s": seconds, "sustained_replays": replays}
