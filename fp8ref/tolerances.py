"""How an output is judged: ``Exact()`` raw bytes, or ``Sqnr(min_db, why)`` with the derivation of the floor.

Every quantization op of SPEC §5 is Exact. Sqnr is for outputs that legitimately differ in bytes, e.g. a GEMM whose
accumulation order differs from the reference's (the grouped-GEMM path, SPEC §11).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Exact", "Sqnr"]


@dataclass(frozen=True)
class Exact:
    """Raw bytes must match: fp8 codes via ``view(torch.uint8)``, scales via ``view(torch.int32)``."""

    def __str__(self) -> str:
        return "exact bytes"


@dataclass(frozen=True)
class Sqnr:
    """Every group's SQNR against float64 must be at least ``min_db``; ``why`` derives the number.

    Only for outputs that legitimately differ in bytes (e.g. a GEMM with a different accumulation order); the
    quantization ops of SPEC §5 are all Exact.
    """

    min_db: float
    why: str

    def __post_init__(self) -> None:
        if not self.why.strip():
            raise ValueError("Sqnr tolerance needs its derivation in `why`")

    def __str__(self) -> str:
        return f"SQNR >= {self.min_db} dB ({self.why})"
