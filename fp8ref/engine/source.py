"""How a repro snippet recreates a kernel in a fresh interpreter, in another directory.

A kernel from an installed package is named by "module:attr". A kernel defined in ``__main__``, a notebook cell or
a module that is not installed (a file next to the user's script) cannot be imported elsewhere, so its source is
inlined: the function itself, the helpers and ``@triton.jit`` kernels it calls from the same place, simple constants
it reads, and import lines for the modules and installed functions it names (torch, triton, tl, fp8ref, ...). What
cannot be rebuilt (source not retrievable, an object of unknown construction) is said plainly in the snippet.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import inspect
import sys
import textwrap
import types
from collections.abc import Callable

__all__ = ["is_installed", "replay_recipe"]

_SIMPLE = (int, float, bool, str, bytes, type(None))


@functools.lru_cache(maxsize=1)
def _distribution_packages() -> frozenset[str]:
    return frozenset(importlib.metadata.packages_distributions())


def is_installed(module: str | None) -> bool:
    """Whether ``module`` imports in any interpreter of this environment, wherever it starts (an installed
    distribution or the standard library), as opposed to ``__main__`` or a file found through the current directory
    or an added sys.path entry."""
    if not module or module == "__main__":
        return False
    top = module.split(".")[0]
    return top in _distribution_packages() or top in sys.stdlib_module_names or top == "builtins"


def _importable_name(obj: object) -> tuple[str, str] | None:
    """(module, qualname) under which ``obj`` itself imports from an installed module, or None."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not is_installed(module) or not qualname or "<" in qualname:
        return None
    target = sys.modules.get(module)
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return (module, qualname) if target is obj else None


def _simple_literal(value: object) -> bool:
    if isinstance(value, _SIMPLE):
        return True
    if isinstance(value, tuple | list | frozenset | set):
        return all(_simple_literal(v) for v in value)
    if isinstance(value, dict):
        return all(_simple_literal(k) and _simple_literal(v) for k, v in value.items())
    return False


def _python_function(obj: object) -> types.FunctionType | None:
    """The Python function behind ``obj``: itself, or the one a Triton ``@jit`` object wraps (its source carries the
    decorator)."""
    if isinstance(obj, types.FunctionType):
        return obj
    inner = getattr(obj, "fn", None)
    if isinstance(inner, types.FunctionType) and type(obj).__module__.split(".")[0] == "triton":
        return inner
    return None


