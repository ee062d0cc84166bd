"""`advisor suggest` on held-out corpus launches, checked on the GPU (issue 15, "Done when" point 3).

Three steps, the middle one in one device call:

    python benchmarks/corpus/check_advice_gpu.py plan              # CPU: pick launches -> data/advice_gpu_plan.json
    python benchmarks/corpus/check_advice_gpu.py device [--only N] # GPU: suggest, suggest --measure 4, time
    python benchmarks/corpus/check_advice_gpu.py analyze           # CPU: -> data/advice_gpu.csv, *_summary.json

On the device machine (nvidia-h100-x1; the corpus wheels carried in `.whl`), from the repository root:

    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 FLA_CACHE_RESULTS=0 TOKENIZERS_PARALLELISM=false
    python3 benchmarks/corpus/check_advice_gpu.py device --budget 560 --measure-jobs 4   # about 9 minutes

then copy $OUT's advice_gpu_* into data/ and run `analyze`. A run cut by its budget says which
`suggest --measure 4` runs it did not start ("not run (device deadline)"); a second call with
`--only POSITIONS --plain-from data/advice_gpu_suggest.jsonl` runs those launches again (their
suggestions without measurement taken from the first part), and its files, saved as
advice_gpu_suggest_part2.jsonl and advice_gpu_timings_part2.csv, replace those launches in `analyze`.

`plan` takes launches spread over the four libraries and their kernels, preferring a kernel whose
config space (its autotune list in the extras, or for a kernel without one the product's own space
around its config) has >= 3 configs; kernels whose variants the replay cannot run are left out, each
with the reason (README "Known limits of the replay").

`device` (on the GPU machine, wheels in /tmp/site as device.sh installs them, so that the traces'
kernel files resolve), for each planned launch written alone as a one-launch trace:
  1. `python -m advisor.cli suggest TRACE --format json` (no measurement) and
     `... --measure 4`, as a user runs them; each run gets its own empty advisor cache
     (TRITON_ADVISOR_CACHE), so that no launch's timings correct the model for another;
  2. the configs to time: the launch's own, both suggestions, and its measured space: the autotune list
     with the grid and constexprs the library's host code gives each config (captured, `replay.py`), or
     for a kernel without one the space `suggest` searched (`LaunchSubject.space()`, its grids and
     scalars from the product's launch rule), at most SPACE_CAP; compiled ahead in parallel workers;
  3. one timing process: per launch, inputs made once (replay.make_tensors), the own config first (the
     reference outputs), each other config checked against it (measure.compare, rel. error 5e-2) and
     timed (`time_config`: median of 20 CUDA-graph replays of as many launches as fill 1 ms), then the
     own config again (the noise); then every config that ran is timed a second time, in reverse order,
     and keeps the faster of its two timings.
Writes advice_gpu_suggest.jsonl, advice_gpu_timings.csv and advice_gpu_env.json to $OUT (else data/).

A second, fresh set of launches (section 28: kernels no choice of `suggest`'s rules was simulated on):
`plan --fresh` writes data/advice_gpu_plan_fresh.json, and `ADVICE_PLAN=that path` makes the device,
warm and time steps read it.

The held-out check (section 34): `check_transfer.py --write-held-out data/advice_gpu_held_out/models`, then
`plan --held-out` (data/advice_gpu_held_out/plan.json: both plans' launches and, per library, the transfer
model fitted without it, which each launch's `suggest` gets through TRITON_ADVISOR_TRANSFER_MODEL); run the
device step with ADVICE_PLAN=that plan. A call cut by its deadline is taken up by another with
`--resume FOLDER` (the first call's files carried in). `--measure-jobs 1` keeps the product's `--measure`
timings from sharing the GPU with each other (section 34: with 4 at once they disagreed with this check's
lone timings on 8 of 32 launches), at the cost of more calls; `--resume FOLDER --remeasure` runs such shared
runs again alone (section 34c). Progress goes to $OUT/advice_gpu_stamps.txt as well as stdout.

`analyze` joins them: per launch, the suggestion's and measure-4 choice's time against the own config
and against the best of the measured space; per library shares; every failure of the product.

One file past the ~400-line guide: its three steps share the plan's launches and the variant records
(one JSON shape written by the device step and read by the timing process and the analysis); each step
is its own section below.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import zip_longest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT)]

from replay import DATA, LIBRARIES, Case, Variant, _grid3, load_cases, read_json  # noqa: E402
from replay import HELD_OUT as HELD_OUT_LIBRARIES  # noqa: E402

ALL_LIBRARIES = (*LIBRARIES, *HELD_OUT_LIBRARIES)

# GPU time of one timed sample (a CUDA-graph replay of as many launches as fill it): as `suggest --measure`'s
from advisor.measure.launch_run import MAX_LAUNCHES_PER_GRAPH as MAX_PER_GRAPH  # noqa: E402
from advisor.measure.launch_run import SAMPLE_US  # noqa: E402

PLAN = DATA / "advice_gpu_plan.json"
FRESH_PLAN = DATA / "advice_gpu_plan_fresh.json"
# The held-out check (section 34): the plan's launches and beside them the four transfer models fitted
# without one library each (`check_transfer.py --write-held-out`); each launch's `suggest` gets its
# library's through TRITON_ADVISOR_TRANSFER_MODEL.
HELD_OUT = DATA / "advice_gpu_held_out"
HELD_OUT_PLAN = HELD_OUT / "plan.json"
LIBRARY_LAUNCHES = 20  # `plan --library L` (a held-out library, section 36): launches at most, autotuned first
FRESH_PER_LIBRARY = {lib: 99 for lib in LIBRARIES}  # every kernel left; the first FRESH_LAUNCHES taken
FRESH_LAUNCHES = 14
SPACE_CAP = 24            # configs of a launch's space timed at most (the own and suggested ones come on top)
MEASURE = 4
TIMING_RESERVE = 150.0  # seconds of the device step kept for the timing process (two timings per config)
PER_LIBRARY = {"liger": 9, "flaggems": 9, "fla": 10, "gemlite": 8}
# Kernels whose config variants the replay cannot run as the library would (README, "Known limits"):
SKIP = {("flaggems", "mm_kernel_general_host_tma"): "host TMA descriptors carry the recorded block shape",
        ("flaggems", "_attn_bwd"): "a variant ended the timing process (illegal memory access)",
        ("liger", "_dyt_bwd_kernel"): "host scratch sized by the config",
        ("gemlite", "gemm_splitK_INT_kernel"): "split-K output zeroed by a config pre-hook the replay does not run",
        ("gemlite", "gemm_splitK_MX_kernel"): "split-K output zeroed by a config pre-hook the replay does not run"}


def plan_file() -> Path:
    """The plan the device, timing and warm steps read: ADVICE_PLAN (a path) when set, else PLAN."""
    return Path(os.environ["ADVICE_PLAN"]) if os.environ.get("ADVICE_PLAN") else PLAN


def out_dir() -> Path:
    return Path(os.environ["OUT"]) if os.environ.get("OUT") else DATA


def plan_models() -> dict[str, Path]:
    """The plan's transfer model per library (folders relative to the plan file); none: the shipped one."""
    doc = json.loads(plan_file().read_text())
    return {lib: (plan_file().parent / rel).resolve() for lib, rel in (doc.get("transfer_models") or {}).items()}


