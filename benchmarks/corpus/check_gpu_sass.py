"""The generic counts on the GPU machine's own compiles: is a gap to Nsight Compute the counting rules or the compiler?

`check_ncu.py` compares ncu's counts with SASS compiled on this machine (its Triton and ptxas); the GPU ran the
kernels as its own Triton compiled them (3.6.0 for the corpus), whose SASS can differ (registers, spills,
reduction code). This check takes the GPU's compiles instead:

- `compile`, on the GPU machine (corpus wheels in /tmp/site, as `device.sh` installs them): the recorded config
  of every launch in `data/ncu.csv` compiled by a real warmup with the machine's Triton, `--shards` processes
  at once, each into its own cache folder; `$OUT/gpu_sass.json` maps each launch to its cache entries and
  `$OUT/gpu_sass.tar.gz` holds the caches (TTGIR, TTIR, cubin and metadata; no LLVM IR or PTX);
- `compare`, here: each launch's cubin (disassembled with this Triton's `nvdisasm -gi`) and TTGIR through
  `ceilings.demand.generic_demand`, floor and expected, against ncu's per-pipeline counts, cells as in
  `check_ncu.py` (within 10%; cells where both are zero left out); and DRAM bytes read + written, the
  floor's compulsory bytes and `ceilings.dram`'s expected bytes (within 25%).

    python3 benchmarks/corpus/check_gpu_sass.py compile --shards 14          # on the GPU machine
    python benchmarks/corpus/check_gpu_sass.py compare DIR [--workers 2] [--rows ROWS.csv]
                                        # DIR: gpu_sass.json + the tarball (or its caches/ folder)

Prints the tables (and with `--rows` one CSV row per launch, answer and cell); writes nothing into `data/`
(RESULTS 17, 26 and 32 have the figures). `compare` caches each cubin's disassembly beside it
(`*.sass.json`): a cold run of the 188 launches took 5 min 30 s on 2 shared cores, two thirds of it in
`nvdisasm`/`cuobjdump`; warm, the generic demand of each launch is what is left (RESULTS 32).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import multiprocessing
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CELLS = ("tensor", "fma+alu", "xu", "lsu", "fma", "alu")
CACHE_ROOT = "/tmp/corpus_gpu_sass"
DRAM_L2_SHARES = (1.0, 0.5)  # the L2 capacity shares ceilings.dram.L2_SHARE was chosen between (RESULTS 26)


def compile_shard(shard: int, shards: int) -> None:
    """Compile every `shards`-th profiled launch from `shard` into its own Triton cache folder."""
    cache = os.path.join(CACHE_ROOT, f"s{shard}")
    os.makedirs(cache, exist_ok=True)
    os.environ["TRITON_CACHE_DIR"] = cache
    sys.path[:0] = [str(HERE), str(HERE.parents[1]), "/tmp/site"]
    import torch
    from replay import Case, arguments, kernel_function, load_cases, make_tensors

    part = "_held_out" if os.environ.get("CORPUS_HELD_OUT") == "1" else ""  # as check_points.PART, unimported here
    with open(HERE / "data" / f"ncu{part}.csv") as f:
        todo = [(r["library"], r["launch_id"]) for r in csv.DictReader(f)][shard::shards]
    cases: dict[str, dict] = {}
    out = []
    for library, launch_id in todo:
        began = time.time()
        if library not in cases:
            cases[library] = {c.id: c for c in load_cases(library)}
        case = cases[library][launch_id]
        variant = case.recorded_variant()
        before = set(os.listdir(cache))
        row = {"library": library, "launch_id": launch_id, "label": variant.label, "shard": f"s{shard}"}
        try:
            fn = kernel_function(case)
            tensors = {}
            for t in case.entry.get("tensors", []):
                if t.get("block_shape") is not None:  # a TMA descriptor needs its tensor
                    tensors.update(make_tensors(Case(case.library, case.index, {"tensors": [t]}, {})))
                else:  # only the pointer's dtype and alignment specialise the kernel
                    tensors[t["name"]] = torch.empty(16, dtype=getattr(torch, t["dtype"]), device="cuda")
            fn.warmup(grid=tuple(variant.grid), **arguments(fn, case, variant, tensors))
            row["cache"] = sorted(set(os.listdir(cache)) - before)
        except Exception as exc:  # noqa: BLE001 - a launch that does not compile is reported, the rest go on
            row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        row["s"] = round(time.time() - began, 1)
        out.append(row)
    with open(os.path.join(CACHE_ROOT, f"map_{shard}.json"), "w") as f:
        json.dump(out, f)
    print(f"shard {shard}: {len(out)} launches, {sum('error' in r for r in out)} errors", flush=True)


def compile_all(shards: int) -> None:
    procs = [subprocess.Popen([sys.executable, __file__, "shard", str(k), str(shards)]) for k in range(shards)]
    for p in procs:
        p.wait()
    import torch
    import triton

    rows = []
    for name in sorted(os.listdir(CACHE_ROOT)):
        if name.startswith("map_"):
            with open(os.path.join(CACHE_ROOT, name)) as f:
                rows += json.load(f)
    out = Path(os.environ["OUT"])
    with open(out / "gpu_sass.json", "w") as f:
        json.dump({"triton": triton.__version__, "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
                   "launches": rows}, f, indent=0)
    with tarfile.open(out / "gpu_sass.tar.gz", "w:gz") as tar:
        for sub in sorted(os.listdir(CACHE_ROOT)):
            if sub.startswith("s"):
                tar.add(os.path.join(CACHE_ROOT, sub), arcname=sub,
                        filter=lambda t: None if t.name.endswith((".llir", ".ptx", ".source")) else t)
    print(f"{len(rows)} launches, {sum('error' in r for r in rows)} errors")


def _disassembled(cubin: str) -> dict:
    """The cubin's registers, local bytes and SASS listing as the product's compile path reads them
    (`ceilings.compile._resource_usage`: `cuobjdump --dump-resource-usage`, `nvdisasm -c -gi -hex`), cached
    beside the cubin by its content's hash: the two tools took 0.57 s a cubin, two thirds of a cold run."""
    from ceilings.compile import _resource_usage

    data = Path(cubin).read_bytes()
    cached = Path(f"{cubin}.{hashlib.sha1(data).hexdigest()[:16]}.sass.json")
    if cached.exists():
        return json.loads(cached.read_text())
    usage = _resource_usage(data)
    tmp = cached.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(usage))
    tmp.replace(cached)
    return usage


