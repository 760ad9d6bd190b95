"""Named cases for fp8ref.ops.colwise_3d_scale_and_cast: x (E, K, N) -> q (E, K, N), scales (E, 1, N). Slices are
columns (e, :, n): read each input grid DOWN its columns.
"""

from fp8ref.cases._table import (
    BF16,
    E4M3FN,
    E4M3FNUZ,
    E5M2FNUZ,
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

OP = "colwise_3d_scale_and_cast"

CASES: tuple[Case, ...] = (
    Case(
        name="all_zero_column_gets_eps_scale",
        op=OP,
        x=Input((2, 3, 2), BF16, (
            0.0, 448.0,
            0.0, 17.0,
            0.0, -19.0,
            448.0, 0.0,
            17.0, -0.0,
            -19.0, 0.0,
        )),
        fp8_dtype=E4M3FN,
        q=(
            0x00, 0x7E,
            0x00, 0x58,
            0x00, 0xDA,
            0x7E, 0x00,
            0x58, 0x80,
            0xDA, 0x00,
        ),
        scales=(EPS_SCALE_E4M3FN, F32_ONE, F32_ONE, EPS_SCALE_E4M3FN),
        why=(
            "Column (0, :, 0) and (1, :, 1) are all zero: scale f32(448/1e-12) = 0x57CBBA10; the [448, 17, -19] "
            "columns have scale 1."
        ),
    ),
    Case(
        name="all_zero_column_pow2_scale_is_2_pow_48",
        op=OP,
        x=Input((1, 3, 2), BF16, (
            0.0, 448.0,
            0.0, 17.0,
            0.0, -19.0,
        )),
        fp8_dtype=E4M3FN,
        pow2=True,
        q=(
            0x00, 0x7E,
            0x00, 0x58,
            0x00, 0xDA,
        ),
        scales=(EPS_SCALE_E4M3FN_POW2, F32_ONE),
        why="EPS scale 447999985582080.0 -> pow2 2^48 (0x57800000).",
    ),
    Case(
        name="all_zero_column_e4m3fnuz",
        op=OP,
        x=Input((1, 3, 2), BF16, (
            0.0, 240.0,
            0.0, 17.0,
            0.0, -19.0,
        )),
        fp8_dtype=E4M3FNUZ,
        q=(
            0x00, 0x7F,
            0x00, 0x60,
            0x00, 0xE2,
        ),
        scales=(EPS_SCALE_E4M3FNUZ, F32_ONE),
        why="e4m3fnuz EPS scale f32(240/1e-12) = 0x575A475B.",
    ),
    Case(
        name="all_zero_column_e4m3fnuz_pow2_scale_is_2_pow_47",
        op=OP,
        x=Input((1, 3, 2), BF16, (
            0.0, 240.0,
            0.0, 17.0,
            0.0, -19.0,
        )),
        fp8_dtype=E4M3FNUZ,
        pow2=True,
        q=(
            0x00, 0x7F,
            0x00, 0x60,
            0x00, 0xE2,
        ),
        scales=(EPS_SCALE_E4M3FNUZ_POW2, F32_ONE),
        why="e4m3fnuz EPS scale 240000004259840.0 -> pow2 2^47 (0x57000000).",
    ),
    Case(
        name="nan_poisons_only_its_column",
        op=OP,
        x=Input((2, 3, 2), F32, (
            1.0, 448.0,
            NAN, 17.0,
            -2.0, -19.0,
            448.0, 1.0,
            17.0, 2.0,
            -19.0, 3.0,
        )),
        fp8_dtype=E4M3FN,
        q=(
            0x7F, 0x7E,
            0x7F, 0x58,
            0x7F, 0xDA,
            0x7E, 0x71,
            0x58, 0x79,
            0xDA, 0x7E,
        ),
        scales=(F32_NAN, F32_ONE, F32_ONE, 0x43155555),
        why=(
            "Only column (0, :, 0) holds a NaN: its scale is NaN and its bytes NaN codes; the same column of "
            "expert 1 and the other columns keep finite scales (448/3 = 149.33 -> 0x43155555 for [1, 2, 3])."
        ),
    ),
    Case(
        name="inf_gives_zero_scale",
        op=OP,
        x=Input((1, 3, 2), F32, (
            INF, -INF,
            1.0, -0.0,
            -1.0, 2.0,
        )),
        fp8_dtype=E4M3FN,
        q=(
            0x7F, 0x7F,
            0x00, 0x80,
            0x80, 0x00,
        ),
        scales=(F32_ZERO, F32_ZERO),
        why="amax +inf (from +inf or -inf) -> scale 0; inf * 0 = NaN; finite x * 0 = +-0 keeping the sign.",
    ),
    Case(
        name="neg_zero_stays_neg_zero_e4m3fn",
        op=OP,
        x=Input((1, 3, 1), BF16, (
            448.0,
            -0.0,
            0.0,
        )),
        fp8_dtype=E4M3FN,
        q=(
            0x7E,
            0x80,
            0x00,
        ),
        scales=(F32_ONE,),
        why="-0 * 1 = -0 -> 0x80 in e4m3fn.",
    ),
    Case(
        name="neg_zero_becomes_pos_zero_e4m3fnuz",
        op=OP,
        x=Input((1, 3, 1), BF16, (
            240.0,
            -0.0,
            0.0,
        )),
        fp8_dtype=E4M3FNUZ,
        q=(
            0x7F,
            0x00,
            0x00,
        ),
        scales=(F32_ONE,),
        why="e4m3fnuz has no -0: -0 -> 0x00.",
    ),
    Case(
        name="subnormal_outputs_e4m3fn",
        op=OP,
        x=Input((1, 5, 1), BF16, (
            448.0,
            2.0**-9,
            -2.0**-9,
            2.0**-10,
            3 * 2.0**-10,
        )),
        fp8_dtype=E4M3FN,
        q=(
            0x7E,
            0x01,
            0x81,
            0x00,
            0x02,
        ),
        scales=(F32_ONE,),
        why="scale 1: 2^-9 -> 0x01, -2^-9 -> 0x81, tie 2^-10 -> 0x00, tie 3 * 2^-10 -> 0x02 (ties to even).",
    ),
    Case(
        name="rne_ties_e4m3fn",
        op=OP,
        x=Input((1, 5, 1), BF16, (
            448.0,
            432.0,
            17.0,
            19.0,
            -400.0,
        )),
        fp8_dtype=E4M3FN,
        q=(
            0x7E,
            0x7E,
            0x58,
            0x5A,
            0xFC,
        ),
        scales=(F32_ONE,),
        why="scale 1, ties to even: 432 -> 448 (0x7E), 17 -> 16 (0x58), 19 -> 20 (0x5A), -400 -> -384 (0xFC).",
    ),
    Case(
        name="inexact_scale_rounds_once",
        op=OP,
        x=Input((1, 3, 1), F32, (
            3.0,
            1.0,
            -0.75,
        )),
        fp8_dtype=E4M3FN,
        q=(
            0x7E,
            0x71,
            0xEE,
        ),
        scales=(0x43155555,),
        why="448/3 -> f32 0x43155555: 3 -> 448 (0x7E), 1 -> 144 (0x71), -0.75 -> -112 (0xEE).",
    ),
    Case(
        name="pow2_scale_rounds_down",
        op=OP,
        x=Input((1, 3, 1), F32, (
            3.0,
            1.0,
            -0.75,
        )),
        fp8_dtype=E4M3FN,
        pow2=True,
        q=(
            0x7C,
            0x70,
            0xEC,
        ),
        scales=(0x43000000,),
        why="448/3 -> pow2 128: 3 -> 384 (0x7C), 1 -> 128 (0x70), -0.75 -> -96 (0xEC).",
    ),
    Case(
        name="single_row_k_is_1",
        op=OP,
        x=Input((2, 1, 3), BF16, (
            2.0, -0.5, 0.0,
            448.0, 1.0, -0.0,
        )),
        fp8_dtype=E4M3FN,
        q=(
            0x7E, 0xFE, 0x00,
            0x7E, 0x7E, 0x80,
        ),
        scales=(0x43600000, 0x44600000, EPS_SCALE_E4M3FN, F32_ONE, 0x43E00000, EPS_SCALE_E4M3FN),
        why=(
            "K = 1: each column is one element: 2 -> 224 (0x43600000), -0.5 -> 896 (0x44600000), 0 and -0 -> EPS "
            "scale (-0 -> 0x80), 1 -> 448 (0x43E00000)."
        ),
    ),
    Case(
        name="experts_do_not_share_amax",
        op=OP,
        x=Input((2, 2, 2), BF16, (
            2.0, 4.0,
            1.0, 1.0,
            448.0, 8.0,
            1.0, 1.0,
        )),
        fp8_dtype=E4M3FN,
        q=(
            0x7E, 0x7E,
            0x76, 0x6E,
            0x7E, 0x7E,
            0x38, 0x66,
        ),
        scales=(0x43600000, 0x42E00000, F32_ONE, 0x42600000),
        why=(
            "amax is over K only, never over E: column n = 0 has amax 2 in expert 0 (scale 224) and 448 in expert "
            "1 (scale 1), so the same input 1.0 quantizes to 224 (0x76) and to 1 (0x38)."
        ),
    ),
    Case(
        name="e5m2fnuz_neg_zero_and_subnormal",
        op=OP,
        x=Input((1, 4, 1), BF16, (
            57344.0,
            -0.0,
            2.0**-17,
            -3 * 2.0**-17,
        )),
        fp8_dtype=E5M2FNUZ,
        q=(
            0x7F,
            0x00,
            0x01,
            0x83,
        ),
        scales=(F32_ONE,),
        why="e5m2fnuz: scale 1; -0 -> 0x00 (no -0); 2^-17 is its smallest subnormal (0x01); -3 * 2^-17 -> 0x83.",
    ),
)
