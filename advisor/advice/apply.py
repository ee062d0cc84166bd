"""`advisor apply`'s file editing: put chosen configs where a project keeps them.

Two kinds of target:

* a serving engine's fused-MoE JSON file: `advisor.advice.engine_file.plan_engine_json`;
* the `configs=[...]` list of a kernel's `@triton.autotune(...)` in Python source: a minimal edit of the
  list's span, `advisor.advice.autotune_edit.plan_autotune` (read with `advisor.advice.autotune_list`).

Planning reads the file once and returns an `Edit` (old bytes, new bytes, the digest of what was read);
nothing touches the disk until `advisor.advice.edit.write`, which refuses when the file changed since it
was read, is read-only or cannot be replaced, does nothing when the edit changes nothing (re-running is
idempotent), and otherwise keeps a `.bak` of the old bytes and replaces the file atomically. `rollback`
puts the `.bak` back. Every refusal is an `AdvisorError` naming the file (and line) and the fix, with
nothing written. This module is the one import for callers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from advisor.advice.autotune_edit import plan_autotune
from advisor.advice.autotune_list import read_autotune_configs
from advisor.advice.edit import Edit, backup_path, check_writable, rollback, write
from advisor.advice.engine_file import plan_engine_json
from ceilings.errors import AdvisorError
from ceilings.launch import Config

__all__ = ["Edit", "backup_path", "check_fits", "check_writable", "plan_autotune", "plan_engine_json",
           "read_autotune_configs", "rollback", "write"]


def check_fits(configs: Iterable[Config], max_shared_bytes: int,
               precheck: Callable[[Config, int], str | None]) -> None:
    """Refuse configs the GPU cannot run: `precheck(config, max_shared_bytes)` (the kernel's resource
    check, e.g. `kernels.fused_moe.resource_precheck`) returns a reason, or None when it fits."""
    problems = []
    for config in configs:
        try:
            reason = precheck(config, max_shared_bytes)
        except KeyError as exc:
            reason = f"it has no parameter {exc.args[0]}, which this kernel's resource check needs"
        if reason:
            problems.append(f"{config.label()}: {reason}")
    if problems:
        what = "config does" if len(problems) == 1 else f"{len(problems)} configs do"
        raise AdvisorError(f"{what} not fit the GPU ({max_shared_bytes} B shared memory), nothing written: "
                           + "; ".join(problems))
