"""Concrete kernels the advisor ships, each with its exact demand model, and their family declarations.

A kernel family (kernels/family.py) is one declaration of what the advisor needs of a kernel; the
shipped ones are moe_family, gemm_family, softmax_family and attention_family, found through the
registry in kernels.family. Imports only `ceilings` below it.
"""
