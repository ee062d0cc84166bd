"""`advisor record` on a GPU keeps an autotuned launch's group (RESULTS 34e): the launch each other config of
the autotuner's pruned list would make, probed without compiling. Checked on the compiled path:

    python benchmarks/record_autotune_group.py [--out DIR]

Writes a program (a kernel whose grid, 96 // BLOCK rows of 64, no launch rule explains; a heuristic that sets
EVEN from the config; a prune that drops BLOCK 128), records it with `advisor record` (the autotuner times its
configs with Triton's do_bench on the GPU), checks the trace's group against the grids and constexprs the host
code gives each config and that the program's result is right, and prints one line per entry. Exit 1 on a
mismatch.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = '''
import torch, triton, triton.language as tl

def prune(configs, named_args, **kwargs):
    return [c for c in configs if c.kwargs["BLOCK"] != 128]

@triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((8, 1), (16, 2), (32, 4), (128, 4))],
                 key=["n"], prune_configs_by={"early_config_prune": prune})
@triton.heuristics({"EVEN": lambda a: a["n"] % (a["BLOCK"] * 64) == 0})
@triton.jit
def scale_rows(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.arange(0, 64)
    offs = rows[:, None] * 64 + cols[None, :]
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)

x = torch.randn(96 * 64, device="cuda")
out = torch.empty_like(x)
for _ in range(3):
    scale_rows[lambda m: (96 // m["BLOCK"],)](x, out, x.numel())
torch.cuda.synchronize()
assert torch.equal(out, x * 2.0), "wrong result"
print("result ok")
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", tempfile.mkdtemp())))
    a = parser.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    prog, trace = a.out / "tuned_program.py", a.out / "tuned_trace.json"
    prog.write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    done = subprocess.run([sys.executable, "-m", "tui.entry", "record", "--out", str(trace), "--", sys.executable,
                           str(prog)], cwd=ROOT, env=env, capture_output=True, text=True)
    print(done.stdout.strip(), done.stderr.strip()[-800:], sep="\n")
    if done.returncode != 0:
        return 1
    data = json.loads(trace.read_text())
    launches, groups = data["launches"], data.get("autotune_groups")
    bad = []
    for i, e in enumerate(launches):
        block = e["config"]["BLOCK"]
        want = {"grid": [96 // block], "EVEN": 96 * 64 % (block * 64) == 0}
        got = {"grid": e["grid"], "EVEN": e["constexprs"].get("EVEN")}
        print(f"entry {i}: {json.dumps(e['config'])} grid={e['grid']} EVEN={got['EVEN']} count={e['count']}"
              f"{'' if got == want else f'  MISMATCH, host code gives {want}'}")
        bad += [i] if got != want else []
    blocks = sorted(e["config"]["BLOCK"] for e in launches)
    print(f"gpu={data['gpu']} groups={groups} blocks={blocks}")
    if groups != [list(range(len(launches)))] or blocks != [8, 16, 32] or bad or launches[0]["count"] != 3:
        print("FAIL: expected one group of the chosen config (count 3) and BLOCK 8, 16, 32 (128 pruned)")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
