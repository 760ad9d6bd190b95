"""The default battery: the few calls ``compare(kernel, shape)`` makes when the caller pins nothing else.

One call of a kernel on one input rarely finds a bug: of eleven realistic kernel bugs, a single default call caught
one (issue #10). Most need a particular value (a NaN, a tie, an amax next to a power of two), pow2 scales, another
fp8 format, a column-major input, an empty or size-1 group, offsets that end before the data, a second group count
on the same shape, or a shape with tails. The battery is a small fixed list of members covering those axes:

- the axes (frozen data below): input values, pow2, fp8 format (those the device stores), input memory layout, and
  for jagged ops the offs layout and the group count; a KernelSpec's kwargs variants (e.g. ``method``);
- which combinations: every (fp8 format, values) pair once, the other axes chosen by the spec grid's pairwise
  picker (``fp8ref.spec._pairwise``), so each value of each axis appears and, member count permitting, every pair of
  values of two axes meets (pow2 meets "special", an fnuz format meets "special", ...);
- shapes: the caller's shape, plus edge shapes derived from it when it is too regular to reach a kernel's edge
  paths (``edge_shapes``); members are spread over the shapes, not multiplied by them;
- order: per shape, the smaller group count first, so a per-shape cache that ignores the group count is caught.

An argument the caller passes pins its axis (``values="special"``: every member uses it). Everything here is data
and pure functions; ``fp8ref.engine.comparator`` runs the members and ``merge_reports`` folds their Reports into
one. The pytest plugin, the fuzzer and bring-up name members with the same ``member_label``.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from fp8ref.contracts import QUANTIZE_OPS, OpContract, contract
from fp8ref.engine.report import Report
from fp8ref.formats import dtype_id
from fp8ref.spec import KernelSpec, _pairwise

__all__ = [
    "CALLER_MEMBERS",
    "DTYPES",
    "EXAMPLE_SHAPES",
    "FORMATS",
    "GROUPS",
    "OFFS",
    "POW2",
    "VALUES",
    "Member",
    "battery_formats",
    "build_battery",
    "device_formats",
    "edge_shapes",
    "label_of",
    "member_label",
    "merge_reports",
    "output_names",
]

#: Input values: "normal" (N(0,1) x 2^u per slice) and "special" (per slice one of NaN, +-inf, all-zero with mixed
#: signs, -0 and input subnormals, an amax within 2 ulps of fp8_max * 2^k, exact ties; fp8ref.engine.values).
VALUES: tuple[str, ...] = ("normal", "special")
#: round_scales_to_power_of_2.
POW2: tuple[bool, ...] = (False, True)
#: Input dtypes: bf16 first (what MoE training feeds), then f32 (its amax can sit within f32 ulps of a power of two,
#: where the log2 pow2 rule rounds up) and f16 (its own subnormals and range).
DTYPES: tuple[torch.dtype, ...] = (torch.bfloat16, torch.float32, torch.float16)
#: Every fp8 format, in the order members take them (the OCP formats first: every GPU stores one of them).
FORMATS: tuple[torch.dtype, ...] = (
    torch.float8_e4m3fn,
    torch.float8_e5m2,
    torch.float8_e4m3fnuz,
    torch.float8_e5m2fnuz,
)
#: Offs layouts for jagged ops (fp8ref.layouts): an empty first / middle / last group, size-1 groups, one dominant
#: group (longer than any tile, with near-empty neighbours), random cuts (sizes not multiples of 16), and ends short
#: of the data ("tail_past_end": the contract leaves what follows offs[-1] unspecified, so a kernel must not let it
#: into the last group's amax).
#: The first goes to the caller's shape: ends short of the data, where the unspecified tail is long.
OFFS: tuple[str, ...] = ("tail_past_end", "dominant", "empty_first", "empty_middle", "empty_last", "size1", "random")
#: Group counts of jagged ops, run in this order on each shape: a cache keyed on the shape alone is filled by the
#: smaller count and then misses the larger one's groups.
GROUPS: tuple[int, ...] = (3, 7)
#: The op rows' example shapes (the README's, and one per other op of the same size class): the battery's time budget
#: (under 5 s on the CPU interpreter, under 1 s on a GPU) and tests/test_engine_battery.py are measured at these.
EXAMPLE_SHAPES: Mapping[str, tuple[int, ...]] = {name: contract(name).example_shape for name in QUANTIZE_OPS}

#: How many members run on the caller's shape when edge shapes are added; the rest run on the edge shapes, which are
#: small (a dim of 3) but keep the reduced length, so the battery costs about CALLER_MEMBERS calls at the caller's
#: size. Measured with fp8moe in the Triton interpreter (2 shared CPU cores, torch 2.13, triton 3.9): 2 caller
#: members took 4.8-6.2 s at (4096, 512) rowwise and 4.9-5.6 s at (1000, 100) per-group colwise, 1 took 2.4-2.5 s
#: and 3.8-3.9 s, and still caught all 31 committed mutants with their categories (benchmarks/battery_mutants.py).
#: The engine's own work (inputs, the CPU reference, assessment) is ~1 s per (4096, 512) call here, also on a GPU.
CALLER_MEMBERS = 1

#: A dim smaller than one block: 3 is below every tile size a kernel plausibly uses (the smallest here is 8).
_SUB_BLOCK = 3
#: Added to an even dim to make it odd, so that it is not a multiple of any power-of-two block (16, 32, ..., 1024);
#: odd and above 8, so a multiple of 8 becomes one plus a tail of 5 (mod 8) or 13 (mod 16).
_TAIL = 13
#: Cap of a dim that is neither reduced nor sub-block in the second edge shape: above 128, so tiles of up to 128 run
#: full blocks and a tail, while the shape stays cheap.
_CAP = 131


def output_names(c: OpContract) -> tuple[str, ...]:
    """Names of the op's outputs in return order: ("q", "scales"), or ("q1", "s1", "q2", "s2") for the dual op."""
    if c.n_inputs == 2:
        return ("q1", "s1", "q2", "s2")
    return ("q", "scales")


