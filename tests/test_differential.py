"""Differential sweep: every discovered kernel against its fp8ref reference, byte for byte, over its spec grid.

The grid is ``KernelSpec.params`` in the mode the fp8ref plugin picks: "covering" on the CPU (the Triton
interpreter), "full" on a GPU, or ``--fp8ref-grid``. Each point runs the kernel twice into poisoned outputs, so
unwritten tails and nondeterminism fail too.
"""

from __future__ import annotations

import warnings

import pytest


@pytest.mark.interpreter
def test_kernel_matches_reference_bitwise(kernel_param, fp8ref_compare):
    with warnings.catch_warnings():
        # The interpreter evaluates kernels in numpy, which warns on inf * 0 and NaN compares: the "special" values
        # do that on purpose, and the bytes are what is checked.
        warnings.simplefilter("ignore", RuntimeWarning)
        report = fp8ref_compare(kernel_param.spec, kernel_param.shape, **kernel_param.compare_kwargs())
    assert report.ok, repr(report)
