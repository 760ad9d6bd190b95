"""Launch plans on the GPU: a replayed call runs Triton's compiled kernels directly, so each op, layout and launch
policy (fixed small-problem config, autotuned choice, the two-launch atomic method with its zeroed scratch) is
checked here against the normal path, byte for byte, on inputs the recorded call never saw.

The recording logic and every fallback are pinned down on the CPU (tests/test_replay.py); the committed H200 log of
these tests is under benchmarks/results/.
"""

from __future__ import annotations

import pytest
import torch

from fp8ref.testing import assert_same_bits

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA/ROCm device"),
]

E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2


#: The device the case builders put their tensors on (set per test: the worker's GPU).
_DEVICE = {"device": "cuda"}


def _bf16(*shape, seed, dtype=torch.bfloat16):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.randn(*shape, generator=g) * 3).to(dtype).to(_DEVICE["device"])


def _misaligned(rows, cols, seed):
    """A (rows, cols) bf16 view one element into its storage: the data pointer is not 16-byte aligned."""
    view = _bf16(rows, cols + 1, seed=seed)[:, 1:]
    assert view.data_ptr() % 16 != 0
    return view


def _col_major_3d(e, k, n, seed):
    return _bf16(e, n, k, seed=seed).transpose(-2, -1)


def _offs(ends):
    return torch.tensor(ends, dtype=torch.int32, device=_DEVICE["device"])


#: (id, op, inputs(seed) -> positional tensors, extra positional args, keyword args). Offsets end at the jagged
#: length, so every output byte is written and whole outputs compare.
CASES = [
    ("rowwise_2d", "rowwise_2d_scale_and_cast", lambda s: (_bf16(300, 520, seed=s),), (E4, False), {}),
    ("rowwise_2d-misaligned", "rowwise_2d_scale_and_cast", lambda s: (_misaligned(300, 520, s),), (E4, False), {}),
    (
        "rowwise_2d-f32-e5m2-pow2",
        "rowwise_2d_scale_and_cast",
        lambda s: (_bf16(96, 40, seed=s, dtype=torch.float32),),
        (E5, True),
        {},
    ),
    ("rowwise_2d-autotuned", "rowwise_2d_scale_and_cast", lambda s: (_bf16(2048, 1024, seed=s),), (E4, False), {}),
    ("colwise_3d-col-major", "colwise_3d_scale_and_cast", lambda s: (_col_major_3d(3, 160, 96, s),), (E4, False), {}),
    ("colwise_3d-row-major", "colwise_3d_scale_and_cast", lambda s: (_bf16(3, 160, 96, seed=s),), (E4, True), {}),
    (
        "transpose-atomic",
        "rowwise_3d_transpose_rhs",
        lambda s: (_bf16(3, 160, 96, seed=s),),
        (E4, False),
        {"method": "atomic"},
    ),
    (
        "transpose-atomic-autotuned",
        "rowwise_3d_transpose_rhs",
        lambda s: (_bf16(4, 512, 1024, seed=s),),
        (E4, False),
        {"method": "atomic"},
    ),
    (
        "transpose-reduction",
        "rowwise_3d_transpose_rhs",
        lambda s: (_bf16(3, 160, 96, seed=s),),
        (E4, False),
        {"method": "reduction"},
    ),
    (
        "per_group_rowwise",
        "per_group_rowwise_scales",
        lambda s: (_bf16(64, 500, seed=s), _offs([0, 1, 130, 130, 500])),
        (E4, False),
        {},
    ),
    (
        "per_group_rowwise-misaligned",
        "per_group_rowwise_scales",
        lambda s: (_misaligned(64, 500, s), _offs([0, 1, 130, 130, 500])),
        (E4, False),
        {},
    ),
    (
        "per_group_colwise",
        "per_group_colwise_scales",
        lambda s: (_bf16(500, 96, seed=s), _offs([0, 1, 130, 130, 500])),
        (E4, False),
        {},
    ),
    (
        "per_group_colwise-autotuned",
        "per_group_colwise_scales",
        lambda s: (_bf16(4096, 512, seed=s), _offs([0, 1000, 1000, 2512, 4096])),
        (E4, False),
        {},
    ),
    (
        "dual",
        "per_group_colwise_scales_dual",
        lambda s: (_bf16(500, 96, seed=s), _bf16(500, 48, seed=s + 100), _offs([7, 7, 300, 500])),
        (E4, False),
        {},
    ),
]


class _LaunchCounter:
    """Counts fp8moe.configs.launch calls: a replayed call makes none."""

    def __init__(self, launch):
        self.launch, self.calls = launch, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.launch(*args, **kwargs)


def _poison_allocator(device, nbytes=64 << 20):
    """Leave a block of 0x7F bytes in the caching allocator, for the next outputs to be carved from."""
    del_me = torch.full((nbytes,), 0x7F, dtype=torch.uint8, device=device)
    del del_me


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_replayed_call_writes_the_bytes_of_a_normal_call_on_new_inputs(case, device, monkeypatch):
    import fp8moe
    from fp8moe import configs, replay

    _, name, inputs, extra, kwargs = case
    op = getattr(fp8moe, name)

    monkeypatch.setitem(_DEVICE, "device", device)

    def call(tensors):
        return op(*tensors, *extra, **kwargs)

    counter = _LaunchCounter(configs.launch)
    monkeypatch.setattr(configs, "launch", counter)
    replay.forget()
    for seed in (1, 2):  # an autotuned key tunes on the first call and is recorded on the second
        call(inputs(seed))
    assert replay.plan_count() == 1

    new_inputs = inputs(3)  # built before the sync check: a host-to-device copy syncs
    monkeypatch.setattr(replay, "ENABLED", False)
    expected = call(new_inputs)  # the normal path on the inputs the replay gets
    monkeypatch.setattr(replay, "ENABLED", True)
    torch.cuda.synchronize(device)
    _poison_allocator(device)
    launches = counter.calls
    torch.cuda.set_sync_debug_mode("error")
    try:
        replayed = call(new_inputs)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert counter.calls == launches, "the call was not replayed"
    assert len(replayed) == len(expected)
    for i, (a, b) in enumerate(zip(replayed, expected)):
        assert_same_bits(a, b, strict_nan=True, what=f"{name} output {i}")
