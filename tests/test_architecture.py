"""The package structure docs/ARCHITECTURE.md draws: fp8ref free of the kernels, imports that only run down.

Both checks read the source (AST), so an import hidden in a function body counts as much as one at the top.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN_IN_FP8REF = ("fp8moe", "triton")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(package: str) -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((ROOT / package).rglob("*.py"))}


def _is_package(name: str) -> bool:
    return (ROOT / Path(*name.split(".")) / "__init__.py").exists()


def _resolve_from(module: str, node: ast.ImportFrom) -> str:
    """The absolute module an ``from X import ...`` names (relative imports resolved against ``module``)."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not _is_package(module):
        base = base[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imported_modules(module: str, source: str) -> list[tuple[int, str]]:
    """(line, module) for every import in ``source``, at any depth, plus ``importlib.import_module("...")`` calls.

    ``from pkg import name`` counts as importing ``pkg.name`` when that is a module of this repository, else ``pkg``.
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_from(module, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                is_module = (ROOT / Path(*sub.split("."))).with_suffix(".py").exists() or _is_package(sub)
                found.append((node.lineno, sub if is_module else base))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
                found.append((node.lineno, str(node.args[0].value)))
    return found


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _layers() -> dict[str, int]:
    """Package or module prefix -> layer, from the ```layers block of docs/ARCHITECTURE.md."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    match = re.search(r"```layers\n(.*?)```", text, re.S)
    assert match, "docs/ARCHITECTURE.md has no ```layers block"
    layers = {}
    for line in match.group(1).strip().splitlines():
        level, _, names = line.partition(":")
        for name in names.split():
            layers[name] = int(level)
    return layers


def _layer_of(name: str, layers: dict[str, int]) -> int | None:
    """The layer of the longest prefix of ``name`` listed (``fp8ref`` itself only matches exactly)."""
    best = None
    for prefix, level in layers.items():
        exact_only = prefix in ("fp8ref",)
        matches = name == prefix or (not exact_only and name.startswith(prefix + "."))
        if matches and (best is None or len(prefix) > len(best[0])):
            best = (prefix, level)
    return None if best is None else best[1]


FP8REF_MODULES = _modules("fp8ref")


@pytest.mark.parametrize("module", sorted(FP8REF_MODULES))
def test_fp8ref_module_never_imports_the_kernels_or_triton(module):
    bad = [
        (line, name)
        for line, name in imported_modules(module, FP8REF_MODULES[module].read_text())
        if any(_under(name, forbidden) for forbidden in FORBIDDEN_IN_FP8REF)
    ]
    assert not bad, f"{module} imports {bad}: fp8ref reaches kernel packages only through its entry points"


def test_import_scan_sees_imports_inside_functions_and_import_module_calls():
    source = (
        "def f():\n    import triton.language as tl\n"
        "def g():\n    from fp8moe.kernels import native_cast\n"
        "def h():\n    importlib.import_module('fp8moe.ops')\n"
    )
    names = [name for _, name in imported_modules("fp8ref.fake", source)]
    assert names == ["triton.language", "fp8moe.kernels.native_cast", "fp8moe.ops"]


def _layered_modules() -> dict[str, Path]:
    return {**FP8REF_MODULES, **_modules("fp8moe")}


def test_every_module_has_a_layer():
    layers = _layers()
    missing = sorted(m for m in _layered_modules() if _layer_of(m, layers) is None)
    assert not missing, f"add these to the ```layers block of docs/ARCHITECTURE.md: {missing}"


@pytest.mark.parametrize("module", sorted(_layered_modules()))
def test_imports_only_run_down(module):
    layers = _layers()
    own = _layer_of(module, layers)
    upward = []
    for line, name in imported_modules(module, _layered_modules()[module].read_text()):
        if not (_under(name, "fp8ref") or _under(name, "fp8moe")):
            continue
        level = _layer_of(name, layers)
        if level is not None and own is not None and level > own:
            upward.append(f"line {line}: {name} (layer {level})")
    assert not upward, f"{module} (layer {own}) imports upward: {upward}"


def test_layer_check_catches_an_upward_import():
    layers = _layers()
    names = [name for _, name in imported_modules("fp8ref.spec", "from fp8ref.engine import compare\n")]
    assert names == ["fp8ref.engine"]
    assert _layer_of("fp8ref.engine", layers) > _layer_of("fp8ref.spec", layers)
