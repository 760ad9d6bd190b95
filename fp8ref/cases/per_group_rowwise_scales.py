"""Named cases for fp8ref.ops.per_group_rowwise_scales: x (M, Ktot) + offs along the columns -> q (M, Ktot), scales s[g
* M + m]. Slices are row segments.
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
    F32,
    F32_NAN,
    F32_ONE,
    F32_ZERO,
    INF,
    NAN,
    Case,
    Input,
)

OP = "per_group_rowwise_scales"

CASES: tuple[Case, ...] = (
    Case(
        name="uneven_groups",
        op=OP,
        x=Input((2, 5), BF16, (
            448.0, 1.0, 2.0, 4.0, -8.0,
            1.0, -0.5, 0.0, 0.0, 0.0,
        )),
        offs=(2, 5),
        fp8_dtype=E4M3FN,
        q=(
            0x7E, 0x38, 0x6E, 0x76, 0xFE,
            0x7E, 0xF6, 0x00, 0x00, 0x00,
        ),
        scales=(F32_ONE, 0x43E00000, 0x42600000, EPS_SCALE_E4M3FN),
        why=(
            "offs (2, 5): group 0 has 2 elements per row, group 1 has 3. Scales in s[g * M + r] order: 1, 448 "
            "(0x43E00000), then 448/8 = 56 (0x42600000), EPS for the zero row."
        ),
    ),
    Case(
        name="empty_group_first",
        op=OP,
        x=Input((2, 4), BF16, (
            448.0, 1.0, 2.0, -4.0,
            1.0, 2.0, 3.0, 4.0,
        )),
        offs=(0, 2, 4),
        fp8_dtype=E4M3FN,
        q=(
            0x7E, 0x38, 0x76, 0xFE,
            0x76, 0x7E, 0x7A, 0x7E,
        ),
        scales=(EPS_SCALE_E4M3FN, EPS_SCALE_E4M3FN, F32_ONE, 0x43600000, 0x42E00000, 0x42E00000),
        why=(
            "offs (0, 2, 4): group 0 is empty, so its scales are EPS-derived (0x57CBBA10) and it owns no "
            "elements."
        ),
    ),
    Case(
        name="empty_group_middle",
        op=OP,
        x=Input((2, 4), BF16, (
            448.0, 1.0, 2.0, -4.0,
            1.0, 2.0, 3.0, 4.0,
        )),
        offs=(2, 2, 4),
        fp8_dtype=E4M3FN,
        q=(
            0x7E, 0x38, 0x76, 0xFE,
            0x76, 0x7E, 0x7A, 0x7E,
        ),
        scales=(F32_ONE, 0x43600000, EPS_SCALE_E4M3FN, EPS_SCALE_E4M3FN, 0x42E00000, 0x42E00000),
        why="offs (2, 2, 4): group 1 is empty: EPS scales, no data; groups 0 and 2 are unaffected.",
    ),
    Case(
        name="empty_group_last",
        op=OP,
        x=Input((2, 4), BF16, (
            448.0, 1.0, 2.0, -4.0,
            1.0, 2.0, 3.0, 4.0,
        )),
        offs=(2, 4, 4),
        fp8_dtype=E4M3FN,
        q=(
            0x7E, 0x38, 0x76, 0xFE,
            0x76, 0x7E, 0x7A, 0x7E,
        ),
        scales=(F32_ONE, 0x43600000, 0x42E00000, 0x42E00000, EPS_SCALE_E4M3FN, EPS_SCALE_E4M3FN),
        why="offs (2, 4, 4): the last group is empty: EPS scales, no data.",
    ),
    Case(
        name="size_1_groups",
        op=OP,
        x=Input((2, 3), BF16, (
            2.0, -0.5, 0.0,
            448.0, 7.0, -1.0,
        )),
        offs=(1, 2, 3),
        fp8_dtype=E4M3FN,
        q=(
            0x7E, 0xFE, 0x00,
            0x7E, 0x7E, 0xFE,
        ),
        scales=(0x43600000, F32_ONE, 0x44600000, 0x42800000, EPS_SCALE_E4M3FN, 0x43E00000),
        why=(
            "offs (1, 2, 3): every group holds one element per row, so each scale is 448/|x| (in s order: 224, 1, "
            "896, 64, EPS, 448) and every nonzero element becomes +-448 (0x7E/0xFE)."
        ),
    ),
    Case(
        name="dominant_group",
        op=OP,
        x=Input((2, 7), BF16, (
            1.0, 448.0, 2.0, 3.0, 4.0, 5.0, -6.0,
            -2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5,
        )),
        offs=(1, 6, 7),
        fp8_dtype=E4M3FN,
        q=(
            0x7E, 0x7E, 0x40, 0x44, 0x48, 0x4A, 0xFE,
            0xFE, 0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0x7E,
        ),
        scales=(0x43E00000, 0x43600000, F32_ONE, 0x43E00000, 0x42955555, 0x44600000),
        why="offs (1, 6, 7): group 1 holds five of seven elements; groups 0 and 2 hold one each.",
    ),
    Case(
        name="elements_past_last_offset_are_excluded",
        op=OP,
        x=Input((2, 5), F32, (
            448.0, 1.0, 2.0, NAN, INF,
            1.0, 2.0, -4.0, 2.0**100, -0.0,
        )),
        offs=(2, 3),
        fp8_dtype=E4M3FN,
        q=(
            0x7E, 0x38, 0x7E, 0x00, 0x00,
            0x76, 0x7E, 0xFE, 0x00, 0x00,
        ),
        scales=(F32_ONE, 0x43600000, 0x43600000, 0x42E00000),
        why=(
            "offs (2, 3) < 5: the last two elements of each row are in no group: their NaN, inf and 2^100 reach "
            "no scale, and the reference writes 0x00 there (kernels may leave them unspecified)."
        ),
    ),
    Case(
        name="all_groups_empty",
        op=OP,
        x=Input((2, 2), F32, (
            1.0, NAN,
            2.0, 3.0,
        )),
        offs=(0, 0),
        fp8_dtype=E4M3FN,
        q=(
            0x00, 0x00,
            0x00, 0x00,
        ),
        scales=(EPS_SCALE_E4M3FN, EPS_SCALE_E4M3FN, EPS_SCALE_E4M3FN, EPS_SCALE_E4M3FN),
        why="offs (0, 0): both groups are empty, every element is past offs[-1]: all scales EPS, all bytes 0x00.",
    ),
    Case(
        name="all_zero_group_gets_eps_scale",
        op=OP,
        x=Input((2, 6), BF16, (
            0.0, 0.0, 0.0, 448.0, 17.0, -19.0,
            448.0, 17.0, -19.0, 0.0, -0.0, 0.0,
        )),
        offs=(3, 6),
        fp8_dtype=E4M3FN,
        q=(
            0x00, 0x00, 0x00, 0x7E, 0x58, 0xDA,
            0x7E, 0x58, 0xDA, 0x00, 0x80, 0x00,
        ),
        scales=(EPS_SCALE_E4M3FN, F32_ONE, F32_ONE, EPS_SCALE_E4M3FN),
        why="offs (3, 6): one all-zero slice per row: scale f32(448/1e-12) = 447999985582080.0 (0x57CBBA10).",
    ),
    Case(
        name="all_zero_group_pow2_scale_is_2_pow_48",
        op=OP,
        x=Input((1, 6), BF16, (
            0.0, 0.0, 0.0, 448.0, 17.0, -19.0,
        )),
        offs=(3, 6),
        fp8_dtype=E4M3FN,
        pow2=True,
        q=(
            0x00, 0x00, 0x00, 0x7E, 0x58, 0xDA,
        ),
        scales=(EPS_SCALE_E4M3FN_POW2, F32_ONE),
        why="EPS scale 447999985582080.0 -> pow2 2^48 (0x57800000).",
    ),
    Case(
        name="all_zero_group_e4m3fnuz",
        op=OP,
        x=Input((1, 6), BF16, (
            0.0, 0.0, 0.0, 240.0, 17.0, -19.0,
        )),
        offs=(3, 6),
        fp8_dtype=E4M3FNUZ,
        q=(
            0x00, 0x00, 0x00, 0x7F, 0x60, 0xE2,
        ),
        scales=(EPS_SCALE_E4M3FNUZ, F32_ONE),
        why="e4m3fnuz EPS scale f32(240/1e-12) = 240000004259840.0 (0x575A475B).",
    ),
    Case(
        name="all_zero_group_e4m3fnuz_pow2_scale_is_2_pow_47",
        op=OP,
        x=Input((1, 6), BF16, (
            0.0, 0.0, 0.0, 240.0, 17.0, -19.0,
        )),
        offs=(3, 6),
        fp8_dtype=E4M3FNUZ,
        pow2=True,
        q=(
            0x00, 0x00, 0x00, 0x7F, 0x60, 0xE2,
        ),
        scales=(EPS_SCALE_E4M3FNUZ_POW2, F32_ONE),
        why="e4m3fnuz EPS scale -> pow2 2^47 (0x57000000).",
    ),
    Case(
        name="nan_poisons_only_its_group",
        op=OP,
        x=Input((2, 6), F32, (
            1.0, NAN, -2.0, 448.0, 17.0, -19.0,
            448.0, 17.0, -19.0, 1.0, 2.0, 3.0,
        )),
        offs=(3, 6),
        fp8_dtype=E4M3FN,
        q=(
            0x7F, 0x7F, 0x7F, 0x7E, 0x58, 0xDA,
            0x7E, 0x58, 0xDA, 0x71, 0x79, 0x7E,
        ),
        scales=(F32_NAN, F32_ONE, F32_ONE, 0x43155555),
        why=(
            "offs (3, 6): only (group 0, row 0) holds a NaN: that one scale is NaN and its three bytes NaN codes; "
            "group 1 of the same row keeps scale 1."
        ),
    ),
    Case(
        name="inf_gives_zero_scale",
        op=OP,
        x=Input((2, 6), F32, (
            INF, 1.0, -1.0, 448.0, 17.0, -19.0,
            -INF, -0.0, 2.0, 448.0, 17.0, -19.0,
        )),
        offs=(3, 6),
        fp8_dtype=E4M3FN,
        q=(
            0x7F, 0x00, 0x80, 0x7E, 0x58, 0xDA,
            0x7F, 0x80, 0x00, 0x7E, 0x58, 0xDA,
        ),
        scales=(F32_ZERO, F32_ZERO, F32_ONE, F32_ONE),
        why=(
            "offs (3, 6): a slice holding +inf or -inf has amax inf -> scale 0; inf * 0 = NaN, finite x * 0 = +-0 "
            "keeping the sign; the other group keeps scale 1."
        ),
    ),
    Case(
        name="neg_zero_stays_neg_zero_e4m3fn",
        op=OP,
        x=Input((1, 3), BF16, (
            448.0, -0.0, 0.0,
        )),
        offs=(3,),
        fp8_dtype=E4M3FN,
        q=(
            0x7E, 0x80, 0x00,
        ),
        scales=(F32_ONE,),
        why="-0 * 1 = -0 -> 0x80 in e4m3fn.",
    ),
    Case(
        name="neg_zero_becomes_pos_zero_e4m3fnuz",
        op=OP,
        x=Input((1, 3), BF16, (
            240.0, -0.0, 0.0,
        )),
        offs=(3,),
        fp8_dtype=E4M3FNUZ,
        q=(
            0x7F, 0x00, 0x00,
        ),
        scales=(F32_ONE,),
        why="e4m3fnuz has no -0: -0 -> 0x00.",
    ),
    Case(
        name="subnormal_outputs_e4m3fn",
        op=OP,
        x=Input((1, 5), BF16, (
            448.0, 2.0**-9, -2.0**-9, 2.0**-10, 3 * 2.0**-10,
        )),
        offs=(5,),
        fp8_dtype=E4M3FN,
        q=(
            0x7E, 0x01, 0x81, 0x00, 0x02,
        ),
        scales=(F32_ONE,),
        why="scale 1: 2^-9 -> 0x01, -2^-9 -> 0x81, tie 2^-10 -> 0x00, tie 3 * 2^-10 -> 0x02 (ties to even).",
    ),
    Case(
        name="rne_ties_e4m3fn",
        op=OP,
        x=Input((1, 5), BF16, (
            448.0, 432.0, 17.0, 19.0, -400.0,
        )),
        offs=(5,),
        fp8_dtype=E4M3FN,
        q=(
            0x7E, 0x7E, 0x58, 0x5A, 0xFC,
        ),
        scales=(F32_ONE,),
        why="scale 1, ties to even: 432 -> 448 (0x7E), 17 -> 16 (0x58), 19 -> 20 (0x5A), -400 -> -384 (0xFC).",
    ),
    Case(
        name="inexact_scale_rounds_once",
        op=OP,
        x=Input((1, 3), F32, (
            3.0, 1.0, -0.75,
        )),
        offs=(3,),
        fp8_dtype=E4M3FN,
        q=(
            0x7E, 0x71, 0xEE,
        ),
        scales=(0x43155555,),
        why="448/3 -> f32 0x43155555: 3 -> 448 (0x7E), 1 -> 144 (0x71), -0.75 -> -112 (0xEE).",
    ),
    Case(
        name="pow2_scale_rounds_down",
        op=OP,
        x=Input((1, 3), F32, (
            3.0, 1.0, -0.75,
        )),
        offs=(3,),
        fp8_dtype=E4M3FN,
        pow2=True,
        q=(
            0x7C, 0x70, 0xEC,
        ),
        scales=(0x43000000,),
        why="448/3 -> pow2 128: 3 -> 384 (0x7C), 1 -> 128 (0x70), -0.75 -> -96 (0xEC).",
    ),
    Case(
        name="e5m2_subnormal_outputs",
        op=OP,
        x=Input((1, 4), BF16, (
            57344.0, 2.0**-16, 2.0**-17, 3 * 2.0**-17,
        )),
        offs=(4,),
        fp8_dtype=E5M2,
        q=(
            0x7B, 0x01, 0x00, 0x02,
        ),
        scales=(F32_ONE,),
        why="scale 1: 2^-16 -> 0x01; ties 2^-17 -> 0x00 and 3 * 2^-17 -> 0x02 (even).",
    ),
)