def device_formats(device: torch.device | str) -> tuple[torch.dtype, ...]:
    """The fp8 formats a plain callable is tried with on ``device``: all four on the CPU (torch stores them all) and
    on ROCm, only the OCP formats on NVIDIA GPUs (fnuz types do not compile there: H200, triton 3.6)."""
    device = torch.device(device)
    if device.type == "cuda" and torch.version.hip is None:
        return FORMATS[:2]
    return FORMATS


def battery_formats(spec: KernelSpec | None, device: torch.device | str) -> tuple[torch.dtype, ...]:
    """The formats the battery tries: those the kernel's spec supports on ``device`` (its ``unsupported`` answers
    None), or ``device_formats`` for a callable without a spec."""
    if spec is None or spec.supports is None:
        return device_formats(device)
    return tuple(f for f in FORMATS if spec.unsupported(device, f) is None)


def _blocked_dims(c: OpContract) -> tuple[int, ...]:
    """Dims a kernel tiles: all but a 3-D op's expert dim E, which is a grid dim only."""
    return tuple(i for i, d in enumerate(c.dims) if d != "E")


def _odd(d: int) -> int:
    return d if d % 2 or d == 0 else d + _TAIL


def edge_shapes(c: OpContract, shape: Sequence[int]) -> tuple[tuple[tuple[int, ...], ...], str]:
    """Shapes derived from ``shape`` that reach the edge paths it misses, and why they are needed ("" if none).

    A shape reaches a kernel's edge paths when every tiled dim is odd (not a multiple of any power-of-two block, so
    every loop ends in a masked tail) and one of them is smaller than a block (the whole dim is one partial tile);
    for the dual op also when N1 != N2 in both orders (the two halves' grids differ). Otherwise two shapes are added:

    - "narrow": the reduced dim made odd (d -> d + 13 when even; its length is kept, so groups and rows stay longer
      than a tile), every other tiled dim 3;
    - "short": the reduced dim 3, every other tiled dim made odd and capped at 131 (full tiles of up to 128 and a
      tail).

    For the dual op the first has N1 > N2 and the second N1 < N2. A 3-D op's E is capped at 3 (a grid dim).
    """
    shape = tuple(int(s) for s in shape)
    tiled = _blocked_dims(c)
    reasons = []
    if any(shape[i] % 2 == 0 for i in tiled):
        reasons.append("an even dim (no tail under power-of-two tiles)")
    if not any(0 < shape[i] <= _SUB_BLOCK for i in tiled):
        reasons.append(f"no dim below {_SUB_BLOCK + 1} (every dim at least one tile of the smallest size)")
    if c.n_inputs == 2 and shape[1] == shape[2]:
        reasons.append("N1 == N2")
    if not reasons:
        return (), ""
    reduce = c.reduce_dim
    narrow, short = list(shape), list(shape)
    for i in tiled:
        if i == reduce:
            narrow[i], short[i] = _odd(shape[i]), _SUB_BLOCK
        else:
            narrow[i], short[i] = _SUB_BLOCK, _odd(min(shape[i], _CAP))
    for i in set(range(len(shape))) - set(tiled):
        narrow[i] = short[i] = min(shape[i], 3)
    if c.n_inputs == 2:
        # Both orders of N1 vs N2: the second half's grid must not be launched with the first half's width.
        narrow[1], narrow[2] = max(_odd(shape[1]), 5), _SUB_BLOCK
        short[1], short[2] = _SUB_BLOCK, max(_odd(min(shape[2], _CAP)), 5)
    shapes = tuple(dict.fromkeys(s for s in (tuple(narrow), tuple(short)) if s != shape))
    return shapes, "; ".join(reasons)


