"""Kernels written for this check the way a user brings one (`benchmarks/user_kernels/`, never seen by a model
or a rule): what `advisor suggest --call` names without a GPU and with `--measure 4`, timed against the current
config and against a sample of the kernel's config space, on the GPU.

    python benchmarks/fresh_user_kernels.py plan [--calls FILE] [--space 12]       # CPU: -> data/fresh_user_plan.jsonl
    python3 benchmarks/fresh_user_kernels.py device --out $OUT [--measure 4] [--only 0:4]   # GPU

`plan` runs `suggest FILE --call CALL --format json` per line of the calls file (FILE|CALL) and keeps, per
launch, the current config, the config named without timings, the model's ranked configs and an evenly spaced
sample of `--space` configs of the kernel's space (`subject.space()`: the autotune list, or the product's space
around the config). `device` times each launch's current config first (its outputs the reference), then every
other planned config with the product's measurer (`subject.measurer()`: random inputs, outputs checked against
the current's, CUDA-graph timing, median), then runs `suggest --measure K --format json` as a user would, each
call in its own process with its own empty advisor cache. Writes fresh_user.json under --out and prints a table:
the current time, the named config's, the `--measure` pick's, and the fastest timed config's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CALLS = ROOT / "benchmarks" / "user_kernels" / "calls.txt"
PLAN = ROOT / "benchmarks" / "data" / "fresh_user_plan.jsonl"


def calls(path: Path) -> list[tuple[str, str]]:
    out = []
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            file, call = line.split("|", 1)
            out.append((file, call))
    return out


def suggest_json(file: str, call: str, extra: list[str], limit: float, cache: str | None = None) -> dict:
    env = {**os.environ, "COLUMNS": "200"}
    if cache:
        env["TRITON_ADVISOR_CACHE"] = cache
    proc = subprocess.run([sys.executable, "-m", "tui.entry", "suggest", file, "--call", call, "--format", "json",
                           *extra], capture_output=True, text=True, cwd=ROOT, timeout=limit, env=env)
    if proc.returncode not in (0, 1):
        return {"error": proc.stderr.strip()[-400:]}
    return json.loads(proc.stdout)


def plan(args) -> None:
    from advisor.advice.suggest import subjects_for

    lines = []
    for file, call in calls(args.calls):
        doc = suggest_json(file, call, [], 600)
        if "error" in doc:
            lines.append({"file": file, "call": call, "error": doc["error"]})
            continue
        subjects = {s.label: s for s in subjects_for(file, call=call)}
        for launch in doc["launches"]:
            space = [c.to_dict() for c in subjects[launch["launch"]].space()] if launch["launch"] in subjects else []
            step = max(1, len(space) // args.space) if space else 1
            sample = space[::step][:args.space]
            lines.append({"file": file, "call": call, "launch": launch["launch"], "kernel": launch["kernel"],
                          "current": launch["current"]["config"], "named": launch["best"]["config"],
                          "named_label": launch["best"]["label"], "current_label": launch["current"]["label"],
                          "predicted_speedup": launch["speedup"], "space_size": len(space),
                          "ranked": [r["config"] for r in launch["ranked"]], "sample": sample})
    PLAN.write_text("".join(json.dumps(x) + "\n" for x in lines))
    print(f"{len(lines)} launches -> {PLAN}")


def device(args) -> None:
    import torch
    import triton

    from advisor.advice.suggest import subjects_for
    from ceilings.launch import Config

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    start, _, stop = args.only.partition(":")
    entries = list(map(json.loads, PLAN.read_text().splitlines()))[int(start or 0):int(stop) if stop else None]
    for entry in entries:
        if "error" in entry:
            rows.append(entry)
            continue
        row = dict(entry, timed=[])
        try:
            subject = next(s for s in subjects_for(entry["file"], call=entry["call"]) if s.label == entry["launch"])
            measure = subject.measurer()
            seen = []
            for config in [entry["current"], entry["named"], *entry["ranked"], *entry["sample"]]:
                if config in seen:
                    continue
                seen.append(config)
                try:
                    us = measure(Config.from_dict(config))
                    row["timed"].append({"config": config, "us": round(us, 3)})
                except Exception as exc:  # noqa: BLE001 - a config that fails or computes wrong is a row
                    row["timed"].append({"config": config, "error": f"{type(exc).__name__}: {exc}"[:200]})
        except Exception as exc:  # noqa: BLE001
            row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        with tempfile.TemporaryDirectory() as cache:
            t0 = time.time()
            try:
                doc = suggest_json(entry["file"], entry["call"], ["--measure", str(args.measure)], 300, cache)
            except subprocess.TimeoutExpired:
                doc = {"error": "timeout"}
            row["measure_s"] = round(time.time() - t0, 1)
        launch = next((x for x in doc.get("launches", []) if x["launch"] == entry["launch"]), None)
        if launch:
            row["measured_pick"] = {"config": launch["best"]["config"], "label": launch["best"]["label"],
                                    "us": launch["best"].get("measured_us"),
                                    "current_us": launch["current"].get("measured_us")}
        else:
            row["measured_pick"] = {"error": doc.get("error", "no launch")}
        rows.append(row)
        (out / "fresh_user.json").write_text(json.dumps({"rows": rows}, indent=1))
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    (out / "fresh_user.json").write_text(json.dumps({"env": env, "rows": rows}, indent=1))
    print(json.dumps(env))
    report(rows)


def report(rows: list[dict]) -> None:
    print("| kernel | configs timed | current us | named without timings: us (gain) | --measure pick: us (gain) "
          "| fastest timed: us (gain) | named / fastest |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if "timed" not in r:
            print(f"| {r.get('kernel', r['call'][:40])} | error: {r.get('error')} |")
            continue
        times = {json.dumps(t["config"], sort_keys=True): t["us"] for t in r["timed"] if "us" in t}
        cur = times.get(json.dumps(r["current"], sort_keys=True))
        named = times.get(json.dumps(r["named"], sort_keys=True))
        best = min(times.values()) if times else None
        pick = r.get("measured_pick", {})
        fmt = lambda us, cur=cur: f"{us:.1f} ({cur / us:.2f}x)" if us and cur else "-"  # noqa: E731
        print(f"| {r['kernel']} | {len(times)} of {len(r['timed'])} | {cur} | {r['named_label']} {fmt(named)} | "
              f"{pick.get('label', pick.get('error'))} {fmt(pick.get('us'))} | {fmt(best)} | "
              f"{named / best if named and best else float('nan'):.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("plan")
    p.add_argument("--calls", type=Path, default=CALLS)
    p.add_argument("--space", type=int, default=12)
    d = sub.add_parser("device")
    d.add_argument("--out", default=".")
    d.add_argument("--measure", type=int, default=4)
    d.add_argument("--only", default=":", help="a slice of the plan's launches, e.g. 0:4")
    r = sub.add_parser("report")
    r.add_argument("rows", type=Path)
    args = parser.parse_args()
    if args.step == "plan":
        plan(args)
    elif args.step == "device":
        device(args)
    else:
        report(json.loads(args.rows.read_text())["rows"])


if __name__ == "__main__":
    main()
