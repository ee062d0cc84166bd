"""A measurable GEMM of the fused-MoE layer: inputs, routing, reference and a runner per config.

`MoEGemmCase` builds GEMM1 (hidden x w1) or GEMM2 (activation x w2, router weight applied) for one
shape and token count with uniform random top-k routing on random data, the float32 reference, and
runs the shipped kernel for any config. `compile_config` compiles one config for such a case in
another process without launching it, so sweeps can compile in parallel.

VARIANTS name the kernels a case can run (issue 16): "previous" is `kernels.fused_moe`'s GEMM;
"fused" is `kernels.fused_moe_fused` with GEMM1's SiLU-and-mul (GEMM1) or GEMM2's router weight and
top-k sum (GEMM2) in the epilogue; "persistent" the same GEMM as "previous" in the fused module's
persistent tile loop; "fused-persistent" both; "fused-il" and "fused-il-persistent" GEMM1's fused
forms on gate/up-interleaved w1 (`interleave_gate_up`, prepared once per case, not timed). A variant's
output and reference are what it computes:
[pairs, N / 2] after SiLU-and-mul, [M, N] float32 after the top-k sum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from ceilings.errors import AdvisorError
from ceilings.launch import Config, Launch, TensorArg
from kernels import fused_moe as fm
from kernels import fused_moe_fused as ff
from kernels.warmup import loaded_resources

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class MoEGemmSpec:
    """What to build: (E, top_k, K, N) of one GEMM, M tokens, which GEMM, dtype."""

    num_experts: int
    top_k: int
    k: int
    n: int
    m: int
    gemm: int = 1
    dtype: str = "bfloat16"
    b_tma: bool | None = None  # read weights through a TMA descriptor; None: wherever supported

    @property
    def shape_label(self) -> str:
        return f"E{self.num_experts}_top{self.top_k}_K{self.k}_N{self.n}"

    @property
    def engine_file_n(self) -> int:
        """The N of the engines' config file names, the intermediate size per rank: GEMM1's N holds gate
        and up side by side (2 x I), GEMM2's K is I."""
        return self.n // 2 if self.gemm == 1 else self.k

    @property
    def pairs(self) -> int:
        return self.m * self.top_k

    def flops(self) -> int:
        """Useful tensor FLOPs: each (token, k) pair is one row times an N x K weight."""
        return 2 * self.pairs * self.k * self.n

    def compile_signature(self, config: Config) -> tuple:
        """The facts the JIT specialises on for this kernel: configs compiled once per signature.

        Integers divisible by 16 or equal to 1 are specialised (ANCHORS section 5); EM and
        num_valid_tokens are marked do_not_specialize in the kernel.
        """
        ints = (self.n, self.k, self.top_k if self.gemm == 1 else 1, self.n * self.k)
        return (self.dtype, self.gemm, self.b_tma, self.k % config["BLOCK_SIZE_K"] == 0,
                tuple((v % 16 == 0, v == 1) for v in ints))


