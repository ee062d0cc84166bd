"""`suggest --measure K`'s choice of configs to time, simulated on the fresh user-style sets' GPU samples (issue 15).

Each fresh set's rows (`benchmarks/data/fresh_user*_{h100,h200}*.json`, written by fresh_user_kernels.py on the
GPU) hold a sample of a launch's configs, each timed with its output checked. Here the product's own loop
(`advisor.advice.timed_pick.time_configs`: the current config, then K others one at a time, re-predicted after
each timing with the kernel's calibration and its neighbours) runs on this machine over that sample, with each
"timing" looked up in the rows instead of taken on a GPU. The pick is scored against the sample's fastest.

What it does not reproduce: the product chooses from the launch's whole config space, this from the sample
(10-25 configs of it); a lookup has no timing noise, so the re-timing of close finishes changes nothing.
Each launch runs in a fresh calibration cache (the compile cache is shared), so no timing leaks between
launches or rules.

    python benchmarks/sim_measure_fresh.py [--k 4] [--rules product,predicted] [--sets 1,2,3,4,5,6] [--out FILE.jsonl]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "benchmarks"))
from user_sets_model import set_rows  # noqa: E402  (each set's row files on each GPU: user_sets_model.SET_FILES)


def expected_gain(product_choose, seen):
    """Experiment: the config whose expected gain over the fastest time so far is largest, its time
    log-normal about the (calibrated) prediction with the spread its 80% band implies."""
    from advisor.model.kernel_calibration import Z80

    def choose(untimed, tried=()):
        best = min((us for _, us in seen), default=math.inf)
        if not math.isfinite(best):
            return min(untimed, key=lambda c: c.predicted_us)

        def gain(c) -> float:
            lo, hi = c.interval
            s = max(math.log(max(hi, lo * 1.0001) / max(lo, 1e-9)) / (2 * Z80), 0.005)
            m = math.log(best / c.predicted_us)
            z = m / s
            return m * 0.5 * math.erfc(-z / math.sqrt(2)) + s * math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
        return max(untimed, key=gain)
    return choose


def other_programs_first(product_choose, seen):
    """Experiment: the predicted fastest of the configs that differ from every one tried in more than num_warps and
    num_stages (another program, `Config.program`); of all once none is left."""
    def choose(untimed, tried=()):
        done = {c.program for c, _ in seen}
        fresh = [c for c in untimed if c.config.program not in done]
        return min(fresh or untimed, key=lambda c: c.predicted_us)
    return choose


def predicted_fastest(product_choose, seen):
    """The rule before RESULTS 54: the predicted fastest of all configs not yet timed."""
    return lambda untimed, tried=(): min(untimed, key=lambda c: c.predicted_us)


RULES = {"product": lambda product_choose, seen: product_choose, "predicted": predicted_fastest,
         "ei": expected_gain, "programs": other_programs_first}


def simulate(row: dict, gpu: str, k: int, rule: str) -> dict | None:
    """One launch: the configs the product times under `rule` and its pick, looked up in the row's sample."""
    from advisor.advice import timed_pick
    from advisor.advice.suggest import subjects_for
    from advisor.measure.timing import MeasurementError, WrongResult
    from ceilings.hardware import resolve_gpu
    from ceilings.launch import Config

    times = {Config.from_dict(t["config"]): t["us"] for t in row.get("timed", []) if "us" in t}
    failed = {Config.from_dict(t["config"]): t["error"] for t in row.get("timed", []) if "error" in t}
    current = Config.from_dict(row["current"])
    if current not in times or len(times) < k + 1:
        return None
    subject = next(s for s in subjects_for(row["file"], call=row["call"], gpu=resolve_gpu(gpu))
                   if s.label == row["launch"])

    seen: list[tuple[Config, float]] = []  # what the loop has "timed", for the experimental rules

    def run(config: Config) -> float:
        seen.append((config, times.get(config, math.inf)))
        if config in failed:
            why = failed[config]
            raise (WrongResult if "differs from the reference" in why else MeasurementError)(why[:80])
        return times[config]

    cands = sorted(subject.predict(list(times) + list(failed)), key=lambda c: c.predicted_us)
    cur = next(c for c in cands if c.config == current)
    advice = SimpleNamespace(pruned=Counter(), notes=[])
    saved = timed_pick.choose
    timed_pick.choose = RULES[rule](saved, seen)
    try:
        timed = timed_pick.time_configs(subject, advice, cur, cands, k, run, confirm=False)
    finally:
        timed_pick.choose = saved
    best = min(times.values())
    return {"launch": row["launch"], "call": row["call"], "gpu": gpu, "rule": rule, "k": k,
            "timed": [c.config.label() for c in timed], "pick": timed[0].config.label(),
            "pick_vs_best": times[timed[0].config] / best, "current_vs_best": times[current] / best,
            "sample": len(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--rules", default="product,predicted,ei,programs")
    parser.add_argument("--sets", default="1,2,3,4,5,6")
    parser.add_argument("--gpus", default="h100,h200")
    parser.add_argument("--out", type=Path)
    a = parser.parse_args()
    compile_cache = Path(os.environ.get("TRITON_ADVISOR_CACHE", Path.home() / ".cache" / "triton-advisor")) / "compile"
    results = []
    for s in a.sets.split(","):
        for gpu in a.gpus.split(","):
            for _, _, row in set_rows([int(s)], [gpu]):
                for rule in a.rules.split(","):
                    with tempfile.TemporaryDirectory() as home:
                        (Path(home) / "compile").symlink_to(compile_cache)
                        os.environ["TRITON_ADVISOR_CACHE"] = home
                        try:
                            out = simulate(row, gpu, a.k, rule)
                        except Exception as exc:  # noqa: BLE001 - a launch that cannot be simulated is reported
                            print(f"set {s} {gpu} {row['launch'][:50]}: not simulated ({exc!r})", flush=True)
                            continue
                    if out is None:
                        continue
                    out["set"] = s
                    results.append(out)
                    print(f"set {s} {gpu} {rule:3s} {row['launch'][:48]:48s} pick/best {out['pick_vs_best']:.3f} "
                          f"timed {', '.join(out['timed'])}", flush=True)
    if a.out:
        a.out.write_text("".join(json.dumps(r) + "\n" for r in results))
    print("\n| set | GPU | rule | launches | pick within 1.02x of the sample's fastest | within 1.05x |")
    print("|---|---|---|---|---|---|")
    keys = sorted({(r["set"], r["gpu"], r["rule"]) for r in results})
    for key in keys:
        rs = [r for r in results if (r["set"], r["gpu"], r["rule"]) == key]
        print(f"| {key[0]} | {key[1]} | {key[2]} | {len(rs)} | {sum(r['pick_vs_best'] <= 1.02 for r in rs)} | "
              f"{sum(r['pick_vs_best'] <= 1.05 for r in rs)} |")
    for rule in a.rules.split(","):
        rs = [r for r in results if r["rule"] == rule]
        if rs:
            geo = math.exp(sum(math.log(r["pick_vs_best"]) for r in rs) / len(rs))
            print(f"{rule}: {len(rs)} launches, within 1.02x {sum(r['pick_vs_best'] <= 1.02 for r in rs)}, "
                  f"1.05x {sum(r['pick_vs_best'] <= 1.05 for r in rs)}, geomean pick/best {geo:.4f}")


if __name__ == "__main__":
    main()
