"""Kernels written for this check the way a user brings one (`benchmarks/user_kernels/`, never seen by a model
or a rule): what `advisor suggest --call` names without a GPU and with `--measure 4`, timed against the current
config and against a sample of the kernel's config space, on the GPU.

    python benchmarks/fresh_user_kernels.py plan [--calls FILE] [--space 12] [--plan PATH]    # CPU
    python3 benchmarks/fresh_user_kernels.py device --out $OUT [--measure 4] [--only 0:4] [--plan PATH]   # GPU
    python benchmarks/fresh_user_kernels.py summary ROWS.json [ROWS.json ...] [--autotuner] [--named-from PLAN]
    python benchmarks/fresh_user_kernels.py accuracy ROWS.json [...] --gpu h100               # the model's error
    python3 benchmarks/fresh_user_kernels.py calibrated --out $OUT --plan PLAN --rows ROWS... # GPU: 3 timings
    python benchmarks/fresh_user_kernels.py replay CALIBRATED.json --plan PLAN --rows ROWS... # CPU: them again

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


def run_env() -> dict:
    """The GPU, versions (advisor.measure.timing.versions) and time of a device run, for its rows file."""
    import torch

    from advisor.measure.timing import versions

    return {"gpu": torch.cuda.get_device_name(), **versions(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}


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
    from ceilings.hardware import resolve_gpu

    lines = []
    for file, call in calls(args.calls):
        doc = suggest_json(file, call, ["--gpu", args.gpu], 600)
        if "error" in doc:
            lines.append({"file": file, "call": call, "error": doc["error"]})
            continue
        subjects = {s.label: s for s in subjects_for(file, call=call, gpu=resolve_gpu(args.gpu))}
        for launch in doc["launches"]:
            space = [c.to_dict() for c in subjects[launch["launch"]].space()] if launch["launch"] in subjects else []
            step = max(1, len(space) // args.space) if space else 1
            sample = space[::step][:args.space]
            lines.append({"file": file, "call": call, "launch": launch["launch"], "kernel": launch["kernel"],
                          "current": launch["current"]["config"], "named": launch["best"]["config"],
                          "named_label": launch["best"]["label"], "current_label": launch["current"]["label"],
                          "predicted_speedup": launch["speedup"], "space_size": len(space),
                          "ranked": [r["config"] for r in launch["ranked"]], "sample": sample,
                          "caveats": launch.get("caveats", [])})
    args.plan.write_text("".join(json.dumps(x) + "\n" for x in lines))
    print(f"{len(lines)} launches -> {args.plan}")


def device(args) -> None:

    from advisor.advice.suggest import subjects_for
    from ceilings.launch import Config

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    start, _, stop = args.only.partition(":")
    entries = list(map(json.loads, args.plan.read_text().splitlines()))[int(start or 0):int(stop) if stop else None]
    from advisor.measure.timing import GPUFault

    faulted_at = None
    for index, entry in enumerate(entries):
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
                except GPUFault as exc:  # the CUDA context is lost: nothing more of this process's timings
                    row["timed"].append({"config": config, "error": f"GPUFault: {exc}"[:200]})
                    faulted_at = index
                    break
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
                                    "current_us": launch["current"].get("measured_us"),
                                    # what the run timed and why it stopped there, to read a miss afterwards
                                    "ranked": [[c["label"], c.get("measured_us"), c.get("predicted_us")]
                                               for c in launch["ranked"]], "notes": launch.get("notes", [])}
        else:
            row["measured_pick"] = {"error": doc.get("error", "no launch")}
        rows.append(row)
        (out / "fresh_user.json").write_text(json.dumps({"rows": rows}, indent=1))
        if faulted_at is not None and index + 1 < len(entries):
            # the launches left run in a fresh process, with a CUDA context of their own (RESULTS 54: a fault
            # left the rest of a run untimed)
            first = int(start or 0) + index + 1
            # beside this run's folder, not inside it: a fault in the rest nests no deeper (the device tool
            # returns folders 16 deep at most; set 11's third level did not come back)
            rest = out.parent / f"{out.name.split('_from')[0]}_from{first}"
            subprocess.run([sys.executable, __file__, "device", "--out", str(rest), "--plan", str(args.plan),
                            "--measure", str(args.measure), "--only", f"{first}:{stop}"], check=False)
            if (rest / "fresh_user.json").exists():
                rows += json.loads((rest / "fresh_user.json").read_text())["rows"]
            break
    env = run_env()
    (out / "fresh_user.json").write_text(json.dumps({"env": env, "rows": rows}, indent=1))
    print(json.dumps(env))
    report(rows)


def calibrated(args) -> None:
    """Per launch of the plan, in an empty cache: `advisor calibrate --kernel FILE --call CALL --configs K` (K configs
    timed, chosen by the advisor), then `suggest` without timings, as a user runs them; the config it then names and
    the current one timed (product's measurer). Against `--rows` (the same GPU's earlier timings of the space)."""

    from advisor.advice.suggest import subjects_for
    from ceilings.launch import Config

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    earlier = {(r["call"], r["launch"]): r for path in args.rows for r in json.loads(path.read_text())["rows"]}
    start, _, stop = args.only.partition(":")
    entries = list(map(json.loads, args.plan.read_text().splitlines()))[int(start or 0):int(stop) if stop else None]
    rows = []
    for entry in entries:
        row = {"call": entry["call"], "launch": entry["launch"], "kernel": entry["kernel"]}
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "TRITON_ADVISOR_CACHE": cache, "COLUMNS": "200"}
            t0 = time.time()
            cal = subprocess.run([sys.executable, "-m", "tui.entry", "calibrate", "--kernel", entry["file"], "--call",
                                  entry["call"], "--configs", str(args.configs)], capture_output=True, text=True,
                                 cwd=ROOT, timeout=300, env=env)
            row["calibrate_rc"], row["calibrate_s"] = cal.returncode, round(time.time() - t0, 1)
            row["calibrate_out"] = (cal.stdout + cal.stderr)[-800:]
            doc = suggest_json(entry["file"], entry["call"], [], 300, cache)
        launch = next((x for x in doc.get("launches", []) if x["launch"] == entry["launch"]), None)
        if launch is None:
            row["error"] = doc.get("error", "no launch")
            rows.append(row)
            continue
        row["named"], row["named_label"] = launch["best"]["config"], launch["best"]["label"]
        # what suggest saw after the timings: its ranking (a timed config's time is its prediction) and notes
        row["suggest_ranked"] = [[c["label"], c["predicted_us"]] for c in launch["ranked"]]
        row["suggest_notes"] = launch.get("notes", [])
        subject = next(s for s in subjects_for(entry["file"], call=entry["call"]) if s.label == entry["launch"])
        measure = subject.measurer()
        row["current_us"] = round(measure(Config.from_dict(entry["current"])), 3)
        try:
            row["named_us"] = row["current_us"] if row["named"] == entry["current"] else \
                round(measure(Config.from_dict(row["named"])), 3)
        except Exception as exc:  # noqa: BLE001 - a named config that computes another result is a row, not a stop
            row["named_us"], row["named_error"] = None, f"{type(exc).__name__}: {exc}"[:300]
        before = earlier.get((entry["call"], entry["launch"]))
        if before:
            times = [t["us"] for t in before["timed"] if "us" in t]
            cur_before = next(t["us"] for t in before["timed"] if t["config"] == entry["current"] and "us" in t)
            # the fastest timed before, on this run's scale (the current config's two timings)
            row["fastest_us"] = round(min(times) * row["current_us"] / cur_before, 3)
        rows.append(row)
        (out / "fresh_user_calibrated.json").write_text(json.dumps({"rows": rows}, indent=1))
    env = run_env()
    (out / "fresh_user_calibrated.json").write_text(json.dumps({"env": env, "rows": rows}, indent=1))
    print(json.dumps(env))
    print("| kernel | calibrate rc | named after calibration | current us | named us | fastest timed before us | "
          "named / fastest |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = r["named_us"] / r["fastest_us"] if r.get("fastest_us") and r.get("named_us") else float("nan")
        print(f"| {r['kernel']} | {r['calibrate_rc']} | {r.get('named_label', r.get('error'))} | {r.get('current_us')} "
              f"| {r.get('named_us')} | {r.get('fastest_us')} | {ratio:.3f} |")


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


def launch_subject(entry: dict, gpu: str):
    """The subject of a plan entry's launch, afresh (it reads the kernel's stored timings when made)."""
    from advisor.advice.suggest import subjects_for
    from ceilings.hardware import resolve_gpu

    return next(s for s in subjects_for(entry["file"], call=entry["call"], gpu=resolve_gpu(gpu))
                if s.label == entry["launch"])


def replay(args) -> None:
    """CPU: the timings a `calibrated` run's `calibrate --kernel` printed, stored in an empty cache, then the search
    `suggest` runs (without its confirming compiles): the config the product names now, judged by the same GPU's
    timings (`--rows`' sweeps and the calibrated run's own). What a change to the advice does to that run, without a
    GPU; the ceilings are this machine's (put the GPU's Triton first on PYTHONPATH to match the binary timed)."""
    import re

    from advisor.advice.search import predict_candidates, record_timings, search
    from ceilings.launch import Config

    plan = {(e["call"], e["launch"]): e for e in map(json.loads, args.plan.read_text().splitlines())}
    earlier = {(r["call"], r["launch"]): r for path in args.rows for r in json.loads(path.read_text())["rows"]}
    ratios = []
    for r in json.loads(args.calibrated.read_text())["rows"]:
        entry, before = plan[(r["call"], r["launch"])], earlier.get((r["call"], r["launch"]))
        timed = re.findall(r": (\S[^:\n]*?) predicted [\d.]+ us, measured ([\d.]+) us", r.get("calibrate_out", ""))
        os.environ["TRITON_ADVISOR_CACHE"] = tempfile.mkdtemp(prefix="replay-")

        first = launch_subject(entry, args.gpu)
        times = {json.dumps(t["config"], sort_keys=True): t["us"] for t in (before or {}).get("timed", [])
                 if "us" in t}
        known = {c.label(): c for c in [*first.space(), *map(Config.from_dict, map(json.loads, times))]}
        configs = [known[label] for label, _ in timed if label in known]
        if len(configs) < len(timed):
            print(f"{r['kernel']}: {len(timed) - len(configs)} timed config(s) not found by label; skipped")
            continue
        cands = predict_candidates(first, configs)
        record_timings(first, [(c, float(us)) for c, (_, us) in zip(cands, timed, strict=True)])
        named = search(launch_subject(entry, args.gpu), confirm=False).best.config
        # the calibrated run's own timings of its named and current configs, else the sweep's of the same config
        own = {json.dumps(r["named"], sort_keys=True): r.get("named_us"), json.dumps(entry["current"], sort_keys=True):
               r.get("current_us")}
        key = json.dumps(named.to_dict(), sort_keys=True)
        us = own.get(key) or (times.get(key) * r["current_us"] / times[json.dumps(entry["current"], sort_keys=True)]
                              if key in times else None)
        ratio = us / r["fastest_us"] if us and r.get("fastest_us") else None
        ratios.append(ratio)
        print(f"{r['kernel'][:28]:28s} {r['call'][:40]:40s} named then {r['named_label']:26s} now {named.label():26s} "
              + (f"{ratio:.3f} of the fastest timed before" if ratio else "(not timed)"))
    done = [x for x in ratios if x is not None]
    print(f"{len(done)} of {len(ratios)} named configs timed; within 1.03x of the fastest timed before: "
          f"{sum(x <= 1.03 for x in done)}")


def outcome(r: dict, listed: list[dict] | None = None) -> dict | None:
    """One launch's ratios (our timings): the named config and the `--measure` pick against the current config
    and the fastest config timed; the pick's time is ours where we timed it, else the product's, scaled to ours
    through the current config's two timings. `listed`: an autotuned launch's list, every config of it timed:
    what runs is then the autotuner's pick, the fastest of the list (not the plan's current, the model's guess
    of it), and a named config runs as the fastest of the list with it added (`advisor apply` adds it)."""
    times = {json.dumps(t["config"], sort_keys=True): t["us"] for t in r.get("timed", []) if "us" in t}
    cur = times.get(json.dumps(r.get("current"), sort_keys=True))
    if not cur:
        return None
    best = min(times.values())
    named = times.get(json.dumps(r["named"], sort_keys=True))
    in_list = [times.get(json.dumps(c, sort_keys=True)) for c in listed or []]
    if in_list and all(in_list):
        cur = min(in_list)
        named = min(cur, named) if named else None
    pick = r.get("measured_pick", {})
    pick_us = times.get(json.dumps(pick.get("config"), sort_keys=True))
    if pick_us is None and pick.get("us") and pick.get("current_us"):
        pick_us = pick["us"] / pick["current_us"] * cur
    return {"changed": r["named"] != r["current"], "named_vs_current": named / cur if named else None,
            "named_vs_best": named / best if named else None, "pick_vs_best": pick_us / best if pick_us else None}


def autotune_list(r: dict) -> list[dict] | None:
    """The autotune list of a row's launch (None: not an autotuned launch), from its subject (no GPU)."""
    from advisor.advice.suggest import subjects_for
    from ceilings.hardware import resolve_gpu

    subject = next((s for s in subjects_for(r["file"], call=r["call"], gpu=resolve_gpu("h100"))
                    if s.label == r["launch"]), None)
    if subject is None or not subject.autotuner_picks or not subject.listed:
        return None
    return [c.to_dict() for c in subject.listed]