def unreplayable() -> dict[str, str]:
    """Launches `suggest` cannot be run on, by id, with the reason: the corpus's H100 ceiling evaluation of
    the launch errored (a kernel file FlagGems generates at run time on another machine, a tensor dtype the
    advisor does not take) or never ran; `suggest` evaluates the same launch and fails the same way."""
    records: dict[str, list[dict]] = {}
    for line in (DATA / "ceilings.jsonl").read_text().splitlines():
        r = json.loads(line)
        records.setdefault(r["launch_id"], []).append(r)
    out = {}
    for lib in LIBRARIES:
        for case in load_cases(lib):
            rows = records.get(case.id, [])
            if not rows:
                out[case.id] = "no ceiling evaluation in data/ceilings.jsonl"
            elif any("error" in r for r in rows):
                out[case.id] = "ceiling evaluation errored: " + next(r["error"] for r in rows if "error" in r)[:160]
    return out


# ----------------------------------------------------------------------------------------------- plan
def plan(fresh: bool = False) -> None:
    """Launches for the check: per library, one launch per kernel (the one the corpus timed variants of),
    kernels with an autotune list of >= 3 configs first, then the others, up to PER_LIBRARY; GemLite has
    11 kernels, so a second launch (another batch size) of its autotuned kernels fills it.

    `fresh`: a second set of launches (FRESH_PLAN) that no choice of section 28 was made on: kernels of
    none of the first plan's launches and of no launch the rules of `suggest` were simulated on
    (sim_advice.py, either half, either GPU), autotuned ones first, FRESH_LAUNCHES at most."""
    import sim_advice

    chosen, skipped = [], []
    broken = unreplayable()
    first_plan = {(p["library"], p["kernel"]) for p in json.loads(PLAN.read_text())["launches"]} if fresh else set()
    if fresh:
        first_plan |= {(g[0]["library"], g[0]["kernel"]) for gpu in ("h100", "h200") for half in ("design", "check")
                       for g in sim_advice.launches(gpu, half)}
    for lib in LIBRARIES:
        first: dict[str, Case] = {}
        second: dict[str, Case] = {}
        for case in load_cases(lib):
            if (lib, case.kernel) in SKIP:
                continue
            if (lib, case.kernel) in first_plan or case.id in broken:
                continue
            if case.kernel not in first:
                first[case.kernel] = case
            elif case.kernel not in second and case.entry["grid"] != first[case.kernel].entry["grid"]:
                second[case.kernel] = case
        listed = lambda c: len(c.extras.get("variants") or [])  # noqa: E731
        order = sorted(first.values(), key=lambda c: (listed(c) < 3, c.index))
        order += sorted((c for c in second.values() if listed(c) >= 3), key=lambda c: c.index)
        for case in order[:(FRESH_PER_LIBRARY if fresh else PER_LIBRARY)[lib]]:
            chosen.append({"library": lib, "index": case.index, "launch_id": case.id, "kernel": case.kernel,
                           "autotune_configs": listed(case)})
    skipped = [{"library": lib, "kernel": k, "why": why} for (lib, k), why in SKIP.items()]
    skipped += [{"library": c.library, "kernel": c.kernel, "launch_id": c.id, "why": broken[c.id]}
                for lib in LIBRARIES for c in load_cases(lib) if c.id in broken]
    if fresh:
        order = [c for c in chosen if c["autotune_configs"] >= 3] + [c for c in chosen if c["autotune_configs"] < 3]
        chosen = order[:FRESH_LAUNCHES]
    target = FRESH_PLAN if fresh else PLAN
    target.write_text(json.dumps({"launches": chosen, "skipped": skipped, "space_cap": SPACE_CAP}, indent=1) + "\n")
    by_lib = {lib: sum(1 for c in chosen if c["library"] == lib) for lib in LIBRARIES}
    print(f"{len(chosen)} launches, {len({(c['library'], c['kernel']) for c in chosen})} kernels: {by_lib}; "
          f"{sum(c['autotune_configs'] >= 3 for c in chosen)} with an autotune list of >= 3 -> {target}")


def plan_held_out() -> None:
    """HELD_OUT_PLAN: the first plan's launches (sections 21-28) and the fresh plan's (re-made here, so
    that its exclusions hold), each tagged with its set, and the transfer model fitted without each
    library (written before by `check_transfer.py --write-held-out data/advice_gpu_held_out/models`)."""
    models = {lib: f"models/without-{lib}" for lib in LIBRARIES}
    missing = [m for m in models.values() if not (HELD_OUT / m / "transfer_meta.json").exists()]
    if missing:
        sys.exit(f"no held-out transfer model in {', '.join(missing)} under {HELD_OUT}; run "
                 f"python benchmarks/corpus/check_transfer.py --write-held-out {HELD_OUT / 'models'}")
    plan(fresh=True)
    broken = unreplayable()
    first = json.loads(PLAN.read_text())
    fresh = json.loads(FRESH_PLAN.read_text())
    launches = [dict(p, set="first") for p in first["launches"] if p["launch_id"] not in broken]
    launches += [dict(p, set="fresh") for p in fresh["launches"]]
    HELD_OUT_PLAN.write_text(json.dumps({"launches": launches, "skipped": fresh["skipped"], "space_cap": SPACE_CAP,
                                         "transfer_models": models}, indent=1) + "\n")
    print(f"{len(launches)} launches ({sum(p['set'] == 'fresh' for p in launches)} fresh) -> {HELD_OUT_PLAN}")


def plan_library(library: str) -> None:
    """data/advice_gpu_held_out/plan_LIBRARY.json: a held-out library's launches (one per kernel, those with
    an autotune list of >= 3 configs first, LIBRARY_LAUNCHES at most; not those whose held-out ceiling
    evaluation errored) with the shipped transfer model, which never saw the library (section 36)."""
    errored = set()
    ceilings = DATA / "ceilings_held_out.jsonl"
    for line in ceilings.read_text().splitlines() if ceilings.exists() else []:
        r = json.loads(line)
        if "error" in r:
            errored.add(r["launch_id"])
    first: dict[str, Case] = {}
    for case in load_cases(library):
        if case.kernel not in first and case.id not in errored:
            first[case.kernel] = case
    listed = lambda c: len(c.extras.get("variants") or [])  # noqa: E731
    order = sorted(first.values(), key=lambda c: (listed(c) < 3, c.index))[:LIBRARY_LAUNCHES]
    chosen = [{"library": library, "index": c.index, "launch_id": c.id, "kernel": c.kernel,
               "autotune_configs": listed(c), "set": "held-out library"} for c in order]
    shipped = os.path.relpath(ROOT / "advisor" / "model" / "models" / "transfer", HELD_OUT)
    target = HELD_OUT / f"plan_{library}.json"
    target.write_text(json.dumps({"launches": chosen, "skipped": [], "space_cap": SPACE_CAP,
                                  "transfer_models": {library: shipped}}, indent=1) + "\n")
    print(f"{len(chosen)} launches of {library}, {sum(c['autotune_configs'] >= 3 for c in chosen)} with an autotune "
          f"list of >= 3 -> {target}")


def planned(only: str | None = None) -> list[Case]:
    """The planned launches; `only`: some of them by position in the plan ("3,9,18", a trial)."""
    doc = json.loads(plan_file().read_text())
    cases = {lib: {c.index: c for c in load_cases(lib)} for lib in {p["library"] for p in doc["launches"]}}
    out = [cases[p["library"]][p["index"]] for p in doc["launches"]]
    return [out[int(i)] for i in only.split(",")] if only else out


