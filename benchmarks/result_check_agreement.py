"""Does the interpreter check of a proposed config (`advisor.advice.result_check`, no GPU) agree with what the
GPU found when it timed the same configs? Every config the GPU checked against a launch's own config (status
"ok": the same result; "wrong": another) is run again here in Triton's CPU interpreter, as `suggest` runs it.

Sources of the GPU's verdicts:
* the corpus (`benchmarks/corpus/data/timings.csv`, `timings_h200.csv`: library kernels, their recorded config
  the reference; needs the corpus libraries importable, e.g. `PYTHONPATH=/tmp/site`, installed from
  `benchmarks/corpus/requirements.txt`);
* the fresh user-style kernels (`benchmarks/data/fresh_user*_h*.json`: each launch's current config the
  reference; every timed config with a time is "ok", one whose outputs differed is "wrong").

    PYTHONPATH=/tmp/site python benchmarks/result_check_agreement.py [--source corpus|fresh|both]
        [--limit 60] [--per-launch 12] [--sample 40] [--out rows.jsonl]

Prints per launch the GPU's and the interpreter's verdicts, then the agreement table: wrong found wrong,
right found the same, right called wrong (a false alarm: a good config the check would withhold), wrong called
the same (a miss), and how many were not checked (no element in common, out of time, the interpreter failed).
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks" / "corpus"))


def corpus_groups(per_launch: int, sample: int) -> list[tuple[str, object, list[tuple[object, str]], set]]:
    """(label, reference launch, [(variant launch, gpu verdict)], zeroed) per corpus launch with variants: every
    launch with a config either GPU found wrong, and `sample` others drawn with a fixed seed."""
    from check_points import cases, launch_dict
    from replay import accumulated

    from ceilings.launch import Launch

    out = []
    by_launch: dict[tuple[str, str], dict[str, dict]] = defaultdict(dict)
    for name in ("timings.csv", "timings_h200.csv"):  # one row per (launch, config): "wrong" on either GPU wins
        with open(ROOT / "benchmarks" / "corpus" / "data" / name) as f:
            for r in csv.DictReader(f):
                if r["status"] in ("ok", "wrong"):
                    label = json.dumps(json.loads(r["config"]), sort_keys=True)
                    kept = by_launch[(r["library"], r["launch_id"])].get(label)
                    if kept is None or r["status"] == "wrong":
                        by_launch[(r["library"], r["launch_id"])][label] = r
    launches = sorted(by_launch)
    with_wrong = [k for k in launches if any(r["status"] == "wrong" for r in by_launch[k].values())]
    others = [k for k in launches if k not in with_wrong]
    random.Random(0).shuffle(others)
    for lib, launch_id in with_wrong + others[:sample]:
        rs = list(by_launch[(lib, launch_id)].values())
        case = cases().get(lib, {}).get(launch_id)
        if case is None or not any(r["recorded"] == "1" for r in rs) or len(rs) < 2:
            continue
        variants = {v.label: v for v in case.variants(limit=10_000)}
        ref = case.recorded_variant()
        pairs = []
        for r in rs:
            label = json.dumps(json.loads(r["config"]), sort_keys=True)
            if r["recorded"] == "1" or label not in variants:
                continue
            entry, _ = launch_dict(case, variants[label])
            pairs.append((Launch.from_dict(entry), r["status"]))
        # every wrong one, then right ones up to per_launch
        pairs = [p for p in pairs if p[1] == "wrong"] + [p for p in pairs if p[1] == "ok"]
        if not pairs:
            continue
        try:
            zeroed = accumulated(case)
        except Exception:  # noqa: BLE001 - the library does not import here: skip the launch
            continue
        entry, _ = launch_dict(case, ref)
        out.append((f"corpus {lib} {case.kernel} {launch_id}", Launch.from_dict(entry),
                    pairs[:per_launch], zeroed))
    return out


def fresh_groups(per_launch: int) -> list[tuple[str, object, list[tuple[object, str]], set]]:
    """The same from the fresh user-style kernels' GPU rows: the launch as `suggest --call` captures it."""
    from advisor.advice.suggest import subjects_for
    from advisor.measure.launch_run import with_config
    from ceilings.hardware import resolve_gpu
    from ceilings.launch import Config

    seen: dict[tuple[str, str, str], dict] = {}
    for path in sorted((ROOT / "benchmarks" / "data").glob("fresh_user*_h*.json")):
        for r in json.loads(path.read_text())["rows"]:
            if not all(k in r for k in ("file", "call", "launch")):  # a launch that failed before it was planned
                continue
            key = (r["file"], r["call"], r["launch"])
            verdicts = seen.setdefault(key, {})
            for t in r.get("timed", []):
                label = json.dumps(t["config"], sort_keys=True)
                if "us" in t:
                    verdicts.setdefault(label, "ok")
                elif "differ" in t.get("error", ""):
                    verdicts[label] = "wrong"
    out = []
    for (file, call, label), verdicts in seen.items():
        try:
            subject = next(s for s in subjects_for(file, call=call, gpu=resolve_gpu("h100")) if s.label == label)
        except Exception:  # noqa: BLE001 - the launch is no longer captured so: skip it
            continue
        pairs = []
        for config_label, status in verdicts.items():
            config = Config.from_dict(json.loads(config_label))
            if config.program == subject.current.program:
                continue
            pairs.append((with_config(subject.launch, subject.launch_for(config)), status))
        # one per program (num_warps / num_stages do not change what it computes), the wrong ones first
        by_program: dict[tuple, tuple] = {}
        for launch, status in sorted(pairs, key=lambda p: p[1] != "wrong"):
            by_program.setdefault(launch.config.program, (launch, status))
        if by_program:
            out.append((f"fresh {Path(file).stem} {label[:60]}", subject.launch,
                        list(by_program.values())[:per_launch], subject.accumulated()))
    return out


