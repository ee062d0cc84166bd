"""The files `advisor diagnose` reads from a raw loop probe (benchmarks/moe_loop_probe.py's JSON), one per
(GPU, kernel variant): advisor/advice/loop_probes/TAG_KERNEL[_VARIANT].json (issue 16).

    python benchmarks/moe_probe_convert.py benchmarks/data/h100_moe_loop_probe2.json --tag h100

Each file holds, per loop shape, the tiles per SM per round, the times at (K1, K2) for one round (`us`) and two
(`us_r2`) and the SM clock around them; the probe's clock and the sweeps' protocol's on a heavy launch with that
launch's tensor load (what advisor/advice/diagnose_loop.py scales the times by); the DRAM slab probe's rates; and
the probe's resolution (what two probes of one K loop differ by in the run). Rows whose step or first-round cost
comes out non-positive are left out and listed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from moe_loop_probe import K_STEPS, ROUNDS, config_of, probe_spec  # noqa: E402

from ceilings.launch import Config  # noqa: E402
from kernels.moe_bench import MoEGemmSpec  # noqa: E402

PROBES = ROOT / "advisor" / "advice" / "loop_probes"


def probe_constexprs(variant: str) -> tuple[str, dict]:
    """(kernel name, the constexprs that tell this variant's launches apart) as `describe_*launch` give them."""
    from fp8_loop_probe import VARIANTS as FP8_VARIANTS

    from kernels.moe_bench import describe_fused_launch, describe_launch

    if variant in FP8_VARIANTS:  # benchmarks/fp8_loop_probe.py's: what invoke_fp8_gemm passes for the form
        gated, scaling, tiles, atomics = FP8_VARIANTS[variant]
        return "fused_moe_fp8_kernel", {"GATED": gated, "ACCUMULATE": atomics and not gated, "PERSISTENT": False,
                                        "B_TMA": True, "A_FP8": True, "BLOCK_SCALED": scaling == "block",
                                        "TILE_SCALES": tiles}
    shape = (128, 256, 64, 8, 3)
    spec = probe_spec(shape, 1, K_STEPS[-1])
    if variant == "previous":
        launch = describe_launch(spec, config_of(shape))
        return launch.kernel, {"B_TMA": dict(launch.constexprs)["B_TMA"]}
    launch = describe_fused_launch(spec, config_of(shape), variant)
    keep = ("GATED", "INTERLEAVED", "ACCUMULATE", "PERSISTENT", "B_TMA")
    return launch.kernel, {k: v for k, v in launch.constexprs if k in keep}


def fit_row(r: dict, k_steps) -> tuple[float, float, float]:
    """(step, first-round fixed + launch, further-round fixed) of a raw row: the step is the mean of the one-
    and two-round K slopes (the latter per round)."""
    k1, k2 = k_steps
    dt = (k2 - k1) / r["shape"][2]
    s1 = (r[f"us_k{k2}_r1"] - r[f"us_k{k1}_r1"]) / dt
    s2 = (r[f"us_k{k2}_r2"] - r[f"us_k{k1}_r2"]) / dt / 2
    step = (s1 + s2) / 2
    trips = (k1 / r["shape"][2], k2 / r["shape"][2])
    first = r[f"us_k{k1}_r1"] - trips[0] * step
    further = ((r[f"us_k{k1}_r2"] + r[f"us_k{k2}_r2"]) - (r[f"us_k{k1}_r1"] + r[f"us_k{k2}_r1"])) / 2 \
        - (trips[0] + trips[1]) / 2 * step
    return step, first, further


RESOLUTION_QUANTILE = 0.8   # the share of same-loop probe pairs whose difference falls inside the band


def probe_resolution(doc: dict) -> dict | None:
    """What two probes of one K loop differ by in one run: the previous kernel against fused-il (the same
    K loop, tile and warps; only the epilogue differs) at every loop shape both ran with the same CTAs per
    SM, as the RESOLUTION_QUANTILE quantile of the relative step difference and of the first- and
    further-round fixed-cost differences (us). None where the run lacks either variant."""
    rows = {(r["variant"], tuple(r["shape"])): r for r in doc["loop"] if r.get("status") == "ok"}
    pairs = [(a, rows[("fused-il", shape)]) for (v, shape), a in rows.items()
             if v == "previous" and ("fused-il", shape) in rows
             and rows[("fused-il", shape)]["ctas_per_sm"] == a["ctas_per_sm"]]
    if len(pairs) < 10:
        return None
    fits = [(fit_row(a, doc["k_steps"]), fit_row(b, doc["k_steps"])) for a, b in pairs]
    cut = int(RESOLUTION_QUANTILE * 10)

    def q(values):
        return round(statistics.quantiles(values, n=10)[cut - 1], 4)
    return {"step_rel": q([abs(b[0] / a[0] - 1) for a, b in fits]),
            "first_us": q([abs(b[1] - a[1]) for a, b in fits]),
            "further_us": q([abs(b[2] - a[2]) for a, b in fits]),
            "from": f"previous against fused-il at {len(pairs)} loop shapes (same K loop), "
                    f"the {RESOLUTION_QUANTILE:.0%} quantile of their differences"}


def reference_load(doc: dict, tag: str) -> float | None:
    """The tensor load of the launch the sweeps' clock was read on (measure_sweep_clock's): its padded tensor
    work at the GPU's calibrated rate over its measured time less the launch floor, as `advisor diagnose`
    takes a launch's load. None where the run did not read it or the GPU is unknown."""
    from ceilings.errors import AdvisorError
    from ceilings.hardware import resolve_gpu
    from kernels.moe_demand import moe_gemm_demand

    sweep = doc.get("sweep_clock") or {}
    if not sweep.get("us"):
        return None
    try:
        gpu = resolve_gpu(tag)
    except AdvisorError:
        return None
    spec = MoEGemmSpec(8, 2, 4096, 14336, 1024, gemm=1)
    config = Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 32},
                    num_warps=8, num_stages=3)
    tensor_us = moe_gemm_demand(spec, config, gpu.arch).total("tensor") / (gpu.rates.tensor_tflops["bf16"] * 1e6)
    return round(tensor_us / (sweep["us"] - gpu.rates.launch_us), 4)