def one_launch_trace(case: Case, folder: Path) -> Path:
    """The launch alone in a trace, with the contents of its small integer tensors where the capture kept
    them (as `advisor record` now writes them, `TensorArg.values`), so that `suggest --measure` runs the
    kernel on the data this check's timing process gives it (replay.make_tensors)."""
    trace = read_json(DATA / "traces" / f"{case.library}.json")
    values = case.extras.get("values") or {}
    trace["launches"] = [with_recorded_values(e, values) for e in with_autotune_group(case)]
    trace.pop("autotune_groups", None)
    if len(trace["launches"]) > 1:
        trace["autotune_groups"] = [list(range(len(trace["launches"])))]
    path = folder / f"{case.library}-{case.id}.json"
    path.write_text(json.dumps(trace))
    return path


def with_autotune_group(case: Case) -> list[dict]:
    """The launch, then for an autotuned one the launch each other config of its (pruned) list makes, with
    the grid and constexprs the capture got from the library's host code: the autotune group `advisor
    record` writes on a GPU (docs/trace.md), so that `suggest` ranks those configs on their host grids."""
    entry = case.entry
    if len(case.extras.get("variants") or []) <= 1:
        return [entry]
    rank = len(entry["grid"])
    out = [entry]
    for v in case.variants(limit=10_000):
        # the recorder files a name under config or constexprs alike for every launch of one autotuned call;
        # the capture's list may set constexprs the recorded launch filed as such (GemLite's EVEN_K)
        config = {k: x for k, x in v.config.items() if k in entry["config"]}
        if v.recorded or config == entry["config"]:  # the launch itself (the list's copy of it too)
            continue
        grid = v.grid[:rank] if all(g == 1 for g in v.grid[rank:]) else v.grid
        consts = {**{k: x for k, x in v.config.items() if k not in entry["config"]}, **v.constexprs}
        out.append({**entry, "config": config, "grid": grid, "constexprs": consts, "count": 1})
    return out


def with_recorded_values(entry: dict, values: dict) -> dict:
    """`entry` with each integer tensor that `values` (name -> nested list in the tensor's shape, as the
    corpus capture kept it) holds given `values`: element i at the data pointer + i, over the strides' span."""
    import itertools

    from ceilings.launch import _INTEGER_BYTES, MAX_VALUES_BYTES

    tensors = []
    for t in entry.get("tensors", []):
        nested = values.get(t["name"])
        span = 1 + sum((n - 1) * st for n, st in zip(t["shape"], t["stride"]) if n > 0)
        if (nested is None or t["dtype"] not in _INTEGER_BYTES or t.get("block_shape") is not None
                or span * _INTEGER_BYTES[t["dtype"]] > MAX_VALUES_BYTES or min(t["stride"], default=0) < 0):
            tensors.append(t)
            continue
        flat = [0] * span
        for index in itertools.product(*(range(n) for n in t["shape"])):
            item = nested
            for i in index:
                item = item[i]
            flat[sum(i * st for i, st in zip(index, t["stride"]))] = int(item)
        tensors.append({**t, "values": flat})
    return {**entry, "tensors": tensors}


