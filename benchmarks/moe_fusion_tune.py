"""Tuned config files for the fused GEMM1 (SiLU-and-mul in the epilogue on gate/up-interleaved w1,
`kernels.moe_bench` variant "fused-il"), and the layer at them against the previous layer (issue 16 point 3).

    python benchmarks/moe_fusion_tune.py --out $OUT [--workers 15] [--per-case 32] [--deadline 230] [--install]
    TRITON_INTERPRET=1 python benchmarks/moe_fusion_tune.py --dry-run --out /tmp/x   # CPU: tiny shapes, same code

Cases: `moe_fusion`'s shapes (ANCHORS section 3) at every token count M the previous kernel's shipped
file for this GPU holds (kernels/configs/). Per (shape, M) a sample of `kernels.fused_moe.config_space()`
(`sample_configs`): the previous kernel's tuned config at that M and at the neighbouring M keys, that
config with BLOCK_SIZE_N doubled and halved (the fused kernel's tile covers gate and up together), the
large tiles of `moe_fusion` where an expert gets enough rows to fill them, then a spread sample (round
robin over tile shapes, seeded) of the configs that pass the resource precheck with every stage in
shared memory, keep the accumulator at <= 128 registers per thread and use M blocks no taller than
twice the rows an expert expects (nor shorter than a quarter of that, down to 16). All compile first
in parallel worker processes (`moe_fusion.compile_all`);
each is then poisoned, checked against the float32 reference and timed (`moe_fusion.bench_gemm1`: CUDA
graph of 10 launches after 3 warm-ups, median of 20 replays, no L2 flush), largest M first. The fastest
config per (shape, M) goes to OUT/fused/<engine file name> (the engines' format, with a `.meta` side file
of the measured times); `--install` also writes it to kernels/configs/fused/, where `fused_moe_fused`
looks first. At M >= 1024 the best few fused-il configs are also timed as "fused-il-persistent".

Then the layer (align -> GEMM1 -> act -> GEMM2 -> sum) at --layer-ms: the previous layer at its shipped
config (both GEMMs) against the fused layer (`moe_fusion.LAYERS` act-il, act-il+sum, act-il+persistent)
at the previous config and at the tuned GEMM1 config (GEMM2 at the shipped config), checked against the
float32 layer. With --install, the config `fused_moe_fused` picks by itself is recorded too.
Writes OUT/moe_fusion_tune.json and prints a short table last.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import moe_fusion  # noqa: E402

from ceilings.launch import Config  # noqa: E402
from kernels.moe_bench import MoEGemmSpec  # noqa: E402

VARIANT = "fused-il"
PERSISTENT = "fused-il-persistent"
# Hopper's shared memory per block (CUDA C Programming Guide, compute capability 9.0: 227 KB).
SHARED_BYTES = 227 * 1024
# Accumulator registers per thread above which a config spills or starves the epilogue (RESULTS 1: the
# tuned configs hold 64-128).
MAX_ACC_REGS = 128
LAYER_VARIANTS = ("act-il", "act-il+sum", "act-il+persistent")
DRY_SPACE = {"BLOCK_SIZE_M": (16, 32), "BLOCK_SIZE_N": (32, 64), "BLOCK_SIZE_K": (32, 64),
             "GROUP_SIZE_M": (1, 4), "num_warps": (4,), "num_stages": (2,)}


def _with_n(config: Config, bn: int) -> Config:
    return Config({**config.params, "BLOCK_SIZE_N": bn}, num_warps=config.num_warps, num_stages=config.num_stages)


def _fits(config: Config) -> bool:
    """Every stage's A and B tiles in shared memory, and the accumulator within MAX_ACC_REGS."""
    from kernels.fused_moe import resource_precheck

    bm, bn, bk = config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"]
    return (resource_precheck(config, SHARED_BYTES) is None
            and (bm * bk + bk * bn) * 2 * config.num_stages <= SHARED_BYTES
            and bm * bn // (32 * config.num_warps) <= MAX_ACC_REGS)


def sample_configs(m: int, num_experts: int, top_k: int, shipped: dict[int, Config], per_case: int,
                   seed: int = 0, dry: bool = False) -> list[Config]:
    """About `per_case` configs of the fused GEMM1 for M tokens, anchored on the previous kernel's tuned
    configs `shipped` ({M key: config}, may be empty); deterministic for a seed."""
    from kernels.fused_moe import CONFIG_SPACE, config_space
    from kernels.moe_configs import ConfigTable, default_config

    anchors = []
    keys = sorted(shipped)
    if keys:
        own = ConfigTable(dict(shipped)).lookup(m)
        anchors.append(own)
        at = min(range(len(keys)), key=lambda i: (abs(keys[i] - m), keys[i]))
        anchors += [shipped[keys[i]] for i in (at - 1, at + 1) if 0 <= i < len(keys)]
    else:
        own = default_config(m, num_experts, top_k)
        anchors.append(own)
    bns = CONFIG_SPACE["BLOCK_SIZE_N"] if not dry else DRY_SPACE["BLOCK_SIZE_N"]
    anchors += [_with_n(own, bn) for bn in (2 * own["BLOCK_SIZE_N"], own["BLOCK_SIZE_N"] // 2) if bn in bns]
    rows_per_expert = m * top_k / num_experts
    bm_cap = min(256, max(16, 2 ** math.ceil(math.log2(max(2 * rows_per_expert, 1)))))
    if not dry and rows_per_expert >= 64:
        anchors += [moe_fusion.parse_label(t) for t in moe_fusion.LARGE_TILES]
    # Anchors are kept even past the filter (the previous config must be timed), unless they cannot run.
    anchors = [c for c in dict.fromkeys(anchors) if dry or _fits(c) or c == own]
    space = config_space() if not dry else _dry_space()
    bm_floor = max(16, min(64, bm_cap // 4))  # many rows per expert: short M blocks only re-read weights
    pool = [c for c in space if c not in anchors and (dry or bm_floor <= c["BLOCK_SIZE_M"] <= bm_cap and _fits(c))]
    rng = random.Random(f"{seed}-{m}-{num_experts}-{top_k}")
    rng.shuffle(pool)
    # Round robin over tile shapes, so the spread covers every (BM, BN, BK) before repeating one.
    by_tile: dict[tuple, list[Config]] = {}
    for c in pool:
        by_tile.setdefault((c["BLOCK_SIZE_M"], c["BLOCK_SIZE_N"], c["BLOCK_SIZE_K"]), []).append(c)
    queues = list(by_tile.values())
    rng.shuffle(queues)
    picked = list(anchors)
    while len(picked) < per_case and any(queues):
        for queue in queues:
            if queue and len(picked) < per_case:
                picked.append(queue.pop())
    return picked


def _dry_space() -> list[Config]:
    from ceilings.launch import expand_space

    return expand_space(DRY_SPACE)


def shipped_tables(shape, device_name: str | None) -> dict[int, Config]:
    """The previous kernel's tuned configs for this shape and GPU ({} when no file ships)."""
    from kernels.moe_configs import read_config_file, shipped_config_path

    name, e, top_k, h, inter, ms = shape
    path = shipped_config_path(e, inter, device_name) if device_name else None
    return read_config_file(path).configs if path else {}


def best_rows(rows: list[dict], variant: str) -> dict[tuple, dict]:
    """The fastest ok row per (case, M) of `variant`."""
    best = {}
    for r in rows:
        if r["variant"] == variant and r["status"] == "ok":
            key = (r["case"], r["m"])
            if key not in best or r["us"] < best[key]["us"]:
                best[key] = r
    return best


def write_tuned(cases, rows, device_name: str, versions: dict, folders: list[Path]) -> list[str]:
    """One engine-format file per shape of the fastest fused-il config at each M, in each folder."""
    from kernels.moe_configs import ConfigMeta, ConfigTable, MeasuredEntry, config_file_name, write_config_file

    best = best_rows(rows, VARIANT)
    written = []
    for shape in cases:
        name, e, top_k, h, inter, ms = shape
        label = MoEGemmSpec(e, top_k, h, 2 * inter, 1).shape_label
        entries = {}
        for m in ms:
            row = best.get((label, m))
            if row:
                compared = sum(1 for r in rows if r["case"] == label and r["m"] == m and r["variant"] == VARIANT
                               and r["status"] == "ok")
                entries[m] = MeasuredEntry(moe_fusion.parse_label(row["config"]), row["us"], compared)
        if not entries:
            continue
        meta = ConfigMeta(device_name, versions.get("triton"), entries,
                          "benchmarks/moe_fusion_tune.py: fused-il GEMM1 (SiLU-and-mul in the epilogue, "
                          "interleaved w1), CUDA graph median")
        table = ConfigTable({m: en.config for m, en in entries.items()})
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
            path = write_config_file(folder / config_file_name(e, inter, device_name), table, meta)
            written.append(str(path))
    return written


def write_from(run_json: Path) -> list[str]:
    """The tuned files of a finished run (its moe_fusion_tune.json) into kernels/configs/fused/: the
    device machine's output cannot carry the engines' file names (',' and '=')."""
    from kernels.moe_configs import FUSED_DIR

    doc = json.loads(run_json.read_text())
    cases = []
    for name, e, top_k, h, inter, _ in moe_fusion.shapes(False):
        label = MoEGemmSpec(e, top_k, h, 2 * inter, 1).shape_label
        ms = tuple(sorted({r["m"] for r in doc["gemm1"] if r["case"] == label}))
        cases.append((name, e, top_k, h, inter, ms))
    return write_tuned(cases, doc["gemm1"], doc["gpu"], {"triton": doc.get("triton")}, [FUSED_DIR])


def bench_layer(shape, m, shipped: Config, tuned: Config, device: str, dry: bool, device_name) -> dict:
    """Previous layer at the shipped config against the fused layer at the shipped and the tuned GEMM1 config."""
    from advisor.measure.timing import relative_error
    from kernels import fused_moe as fm
    from kernels.fused_moe_fused import interleave_gate_up, layer_configs

    name, e, top_k, h, inter, _ = shape
    timer = moe_fusion._timer(dry)
    tensors = moe_fusion.layer_tensors(e, top_k, h, inter, m, device, seed=1)
    w1_il = interleave_gate_up(tensors[1])
    ref = fm.fused_moe_reference(*tensors)
    result = {"case": name, "m": m, "shipped": shipped.label(), "tuned": tuned.label(),
              "tuned_is_shipped": tuned == shipped, "runs": []}
    (cfg1, src1), (cfg2, src2) = layer_configs(m, e, inter, top_k, device_name)
    result["lookup"] = {"gemm1": cfg1.label(), "gemm1_from": src1, "gemm2": cfg2.label(), "gemm2_from": src2}
    runs = [("previous", shipped)] + [(v, c) for v in LAYER_VARIANTS for c in dict.fromkeys((shipped, tuned))]
    for variant, config in runs:
        fn = moe_fusion.layer_fn(variant, tensors, w1_il, config, shipped)
        err = relative_error(fn().float(), ref)
        run = {"variant": variant, "config": config.label(), "rel_error": err,
               "at": "shipped" if config == shipped else "tuned"}
        if err < 1e-2:
            run["us"] = round(timer(fn), 2)
        else:
            run["status"] = "wrong"
        result["runs"].append(run)
        print("layer:", name, m, json.dumps(run), flush=True)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU interpreter")
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--per-case", type=int, default=32, help="configs sampled per (shape, M)")
    parser.add_argument("--persistent-top", type=int, default=3,
                        help="best fused-il configs also timed persistent at M >= 1024")
    parser.add_argument("--deadline", type=float, default=1e9, help="stop tuning after this many seconds")
    parser.add_argument("--layer-ms", default="1024,4096", help="token counts of the layer comparison ('' = none)")
    parser.add_argument("--install", action="store_true", help="also write the tuned files to kernels/configs/fused/")
    parser.add_argument("--only", help="case name prefix to keep, e.g. mixtral")
    parser.add_argument("--write-from", metavar="JSON",
                        help="no timing: write kernels/configs/fused/ from a run's moe_fusion_tune.json")
    args = parser.parse_args(argv)
    if args.write_from:
        for path in write_from(Path(args.write_from)):
            print("wrote", path)
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import torch

    from advisor.measure.timing import versions
    from kernels.moe_configs import FUSED_DIR

    started = time.monotonic()
    deadline = started + args.deadline
    dry = args.dry_run
    device = moe_fusion.target_device(dry)
    device_name = "cpu-interpreter" if dry else torch.cuda.get_device_name()
    runtime = {} if dry else versions()
    cases, spec_rows, shipped = [], [], {}
    for shape in moe_fusion.shapes(dry):
        if args.only and not shape[0].startswith(args.only):
            continue
        name, e, top_k, h, inter, ms = shape
        table = shipped_tables(shape, None if dry else device_name)
        ms = tuple(sorted(table)) if table else ms  # the engines' token counts of this GPU's shipped file
        cases.append((name, e, top_k, h, inter, ms))
        for m in ms:
            spec = MoEGemmSpec(e, top_k, h, 2 * inter, m, gemm=1, b_tma=False if dry else None)
            configs = sample_configs(m, e, top_k, table, 4 if dry else args.per_case, dry=dry)
            shipped[(name, m)] = shipped[(spec.shape_label, m)] = configs[0]
            spec_rows.append((spec, configs))
    spec_rows.sort(key=lambda row: -row[0].m)  # the large M first: what a deadline cuts is the cheap end
    failed = {}
    if not dry:
        tasks = [(s, c, VARIANT) for s, configs in spec_rows for c in configs]
        failed = moe_fusion.compile_all(tasks, args.workers)
        print(f"compiled {len(tasks)} (spec, config) in {time.monotonic() - started:.0f} s; {len(failed)} failed",
              flush=True)
    rows = moe_fusion.bench_gemm1(spec_rows, device, dry, failed, deadline, variants=(VARIANT,))
    # Persistent: the best few fused-il configs again in the tile loop, where RESULTS 15 saw it pay.
    best = best_rows(rows, VARIANT)
    persistent_rows = []
    for spec, _ in spec_rows:
        if spec.m >= 1024 or dry:
            ok = sorted((r for r in rows if r["case"] == spec.shape_label and r["m"] == spec.m
                         and r["variant"] == VARIANT and r["status"] == "ok"), key=lambda r: r["us"])
            persistent_rows.append((spec, [moe_fusion.parse_label(r["config"]) for r in ok[:args.persistent_top]]))
    if persistent_rows and time.monotonic() < deadline:
        if not dry:
            failed.update(moe_fusion.compile_all([(s, c, PERSISTENT) for s, cs in persistent_rows for c in cs],
                                                 args.workers))
        rows += moe_fusion.bench_gemm1(persistent_rows, device, dry, failed, deadline, variants=(PERSISTENT,))
    folders = [out / "fused"] + ([FUSED_DIR] if args.install and not dry else [])
    written = write_tuned(cases, rows, device_name, runtime, folders)
    layers = []
    layer_ms = [int(x) for x in args.layer_ms.split(",") if x]
    for shape in cases:
        for m in shape[5]:
            if m not in layer_ms and not (dry and m == shape[5][-1]):
                continue
            label = MoEGemmSpec(shape[1], shape[2], shape[3], 2 * shape[4], m).shape_label
            row = best.get((label, m))
            tuned = moe_fusion.parse_label(row["config"]) if row else shipped[(shape[0], m)]
            layers.append(bench_layer(shape, m, shipped[(shape[0], m)], tuned, device, dry,
                                      None if dry else device_name))
    doc = {"date": time.strftime("%Y-%m-%d %H:%M"), "gpu": device_name, **runtime,
           "command": " ".join(sys.argv), "per_case": args.per_case, "written": written,
           "tuned": summarise(rows, shipped), "gemm1": rows, "layers": layers,
           "wall_s": round(time.monotonic() - started, 1)}
    (out / "moe_fusion_tune.json").write_text(json.dumps(doc, indent=1) + "\n")
    print_table(doc)
    return 0


def summarise(rows: list[dict], shipped: dict) -> list[dict]:
    """Per (shape, M): the tuned config and its time against fused-il at the previous kernel's config,
    the configs compared, and the best persistent time where timed."""
    best, pbest = best_rows(rows, VARIANT), best_rows(rows, PERSISTENT)
    out = []
    for (case, m), r in best.items():
        mine = [x for x in rows if x["case"] == case and x["m"] == m and x["variant"] == VARIANT]
        prev_label = shipped[(case, m)].label()
        at_prev = next((x.get("us") for x in mine if x["config"] == prev_label), None)
        p = pbest.get((case, m))
        out.append({"case": case, "m": m, "previous_config": prev_label, "us_at_previous_config": at_prev,
                    "tuned_config": r["config"], "us_tuned": r["us"],
                    "ok": sum(1 for x in mine if x["status"] == "ok"), "sampled": len(mine),
                    "persistent_config": p["config"] if p else None, "us_persistent": p["us"] if p else None})
    return out


def print_table(doc: dict) -> None:
    print(f"\n{doc['gpu']}  triton {doc.get('triton', '-')}  torch {doc.get('torch', '-')}")
    print(f"{'case':<28}{'M':>6}{'ok/n':>8}{'at prev cfg':>13}{'tuned':>10}{'prev/tuned':>11}  {'tuned config':<26}"
          f"{'persistent':>11}")
    for t in doc["tuned"]:
        prev, us, p = t["us_at_previous_config"], t["us_tuned"], t["us_persistent"]
        print(f"{t['case']:<28}{t['m']:>6}{t['ok']:>4}/{t['sampled']:<3}" + (f"{prev:>13.1f}" if prev else f"{'-':>13}")
              + f"{us:>10.1f}" + (f"{prev / us:>11.3f}" if prev else f"{'-':>11}") + f"  {t['tuned_config']:<26}"
              + (f"{p:>11.1f}" if p else f"{'-':>11}"))
    for lay in doc["layers"]:
        prev = next((r["us"] for r in lay["runs"] if r["variant"] == "previous" and "us" in r), None)
        cells = " ".join(f"{r['variant']}@{r['at']}={r.get('us', 'wrong')}" for r in lay["runs"][1:])
        print(f"layer {lay['case']:<22}{lay['m']:>6} previous={prev} {cells}")


if __name__ == "__main__":
    raise SystemExit(main())
