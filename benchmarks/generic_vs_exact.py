"""The generic ceiling's demand against the exact model, on this project's fused-MoE kernel (CPU only).

    python benchmarks/generic_vs_exact.py [--json OUT.json]

For each launch of RESULTS section 6 (benchmarks/ncu_pipes.py `launches`), the launch is built as a
recorded trace holds it, routing tensors included: `sorted_token_ids`, `expert_ids` and
`num_tokens_post_padded` of `moe_align_block_size` on a seeded uniform random routing, carried as
`TensorArg.values` where `advisor record` would keep them (at most 64 KiB each). The kernel is compiled
for sm_90 here (no GPU), and `ceilings.demand.generic_demand`
(floor, and expected on `.expected`) is compared with the exact answer per pipeline:

- tensor FLOPs, working CTAs, shared-memory, L2 and DRAM bytes: `kernels.moe_demand.moe_gemm_demand`
  with the routing's per-expert counts;
- warp instructions of FMA+ALU, XU and LSU: the count RESULTS section 6 checked against Nsight Compute
  (the SASS with the K loop weighted by its trip count, times the CTAs that work from the exact routing,
  plus the early-exit path times the CTAs that exit). `moe_gemm_demand`'s own instruction counts are the
  kernel's semantic minimum (the epilogue's multiplies and packs, one LSU instruction per 16-byte
  vector), not what the SASS issues, and are printed apart (`semantic`).

The ratio generic / exact is printed per launch and pipeline; figures off by more than 5% are starred.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from ceilings.compile import compile_launch  # noqa: E402
from ceilings.demand import generic_demand  # noqa: E402
from ceilings.launch import MAX_VALUES_BYTES, Config, Launch  # noqa: E402
from ceilings.roofline import Demand  # noqa: E402
from ceilings.sass import count_instructions, early_exit_counts  # noqa: E402
from ceilings.ttir_eval import loop_trip_counts  # noqa: E402
from kernels import fused_moe as fm  # noqa: E402
from kernels.moe_bench import MoEGemmSpec, describe_launch  # noqa: E402
from kernels.moe_demand import moe_gemm_demand  # noqa: E402

PIPELINES = ("tensor", "fma+alu", "xu", "lsu", "smem", "l2", "dram", "ctas")
TOLERANCE = 0.05
ROUTING = ("sorted_token_ids_ptr", "expert_ids_ptr", "num_tokens_post_padded_ptr")


def section6_launches() -> list[tuple[MoEGemmSpec, Config]]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ncu_pipes import launches

    return launches()


def routed_launch(spec: MoEGemmSpec, config: Config, seed: int) -> tuple[Launch, list[int]]:
    """The launch as `advisor record` keeps it (routing tensors' values included), and the per-expert counts."""
    gen = torch.Generator().manual_seed(seed)
    _, ids = fm.route(spec.m, spec.num_experts, spec.top_k, generator=gen)
    aligned = fm.moe_align_block_size(ids, config["BLOCK_SIZE_M"], spec.num_experts)
    # What `advisor record` keeps: the contents of integer tensors up to 64 KiB (a long sorted_token_ids
    # of a large M has none; expert_ids and num_tokens_post_padded, which decide the exits, always fit).
    values = {name: tuple(int(v) for v in t.tolist()) for name, t in zip(ROUTING, aligned, strict=True)
              if t.numel() * t.element_size() <= MAX_VALUES_BYTES}
    launch = describe_launch(spec, config)
    tensors = tuple(dataclasses.replace(t, values=values[t.name]) if t.name in values else t for t in launch.tensors)
    counts = torch.bincount(ids.reshape(-1).long(), minlength=spec.num_experts).tolist()
    return dataclasses.replace(launch, tensors=tensors), counts


def _figures(d: Demand) -> dict[str, float]:
    return {"tensor": d.total("tensor"), "fma+alu": d.instructions("fma") + d.instructions("alu"),
            "xu": d.instructions("xu"), "lsu": d.instructions("lsu"), "smem": d.total("smem"), "l2": d.l2_bytes,
            "dram": d.dram_bytes, "ctas": float(d.active_ctas)}


def _counted(launch: Launch, compiled, exact: Demand) -> dict[str, float]:
    """RESULTS section 6's instruction counts: SASS x K-loop trips x working CTAs + exit path x exiting CTAs."""
    trips = loop_trip_counts(compiled.ttgir, {k: v for k, v in launch.scalars if isinstance(v, int)})
    per_warp = count_instructions(compiled.sass, launch.kernel, trips).per_pipe
    idle = early_exit_counts(compiled.sass, launch.kernel) or {}
    warps, active = launch.config.num_warps, exact.active_ctas
    exiting = exact.ctas - active

    def total(pipe: str) -> float:
        return warps * (active * per_warp.get(pipe, 0.0) + exiting * idle.get(pipe, 0.0))

    return {"fma+alu": total("fma") + total("alu"), "xu": total("xu"), "lsu": total("lsu")}


def compare(spec: MoEGemmSpec, config: Config, seed: int | None = None) -> dict:
    """Generic floor and expected demand, the exact figures, and generic / exact per pipeline."""
    launch, counts = routed_launch(spec, config, 1000 + spec.m if seed is None else seed)
    compiled = compile_launch(launch, 90)
    floor = generic_demand(launch, compiled, 90)
    exact_demand = moe_gemm_demand(spec, config, 90, counts=counts)
    exact = {**_figures(exact_demand), **_counted(launch, compiled, exact_demand)}
    semantic = {p: v for p, v in _figures(exact_demand).items() if p in ("fma+alu", "xu", "lsu")}
    generic, expected = _figures(floor), _figures(floor.expected)

    def ratios(mine: dict[str, float]) -> dict[str, float]:
        return {p: (mine[p] / exact[p] if exact[p] else (1.0 if mine[p] == 0 else float("inf"))) for p in PIPELINES}

    return {"shape": spec.shape_label, "M": spec.m, "gemm": spec.gemm, "weights": {True: "tma", False: "ptr"}.get(
                spec.b_tma, "auto"), "config": config.label(), "floor": generic, "expected": expected,
            "exact": exact, "semantic": semantic, "floor_ratio": ratios(generic), "expected_ratio": ratios(expected),
            "notes": floor.notes}


def table(rows: list[dict]) -> str:
    head = "| # | shape | M | GEMM | config | weights | " + " | ".join(PIPELINES) + " |"
    lines = [head, "|" + "---|" * (6 + len(PIPELINES))]
    for i, r in enumerate(rows):
        cells = []
        for p in PIPELINES:
            lo, hi = r["floor_ratio"][p], r["expected_ratio"][p]
            text = f"{lo:.3f}" if abs(lo - hi) < 5e-4 else f"{lo:.3f} / {hi:.3f}"
            off = max(abs(lo - 1), abs(hi - 1)) > TOLERANCE
            cells.append(f"**{text}**" if off else text)
        lines.append(f"| {i} | {r['shape']} | {r['M']} | {r['gemm']} | `{r['config']}` | {r['weights']} | "
                     + " | ".join(cells) + " |")
    within = {p: sum(max(abs(r['floor_ratio'][p] - 1), abs(r['expected_ratio'][p] - 1)) <= TOLERANCE for r in rows)
              for p in PIPELINES}
    lines.append("")
    lines.append("within 5% (floor and expected): " + ", ".join(f"{p} {n}/{len(rows)}" for p, n in within.items()))
    semantic = [r["semantic"][p] / r["exact"][p] for r in rows for p in ("fma+alu", "xu", "lsu") if r["exact"][p]]
    lines.append(f"moe_gemm_demand's semantic instruction counts / the SASS counts: {min(semantic):.3f} to "
                 f"{max(semantic):.3f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="also write every figure to this file")
    args = parser.parse_args(argv)
    rows = [compare(spec, config) for spec, config in section6_launches()]
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