# ------------------------------------------------------------------------------------------ suggest
def bounded_run(command: list[str], limit_s: float, **kw) -> subprocess.CompletedProcess:
    """subprocess.run(command, timeout=limit_s) in its own session, whose whole process group is killed
    when the limit passes: a stopped `suggest` or warm step must not leave its compile workers running
    (in section 34b three such leftovers of a stopped call ran on into the next)."""
    import signal

    with subprocess.Popen(command, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, **kw) as proc:
        try:
            out, err = proc.communicate(timeout=limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise subprocess.TimeoutExpired(command, limit_s, out, err) from None
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def run_suggest(case: Case, trace: Path, measure: int, work: Path, workers: int, limit_s: float = 240.0) -> dict:
    """`advisor suggest` as a user runs it on the launch's trace; its JSON, exit code and stderr. With the
    plan's transfer model for the launch's library (one fitted without it) where the plan names one; a
    run past `limit_s` is stopped and recorded as "timeout" (a failure of the product on that launch)."""
    cache = work / f"cache-{case.id}-m{measure}"
    env = dict(os.environ, TRITON_ADVISOR_CACHE=str(cache), TRITON_ADVISOR_WORKERS=str(workers))
    model = plan_models().get(case.library)
    if model is not None:
        env["TRITON_ADVISOR_TRANSFER_MODEL"] = str(model)
    command = [sys.executable, "-m", "advisor.cli", "suggest", str(trace), "--format", "json"]
    if measure:
        command += ["--measure", str(measure)]
    t0 = time.time()
    try:
        p = bounded_run(command, limit_s, cwd=ROOT, env=env)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as exc:
        rc, out, err = "timeout", exc.stdout or "", f"ran past {limit_s:.0f} s: " + (exc.stderr or "")[-2000:]
    row = {"library": case.library, "launch_id": case.id, "index": case.index, "kernel": case.kernel,
           "measure": measure, "rc": rc, "wall_s": round(time.time() - t0, 1), "stderr": err.strip()[-1500:],
           "transfer_model": model.name if model is not None else "shipped"}
    try:
        (d,) = json.loads(out)["launches"]
        keep = ("current", "best", "speedup", "why", "considered", "pruned", "measured", "basis", "caveats",
                "notes", "cannot_run")
        row.update({k: d.get(k) for k in keep})
        row["ranked"] = [{"config": c["config"], "predicted_us": c["predicted_us"], "measured_us": c["measured_us"]}
                         for c in d.get("ranked", [])]
    except (ValueError, TypeError, KeyError) as exc:
        row["parse_error"] = f"{type(exc).__name__}: {out[:300]}"
    return row


# ------------------------------------------------------------------------------------------ variants
def variant_list(case: Case, trace: Path, suggestions: list[dict]) -> tuple[list[tuple[Variant, list[str]]], str]:
    """(variant, roles) to time for a launch, the own config first; and where its space came from."""
    from advisor.advice.subjects import LaunchSubject
    from advisor.advice.suggest import trace_subjects
    from ceilings.launch import Config

    listed = case.variants(limit=10_000)
    subject = trace_subjects(trace)[0]
    if len(case.extras.get("variants") or []) > 1:
        space, source = listed, "autotune list (host grids)"
    else:
        space, source = [from_rule(subject, c) for c in subject.space()], "suggest's space (product's launch rule)"
    own = listed[0]
    picked: dict[str, tuple[Variant, list[str]]] = {own.label: (own, ["own"])}
    for s in suggestions:  # the suggested configs: the space's variant when it has one, else the product's rule
        cfg = s.get("best", {}).get("config") if s.get("best") else None
        if cfg is None:
            continue
        role = "measure4" if s["measure"] else "suggested"
        # the library's heuristics add constexprs to a config (GemLite's EVEN_K): a variant that sets every
        # value of the suggested config is that config, launched as the host launches it
        match = next((v for v in [own, *space] if same_config(cfg, v.config)), None)
        if match is None and isinstance(subject, LaunchSubject):
            match = from_rule(subject, Config.from_dict(cfg))
            match.extra = {**match.extra, "from_rule": True}
        if match is not None:
            picked.setdefault(match.label, (match, []))[1].append(role)
    for v in space:
        if len([1 for _, roles in picked.values() if "space" in roles]) >= SPACE_CAP:
            break
        picked.setdefault(v.label, (v, []))[1].append("space")
    return list(picked.values()), source


def same_config(suggested: dict, launched: dict) -> bool:
    """Whether a launched config is the suggested one: the same value for each of its keys, and for the
    launched config's others only constexprs a heuristic sets beside the tuned ones (not in the suggestion)."""
    return all(k in launched and launched[k] == v for k, v in suggested.items())


def from_rule(subject, config) -> Variant:
    """A config of the product's space as a replay variant: grid and scalars from its launch rule."""
    launch = subject.launch_for(config)
    cfg = config.to_dict()
    consts = {k: v for k, v in dict(launch.constexprs).items() if k not in cfg}
    return Variant(cfg, _grid3(launch.grid), consts, extra={"scalars": dict(launch.scalars)})


def variants_json(case: Case, trace: Path, suggestions: list[dict]) -> dict:
    try:
        items, source = variant_list(case, trace, suggestions)
    except Exception as exc:  # noqa: BLE001 - recorded, the launch is then timed on its own config only
        own = case.recorded_variant()
        return {"source": f"error: {type(exc).__name__}: {str(exc)[:200]}",
                "variants": [{"config": own.config, "grid": own.grid, "constexprs": own.constexprs, "extra": {},
                              "recorded": True, "roles": ["own"]}]}
    return {"source": source, "variants": [{"config": v.config, "grid": v.grid, "constexprs": v.constexprs,
                                            "extra": v.extra, "recorded": v.recorded, "roles": roles}
                                           for v, roles in items]}


def _variant(d: dict) -> Variant:
    return Variant(d["config"], d["grid"], d["constexprs"], d["recorded"], dict(d["extra"]))


def _case_for(case: Case, v: Variant) -> tuple[Case, Variant]:
    """The case and variant as replay.runner takes them: scalars from the product's rule where it set them."""
    extra = {k: x for k, x in v.extra.items() if k in ("num_ctas", "maxnreg")}
    scalars = v.extra.get("scalars")
    entry = {**case.entry, "scalars": scalars} if scalars is not None else case.entry
    return Case(case.library, case.index, entry, case.extras), Variant(v.config, v.grid, v.constexprs, v.recorded,
                                                                       extra)


def warm_worker(cases: list[Case], folder: Path) -> None:
    """Compile every variant of the given launches into Triton's cache (as measure.compile_worker does)."""
    import torch
    from replay import arguments, kernel_function, make_tensors

    for case in cases:
        path = folder / f"{case.library}-{case.id}.variants.json"
        for d in json.loads(path.read_text())["variants"]:
            try:
                c, v = _case_for(case, _variant(d))
                fn = kernel_function(c)
                tensors = {}
                for t in c.entry.get("tensors", []):
                    if t.get("block_shape") is not None:
                        tensors.update(make_tensors(Case(c.library, c.index, {"tensors": [t]}, {})))
                    else:
                        tensors[t["name"]] = torch.empty(16, dtype=getattr(torch, t["dtype"]), device="cuda")
                fn.warmup(grid=tuple(v.grid), **arguments(fn, c, v, tensors))
            except Exception as exc:  # noqa: BLE001 - the timing process records it
                print(f"warm fail {case.kernel} {json.dumps(d['config'])}: {type(exc).__name__}", flush=True)


# ------------------------------------------------------------------------------------------ timing
TIMING_COLUMNS = ["library", "launch_id", "index", "kernel", "config", "roles", "from_rule", "grid", "status", "us",
                  "us_first", "us_second", "min_us", "max_us", "launches_per_sample", "replays", "rel_err",
                  "int_mismatch", "note"]


def time_config(go) -> dict:
    """One config's timing: the median of 20 CUDA-graph replays, each of as many launches as fill SAMPLE_US
    (at most MAX_PER_GRAPH; measure.time_one's 20 left a 3 us launch's samples at 60 us, where the graph's
    own start-up is part of the time)."""
    from advisor.measure.timing import one_launch_us, time_launch

    single = one_launch_us(go, least_us=0.5)
    per_graph = int(min(MAX_PER_GRAPH, max(1, round(SAMPLE_US / single))))
    t = time_launch(go, launches_per_graph=per_graph, replays=20, warmup=2)
    return {"us": t.us, "min_us": f"{t.min_us:.3f}", "max_us": f"{t.max_us:.3f}",
            "launches_per_sample": t.launches_per_sample, "replays": t.replays}


def time_launches(cases: list[Case], folder: Path, writer, fh, deadline: float, tol: float = 5e-2) -> None:
    """Per launch: every config checked against the own config's result and timed, the own config timed
    again last (the noise); then a second pass over the configs that ran, in reverse order, times each
    again: a config's `us` is the faster of its two timings (an upward outlier of one timing, a clock
    that had not ramped, does not decide; RESULTS 21c's 17.5 us own config of a 2.2 us launch)."""
    import torch
    from measure import _base, compare, mismatch_note
    from replay import accumulated, kernel_function, make_tensors, runner

    for case in cases:
        if time.time() > deadline:
            log_line(f"timing: deadline reached before {case.kernel}")
            return
        (folder / "inflight").write_text(case.id)
        began = time.time()
        spec = json.loads((folder / f"{case.library}-{case.id}.variants.json").read_text())
        items = [(_variant(d), d["roles"]) for d in spec["variants"]]
        items.append((items[0][0], ["own-repeat"]))
        row0 = {"library": case.library, "launch_id": case.id, "index": case.index, "kernel": case.kernel}
        try:
            fn = kernel_function(case)
            zeroed = accumulated(case)
            pristine, work = make_tensors(case, zeroed=zeroed), make_tensors(case, zeroed=zeroed)
        except Exception as exc:  # noqa: BLE001
            writer.writerow({**row0, "config": items[0][0].label, "roles": "own", "status": "error",
                             "note": f"setup: {type(exc).__name__}: {str(exc)[:200]}"})
            continue
        reference: dict = {}
        rows, timed = [], []
        for v, roles in items:
            row = {**row0, "config": v.label, "roles": "+".join(roles), "grid": v.grid,
                   "from_rule": int(bool(v.extra.get("from_rule")))}
            try:
                for name, t in pristine.items():
                    _base(work[name]).untyped_storage().copy_(_base(t).untyped_storage())
                c, rv = _case_for(case, v)
                go = runner(fn, c, rv, work)
                go()
                torch.cuda.synchronize()
                if not reference:
                    reference = {name: _base(t).clone() for name, t in work.items()}
                    ok, err, mismatch = True, 0.0, 0.0
                else:
                    ok, err, mismatch = compare(work, reference, tol)
                row.update(rel_err=f"{err:.3g}", int_mismatch=f"{mismatch:.3g}")
                if ok:
                    row.update(time_config(go), status="ok")
                    timed.append((row, go))
                else:
                    row.update(status="wrong", note=mismatch_note(work, reference))
            except Exception as exc:  # noqa: BLE001
                first = str(exc).splitlines()[0][:200] if str(exc) else ""
                row.update(status="error", note=f"{type(exc).__name__}: {first}")
                torch.cuda.synchronize()
            rows.append(row)
            if not reference:  # the own config did not run: nothing to check the others against
                break
        for row, go in reversed(timed):
            row["us_first"] = row["us"]
            try:
                row["us_second"] = time_config(go)["us"]
                row["us"] = min(row["us_first"], row["us_second"])
            except Exception as exc:  # noqa: BLE001 - it ran once: its first time stands
                row["note"] = f"second timing: {type(exc).__name__}"
                torch.cuda.synchronize()
        for row in rows:
            for k in ("us", "us_first", "us_second"):
                if isinstance(row.get(k), float):
                    row[k] = f"{row[k]:.3f}"
            writer.writerow(row)
        fh.flush()
        log_line(f"timing: {case.kernel} ({case.id}): {sum(r.get('status') == 'ok' for r in rows)} of {len(rows)} "
                 f"configs ran, {time.time() - began:.0f} s")
        del pristine, work, reference, timed
        torch.cuda.empty_cache()
        (folder / "inflight").unlink()


def timing_process(only: str | None, folder: Path, deadline: float) -> None:
    """Step 3 in its own process: the variants with both suggestions, then every launch timed."""
    cases = interleaved(planned(only))
    rows = {}
    for line in (out_dir() / "advice_gpu_suggest.jsonl").read_text().splitlines():
        r = json.loads(line)
        rows.setdefault(r["launch_id"], []).append(r)
    path = out_dir() / "advice_gpu_timings.csv"
    done = set()
    if path.exists():  # a timing process died: go on after the launches it finished
        with open(path, newline="") as f:
            done = {r["launch_id"] for r in csv.DictReader(f)}
    new = not path.exists()
    with open(path, "a", newline="") as fh:
        writer = csv.DictWriter(fh, TIMING_COLUMNS)
        if new:
            writer.writeheader()
        crashed = folder / "inflight"
        if crashed.exists():
            case = next(c for c in cases if c.id == crashed.read_text())
            writer.writerow({"library": case.library, "launch_id": case.id, "index": case.index, "kernel": case.kernel,
                             "roles": "own", "status": "crashed", "note": "the timing process died during this launch"})
            done.add(case.id)
            crashed.unlink()
        # a launch whose suggest the deadline did not start is timed in the call that runs it (--resume)
        started = {lid for lid, rs in rows.items() if any(r["measure"] == 0 and not str(r["rc"]).startswith("not run")
                                                          for r in rs)}
        todo = [c for c in cases if c.id not in done and c.id in started]
        for case in todo:  # the measure-4 choice joins the variants the warm workers compiled
            spec_path = folder / f"{case.library}-{case.id}.variants.json"
            spec = json.loads(spec_path.read_text()) if spec_path.exists() else None
            m4 = [r for r in rows.get(case.id, []) if r["measure"] and r.get("best")]
            found = spec and all(any(v["config"] == r["best"]["config"] for v in spec["variants"]) for r in m4)
            if found:
                for r in m4:
                    next(v for v in spec["variants"] if v["config"] == r["best"]["config"])["roles"].append("measure4")
            else:
                spec = variants_json(case, folder / f"{case.library}-{case.id}.json", rows.get(case.id, []))
            spec_path.write_text(json.dumps(spec))
        time_launches(todo, folder, writer, fh, deadline)
    sources = {c.id: json.loads((folder / f"{c.library}-{c.id}.variants.json").read_text())["source"] for c in cases
               if (folder / f"{c.library}-{c.id}.variants.json").exists()}
    (out_dir() / "advice_gpu_spaces.json").write_text(json.dumps(sources, indent=1))


# ------------------------------------------------------------------------------------------ device
def log_line(text: str) -> None:
    """A progress line on stdout and in $OUT/advice_gpu_stamps.txt (a file survives what stdout may not)."""
    print(text, flush=True)
    with open(out_dir() / "advice_gpu_stamps.txt", "a") as fh:
        fh.write(f"{time.strftime('%H:%M:%S')} {text}\n")


def environment() -> dict:
    import datetime
    import importlib.metadata as md

    import torch
    import triton

    def version(name):
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            return None

    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "python": sys.version.split()[0],
            "packages": {n: version(n) for n in ("liger-kernel", "flag-gems", "fla-core", "gemlite", "torchao",
                                                 "xgboost")}}