@dataclass(frozen=True)
class Member:
    """One call of the battery: every axis of ``compare`` fixed.

    Attributes:
        offs: a named layout (fp8ref.layouts.OFFS_LAYOUTS), explicit end offsets, or None (ops without offs).
        groups: the group count of a named ``offs`` layout (None otherwise).
        kernel_kwargs: a KernelSpec kwargs variant (e.g. {"method": "atomic"}).
        edge: whether ``shape`` is an edge shape the battery derived (not the caller's).
    """

    shape: tuple[int, ...]
    values: str
    round_scales_to_power_of_2: bool
    dtype: torch.dtype
    fp8_dtype: torch.dtype
    layout: str
    offs: str | tuple[int, ...] | None
    groups: int | None
    kernel_kwargs: Mapping[str, object] = dataclasses.field(default_factory=dict)
    edge: bool = False

    @property
    def label(self) -> str:
        """This member's name (``member_label``), e.g. ``1013x3,values=special,pow2,bf16,e5m2,col_major``."""
        return label_of(self)


def label_of(point) -> str:
    """``member_label`` of anything carrying a call's axes as attributes: a battery Member, a KernelSpec Param."""
    return member_label(
        point.shape,
        values=point.values,
        pow2=point.round_scales_to_power_of_2,
        dtype=point.dtype,
        fp8_dtype=point.fp8_dtype,
        layout=point.layout,
        offs=point.offs,
        groups=point.groups,
        kernel_kwargs=point.kernel_kwargs,
    )


def member_label(
    shape: Sequence[int],
    *,
    values: str,
    pow2: bool,
    dtype: torch.dtype | str,
    fp8_dtype: torch.dtype | str,
    layout: str,
    offs: str | Sequence[int] | None = None,
    groups: int | None = None,
    kernel_kwargs: Mapping[str, object] | None = None,
) -> str:
    """The one way members are named, e.g. ``1013x3,values=special,pow2,bf16,e5m2,col_major,offs=empty_first,G=7``.

    Explicit offsets are written as ``offs=[3,3,9]``; pow2 appears only when on; kwargs as ``method=atomic``.
    """
    parts = ["x".join(str(int(s)) for s in shape), f"values={values}"]
    if pow2:
        parts.append("pow2")
    parts += [dtype_id(dtype), dtype_id(fp8_dtype), layout]
    if offs is not None:
        name = offs if isinstance(offs, str) else "[" + ",".join(str(int(o)) for o in offs) + "]"
        parts.append(f"offs={name}")
        parts.append(f"G={groups if isinstance(offs, str) else len(offs)}")
    parts += [f"{k}={v}" for k, v in (kernel_kwargs or {}).items()]
    return ",".join(parts)


