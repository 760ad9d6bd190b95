"""The differential-test engine: ``compare``, ``compare_sequence``, ``fuzz`` and the Report they return.

Names are loaded on first access: ``fp8ref.spec`` imports ``fp8ref.engine.contracts`` while ``compare`` imports
``fp8ref.spec``, and importing the package must not pull hypothesis (``fuzz``) into every process.
"""

import importlib

__all__ = ["CATEGORIES", "FailPolicy", "Mismatch", "Report", "compare", "compare_sequence", "fuzz"]

_HOME = {
    "CATEGORIES": "categories",
    "FailPolicy": "categories",
    "Mismatch": "report",
    "Report": "report",
    "compare": "comparator",
    "compare_sequence": "comparator",
    "fuzz": "fuzzer",
}


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module 'fp8ref.engine' has no attribute {name!r}")
    return getattr(importlib.import_module(f"fp8ref.engine.{_HOME[name]}"), name)