def interleaved(cases: list[Case]) -> list[Case]:
    """The libraries in turn, so that a deadline cuts launches of every library alike."""
    by_lib = [[c for c in cases if c.library == lib] for lib in ALL_LIBRARIES]
    return [c for group in zip_longest(*by_lib) for c in group if c is not None]


NOT_STARTED = "not run (device deadline)"


def resumed(folder: Path | None, remeasure: bool = False,
            redo: set[str] = frozenset()) -> tuple[list[dict], Path | None]:
    """A cut run's `suggest` rows that ended (exit code, or past their limit: not run again) and its
    timings file, to go on from in another call; rows its deadline did not start are run again. With
    `remeasure`, its `suggest --measure` rows that shared the GPU with others (measure_jobs > 1, or not
    recorded) are run again too: their timings were disturbed (RESULTS 34b). Both `suggest` rows of the
    launches in `redo` (ids) are run again: the product changed for them (their timings are kept; a new
    choice they did not time is timed, `untimed_picks`)."""
    if folder is None:
        return [], None
    rows = [json.loads(x) for x in (folder / "advice_gpu_suggest.jsonl").read_text().splitlines()]
    timings = folder / "advice_gpu_timings.csv"
    shared = [r for r in rows if remeasure and r["measure"] and r.get("measure_jobs", 2) != 1]
    return ([r for r in rows if not str(r["rc"]).startswith("not run") and r not in shared
             and r["launch_id"] not in redo],
            timings if timings.exists() else None)


def untimed_picks(rows: list[dict], timings: list[dict]) -> set[str]:
    """Launches already timed whose `suggest` choice (with or without `--measure`) in `rows` is none of their
    timed configs (a run made again after the timing): their timings are dropped, so that the timing process
    times the launch again whole, the new choice with its own and best configs in one run."""
    timed: dict[str, list[dict]] = {}
    for t in timings:
        if t["config"] and t["roles"] != "own-repeat":
            timed.setdefault(t["launch_id"], []).append(json.loads(t["config"]))
    out = set()
    for r in rows:
        best = (r.get("best") or {}).get("config")
        if best and r["launch_id"] in timed and not any(same_config(best, c) for c in timed[r["launch_id"]]):
            out.add(r["launch_id"])
    return out


