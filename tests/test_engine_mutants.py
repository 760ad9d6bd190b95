"""Engine self-test: every committed broken kernel is flagged with its category and shrunk; correct kernels pass."""

from __future__ import annotations

import math
import warnings

import pytest

import fp8ref
from fp8ref.contracts import CONTRACTS
from fp8ref.engine import compare_sequence, fuzz
from fp8ref.engine.battery import EXAMPLE_SHAPES, device_formats
from fp8ref.engine.categories import STRUCTURAL
from fp8ref.engine.comparator import default_device
from fp8ref.engine.mutants import MUTANTS, OUTPUT_MUTANTS, mutant
from fp8ref.spec import find_spec, specs

#: A shrunk repro must be small enough to read. The largest minimal example is truncated_groups': one group of
#: 65 rows (the bug starts at row 64) and enough columns that one has its max past row 64 (1/65 per normal column),
#: so up to 32 columns (the fuzzer's cap for N): 65 * 32 = 2080 elements.
_SMALL = 65 * 32


def _named(report, category: str) -> bool:
    """A byte category among the report's top root causes; a structural one (counted per problem, e.g. an
    out-of-bounds write next to thousands of bytes it left unwritten) among its failing categories."""
    return category in (report.failing if category in STRUCTURAL else report.top_categories())


@pytest.mark.parametrize("name", sorted(set(MUTANTS) - set(OUTPUT_MUTANTS)))
def test_mutant_is_flagged_with_its_category_and_shrunk_to_a_replayable_repro(name):
    m = MUTANTS[name]
    if m.formats is not None and not set(m.formats) & set(device_formats(default_device())):
        pytest.skip(f"{name} shows only in {[str(f) for f in m.formats]}, which this device does not store")
    report = fuzz(
        mutant(name), fresh=lambda: mutant(name), sequence=m.needs_sequence, category=m.category, max_examples=100
    )
    assert report is not None, f"fuzz found no input on which {name} fails with {m.category}"
    assert not report.ok
    assert _named(report, m.category), report
    assert math.prod(report.call.shape) <= _SMALL, report
    with pytest.raises(AssertionError, match=m.category):
        exec(compile(report.repro(), "repro.py", "exec"), {})


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_default_compare_at_the_example_shapes_catches_every_committed_mutant(name):
    """What a new user types, ``compare(kernel, shape)`` and nothing else, at the README's shapes (issue #10: the
    single default call caught 23 of these 31 before the battery, 22 with the right category)."""
    m = MUTANTS[name]
    report = fp8ref.compare(mutant(name), EXAMPLE_SHAPES[m.op], device="cpu")
    assert not report.ok, report
    assert m.category in report.failing, report


def test_shape_cached_grid_passes_each_first_call_and_fails_a_later_group_count():
    first, later = compare_sequence(mutant("shape_cached_grid"), (40, 8), groups=(1, 3))
    assert first.ok, first
    assert later.top_categories() == ("unwritten",), later
    assert later.call.prelude == (first.call.offs,)


@pytest.mark.parametrize("op", sorted(op for op, c in CONTRACTS.items() if c.kind == "quantize"))
def test_reference_survives_fuzzing_against_itself(op):
    assert fuzz(f"fp8ref.ops:{op}", max_examples=15) is None


def _sample(spec):
    """Four points spread over the spec's grid (the full grid is the kernel suite's job, not the engine's)."""
    grid = list(spec.params())
    return grid[:: max(1, len(grid) // 4)]


@pytest.mark.interpreter
@pytest.mark.parametrize(
    "param",
    [pytest.param(p, id=p.id) for s in specs() for p in _sample(s)]
    or [pytest.param(None, marks=pytest.mark.skip(reason="no kernel specs discovered (fp8moe not installed)"))],
)
def test_fp8moe_kernel_matches_reference_bytes(param, fp8ref_compare, device):
    reason = param.spec.unsupported(device, param.fp8_dtype)
    if reason:
        pytest.skip(reason)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the interpreter's numpy warns on the NaN/inf inputs
        report = fp8ref_compare(param.spec, param.shape, **param.compare_kwargs())
    assert report.ok, report


def test_registered_name_resolves_to_the_discovered_kernel():
    discovered = [s for s in specs() if s.name == "rowwise_2d_scale_and_cast"]
    if not discovered:
        pytest.skip("no kernel package publishes rowwise_2d_scale_and_cast")
    assert find_spec("rowwise_2d_scale_and_cast") is discovered[0]
