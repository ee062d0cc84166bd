"""What every corpus driver shares: the device, fresh random inputs, and running each case apart.

A driver calls a library's published ops (forward, then backward where the library has one) over LLM
shapes. A case that fails is reported on stderr and in the summary line and the driver goes on: one
op that does not run with this Triton must not hide the others. `--small` shrinks every shape so the
driver can be dry-run on a CPU under TRITON_INTERPRET=1.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback


class Driver:
    def __init__(self, library: str):
        parser = argparse.ArgumentParser(description=f"run {library}'s Triton ops over LLM shapes")
        parser.add_argument("--small", action="store_true", help="tiny shapes, for a dry run on the CPU")
        parser.add_argument("--only", default="", help="comma-separated case labels to run (default: all)")
        args = parser.parse_args()
        import torch

        self.torch = torch
        self.library = library
        self.small = args.small
        self.only = {s for s in args.only.split(",") if s}
        interpreted = os.environ.get("TRITON_INTERPRET") == "1"
        self.device = "cuda" if torch.cuda.is_available() and not interpreted else "cpu"
        self.ran: list[str] = []
        self.failed: list[tuple[str, str]] = []
        torch.manual_seed(0)

    def pick(self, big, small):
        """The real shape, or the tiny one in a dry run."""
        return small if self.small else big

    def randn(self, *shape, dtype=None, grad: bool = False, scale: float = 1.0):
        t = self.torch.randn(*shape, device=self.device, dtype=self.torch.float32) * scale
        t = t.to(dtype or self.torch.bfloat16)
        return t.requires_grad_(grad) if grad else t

    def randint(self, high: int, *shape, dtype=None):
        return self.torch.randint(0, high, shape, device=self.device, dtype=dtype or self.torch.int64)

    def case(self, label: str, fn) -> None:
        """Run one case; a failure is reported and the driver goes on."""
        if self.only and label not in self.only:
            return
        start = time.perf_counter()
        try:
            fn()
            if self.device == "cuda":
                self.torch.cuda.synchronize()
            self.ran.append(label)
            print(f"[{self.library}] ok   {label} ({time.perf_counter() - start:.1f} s)", file=sys.stderr)
        except Exception as exc:
            self.failed.append((label, f"{type(exc).__name__}: {exc}".splitlines()[0][:300]))
            print(f"[{self.library}] FAIL {label}: {self.failed[-1][1]}", file=sys.stderr)
            if os.environ.get("CORPUS_TRACEBACK") == "1":
                traceback.print_exc()
        finally:
            if self.device == "cuda":
                self.torch.cuda.empty_cache()

    def finish(self) -> None:
        print(f"[{self.library}] {len(self.ran)} cases ran, {len(self.failed)} failed"
              + "".join(f"\n[{self.library}]   failed {label}: {why}" for label, why in self.failed), file=sys.stderr)


def backward(out) -> None:
    """Backward through `out` (a tensor or the first element of a tuple) with a random gradient."""
    import torch

    out = out[0] if isinstance(out, tuple | list) else out
    if out.dim() == 0:
        out.backward()
    else:
        out.backward(torch.randn_like(out))