def main() -> None:
    from advisor.advice.result_check import SAME, check_launches, uses_atomics

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=("corpus", "fresh", "both"), default="both")
    parser.add_argument("--limit", type=float, default=60.0, help="seconds of interpreter per launch")
    parser.add_argument("--per-launch", type=int, default=12)
    parser.add_argument("--sample", type=int, default=40, help="corpus launches with no wrong config, drawn")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    groups = []
    if args.source in ("corpus", "both"):
        groups += corpus_groups(args.per_launch, args.sample)
    if args.source in ("fresh", "both"):
        groups += fresh_groups(args.per_launch)
    tally: Counter = Counter()
    out = args.out.open("w") if args.out else None
    began = time.time()
    for label, launch, pairs, zeroed in groups:
        sampled = not uses_atomics(launch.source)
        t0 = time.time()
        answers, why = check_launches(launch, [p[0] for p in pairs], zeroed, args.limit, sampled)
        for i, (variant, gpu) in enumerate(pairs):
            said = answers[i] if i < len(answers) else "unchecked"
            kind = ("not checked" if said in (None, "unchecked") else
                    ("wrong found wrong" if gpu == "wrong" else "right called wrong") if said != SAME else
                    ("right found the same" if gpu == "ok" else "wrong called the same"))
            tally[kind] += 1
            if out:
                out.write(json.dumps({"launch": label, "config": variant.config.label(), "gpu": gpu,
                                      "interpreter": said, "sampled": sampled, "why": why}) + "\n")
            if kind in ("right called wrong", "wrong called the same", "wrong found wrong"):
                print(f"  {kind}: {label} {variant.config.label()}: {said}")
        print(f"{label}: {len(pairs)} configs, {len(answers)} answered in {time.time() - t0:.1f} s"
              f"{' (sampled)' if sampled else ''}{'; ' + why if why else ''}", flush=True)
    print(f"\n{len(groups)} launches in {time.time() - began:.0f} s")
    print("| GPU's verdict -> interpreter's | configs |\n|---|---|")
    for kind in ("wrong found wrong", "wrong called the same", "right found the same", "right called wrong",
                 "not checked"):
        print(f"| {kind} | {tally[kind]} |")


if __name__ == "__main__":
    main()
