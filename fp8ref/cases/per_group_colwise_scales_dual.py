"""Named cases for fp8ref.ops.per_group_colwise_scales_dual: x1 (Ktot, N1), x2 (Ktot, N2) + shared offs along the rows
-> (q1, s1, q2, s2), each as per_group_colwise_scales.
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
    F32,
    F32_NAN,
    F32_ONE,
    F32_ZERO,
    INF,
    NAN,
    Case,
    Input,
)

OP = "per_group_colwise_scales_dual"

CASES: tuple[Case, ...] = (
    Case(
        name="operands_do_not_share_amax",
        op=OP,
        x=Input((4, 1), F32, (
            448.0,
            1.0,
            2.0,
            4.0,
        )),
        x2=Input((4, 2), F32, (
            1.0, 1.0,
            2.0, 1.0,
            8.0, 1.0,
            NAN, 1.0,
        )),
        offs=(2, 4),
        fp8_dtype=E4M3FN,
        q=(
            0x7E,
            0x38,
            0x76,
            0x7E,
        ),
        scales=(F32_ONE, 0x42E00000),
        q2=(
            0x76, 0x7E,
            0x7E, 0x7E,
            0x7F, 0x7E,
            0x7F, 0x7E,
        ),
        scales2=(0x43600000, 0x43E00000, F32_NAN, 0x43E00000),
        why=(
            "offs (2, 4): x2's NaN makes only s2[1 * N2 + 0] NaN; x1's scales (1, 448/4 = 112) never see x2's "
            "values."
        ),
    ),
    Case(
        name="empty_group_middle",
        op=OP,
        x=Input((4, 1), BF16, (
            448.0,
            1.0,
            2.0,
            -4.0,
        )),
        x2=Input((4, 2), BF16, (
            1.0, 0.5,
            2.0, 0.25,
            3.0, -1.0,
            4.0, 2.0,
        )),
        offs=(2, 2, 4),
        fp8_dtype=E4M3FN,
        q=(
            0x7E,
            0x38,
            0x76,
            0xFE,
        ),
        scales=(F32_ONE, EPS_SCALE_E4M3FN, 0x42E00000),
        q2=(
            0x76, 0x7E,
            0x7E, 0x76,
            0x7A, 0xF6,
            0x7E, 0x7E,
        ),
        scales2=(0x43600000, 0x44600000, EPS_SCALE_E4M3FN, EPS_SCALE_E4M3FN, 0x42E00000, 0x43600000),
        why="offs (2, 2, 4): the empty middle group gets EPS scales in both outputs and owns no rows.",
    ),
    Case(
        name="elements_past_last_offset_are_excluded",
        op=OP,
        x=Input((4, 1), F32, (
            448.0,
            1.0,
            NAN,
            INF,
        )),
        x2=Input((4, 1), F32, (
            1.0,
            2.0,
            2.0**100,
            -0.0,
        )),
        offs=(2,),
        fp8_dtype=E4M3FN,
        q=(
            0x7E,
            0x38,
            0x00,
            0x00,
        ),
        scales=(F32_ONE,),
        q2=(
            0x76,
            0x7E,
            0x00,
            0x00,
        ),
        scales2=(0x43600000,),
        why="offs (2,) < 4: rows 2 and 3 are in no group in either operand: 0x00 there, no effect on scales.",
    ),
    Case(
        name="all_zero_group_pow2_scale_is_2_pow_48",
        op=OP,
        x=Input((4, 1), BF16, (
            0.0,
            0.0,
            1.0,
            2.0,
        )),
        x2=Input((4, 1), BF16, (
            3.0,
            -3.0,
            0.0,
            -0.0,
        )),
        offs=(2, 4),
        fp8_dtype=E4M3FN,
        pow2=True,
        q=(
            0x00,
            0x00,
            0x70,
            0x78,
        ),
        scales=(EPS_SCALE_E4M3FN_POW2, 0x43000000),
        q2=(
            0x7C,
            0xFC,
            0x00,
            0x80,
        ),
        scales2=(0x43000000, EPS_SCALE_E4M3FN_POW2),
        why=(
            "offs (2, 4): all-zero slices get EPS scale 447999985582080.0 -> pow2 2^48 (0x57800000); 448/2 = 224 "
            "-> 128, 448/3 -> 128."
        ),
    ),
    Case(
        name="neg_zero_becomes_pos_zero_e4m3fnuz",
        op=OP,
        x=Input((3, 1), BF16, (
            240.0,
            -0.0,
            0.0,
        )),
        x2=Input((3, 1), BF16, (
            -0.0,
            120.0,
            -240.0,
        )),
        offs=(3,),
        fp8_dtype=E4M3FNUZ,
        q=(
            0x7F,
            0x00,
            0x00,
        ),
        scales=(F32_ONE,),
        q2=(
            0x00,
            0x77,
            0xFF,
        ),
        scales2=(F32_ONE,),
        why="e4m3fnuz has no -0: -0 -> 0x00 in both outputs.",
    ),
    Case(
        name="different_widths_e5m2",
        op=OP,
        x=Input((3, 1), BF16, (
            18.0,
            57344.0,
            2.0**-16,
        )),
        x2=Input((3, 3), BF16, (
            1.0, -0.5, 0.0,
            2.0, 0.0, 0.0,
            4.0, 7.0, 0.0,
        )),
        offs=(1, 3),
        fp8_dtype=E5M2,
        q=(
            0x7B,
            0x7B,
            0x01,
        ),
        scales=(0x45471C72, F32_ONE),
        q2=(
            0x7B, 0xFB, 0x00,
            0x77, 0x00, 0x00,
            0x7B, 0x7B, 0x00,
        ),
        scales2=(0x47600000, 0x47E00000, EPS_SCALE_E5M2, 0x46600000, 0x46000000, EPS_SCALE_E5M2),
        why=(
            "N1 = 1, N2 = 3 sharing offs (1, 3), e5m2: x1's 18 is alone in group 0 (scale 57344/18 = 3185.78, "
            "0x45471C72) -> 57344 (0x7B); group 1 has scale 1 and 2^-16 -> 0x01; x2's zero column gets "
            "0x5B4BBA10."
        ),
    ),
    Case(
        name="inf_gives_zero_scale",
        op=OP,
        x=Input((3, 1), F32, (
            INF,
            1.0,
            -1.0,
        )),
        x2=Input((3, 1), F32, (
            -INF,
            -0.0,
            2.0,
        )),
        offs=(3,),
        fp8_dtype=E4M3FN,
        q=(
            0x7F,
            0x00,
            0x80,
        ),
        scales=(F32_ZERO,),
        q2=(
            0x7F,
            0x80,
            0x00,
        ),
        scales2=(F32_ZERO,),
        why=(
            "x1's +inf and x2's -inf each make their slice's amax inf -> scale 0; inf * 0 = NaN, finite x * 0 = "
            "+-0 keeping the sign (-1 -> 0x80)."
        ),
    ),
    Case(
        name="rne_ties_and_subnormals_e4m3fn",
        op=OP,
        x=Input((5, 1), BF16, (
            448.0,
            432.0,
            17.0,
            19.0,
            -400.0,
        )),
        x2=Input((5, 1), BF16, (
            448.0,
            2.0**-9,
            -2.0**-9,
            2.0**-10,
            3 * 2.0**-10,
        )),
        offs=(5,),
        fp8_dtype=E4M3FN,
        q=(
            0x7E,
            0x7E,
            0x58,
            0x5A,
            0xFC,
        ),
        scales=(F32_ONE,),
        q2=(
            0x7E,
            0x01,
            0x81,
            0x00,
            0x02,
        ),
        scales2=(F32_ONE,),
        why=(
            "scale 1 in both: x1 ties to even 432 -> 448 (0x7E), 17 -> 16 (0x58), 19 -> 20 (0x5A), -400 -> -384 "
            "(0xFC); x2 subnormals 2^-9 -> 0x01, -2^-9 -> 0x81, ties 2^-10 -> 0x00 and 3 * 2^-10 -> 0x02."
        ),
    ),
    Case(
        name="neg_zero_stays_neg_zero_e4m3fn",
        op=OP,
        x=Input((3, 1), BF16, (
            448.0,
            -0.0,
            0.0,
        )),
        x2=Input((3, 1), BF16, (
            -0.0,
            -0.0,
            -0.0,
        )),
        offs=(3,),
        fp8_dtype=E4M3FN,
        q=(
            0x7E,
            0x80,
            0x00,
        ),
        scales=(F32_ONE,),
        q2=(
            0x80,
            0x80,
            0x80,
        ),
        scales2=(EPS_SCALE_E4M3FN,),
        why=(
            "-0 * 1 = -0 -> 0x80; x2's slice of -0 only is all-zero: EPS scale (0x57CBBA10) and -0 * scale -> "
            "0x80."
        ),
    ),
    Case(
        name="all_zero_group_e4m3fnuz",
        op=OP,
        x=Input((4, 1), BF16, (
            0.0,
            0.0,
            240.0,
            17.0,
        )),
        x2=Input((4, 1), BF16, (
            1.0,
            2.0,
            0.0,
            0.0,
        )),
        offs=(2, 4),
        fp8_dtype=E4M3FNUZ,
        q=(
            0x00,
            0x00,
            0x7F,
            0x60,
        ),
        scales=(EPS_SCALE_E4M3FNUZ, F32_ONE),
        q2=(
            0x77,
            0x7F,
            0x00,
            0x00,
        ),
        scales2=(0x42F00000, EPS_SCALE_E4M3FNUZ),
        why=(
            "e4m3fnuz EPS scale f32(240/1e-12) = 240000004259840.0 (0x575A475B) for the all-zero slices; 240/2 = "
            "120."
        ),
    ),
    Case(
        name="all_zero_group_e4m3fnuz_pow2_scale_is_2_pow_47",
        op=OP,
        x=Input((4, 1), BF16, (
            0.0,
            0.0,
            240.0,
            17.0,
        )),
        x2=Input((4, 1), BF16, (
            1.0,
            2.0,
            0.0,
            0.0,
        )),
        offs=(2, 4),
        fp8_dtype=E4M3FNUZ,
        pow2=True,
        q=(
            0x00,
            0x00,
            0x7F,
            0x60,
        ),
        scales=(EPS_SCALE_E4M3FNUZ_POW2, F32_ONE),
        q2=(
            0x70,
            0x78,
            0x00,
            0x00,
        ),
        scales2=(0x42800000, EPS_SCALE_E4M3FNUZ_POW2),
        why="e4m3fnuz EPS scale -> pow2 2^47 (0x57000000); 240/2 = 120 -> 64.",
    ),
    Case(
        name="empty_groups_first_and_last",
        op=OP,
        x=Input((4, 1), BF16, (
            448.0,
            1.0,
            2.0,
            -4.0,
        )),
        x2=Input((4, 2), BF16, (
            1.0, 0.0,
            2.0, 0.0,
            3.0, 0.0,
            4.0, 0.0,
        )),
        offs=(0, 2, 4, 4),
        fp8_dtype=E4M3FN,
        q=(
            0x7E,
            0x38,
            0x76,
            0xFE,
        ),
        scales=(EPS_SCALE_E4M3FN, F32_ONE, 0x42E00000, EPS_SCALE_E4M3FN),
        q2=(
            0x76, 0x00,
            0x7E, 0x00,
            0x7A, 0x00,
            0x7E, 0x00,
        ),
        scales2=(
            EPS_SCALE_E4M3FN,
            EPS_SCALE_E4M3FN,
            0x43600000,
            EPS_SCALE_E4M3FN,
            0x42E00000,
            EPS_SCALE_E4M3FN,
            EPS_SCALE_E4M3FN,
            EPS_SCALE_E4M3FN,
        ),
        why="offs (0, 2, 4, 4): groups 0 and 3 are empty: EPS scales (0x57CBBA10) in both outputs, no rows.",
    ),
)
