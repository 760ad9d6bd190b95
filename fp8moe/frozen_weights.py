"""``frozen_weights()``: quantize each expert weight once per optimizer step instead of once per micro-batch.

:func:`fp8moe.grouped_mm` quantizes its weight B_t two ways per forward + backward (colwise-3D for the forward GEMM,
transposed-rowwise for grad_A; outside a scope in one fused call that reads B_t twice). That reads and writes more
bytes than everything else in the step at many small experts (at (16640, 2048, 1408, 64) the two ops cost more than
the FP8 GEMMs save, benchmarks/results/h200-grouped-mm.md). With gradient accumulation over micro-batches, or
activation checkpointing that reruns the forward, the weights do not change between those calls; inside
``with fp8moe.frozen_weights():`` each weight's two quantizations are computed on first use and reused after:

    with fp8moe.frozen_weights():
        for micro_batch in micro_batches:
            loss(model(micro_batch)).backward()
    optimizer.step()

The results are bitwise those without the scope (the quantizers are deterministic; tests/test_frozen_weights.py).

The contract: inside the scope a weight's values change only through in-place updates that bump its version
counter (torch's in-place ops and optimizers do). A write through ``.data``, a raw pointer or another process does
not, and would leave a stale quantization: keep such writes outside the scope. Keyed by storage, offset, shape,
strides, dtype, version, fp8 format and method; each cached entry holds a reference to its weight's storage, so a
freed weight's address cannot be reused by another tensor while the scope lasts. Memory: one fp8 copy of each
weight per method plus its scales, freed when the scope exits. Under torch.compile the scope is ignored (traced
calls quantize every time).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import torch

from fp8moe import ops as _ops

__all__ = ["FrozenWeightOps", "active_weight_ops", "frozen_weights"]


class FrozenWeightOps:
    """fp8moe.ops with the weight quantizers memoised (the two ops and their fused pair); every other op is
    fp8moe.ops' own.

    Attributes:
        hits: weight quantizations answered from the cache.
        misses: weight quantizations computed (first use, or a weight whose version moved).
    """

    def __init__(self) -> None:
        self._cache: dict[tuple, tuple[int, torch.UntypedStorage, tuple[torch.Tensor, ...]]] = {}
        self._open = True
        self.hits = 0
        self.misses = 0

    def __getattr__(self, name: str):
        return getattr(_ops, name)

    def colwise_3d_scale_and_cast(self, x: torch.Tensor, fp8_dtype: torch.dtype, **kwargs):
        """fp8moe.colwise_3d_scale_and_cast of a frozen weight (cached)."""
        return self._cached("colwise_3d", _ops.colwise_3d_scale_and_cast, x, fp8_dtype, kwargs)

    def rowwise_3d_transpose_rhs(self, x: torch.Tensor, fp8_dtype: torch.dtype, **kwargs):
        """fp8moe.rowwise_3d_transpose_rhs of a frozen weight (cached)."""
        return self._cached("transpose_rhs", _ops.rowwise_3d_transpose_rhs, x, fp8_dtype, kwargs)

    def colwise_3d_and_transpose_rhs(self, x: torch.Tensor, fp8_dtype: torch.dtype, **kwargs):
        """fp8moe.colwise_3d_and_transpose_rhs of a frozen weight (cached; counts as two quantizations)."""
        return self._cached("pair", _ops.colwise_3d_and_transpose_rhs, x, fp8_dtype, kwargs, count=2)

    def close(self) -> None:
        """End the scope: drop every cached quantization (and the storage references); later calls compute."""
        self._open = False
        self._cache.clear()

    def _cached(self, method: str, quantize, w: torch.Tensor, fp8_dtype: torch.dtype, kwargs: dict, count: int = 1):
        if not self._open:
            return quantize(w, fp8_dtype, **kwargs)
        storage = w.untyped_storage()
        key = (
            method,
            w.device,
            storage.data_ptr(),
            w.storage_offset(),
            tuple(w.shape),
            w.stride(),
            w.dtype,
            fp8_dtype,
            tuple(sorted(kwargs.items())),
        )
        entry = self._cache.get(key)
        if entry is not None and entry[0] == w._version:
            self.hits += count
            return entry[2]
        self.misses += count
        result = quantize(w, fp8_dtype, **kwargs)
        self._cache[key] = (w._version, storage, result)
        return result


_SCOPE: contextvars.ContextVar[FrozenWeightOps | None] = contextvars.ContextVar("fp8moe_frozen_weights", default=None)


def active_weight_ops() -> FrozenWeightOps | None:
    """The innermost open :func:`frozen_weights` scope's ops, or None (also while torch.compile traces)."""
    if torch.compiler.is_compiling():
        return None
    return _SCOPE.get()


@contextlib.contextmanager
def frozen_weights() -> Iterator[FrozenWeightOps]:
    """Quantize each weight :func:`fp8moe.grouped_mm` sees once inside the block (see the module docstring for the
    contract); yields the scope's :class:`FrozenWeightOps` (its ``hits`` and ``misses`` count reuses). A forward run
    inside the block takes both of B_t's operands from the scope (grouped_mm quantizes the weight for its backward in
    the forward), so its backward uses the scope's even after the block has exited."""
    scope = FrozenWeightOps()
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)
        scope.close()
