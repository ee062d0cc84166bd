"""Concrete kernels the advisor ships: the fused-MoE layer with its presets and tuned configs.

Imports only `ceilings` below it.
"""
