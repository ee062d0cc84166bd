"""The configs `advisor suggest --call` names without timings, timed on the GPU against the current ones.

Input: JSON lines {"file", "call", "named": [[kernel, current label, named label, predicted speed-up, named
config], ...]} (what `suggest FILE --call CALL --format json` named on a machine without a GPU). For each call
the launch is captured as `suggest` captures it, and the product's measurer (advisor.measure.launch_run:
random inputs, outputs checked against the current config's, CUDA-graph timing) times the current config and
the named one.

    PYTHONPATH=/tmp/site python3 benchmarks/user_named_gpu.py --named FILE.jsonl --out $OUT
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--named", required=True)
    parser.add_argument("--out", default=".")
    args = parser.parse_args()
    import torch
    import triton

    from advisor.advice.suggest import subjects_for
    from ceilings.launch import Config

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for line in Path(args.named).read_text().splitlines():
        entry = json.loads(line)
        try:
            subjects = subjects_for(entry["file"], call=entry["call"])
        except Exception as exc:  # noqa: BLE001 - a call that cannot be captured is a row, not a stop
            rows.append({"call": entry["call"], "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        for kernel, current, named, predicted, config in entry["named"]:
            subject = next(s for s in subjects if s.kernel == kernel)
            row = {"call": entry["call"], "kernel": kernel, "current": current, "named": named,
                   "predicted_speedup": predicted}
            if named != current:
                # the config as named (its own launch rule and heuristics give its launch): this machine's
                # Triton may rank another config first, so it is not looked up in the space
                config = Config.from_dict(config)
                try:
                    measure = subject.measurer()
                    row["current_us"] = round(measure(subject.current), 3)
                    row["named_us"] = round(measure(config), 3)
                except Exception as exc:  # noqa: BLE001 - a wrong or failing config is the result
                    row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            rows.append(row)
            (out / "user_named.json").write_text(json.dumps(rows, indent=1))
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    (out / "user_named.json").write_text(json.dumps({"env": env, "rows": rows}, indent=1))
    print(json.dumps(env))
    print("| kernel | current (us) | named without timings (us) | predicted | measured |")
    print("|---|---|---|---|---|")
    for r in rows:
        if r.get("named") == r.get("current"):
            continue
        gain = r["current_us"] / r["named_us"] if r.get("named_us") else None
        print(f"| {r.get('kernel', r['call'][:30])} | {r.get('current')} ({r.get('current_us')}) | {r.get('named')} "
              f"({r.get('named_us')}) | {r.get('predicted_speedup')} | {f'{gain:.2f}x' if gain else r.get('error')} |")


if __name__ == "__main__":
    main()
