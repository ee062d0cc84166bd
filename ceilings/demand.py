"""The generic demand of any Triton kernel launch: compiled SASS x loop trip counts x CTAs.

Works for kernels the advisor knows nothing about. What it cannot know (data-dependent early exits,
loop bounds read from memory, which parts of a tensor are touched) it states in the notes and
errs toward less work, so the ceiling stays a floor: every CTA of the grid is assumed to run the
counted path, and compulsory DRAM bytes are the smaller of the tensors' footprints and the bytes
the loads and stores issue.
"""

from __future__ import annotations

import math
import re

from ceilings.compile import CompiledKernel, compile_launch
from ceilings.launch import Launch
from ceilings.roofline import Demand
from ceilings.sass import Instruction, InstructionCounts, WeightedCode, count_instructions, weigh
from ceilings.ttir_eval import loop_trip_counts

_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1, "int16": 2,
                "int32": 4, "int64": 8, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}
_MMA_DTYPE = (("BF16", "bf16"), ("E4M3", "fp8"), ("E5M2", "fp8"), ("TF32", "tf32"), ("S8", "int8"),
              ("U8", "int8"))
_WIDTH = re.compile(r"\.(8|16|32|64|128)\b")


def _access_bytes(ins: Instruction) -> int:
    """Bytes one warp moves with a load/store: 32 lanes x the access width (32 bits by default)."""
    width = _WIDTH.findall(ins.mods)
    bits = int(width[-1]) if width else 32
    return 32 * bits // 8


def memory_bytes_per_warp(code: WeightedCode) -> tuple[float, float, float]:
    """(global bytes, shared bytes, TMA load instructions) of one warp of one CTA, loop-weighted."""
    global_bytes = shared_bytes = tma = 0.0
    for ins, times in code.instructions():
        if ins.opcode in ("LDG", "STG", "REDG", "ATOMG", "RED", "ATOM"):
            global_bytes += times * _access_bytes(ins)
        elif ins.opcode == "LDGSTS":  # global -> shared copy: counts on both sides
            global_bytes += times * _access_bytes(ins)
            shared_bytes += times * _access_bytes(ins)
        elif ins.opcode in ("LDS", "STS"):
            shared_bytes += times * _access_bytes(ins)
        elif ins.opcode in ("LDSM", "STSM"):  # 8x8 matrices of 16-bit values: 128 B each, .X4 = 4 of them
            count = 4 if ".X4" in ins.mods.upper() else 2 if ".X2" in ins.mods.upper() else 1
            shared_bytes += times * 128 * count
        elif ins.opcode == "UTMALDG":
            tma += times
    return global_bytes, shared_bytes, tma


def generic_demand(launch: Launch, compiled: CompiledKernel | None = None, arch: int = 90) -> Demand:
    compiled = compiled or compile_launch(launch, arch)
    scalars = {k: v for k, v in launch.scalars if isinstance(v, int | bool)}
    trips = loop_trip_counts(compiled.ttgir, scalars)
    weighed = weigh(compiled.sass, launch.kernel, trips)  # parse and weigh the SASS once
    counts: InstructionCounts = count_instructions(compiled.sass, launch.kernel, trips, weighed)
    warps = launch.config.num_warps
    per_cta = counts.scaled(warps)
    notes = list(counts.notes)
    unknown = sum(1 for t in trips if t is None)
    if unknown:
        notes.append(f"{unknown} loop bound(s) depend on memory or program ids: counted once")

    kinds = counts.mma_kinds
    kind = "wgmma" if any(op.endswith("GMMA") for op in kinds) else "mma_sync"
    dtype = "bf16"
    for ins in weighed[0].fn.instructions:
        if ins.pipe == "tensor":
            # The input type is a suffix (.BF16, .E4M3, .TF32, ...); half precision has none on H*MMA.
            default = {"Q": "fp8", "I": "int8"}.get(ins.opcode[0], "fp16")
            dtype = next((name for tag, name in _MMA_DTYPE if f".{tag}" in ins.mods.upper()), default)
            break

    g_bytes, s_bytes, tma_instr = memory_bytes_per_warp(weighed[0])
    descriptors = [t for t in launch.tensors if t.block_shape]
    tma_bytes = 0.0
    if descriptors and tma_instr:
        # Each TMA load moves one block of a descriptor; with several descriptors, the average block.
        blocks = [math.prod(t.block_shape) * _DTYPE_BYTES.get(t.dtype, 2) for t in descriptors]
        tma_bytes = tma_instr * sum(blocks) / len(blocks)
    # SASS global/shared traffic is per warp; a TMA load appears in every warp's stream but only the
    # elected warp's copy is enabled, so its bytes count once per CTA.
    l2_per_cta = g_bytes * warps + tma_bytes
    smem_per_cta = s_bytes * warps + tma_bytes
    ctas = launch.num_programs
    footprint = sum(t.numel * _DTYPE_BYTES.get(t.dtype, 4) for t in launch.tensors if not t.block_shape)
    dram = min(footprint, l2_per_cta * ctas) if l2_per_cta else footprint
    notes.append("every CTA of the grid is assumed to run the counted path (data-dependent exits unknown)")
    instructions = {k: v for k, v in per_cta.per_pipe.items() if k != "tensor"}
    tensor_flops = None if math.isnan(per_cta.tensor_flops) else per_cta.tensor_flops
    return Demand(kernel=launch.kernel, ctas=ctas, active_ctas=ctas, warps_per_cta=warps,
                  tensor_flops_per_cta=tensor_flops, tensor_dtype=dtype, tensor_kind=kind,
                  instructions_per_cta=instructions, smem_bytes_per_cta=smem_per_cta, l2_bytes=l2_per_cta * ctas,
                  dram_bytes=dram, shared_bytes=compiled.shared_bytes, registers=compiled.registers,
                  source="generic (SASS x trip counts)", notes=notes)
