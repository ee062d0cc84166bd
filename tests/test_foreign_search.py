"""The search over a kernel the advisor has no model of: operand tiles sized by what the dots read, grid
and buffers that follow every tile (padded size arguments too), a global search that stays inside the
kernel's space, and the trace's GPU honoured by every command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.advice.config_space import around, config_distance, guided_pick
from advisor.advice.launch_rule import launch_rule
from advisor.advice.operands import dot_operand_args, operand_element_bytes
from advisor.advice.subjects import LaunchSubject, tile_precheck
from advisor.cli import main
from ceilings.compile import load_kernel
from ceilings.errors import AdvisorError
from ceilings.hardware import get_spec, resolve_gpu
from ceilings.launch import Config, Launch

FIXTURES = Path(__file__).resolve().parent / "fixtures"
H100 = get_spec("h100")


def moe_launch() -> Launch:
    """A bf16 fused-MoE GEMM launch whose routing weights are float32 (as the serving engines pass them)."""
    from advisor.capture.trace import read_trace

    return read_trace(FIXTURES / "moe_mma_sync_launch.json").launches[0]


# ------------------------------------------------------------------------------ operand tiles

def test_moe_tiles_are_sized_by_the_dot_operands_not_the_float32_router_weights():
    launch = moe_launch()
    assert {t.dtype for t in launch.tensors} >= {"bfloat16", "float32"}
    fn = load_kernel(launch.source, launch.kernel)
    assert {"a_ptr", "b_ptr"} <= dot_operand_args(fn) and "topk_weights_ptr" not in dot_operand_args(fn)
    assert operand_element_bytes(launch, fn) == 2
    config = launch.config.replace(BLOCK_SIZE_M=64, BLOCK_SIZE_N=128, BLOCK_SIZE_K=128, num_stages=4)
    # Sized at 4 B (the largest element among all tensors) the tiles would not fit: the refusal.
    assert "294912 B" in tile_precheck(config, H100, 4)
    subject = LaunchSubject(launch, resolve_gpu("h100"))
    assert subject.precheck(config) is None


def test_dot_operands_follow_loads_to_their_base_pointer(tmp_path):
    src = tmp_path / "gathered.py"
    src.write_text('''
import triton
import triton.language as tl


@triton.jit
def gathered_kernel(a_ptr, b_ptr, idx_ptr, w_ptr, c_ptr, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr):
    rows = tl.load(idx_ptr + tl.arange(0, BLOCK_M))
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        acc = tl.dot(a, b.to(tl.float16), acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * BLOCK_N
    w = tl.load(w_ptr + rows)
    tl.store(c_ptr + tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :], acc * w[:, None])
''')
    fn = load_kernel(src, "gathered_kernel")
    assert dot_operand_args(fn) == {"a_ptr", "b_ptr"}  # not the int32 index nor the float32 weights


def test_a_kernel_without_matrix_products_has_no_operand_tiles():
    from advisor.capture.trace import read_trace

    fn = load_kernel(FIXTURES / "styles" / "tut02_fused_softmax.py", "softmax_kernel")
    assert dot_operand_args(fn) == set()
    launch = read_trace(FIXTURES / "matmul_launch.json").launches[0]
    assert operand_element_bytes(launch, fn) is None


# ------------------------------------------------------------------------------ grid and buffers

def test_a_padded_size_argument_follows_block_size_m_with_its_grid_and_buffers():
    launch = moe_launch()
    rule = launch_rule(launch)
    assert [p.name for p in rule.padded] == ["EM"]
    assert rule(launch.config).grid == launch.grid  # the recorded launch is reproduced
    m64 = rule(launch.config.replace(BLOCK_SIZE_M=64))
    em = dict(m64.scalars)["EM"]
    # 2048 token-expert pairs over 8 experts, each padded to whole 64-row tiles at worst.
    assert em == 2048 + 8 * 64
    assert m64.grid == (-(-em // 64) * -(-14336 // 64),)
    assert m64.tensor("sorted_token_ids_ptr").shape == (em,)
    assert m64.tensor("expert_ids_ptr").shape == (em // 64,)
    assert m64.tensor("a_ptr").shape == launch.tensor("a_ptr").shape  # the inputs do not change
    # BLOCK_SIZE_N still divides the other factor of the same axis.
    assert rule.grid(launch.config.replace(BLOCK_SIZE_N=128)) == (136 * 112,)


def test_a_named_size_needs_no_padding_rule():
    from advisor.capture.trace import read_trace

    launch = read_trace(FIXTURES / "matmul_launch.json").launches[0]
    rule = launch_rule(launch)
    assert rule.padded == [] and rule(launch.config) == launch


# ------------------------------------------------------------------------------ the space

def test_the_default_space_moves_several_knobs_at_once():
    current = Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, 4, 3)
    space = around(current)
    assert space[0] == current
    assert max(config_distance(c, current) for c in space) >= 3
    assert current.replace(BLOCK_M=128, BLOCK_K=64, num_warps=8) in space


def test_guided_pick_finds_a_best_config_three_knobs_away_within_budget():
    current = Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, 4, 3)
    space = around(current)
    best = current.replace(BLOCK_M=128, BLOCK_K=64, num_warps=8)
    calls = []

    def predict(configs):
        calls.append(len(configs))
        return [10.0 + config_distance(c, best) for c in configs]  # a smooth landscape, best far from current

    picked = guided_pick(space, current, 24, predict)
    assert len(picked) <= 24 and sum(calls) <= 24
    assert best in picked
    assert set(picked) <= set(space)


def _declared_space_subject(monkeypatch):
    """The fixture matmul's launch with a declared space of 24 configs and a compile budget of 6."""
    from advisor.capture.trace import read_trace

    launch = read_trace(FIXTURES / "matmul_launch.json").launches[0]
    declared = [launch.config.replace(BLOCK_M=m, BLOCK_N=n, num_warps=w, num_stages=s)
                for m in (64, 128) for n in (64, 128, 256) for w in (4, 8) for s in (3, 4)]
    monkeypatch.setattr(LaunchSubject, "max_configs", 6)
    return LaunchSubject(launch, resolve_gpu("h100"), space=declared), declared


