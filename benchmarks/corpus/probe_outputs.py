"""Why a launch's configs disagree with its own config: per config, each floating output's non-finite
count and its relative error against the own config's, on the replay's inputs (GPU).

    PYTHONPATH=/tmp/site:$PWD python3 benchmarks/corpus/probe_outputs.py LIBRARY INDEX [--configs 4]

Prints one line per (config, tensor): whether the own config's two runs agree, how many elements are
non-finite in each, and how many positions are finite in one and not the other (what `measure.compare`
calls inf). Written for torchao's HQQ GEMM, whose every other config the check called wrong (RESULTS 37).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

from replay import _grid3, accumulated, arguments, kernel_function, load_cases, make_tensors  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("library")
    parser.add_argument("index", type=int)
    parser.add_argument("--configs", type=int, default=4)
    a = parser.parse_args()
    import torch

    (case,) = [c for c in load_cases(a.library) if c.index == a.index]
    fn = kernel_function(case)
    zeroed = accumulated(case)
    variants = case.variants(limit=1 + a.configs)
    print(f"{case.kernel}: {len(variants)} configs, zeroed {sorted(zeroed)}")
    pristine = make_tensors(case, zeroed=zeroed)
    for name, t in pristine.items():
        if hasattr(t, "is_floating_point") and t.is_floating_point():
            print(f"  input {name} {list(t.shape)} {t.dtype}: non-finite {int((~torch.isfinite(t.float())).sum())}")

    def run(v) -> dict:
        work = {k: t.clone() if hasattr(t, "clone") else t for k, t in pristine.items()}
        fn[tuple(_grid3(v.grid))](**arguments(fn, case, v, work))
        torch.cuda.synchronize()
        return work

    own = run(variants[0])
    again = run(variants[0])
    for v in [variants[0], *variants[1:]]:
        out = again if v is variants[0] else run(v)
        for name, ref in own.items():
            if not (hasattr(ref, "is_floating_point") and ref.is_floating_point()):
                continue
            x, r = out[name].float(), ref.float()
            fx, fr = torch.isfinite(x), torch.isfinite(r)
            both = fx & fr
            err = float(torch.linalg.vector_norm(torch.where(both, x - r, 0.0))
                        / max(float(torch.linalg.vector_norm(torch.where(both, r, 0.0))), 1e-30))
            changed = int((x != r).sum()) if name not in zeroed else "-"
            print(f"{v.label} {name}: non-finite own {int((~fr).sum())} this {int((~fx).sum())}, "
                  f"finite in one only {int((fx != fr).sum())}, rel err {err:.3g}, elements differing {changed}")


if __name__ == "__main__":
    main()
