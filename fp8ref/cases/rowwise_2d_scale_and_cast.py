"""Named cases for fp8ref.ops.rowwise_2d_scale_and_cast: x (M, K) -> q (M, K) row-major, scales (M, 1). Slices are
rows; q and scales are listed row by row.
"""

from fp8ref.cases._table import (
    BF16,
    E4M3FN,
    E4M3FNUZ,
    E5M2,
    EPS_SCALE_E4M3FN,
    EPS_SCALE_E4M3FN_POW2,
    EPS_SCALE_E4M3FNUZ,
    EPS_SCALE_E4M3FNUZ_POW2,
    EPS_SCALE_E5M2,
    F16,
    F32,
    F32_NAN,
    F32_ONE,
    F32_ZERO,
    INF,
    NAN,
    Case,
    Input,
)

OP = "rowwise_2d_scale_and_cast"

CASES: tuple[Case, ...] = (
    Case(
        name="all_zero_row_gets_eps_scale",
        op=OP,
        x=Input(
            (2, 3),
            BF16,
            (
                0.0,
                0.0,
                0.0,
                448.0,
                17.0,
                -19.0,
            ),
        ),
        fp8_dtype=E4M3FN,
        q=(
            0x00,
            0x00,
            0x00,
            0x7E,
            0x58,
            0xDA,
        ),
        scales=(EPS_SCALE_E4M3FN, F32_ONE),
        why="amax 0 is clamped to 1e-12: scale f32(448/1e-12) = 447999985582080.0 (0x57CBBA10); 0 * scale = 0.",
    ),
    Case(
        name="all_zero_row_pow2_scale_is_2_pow_48",
        op=OP,
        x=Input(
            (2, 3),
            BF16,
            (
                0.0,
                0.0,
                0.0,
                448.0,
                17.0,
                -19.0,
            ),
        ),
        fp8_dtype=E4M3FN,
        round_scales_to_power_of_2=True,
        q=(
            0x00,
            0x00,
            0x00,
            0x7E,
            0x58,
            0xDA,
        ),
        scales=(EPS_SCALE_E4M3FN_POW2, F32_ONE),
        why=(
            "log2(447999985582080.0) = 48.67, floor 48: scale 2^48 (0x57800000); 448/448 = 1 is already a power of 2."
        ),
    ),
    Case(
        name="all_zero_row_e4m3fnuz",
        op=OP,
        x=Input(
            (2, 3),
            BF16,
            (
                0.0,
                0.0,
                0.0,
                240.0,
                17.0,
                -19.0,
            ),
        ),
        fp8_dtype=E4M3FNUZ,
        q=(
            0x00,
            0x00,
            0x00,
            0x7F,
            0x60,
            0xE2,
        ),
        scales=(EPS_SCALE_E4M3FNUZ, F32_ONE),
        why="e4m3fnuz max is 240: EPS scale f32(240/1e-12) = 240000004259840.0 (0x575A475B); 240 -> 0x7F.",
    ),
    Case(
        name="all_zero_row_e4m3fnuz_pow2_scale_is_2_pow_47",
        op=OP,
        x=Input(
            (2, 3),
            BF16,
            (
                0.0,
                0.0,
                0.0,
                240.0,
                17.0,
                -19.0,
            ),
        ),
        fp8_dtype=E4M3FNUZ,
        round_scales_to_power_of_2=True,
        q=(
            0x00,
            0x00,
            0x00,
            0x7F,
            0x60,
            0xE2,
        ),
        scales=(EPS_SCALE_E4M3FNUZ_POW2, F32_ONE),
        why="log2(240000004259840.0) = 47.77, floor 47: scale 2^47 (0x57000000).",
    ),
    Case(
        name="all_zero_row_e5m2",
        op=OP,
        x=Input(
            (2, 3),
            BF16,
            (
                0.0,
                0.0,
                0.0,
                57344.0,
                17.0,
                -19.0,
            ),
        ),
        fp8_dtype=E5M2,
        q=(
            0x00,
            0x00,
            0x00,
            0x7B,
            0x4C,
            0xCD,
        ),
        scales=(EPS_SCALE_E5M2, F32_ONE),
        why=(
            "e5m2 max 57344: EPS scale f32(57344/1e-12) = 5.7344e16 (0x5B4BBA10); 17 -> 16 (0x4C), -19 -> -20 (0xCD)."
        ),
    ),
    Case(
        name="nan_poisons_only_its_row",
        op=OP,
        x=Input(
            (2, 3),
            F32,
            (
                1.0,
                NAN,
                -2.0,
                448.0,
                17.0,
                -19.0,
            ),
        ),
        fp8_dtype=E4M3FN,
        q=(
            0x7F,
            0x7F,
            0x7F,
            0x7E,
            0x58,
            0xDA,
        ),
        scales=(F32_NAN, F32_ONE),
        why=(
            "amax of a row holding NaN is NaN, so its scale is NaN and every element becomes a NaN code (compared "
            "as a class); the other row is untouched."
        ),
    ),
    Case(
        name="inf_gives_zero_scale",
        op=OP,
        x=Input(
            (2, 3),
            F32,
            (
                INF,
                1.0,
                -1.0,
                -INF,
                -0.0,
                2.0,
            ),
        ),
        fp8_dtype=E4M3FN,
        q=(
            0x7F,
            0x00,
            0x80,
            0x7F,
            0x80,
            0x00,
        ),
        scales=(F32_ZERO, F32_ZERO),
        why=(
            "amax +inf -> scale 448/inf = 0 (for +inf and -inf); inf * 0 = NaN, finite x * 0 = +-0 keeping x's "
            "sign (-1 * 0 = -0 -> 0x80)."
        ),
    ),
    Case(
        name="neg_zero_stays_neg_zero_e4m3fn",
        op=OP,
        x=Input(
            (1, 3),
            BF16,
            (
                448.0,
                -0.0,
                0.0,
            ),
        ),
        fp8_dtype=E4M3FN,
        q=(
            0x7E,
            0x80,
            0x00,
        ),
        scales=(F32_ONE,),
        why="-0 * 1 = -0, which e4m3fn encodes as 0x80; +0 is 0x00.",
    ),
    Case(
        name="neg_zero_becomes_pos_zero_e4m3fnuz",
        op=OP,
        x=Input(
            (1, 3),
            BF16,
            (
                240.0,
                -0.0,
                0.0,
            ),
        ),
        fp8_dtype=E4M3FNUZ,
        q=(
            0x7F,
            0x00,
            0x00,
        ),
        scales=(F32_ONE,),
        why="e4m3fnuz has no -0 (0x80 is its NaN): -0 encodes as 0x00.",
    ),
    Case(
        name="subnormal_outputs_e4m3fn",
        op=OP,
        x=Input(
            (1, 6),
            BF16,
            (
                448.0,
                2.0**-9,
                -(2.0**-9),
                2.0**-10,
                3 * 2.0**-10,
                7 * 2.0**-9,
            ),
        ),
        fp8_dtype=E4M3FN,
        q=(
            0x7E,
            0x01,
            0x81,
            0x00,
            0x02,
            0x07,
        ),
        scales=(F32_ONE,),
        why=(
            "scale 1; e4m3fn subnormals are k * 2^-9: 2^-9 -> 0x01, -2^-9 -> 0x81, 2^-10 is the tie 0 | 2^-9 -> 0 "
            "(even), 3 * 2^-10 is the tie 2^-9 | 2^-8 -> 2^-8 (0x02, even), 7 * 2^-9 is the largest subnormal "
            "0x07."
        ),
    ),
    Case(
        name="subnormal_outputs_e5m2",
        op=OP,
        x=Input(
            (1, 5),
            BF16,
            (
                57344.0,
                2.0**-16,
                -(2.0**-16),
                2.0**-17,
                3 * 2.0**-17,
            ),
        ),
        fp8_dtype=E5M2,
        q=(
            0x7B,
            0x01,
            0x81,
            0x00,
            0x02,
        ),
        scales=(F32_ONE,),
        why=(
            "scale 1; e5m2 subnormals are k * 2^-16: 2^-16 -> 0x01, -2^-16 -> 0x81, tie 2^-17 -> 0 (even), tie 3 "
            "* 2^-17 -> 2^-15 (0x02, even)."
        ),
    ),
    Case(
        name="rne_ties_e4m3fn",
        op=OP,
        x=Input(
            (1, 7),
            BF16,
            (
                448.0,
                432.0,
                17.0,
                19.0,
                -400.0,
                1.0625,
                1.1875,
            ),
        ),
        fp8_dtype=E4M3FN,
        q=(
            0x7E,
            0x7E,
            0x58,
            0x5A,
            0xFC,
            0x38,
            0x3A,
        ),
        scales=(F32_ONE,),
        why=(
            "scale 1, ties to even: 432 (416 | 448) -> 448 (0x7E); 17 (16 | 18) -> 16 (0x58); 19 (18 | 20) -> 20 "
            "(0x5A); -400 (-384 | -416) -> -384 (0xFC; the Triton interpreter gives -416); 1.0625 -> 1 (0x38); "
            "1.1875 -> 1.25 (0x3A). The top-of-range tie 464 cannot arise: |x| <= amax bounds f32(x * scale) by "
            "448 * (1 + 2^-18), the log2 pow2 rule's round-up included."
        ),
    ),
    Case(
        name="rne_ties_e5m2",
        op=OP,
        x=Input(
            (1, 5),
            BF16,
            (
                57344.0,
                53248.0,
                18.0,
                22.0,
                -0.5625,
            ),
        ),
        fp8_dtype=E5M2,
        q=(
            0x7B,
            0x7A,
            0x4C,
            0x4E,
            0xB8,
        ),
        scales=(F32_ONE,),
        why=(
            "scale 1, ties to even: 53248 (49152 | 57344) -> 49152 (0x7A); 18 (16 | 20) -> 16 (0x4C); 22 (20 | "
            "24) -> 24 (0x4E); -0.5625 (-0.5 | -0.625) -> -0.5 (0xB8)."
        ),
    ),
    Case(
        name="inexact_scale_rounds_once",
        op=OP,
        x=Input(
            (1, 3),
            F32,
            (
                3.0,
                1.0,
                -0.75,
            ),
        ),
        fp8_dtype=E4M3FN,
        q=(
            0x7E,
            0x71,
            0xEE,
        ),
        scales=(0x43155555,),
        why=(
            "448/3 = 149.333... -> f32 149.33333 (0x43155555); 3 * s = 448.0000 -> 0x7E; 1 * s -> 144 (0x71); "
            "-0.75 * s = -112.0000 -> -112 (0xEE)."
        ),
    ),
    Case(
        name="pow2_scale_rounds_down",
        op=OP,
        x=Input(
            (1, 3),
            F32,
            (
                3.0,
                1.0,
                -0.75,
            ),
        ),
        fp8_dtype=E4M3FN,
        round_scales_to_power_of_2=True,
        q=(
            0x7C,
            0x70,
            0xEC,
        ),
        scales=(0x43000000,),
        why="448/3 = 149.33 -> pow2 128 (0x43000000): 3 -> 384 (0x7C), 1 -> 128 (0x70), -0.75 -> -96 (0xEC).",
    ),
    Case(
        name="pow2_log2_rule_rounds_up_just_below_power_of_2",
        op=OP,
        x=Input(
            (1, 2),
            F32,
            (
                14680065 * 2.0**-22,
                1.0,
            ),
        ),
        fp8_dtype=E4M3FN,
        round_scales_to_power_of_2=True,
        q=(
            0x7E,
            0x70,
        ),
        scales=(0x43000000,),
        why=(
            "amax 3.5 + 2^-22 gives scale f32(448/amax) = 127.99999 (0x42FFFFFF), one ulp below 2^7; its f32 log2 "
            "rounds to exactly 7.0, so the upstream log2 rule gives 128 > scale (an exact floor would give 64). "
            "amax * 128 = 448 + 2^-15 clamps to 448 (0x7E)."
        ),
    ),
    Case(
        name="single_column",
        op=OP,
        x=Input(
            (3, 1),
            BF16,
            (
                2.0,
                -0.5,
                0.0,
            ),
        ),
        fp8_dtype=E4M3FN,
        q=(
            0x7E,
            0xFE,
            0x00,
        ),
        scales=(0x43600000, 0x44600000, EPS_SCALE_E4M3FN),
        why=(
            "K = 1: each row's amax is its only element: 2 -> scale 224 (0x43600000), 448 (0x7E); -0.5 -> scale "
            "896 (0x44600000), -448 (0xFE); 0 -> EPS scale, 0x00."
        ),
    ),
    Case(
        name="f16_subnormal_inputs_are_exact",
        op=OP,
        x=Input(
            (1, 4),
            F16,
            (
                2.0**-17,
                2.0**-24,
                5 * 2.0**-24,
                -3 * 2.0**-24,
            ),
        ),
        fp8_dtype=E4M3FN,
        q=(
            0x7E,
            0x46,
            0x59,
            0xD2,
        ),
        scales=(0x4C600000,),
        why=(
            "f16 subnormals are normal in f32: amax 2^-17 -> scale 448 * 2^17 (0x4C600000); 2^-24 -> 3.5 (0x46); "
            "5 * 2^-24 -> 17.5 -> 18 (0x59); -3 * 2^-24 -> -10.5, tie -> -10 (0xD2)."
        ),
    ),
    Case(
        name="f32_subnormal_inputs_get_eps_scale",
        op=OP,
        x=Input(
            (1, 3),
            F32,
            (
                2.0**-130,
                -(2.0**-140),
                0.0,
            ),
        ),
        fp8_dtype=E4M3FN,
        q=(
            0x00,
            0x80,
            0x00,
        ),
        scales=(EPS_SCALE_E4M3FN,),
        why=(
            "amax 2^-130 is below 1e-12, so the EPS clamp gives 0x57CBBA10; 2^-130 * scale ~ 3e-25 rounds to +0 "
            "and -2^-140 * scale to -0 (0x80): a kernel that flushes subnormal inputs to +-0 gives the same "
            "bytes."
        ),
    ),
)