def summary(paths: list[Path], autotuner: bool = False, named_from: Path | None = None) -> None:
    """Issue 15's three advice figures over the rows of `paths` (one GPU's runs); `autotuner`: an autotuned
    launch's current config is the autotuner's real pick (`outcome`'s `listed`). `named_from`: another plan of
    the same calls (say made with the GPU's Triton on the path): its named configs judged by these timings, where
    they were timed (one that was not is said and left out of the named figures)."""
    raw = [r for path in paths for r in json.loads(path.read_text())["rows"]]
    if named_from:
        other = {(p["call"], p["launch"]): p for p in map(json.loads, named_from.read_text().splitlines()) if p}
        for r in raw:
            p = other.get((r["call"], r["launch"]))
            r["named"] = p["named"] if p else None
            untimed = r["named"] is not None and json.dumps(r["named"], sort_keys=True) not in {
                json.dumps(t["config"], sort_keys=True) for t in r.get("timed", []) if "us" in t}
            if p is None or untimed:
                why = f"not in {named_from}" if p is None else f"named {p['named_label']}, not timed here"
                print(f"{r['kernel']} ({r['call'][:50]}): {why}")
    rows = [o for r in raw if (o := outcome(r, autotune_list(r) if autotuner else None))]
    count = lambda key, limit: sum(1 for o in rows if o[key] is not None and o[key] <= limit)  # noqa: E731
    n = len(rows)
    print(f"launches {n}; named another config {sum(o['changed'] for o in rows)}; named not slower than current: "
          f"{count('named_vs_current', 1.0)}/{n} (within 2%: {count('named_vs_current', 1.02)}/{n}); named within "
          f"1.05x of the fastest timed: {count('named_vs_best', 1.05)}/{n}; --measure pick within 1.02x of it: "
          f"{count('pick_vs_best', 1.02)}/{n} (1.05x: {count('pick_vs_best', 1.05)}/{n})")


