"""Programmatic dependent launch on the GPU (fp8moe.backend.Backend.dependent_launch, opt-in with FP8MOE_PDL=1): the
span kernels launched with grid dependency control write the bytes of the normal launch, eager, replayed from launch
plans and inside a CUDA graph, also when a kernel reads what the kernel right before it wrote with no other kernel
between them, so that only its wait orders the two.

The launch logic is pinned down on the CPU (tests/test_replay.py, tests/test_configs.py) and the instructions by an
sm_90 compile (tests/test_kernel_instructions.py); the normal launch is checked against fp8ref by the rest of the
suite, so these tests compare the two launches.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

import fp8moe
import fp8moe.ops
from fp8moe import backend as backend_module
from fp8moe import configs, replay
from fp8ref.testing import assert_same_bits

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available() or torch.version.hip is not None or torch.cuda.get_device_capability() < (9, 0),
        reason="needs an NVIDIA GPU with grid dependency control (sm_90+)",
    ),
]

E4 = torch.float8_e4m3fn


class _Launches:
    """Switch dependent launches on and off for the ops (through fp8moe.ops.backend_for) and keep the keywords of
    every span kernel launch. Launch plans are dropped at each switch: a public key holds no backend, so a plan
    recorded under one setting would replay under the other."""

    def __init__(self, monkeypatch):
        from fp8moe.kernels._per_group import _per_group_rows_kernel
        from fp8moe.kernels.per_group_colwise_scales_dual import _per_group_colwise_scales_dual_kernel

        self.monkeypatch, self.real = monkeypatch, backend_module.backend_for
        self.keywords = []
        for kernel in (_per_group_rows_kernel, _per_group_colwise_scales_dual_kernel):
            run = kernel.run
            monkeypatch.setattr(kernel, "run", lambda *a, _run=run, **kw: self.keywords.append(kw) or _run(*a, **kw))

    def set(self, dependent: bool) -> None:
        """Launch the next calls with dependent launches on or off, whatever FP8MOE_PDL says."""
        replay.forget()
        self.keywords.clear()
        real = self.real
        self.monkeypatch.setattr(
            fp8moe.ops, "backend_for", lambda device: dataclasses.replace(real(device), dependent_launch=dependent)
        )

    def ran_dependent(self) -> bool:
        """Whether every span kernel launch since the switch was a dependent launch (and there was one)."""
        return bool(self.keywords) and all(
            kw.get("launch_pdl") is True and kw.get("DEPENDENT_LAUNCH") is True for kw in self.keywords
        )

    def ran_normal(self) -> bool:
        """Whether no span kernel launch since the switch was a dependent launch (and there was one)."""
        dependent = [kw for kw in self.keywords if kw.get("launch_pdl") or kw.get("DEPENDENT_LAUNCH")]
        return bool(self.keywords) and not dependent


@pytest.fixture
def launches(monkeypatch):
    switch = _Launches(monkeypatch)
    yield switch
    replay.forget()


def _bf16(*shape, seed, device):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.randn(*shape, generator=g) * 3).to(torch.bfloat16).to(device)


def _offs(ends, device):
    return torch.tensor(ends, dtype=torch.int32, device=device)


def _ops(device):
    """Each per-group op on a few groups, unaligned ends and an empty group included; offsets end at the jagged
    length, so every output byte is written."""
    x = _bf16(1000, 384, seed=1, device=device)
    y = _bf16(1000, 256, seed=2, device=device)
    offs = _offs([160, 160, 417, 1000], device)
    wide = _bf16(96, 1000, seed=3, device=device)
    return {
        "per_group_rowwise": lambda: fp8moe.per_group_rowwise_scales(wide, offs, E4),
        "per_group_colwise": lambda: fp8moe.per_group_colwise_scales(x, offs, E4),
        "per_group_colwise_dual": lambda: fp8moe.per_group_colwise_scales_dual(x, y, offs, E4),
    }


@pytest.mark.parametrize("name", ["per_group_rowwise", "per_group_colwise", "per_group_colwise_dual"])
def test_a_dependent_launch_writes_the_bytes_of_the_normal_launch_eager_and_replayed(name, launches, device):
    call = _ops(device)[name]
    launches.set(dependent=False)
    expected = call()
    assert launches.ran_normal()
    launches.set(dependent=True)
    for _ in range(3):  # the first call records a launch plan, the others replay it
        got = call()
        torch.cuda.synchronize()
        for e, g in zip(expected, got):
            assert_same_bits(g, e)
    assert launches.ran_dependent()


def _compiled_launch_pdl(kernel) -> list[bool]:
    """`metadata.launch_pdl` of each binary Triton compiled for a kernel (through its autotuner, if any): the flag
    the launcher reads to set the programmatic-serialization launch attribute."""
    caches = getattr(configs.jit_function(kernel), "device_caches", None)
    if caches is None:
        pytest.skip("this Triton keeps no per-device kernel caches to read the compiled launch flags from")
    return [bool(getattr(k.metadata, "launch_pdl", False)) for cache, *_ in caches.values() for k in cache.values()]


def test_the_dependent_launch_flag_reaches_the_compiled_kernel(launches, device):
    """The keywords are what fp8moe passes; this is what Triton made of them. A binary compiled with launch_pdl is
    launched with the programmatic stream serialization attribute, so a dependent launch that only reached the
    keywords would run as a normal launch and measure as one."""
    from fp8moe.kernels._per_group import _per_group_rows_kernel
    from fp8moe.kernels.per_group_colwise_scales_dual import _per_group_colwise_scales_dual_kernel

    launches.set(dependent=True)
    for call in _ops(device).values():
        call()
    torch.cuda.synchronize()
    assert launches.ran_dependent()
    for kernel in (_per_group_rows_kernel, _per_group_colwise_scales_dual_kernel):
        assert any(_compiled_launch_pdl(kernel)), f"no binary of {kernel} was compiled with launch_pdl"


def _chain(device, links: int = 6):
    """Each link's scales, viewed (no kernel) as the next link's (8, 512) f32 input with a group per row: every kernel
    reads what the kernel right before it wrote. The first link is large, so that without the wait the second would
    start while the first still writes."""
    x = _bf16(65536, 512, seed=4, device=device)
    _, scales = fp8moe.per_group_colwise_scales(x, _offs([8192 * (g + 1) for g in range(8)], device), E4)
    one_row_groups = _offs(list(range(1, 9)), device)
    outputs = []
    for _ in range(links):
        q, scales = fp8moe.per_group_colwise_scales(scales.view(8, 512), one_row_groups, E4)
        outputs += [q, scales]
    return outputs


def test_each_dependent_kernel_reads_what_the_kernel_before_it_wrote(launches, device):
    launches.set(dependent=False)
    expected = _chain(device)
    launches.set(dependent=True)
    for _ in range(3):
        got = _chain(device)
        torch.cuda.synchronize()
        for e, g in zip(expected, got):
            assert_same_bits(g, e)
    assert launches.ran_dependent()


def test_dependent_launches_captured_in_a_cuda_graph_replay_the_normal_bytes(launches, device):
    call = _ops(device)["per_group_colwise_dual"]
    launches.set(dependent=False)
    expected = call()
    launches.set(dependent=True)
    call()  # compiles and records outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        got = call()
    graph.replay()
    torch.cuda.synchronize()
    for e, g in zip(expected, got):
        assert_same_bits(g, e)
    assert launches.ran_dependent()
