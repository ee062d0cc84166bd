"""Configs launched with their @triton.heuristics' values against the same configs launched with the
recorded launch's values (what the advice did before advisor/advice/heuristics.py), on the GPU.

Each config is run by the product's measurer (advisor.measure.launch_run: random inputs, every tensor
checked against the recorded config's run, CUDA-graph timing): once with the constexprs
`LaunchSubject.launch_for` gives it (heuristics evaluated per config), once with the recorded launch's
(stale). Each (case, mode) runs in its own process, since a stale unmasked config may write past a
tensor. Cases:
- `masked_mm`: tests/fixtures/heuristic_kernels.py's GEMM (EVEN_K = K % BLOCK_K == 0), fp16,
  M = N = 2048, K = 4160 (BLOCK_K 32 and 64 divide it, 128 does not), launched at M64 N64 K64 w4 s3.
- `gemlite_m16`: GemLite 0.6.0.post2's split-K GEMM launch of the corpus (trace index 1: M = 16, A8W8
  bf16, N = 14336, K = 4096), at the BLOCK_SIZE_M = 32 configs of suggest's neighbour search (EVEN_M
  False by the heuristic, True as recorded) and three BLOCK_SIZE_M = 16 controls. Needs the wheels in
  /tmp/site (benchmarks/corpus/README.md).

    python3 benchmarks/heuristics_gpu.py --out DIR
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks" / "corpus")]

CASES = ("masked_mm", "gemlite_m16")


def _case(name: str):
    """(subject, configs to run) for a case."""
    from advisor.advice.config_space import around
    from advisor.advice.subjects import LaunchSubject
    from ceilings.hardware import resolve_gpu
    from ceilings.launch import Config, Launch, TensorArg

    gpu = resolve_gpu("h100")
    if name == "masked_mm":
        M = N = 2048
        K = 4160
        src = str(ROOT / "tests" / "fixtures" / "heuristic_kernels.py")
        tensors = (TensorArg.contiguous("a_ptr", (M, K), "float16"), TensorArg.contiguous("b_ptr", (K, N), "float16"),
                   TensorArg.contiguous("c_ptr", (M, N), "float16"))
        launch = Launch(src, "masked_mm_kernel", (M // 64, N // 64), tensors, {"M": M, "N": N, "K": K},
                        {"EVEN_K": True}, Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}, 4, 3))
        configs = [Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, w, 3)
                   for bm in (64, 128) for bn in (64, 128) for bk in (32, 64, 128) for w in (4, 8)]
        return LaunchSubject(launch, gpu), configs
    from replay import load_cases

    case = next(c for c in load_cases("gemlite") if c.index == 1)
    launch = Launch.from_dict(case.entry, "gemlite launch 1")
    subject = LaunchSubject(launch, gpu)
    near = around(subject.current, subject._covering_tiles())
    m32 = [c for c in near if c["BLOCK_SIZE_M"] == 32][:8]
    m16 = [c for c in near if c["BLOCK_SIZE_M"] == 16 and c != subject.current][:3]
    return subject, [subject.current, *m32, *m16]


def child(name: str, mode: str, out: Path) -> None:
    import dataclasses

    from advisor.measure.launch_run import launch_measurer

    subject, configs = _case(name)

    def stale(c):
        made = subject.rule(c)
        return made if subject.grid == subject.rule.grid else dataclasses.replace(made, grid=subject.grid(c))

    launch_of = subject.launch_for if mode == "heuristics" else stale
    rows = []
    measure = launch_measurer(subject.fn, subject.launch, launch_of, subject.label, zeroed=subject.accumulated())
    for c in configs:
        consts = {k: v for k, v in dict(launch_of(c).constexprs).items() if k.startswith(("EVEN", "ONE"))}
        row = {"case": name, "mode": mode, "config": c.label(), "constexprs": consts}
        try:
            row.update(status="ok", us=round(measure(c), 3))
        except Exception as exc:  # noqa: BLE001 - a wrong or failing config is the result
            row.update(status="wrong" if "differs" in str(exc) else "error", note=str(exc)[:300])
        rows.append(row)
        out.write_text(json.dumps(rows, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=".")
    parser.add_argument("--child", nargs=3, metavar=("CASE", "MODE", "FILE"))
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], Path(args.child[2]))
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch
    import triton

    rows, log = [], []
    for name in CASES:
        for mode in ("stale", "heuristics"):
            part = out / f"part_{name}_{mode}.json"
            t0 = time.time()
            proc = subprocess.run([sys.executable, __file__, "--child", name, mode, str(part)],
                                  capture_output=True, text=True, timeout=240)
            got = json.loads(part.read_text()) if part.exists() else []
            log.append({"case": name, "mode": mode, "rc": proc.returncode, "s": round(time.time() - t0, 1),
                        "rows": len(got), "stderr_tail": proc.stderr[-1500:]})
            rows += got
            part.unlink(missing_ok=True)
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    (out / "heuristics_gpu.json").write_text(json.dumps({"env": env, "log": log, "rows": rows}, indent=1))
    print(json.dumps(env))
    for entry in log:
        print(f"{entry['case']} {entry['mode']}: rc {entry['rc']}, {entry['rows']} rows, {entry['s']} s"
              + (f"\n  {entry['stderr_tail'][-400:]}" if entry["rc"] else ""))
    by = {(r["case"], r["config"], r["mode"]): r for r in rows}
    print("\n| case | config | heuristics' constexprs | status, us | recorded constexprs (before) | status, us |")
    print("|---|---|---|---|---|---|")
    for (case, config, mode), r in by.items():
        if mode != "heuristics":
            continue
        s = by.get((case, config, "stale"), {})
        fmt = lambda x: f"{x.get('status', '-')} {x.get('us', '')}".strip()  # noqa: E731
        print(f"| {case} | {config} | {r['constexprs']} | {fmt(r)} | {s.get('constexprs', '-')} | {fmt(s)} |")


if __name__ == "__main__":
    main()