def accuracy(paths: list[Path], gpu: str) -> None:
    """The latency model's predictions (this machine, no GPU) of every config timed in `paths` (one GPU's rows):
    MAPE, the 80% interval's coverage, Spearman per launch, and the timed config the model ranks fastest against the
    fastest timed (issue 15's first figures, on kernels no model or rule saw)."""
    import numpy as np
    import triton

    from ceilings.launch import Config

    # A floor holds for the binary it was counted on: Triton 3.9 here compiled set 12's NVFP4 quantiser to 11%
    # more ALU instructions than the GPU's 3.6 ran, a "floor" 6% over its measured time (RESULTS 60).
    docs = [json.loads(path.read_text()) for path in paths]
    envs = [doc.get("env") or {} for doc in docs]  # a merged run's env is a list
    timed_with = {e.get("triton") for env in envs for e in (env if isinstance(env, list) else [env])} - {None}
    if timed_with and timed_with != {triton.__version__}:
        print(f"ceilings compiled with Triton {triton.__version__}, rows timed with {', '.join(sorted(timed_with))}: "
              "each floor is of another binary than ran (put that Triton first on PYTHONPATH to match)")
    ape, covered, rhos, regrets, over_floor, best_over = [], [], [], [], [], []
    for doc in docs:
        for r in doc["rows"]:
            timed = [(Config.from_dict(t["config"]), t["us"]) for t in r.get("timed", []) if "us" in t]
            subject = launch_subject(r, gpu)
            cands = subject.predict([c for c, _ in timed])
            pred = np.array([c.predicted_us for c in cands])
            meas = np.array([us for _, us in timed])
            ape += list(np.abs(pred / meas - 1))
            # issue 14's floor: measured / ceiling of every timed config, and of the launch's fastest timed
            floor = meas / np.array([c.ceiling.ceiling_us for c in cands])
            over_floor += list(floor)
            best_over.append(float(floor[int(np.argmin(meas))]))
            covered += [lo <= m <= hi for (lo, hi), m in zip((c.interval for c in cands), meas, strict=True)]
            if len(timed) >= 3:
                rank = lambda v: np.argsort(np.argsort(v))  # noqa: E731
                rhos.append(float(np.corrcoef(rank(pred), rank(meas))[0, 1]))
            regrets.append(float(meas[int(np.argmin(pred))] / meas.min()))
            print(f"{r['kernel'][:26]:26s} {len(timed):3d} configs  MAPE {np.mean(np.abs(pred / meas - 1)):6.1%}  "
                  f"predicted/measured median {np.median(pred / meas):5.2f}  top-1 {regrets[-1]:.3f}  "
                  f"measured/ceiling {floor.min():.2f}-{floor.max():.2f}")
    print(f"{gpu}: {len(ape)} configs of {len(regrets)} launches; MAPE {np.mean(ape):.1%}, median APE "
          f"{np.median(ape):.1%}; 80% interval covers {np.mean(covered):.0%}; median Spearman per launch "
          f"{np.median(rhos):.2f} ({len(rhos)} launches); model's fastest within 1.05x of the fastest timed "
          f"{np.mean(np.array(regrets) <= 1.05):.0%}; measured >= 0.97 x ceiling on "
          f"{np.mean(np.array(over_floor) >= 0.97):.1%} of configs (lowest {min(over_floor):.2f}), median measured / "
          f"ceiling of each launch's fastest {np.median(best_over):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("plan")
    p.add_argument("--calls", type=Path, default=CALLS)
    p.add_argument("--space", type=int, default=12)
    p.add_argument("--plan", type=Path, default=PLAN, help="where to write the plan")
    p.add_argument("--gpu", default="h100", help="the GPU the advice is for (suggest --gpu)")
    d = sub.add_parser("device")
    d.add_argument("--out", default=".")
    d.add_argument("--measure", type=int, default=4)
    d.add_argument("--only", default=":", help="a slice of the plan's launches, e.g. 0:4")
    d.add_argument("--plan", type=Path, default=PLAN)
    r = sub.add_parser("report")
    r.add_argument("rows", type=Path)
    m = sub.add_parser("summary", help="issue 15's advice figures over one GPU's row files")
    m.add_argument("rows", type=Path, nargs="+")
    m.add_argument("--autotuner", action="store_true",
                   help="an autotuned launch's current config is the fastest of its list, as the autotuner runs")
    m.add_argument("--named-from", type=Path, help="judge another plan's named configs by these rows' timings")
    c = sub.add_parser("calibrated", help="GPU: calibrate --kernel with K timings, then suggest, the named timed")
    c.add_argument("--out", default=".")
    c.add_argument("--plan", type=Path, default=PLAN)
    c.add_argument("--rows", type=Path, nargs="+", required=True, help="the same GPU's earlier rows")
    c.add_argument("--configs", type=int, default=3)
    c.add_argument("--only", default=":")
    rp = sub.add_parser("replay", help="CPU: a calibrated run's timings replayed through today's search")
    rp.add_argument("calibrated", type=Path)
    rp.add_argument("--plan", type=Path, required=True)
    rp.add_argument("--rows", type=Path, nargs="+", required=True)
    rp.add_argument("--gpu", default="h100")
    a = sub.add_parser("accuracy", help="the model's predictions of every timed config (CPU)")
    a.add_argument("rows", type=Path, nargs="+")
    a.add_argument("--gpu", default="h100")
    args = parser.parse_args()
    if args.step == "plan":
        plan(args)
    elif args.step == "device":
        device(args)
    elif args.step == "summary":
        summary(args.rows, args.autotuner, args.named_from)
    elif args.step == "calibrated":
        calibrated(args)
    elif args.step == "replay":
        replay(args)
    elif args.step == "accuracy":
        accuracy(args.rows, args.gpu)
    else:
        report(json.loads(args.rows.read_text())["rows"])


if __name__ == "__main__":
    main()