def device(only: str | None, suggest_jobs: int, measure_jobs: int, warm_jobs: int, budget: float,
           plain_from: str | None = None, suggest_limit: float = 150.0, resume: Path | None = None,
           remeasure: bool = False, timing_reserve: float = TIMING_RESERVE, redo: str | None = None) -> None:
    """Step 1 and 2 overlapped: each launch's `suggest` (no measurement), then its `suggest --measure 4`
    (at most `measure_jobs` at once: they time on the GPU) and the compiles of its variants (CPU); then the
    timing process alone on the GPU, with what is left of `budget` seconds. Each `suggest` run is stopped
    after `suggest_limit` s; none starts after `timing_reserve` s before the budget's end. `resume`: a cut
    run's output folder (its files carried in): its finished `suggest` runs and timed launches are kept,
    the rest run here (a launch timed there is not timed again); with `remeasure`, its `--measure` runs that
    shared the GPU run again too, launches still untimed first (`resumed`, `untimed_picks`)."""
    start = time.time()
    folder = Path(os.environ.get("ADVICE_WORK", "/tmp/advice_gpu"))
    (folder / "warm-cache").mkdir(parents=True, exist_ok=True)
    out_dir().mkdir(parents=True, exist_ok=True)
    (out_dir() / "advice_gpu_env.json").write_text(json.dumps(environment(), indent=1) + "\n")
    cases = interleaved(planned(only))
    traces = {c.id: one_launch_trace(c, folder) for c in cases}
    log = out_dir() / "advice_gpu_suggest.jsonl"
    kept, kept_timings = resumed(resume, remeasure, {c.id for c in planned(redo)} if redo else frozenset())
    log.write_text("".join(json.dumps(r) + "\n" for r in kept))
    timings_out = out_dir() / "advice_gpu_timings.csv"
    if kept_timings is not None and kept_timings.resolve() != timings_out.resolve():
        timings_out.write_text(kept_timings.read_text())  # the timing process goes on after its launches
    elif kept_timings is None:
        timings_out.unlink(missing_ok=True)  # a fresh run: no launch resumed
    timed_before = {r["launch_id"] for r in csv.DictReader(open(timings_out, newline=""))} if kept_timings else set()
    (folder / "inflight").unlink(missing_ok=True)
    lock = threading.Lock()
    measure_until = start + budget - timing_reserve
    done_rows = {(r["launch_id"], r["measure"]): r for r in kept}
    cases = [c for c in cases if not ((c.id, 0) in done_rows and (c.id, MEASURE) in done_rows
                                      and c.id in timed_before)]
    cases.sort(key=lambda c: c.id in timed_before)  # launches with no timing first (stable: interleaved kept)

    def stamp(what):
        log_line(f"[{time.time() - start:6.0f} s] {what}")

    def keep(row):
        with lock, open(log, "a") as fh:
            fh.write(json.dumps(row) + "\n")
        stamp(f"{row['kernel']} suggest{' --measure 4' if row['measure'] else ''}: exit {row['rc']} "
              f"({row['wall_s']} s) -> {(row.get('best') or {}).get('label')}")

    plain_rows = {lid: r for (lid, m), r in done_rows.items() if m == 0}
    if plain_from:  # a later part of a run: the suggestions without measurement come from the first part
        for line in Path(plain_from).read_text().splitlines():
            r = json.loads(line)
            if r["measure"] == 0:
                plain_rows[r["launch_id"]] = r

    def not_run(case, measure, why=NOT_STARTED):
        return {"library": case.library, "launch_id": case.id, "index": case.index, "kernel": case.kernel,
                "measure": measure, "rc": why, "wall_s": 0, "stderr": ""}

    def measured(case, plain_rc):
        if (case.id, MEASURE) in done_rows:
            return
        if plain_rc == "timeout":  # the same search, and the timings on top: it would run past its limit too
            row = not_run(case, MEASURE, "not run (suggest without measurement ran past its limit)")
        elif time.time() > measure_until:
            row = not_run(case, MEASURE)
        else:
            row = run_suggest(case, traces[case.id], MEASURE, folder, 2,
                              min(suggest_limit, max(10.0, measure_until + 60 - time.time())))
            row["measure_jobs"] = measure_jobs  # how many such runs shared the GPU (their timings' reliability)
        keep(row)

    def warmed(case):  # compiles ahead of the timing process, which compiles what is missing itself:
        # stopped when the timing reserve begins, so that the timing process always gets it
        try:
            began = time.time()
            bounded_run([sys.executable, __file__, "warm", "--ids", case.id], max(1.0, measure_until - time.time()),
                        cwd=ROOT)
            stamp(f"{case.kernel}: warm compiles done ({time.time() - began:.0f} s)")
        except subprocess.TimeoutExpired:
            stamp(f"{case.kernel}: warm compiles stopped at the timing reserve")

    with ThreadPoolExecutor(measure_jobs) as measure_pool, ThreadPoolExecutor(warm_jobs) as warm_pool:
        def plain(case):
            row = plain_rows.get(case.id)
            ran_here = row is None
            if row is None:
                late = time.time() > measure_until
                row = not_run(case, 0) if late else run_suggest(case, traces[case.id], 0, folder, 3, suggest_limit)
                keep(row)
            elif (case.id, 0) not in done_rows:  # --plain-from: the first part's row, recorded in this part
                keep(row)
            if str(row["rc"]).startswith("not run"):
                keep(not_run(case, MEASURE))
                return ()
            if (not ran_here and (case.id, MEASURE) not in done_rows and time.time() < measure_until
                    and row["rc"] != "timeout"):
                # its plain suggest ran in an earlier call: the same search again, result unused, fills this
                # machine's compile cache in parallel so that the one-at-a-time --measure run mostly times
                run_suggest(case, traces[case.id], 0, folder / "warm-cache", 3, suggest_limit)
            spec = variants_json(case, traces[case.id], [row])
            (folder / f"{case.library}-{case.id}.variants.json").write_text(json.dumps(spec))
            if case.id in timed_before:  # timed in the resumed run: compiled again only if its timing is dropped
                return (measure_pool.submit(measured, case, row["rc"]),)
            return measure_pool.submit(measured, case, row["rc"]), warm_pool.submit(warmed, case)

        with ThreadPoolExecutor(suggest_jobs) as pool:
            futures = [f for pair in pool.map(plain, cases) for f in pair]
        stamp("suggest (no measurement) done for every launch")
        for f in futures:
            f.result()
    stamp("suggest --measure 4 and the compiles done")
    if timed_before:
        rows = [json.loads(x) for x in log.read_text().splitlines()]
        with open(timings_out, newline="") as f:
            timing_rows = list(csv.DictReader(f))
        again = untimed_picks(rows, timing_rows)
        if again:
            stamp(f"timed again whole (the new --measure choice was not timed): {len(again)} launches")
            with open(timings_out, "w", newline="") as f:
                writer = csv.DictWriter(f, TIMING_COLUMNS)
                writer.writeheader()
                writer.writerows(r for r in timing_rows if r["launch_id"] not in again)
    for _attempt in range(4):  # a launch that kills the process is recorded as crashed; the others go on
        left = budget - (time.time() - start)
        if left < 20:
            break
        done = subprocess.run([sys.executable, __file__, "time", *(["--only", only] if only else []),
                               "--deadline", str(left - 10)], cwd=ROOT)
        stamp(f"timing process exit {done.returncode}")
        if done.returncode == 0:
            break
    analyze(out_dir())


def warm(ids: list[str]) -> None:
    folder = Path(os.environ.get("ADVICE_WORK", "/tmp/advice_gpu"))
    warm_worker([c for c in planned() if c.id in ids], folder)


# ------------------------------------------------------------------------------------------ analyze
def _label(config: dict | None) -> str | None:
    return None if config is None else json.dumps(config, sort_keys=True)


def _close_call(r: dict) -> bool:
    return any("within the model's error" in n for n in (r.get("notes") or []))


