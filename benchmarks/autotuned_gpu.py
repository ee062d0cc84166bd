"""Autotuned library kernels, as `advisor suggest --call` sees them without a GPU, timed on one.

Without a GPU the capture records an autotune list's first config; on the GPU the autotuner times the
list and runs the fastest. `suggest` shows its expected pick as current and may name a config past the
list (advisor.advice.autotuner_pick.stand_for_autotuner, LaunchSubject._extends_list). This times, per autotuned
launch, every config of its list (the fastest standing for the autotuner's pick), the expected pick and the
config `suggest` named, with the product's measurer (random inputs, outputs checked against the recorded
config's, CUDA-graph timing).

Input: JSON lines {"file", "call", "launches": [{"kernel", "first", "pick", "named", "named_config",
"pick_config", "speedup"}]} written by `--plan` on a machine without a GPU (the suggestions as a user gets
them there).

    PYTHONPATH=/tmp/site python benchmarks/autotuned_gpu.py --plan --calls CALLS.txt [--gpu h200] > PLAN.jsonl  # no GPU
    PYTHONPATH=/tmp/site python3 benchmarks/autotuned_gpu.py --named PLAN.jsonl --out $OUT [--gpu h200]        # on it
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MAX_LIST = 24  # configs of a list timed per launch (the device budget)


def plan(calls: str, gpu: str) -> None:
    """`suggest FILE --call CALL --format json` per line (its own process, as a user runs it), reduced to what
    the GPU run needs."""
    for line in Path(calls).read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        path, call = line.split("|", 1)
        proc = subprocess.run([sys.executable, "-m", "tui.entry", "suggest", path, "--call", call, "--format", "json",
                               "--gpu", gpu],
                              capture_output=True, text=True, cwd=ROOT, timeout=600,
                              env={**os.environ, "COLUMNS": "200"})
        entry = {"file": path, "call": call, "rc": proc.returncode, "launches": []}
        try:
            doc = json.loads(proc.stdout)
        except json.JSONDecodeError:
            entry["error"] = proc.stderr.strip().splitlines()[-1][:300] if proc.stderr.strip() else "no output"
            print(json.dumps(entry), flush=True)
            continue
        for adv in doc["launches"]:
            note = next((n for n in adv["notes"] if n.startswith("autotuned over")), None)
            if note is None:
                continue
            entry["launches"].append({"kernel": adv["kernel"], "pick": adv["current"]["label"],
                                      "pick_config": adv["current"]["config"], "named": adv["best"]["label"],
                                      "named_config": adv["best"]["config"], "speedup": adv["speedup"],
                                      "past_list": any("not in the kernel's autotune list" in n for n in adv["notes"]),
                                      "note": note})
            # the model's fastest config past the list, named or not (kept by the margin): timed too, to see
            # whether the margin keeps real gains out
            past = [c for c in adv["ranked"] if c.get("in_autotune_list") is False]
            if past:
                lead = min(past, key=lambda c: c["predicted_us"])
                entry["launches"][-1].update(lead_past=lead["label"], lead_past_config=lead["config"],
                                             lead_past_predicted=round(adv["current"]["predicted_us"]
                                                                       / lead["predicted_us"], 3))
        print(json.dumps(entry), flush=True)


def measure(named: str, out: Path, gpu: str) -> None:
    import torch
    import triton

    from advisor.advice.suggest import subjects_for
    from ceilings.hardware import resolve_gpu
    from ceilings.launch import Config

    rows = []
    for line in Path(named).read_text().splitlines():
        entry = json.loads(line)
        if not entry.get("launches"):
            continue
        try:
            subjects = subjects_for(entry["file"], call=entry["call"], gpu=resolve_gpu(gpu))
        except Exception as exc:  # noqa: BLE001 - a call that cannot be captured is a row, not a stop
            rows.append({"call": entry["call"], "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        for want in entry["launches"]:
            subject = next((s for s in subjects if s.kernel == want["kernel"] and s.autotuner_picks), None)
            row = {"call": entry["call"], "kernel": want["kernel"], "pick": want["pick"], "named": want["named"],
                   "predicted_speedup": want["speedup"], "past_list": want["past_list"]}
            rows.append(row)
            if subject is None:
                row["error"] = "no autotuned launch of this kernel in the capture"
                continue
            run = subject.measurer()
            listed = subject.declared_configs[:MAX_LIST]  # the list in its order: the first is what was recorded
            times = {}
            for config in listed:
                try:
                    times[config] = run(config)
                except Exception as exc:  # noqa: BLE001 - a config of the list that fails: the autotuner skips it
                    row.setdefault("list_errors", []).append(f"{config.label()}: {type(exc).__name__}")
            for key in ("pick_config", "named_config", "lead_past_config"):
                if key not in want:
                    continue
                config = Config.from_dict(want[key])
                if config not in times:
                    try:
                        times[config] = run(config)
                    except Exception as exc:  # noqa: BLE001 - a wrong or failing named config is the result
                        row[key.replace("config", "error")] = f"{type(exc).__name__}: {exc}"[:200]
            ok = {c: t for c, t in times.items() if c in listed}
            if ok:
                best = min(ok, key=ok.get)
                row.update(list_configs=len(listed), first=listed[0].label(),
                           first_us=round(times.get(listed[0], 0), 3), list_best=best.label(),
                           list_best_us=round(ok[best], 3))
            for key, name in (("pick_config", "pick_us"), ("named_config", "named_us"),
                              ("lead_past_config", "lead_past_us")):
                if key in want and Config.from_dict(want[key]) in times:
                    row[name] = round(times[Config.from_dict(want[key])], 3)
            if "lead_past" in want:
                row.update(lead_past=want["lead_past"], lead_past_predicted=want["lead_past_predicted"])
            (out / "autotuned_gpu.json").write_text(json.dumps({"rows": rows}, indent=1))
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    (out / "autotuned_gpu.json").write_text(json.dumps({"env": env, "rows": rows}, indent=1))
    print(json.dumps(env))
    print("| kernel | list | first us | list best (autotuner) us | expected pick us (regret) | named "
          "| list best us / named us | lead past the list: predicted gain, list best us / its us |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "list_best_us" not in r:
            print(f"| {r.get('kernel', r['call'][:40])} | error: {r.get('error', '')[:80]} |")
            continue
        regret = r["pick_us"] / r["list_best_us"] if r.get("pick_us") else None
        named = (f"{r['list_best_us'] / r['named_us']:.2f}x" if r.get("named_us") else r.get("named_error", "-"))
        print(f"| {r['kernel']} | {r['list_configs']} | {r['first_us']} | {r['list_best']} ({r['list_best_us']}) | "
              f"{r['pick']} ({r.get('pick_us')}, {f'{regret:.3f}' if regret else '-'}) | "
              f"{r['named']}{' (past the list)' if r['past_list'] else ''} | {named} | "
              + (f"{r['lead_past']}: {r['lead_past_predicted']}x, "
                 + (f"{r['list_best_us'] / r['lead_past_us']:.2f}x" if r.get("lead_past_us")
                    else r.get("lead_past_error", "-")) if r.get("lead_past") else "-") + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", action="store_true", help="write the suggestions of --calls as JSON lines (no GPU)")
    parser.add_argument("--calls")
    parser.add_argument("--named")
    parser.add_argument("--out", default=".")
    parser.add_argument("--gpu", default="h100", help="the GPU the suggestions are for and the capture answers as")
    args = parser.parse_args()
    if args.plan:
        plan(args.calls, args.gpu)
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    measure(args.named, out, args.gpu)


if __name__ == "__main__":
    main()
