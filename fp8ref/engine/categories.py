"""Mismatch categories: why a kernel's byte differs from the reference's, assigned automatically.

Each fp8 byte and each scale word that differs gets exactly one category, tried in the order of ``CATEGORIES``:
exact explanations first (the poison survived, both are NaN, the value is a tie, the kernel's own scale reproduces
the byte), statistical ones last (layout: the byte belongs to another element). Whether a category fails a test is
a stated ``FailPolicy``, never a tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fp8ref.formats import fmt
from fp8ref.scaling import round_scale_to_power_of_2, to_fp8_saturated

__all__ = [
    "CATEGORIES",
    "CATEGORY_HELP",
    "DERIVED",
    "STRUCTURAL",
    "FailPolicy",
    "cast_bytes",
    "classify_fp8",
    "classify_scales",
    "same_f32",
    "same_fp8",
]

CATEGORY_HELP: dict[str, str] = {
    # What the call did wrong besides its values (one count per problem; the report's ``structure`` says which).
    "kernel_raised": "the kernel raised an exception (report.traceback and the repro keep its traceback)",
    "wrong_return": "the kernel returned something other than the op's tensors: a non-tensor, or the wrong count",
    "shape_stride_dtype": "an output's shape, strides or dtype differ from the reference's (counted per output)",
    "wrong_device": "an output is on another device than the inputs (or on one its bytes cannot be read from)",
    "output_aliases_input": "an output shares memory with an input: the op must return fresh tensors",
    "input_written": "the kernel wrote into an input tensor or into offs (the ops are functional)",
    "out_of_bounds_write": "the kernel wrote outside an output it allocated: into the poisoned redzone before or "
    "after it (which output, how many bytes, the first byte offsets: see the problems)",
    # Why a byte or scale word differs.
    "unwritten": "the output still holds the poison of its run: the kernel never wrote it",
    "nondeterministic": "two runs on the same inputs wrote different bytes",
    "nan_sign_or_payload": "both NaN, different codes (sign/payload); differs across stacks, so tolerated by default",
    "signed_zero": "-0 vs +0",
    "overflow_saturation_policy": "|x*scale| > fp8_max or inf: saturate vs NaN/inf policy differs",
    "nan_vs_number": "one side NaN, the other a number: a NaN made where the reference has a number (inf*0, 0/0), "
    "or a number where the reference has NaN (NaN dropped from amax by a NaN-ignoring max)",
    "pow2_rounding_edge": "power-of-two scale off by one binade (log2 vs exact floor rule, or a wrong rounding)",
    "wrong_group_boundary": "a group boundary is off by one (inclusive end, early or late start): recomputing with "
    "the boundary moved explains the scale words and bytes, or the value is a neighbouring group's",
    "scale_mismatch": "scale word differs (the ulp distance says whether the division is approximate)",
    "explained_by_scale": "byte differs only because the kernel's scale does: recomputing with it reproduces the byte",
    "scale_applied_by_division": "x / (1/scale) instead of x * scale: recomputing with that division reproduces "
    "every such byte (the reciprocal's rounding moves products near a rounding boundary one code; SPEC §4)",
    "rne_tie_flipped": "x*scale is exactly halfway between two codes and the other neighbour was chosen (not RNE)",
    "flush_to_zero": "an fp8 subnormal was flushed to zero",
    "layout_stride": "the byte is the reference's byte of another element (transposed, shifted, other-layout stride)",
    "genuine": "none of the above explains it",
    "sqnr_below_floor": "a GEMM result's SQNR against the reference path is under the op's floor in some group "
    "(ops judged by SQNR, e.g. grouped_mm; the report's SQNR table lists every group)",
    "operand_mismatch": "a quantized GEMM operand differs from the reference path's bytes or layout: compare the "
    "quantization op that made it for the diagnosis",
}
#: Every category, in the order they are tried.
CATEGORIES: tuple[str, ...] = tuple(CATEGORY_HELP)
#: Categories that are consequences of another mismatch, not root causes.
DERIVED: frozenset[str] = frozenset({"explained_by_scale"})
#: Categories of the call itself rather than of a byte: they fail under every policy.
STRUCTURAL: frozenset[str] = frozenset(
    {
        "kernel_raised",
        "wrong_return",
        "shape_stride_dtype",
        "wrong_device",
        "output_aliases_input",
        "input_written",
        "out_of_bounds_write",
    }
)


@dataclass(frozen=True)
class FailPolicy:
    """Which categories fail a comparison.

    Attributes:
        fail: the failing categories. NaN-vs-number is in every policy: a NaN gradient turned into a number
            corrupts training silently (SPEC §4).
    """

    fail: frozenset[str]

    @classmethod
    def default(cls, strict_nan: bool = False) -> FailPolicy:
        """Everything fails except NaN sign/payload differences, which fail only when ``strict_nan``."""
        tolerated = set() if strict_nan else {"nan_sign_or_payload"}
        return cls(frozenset(CATEGORIES) - tolerated)

    def fails(self, category: str) -> bool:
        """Whether ``category`` fails a comparison under this policy (nan_vs_number always does)."""
        return category in self.fail or category == "nan_vs_number"


def cast_bytes(x: torch.Tensor, scale: torch.Tensor, fp8_dtype: torch.dtype) -> torch.Tensor:
    """Reference cast of ``f32(x) * scale`` (SPEC §4) as uint8 codes."""
    return to_fp8_saturated(x.to(torch.float32) * scale, fp8_dtype).view(torch.uint8)


def _is_nan_code(codes: torch.Tensor, fp8_dtype: torch.dtype) -> torch.Tensor:
    return torch.isnan(fmt(fp8_dtype).values)[codes.long()]


def same_fp8(a: torch.Tensor, b: torch.Tensor, fp8_dtype: torch.dtype, strict_nan: bool) -> torch.Tensor:
    """Equal codes, or (unless ``strict_nan``) two NaN codes: NaN compared as a class."""
    eq = a == b
    if strict_nan:
        return eq
    return eq | (_is_nan_code(a, fp8_dtype) & _is_nan_code(b, fp8_dtype))


def same_f32(a: torch.Tensor, b: torch.Tensor, strict_nan: bool) -> torch.Tensor:
    """Equal f32 bit patterns, or (unless ``strict_nan``) both NaN."""
    eq = a.view(torch.int32) == b.view(torch.int32)
    return eq if strict_nan else eq | (torch.isnan(a) & torch.isnan(b))


def _assign(cat: torch.Tensor, cond: torch.Tensor, name: str) -> None:
    cat[(cat < 0) & cond] = CATEGORIES.index(name)


def classify_fp8(
    *,
    x: torch.Tensor,
    expected: torch.Tensor,
    actual: torch.Tensor,
    unwritten: torch.Tensor,
    ref_scale: torch.Tensor,
    kernel_scale: torch.Tensor,
    neighbour_scales: torch.Tensor,
    layout_codes: torch.Tensor,
    fp8_dtype: torch.dtype,
) -> torch.Tensor:
    """Category index (into CATEGORIES) of each mismatching fp8 element; all arguments are 1-D over those elements.

    Args:
        x: the input values.
        expected: the reference's codes (uint8).
        actual: the kernel's codes (uint8).
        unwritten: the poison survived both runs.
        ref_scale: the scale the reference used for the element.
        kernel_scale: the scale the kernel used for the element, as it wrote it.
        neighbour_scales: (n, k) f32 scales of the neighbouring groups (NaN where there is none).
        layout_codes: (n, c) reference codes at c candidate "other element" positions; the column that explains
            the most mismatches is used, and only if it explains at least half of them.
        fp8_dtype: the output format (its codes, NaN encodings, max and smallest normal).
    """
    f = fmt(fp8_dtype)
    n = expected.numel()
    cat = torch.full((n,), -1, dtype=torch.int64)
    e_nan, a_nan = _is_nan_code(expected, fp8_dtype), _is_nan_code(actual, fp8_dtype)
    e_val, a_val = f.values[expected.long()], f.values[actual.long()]
    _assign(cat, unwritten, "unwritten")
    _assign(cat, e_nan & a_nan, "nan_sign_or_payload")
    _assign(cat, (e_val == 0) & (a_val == 0), "signed_zero")
    y = x.to(torch.float32) * ref_scale  # the f32 product the reference casts
    # Overflow policy: the reference saturated a product beyond the range (+-inf included) to +-max and the kernel
    # made it NaN or inf (a non-saturating cast). Judged from y alone: inf * 0 is NaN, not an overflow, and a kernel
    # that writes a number where the reference has NaN is nan_vs_number, never a policy question.
    beyond = torch.isinf(y) | (y.abs() > f.max)
    a_overflowed = a_nan | torch.isinf(a_val)
    _assign(cat, beyond & (e_val.abs() == f.max) & a_overflowed, "overflow_saturation_policy")
    scale_differs = ~same_f32(ref_scale, kernel_scale, strict_nan=True)
    with_kernel_scale = cast_bytes(x, kernel_scale, fp8_dtype)
    # The same with the kernel's own scale: a scale too large (a wrong fp8_max, a wrong amax) applied without the clamp
    # overflows where the reference's product does not. Saturating with that scale gives +-max; the kernel wrote NaN
    # or inf, and the reference a number (where the reference has NaN, e.g. inf * 0, the policy is not the question).
    y_kernel = x.to(torch.float32) * kernel_scale
    beyond_kernel = torch.isinf(y_kernel) | (y_kernel.abs() > f.max)
    saturated = f.values[with_kernel_scale.long()].abs() == f.max
    _assign(cat, beyond_kernel & saturated & a_overflowed & ~e_nan, "overflow_saturation_policy")
    _assign(cat, scale_differs & same_fp8(with_kernel_scale, actual, fp8_dtype, strict_nan=False), "explained_by_scale")
    _assign(cat, e_nan ^ a_nan, "nan_vs_number")
    rank = f.code_rank
    adjacent = (rank[expected.long()] - rank[actual.long()]).abs() == 1
    _assign(cat, adjacent & (y.to(torch.float64) == (e_val + a_val) / 2), "rne_tie_flipped")
    _assign(cat, (a_val == 0) & (e_val != 0) & (e_val.abs() < f.min_normal), "flush_to_zero")
    if neighbour_scales.numel():
        by_neighbour = cast_bytes(x.view(-1, 1), neighbour_scales, fp8_dtype)
        explained = (by_neighbour == actual.view(-1, 1)) & ~torch.isnan(neighbour_scales)
        _assign(cat, explained.any(dim=1), "wrong_group_boundary")
    if layout_codes.numel():
        open_ = cat < 0
        hits = (layout_codes == actual.view(-1, 1).to(torch.int16)) & open_.view(-1, 1)
        best = int(hits.sum(dim=0).argmax())
        if int(hits[:, best].sum()) * 2 >= int(open_.sum()):
            _assign(cat, hits[:, best], "layout_stride")
    _assign(cat, torch.ones(n, dtype=torch.bool), "genuine")
    return cat


def classify_scales(
    *,
    expected: torch.Tensor,
    actual: torch.Tensor,
    unwritten: torch.Tensor,
    neighbour_expected: torch.Tensor,
    round_scales_to_power_of_2: bool,
) -> torch.Tensor:
    """Category index of each mismatching scale word; 1-D f32 arguments over those words.

    Args:
        expected: the reference's scales.
        actual: the kernel's scales.
        unwritten: the poison survived both runs.
        neighbour_expected: (n, k) reference scales of the same row/col in neighbouring groups (NaN where none).
        round_scales_to_power_of_2: the op's argument. On, a kernel scale one binade off the reference's is a pow2
            rounding edge (the "log2" and "floor" rules differ by exactly one binade where they differ); off, a
            kernel scale equal to the reference's rounded to a power of two by either rule is.
    """
    n = expected.numel()
    cat = torch.full((n,), -1, dtype=torch.int64)
    _assign(cat, unwritten, "unwritten")
    _assign(cat, torch.isnan(expected) & torch.isnan(actual), "nan_sign_or_payload")
    _assign(cat, torch.isnan(expected) ^ torch.isnan(actual), "nan_vs_number")
    if round_scales_to_power_of_2:
        # The "log2" and "floor" rules differ by exactly one binade where they differ (SPEC §4).
        edge = (actual == expected * 2) | (actual == expected / 2)
    else:
        edge = (actual == round_scale_to_power_of_2(expected, "log2")) | (
            actual == round_scale_to_power_of_2(expected, "floor")
        )
    _assign(cat, edge & (expected > 0) & torch.isfinite(expected), "pow2_rounding_edge")
    if neighbour_expected.numel():
        _assign(cat, (neighbour_expected == actual.view(-1, 1)).any(dim=1), "wrong_group_boundary")
    _assign(cat, torch.ones(n, dtype=torch.bool), "scale_mismatch")
    return cat