def convert(raw_path: Path, tag: str, out_dir: Path = PROBES) -> list[Path]:
    """The files `advisor/advice/diagnose_loop.py` reads, one per kernel variant of a raw probe: per loop
    shape the tiles per SM per round, the times at (K1, K2) for R = 1 (`us`) and R = 2 (`us_r2`) and the SM
    clock around them; the probe's and the sweep protocol's clocks. Rows whose step or first-round fixed cost
    comes out non-positive (a slow time) are left out and listed."""
    doc = json.loads(raw_path.read_text())
    k1, k2 = doc["k_steps"]
    dram = {r["probe"]: r["tbs"] for r in doc["dram"]}
    segments = {"contiguous": dram.get("contiguous 64x64 tiles")}
    segments.update({str(b): dram.get(f"slab {b} B segments") for b in (128, 256, 512)})
    resolution = probe_resolution(doc)
    written = []
    for variant in dict.fromkeys(r["variant"] for r in doc["loop"]):
        kernel, constexprs = probe_constexprs(variant)
        loops, left_out = {}, []
        for r in doc["loop"]:
            if r["variant"] != variant or r.get("status") != "ok":
                continue
            key = "M{} N{} K{} w{} s{}".format(*r["shape"])
            us = [r[f"us_k{k1}_r1"], r[f"us_k{k2}_r1"]]
            us2 = [r[f"us_k{k1}_r2"], r[f"us_k{k2}_r2"]]
            trips1 = k1 / r["shape"][2]
            step = (us[1] - us[0]) / ((k2 - k1) / r["shape"][2])
            if step <= 0 or us[0] - trips1 * step <= 0:
                left_out.append(key)
                continue
            clocks = [c for c in (r.get("clock_before_mhz"), r.get("clock_after_mhz")) if c]
            loops[key] = {"ctas_per_sm": r["ctas_per_sm"], "us": us, "us_r2": us2,
                          "clock_mhz": round(sum(clocks) / len(clocks), 1) if clocks else None,
                          "smi_mhz": r.get("smi_mhz")}
        probe_clocks = sorted(v["clock_mhz"] for v in loops.values() if v["clock_mhz"])
        out = {"gpu": doc["gpu"], "arch": 90, "kernel": kernel, "variant": variant,
               "source": doc.get("source") or ("kernels/fused_moe.py" if variant == "previous"
                                                 else "kernels/fused_moe_fused.py"),
               "constexprs": constexprs, "triton": doc["triton"], "torch": doc["torch"], "date": doc["date"],
               "command": doc["command"], "raw": f"benchmarks/data/{raw_path.name}", "k_steps": [k1, k2],
               "rounds": list(ROUNDS),
               "clock": {"probe_median_mhz": probe_clocks[len(probe_clocks) // 2] if probe_clocks else None,
                         "sweep_protocol_mhz": doc.get("sweep_clock", {}).get("after_protocol_mhz"),
                         "sweep_sustained_mhz": doc.get("sweep_clock", {}).get("after_sustained_mhz"),
                         "sweep_protocol_tensor_load": reference_load(doc, tag)},
               "left_out": {"why": "a non-positive step or first-round fixed cost: one of the times was slow",
                            "loops": left_out},
               "dram_segment_tbs": segments, "resolution": resolution, "loops": loops}
        suffix = "" if variant == "previous" else "_" + variant.replace("-", "_")
        path = out_dir / f"{tag}_{kernel}{suffix}.json"
        path.write_text(json.dumps(out, indent=1) + "\n")
        written.append(path)
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", help="a raw probe JSON (benchmarks/moe_loop_probe.py's)")
    ap.add_argument("--tag", required=True, help="the GPU's short name in the files' names (h100, h200)")
    ap.add_argument("--out-dir", default=str(PROBES))
    args = ap.parse_args(argv)
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    for path in convert(Path(args.raw), args.tag, Path(args.out_dir)):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
