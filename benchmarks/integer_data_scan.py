"""What integer data in a capture without a GPU (advisor/capture/integer_data.py) changes over the fresh user-style
calls (`benchmarks/user_kernels/calls*.txt`): per call, whether the capture with integer data was used or fell back
to the one without (it failed, or made other launches), and which integer tensors gained contents or a sample.
Also the generic ceiling of each launch whose tensors changed, before and after. CPU only.

    python benchmarks/integer_data_scan.py [--calls FILE ...] [--gpu h100]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from advisor.capture.call import capture_call, capture_call_with_data
    from ceilings.errors import AdvisorError
    from ceilings.hardware import resolve_gpu

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=Path, nargs="+",
                        default=sorted((ROOT / "benchmarks" / "user_kernels").glob("calls*.txt")))
    parser.add_argument("--gpu", default="h100")
    args = parser.parse_args()
    gpu = resolve_gpu(args.gpu)
    counts = {"calls": 0, "used": 0, "fell back": 0, "failed": 0, "launches changed": 0}
    for calls in args.calls:
        for line in calls.read_text().splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            file, call = line.split("|", 1)
            counts["calls"] += 1
            t0 = time.time()
            try:
                plain = capture_call(ROOT / file, call, gpu.spec.name)
                trace, used = capture_call_with_data(ROOT / file, call, gpu.spec.name)
            except AdvisorError as exc:
                counts["failed"] += 1
                print(f"FAILED {file}: {exc}"[:200])
                continue
            counts["used" if used else "fell back"] += 1
            for before, after in zip(plain.launches, trace.launches, strict=True):
                gained = [f"{t.name} ({'values' if t.values is not None else 'sample'})"
                          for s, t in zip(before.tensors, after.tensors, strict=True)
                          if (s.values, s.sample) != (t.values, t.sample)]
                if gained:
                    counts["launches changed"] += 1
                    print(f"{Path(file).name}: {call[:70]} [{time.time() - t0:.1f} s] {after.kernel}: "
                          f"{', '.join(gained)}; {ceiling_us(before, gpu)} -> {ceiling_us(after, gpu)} us")
    print(counts)


def ceiling_us(launch, gpu) -> str:
    from advisor.advice.ceiling import _generic_ceiling

    try:
        return f"{_generic_ceiling(launch, gpu, launch.kernel).ceiling_us:.1f}"
    except Exception as exc:  # noqa: BLE001 - a launch this machine cannot compile is a row
        return f"({type(exc).__name__})"


if __name__ == "__main__":
    main()