def _compiled(folder: str, kernel: str, triton_version: str):
    """The CompiledKernel of one cache entry's cubin and IR, or None."""
    from ceilings.compile import CompiledKernel

    cubin = os.path.join(folder, f"{kernel}.cubin")
    if not os.path.exists(cubin):
        return None
    base = cubin[:-len(".cubin")]
    with open(base + ".json") as f:
        meta = json.load(f)
    usage = _disassembled(cubin)

    def read(ext: str) -> str:
        return Path(base + ext).read_text() if os.path.exists(base + ext) else ""

    return CompiledKernel(kernel=kernel, arch=90, triton_version=triton_version, num_warps=meta["num_warps"],
                          num_stages=meta["num_stages"], shared_bytes=meta["shared"],
                          registers=usage["registers"], local_bytes=usage["local_bytes"],
                          ttir=read(".ttir"), ttgir=read(".ttgir"), ptx="", sass=usage["sass"], key="gpu",
                          built_on_target=True)  # compiled on the GPU machine: its spill code is what ran


_INFO: dict = {}  # set by compare() before the workers fork: gpu_sass.json, the caches folder, ncu's rows


def _launch_row(row: dict) -> dict:
    """One profiled launch through the generic demand: per cell and answer (ours, ncu's), and DRAM bytes."""
    import check_points as cp

    from ceilings.demand import generic_demand
    from ceilings.dram import expected_dram_bytes
    from ceilings.hardware import get_spec
    from ceilings.launch import Launch
    from ceilings.roofline import occupancy

    out = {"library": row["library"], "launch_id": row["launch_id"]}
    if "error" in row:
        return {**out, "error": row["error"]}
    began = time.time()
    try:
        case = cp.cases()[row["library"]][row["launch_id"]]
        launch = Launch.from_dict(cp.launch_dict(case, case.recorded_variant())[0])
        out["kernel"] = launch.kernel
        compiled = next(filter(None, (_compiled(os.path.join(_INFO["caches"], row["shard"], h), launch.kernel,
                                                _INFO["triton"]) for h in row.get("cache", []))), None)
        if compiled is None:
            return {**out, "error": "no cubin of the kernel in its cache entries"}
        demand = generic_demand(launch, compiled)
    except Exception as exc:  # noqa: BLE001 - a launch that fails is reported, the rest go on
        return {**out, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    spec = get_spec("h100")  # the GPU of data/ncu.csv
    measured = _INFO["ncu"][(row["library"], row["launch_id"])]
    resident = spec.sms * max(occupancy(spec, launch.config.num_warps, compiled.registers, compiled.shared_bytes), 1)
    out["registers_equal"] = str(compiled.registers) == measured["launch__registers_per_thread"]
    out["dram"] = {"ncu": float(measured["dram__bytes_read.sum"] or 0) + float(measured["dram__bytes_write.sum"] or 0),
                   "floor": demand.dram_bytes,
                   **{f"expected x{share:g}": sum(expected_dram_bytes(demand.expected.dram_traffic,
                                                                     spec.l2_bytes * share, resident))
                      for share in DRAM_L2_SHARES}}
    for answer, d in (("floor", demand), ("expected", demand.expected)):
        for cell in CELLS:
            pipes = ("fma", "alu") if cell == "fma+alu" else (cell,)
            out[f"{answer} {cell}"] = (sum(d.instructions(p) for p in pipes),
                                       sum(float(measured[f"sm__inst_executed_pipe_{p}.sum"] or 0) for p in pipes))
    out["s"] = round(time.time() - began, 2)
    return out


def compare(folder: str, workers: int = 1, rows_csv: str | None = None) -> None:
    sys.path.insert(0, str(HERE))
    import check_points as cp

    with open(os.path.join(folder, "gpu_sass.json")) as f:
        info = json.load(f)
    caches = os.path.join(folder, "caches")
    if not os.path.isdir(caches):
        with tarfile.open(os.path.join(folder, "gpu_sass.tar.gz")) as tar:
            tar.extractall(caches, filter="data")
    with open(cp.DATA / f"ncu{cp.PART}.csv") as f:  # CORPUS_HELD_OUT=1: the held-out libraries' profile
        ncu = {(r["library"], r["launch_id"]): r for r in csv.DictReader(f)}
    _INFO.update(triton=info["triton"], caches=caches, ncu=ncu)
    cp.cases()  # read once, before the workers fork
    import ceilings.demand  # noqa: F401 - imported once, before the workers fork
    began = time.time()
    if workers > 1:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            results = pool.map(_launch_row, info["launches"], chunksize=1)
    else:
        results = [_launch_row(row) for row in info["launches"]]
    for r in results:
        if "error" in r:
            print(f"error: {r['library']} {r.get('kernel', r['launch_id'])}: {r['error']}")
    done = [r for r in results if "error" not in r]
    print(f"{len(done)} of {len(results)} launches in {time.time() - began:.0f} s ({workers} worker(s))")
    if rows_csv:
        _write_rows(rows_csv, done)
    for answer in ("floor", "expected"):
        print(f"\n{answer}: the GPU's SASS (Triton {info['triton']}, {info['gpu']}) within 10% of ncu, cells with work")
        print("| library | launches | " + " | ".join(CELLS) + " | registers equal to ncu's |")
        print("|---|---|" + "---|" * (len(CELLS) + 1))
        for library in (*cp.LIBRARIES, "all"):
            mine = [r for r in done if library in ("all", r["library"])]
            cells = []
            for cell in CELLS:
                work = [r[f"{answer} {cell}"] for r in mine if any(r[f"{answer} {cell}"])]
                inside = sum(1 for ours, theirs in work if theirs and abs(ours / theirs - 1) <= 0.1)
                cells.append(f"{inside / len(work):.0%} of {len(work)}" if work else "-")
            equal = sum(r["registers_equal"] for r in mine)
            print(f"| {library} | {len(mine)} | " + " | ".join(cells) + f" | {equal} of {len(mine)} |")
    answers = ["floor", *(f"expected x{share:g}" for share in DRAM_L2_SHARES)]
    print("\nDRAM bytes read + written within 25% of ncu's: the floor's compulsory bytes, and ceilings.dram's "
          "expected bytes with the L2 at x1 and x0.5 of the H100's 50 MB")
    print("| library | launches | " + " | ".join(answers) + " |")
    print("|---|---|" + "---|" * len(answers))
    for library in (*cp.LIBRARIES, "all"):
        mine = [r["dram"] for r in done if library in ("all", r["library"])]
        cells = [f"{sum(_within(r[a], r['ncu'], 0.25) for r in mine) / len(mine):.0%}" for a in answers]
        print(f"| {library} | {len(mine)} | " + " | ".join(cells) + " |")


def _write_rows(path: str, done: list[dict]) -> None:
    """One row per launch and cell: ours, ncu's and their ratio (for finding which launches miss)."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["library", "launch_id", "kernel", "answer", "cell", "ours", "ncu", "ratio"])
        for r in done:
            cells = [(answer, cell, *r[f"{answer} {cell}"]) for answer in ("floor", "expected") for cell in CELLS]
            cells += [(a, "dram", r["dram"][a], r["dram"]["ncu"]) for a in r["dram"] if a != "ncu"]
            for answer, cell, ours, theirs in cells:
                w.writerow([r["library"], r["launch_id"], r["kernel"], answer, cell, f"{ours:.6g}", f"{theirs:.6g}",
                            f"{ours / theirs:.4f}" if theirs else ""])


def _within(ours: float, theirs: float, tolerance: float) -> bool:
    return ours == theirs == 0 or (theirs > 0 and abs(ours / theirs - 1) <= tolerance)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    one = sub.add_parser("compile", help="on the GPU machine")
    one.add_argument("--shards", type=int, default=14)
    shard = sub.add_parser("shard", help="one compile process (started by `compile`)")
    shard.add_argument("index", type=int)
    shard.add_argument("of", type=int)
    cmp = sub.add_parser("compare", help="here")
    cmp.add_argument("folder")
    cmp.add_argument("--workers", type=int, default=2, help="launches evaluated at once (processes)")
    cmp.add_argument("--rows", help="write one CSV row per launch, answer and cell here")
    args = parser.parse_args(argv)
    if args.step == "compile":
        compile_all(args.shards)
    elif args.step == "shard":
        compile_shard(args.index, args.of)
    else:
        sys.path[:0] = [str(HERE.parents[1]), os.environ.get("CORPUS_SITE", "/tmp/site")]
        compare(args.folder, args.workers, args.rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
