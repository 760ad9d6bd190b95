"""fp8ref: the bit-exact reference of FP8 rowwise MoE quantization, and the tools that check kernels against it.

Pure PyTorch; never imports Triton. Read the ``Semantics:`` block of each public function for its exact rule.
"""

from fp8ref import cases, grouped_mm  # grouped_mm: the module (reference of the FP8 grouped-GEMM path)
from fp8ref.encode import encode
from fp8ref.engine import CATEGORIES, FailPolicy, Mismatch, Report, compare, compare_sequence, fuzz
from fp8ref.formats import FP8_DTYPES, Fp8Format, all_formats, fmt
from fp8ref.metrics import code_distance, dequantize, sqnr
from fp8ref.ops import (
    colwise_3d_scale_and_cast,
    per_group_colwise_scales,
    per_group_colwise_scales_dual,
    per_group_rowwise_scales,
    rowwise_2d_scale_and_cast,
    rowwise_3d_transpose_rhs,
    validate_offs,
)
from fp8ref.profiles import (
    PROFILES,
    CastProfile,
    CodeDifference,
    FormatPolicy,
    ProfileMatch,
    cast_codes,
    code_differences,
    detect_profile,
)
from fp8ref.scaling import (
    EPS,
    amax_to_scale,
    round_scale_to_power_of_2,
    tensor_to_amax,
    tensor_to_scale,
    to_fp8_saturated,
)
from fp8ref.spec import Exact, KernelSpec, Sqnr, find_spec, specs
from fp8ref.vectors import all_bf16, all_fp16, fp32_edge_set, probe_vector

__all__ = [
    "CATEGORIES",
    "EPS",
    "FP8_DTYPES",
    "PROFILES",
    "CastProfile",
    "CodeDifference",
    "Exact",
    "FailPolicy",
    "FormatPolicy",
    "Fp8Format",
    "KernelSpec",
    "Mismatch",
    "ProfileMatch",
    "Report",
    "Sqnr",
    "all_bf16",
    "all_formats",
    "all_fp16",
    "amax_to_scale",
    "cases",
    "cast_codes",
    "code_differences",
    "code_distance",
    "colwise_3d_scale_and_cast",
    "compare",
    "compare_sequence",
    "dequantize",
    "detect_profile",
    "encode",
    "find_spec",
    "fmt",
    "fp32_edge_set",
    "fuzz",
    "grouped_mm",
    "per_group_colwise_scales",
    "per_group_colwise_scales_dual",
    "per_group_rowwise_scales",
    "probe_vector",
    "round_scale_to_power_of_2",
    "rowwise_2d_scale_and_cast",
    "rowwise_3d_transpose_rhs",
    "specs",
    "sqnr",
    "tensor_to_amax",
    "tensor_to_scale",
    "to_fp8_saturated",
    "validate_offs",
]
