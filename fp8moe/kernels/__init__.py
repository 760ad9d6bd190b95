"""Triton kernels, one op per module (named as in fp8ref.ops); each exposes ``launch(...) -> outputs``.

Launchers allocate outputs and launch without validating arguments: fp8moe.ops validates, then calls them.
"""
