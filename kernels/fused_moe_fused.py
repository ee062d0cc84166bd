"""Fused variants of the fused-MoE layer's GEMMs (issue 16); `kernels.fused_moe` stays the reference
"previous version".

One kernel, three independent choices (constexpr flags, chosen by the host wrappers below):
- **GATED** (GEMM1 with SiLU-and-mul in its epilogue): a CTA multiplies one A tile by the gate rows
  [n, n + BN/2) and the up rows [I + n, I + n + BN/2) of w1 [E, 2I, H] into two accumulators and
  writes silu(gate) * up: I columns instead of 2I, and no activation kernel. BLOCK_SIZE_N keeps the
  meaning it has in the engines' files (columns of w1 covered per CTA, gate and up together), so a
  config uses the same registers and shared memory per stage as in the previous kernel.
  Two layouts of w1: as it comes (gate rows, then up rows: two dots of BN/2 columns over each A tile,
  so A is read from shared memory twice per K step), or **INTERLEAVED** once at load time by
  `interleave_gate_up` (row 2j = gate j, 2j + 1 = up j: one dot of BN columns, split in the epilogue).
- **ACCUMULATE** (GEMM2 with the router weight and the top-k sum fused): each (token, k) row is
  scaled by its router weight and added with float32 atomics into row `pair // top_k` of a zeroed
  [M, H] float32 output: no [M, top_k, H] intermediate and no sum kernel. The order of the top_k
  additions varies, so the float32 result is not bitwise deterministic (each sum has top_k terms).
- **PERSISTENT** (a tile scheduler over the real tiles): the grid is the SMs times the CTAs one SM
  holds; each program walks tile ids pid, pid + programs, ... below the number of real tiles, read
  on the device from the aligned routing (num_tokens_post_padded / BLOCK_SIZE_M x N blocks), so no
  CTA is launched only to exit and the tail is at most one tile per program.

The layer (`fused_moe_fused`) aligns the routing with `kernels.moe_align` (two Triton launches, one count
for both GEMMs' M blocks) and takes GEMM2's config from files tuned for the new layer's GEMM2 (one folder
per form: with the top-k sum fused or not; `gemm2_dir`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ceilings.errors import AdvisorError
from ceilings.launch import Config
from kernels import fused_moe as fm

# Hopper per-SM limits for the persistent grid's CTAs per SM (CUDA C Programming Guide, compute
# capability 9.0: 227 KB shared memory per block/SM usable, 64K registers, 64 resident warps).
_SM_SHARED_BYTES = 227 * 1024
_SM_REGISTERS = 65536
_SM_WARPS = 64
# Registers a thread needs beside the accumulator (addresses, loop state, epilogue): a rough figure
# from compiled MoE kernels (RESULTS 1 lists 168-255 per thread at 128x256 tiles with 8 warps).
_OTHER_REGISTERS = 72


@triton.jit
def _tile_coords(tile, num_pid_m, num_pid_n, GROUP_SIZE_M: tl.constexpr):
    # Grouped ordering: GROUP_SIZE_M consecutive M blocks sweep the N blocks together, so the
    # weight tiles they share come from L2.
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = tile // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((tile % num_pid_in_group) % group_size_m)
    pid_n = (tile % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _tile(a_ptr, b_ptr, b_desc, c_ptr, topk_weights_ptr, sorted_token_ids_ptr, expert_ids_ptr,
          pid_m, pid_n, N, K, num_valid_tokens, a_div, c_div,
          stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
          BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
          GATED: tl.constexpr, INTERLEAVED: tl.constexpr, ACCUMULATE: tl.constexpr,
          MUL_ROUTED_WEIGHT: tl.constexpr, EVEN_K: tl.constexpr, B_TMA: tl.constexpr,
          compute_type: tl.constexpr):
    # One (M block, N block) output tile. N is the output width: I when GATED (w1 holds 2N rows per
    # expert), else the weight's rows. BN_B: weight rows per load (half the tile for the two-dot
    # gated form, the whole tile otherwise).
    BN_OUT: tl.constexpr = BLOCK_SIZE_N // (1 + GATED)
    BN_B: tl.constexpr = BLOCK_SIZE_N // (1 + GATED - INTERLEAVED)
    TWO_DOTS: tl.constexpr = BN_B != BLOCK_SIZE_N  # gated, w1 as it comes
    offs_m = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    pair = tl.load(sorted_token_ids_ptr + offs_m)
    token_mask = pair < num_valid_tokens
    # 32-bit divisions (a 64-bit one is a called software routine); offsets go 64-bit after.
    a_row = (pair // a_div).to(tl.int64)
    c_row = (pair // c_div).to(tl.int64)
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)

    # Weight rows past the expert's wrap to valid ones so loads need no mask; their columns are never
    # stored. Interleaved w1 rows alternate gate and up, so its tiles run over all 2N rows.
    rows_per_expert = 2 * N if GATED else N
    wrap = N if TWO_DOTS else rows_per_expert
    offs_bn = (pid_n * BN_B + tl.arange(0, BN_B)) % wrap
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + a_row[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + expert * stride_be + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    # First weight row of the tile in the [E * rows, K] view; rows past the tile's own read the up
    # half or the next expert (or TMA's zero fill past the end), into columns that are never stored.
    b_row = (expert * rows_per_expert + pid_n * BN_B).to(tl.int32)

    acc = tl.zeros((BLOCK_SIZE_M, BN_B), dtype=tl.float32)
    if TWO_DOTS:
        acc_up = tl.zeros((BLOCK_SIZE_M, BN_B), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        if EVEN_K:
            a = tl.load(a_ptrs, mask=token_mask[:, None], other=0.0)
        else:
            a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < K - k * BLOCK_SIZE_K), other=0.0)
        k_mask = offs_k[:, None] < K - k * BLOCK_SIZE_K
        if B_TMA:
            b = b_desc.load([b_row, k * BLOCK_SIZE_K]).T
        elif EVEN_K:
            b = tl.load(b_ptrs)
        else:
            b = tl.load(b_ptrs, mask=k_mask, other=0.0)
        acc = tl.dot(a, b, acc)
        if TWO_DOTS:
            # Two dots of half width over one A tile: the up rows lie N rows below the gate rows.
            if B_TMA:
                b_up = b_desc.load([b_row + N, k * BLOCK_SIZE_K]).T
            elif EVEN_K:
                b_up = tl.load(b_ptrs + N * stride_bn)
            else:
                b_up = tl.load(b_ptrs + N * stride_bn, mask=k_mask, other=0.0)
            acc_up = tl.dot(a, b_up, acc_up)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    if GATED:
        if INTERLEAVED:
            # Column 2j is gate j, 2j + 1 is up j: each thread holds such pairs side by side.
            gate, up = tl.split(tl.reshape(acc, (BLOCK_SIZE_M, BN_OUT, 2)))
        else:
            gate, up = acc, acc_up
        # SiLU in float32, as the separate activation computes it; the GEMM's bf16 rounding of gate
        # and up is skipped, so this is closer to the float32 reference than the unfused path.
        out = gate / (1.0 + tl.exp(-gate)) * up
    else:
        out = acc
    if MUL_ROUTED_WEIGHT:
        weight = tl.load(topk_weights_ptr + pair, mask=token_mask, other=0.0)
        out = out * weight[:, None]

    offs_cn = pid_n * BN_OUT + tl.arange(0, BN_OUT)
    c_ptrs = c_ptr + c_row[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    c_mask = token_mask[:, None] & (offs_cn[None, :] < N)
    if ACCUMULATE:
        tl.atomic_add(c_ptrs, out, mask=c_mask, sem="relaxed")
    else:
        tl.store(c_ptrs, out.to(compute_type), mask=c_mask)


@triton.jit(do_not_specialize=["EM", "num_valid_tokens", "num_programs"])
def fused_moe_fused_kernel(
    # Pointers: A rows gathered through sorted_token_ids; B [E, rows, K] (rows = 2N when GATED);
    # C [pairs, N] (compute dtype) or, when ACCUMULATE, [M, N] float32 zeroed by the host.
    # b_desc: TMA descriptor of B viewed as [E * rows, K] when B_TMA, else None.
    a_ptr, b_ptr, b_desc, c_ptr, topk_weights_ptr,
    sorted_token_ids_ptr, expert_ids_ptr, num_tokens_post_padded_ptr,
    # Sizes: N = output columns; EM = length of sorted_token_ids; num_valid_tokens = M * top_k;
    # a_div / c_div: pair -> row of A / of C (top_k or 1); num_programs: the grid when PERSISTENT.
    N, K, EM, num_valid_tokens, a_div, c_div, num_programs,
    # Strides, in elements.
    stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
    # Meta-parameters.
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    GATED: tl.constexpr, INTERLEAVED: tl.constexpr, ACCUMULATE: tl.constexpr, MUL_ROUTED_WEIGHT: tl.constexpr,
    PERSISTENT: tl.constexpr,
    EVEN_K: tl.constexpr, B_TMA: tl.constexpr, compute_type: tl.constexpr,
):
    BN_OUT: tl.constexpr = BLOCK_SIZE_N // (1 + GATED)
    num_pid_n = tl.cdiv(N, BN_OUT)
    num_tokens_post_padded = tl.load(num_tokens_post_padded_ptr)
    if PERSISTENT:
        # Only the real M blocks count: the grouped order runs over them alone.
        num_pid_m = tl.cdiv(num_tokens_post_padded, BLOCK_SIZE_M)
        for tile in range(tl.program_id(0), num_pid_m * num_pid_n, num_programs):
            pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_SIZE_M)
            _tile(a_ptr, b_ptr, b_desc, c_ptr, topk_weights_ptr, sorted_token_ids_ptr, expert_ids_ptr,
                  pid_m, pid_n, N, K, num_valid_tokens, a_div, c_div,
                  stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
                  BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GATED, INTERLEAVED, ACCUMULATE, MUL_ROUTED_WEIGHT,
                  EVEN_K, B_TMA, compute_type)
    else:
        # The grid is sized for the worst routing; blocks past the real padded count exit.
        pid_m, pid_n = _tile_coords(tl.program_id(0), tl.cdiv(EM, BLOCK_SIZE_M), num_pid_n, GROUP_SIZE_M)
        if pid_m * BLOCK_SIZE_M < num_tokens_post_padded:
            _tile(a_ptr, b_ptr, b_desc, c_ptr, topk_weights_ptr, sorted_token_ids_ptr, expert_ids_ptr,
                  pid_m, pid_n, N, K, num_valid_tokens, a_div, c_div,
                  stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
                  BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GATED, INTERLEAVED, ACCUMULATE, MUL_ROUTED_WEIGHT,
                  EVEN_K, B_TMA, compute_type)


def ctas_per_sm(config: Config, dtype_bytes: int = 2) -> int:
    """CTAs of `config` one Hopper SM holds, estimated from its tiles (the persistent grid's factor):
    the least of the shared-memory, register and warp limits, at least 1."""
    bm, bn, bk = config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"]
    shared = (bm * bk + bk * bn) * dtype_bytes * max(config.num_stages - 1, 1)
    regs = (bm * bn // (32 * config.num_warps) + _OTHER_REGISTERS) * 32 * config.num_warps
    return max(1, min(_SM_SHARED_BYTES // shared, _SM_REGISTERS // regs, _SM_WARPS // config.num_warps))


def persistent_grid(em: int, n_out: int, config: Config, gated: bool, num_sms: int) -> tuple[int]:
    """Programs of the persistent kernel: the SMs times the CTAs each holds, no more than the tiles
    the worst routing could give."""
    bn_out = config["BLOCK_SIZE_N"] // 2 if gated else config["BLOCK_SIZE_N"]
    worst = triton.cdiv(em, config["BLOCK_SIZE_M"]) * triton.cdiv(n_out, bn_out)
    return (max(1, min(worst, num_sms * ctas_per_sm(config))),)


def gemm_grid(em: int, n_out: int, config: Config, gated: bool) -> tuple[int]:
    bn_out = config["BLOCK_SIZE_N"] // 2 if gated else config["BLOCK_SIZE_N"]
    return (triton.cdiv(em, config["BLOCK_SIZE_M"]) * triton.cdiv(n_out, bn_out),)


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4  # the CPU interpreter: a few programs, so the loop over tiles is exercised


def interleave_gate_up(w1: torch.Tensor) -> torch.Tensor:
    """w1 [E, 2I, H] (gate rows, then up rows) -> [E, 2I, H] with row 2j = gate j and 2j + 1 = up j:
    the layout `interleaved=True` reads. Done once, where the weights are loaded."""
    e, two_i, h = w1.shape
    if two_i % 2:
        raise AdvisorError(f"w1 has {two_i} rows per expert; gate and up halves need an even count (2I)")
    return torch.stack((w1[:, : two_i // 2], w1[:, two_i // 2:]), dim=2).reshape(e, two_i, h).contiguous()


def invoke_fused_gemm(a, w, c, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
                      top_k: int, config: Config, gated: bool, accumulate: bool, persistent: bool = False,
                      b_tma: bool | None = None, interleaved: bool = False):
    """One GEMM of the layer in the fused kernel.

    gated (GEMM1): a [M, K] hidden, w [E, 2I, K], c [M * top_k, I] (dtype of a) = silu(gate) * up.
    accumulate (GEMM2): a [M * top_k, K] activation, w [E, H, K], c [M, H] float32, zeroed by the
    caller; c[t] += weight[t, k] * a[t * top_k + k] @ w[expert]^T.
    Neither: C[pair] = A[pair // top_k] @ W^T, as `kernels.fused_moe.invoke_fused_moe_gemm`.
    interleaved (with gated): w is `interleave_gate_up(w1)`.
    """
    if a.dtype not in fm._TL_DTYPES or w.dtype != a.dtype:
        raise AdvisorError(f"fused MoE GEMM takes bf16 or fp16 A and W of one dtype; got A {a.dtype}, W {w.dtype}")
    if a.shape[1] != w.shape[2]:
        raise AdvisorError(f"A has K={a.shape[1]} but W is {tuple(w.shape)} ([E, N, K]); hidden sizes differ")
    want = torch.float32 if accumulate else a.dtype
    if c.dtype != want:
        raise AdvisorError(f"C is {c.dtype}; this GEMM writes {want}")
    if gated and w.shape[1] % 2:
        raise AdvisorError(f"w1 has {w.shape[1]} rows per expert; the gated GEMM needs gate and up halves (2I)")
    if gated and config["BLOCK_SIZE_N"] < 32:
        raise AdvisorError(f"BLOCK_SIZE_N={config['BLOCK_SIZE_N']} splits into gate and up halves under 16 "
                           "columns; use BLOCK_SIZE_N >= 32")
    if interleaved and not gated:
        raise AdvisorError("interleaved gate/up weights are for the gated GEMM1; pass gated=True")
    n_out = w.shape[1] // 2 if gated else w.shape[1]
    if c.shape[-1] != n_out:
        raise AdvisorError(f"C has {c.shape[-1]} columns but this GEMM gives {n_out}")
    k = w.shape[2]
    em = sorted_token_ids.shape[0]
    if b_tma is None:
        b_tma = fm.tma_supported(w)
    b_desc = None
    if b_tma:
        rows = config["BLOCK_SIZE_N"] // 2 if gated and not interleaved else config["BLOCK_SIZE_N"]
        b_desc = fm.TensorDescriptor(w, [w.shape[0] * w.shape[1], k], [w.stride(1), 1],
                                     [rows, config["BLOCK_SIZE_K"]])
    if persistent:
        grid = persistent_grid(em, n_out, config, gated, _num_sms(a.device))
    else:
        grid = gemm_grid(em, n_out, config, gated)
    fused_moe_fused_kernel[grid](
        a, w, b_desc, c, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
        n_out, k, em, topk_weights.numel(), 1 if accumulate else top_k, top_k if accumulate else 1, grid[0],
        a.stride(0), a.stride(1), w.stride(0), w.stride(1), w.stride(2), c.stride(0), c.stride(1),
        GATED=gated, INTERLEAVED=interleaved, ACCUMULATE=accumulate, MUL_ROUTED_WEIGHT=accumulate,
        PERSISTENT=persistent,
        EVEN_K=k % config["BLOCK_SIZE_K"] == 0, B_TMA=b_tma, compute_type=fm._TL_DTYPES[a.dtype],
        num_warps=config.num_warps, num_stages=config.num_stages, **config.params,
    )
    return c


# GEMM2's tuned files (same names and format as the engines'), beside GEMM1's in FUSED_DIR: one folder per
# form of GEMM2, since the best tile differs with the epilogue (bf16 stores then a sum kernel, or float32
# atomics). Their side files record GEMM2 timed with its sum, so the two forms' times compare.
GEMM2_FOLDERS = {False: "gemm2", True: "gemm2_sum"}


def gemm2_dir(fuse_sum: bool):
    from kernels import moe_configs  # late: moe_configs imports kernels.fused_moe

    return moe_configs.FUSED_DIR / GEMM2_FOLDERS[fuse_sum]


def layer_configs(m: int, num_experts: int, inter: int, top_k: int, device_name: str | None,
                  fused_gemm1: bool = True, fuse_sum: bool | None = None
                  ) -> tuple[tuple[Config, str], tuple[Config, str]]:
    """(config, where it came from) of GEMM1 and of GEMM2 for M tokens when the caller gives none.

    GEMM1 with the fused activation: the file tuned for it (`moe_configs.FUSED_DIR`, tuned on interleaved
    w1, used for both w1 layouts), else the previous kernel's tuned file, else the default rule. An
    unfused GEMM1: the previous kernel's file, else the default rule, as `kernels.fused_moe`. GEMM2, when
    `fuse_sum` says its form: the file tuned for that form (`gemm2_dir`), else as an unfused GEMM1;
    fuse_sum None: the previous kernel's file (else the default rule).
    """
    from kernels import moe_configs  # late: moe_configs imports kernels.fused_moe

    fused_dir = moe_configs.FUSED_DIR if fused_gemm1 else None
    gemm1 = moe_configs.get_config(m, num_experts, inter, top_k, device_name, config_dir=fused_dir)
    gemm2 = moe_configs.get_config(m, num_experts, inter, top_k, device_name,
                                   config_dir=None if fuse_sum is None else gemm2_dir(fuse_sum))
    return gemm1, gemm2


def choose_fuse_sum(m: int, num_experts: int, inter: int, device_name: str | None) -> bool:
    """Whether GEMM2 should fuse the top-k sum for M tokens: the form whose tuned file's side file
    measured GEMM2 with its sum faster at the token count nearest M; True (no sum kernel) when either
    form has no measured entry for this shape and GPU."""
    from kernels import moe_configs

    if not device_name:
        return True
    name = moe_configs.config_file_name(num_experts, inter, device_name)
    faster = moe_configs.faster_form({fused: moe_configs.FUSED_DIR / GEMM2_FOLDERS[fused] / name
                                      for fused in (True, False)}, m)
    return faster is not False


def fused_moe_fused(hidden, w1, w2, topk_weights, topk_ids, config: Config | None = None,
                    config2: Config | None = None, fuse_act: bool = True, fuse_sum: bool | None = None,
                    persistent: bool = False, b_tma: bool | None = None,
                    w1_interleaved: bool = False, align: str = "triton") -> torch.Tensor:
    """The layer of `kernels.fused_moe.fused_moe` with the chosen fusions; same arguments and result.

    fuse_act: GEMM1 writes silu(gate) * up (no activation kernel); else GEMM1 and silu_and_mul as before.
    fuse_sum: GEMM2 adds weighted rows into a float32 [M, H] (no top-k sum kernel); False: GEMM2 stores
    [M, top_k, H] and one torch sum follows; None: `choose_fuse_sum` for this GPU (True on the CPU).
    persistent: GEMM1 (and the fused-sum GEMM2) run as persistent programs over the real tiles.
    w1_interleaved: w1 is `interleave_gate_up(w1)` (prepared once); needs fuse_act.
    align: "triton" (`kernels.moe_align`: two launches, one count for both GEMMs' M blocks) or "torch"
    (`kernels.fused_moe.moe_align_block_size`, once per distinct M block; the reference).
    config None: `layer_configs` for this GPU (GEMM1 from the files tuned for the fused kernel, GEMM2 from
    those tuned for its form); config2 None: the config given for GEMM1, or, when that is None too,
    `layer_configs`'s GEMM2 config.
    """
    from kernels.moe_align import moe_align_triton  # late: kernels.moe_align imports kernels.fused_moe

    fm._check_layer(hidden, w1, w2, topk_weights, topk_ids)
    if w1_interleaved and not fuse_act:
        raise AdvisorError("interleaved w1 is read only by the fused activation; pass fuse_act=True")
    if align not in ("triton", "torch"):
        raise AdvisorError(f"align={align!r} is not an align implementation; use 'triton' or 'torch'")
    m, h = hidden.shape
    e, two_i, _ = w1.shape
    top_k = topk_ids.shape[1]
    device_name = torch.cuda.get_device_name(hidden.device) if hidden.is_cuda else None
    if fuse_sum is None:
        fuse_sum = choose_fuse_sum(m, e, two_i // 2, device_name)
    if config is None:
        (config, _), (tuned2, _) = layer_configs(m, e, two_i // 2, top_k, device_name, fused_gemm1=fuse_act,
                                                 fuse_sum=fuse_sum)
        config2 = config2 or tuned2
    config2 = config2 or config
    topk_weights = topk_weights.to(torch.float32).contiguous()
    dev = hidden.device

    bm1, bm2 = config["BLOCK_SIZE_M"], config2["BLOCK_SIZE_M"]
    if align == "triton":
        aligned = moe_align_triton(topk_ids, (bm1, bm2), e)
        align1, align2 = aligned[0], aligned[-1]
    else:
        align1 = fm.moe_align_block_size(topk_ids, bm1, e)
        align2 = align1 if bm2 == bm1 else fm.moe_align_block_size(topk_ids, bm2, e)
    if fuse_act:
        act = torch.empty((m * top_k, two_i // 2), dtype=hidden.dtype, device=dev)
        invoke_fused_gemm(hidden, w1, act, topk_weights, *align1, top_k=top_k, config=config, gated=True,
                          accumulate=False, persistent=persistent, b_tma=b_tma, interleaved=w1_interleaved)
    else:
        inter = torch.empty((m * top_k, two_i), dtype=hidden.dtype, device=dev)
        invoke_fused_gemm(hidden, w1, inter, topk_weights, *align1, top_k=top_k, config=config, gated=False,
                          accumulate=False, persistent=persistent, b_tma=b_tma)
        act = fm.silu_and_mul(inter)
    if fuse_sum:
        out = torch.zeros((m, h), dtype=torch.float32, device=dev)
        invoke_fused_gemm(act, w2, out, topk_weights, *align2, top_k=top_k, config=config2, gated=False,
                          accumulate=True, persistent=persistent, b_tma=b_tma)
        return out.to(hidden.dtype)
    out = torch.empty((m, top_k, h), dtype=hidden.dtype, device=dev)
    fm.invoke_fused_moe_gemm(act, w2, out, topk_weights, *align2, top_k=1, mul_routed_weight=True,
                             config=config2, b_tma=b_tma)
    # One kernel: torch sums bf16 in float32 and rounds once, as sum(dtype=float32).to(bf16) does in two.
    return out.sum(dim=1)