class MoEGemmCase:
    """GEMM inputs on a device, the routing, the float32 reference and an output buffer."""

    def __init__(self, spec: MoEGemmSpec, device: str = "cuda", seed: int = 0):
        if spec.dtype not in _DTYPES:
            raise AdvisorError(f"dtype {spec.dtype!r} is not one of {sorted(_DTYPES)}")
        self.spec = spec
        self.device = device
        gen = torch.Generator(device=device).manual_seed(seed)
        dtype = _DTYPES[spec.dtype]
        e, k, n, m, top_k = spec.num_experts, spec.k, spec.n, spec.m, spec.top_k
        self.topk_weights, self.topk_ids = fm.route(m, e, top_k, device=device, generator=gen)
        rows = m if spec.gemm == 1 else m * top_k
        # Scaled so outputs stay O(1) and bf16 rounding, not overflow, sets the error.
        self.a = torch.randn(rows, k, device=device, generator=gen).to(dtype)
        self.w = (torch.randn(e, n, k, device=device, generator=gen) / math.sqrt(k)).to(dtype)
        self.out = torch.empty(m * top_k, n, device=device, dtype=dtype)
        self.reference = fm.fused_moe_gemm_reference(
            self.a, self.w, self.topk_ids, top_k if spec.gemm == 1 else 1,
            self.topk_weights if spec.gemm == 2 else None)
        self._align: dict[int, tuple] = {}
        self._outputs: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self._w_interleaved: torch.Tensor | None = None

    @property
    def experts_routed(self) -> int:
        return int(torch.unique(self.topk_ids).numel())

    def expert_counts(self) -> list[int]:
        """(token, k) pairs routed to each expert: what sets the padding of the M blocks."""
        return torch.bincount(self.topk_ids.reshape(-1).long(), minlength=self.spec.num_experts).tolist()

    def info(self) -> dict:
        return {"expert_counts": self.expert_counts()}

    def compulsory_bytes(self) -> int:
        """Weights of the experts actually routed to, plus A read once and C written once."""
        size = self.a.element_size()
        return size * (self.experts_routed * self.spec.n * self.spec.k + self.a.numel() + self.out.numel())

    def align(self, block_m: int):
        if block_m not in self._align:
            self._align[block_m] = fm.moe_align_block_size(self.topk_ids, block_m, self.spec.num_experts)
        return self._align[block_m]

    def runner(self, config: Config):
        """A no-argument function that launches the kernel once for `config` into self.out."""
        align = self.align(config["BLOCK_SIZE_M"])
        gemm1 = self.spec.gemm == 1
        weights = self.topk_weights

        def run():
            fm.invoke_fused_moe_gemm(self.a, self.w, self.out, weights, *align,
                                     top_k=self.spec.top_k if gemm1 else 1,
                                     mul_routed_weight=not gemm1, config=config, b_tma=self.spec.b_tma)
        return run

    def variant_output(self, variant: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(output buffer, float32 reference) of `variant`."""
        fused = _variant_flags(variant)[0]
        if not fused:
            return self.out, self.reference
        if "-il" in variant and "fused" + variant.partition("-il")[2] in self._outputs:
            return self._outputs["fused" + variant.partition("-il")[2]]
        if variant not in self._outputs:
            spec, ref = self.spec, self.reference
            if spec.gemm == 1:
                half = spec.n // 2
                ref = torch.nn.functional.silu(ref[:, :half]) * ref[:, half:]
                out = torch.empty(spec.pairs, half, device=self.device, dtype=self.out.dtype)
            else:
                ref = ref.view(spec.m, spec.top_k, spec.n).sum(dim=1)
                out = torch.zeros(spec.m, spec.n, device=self.device, dtype=torch.float32)
            self._outputs[variant] = (out, ref)
        return self._outputs[variant]

    def variant_runner(self, config: Config, variant: str):
        """A no-argument launch of `variant` for `config`. A fused GEMM2 adds into its output: the
        runner zeroes it first (a memset, part of what the fused layer does too)."""
        if variant == "previous":
            return self.runner(config)
        fused, persistent = _variant_flags(variant)
        align = self.align(config["BLOCK_SIZE_M"])
        out, _ = self.variant_output(variant)
        gemm1 = self.spec.gemm == 1
        accumulate = fused and not gemm1
        if not gemm1 and not fused:
            raise AdvisorError("the persistent GEMM2 without the fused sum is not a variant; use 'fused-persistent'")
        interleaved = _interleaved(self.spec, variant)
        if interleaved and self._w_interleaved is None:
            self._w_interleaved = ff.interleave_gate_up(self.w)
        w = self._w_interleaved if interleaved else self.w

        def run():
            if accumulate:
                out.zero_()
            ff.invoke_fused_gemm(self.a, w, out, self.topk_weights, *align, top_k=self.spec.top_k,
                                 config=config, gated=fused and gemm1, accumulate=accumulate,
                                 persistent=persistent, b_tma=self.spec.b_tma, interleaved=interleaved)
        return run

    def launch(self, config: Config) -> Launch:
        return describe_launch(self.spec, config)


VARIANTS = ("previous", "fused", "fused-il", "persistent", "fused-persistent", "fused-il-persistent")


def _variant_flags(variant: str) -> tuple[bool, bool]:
    """(fused epilogue, persistent) of a variant name."""
    if variant not in VARIANTS:
        raise AdvisorError(f"kernel variant {variant!r} is not one of {', '.join(VARIANTS)}")
    return variant.startswith("fused"), variant.endswith("persistent")


def _interleaved(spec: MoEGemmSpec, variant: str) -> bool:
    if "-il" in variant and spec.gemm != 1:
        raise AdvisorError(f"variant {variant!r} interleaves w1's gate and up rows: GEMM1 only")
    return "-il" in variant


def describe_fused_launch(spec: MoEGemmSpec, config: Config, variant: str, num_sms: int = 132) -> Launch:
    """The Launch of `kernels.fused_moe_fused`'s kernel for a variant other than "previous" (weights
    through TMA as `describe_launch` decides), for AOT compiles and ceilings."""
    fused, persistent = _variant_flags(variant)
    if not fused and not persistent:
        raise AdvisorError("'previous' is kernels.fused_moe's kernel; use describe_launch")
    gated, accumulate = fused and spec.gemm == 1, fused and spec.gemm == 2
    interleaved = _interleaved(spec, variant)
    if spec.gemm == 2 and not fused:
        raise AdvisorError("the persistent GEMM2 without the fused sum is not a variant; use 'fused-persistent'")
    dtype = spec.dtype
    b_tma = spec.b_tma if spec.b_tma is not None else True
    bm, bk = config["BLOCK_SIZE_M"], config["BLOCK_SIZE_K"]
    bn_out = config["BLOCK_SIZE_N"] // 2 if gated else config["BLOCK_SIZE_N"]
    b_rows = bn_out if gated and not interleaved else config["BLOCK_SIZE_N"]
    n_out = spec.n // 2 if gated else spec.n
    em = math.ceil(fm.max_padded_tokens(spec.pairs, spec.num_experts, bm) / bm) * bm
    rows = spec.m if spec.gemm == 1 else spec.pairs
    c_rows, c_dtype = (spec.m, "float32") if accumulate else (spec.pairs, dtype)
    descriptor = (TensorArg("b_desc", (spec.num_experts * spec.n, spec.k), dtype, (spec.k, 1),
                            (b_rows, bk)),) if b_tma else ()
    tensors = (
        TensorArg.contiguous("a_ptr", (rows, spec.k), dtype),
        TensorArg.contiguous("b_ptr", (spec.num_experts, spec.n, spec.k), dtype),
        *descriptor,
        TensorArg.contiguous("c_ptr", (c_rows, n_out), c_dtype),
        TensorArg.contiguous("topk_weights_ptr", (spec.m, spec.top_k), "float32"),
        TensorArg.contiguous("sorted_token_ids_ptr", (em,), "int32"),
        TensorArg.contiguous("expert_ids_ptr", (em // bm,), "int32"),
        TensorArg.contiguous("num_tokens_post_padded_ptr", (1,), "int32"),
    )
    grid = (ff.persistent_grid(em, n_out, config, gated, num_sms) if persistent
            else ff.gemm_grid(em, n_out, config, gated))
    scalars = {**({} if b_tma else {"b_desc": None}), "N": n_out, "K": spec.k, "EM": em,
               "num_valid_tokens": spec.pairs,
               "a_div": 1 if accumulate else spec.top_k, "c_div": spec.top_k if accumulate else 1,
               "num_programs": grid[0],
               "stride_am": spec.k, "stride_ak": 1, "stride_be": spec.n * spec.k, "stride_bn": spec.k,
               "stride_bk": 1, "stride_cm": n_out, "stride_cn": 1}
    constexprs = {"GATED": gated, "INTERLEAVED": interleaved, "ACCUMULATE": accumulate,
                  "MUL_ROUTED_WEIGHT": accumulate,
                  "PERSISTENT": persistent, "EVEN_K": spec.k % bk == 0, "B_TMA": b_tma, "compute_type": dtype}
    return Launch(source=str(Path(ff.__file__).resolve()), kernel="fused_moe_fused_kernel", grid=grid,
                  tensors=tensors, scalars=scalars, constexprs=constexprs, config=config)


def describe_launch(spec: MoEGemmSpec, config: Config, arch: int = 90) -> Launch:
    """The Launch of the shipped kernel for this GEMM and config on sm_`arch`, as a trace records it.

    Weights go through a TMA descriptor when the spec says so, or (b_tma=None) on Hopper and newer,
    as `invoke_fused_moe_gemm` chooses for contiguous weights.
    """
    dtype = spec.dtype
    b_tma = spec.b_tma if spec.b_tma is not None else arch >= 90
    bm = config["BLOCK_SIZE_M"]
    em = math.ceil(fm.max_padded_tokens(spec.pairs, spec.num_experts, bm) / bm) * bm
    rows = spec.m if spec.gemm == 1 else spec.pairs
    descriptor = (TensorArg("b_desc", (spec.num_experts * spec.n, spec.k), dtype, (spec.k, 1),
                            (config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"])),) if b_tma else ()
    tensors = (
        TensorArg.contiguous("a_ptr", (rows, spec.k), dtype),
        TensorArg.contiguous("b_ptr", (spec.num_experts, spec.n, spec.k), dtype),
        *descriptor,
        TensorArg.contiguous("c_ptr", (spec.pairs, spec.n), dtype),
        TensorArg.contiguous("topk_weights_ptr", (spec.m, spec.top_k), "float32"),
        TensorArg.contiguous("sorted_token_ids_ptr", (em,), "int32"),
        TensorArg.contiguous("expert_ids_ptr", (em // bm,), "int32"),
        TensorArg.contiguous("num_tokens_post_padded_ptr", (1,), "int32"),
    )
    scalars = {**({} if b_tma else {"b_desc": None}), "N": spec.n, "K": spec.k, "EM": em,
               "num_valid_tokens": spec.pairs,
               "top_k": spec.top_k if spec.gemm == 1 else 1,
               "stride_am": spec.k, "stride_ak": 1, "stride_be": spec.n * spec.k, "stride_bn": spec.k,
               "stride_bk": 1, "stride_cm": spec.n, "stride_cn": 1}
    constexprs = {"MUL_ROUTED_WEIGHT": spec.gemm == 2, "EVEN_K": spec.k % config["BLOCK_SIZE_K"] == 0,
                  "B_TMA": b_tma, "compute_type": dtype}
    return Launch(source=str(Path(fm.__file__).resolve()), kernel="fused_moe_kernel",
                  grid=fm.gemm_grid(em, spec.n, config), tensors=tensors, scalars=scalars,
                  constexprs=constexprs, config=config)


def compile_config(spec: MoEGemmSpec, config: Config) -> dict:
    """Compile (no launch) the kernel for `config` with `spec`'s specialisation, on the current GPU.

    Tiny tensors stand in for the real ones: pointers from the allocator are 16-byte aligned like
    the real ones, and the integer arguments are the real values, so the JIT caches the very kernel
    the real launch will look up. Returns registers, spills and shared bytes; raises on failure.
    """
    dtype = _DTYPES[spec.dtype]
    dev = "cuda"
    a = torch.empty(16, 16, dtype=dtype, device=dev)
    w = torch.empty(1, 16, 16, dtype=dtype, device=dev)
    b_tma = fm.tma_supported(w) if spec.b_tma is None else spec.b_tma
    c = torch.empty(16, 16, dtype=dtype, device=dev)
    tw = torch.empty(16, dtype=torch.float32, device=dev)
    ids = torch.empty(16, dtype=torch.int32, device=dev)
    launch = describe_launch(spec, config)
    s = dict(launch.scalars)
    kernel = fm.fused_moe_kernel.warmup(
        a, w, fm.weight_descriptor(w, config) if b_tma else None, c, tw, ids, ids, ids,
        s["N"], s["K"], s["EM"], s["num_valid_tokens"], s["top_k"],
        s["stride_am"], s["stride_ak"], s["stride_be"], s["stride_bn"], s["stride_bk"],
        s["stride_cm"], s["stride_cn"],
        grid=(1,),
        MUL_ROUTED_WEIGHT=spec.gemm == 2, EVEN_K=spec.k % config["BLOCK_SIZE_K"] == 0, B_TMA=b_tma,
        compute_type=fm._TL_DTYPES[dtype],
        num_warps=config.num_warps, num_stages=config.num_stages, **config.params)
    return loaded_resources(kernel)


ENGINE_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M")


def row_config(row: dict) -> Config:
    """The config of a fused-MoE sweep row (its engine keys, warps and stages)."""
    return Config({k: int(row[k]) for k in ENGINE_KEYS}, num_warps=int(row["num_warps"]),
                  num_stages=int(row["num_stages"]))


def compile_fused_config(spec: MoEGemmSpec, config: Config, variant: str) -> dict:
    """`compile_config` for a variant of `kernels.fused_moe_fused` (tiny stand-in tensors, the real
    integer arguments of `describe_fused_launch`, so the JIT caches the kernel the real launch uses)."""
    launch = describe_fused_launch(spec, config, variant)
    dtype = _DTYPES[spec.dtype]
    dev = "cuda"
    a = torch.empty(16, 16, dtype=dtype, device=dev)
    w = torch.empty(1, 32, 16, dtype=dtype, device=dev)
    b_tma = fm.tma_supported(w) if spec.b_tma is None else spec.b_tma
    c_dtype = torch.float32 if launch.scalar("ACCUMULATE") else dtype
    c = torch.empty(16, 16, dtype=c_dtype, device=dev)
    tw = torch.empty(16, dtype=torch.float32, device=dev)
    ids = torch.empty(16, dtype=torch.int32, device=dev)
    desc = None
    if b_tma:
        desc = fm.TensorDescriptor(w, [32, 16], [16, 1], list(launch.tensor("b_desc").block_shape))
    s = dict(launch.scalars)
    flags = {k: v for k, v in launch.constexprs if k != "B_TMA" and k != "compute_type"}
    kernel = ff.fused_moe_fused_kernel.warmup(
        a, w, desc, c, tw, ids, ids, ids,
        s["N"], s["K"], s["EM"], s["num_valid_tokens"], s["a_div"], s["c_div"], s["num_programs"],
        s["stride_am"], s["stride_ak"], s["stride_be"], s["stride_bn"], s["stride_bk"],
        s["stride_cm"], s["stride_cn"],
        grid=(1,), B_TMA=b_tma, compute_type=fm._TL_DTYPES[dtype], **flags,
        num_warps=config.num_warps, num_stages=config.num_stages, **config.params)
    return loaded_resources(kernel)