def launch_outcome(plain: dict, timed: dict, rows: list[dict]) -> dict:
    """One launch: what suggest said, and the measured times of its choices against the own and best config.

    Three choices: `suggested` is the config `suggest` names best without measurement; `followed` is what
    a user following its words runs: the own config where it says the gain is within the model's error
    and recommends --measure (a close call), else the suggested one; `measure4` is `suggest --measure 4`'s."""
    own = next((r for r in rows if r["roles"].split("+")[0] == "own"), None)
    repeat = next((r for r in rows if r["roles"] == "own-repeat"), None)
    ok = {r["config"]: float(r["us"]) for r in rows if r["status"] == "ok" and r["roles"] != "own-repeat"}
    out = {k: plain[k] for k in ("library", "launch_id", "index", "kernel")}
    out["timed"] = int(bool(rows))  # no row at all: the timing process never reached this launch
    out["own_config"] = own["config"] if own else None
    out["own_us"] = ok.get(own["config"]) if own else None
    out["own_repeat_us"] = float(repeat["us"]) if repeat and repeat["status"] == "ok" else None
    out["space_timed"] = sum(1 for r in rows if "space" in r["roles"].split("+") and r["status"] == "ok")
    out["space_wrong_or_error"] = sum(1 for r in rows if "space" in r["roles"].split("+") and r["status"] != "ok")
    out["best_us"] = min(ok.values()) if ok else None
    out["best_config"] = min(ok, key=ok.get) if ok else None
    out["close_call"] = int(_close_call(plain))

    def measured(label: str) -> tuple[float | None, str | None]:
        if out["own_us"] is None:
            return None, "the own config did not run in the timing process"
        if label == out["own_config"]:
            return out["own_us"], None
        wanted = json.loads(label)
        matches = [x for x in rows if x["roles"] != "own-repeat" and x["config"]
                   and same_config(wanted, json.loads(x["config"]))]
        # the config as the library's host code launches it (its grid), before the product's launch rule
        row = min(matches, key=lambda x: (x["from_rule"] == "1", x["status"] != "ok"), default=None)
        if row is None:
            return None, "the suggested config was not timed (deadline)"
        if row["status"] != "ok":
            return None, f"the suggested config is {row['status']} when run: {row['note'] or row['rel_err']}"
        return float(row["us"]), None

    failures = []
    for tag, r in (("suggested", plain), ("followed", plain), ("measure4", timed)):
        best = (r.get("best") or {}).get("config")
        label = out["own_config"] if tag == "followed" and out["close_call"] else _label(best)
        out[f"{tag}_config"] = label
        out[f"{tag}_changed"] = int(label is not None and label != out["own_config"])
        if r["rc"] not in (0, 1) or best is None:
            us, problem = None, (f"suggest{' --measure 4' if r['measure'] else ''} failed (exit {r['rc']}): "
                                 + (r.get("stderr") or r.get("parse_error") or "")[-300:])
        else:
            us, problem = measured(label)
        out[f"{tag}_us"] = us
        out[f"{tag}_vs_own"] = None if us is None or not out["own_us"] else round(us / out["own_us"], 4)
        out[f"{tag}_vs_best"] = None if us is None or not out["best_us"] else round(us / out["best_us"], 4)
        if problem and (tag != "followed" or not failures or problem not in failures[-1]):
            failures.append(f"{tag}: {problem}")
    out["suggest_rc"], out["measure4_rc"] = plain["rc"], timed["rc"]
    out["speedup_claimed"] = plain.get("speedup")
    out["why"] = plain.get("why")
    out["measure4_basis"] = timed.get("basis")
    out["measure4_timed_by_product"] = timed.get("measured")
    # The product's own timing of the own config in its --measure run, against this check's: runs that time
    # at the same moment on one GPU (--measure-jobs > 1) can disagree with the check's lone timing.
    own_cfg = json.loads(out["own_config"]) if out["own_config"] else None
    product_own = next((c["measured_us"] for c in timed.get("ranked") or [] if own_cfg and c.get("measured_us")
                        and same_config(c["config"], own_cfg) and same_config(own_cfg, c["config"])), None)
    out["measure4_own_us_by_product"] = product_own
    out["failures"] = " | ".join(failures)
    return out


def product_vs_check(runs: dict[str, dict], timings: list[dict]) -> dict[str, list[float]]:
    """Per config timed both by a `suggest --measure` run and by this check's timing process (alone on the
    GPU): the product's time / the check's, grouped by how many --measure runs shared the GPU."""
    out: dict[str, list[float]] = {}
    for lid, pair in runs.items():
        r = pair.get(MEASURE) or {}
        check = {}
        for t in timings:
            if t["launch_id"] == lid and t["config"] and t["status"] == "ok" and t["roles"] != "own-repeat":
                check.setdefault(_label(json.loads(t["config"])), float(t["us"]))
        for c in r.get("ranked") or []:
            us = check.get(_label(c["config"]))
            if c.get("measured_us") and us:
                out.setdefault(str(r.get("measure_jobs", "?")), []).append(c["measured_us"] / us)
    return out


def _share(values: list[bool]) -> str:
    return f"{sum(values)}/{len(values)} ({sum(values) / len(values):.0%})" if values else "-"


