"""Launch capture: `advisor record` and the versioned launch-trace format (docs/trace.md).

Imports only `ceilings` and `kernels` below `advisor`; never the model, measurement or advice.
"""