class _Inliner:
    """Collects import lines and definitions, dependencies first, for the objects a kernel needs."""

    def __init__(self) -> None:
        self.imports: dict[str, None] = {}
        self.defs: dict[str, str] = {}
        self.notes: list[str] = []
        self._seen: set[int] = set()

    def bind(self, name: str, value: object) -> None:
        """Make ``name`` refer to ``value`` in the snippet."""
        if name in self.defs or id(value) in self._seen:
            return
        if isinstance(value, types.ModuleType):
            self._import_module(name, value)
            return
        path = _importable_name(value)
        if path is not None:
            module, qualname = path
            head = qualname.split(".")[0]
            alias = "" if head == name else f" as {name}"
            if "." in qualname:
                self.imports[f"from {module} import {head}"] = None
                self.defs[name] = f"{name} = {qualname}"
            else:
                self.imports[f"from {module} import {qualname}{alias}"] = None
            return
        if _simple_literal(value):
            self.defs[name] = f"{name} = {value!r}"
            return
        if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
            self.imports["import torch"] = None
            self.defs[name] = f"{name} = {value!r}"
            return
        fn = _python_function(value)
        if fn is not None:
            self._seen.add(id(value))
            self._function(name, value, fn)
            return
        if isinstance(value, type):
            self._seen.add(id(value))
            self._class(name, value)
            return
        self.notes.append(
            f"{name}: a {type(value).__name__} the kernel uses; fp8ref cannot rebuild it here: define it yourself"
        )

    def _import_module(self, name: str, module: types.ModuleType) -> None:
        full = module.__name__
        if not is_installed(full):
            self.notes.append(f"{name}: module {full!r} is not installed, so it will not import elsewhere")
        if full == name:
            self.imports[f"import {full}"] = None
        elif "." in full and full.rsplit(".", 1)[1] == name:
            self.imports[f"from {full.rsplit('.', 1)[0]} import {name}"] = None
        else:
            self.imports[f"import {full} as {name}"] = None

    def _source(self, obj: object, what: str) -> str | None:
        try:
            return textwrap.dedent(inspect.getsource(obj))
        except (OSError, TypeError) as exc:
            self.notes.append(f"{what}: its source cannot be retrieved ({type(exc).__name__}: {exc})")
            return None

    def _function(self, name: str, value: object, fn: types.FunctionType) -> None:
        if fn.__name__ == "<lambda>":
            self.notes.append(f"{name}: a lambda; its source cannot be isolated reliably: define it yourself")
            return
        src = self._source(fn, name)
        if src is None:
            return
        self._dependencies(src, fn.__globals__, _closure(fn), skip=fn.__name__)
        self.defs[name] = src.rstrip() + ("" if fn.__name__ == name else f"\n\n\n{name} = {fn.__name__}")

    def _class(self, name: str, cls: type) -> None:
        src = self._source(cls, name)
        if src is None:
            return
        module = sys.modules.get(cls.__module__)
        scope: dict = {}
        for attr in vars(cls).values():
            fn = _python_function(attr) or getattr(attr, "__func__", None)
            if isinstance(fn, types.FunctionType):
                scope.update(_closure(fn))
        self._dependencies(src, vars(module) if module else {}, scope, skip=cls.__name__)
        self.defs[name] = src.rstrip() + ("" if cls.__name__ == name else f"\n\n\n{name} = {cls.__name__}")

    def _dependencies(self, src: str, module_globals: dict, closure: dict, skip: str) -> None:
        """Bind every free name ``src`` reads that its module (or its closure) defines."""
        try:
            tree = ast.parse(src)
        except SyntaxError:
            return
        names = dict.fromkeys(n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id != skip)
        for n in names:
            if n in closure:
                self.bind(n, closure[n])
            elif n in module_globals:
                self.bind(n, module_globals[n])

    def code(self) -> str:
        parts = []
        if self.imports:
            parts.append("\n".join(self.imports))
        if self.notes:
            parts.append("\n".join(f"# NOT REPRODUCED: {note}" for note in self.notes))
        parts += list(self.defs.values())
        return "\n\n\n".join(parts)


def _closure(fn: types.FunctionType) -> dict:
    if not fn.__closure__:
        return {}
    values = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
        try:
            values[name] = cell.cell_contents
        except ValueError:  # an empty cell: a name bound later in the enclosing function
            continue
    return values


def replay_recipe(kernel: Callable) -> tuple[str, str]:
    """(setup code, expression) that recreate ``kernel`` in a fresh interpreter started in any directory.

    The setup is "" for a kernel importable from an installed package (the expression is then its "module:attr"
    string, which ``fp8ref.compare`` resolves). Otherwise the setup inlines the kernel's source, and whatever it
    could not rebuild is listed in "# NOT REPRODUCED: ..." comments; when even the kernel's own source cannot be
    retrieved, the setup defines a stand-in that raises NotImplementedError saying so.
    """
    path = _importable_name(kernel)
    if path is not None:
        return "", repr(f"{path[0]}:{path[1]}")
    inliner = _Inliner()
    fn = _python_function(kernel)
    if fn is not None:
        name = fn.__name__ if fn.__name__.isidentifier() else "kernel"
        inliner.bind(name, kernel)
        if name in inliner.defs:
            return inliner.code(), name
    elif not isinstance(kernel, types.BuiltinFunctionType | types.MethodType | functools.partial):
        cls = type(kernel)
        inliner.bind(cls.__name__, cls)
        if cls.__name__ in inliner.defs:
            inliner.notes.append(
                f"kernel: an instance of {cls.__qualname__}, rebuilt as {cls.__name__}() (its state and constructor "
                "arguments are not reproduced)"
            )
            return inliner.code(), f"{cls.__name__}()"
    label = getattr(kernel, "__qualname__", None) or type(kernel).__name__
    reason = f"fp8ref could not rebuild the kernel {label} from source"
    inliner.notes.append(f"kernel: {reason}; the stand-in below raises until you paste its definition")
    stub = f"def kernel(*args, **kwargs):\n    raise NotImplementedError({reason + ': paste its definition here'!r})"
    inliner.defs["kernel"] = stub
    return inliner.code(), "kernel"