def test_the_search_never_proposes_values_outside_a_declared_space(monkeypatch):
    subject, declared = _declared_space_subject(monkeypatch)
    monkeypatch.setattr(subject, "_predicted_us", lambda configs: [1.0 / c["BLOCK_N"] + c.num_warps for c in configs])
    space = subject.space()
    assert len(space) <= 6 and set(space) <= set(declared)
    assert all(c.num_warps in (4, 8) and c.num_stages in (3, 4) for c in space)
    assert any(c["BLOCK_N"] == 256 and c.num_warps == 4 for c in space)  # the guide's best is reached


def test_the_guided_pick_is_made_once_and_noted_once(monkeypatch):
    subject, declared = _declared_space_subject(monkeypatch)
    calls = []
    monkeypatch.setattr(subject, "_predicted_us",
                        lambda configs: calls.append(1) or [float(c.num_warps) for c in configs])
    first, second = subject.space(), subject.space()
    assert first == second and calls
    picked_notes = [n for n in subject.notes if "the latency model led to" in n]
    assert len(picked_notes) == 1
    calls_after_first = len(calls)
    subject.space()
    assert len(calls) == calls_after_first  # no re-prediction (each one compiles) on a later call


def test_the_compile_budget_setting_lowers_the_search_and_never_raises_it(monkeypatch):
    """TRITON_ADVISOR_COMPILE_BUDGET: a slow machine's shorter search (the suite's default run uses it)."""
    subject, declared = _declared_space_subject(monkeypatch)
    monkeypatch.setattr(subject, "_predicted_us", lambda configs: [float(c.num_warps) for c in configs])
    monkeypatch.setenv("TRITON_ADVISOR_COMPILE_BUDGET", "4")
    assert len(subject.space()) == 4 and set(subject.space()) <= set(declared)
    assert any("the 4 the latency model led to" in n for n in subject.notes)
    raised, _ = _declared_space_subject(monkeypatch)
    monkeypatch.setattr(raised, "_predicted_us", lambda configs: [float(c.num_warps) for c in configs])
    monkeypatch.setenv("TRITON_ADVISOR_COMPILE_BUDGET", "100")
    assert len(raised.space()) == 6  # the subject's own budget (6 here) stays the most


