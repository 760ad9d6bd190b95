"""The public wrappers of fp8moe.ops: argument validation and torch.library registration.

Validation: every rejected argument raises TypeError (wrong type or dtype) or ValueError (wrong shape, device, value)
with a message that names the argument. Registration: each op is ``torch.ops.fp8moe.<op>``, passes
``torch.library.opcheck`` (schema, fake tensor strides, AOT dispatch) and under ``torch.compile(fullgraph=True)``
returns the eager bytes.

Inputs are tiny: these tests exercise the wrappers, not the numerics (tests/test_kernels_dense.py and
tests/test_kernels_per_group.py do).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch

import fp8moe  # before anything imports triton: turns the interpreter on when there is no GPU
from fp8moe import backend as backend_module
from fp8moe import ops
from fp8moe.backend import Backend
from fp8ref.contracts import QUANTIZE_OPS

pytestmark = pytest.mark.interpreter

#: The quantization ops, from the op table (the grouped GEMM has its own checks: tests/test_grouped_mm.py).
OP_NAMES = QUANTIZE_OPS


def _x(*shape: int, dtype: torch.dtype = torch.bfloat16, device: str = "cpu") -> torch.Tensor:
    gen = torch.Generator().manual_seed(sum(shape))
    return torch.randn(shape, generator=gen).to(dtype).to(device)


def _offs(*ends: int, device: str = "cpu") -> torch.Tensor:
    return torch.tensor(ends, dtype=torch.int32, device=device)


@dataclass(frozen=True)
class BadCall:
    """One invalid call: what it passes, which error it must raise, and a fragment the message must contain."""

    name: str
    call: Callable[[], object]
    error: type[Exception]
    match: str


BAD_CALLS = [
    BadCall("2d-x-is-3d", lambda: fp8moe.rowwise_2d_scale_and_cast(_x(2, 3, 4)), ValueError, "x must be 2-D"),
    BadCall("2d-x-is-list", lambda: fp8moe.rowwise_2d_scale_and_cast([[1.0]]), TypeError, "x must be a torch.Tensor"),
    BadCall(
        "2d-x-int32",
        lambda: fp8moe.rowwise_2d_scale_and_cast(torch.ones(2, 3, dtype=torch.int32)),
        TypeError,
        "x must have dtype",
    ),
    BadCall(
        "2d-x-float64",
        lambda: fp8moe.rowwise_2d_scale_and_cast(_x(2, 3, dtype=torch.float64)),
        TypeError,
        "x must have dtype",
    ),
    BadCall(
        "2d-fp8-dtype-is-bf16",
        lambda: fp8moe.rowwise_2d_scale_and_cast(_x(2, 3), torch.bfloat16),
        TypeError,
        "fp8_dtype must be one of",
    ),
    BadCall(
        "2d-fp8-dtype-is-str",
        lambda: fp8moe.rowwise_2d_scale_and_cast(_x(2, 3), "e4m3fn"),
        TypeError,
        "fp8_dtype must be one of",
    ),
    BadCall("colwise-x-is-2d", lambda: fp8moe.colwise_3d_scale_and_cast(_x(2, 3)), ValueError, "x must be 3-D"),
    BadCall(
        "transpose-x-fp8",
        lambda: fp8moe.rowwise_3d_transpose_rhs(torch.zeros(1, 2, 3, dtype=torch.float8_e4m3fn)),
        TypeError,
        "x must have dtype",
    ),
    BadCall(
        "transpose-unknown-method",
        lambda: fp8moe.rowwise_3d_transpose_rhs(_x(1, 2, 3), method="tma"),
        ValueError,
        "method must be one of",
    ),
    BadCall(
        "rowwise-offs-int64",
        lambda: fp8moe.per_group_rowwise_scales(_x(2, 8), torch.tensor([8])),
        TypeError,
        "offs must have dtype int32",
    ),
    BadCall(
        "rowwise-offs-2d",
        lambda: fp8moe.per_group_rowwise_scales(_x(2, 8), _offs(4, 8).view(1, 2)),
        ValueError,
        "offs must be 1-D",
    ),
    BadCall(
        "rowwise-offs-list",
        lambda: fp8moe.per_group_rowwise_scales(_x(2, 8), [4, 8]),
        TypeError,
        "offs must be a torch.Tensor",
    ),
    BadCall(
        "rowwise-offs-other-device",
        lambda: fp8moe.per_group_rowwise_scales(_x(2, 8), _offs(8, device="meta")),
        ValueError,
        "offs must be on the input's device",
    ),
    BadCall("colwise-x-is-1d", lambda: fp8moe.per_group_colwise_scales(_x(8), _offs(8)), ValueError, "x must be 2-D"),
    BadCall(
        "dual-rows-differ",
        lambda: fp8moe.per_group_colwise_scales_dual(_x(8, 2), _x(9, 3), _offs(8)),
        ValueError,
        "x1 and x2 must share their rows",
    ),
    BadCall(
        "dual-dtypes-differ",
        lambda: fp8moe.per_group_colwise_scales_dual(_x(8, 2), _x(8, 3, dtype=torch.float16), _offs(8)),
        TypeError,
        "x1 and x2 must have the same dtype",
    ),
    BadCall(
        "dual-x2-int",
        lambda: fp8moe.per_group_colwise_scales_dual(_x(8, 2), torch.ones(8, 3, dtype=torch.int8), _offs(8)),
        TypeError,
        "x2 must have dtype",
    ),
    BadCall(
        "validate-offs-decreasing",
        lambda: fp8moe.per_group_rowwise_scales(_x(2, 8), _offs(5, 3, 8), validate_offs=True),
        ValueError,
        "non-decreasing",
    ),
    BadCall(
        "validate-offs-negative",
        lambda: fp8moe.per_group_colwise_scales(_x(8, 2), _offs(-1, 8), validate_offs=True),
        ValueError,
        "non-negative",
    ),
    BadCall(
        "validate-offs-past-end",
        lambda: fp8moe.per_group_colwise_scales_dual(_x(8, 2), _x(8, 3), _offs(4, 9), validate_offs=True),
        ValueError,
        "exceeds",
    ),
]


@pytest.mark.parametrize("bad", BAD_CALLS, ids=lambda b: b.name)
def test_invalid_argument_raises_error_naming_it(bad):
    with pytest.raises(bad.error, match=bad.match):
        bad.call()


#: Bad calls both fp8ref.ops and fp8moe must refuse identically: (id, op, args, kwargs).
_SHARED_BAD_CALLS = [
    ("pow2-int", "rowwise_2d_scale_and_cast", lambda: (_x(2, 3),), {"round_scales_to_power_of_2": 1}),
    (
        "pow2-tensor",
        "colwise_3d_scale_and_cast",
        lambda: (_x(1, 2, 3),),
        {"round_scales_to_power_of_2": torch.tensor(True)},
    ),
    ("fp8-dtype-str", "rowwise_3d_transpose_rhs", lambda: (_x(1, 2, 3),), {"fp8_dtype": "e4m3fn"}),
    ("fp8-dtype-bf16", "rowwise_2d_scale_and_cast", lambda: (_x(2, 3),), {"fp8_dtype": torch.bfloat16}),
    ("fp8-dtype-tensor", "rowwise_2d_scale_and_cast", lambda: (_x(2, 3),), {"fp8_dtype": torch.tensor(1)}),
    ("x-list", "rowwise_2d_scale_and_cast", lambda: ([[1.0]],), {}),
    ("x-int32", "colwise_3d_scale_and_cast", lambda: (torch.ones(1, 2, 3, dtype=torch.int32),), {}),
    ("x-3d", "per_group_rowwise_scales", lambda: (_x(2, 3, 4), _offs(4)), {}),
    ("offs-none", "per_group_rowwise_scales", lambda: (_x(2, 8), None), {}),
    ("offs-int64", "per_group_colwise_scales", lambda: (_x(8, 2), torch.tensor([8])), {}),
    ("offs-2d", "per_group_colwise_scales", lambda: (_x(8, 2), _offs(4, 8).view(1, 2)), {}),
    ("offs-before-options", "per_group_colwise_scales", lambda: (_x(8, 2), [8]), {"fp8_dtype": "bad"}),
    ("dual-rows", "per_group_colwise_scales_dual", lambda: (_x(8, 2), _x(9, 3), _offs(8)), {}),
    (
        "dual-dtypes",
        "per_group_colwise_scales_dual",
        lambda: (_x(8, 2), _x(8, 3, dtype=torch.float16), _offs(8)),
        {},
    ),
    (
        "dual-x2-int",
        "per_group_colwise_scales_dual",
        lambda: (_x(8, 2), torch.ones(8, 3, dtype=torch.int8), _offs(8)),
        {},
    ),
    (
        "dual-pow2-int",
        "per_group_colwise_scales_dual",
        lambda: (_x(8, 2), _x(8, 3), _offs(8)),
        {"round_scales_to_power_of_2": 0},
    ),
]


def _raised(fn: Callable[[], object]) -> tuple[type, str]:
    with pytest.raises((TypeError, ValueError)) as info:
        fn()
    return type(info.value), str(info.value)


@pytest.mark.parametrize(
    ("op", "make_args", "kwargs"), [c[1:] for c in _SHARED_BAD_CALLS], ids=[c[0] for c in _SHARED_BAD_CALLS]
)
def test_reference_and_kernel_refuse_a_bad_call_with_the_same_exception_and_message(op, make_args, kwargs):
    import fp8ref.ops

    reference = _raised(lambda: getattr(fp8ref.ops, op)(*make_args(), **kwargs))
    kernel = _raised(lambda: getattr(fp8moe, op)(*make_args(), **kwargs))
    assert reference == kernel


def test_tensor_off_the_backends_device_raises_value_error_naming_the_device():
    if not backend_module.interpreter_requested():
        pytest.skip("the interpreter is off in this process")
    with pytest.raises(ValueError, match="CPU tensors only; got a tensor on meta"):
        fp8moe.rowwise_2d_scale_and_cast(_x(2, 3, device="meta"))


def test_cpu_tensor_without_interpreter_raises_value_error(monkeypatch):
    monkeypatch.setattr(backend_module, "interpreter_requested", lambda: False)
    with pytest.raises(ValueError, match="need tensors on a CUDA/ROCm device, got cpu"):
        fp8moe.colwise_3d_scale_and_cast(_x(1, 2, 3))


@pytest.mark.parametrize("fp8_dtype", [torch.float8_e4m3fnuz, torch.float8_e5m2fnuz], ids=["e4m3fnuz", "e5m2fnuz"])
def test_fp8_dtype_the_backend_lacks_raises_type_error_before_launch(fp8_dtype, monkeypatch):
    # An NVIDIA backend stores only the OCP fn formats: fnuz types do not compile there (SPEC §3).
    cuda = Backend("cuda", "sm_90", (torch.float8_e4m3fn, torch.float8_e5m2), exact_encode=False, autotune=True)
    monkeypatch.setattr(ops, "backend_for", lambda device: cuda)
    with pytest.raises(TypeError, match="is not supported on backend cuda/sm_90"):
        fp8moe.per_group_colwise_scales(_x(8, 2), _offs(8), fp8_dtype)


def test_validate_offs_accepts_valid_offsets_and_off_by_default_reads_nothing(monkeypatch, device):
    x, offs = _x(2, 8, device=device), _offs(0, 5, 5, 8, device=device)
    fp8moe.per_group_rowwise_scales(x, offs, validate_offs=True)
    monkeypatch.setattr(torch.Tensor, "tolist", _forbidden_host_read)
    monkeypatch.setattr(torch.Tensor, "item", _forbidden_host_read)
    fp8moe.per_group_rowwise_scales(x, offs)


def _forbidden_host_read(self, *args, **kwargs):
    raise AssertionError("the op read a tensor on the host")


# ---------------------------------------------------------------------------------------------------------------
# torch.library registration
# ---------------------------------------------------------------------------------------------------------------

#: Small calls of every op; offsets end at the jagged length so that every output element is written (the kernels
#: leave elements past offs[-1] unwritten, which would make eager/compiled comparisons of those bytes meaningless).
CALLS: dict[str, tuple[Callable, Callable[[], tuple]]] = {
    "rowwise_2d_scale_and_cast": (fp8moe.rowwise_2d_scale_and_cast, lambda: (_x(5, 40),)),
    "colwise_3d_scale_and_cast": (fp8moe.colwise_3d_scale_and_cast, lambda: (_x(2, 40, 3).mT.contiguous().mT,)),
    "rowwise_3d_transpose_rhs": (fp8moe.rowwise_3d_transpose_rhs, lambda: (_x(2, 3, 40),)),
    "per_group_rowwise_scales": (fp8moe.per_group_rowwise_scales, lambda: (_x(5, 40), _offs(7, 7, 40))),
    "per_group_colwise_scales": (fp8moe.per_group_colwise_scales, lambda: (_x(5, 40).t(), _offs(0, 33, 40))),
    "per_group_colwise_scales_dual": (
        fp8moe.per_group_colwise_scales_dual,
        lambda: (_x(40, 3), _x(5, 40).t(), _offs(20, 40)),
    ),
    # The two fused pairs (SPEC §5.6): custom ops too, not op-table rows.
    "colwise_3d_and_transpose_rhs": (fp8moe.colwise_3d_and_transpose_rhs, lambda: (_x(2, 40, 24),)),
    "rowwise_and_per_group_colwise": (fp8moe.rowwise_and_per_group_colwise, lambda: (_x(48, 40), _offs(16, 16, 48))),
}
FUSED_NAMES = ("colwise_3d_and_transpose_rhs", "rowwise_and_per_group_colwise")


def _on(device: torch.device, make_args: Callable[[], tuple]) -> Callable[[], tuple]:
    """``make_args`` with every tensor moved to ``device`` (strides kept: the inputs are dense)."""
    return lambda: tuple(a.to(device) for a in make_args())


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32) if t.dtype == torch.float32 else t.view(torch.uint8)


@pytest.mark.parametrize("name", OP_NAMES)
def test_op_is_registered_with_a_scalar_type_fp8_dtype(name):
    schema = str(getattr(torch.ops.fp8moe, name).default._schema)
    assert schema.startswith(f"fp8moe::{name}(")
    assert "ScalarType fp8_dtype" in schema


@pytest.mark.parametrize("name", [*OP_NAMES, *FUSED_NAMES])
def test_opcheck_passes_schema_fake_strides_and_aot_dispatch(name, device):
    make_args = _on(device, CALLS[name][1])
    variant = ("atomic",) if name == "rowwise_3d_transpose_rhs" else ()
    torch.library.opcheck(getattr(torch.ops.fp8moe, name).default, (*make_args(), torch.float8_e5m2, True, *variant))


@pytest.mark.parametrize("name", [*OP_NAMES, *FUSED_NAMES])
def test_compiled_fullgraph_equals_eager_bitwise(name, device):
    fn, make_args = CALLS[name]
    args = _on(device, make_args)()
    compiled = torch.compile(lambda *a: fn(*a, torch.float8_e4m3fn, True), fullgraph=True)
    got, expected = compiled(*args), fn(*args, torch.float8_e4m3fn, True)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert (a.dtype, a.shape, a.stride()) == (b.dtype, b.shape, b.stride())
        assert torch.equal(_bits(a), _bits(b))


# ----------------------------------------------------------------------------------------------------------------
# Dispatch: plain eager calls run the implementation directly; everything else goes through the custom op
# ----------------------------------------------------------------------------------------------------------------

#: Public op -> the stem of its ``_impl`` function and ``_op`` custom op in fp8moe.ops.
_STEMS = {
    "rowwise_2d_scale_and_cast": "_rowwise_2d",
    "colwise_3d_scale_and_cast": "_colwise_3d",
    "rowwise_3d_transpose_rhs": "_transpose_rhs",
    "per_group_rowwise_scales": "_per_group_rowwise",
    "per_group_colwise_scales": "_per_group_colwise",
    "per_group_colwise_scales_dual": "_per_group_colwise_dual",
}


def _count_paths(monkeypatch, name: str) -> dict[str, int]:
    """Counts calls that took the direct implementation ("impl") and the custom op ("op")."""
    stem, calls = _STEMS[name], {"impl": 0, "op": 0}
    impl, op = getattr(ops, f"{stem}_impl"), getattr(ops, f"{stem}_op")

    def counted(path, fn):
        def wrapper(*args):
            calls[path] += 1
            return fn(*args)

        return wrapper

    monkeypatch.setattr(ops, f"{stem}_impl", counted("impl", impl))
    monkeypatch.setattr(ops, f"{stem}_op", counted("op", op))
    return calls


def _variant(name: str) -> tuple:
    return ("reduction",) if name == "rowwise_3d_transpose_rhs" else ()


@pytest.mark.parametrize("name", OP_NAMES)
def test_plain_eager_call_skips_the_dispatcher_and_returns_the_custom_ops_bytes(name, device, monkeypatch):
    fn, make_args = CALLS[name]
    args = _on(device, make_args)()
    via_op = getattr(torch.ops.fp8moe, name).default(*args, torch.float8_e4m3fn, False, *_variant(name))
    calls = _count_paths(monkeypatch, name)
    direct = fn(*args)
    assert calls == {"impl": 1, "op": 0}
    for a, b in zip(direct, via_op, strict=True):
        assert (a.dtype, a.shape, a.stride()) == (b.dtype, b.shape, b.stride())
        assert torch.equal(_bits(a), _bits(b))


@pytest.mark.parametrize("name", OP_NAMES)
def test_input_that_requires_grad_goes_through_the_custom_op(name, device, monkeypatch):
    fn, make_args = CALLS[name]
    args = _on(device, make_args)()
    args = (args[0].detach().requires_grad_(True), *args[1:])
    calls = _count_paths(monkeypatch, name)
    fn(*args)
    assert calls == {"impl": 0, "op": 1}


@pytest.mark.parametrize("name", OP_NAMES)
def test_fake_tensors_go_through_the_custom_ops_fake_implementation(name, device, monkeypatch):
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    fn, make_args = CALLS[name]
    args = _on(device, make_args)()
    expected = fn(*args)
    calls = _count_paths(monkeypatch, name)
    with FakeTensorMode() as mode:
        fake = fn(*(mode.from_tensor(a) for a in args))
    assert calls == {"impl": 0, "op": 1}
    for f, e in zip(fake, expected, strict=True):
        assert isinstance(f, FakeTensor)
        assert (f.dtype, f.shape, f.stride()) == (e.dtype, e.shape, e.stride())


@pytest.mark.parametrize("name", OP_NAMES)
def test_compiled_graph_holds_the_custom_op_as_one_node(name, device):
    fn, make_args = CALLS[name]
    targets = []

    def recording_backend(gm, example_inputs):
        targets.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=recording_backend, fullgraph=True)(*_on(device, make_args)())
    assert sum(f"fp8moe.{name}" in t for t in targets) == 1, targets


@pytest.mark.parametrize(
    "call",
    [
        lambda offs: fp8moe.per_group_rowwise_scales(_x(2, 8), offs),
        lambda offs: fp8moe.per_group_colwise_scales(_x(8, 2), offs),
        lambda offs: fp8moe.per_group_colwise_scales_dual(_x(8, 2), _x(8, 3), offs),
        lambda offs: fp8moe.rowwise_and_per_group_colwise(_x(8, 2), offs),
    ],
    ids=["per_group_rowwise_scales", "per_group_colwise_scales", "per_group_colwise_scales_dual", "activation-pair"],
)
def test_more_groups_than_the_span_grid_holds_is_an_error_naming_the_limit(call):
    """65535 groups along the span kernel's second grid dim: one more must be a clear error, not a failed launch."""
    with pytest.raises(ValueError, match="offs has 65536 groups; fp8moe's per-group ops take at most 65535"):
        call(torch.full((ops.MAX_GROUPS + 1,), 8, dtype=torch.int32))
    ops._check_offs(torch.full((ops.MAX_GROUPS,), 8, dtype=torch.int32), 8, validate_offs=True)  # the limit itself


