"""Model presets for the fused-MoE layer: the shapes of real models' expert layers.

Numbers are the models' published configs (experts, experts per token, hidden size, expert
intermediate size); ANCHORS section 2 lists the first four. Tensor parallelism splits the
intermediate size across ranks, as the serving engines do.
"""

from __future__ import annotations

from dataclasses import dataclass

from ceilings.errors import AdvisorError

TP_SIZES = (1, 2, 4, 8)


@dataclass(frozen=True)
class MoEShape:
    """One rank's MoE layer: E experts, top_k per token, hidden H, intermediate per rank I."""

    num_experts: int
    top_k: int
    hidden: int
    intermediate: int
    dtype: str = "bfloat16"

    @property
    def gemm1_n(self) -> int:
        """GEMM1 output width: gate and up projections side by side."""
        return 2 * self.intermediate

    def gemm1(self) -> tuple[int, int, int, int]:
        """(E, top_k, K, N) of GEMM1, the layout of ANCHORS section 3's table."""
        return (self.num_experts, self.top_k, self.hidden, self.gemm1_n)

    def gemm2(self) -> tuple[int, int, int, int]:
        return (self.num_experts, self.top_k, self.intermediate, self.hidden)

    @property
    def config_file_n(self) -> int:
        """The N of the engines' config file names: w2.shape[2], the intermediate size per rank."""
        return self.intermediate


@dataclass(frozen=True)
class MoEPreset:
    name: str
    num_experts: int
    top_k: int
    hidden: int
    intermediate: int
    dtype: str = "bfloat16"

    def shape(self, tp: int = 1) -> MoEShape:
        if tp not in TP_SIZES:
            raise AdvisorError(f"tensor-parallel size {tp} for {self.name} is not one of {TP_SIZES}")
        if self.intermediate % tp:
            raise AdvisorError(f"{self.name}: intermediate size {self.intermediate} does not split over TP {tp}")
        return MoEShape(self.num_experts, self.top_k, self.hidden, self.intermediate // tp, self.dtype)


PRESETS: dict[str, MoEPreset] = {p.name: p for p in (
    MoEPreset("mixtral-8x7b", num_experts=8, top_k=2, hidden=4096, intermediate=14336),
    MoEPreset("qwen2-57b-a14b", num_experts=64, top_k=8, hidden=3584, intermediate=2560),
    MoEPreset("qwen3-30b-a3b", num_experts=128, top_k=8, hidden=2048, intermediate=768),
    MoEPreset("qwen3-235b-a22b", num_experts=128, top_k=8, hidden=4096, intermediate=1536),
    # DeepSeek-V2-Lite: 64 routed experts, 6 per token, moe_intermediate_size 1408; its 2 shared
    # experts are a dense MLP outside the fused-MoE kernel.
    MoEPreset("deepseek-v2-lite", num_experts=64, top_k=6, hidden=2048, intermediate=1408),
)}


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def get_preset(name: str) -> MoEPreset:
    key = _normalise(name)
    if key in PRESETS:
        return PRESETS[key]
    # Accept the Hugging Face style names too: "Qwen/Qwen3-30B-A3B", "mistralai/Mixtral-8x7B-v0.1".
    tail = key.rsplit("/", 1)[-1]
    for preset_name in PRESETS:
        if tail.startswith(preset_name):
            return PRESETS[preset_name]
    raise AdvisorError(f"unknown model preset {name!r}; known presets: {', '.join(PRESETS)}")
