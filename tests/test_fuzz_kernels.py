"""Hypothesis searches shapes, group layouts, values and seeds for an input on which an fp8moe kernel differs from
fp8ref (jagged kernels also get repeated calls on one shape with other group counts). A hit is shrunk and shown."""

from __future__ import annotations

import pytest

import fp8ref

pytest.importorskip("fp8moe")  # before triton: turns the interpreter on when there is no GPU

#: Examples per kernel in CI: the interpreter costs ~0.5 s an example on 2 cores; the GPU run can afford more.
EXAMPLES = 8


#: fuzz searches the quantization ops (the grouped GEMM is judged by SQNR: tests/test_engine_gemm.py).
QUANTIZE_SPECS = [s for s in fp8ref.specs() if s.contract.kind == "quantize"]


@pytest.mark.parametrize("spec", QUANTIZE_SPECS, ids=lambda s: s.id)
def test_fuzzing_finds_no_input_where_the_kernel_differs(spec, device, seed):
    reason = spec.unsupported(device, spec.fp8_dtypes[0])
    if reason:
        pytest.skip(reason)
    shrunk = fp8ref.fuzz(spec, max_examples=EXAMPLES, seed=seed, sequence=spec.contract.jagged, device=device)
    assert shrunk is None, f"{shrunk!r}\n{shrunk.repro()}"
