"""The differential-test engine: ``compare``, ``compare_sequence``, ``fuzz`` and the Report they return."""

from fp8ref.engine.categories import CATEGORIES, FailPolicy
from fp8ref.engine.comparator import compare, compare_sequence
from fp8ref.engine.fuzzer import fuzz
from fp8ref.engine.report import Mismatch, Report

__all__ = ["CATEGORIES", "FailPolicy", "Mismatch", "Report", "compare", "compare_sequence", "fuzz"]