@pytest.mark.parametrize("given", ["six", "0", "-3"])
def test_a_bad_compile_budget_is_one_line_naming_the_setting(monkeypatch, capsys, given):
    from advisor.advice.subjects import compile_budget

    monkeypatch.setenv("TRITON_ADVISOR_COMPILE_BUDGET", given)
    with pytest.raises(AdvisorError, match=f"TRITON_ADVISOR_COMPILE_BUDGET='{given}': give a whole number of configs"):
        compile_budget(32)
    monkeypatch.chdir(FIXTURES)
    assert main(["suggest", "matmul_launch.json"]) == 2
    err = capsys.readouterr().err.strip()
    assert "TRITON_ADVISOR_COMPILE_BUDGET" in err and "Traceback" not in err and len(err.splitlines()) == 1


# ------------------------------------------------------------------------------ the trace's GPU

@pytest.mark.parametrize("command", ["ceiling", "predict"])
def test_ceiling_and_predict_take_the_gpu_the_trace_names(command, tmp_path, capsys):
    launch = json.loads((FIXTURES / "matmul_launch.json").read_text())
    launch["source"] = str((FIXTURES / launch["source"]).resolve()) if not Path(launch["source"]).is_absolute() \
        else launch["source"]
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"format": "triton-advisor-trace", "version": 1, "gpu": "NVIDIA H200",
                                 "launches": [launch]}))
    assert main([command, str(trace), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["gpu"] == "NVIDIA H200"
    assert main([command, str(trace), "--format", "json", "--gpu", "h100"]) == 0
    assert json.loads(capsys.readouterr().out)["gpu"] == "NVIDIA H100 80GB HBM3"


def test_a_captured_call_is_re_run_per_config_so_its_grid_function_sees_the_config():
    from advisor.advice.suggest import subjects_for

    path = FIXTURES / "styles" / "tut01_vector_add.py"
    (subject,) = subjects_for(str(path), call="add(randn(98432, f32), randn(98432, f32))", gpu=resolve_gpu("h100"))
    assert subject.current["BLOCK_SIZE"] == 1024 and subject.launch.grid == (97,)
    other = subject.current.replace(BLOCK_SIZE=256)
    # BLOCK_SIZE names no size; the rule follows it by value (cdiv(98432, 1024) = 97, grid_values)
    assert subject.rule(other).grid == (-(-98432 // 256),)
    assert subject.launch_for(other).grid == (-(-98432 // 256),)  # the host code's grid lambda does
    assert subject.launch_for(other.replace(num_warps=8)).config.num_warps == 8


def test_the_search_climbs_past_the_first_neighbourhood(tmp_path, monkeypatch, products_search_budget):
    """A kernel with no declared space: after the neighbourhood of its config, the neighbourhood of the
    config ranked fastest, round after round while that moves (LaunchSubject._climb). With predictions
    that fall toward BLOCK_SIZE = 1024, a launch at 64 reaches 512 in the three further rounds."""
    import math

    path = tmp_path / "rownorm.py"
    path.write_text(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def row_sq_kernel(x_ptr, y_ptr, N, BLOCK_SIZE: tl.constexpr):\n"
        "    row = tl.program_id(0)\n    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)\n"
        "    for off in range(0, N, BLOCK_SIZE):\n"
        "        cols = off + tl.arange(0, BLOCK_SIZE)\n"
        "        x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0).to(tl.float32)\n"
        "        acc += x * x\n"
        "    tl.store(y_ptr + row, tl.sum(acc, 0))\n")
    from ceilings.launch import Config, Launch, TensorArg

    launch = Launch(str(path), "row_sq_kernel", (4096,), (TensorArg.contiguous("x_ptr", (4096, 4096), "float16"),
                                                          TensorArg.contiguous("y_ptr", (4096,), "float32")),
                    {"N": 4096}, {}, Config({"BLOCK_SIZE": 64}, 2, 3))
    subject = LaunchSubject(launch, resolve_gpu("h100"))
    monkeypatch.setattr(subject, "_compile_batch", lambda configs: None)
    asked = []

    def predicted(configs):
        asked.extend(configs)
        return [1.0 + abs(math.log2(c["BLOCK_SIZE"]) - 10) + 0.01 * c.num_warps + 0.001 * c.num_stages
                for c in configs]

    monkeypatch.setattr(subject, "_predicted_us", predicted)
    space = subject.space()
    assert max(c["BLOCK_SIZE"] for c in space) == 1024  # 64 -> 128 -> 256 -> 512, whose neighbours hold 1024
    assert {c["BLOCK_SIZE"] for c in space} == {32, 64, 128, 256, 512, 1024}
    assert len(asked) == len(set(asked)) == len(space)  # each config predicted once
    assert any("searched 3 further neighbourhood(s)" in n for n in subject.notes)
    assert subject.space() == space  # found once
    declared = LaunchSubject(launch, resolve_gpu("h100"), space=[launch.config, Config({"BLOCK_SIZE": 128}, 2, 3)])
    monkeypatch.setattr(declared, "_predicted_us", predicted)
    assert len(declared.space()) == 2  # a declared space is the kernel's own: no climb


def test_a_host_that_sizes_its_grid_from_its_own_constants_gets_the_rules_grid(tmp_path):
    """`BLOCK_M, BLOCK_N = 64, 64; grid = (M // BLOCK_M, N // BLOCK_N)` in the host: re-running the call with
    another config's constexprs leaves the grid as it was (cuda-triton-multiarch's matmul, RESULTS 38), which
    would cover a sixteenth of the output at 16 x 16 tiles. The launch rule's grid is taken instead."""
    from advisor.advice.suggest import subjects_for
    from ceilings.launch import Config

    path = tmp_path / "hostgrid.py"
    path.write_text(
        "import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def mm_kernel(x, w, o, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):\n"
        "    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)\n"
        "    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)\n"
        "    rk = tl.arange(0, BLOCK_K)\n"
        "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n"
        "    for k in tl.range(0, K, BLOCK_K):\n"
        "        a = tl.load(x + rm[:, None] * K + (k + rk)[None, :])\n"
        "        b = tl.load(w + (k + rk)[:, None] * N + rn[None, :])\n"
        "        acc = tl.dot(a, b, acc)\n"
        "    tl.store(o + rm[:, None] * N + rn[None, :], acc.to(tl.float16))\n\n\n"
        "def matmul(x, w):\n"
        "    M, K = x.shape\n    N = w.shape[1]\n"
        "    o = torch.empty((M, N), device=x.device, dtype=torch.float16)\n"
        "    BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 64\n"
        "    mm_kernel[(M // BLOCK_M, N // BLOCK_N)](x, w, o, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K)\n"
        "    return o\n")
    (subject,) = subjects_for(str(path), call="matmul(randn(1024, 512, f16), randn(512, 2048, f16))")
    assert subject.launch.grid == (16, 32)
    smaller = subject.launch_for(Config({"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 64}, 2, 3))
    assert smaller.grid == (64, 64) and smaller.config["BLOCK_M"] == 16
    assert subject.launch_for(Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, 4, 3)).grid == (16, 32)
    assert sum("computes its grid from values of its own" in n for n in subject.notes) == 1


COINCIDENCES = '''
import torch
import triton
import triton.language as tl


@triton.jit
def group_quant_kernel(x_ptr, x_stride_dim_0, x_stride_dim_1, y_ptr, s_ptr, M, K,
                       BLOCK_SIZE: tl.constexpr, NUM_GROUPS: tl.constexpr):
    rows = tl.program_id(0) * NUM_GROUPS + tl.arange(0, NUM_GROUPS)
    cols = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + rows[:, None] * x_stride_dim_0 + cols[None, :] * x_stride_dim_1)
    amax = tl.max(tl.abs(x), axis=1)
    tl.store(y_ptr + rows[:, None] * K + cols[None, :], x / amax[:, None])
    tl.store(s_ptr + rows * tl.num_programs(1) + tl.program_id(1), amax)


def group_quant(x, block_size=128, groups=2):
    M, K = x.shape
    y = torch.empty_like(x)
    s = torch.empty(M, K // block_size, dtype=torch.float32, device=x.device)
    group_quant_kernel[(triton.cdiv(M, groups), triton.cdiv(K, block_size))](
        x, x.stride(0), x.stride(1), y, s, M, K, BLOCK_SIZE=block_size, NUM_GROUPS=groups)
    return y, s


@triton.jit
def row_attention_kernel(q_ptr, o_ptr, seqlen_q, nheads, BLOCK_M: tl.constexpr, HEAD: tl.constexpr):
    start = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    rows = start + tl.arange(0, BLOCK_M)
    offs = (bh * seqlen_q + rows)[:, None] * HEAD + tl.arange(0, HEAD)[None, :]
    q = tl.load(q_ptr + offs, mask=rows[:, None] < seqlen_q)
    tl.store(o_ptr + offs, q * 2.0, mask=rows[:, None] < seqlen_q)


def row_attention(q, block_m=128):
    batch, seqlen, nheads, head = q.shape
    o = torch.empty_like(q)
    row_attention_kernel[(triton.cdiv(seqlen, block_m), batch * nheads)](q, o, seqlen, nheads, BLOCK_M=block_m,
                                                                         HEAD=head)
    return o
'''


@pytest.mark.parametrize("call, tile", [
    # x_stride_dim_0 = 4096 = round_up(x_stride_dim_1 + 32 (128 - 1), 128), 32 being the scales' second size
    ("group_quant(randn(8192, 4096, bf16))", "BLOCK_SIZE"),
    # seqlen_q = 2048 = round_up(nheads + 16 (128 - 1), 128), 16 being the batch: flash-attn's coincidence
    ("row_attention(randn(16, 2048, 16, 64, f16))", "BLOCK_M"),
])
def test_a_stride_or_a_size_not_named_for_the_tile_is_no_padded_size(tmp_path, call, tile):
    """Sizes that fit a worst-case padding form by the numbers alone: a tensor's stride (set by its layout) and a
    size named for no tile with k groups taken from an unrelated dimension. Read as padded sizes, a config with
    half the tile recomputed them (x_stride_dim_0 2048, seqlen_q 1024) and with them the grid and buffers."""
    from advisor.advice.suggest import subjects_for

    src = tmp_path / "coincidences.py"
    src.write_text(COINCIDENCES)
    (subject,) = subjects_for(str(src), call=call)
    launch, rule = subject.launch, subject.rule
    assert rule.padded == [] and rule(launch.config) == launch
    half = launch.config.replace(**{tile: launch.config[tile] // 2})
    assert rule(half).scalars == launch.scalars  # strides and sizes as launched
    assert [t.shape for t in rule(half).tensors] == [t.shape for t in launch.tensors]
    assert subject.relaunch is not None  # with no padded size the call is re-run per config
    if tile == "BLOCK_M":
        # The numbers alone tie (16 programs: 2048 / 128, or the batch), but the kernel masks the tile's rows by
        # seqlen_q (advisor/advice/tile_bounds.py): the grid follows BLOCK_M, though the host sizes it from its own
        # block size, which the re-run does not change (RESULTS 55)
        assert rule.grid(half) == (32, 256) and subject.launch_for(half).grid == (32, 256)
        return
    # No mask names the tile's dimension: the rule keeps the grid and says so; the re-run does not move it (the
    # host's own block size): the config is not ranked, its grid unknown.
    assert rule.unknown_grid(half)
    assert subject.launch_for(half).grid == launch.grid and "effect on the grid" in subject.precheck(half)
