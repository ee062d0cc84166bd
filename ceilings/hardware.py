"""The one place that knows each GPU's numbers, and the calibrations measured on real cards.

Rates are per SM per clock unless the name says otherwise; a GPU's chip-wide rate is
rate x SMs x clock. Each number carries its source in a comment: the vendor's datasheet or
architecture whitepaper (dense, non-sparse rates), ANCHORS section 4 for Hopper, or a device
property read on a card. Where public sources give nothing, the field is None and `unknown`
lists it; a ceiling never silently invents such a number.

Calibration (`advisor calibrate`, on a GPU) measures sustained rates and bandwidths; a ceiling uses
the calibrated value of a quantity when one exists for the GPU and says so (`Rates.source`).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from ceilings.errors import AdvisorError

# Shipped calibrations; users' own go to $TRITON_ADVISOR_HOME/calibration (default ~/.cache/triton-advisor).
SHIPPED_CALIBRATIONS = Path(__file__).resolve().parent / "calibration"


@dataclass(frozen=True)
class GPUSpec:
    name: str                      # as torch.cuda.get_device_name() reports it
    arch: int                      # compute capability x 10 (90 = sm_90)
    sms: int
    boost_clock_ghz: float         # the clock the vendor's peak rates assume
    # Tensor-core FLOPs per SM per clock, dense, fp32 accumulate, by input type.
    tensor_flops: dict[str, float | None]
    fp32_lanes: int                # FP32 FMA lanes per SM (1 FMA = 2 FLOPs)
    int32_lanes: int               # INT32 / IMAD lanes per SM
    xu_lanes: int                  # special-function (MUFU) lanes per SM
    lsu_lanes: int                 # load/store lanes per SM (32 = one warp instruction per clock)
    smem_bytes_per_clock: int      # shared-memory bandwidth per SM
    dram_tbs: float                # DRAM bandwidth, TB/s (vendor)
    l2_bytes: int
    l2_tbs: float | None           # L2 -> SM bandwidth, TB/s; unpublished for most GPUs: calibrate
    smem_per_sm: int               # shared memory per SM, bytes
    smem_per_block: int            # the most one block may opt into, bytes
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32
    # Hopper runs warp-level mma.sync at a fraction of the warpgroup wgmma rate; 1.0 elsewhere.
    mma_sync_fraction: float = 1.0
    # FP64 lanes per SM (DFMA, DADD, DMUL run on their own units, not the FP32 FMA pipe): 64 on GH100 and
    # GB100 (34 TFLOP/s on an H100 SXM = 132 SMs x 1.98 GHz x 64 x 2), 32 on GA100, 2 (1/64 of FP32) on
    # GA10x/AD10x and on the FP64-reduced H800 and H20 (1 TFLOP/s datasheet figures).
    fp64_lanes: int = 64
    aliases: tuple[str, ...] = ()
    notes: str = ""

    @property
    def unknown(self) -> list[str]:
        missing = [f.name for f in fields(self) if getattr(self, f.name) is None]
        missing += [f"tensor_flops[{k}]" for k, v in self.tensor_flops.items() if v is None]
        return missing

    def peak_tensor_tflops(self, dtype: str = "bf16") -> float | None:
        rate = self.tensor_flops.get(dtype)
        return None if rate is None else rate * self.sms * self.boost_clock_ghz * 1e9 / 1e12


_KB = 1024
_MB = 1024 * 1024


def _hopper(name: str, sms: int, clock: float, dram: float, l2: int, **extra) -> GPUSpec:
    return GPUSpec(
        name=name, arch=90, sms=sms, boost_clock_ghz=clock,
        # ANCHORS section 4 / NVIDIA H100 whitepaper: 1024 dense bf16 FMA per SM per clock per
        # tensor core x 4 = 4096 FLOP; fp8 twice that; tf32 half; int8 as fp8.
        tensor_flops={"bf16": 4096, "fp16": 4096, "fp8": 8192, "tf32": 2048, "int8": 8192},
        fp32_lanes=128, int32_lanes=64, xu_lanes=16, lsu_lanes=32,  # ANCHORS section 4
        smem_bytes_per_clock=128,                                    # 32 banks x 4 B (ANCHORS section 4)
        dram_tbs=dram, l2_bytes=l2, l2_tbs=None,                     # L2 bandwidth unpublished: calibrate
        smem_per_sm=228 * _KB, smem_per_block=227 * _KB,             # Hopper tuning guide
        # ANCHORS section 6: ~6 tensor-pipe cycles per 16x8x16 HMMA on an SM sub-partition, i.e.
        # 4 x 4096 / 6 = 2731 FLOP per SM per clock, 2/3 of the wgmma rate.
        mma_sync_fraction=2 / 3,
        **extra)


def _ampere_like(name: str, arch: int, sms: int, clock: float, tensor_bf16: float, fp8: float | None,
                 fp32_lanes: int, dram: float, l2: int, smem_per_sm: int, smem_per_block: int,
                 max_warps: int, max_blocks: int, **extra) -> GPUSpec:
    return GPUSpec(
        name=name, arch=arch, sms=sms, boost_clock_ghz=clock,
        tensor_flops={"bf16": tensor_bf16, "fp16": tensor_bf16, "fp8": fp8, "tf32": tensor_bf16 / 2,
                      "int8": tensor_bf16 * 2},
        fp32_lanes=fp32_lanes, int32_lanes=64, xu_lanes=16, lsu_lanes=32, smem_bytes_per_clock=128,
        dram_tbs=dram, l2_bytes=l2, l2_tbs=None, smem_per_sm=smem_per_sm, smem_per_block=smem_per_block,
        max_warps_per_sm=max_warps, max_blocks_per_sm=max_blocks, **extra)


SPECS: tuple[GPUSpec, ...] = (
    # H100 SXM5: 132 SMs, 1.98 GHz boost, 3.35 TB/s HBM3, 50 MB L2 (datasheet; ANCHORS section 4).
    _hopper("NVIDIA H100 80GB HBM3", 132, 1.98, 3.35, 50 * _MB, aliases=("h100", "h100-sxm", "h100 sxm")),
    # H100 PCIe: 114 SMs, 1.755 GHz boost, 2.0 TB/s HBM2e, 50 MB L2 (datasheet: 756 TFLOP/s bf16 dense).
    _hopper("NVIDIA H100 PCIe", 114, 1.755, 2.0, 50 * _MB, aliases=("h100-pcie", "h100 pcie")),
    # H200 SXM: the H100's processor with 4.8 TB/s HBM3e (datasheet); torch reports 60 MB of L2 on
    # the H200s of this workplace (device tool, KINDS.md, 2026-10-28).
    _hopper("NVIDIA H200", 132, 1.98, 4.8, 60 * _MB, aliases=("h200", "h200-sxm")),
    # H800 SXM: H100 SXM compute and memory, reduced NVLink (datasheet).
    _hopper("NVIDIA H800", 132, 1.98, 3.35, 50 * _MB, aliases=("h800",), fp64_lanes=2),
    # H20: 78 SMs, 148 TFLOP/s bf16 dense, 4.0 TB/s, 60 MB L2 (datasheet); per-SM tensor rate derived
    # as 148e12 / (78 x 1.98e9) = 958 FLOP/clk at an assumed 1.98 GHz (clock unpublished).
    replace(_hopper("NVIDIA H20", 78, 1.98, 4.0, 60 * _MB, aliases=("h20",), fp64_lanes=2),
            tensor_flops={"bf16": 958, "fp16": 958, "fp8": 1916, "tf32": 479, "int8": 1916},
            notes="tensor rate derived from the 148 TFLOP/s datasheet figure at an assumed 1.98 GHz"),
    # A100 SXM4: 108 SMs, 1.41 GHz, 312 TFLOP/s bf16 dense = 2048 FLOP/SM/clk, FP32 19.5 TFLOP/s =
    # 64 lanes, no fp8; 40 MB L2; 164 KB shared per SM, 163 KB per block (A100 whitepaper).
    _ampere_like("NVIDIA A100-SXM4-80GB", 80, 108, 1.41, 2048, None, 64, 2.039, 40 * _MB, 164 * _KB, 163 * _KB,
                 64, 32, aliases=("a100", "a100-80gb", "a100-sxm4-80gb"), fp64_lanes=32),
    _ampere_like("NVIDIA A100-SXM4-40GB", 80, 108, 1.41, 2048, None, 64, 1.555, 40 * _MB, 164 * _KB, 163 * _KB,
                 64, 32, aliases=("a100-40gb", "a100-sxm4-40gb"), fp64_lanes=32),
    # A10G (GA102): 80 SMs, 1.71 GHz; GA10x tensor cores do 1024 bf16 FLOP/SM/clk and 128 FP32 lanes
    # (GA102 whitepaper); 600 GB/s, 6 MB L2; 100 KB shared per SM, 99 KB per block; 48 warps, 16 blocks.
    _ampere_like("NVIDIA A10G", 86, 80, 1.71, 1024, None, 128, 0.6, 6 * _MB, 100 * _KB, 99 * _KB, 48, 16,
                 fp64_lanes=2, aliases=("a10g",)),
    # L4 (AD104): 58 SMs, 2.04 GHz, 121 TFLOP/s bf16 / 242 fp8 dense, 300 GB/s, 48 MB L2 (datasheet;
    # Ada whitepaper: 100 KB shared per SM, 48 warps, 24 blocks).
    _ampere_like("NVIDIA L4", 89, 58, 2.04, 1024, 2048, 128, 0.3, 48 * _MB, 100 * _KB, 99 * _KB, 48, 24,
                 fp64_lanes=2, aliases=("l4",)),
    # L40S (AD102): 142 SMs, 2.52 GHz, 362 TFLOP/s bf16 / 733 fp8 dense, 864 GB/s, 96 MB L2 (datasheet).
    _ampere_like("NVIDIA L40S", 89, 142, 2.52, 1024, 2048, 128, 0.864, 96 * _MB, 100 * _KB, 99 * _KB, 48, 24,
                 fp64_lanes=2, aliases=("l40s",)),
    # RTX 4090 (AD102): 128 SMs, 2.52 GHz; GeForce Ada runs fp32-accumulate tensor math at half rate:
    # 165 TFLOP/s bf16 = 512 FLOP/SM/clk, fp8 1024 (Ada whitepaper); 1.008 TB/s, 72 MB L2.
    _ampere_like("NVIDIA GeForce RTX 4090", 89, 128, 2.52, 512, 1024, 128, 1.008, 72 * _MB, 100 * _KB, 99 * _KB,
                 48, 24, fp64_lanes=2, aliases=("rtx4090", "4090", "rtx 4090")),
    # B200: 148 SMs, 2.25 PFLOP/s bf16 dense (HGX B200 datasheet) = 8192 FLOP/SM/clk at ~1.86 GHz;
    # 8 TB/s HBM3e; 228 KB shared per SM. L2 size and boost clock are not published: clock derived,
    # L2 size unknown.
    GPUSpec(name="NVIDIA B200", arch=100, sms=148, boost_clock_ghz=1.86,
            tensor_flops={"bf16": 8192, "fp16": 8192, "fp8": 16384, "tf32": 4096, "int8": 16384},
            fp32_lanes=128, int32_lanes=64, xu_lanes=16, lsu_lanes=32, smem_bytes_per_clock=128,
            dram_tbs=8.0, l2_bytes=None, l2_tbs=None, smem_per_sm=228 * _KB, smem_per_block=227 * _KB,
            aliases=("b200",), notes="boost clock derived from the datasheet rate; L2 size unpublished"),
)

_BY_NAME = {s.name.lower(): s for s in SPECS}
_BY_ALIAS = {a: s for s in SPECS for a in s.aliases}


def known_names() -> list[str]:
    return [s.name for s in SPECS]


def get_spec(name: str) -> GPUSpec:
    """Look a GPU up by the name torch reports, its `device_name` file form (underscores) or a short name."""
    key = name.strip().lower()
    spec = _BY_NAME.get(key) or _BY_NAME.get(key.replace("_", " ")) or _BY_ALIAS.get(key)
    if spec is None:
        raise AdvisorError(f"unknown GPU {name!r}; known: {', '.join(known_names())} (or short names "
                           f"{', '.join(sorted(_BY_ALIAS))})")
    return spec


# ----------------------------------------------------------------------------------------------
# Calibration: sustained rates measured on a card.
# ----------------------------------------------------------------------------------------------
CALIBRATION_KEYS = {
    "dram_read_tbs": "DRAM read bandwidth (a reduction over a buffer far larger than L2), TB/s",
    "dram_copy_tbs": "DRAM copy bandwidth counting bytes read + written, TB/s",
    "dram_rw_tbs": "DRAM rate of a stream writing as many bytes as it reads (far past L2), read + written, TB/s",
    "l2_read_tbs": "L2 -> SM read bandwidth (repeated reads of a buffer that fits in L2), TB/s",
    "tensor_bf16_tflops": "sustained dense bf16 tensor rate (back-to-back large GEMMs), TFLOP/s",
    "tensor_fp8_tflops": "sustained dense fp8 tensor rate, TFLOP/s",
    "fma_fp32_tflops": "FP32 FMA rate (a register-resident FMA chain), TFLOP/s",
    "xu_gops": "special-function rate (MUFU.EX2 chain), Gop/s",
    "launch_us": "time per empty-kernel launch inside a CUDA graph of back-to-back launches, us",
    "atomic_add_l2_tbs": "float32 atomic adds (relaxed, result unused) into a buffer that fits in L2, bytes, TB/s",
    "atomic_add_dram_tbs": "float32 atomic adds into a buffer far larger than L2, bytes added, TB/s",
    "l2_latency_ns": "load-to-use latency of an L2 hit (one thread chasing a ring that fits in L2, L1 skipped), ns",
    "dram_latency_ns": "load-to-use latency of a DRAM access (the same chase after the L2 is flushed), ns",
}


@dataclass(frozen=True)
class Calibration:
    gpu: str
    values: dict[str, float]
    measured: dict = field(default_factory=dict)  # date, versions, method per key
    # An empty kernel's time per launch by warps per CTA: {warps: [[grid, us], ...]} (ceilings.latency_floor)
    empty_kernel_us: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, text: str, where: str) -> Calibration:
        try:
            data = json.loads(text)
            values = {k: float(v) for k, v in data["values"].items()}
            unknown = sorted(set(values) - set(CALIBRATION_KEYS))
            if unknown:
                raise AdvisorError(f"{where}: unknown calibration keys {unknown}; known: {sorted(CALIBRATION_KEYS)}")
            empty = {int(w): [(int(g), float(us)) for g, us in rows]
                     for w, rows in data.get("empty_kernel_us", {}).items()}
            return cls(gpu=str(data["gpu"]), values=values, measured=dict(data.get("measured", {})),
                       empty_kernel_us=empty)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise AdvisorError(f"{where}: not a calibration file ({exc.__class__.__name__}: {exc}); "
                               "regenerate it with `advisor calibrate`") from None

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=False) + "\n"


def calibration_home() -> Path:
    base = os.environ.get("TRITON_ADVISOR_HOME") or Path.home() / ".cache" / "triton-advisor"
    return Path(base) / "calibration"


def calibration_file_name(gpu_name: str) -> str:
    return gpu_name.strip().replace(" ", "_") + ".json"


def load_calibration(gpu_name: str, search: list[Path] | None = None) -> tuple[Calibration | None, str | None]:
    """The calibration for this GPU: the user's own first, then the shipped one. (None, None) if none."""
    name = calibration_file_name(get_spec(gpu_name).name)
    for folder in (search if search is not None else [calibration_home(), SHIPPED_CALIBRATIONS]):
        path = Path(folder) / name
        if path.exists():
            return Calibration.from_json(path.read_text(), str(path)), str(path)
    return None, None


