"""Loading a kernel compiled by `JITFunction.warmup` and reading what it uses, for sweep workers."""

from __future__ import annotations


def loaded_resources(kernel) -> dict:
    """Load the compiled kernel on the current GPU and return its registers, spills and shared bytes.

    Loading is what raises Triton's OutOfResources when the kernel needs more shared memory or
    registers than the GPU has, so a sweep worker learns it before any launch.
    """
    init = getattr(kernel, "_init_handles", None)
    if init is not None:
        init()
    meta = getattr(kernel, "metadata", None)
    return {"n_regs": getattr(kernel, "n_regs", None), "n_spills": getattr(kernel, "n_spills", None),
            "shared": getattr(meta, "shared", None)}