def analyze(folder: Path, write: Path | None = None) -> dict:
    write = write or folder
    runs: dict[str, dict] = {}
    timings: list[dict] = []
    # a run's first part, then its later parts (_part2, ...: launches it did not finish, run again whole)
    for part in ["", *sorted(p.stem.split("_")[-1] for p in folder.glob("advice_gpu_timings_part*.csv"))]:
        tag = f"_{part}" if part else ""
        for line in (folder / f"advice_gpu_suggest{tag}.jsonl").read_text().splitlines():
            r = json.loads(line)
            runs.setdefault(r["launch_id"], {})[r["measure"]] = r
        with open(folder / f"advice_gpu_timings{tag}.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        # a launch whose configs the later part could not plan (only its own config timed there) keeps
        # the earlier part's timings, which its measure-4 choice is then looked up in
        again = {r["launch_id"] for r in rows if "space" in r["roles"].split("+")}
        timings = [r for r in timings if r["launch_id"] not in again] + [r for r in rows if r["launch_id"] in again]
    outcomes = []
    sets = {p["launch_id"]: p.get("set", "") for p in json.loads(plan_file().read_text())["launches"]}
    for lid, pair in runs.items():
        if 0 in pair and MEASURE in pair:
            o = launch_outcome(pair[0], pair[MEASURE], [r for r in timings if r["launch_id"] == lid])
            outcomes.append({"set": sets.get(lid, ""), "transfer_model": pair[0].get("transfer_model", ""), **o})
    noise = sorted(abs(o["own_repeat_us"] / o["own_us"] - 1) for o in outcomes if o["own_repeat_us"] and o["own_us"])
    tol = noise[int(0.9 * (len(noise) - 1))] if noise else 0.0
    with open(write / "advice_gpu.csv", "w", newline="") as f:
        w = csv.DictWriter(f, list(outcomes[0]))
        w.writeheader()
        w.writerows(outcomes)

    def stats(everything: list[dict]) -> dict:
        # A run the device deadline did not start is no result (a --resume call runs it); one that ran
        # past its limit ("timeout") or failed is a miss.
        # A launch the timing process never reached (its deadline, a killed call) is no result either.
        started = lambda rc: not str(rc).startswith("not run (device")  # noqa: E731
        group = [o for o in everything if started(o["suggest_rc"]) and o["timed"]]
        measured4 = [o for o in group if started(o["measure4_rc"])]
        f_own = [o["followed_vs_own"] for o in group]
        f_best = [o["followed_vs_best"] for o in group]
        s_own = [o["suggested_vs_own"] for o in group]
        s_best = [o["suggested_vs_best"] for o in group]
        m_best = [o["measure4_vs_best"] for o in measured4]
        repeat = sorted(abs(o["own_repeat_us"] / o["own_us"] - 1) for o in group if o["own_repeat_us"] and o["own_us"])
        product = sorted(abs(o["measure4_own_us_by_product"] / o["own_us"] - 1) for o in measured4
                         if o["measure4_own_us_by_product"] and o["own_us"])
        return {"launches": len(group), "not_timed": sum(1 for o in everything if not o["timed"]),
                "not_started": sum(1 for o in everything if not started(o["suggest_rc"])),
                "noise_median": repeat[len(repeat) // 2] if repeat else None, "noise_max": max(repeat, default=None),
                "product_vs_check_median": product[len(product) // 2] if product else None,
                "product_vs_check_over_5pct": f"{sum(x > 0.05 for x in product)}/{len(product)}",
                "measure4_not_started": len(group) - len(measured4),
                "changed": sum(o["suggested_changed"] for o in group),
                "close_call": sum(o["close_call"] for o in group),
                "not_slower_strict": [x is not None and x <= 1.0 for x in f_own],
                "not_slower_noise": [x is not None and x <= 1.0 + tol for x in f_own],
                "within_1.05_best": [x is not None and x <= 1.05 for x in f_best],
                "named_not_slower_strict": [x is not None and x <= 1.0 for x in s_own],
                "named_not_slower_noise": [x is not None and x <= 1.0 + tol for x in s_own],
                "named_within_1.05_best": [x is not None and x <= 1.05 for x in s_best],
                "measure4_within_1.02_best": [x is not None and x <= 1.02 for x in m_best],
                "measure4_within_1.05_best": [x is not None and x <= 1.05 for x in m_best]}

    table = {lib: stats([o for o in outcomes if o["library"] == lib]) for lib in ALL_LIBRARIES}
    for part in sorted({o["set"] for o in outcomes} - {""}):  # the held-out plan's first and fresh launches
        table[f"all, {part} set"] = stats([o for o in outcomes if o["set"] == part])
    table["all"] = stats(outcomes)
    print(f"\nnoise: own config timed twice, |ratio - 1|: median {noise[len(noise) // 2]:.2%}, p90 {tol:.2%} "
          f"(the 'with noise' tolerance)" if noise else "no repeat timings")
    print("| library | launches | suggest names another config | of which close calls | followed: not slower than "
          f"own (1.0x) | (1+{tol:.3f}x) | followed: within 1.05x of best | named config: not slower (1.0x) | "
          f"(1+{tol:.3f}x) | named: within 1.05x | measure 4 within 1.02x of best | measure 4 within 1.05x | "
          "noise: own repeat median / max | product's --measure time of own vs check's: median, over 5% |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    pct = lambda v: "-" if v is None else f"{v:.1%}"  # noqa: E731
    summary = {"noise_p90": tol, "noise": noise, "libraries": {}}
    for lib, st in table.items():
        if not st["launches"]:
            continue
        print(f"| {lib} | {st['launches']} | {st['changed']} | {st['close_call']} | "
              f"{_share(st['not_slower_strict'])} | {_share(st['not_slower_noise'])} | "
              f"{_share(st['within_1.05_best'])} | {_share(st['named_not_slower_strict'])} | "
              f"{_share(st['named_not_slower_noise'])} | "
              f"{_share(st['named_within_1.05_best'])} | "
              f"{_share(st['measure4_within_1.02_best'])} | {_share(st['measure4_within_1.05_best'])} | "
              f"{pct(st['noise_median'])} / {pct(st['noise_max'])} | {pct(st['product_vs_check_median'])}, "
              f"{st['product_vs_check_over_5pct']} |")
        summary["libraries"][lib] = {k: (sum(v) / len(v) if isinstance(v, list) and v else v) for k, v in st.items()}
    summary["failures"] = [{"library": o["library"], "kernel": o["kernel"], "launch_id": o["launch_id"],
                            "what": o["failures"]} for o in outcomes if o["failures"] and o["timed"]]
    for lib, st in table.items():
        if st["not_started"] or st["measure4_not_started"] or st["not_timed"]:
            print(f"{lib}: not counted: {st['not_started']} suggest and {st['measure4_not_started']} suggest "
                  f"--measure 4 not started before the device deadline, {st['not_timed']} launches not timed")
    summary["product_vs_check"] = {}
    for jobs, ratios in sorted(product_vs_check(runs, timings).items()):
        off = sum(abs(x - 1) > 0.05 for x in ratios)
        summary["product_vs_check"][jobs] = {"configs": len(ratios), "off_by_5pct": off, "max": max(ratios)}
        print(f"configs timed by both suggest --measure ({jobs} at once on the GPU) and the check: {len(ratios)}, "
              f"off by > 5%: {off}, product / check up to {max(ratios):.2f}x")
    for f in summary["failures"]:
        print(f"FAIL {f['library']} {f['kernel']}: {f['what'][:300]}")
    (write / "advice_gpu_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["plan", "device", "warm", "time", "analyze"])
    parser.add_argument("--only", help="positions in the plan, e.g. 3,9,18 (a trial)")
    parser.add_argument("--ids", default="")
    parser.add_argument("--fresh", action="store_true", help="plan: the second, fresh set of launches "
                        "(data/advice_gpu_plan_fresh.json; the device step reads it with ADVICE_PLAN=that path)")
    parser.add_argument("--suggest-jobs", type=int, default=5)
    parser.add_argument("--measure-jobs", type=int, default=1,
                        help="`suggest --measure` runs at once on the GPU; more than 1 disturbs their timings "
                             "(RESULTS 34b: 25 of 127 configs off by > 5%%, up to 2.4x, at 4; 0 of 33 at 1)")
    parser.add_argument("--warm-jobs", type=int, default=3)
    parser.add_argument("--budget", type=float, default=420.0, help="seconds for the whole device step")
    parser.add_argument("--deadline", type=float, default=240.0, help="seconds of timing")
    parser.add_argument("--plain-from", help="a first part's advice_gpu_suggest.jsonl: its suggestions without "
                        "measurement are used, not run again (a second part for launches the first did not finish)")
    parser.add_argument("--suggest-limit", type=float, default=150.0,
                        help="seconds one `suggest` run may take; past it, it is stopped and counted as a failure")
    parser.add_argument("--resume", type=Path, help="device: a cut run's output folder (advice_gpu_suggest.jsonl, "
                        "advice_gpu_timings.csv): its finished runs and timed launches are kept, the rest run")
    parser.add_argument("--timing-reserve", type=float, default=TIMING_RESERVE, help="device: seconds at the end "
                        "of the budget that no `suggest` or warm compile starts in (the timing process's)")
    parser.add_argument("--remeasure", action="store_true", help="device, with --resume: run again the resumed "
                        "run's `suggest --measure` runs that shared the GPU (measure_jobs > 1)")
    parser.add_argument("--redo", help="device, with --resume: positions whose `suggest` runs (with and without "
                        "--measure) run again with the product as it is now; their timings are kept")
    parser.add_argument("--held-out", action="store_true", help="plan: data/advice_gpu_held_out/plan.json, the "
                        "first and fresh plans' launches with the transfer models fitted without each library")
    parser.add_argument("--library", help="plan: a held-out library's launches with the shipped transfer model "
                        "(data/advice_gpu_held_out/plan_LIBRARY.json)")
    parser.add_argument("--folder", default=str(DATA), help="analyze: the folder holding one run's advice_gpu_* "
                        "files (default data/; a later run of the whole plan in its own folder)")
    a = parser.parse_args()
    if a.step == "plan":
        if a.library:
            plan_library(a.library)
        else:
            plan_held_out() if a.held_out else plan(a.fresh)
    elif a.step == "device":
        device(a.only, a.suggest_jobs, a.measure_jobs, a.warm_jobs, a.budget, a.plain_from, a.suggest_limit,
               a.resume, a.remeasure, a.timing_reserve, a.redo)
    elif a.step == "warm":
        warm(a.ids.split(","))
    elif a.step == "time":
        timing_process(a.only, Path(os.environ.get("ADVICE_WORK", "/tmp/advice_gpu")), time.time() + a.deadline)
    else:
        analyze(Path(a.folder))


if __name__ == "__main__":
    main()
