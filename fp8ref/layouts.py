"""Jagged group layouts, input memory layouts and edge shapes (SPEC §6).

Group layouts are named so a failing case can be written down ("empty_middle", G=7) and replayed; every layout is a
pure function of (length, groups, generator). Offsets are cumulative exclusive END offsets (SPEC §4).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

import torch

__all__ = [
    "MEMORY_LAYOUTS",
    "OFFS_LAYOUTS",
    "SIZE_ORDERS",
    "SIZE_SPREAD",
    "make_offs",
    "to_memory_layout",
    "validate_offs",
]

#: Named group layouts. "aligned16" is what upstream tests use (every group a multiple of 16, sizes near-uniform).
#: "random16" is what an FP8 MoE step feeds the kernels: random sizes, each a multiple of 16, as fp8moe.moe pads
#: them for the grouped GEMM ("random"'s cuts moved down to multiples of 16: the two share their draws). The rest is
#: what upstream tests lack: uneven, empty, size-1 and dominant groups, and offs[-1] short of the tensor
#: ("tail_past_end").
OFFS_LAYOUTS: tuple[str, ...] = (
    "uniform",
    "aligned16",
    "random16",
    "random",
    "empty_first",
    "empty_middle",
    "empty_last",
    "all_empty",
    "size1",
    "dominant",
    "tail_past_end",
)


#: Orders of a layout's group sizes, written as a suffix: "random16_desc" holds random16's sizes largest first,
#: "random16_asc" smallest first (equal sizes keep their order). They time how a kernel's grid order meets uneven
#: groups (benchmarks/tune_configs.py --points order); they are not in OFFS_LAYOUTS, since the same sizes in another
#: order give a correctness grid nothing the base layout does not.
SIZE_ORDERS: tuple[str, ...] = ("desc", "asc")

#: A spread of a layout's group sizes, written as the suffix "spread<d>" (d a multiple of 16):
#: "aligned16_spread128" moves 128 indices from each odd group to the even group before it, so the sizes alternate
#: long and short about the base layout's, with the same total, the same group count, starts still on multiples of
#: 16, and long and short groups interleaved in the grid as a random layout's are. It separates what uneven sizes
#: cost a kernel from what random cuts change besides (benchmarks/tune_configs.py --points sizes); like SIZE_ORDERS
#: it is not in OFFS_LAYOUTS.
SIZE_SPREAD = "spread"

MEMORY_LAYOUTS: tuple[str, ...] = ("row_major", "col_major")


def _uniform_sizes(length: int, groups: int) -> list[int]:
    ends = [(g + 1) * length // groups for g in range(groups)]
    return [e - s for s, e in zip([0, *ends[:-1]], ends)]


def _sizes(layout: str, length: int, groups: int, gen: torch.Generator) -> list[int]:
    if layout == "uniform":
        return _uniform_sizes(length, groups)
    if layout == "aligned16":
        ends = [16 * ((g + 1) * length // (16 * groups)) for g in range(groups - 1)] + [length]
        return [e - s for s, e in zip([0, *ends[:-1]], ends)]
    if layout in ("random", "random16"):
        cuts = torch.randint(0, length + 1, (groups - 1,), generator=gen).sort().values.tolist()
        if layout == "random16":  # the same draws, each cut moved down to a multiple of 16
            cuts = [cut // 16 * 16 for cut in cuts]
        ends = [*cuts, length]
        return [e - s for s, e in zip([0, *ends[:-1]], ends)]
    if layout == "all_empty":
        return [0] * groups
    if groups == 1:
        return [length]
    if layout == "empty_first":
        return [0, *_uniform_sizes(length, groups - 1)]
    if layout == "empty_last":
        return [*_uniform_sizes(length, groups - 1), 0]
    if layout == "empty_middle":
        sizes = _uniform_sizes(length, groups - 1)
        return [*sizes[: len(sizes) // 2], 0, *sizes[len(sizes) // 2 :]]
    if layout == "size1":
        ones = min(groups - 1, length)
        return [1] * ones + [0] * (groups - 1 - ones) + [length - ones]
    if layout == "dominant":
        small = torch.randint(0, 3, (groups - 1,), generator=gen).tolist()
        while sum(small) > length:
            small[small.index(max(small))] -= 1
        big = int(torch.randint(0, groups, (1,), generator=gen))
        return [*small[:big], length - sum(small), *small[big:]]
    raise ValueError(f"unknown offs layout {layout!r}; known: {OFFS_LAYOUTS}")


def _spread(sizes: list[int], spread: int, layout: str) -> list[int]:
    """``sizes`` with ``spread`` moved from each odd group to the even group before it (SIZE_SPREAD).

    Raises:
        ValueError: ``spread`` is not a multiple of 16, or some odd group holds fewer than ``spread``.
    """
    if spread % 16:
        raise ValueError(f"{layout}: a size spread must be a multiple of 16, got {spread}")
    sizes = list(sizes)
    for g in range(1, len(sizes), 2):
        if sizes[g] < spread:
            raise ValueError(f"{layout}: group {g} holds {sizes[g]} indices, fewer than the spread {spread}")
        sizes[g - 1] += spread
        sizes[g] -= spread
    return sizes


def make_offs(layout: str, length: int, groups: int, gen: torch.Generator) -> tuple[int, ...]:
    """End offsets of ``groups`` groups over ``length`` indices, laid out as ``layout``: one of OFFS_LAYOUTS, or
    one of them but "tail_past_end" with a SIZE_ORDERS suffix (the same sizes sorted) or a SIZE_SPREAD suffix.

    "tail_past_end" splits only the first 3/4 (at least one index is left out) uniformly, so the elements past
    ``offs[-1]`` must be ignored by the kernel and are excluded from the comparison.
    """
    if groups < 1:
        raise ValueError(f"groups must be >= 1, got {groups}")
    base, _, suffix = layout.rpartition("_")
    derived = base in OFFS_LAYOUTS and base != "tail_past_end"
    if derived and suffix in SIZE_ORDERS:
        sizes = sorted(_sizes(base, length, groups, gen), reverse=suffix == "desc")
    elif derived and re.fullmatch(rf"{SIZE_SPREAD}\d+", suffix):
        sizes = _spread(_sizes(base, length, groups, gen), int(suffix.removeprefix(SIZE_SPREAD)), layout)
    elif layout == "tail_past_end":
        covered = max(0, length - max(1, length // 4))
        sizes = _uniform_sizes(covered, groups)
    else:
        sizes = _sizes(layout, length, groups, gen)
    ends, total = [], 0
    for s in sizes:
        total += s
        ends.append(total)
    return tuple(ends)


def validate_offs(offs: Sequence[int], length: int) -> tuple[int, ...]:
    """Check explicit end offsets: non-empty, non-decreasing, within [0, length]."""
    offs = tuple(int(o) for o in offs)
    if not offs:
        raise ValueError("offs needs at least one group")
    if any(b < a for a, b in itertools.pairwise(offs)) or offs[0] < 0 or offs[-1] > length:
        raise ValueError(f"offs must be non-decreasing end offsets within [0, {length}], got {offs}")
    return offs


def to_memory_layout(t: torch.Tensor, layout: str) -> torch.Tensor:
    """The same logical tensor stored "row_major" (contiguous) or "col_major" (last two dims transposed in memory)."""
    if layout == "row_major":
        return t.contiguous()
    if layout == "col_major":
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    raise ValueError(f"unknown memory layout {layout!r}; known: {MEMORY_LAYOUTS}")