def build_battery(
    c: OpContract,
    shape: Sequence[int],
    *,
    formats: Sequence[torch.dtype],
    values: str | None = None,
    round_scales_to_power_of_2: bool | None = None,
    dtype: torch.dtype | None = None,
    fp8_dtype: torch.dtype | None = None,
    layout: str | None = None,
    offs: str | Sequence[int] | None = None,
    groups: int | None = None,
    kwargs_grid: Sequence[Mapping[str, object]] = ({},),
) -> tuple[tuple[Member, ...], tuple[str, ...]]:
    """The members for ``shape``, with the given axes pinned (None: the battery's values), and notes for the Report.

    Args:
        c: the op contract: the formats, value kinds, pow2 options and input layouts it takes, and whether it is
            jagged.
        shape: the caller's shape; for quantize ops without explicit offsets, edge shapes derived from it
            (``edge_shapes``) are added and said so in the notes.
        formats: the fp8 formats to try when ``fp8_dtype`` is None (``battery_formats``).
        values: pins the value distribution; None: those of VALUES the op takes (else its first value kind).
        round_scales_to_power_of_2: pins pow2; None: the contract's options.
        dtype: pins the input dtype; None: DTYPES.
        fp8_dtype: pins the fp8 format; None: every format of ``formats`` the op takes.
        layout: pins the input memory layout; None: the contract's input layouts.
        offs: jagged ops: a named layout pins it (None: OFFS); explicit end offsets pin the offsets and the group
            count, and add no edge shapes (they belong to the caller's jagged length).
        groups: pins the group count of a named ``offs`` layout; None: GROUPS, in sequence. Where the contract has
            a group dim, the shape fixes the count instead (one group per expert).
        kwargs_grid: kernel keyword variants to spread over the members (a KernelSpec's ``kwargs_grid``).

    Raises:
        ValueError: when no format of ``formats`` is one the op takes and no ``fp8_dtype`` is pinned.
    """
    shape = tuple(int(s) for s in shape)
    notes: list[str] = []
    explicit_offs = offs is not None and not isinstance(offs, str)
    shapes = [shape]
    quantize = c.kind == "quantize"  # other kinds constrain their dims (GEMM alignment)
    if not explicit_offs and quantize:  # explicit offsets belong to the caller's jagged length
        extra, why = edge_shapes(c, shape)
        if extra:
            shapes += extra
            notes.append(f"edge shapes {', '.join(map(str, extra))} added: {shape} has {why}")
    # What the op takes at all (a GEMM row narrows formats, values and pow2; fp8ref.contracts).
    takes, kinds = c.fp8_dtypes, c.value_kinds
    fmts = (fp8_dtype,) if fp8_dtype is not None else tuple(f for f in formats if f in takes)
    if not fmts:
        raise ValueError(f"no fp8 format to try: {c.name} takes {takes}, the kernel runs {tuple(formats)}")
    vals = (values,) if values is not None else tuple(v for v in VALUES if v in kinds) or kinds[:1]
    if c.jagged:
        offs_axis = (tuple(int(o) for o in offs),) if explicit_offs else ((offs,) if offs is not None else OFFS)
        groups_axis = (None,) if explicit_offs else ((groups,) if groups is not None else GROUPS)
        if c.group_dim is not None and not explicit_offs:
            groups_axis = (shape[c.group_dim],)  # one group per expert: the shape fixes the count
    else:
        offs_axis, groups_axis = (None,), (None,)
    free = (
        (round_scales_to_power_of_2,) if round_scales_to_power_of_2 is not None else c.round_scales_options,
        (layout,) if layout is not None else c.input_layouts,
        (dtype,) if dtype is not None else DTYPES,
        offs_axis,
        tuple(kwargs_grid) or ({},),
    )
    pairs = list(itertools.product(range(len(fmts)), range(len(vals))))
    # Enough members that every (format, values) pair and every value of every free axis appears (8 pairs with four
    # formats; 7 offs layouts with two), and that each edge shape (or the caller's, alone) runs every group count.
    in_sequence = len(groups_axis) * max(len(shapes) - 1, 1)
    n = max(len(pairs), len(shapes), *map(len, free), in_sequence + (CALLER_MEMBERS if len(shapes) > 1 else 0))
    base, used = [], Counter()
    for i in range(n):
        # The caller's shape takes the first CALLER_MEMBERS positions (the first format, normal values first); the
        # edge shapes take turns with the rest, shifted by one each round so that each sees both values. Each shape
        # sees the group counts in turn.
        if i < CALLER_MEMBERS or len(shapes) == 1:
            si = 0
        else:
            k, edges = i - CALLER_MEMBERS, len(shapes) - 1
            si = 1 + (k + k // edges) % edges
        base.append((*pairs[i % len(pairs)], si, used[si] % len(groups_axis)))
        used[si] += 1
    rows = [b + f for b, f in zip(base, _pairwise(base, tuple(map(len, free))))]
    members = [
        Member(
            shape=shapes[si],
            values=vals[vi],
            round_scales_to_power_of_2=free[0][pi],
            dtype=free[2][di],
            fp8_dtype=fmts[fi],
            layout=free[1][li],
            offs=free[3][oi],
            groups=groups_axis[gi],
            kernel_kwargs=dict(free[4][ki]),
            edge=si > 0,
        )
        for fi, vi, si, gi, pi, li, di, oi, ki in rows
    ]
    # Run order: shape by shape (the caller's first), the smaller group count first on each.
    members.sort(key=lambda m: (shapes.index(m.shape), m.groups or 0))
    return tuple(members), tuple(notes)


def _labelled(label: str, texts: Sequence[str]) -> list[str]:
    return [f"[{label}] {t}" for t in texts]


def merge_reports(reports: Sequence[Report], notes: Sequence[str] = (), max_examples: int = 20) -> Report:
    """One Report for a battery run: counts summed, failing categories and examples of every member, labelled.

    The merged report's ``call`` (and so its ``repro()``) is that of the first failing member (the first member when
    all pass); its SQNR and heatmaps are that member's. ``members`` keeps every member's own Report, in run order.
    Examples are taken round-robin over the failing members, so each of them is shown.
    """
    failed = [r for r in reports if not r.ok]
    lead = failed[0] if failed else reports[0]
    counts: Counter[str] = Counter()
    for r in reports:
        counts.update(r.categories)
    failing = sorted({k for r in reports for k in r.failing}, key=lambda k: (-counts[k], k))
    # Failing examples first (round-robin over members), then tolerated ones.
    queues = [[dataclasses.replace(m, member=r.call.member) for m in r.mismatches] for r in failed or reports]
    mismatches = []
    for rank in range(max(map(len, queues), default=0)):
        mismatches += [q[rank] for q in queues if rank < len(q)]
    mismatches.sort(key=lambda m: not m.fails)
    errors = [r for r in reports if r.error]
    first_error = errors[0] if errors else None
    return dataclasses.replace(
        lead,
        ok=not failed,
        error=None if first_error is None else first_error.error,  # its member: the labelled kernel_raised problem
        traceback=None if first_error is None else first_error.traceback,
        structure=tuple(dict.fromkeys(t for r in reports for t in _labelled(r.call.member, r.structure))),
        problems=tuple(dict.fromkeys((cat, f"[{r.call.member}] {text}") for r in reports for cat, text in r.problems)),
        explained=tuple(dict.fromkeys(t for r in reports for t in _labelled(r.call.member, r.explained))),
        n_fp8=sum(r.n_fp8 for r in reports),
        n_fp8_mismatches=sum(r.n_fp8_mismatches for r in reports),
        n_scales=sum(r.n_scales for r in reports),
        n_scale_mismatches=sum(r.n_scale_mismatches for r in reports),
        categories=dict(counts),
        failing=tuple(failing),
        mismatches=tuple(mismatches[:max_examples]),
        members=tuple(reports),
        notes=tuple(notes),
    )
