"""Triton kernels, one op per module (named as in fp8ref.ops); each exposes ``launch(...) -> outputs``.

Launchers allocate outputs and launch; argument validation is fp8moe.ops's job (launchers only assert the few layout
facts their own index math relies on).
"""