@pytest.mark.parametrize(
    ("call", "error", "fragment"),
    [
        (lambda: fp8moe.colwise_3d_and_transpose_rhs(_x(40, 24)), ValueError, "x"),
        (lambda: fp8moe.colwise_3d_and_transpose_rhs(_x(2, 40, 24), torch.int8), TypeError, "fp8_dtype"),
        (lambda: fp8moe.colwise_3d_and_transpose_rhs(_x(2, 40, 24, dtype=torch.int32)), TypeError, "x"),
        (lambda: fp8moe.rowwise_and_per_group_colwise(_x(2, 40, 24), _offs(2)), ValueError, "x"),
        (lambda: fp8moe.rowwise_and_per_group_colwise(_x(48, 40), _offs(16, 40).float()), TypeError, "offs"),
        (lambda: fp8moe.rowwise_and_per_group_colwise(_x(48, 40), _offs(16, 0, 40)[::2]), ValueError, "offs"),
        (
            lambda: fp8moe.rowwise_and_per_group_colwise(_x(48, 40), _offs(16, 50), validate_offs=True),
            ValueError,
            "offs",
        ),
    ],
    ids=["pair-rank", "pair-fp8-dtype", "pair-int-input", "jagged-rank", "jagged-offs-dtype", "jagged-offs-stride",
         "jagged-offs-past-end"],
)  # fmt: skip
def test_fused_pairs_reject_bad_arguments_by_name(call, error, fragment):
    with pytest.raises(error, match=fragment):
        call()
