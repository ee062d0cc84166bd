"""Advice: the ceiling of a target (`ceiling`), the config search (`search`) over its subjects (`subjects`:
a kernel family's launch, launches sharing a config, any kernel's recorded launch), the fused-MoE layer
as the serving engines run it (`moe`), `advisor suggest` and its report formats, `advisor apply` (engine
JSON files and autotune lists, written safely) and the `prune_configs_by` hook (`autotune`).

The top of the advisor below the CLI: it may import `model`, `measure` and `capture`; none of them
imports it.
"""