@dataclass(frozen=True)
class Rates:
    """Chip-wide and per-SM rates a roofline divides by, with where each came from."""

    spec: GPUSpec
    clock_ghz: float
    tensor_tflops: dict[str, float | None]   # chip-wide dense rates at `clock_ghz`, or calibrated
    fma_tflops: float
    alu_ginst: float                          # warp instructions per second, chip-wide, x 1e-9
    fp64_ginst: float
    xu_ginst: float
    lsu_ginst: float
    smem_tbs: float
    l2_tbs: float | None
    dram_tbs: float
    launch_us: float
    source: dict[str, str]                    # quantity -> "spec" or the calibration file
    empty_kernel_us: dict = field(default_factory=dict)  # warps -> ((grid, us), ...), calibrated; {}: none

    def per_sm_clock(self) -> float:
        return self.clock_ghz * 1e9


def rates_for(gpu_name: str, calibration: Calibration | None = None, calibration_source: str = "",
              use_calibration: bool = True) -> Rates:
    """Rates from the spec sheet, replaced by calibrated ones where available."""
    spec = get_spec(gpu_name)
    if calibration is None and use_calibration:
        calibration, calibration_source = load_calibration(spec.name)
    cal = calibration.values if (calibration and use_calibration) else {}
    clock = spec.boost_clock_ghz
    chip = spec.sms * clock * 1e9
    source: dict[str, str] = {}

    def pick(key: str, spec_value: float | None, what: str) -> float | None:
        if key in cal:
            source[what] = calibration_source or "calibration"
            return cal[key]
        source[what] = "spec"
        return spec_value

    tensor = {dtype: (None if rate is None else rate * chip / 1e12) for dtype, rate in spec.tensor_flops.items()}
    tensor["bf16"] = pick("tensor_bf16_tflops", tensor["bf16"], "tensor")
    if tensor.get("bf16") is not None and spec.tensor_flops.get("bf16"):
        # A calibrated bf16 rate scales the other input types by the spec's ratios, except fp8 if measured.
        scale = tensor["bf16"] / (spec.tensor_flops["bf16"] * chip / 1e12)
        for dtype in ("fp16", "tf32", "int8", "fp8"):
            if spec.tensor_flops.get(dtype):
                tensor[dtype] = spec.tensor_flops[dtype] * chip / 1e12 * scale
    if "tensor_fp8_tflops" in cal:
        tensor["fp8"] = cal["tensor_fp8_tflops"]
    fma = pick("fma_fp32_tflops", spec.fp32_lanes * 2 * chip / 1e12, "fma")
    xu_spec = spec.xu_lanes / 32 * chip / 1e9
    xu = pick("xu_gops", None, "xu")
    xu = xu / 32 if xu is not None else xu_spec  # calibrated ops/s -> warp instructions/s
    dram = pick("dram_read_tbs", spec.dram_tbs, "dram")
    l2 = pick("l2_read_tbs", spec.l2_tbs, "l2")
    launch = pick("launch_us", 2.0, "launch")  # 2 us: a typical graph-launched kernel's floor, until measured
    if source["launch"] == "spec":
        source["launch"] = "assumed 2 us (no calibration)"
    return Rates(spec=spec, clock_ghz=clock, tensor_tflops=tensor, fma_tflops=fma,
                 alu_ginst=spec.int32_lanes / 32 * chip / 1e9, xu_ginst=xu, lsu_ginst=spec.lsu_lanes / 32 * chip / 1e9,
                 smem_tbs=spec.smem_bytes_per_clock * chip / 1e12, l2_tbs=l2, dram_tbs=dram, launch_us=launch,
                 fp64_ginst=spec.fp64_lanes / 32 * chip / 1e9, source=source,
                 empty_kernel_us=dict(calibration.empty_kernel_us) if (calibration and use_calibration) else {})


# ----------------------------------------------------------------------------------------------
# A GPU resolved once, at the edge (CLI, TUI, autotune hook), and passed down as one object.
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GPU:
    """A GPU as every computation below the edge sees it: its spec, the rates a roofline divides by,
    and the calibration file those rates come from (None: spec-sheet rates only)."""

    spec: GPUSpec
    rates: Rates
    calibration: str | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def arch(self) -> int:
        return self.spec.arch


def resolve_gpu(name: str, calibrated: bool = True) -> GPU:
    """The GPU a name means (torch's name, the file form or a short name), with its calibrated rates
    unless `calibrated` is False; an unknown name raises one AdvisorError listing the known ones."""
    spec = get_spec(name)
    calibration, path = load_calibration(spec.name) if calibrated else (None, None)
    rates = rates_for(spec.name, calibration, path or "", use_calibration=calibration is not None)
    return GPU(spec, rates, path)
