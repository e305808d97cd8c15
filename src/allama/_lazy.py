"""Public names of a package loaded on first access, so that importing the package is cheap.

A package lists where each of its names is defined, imports them under `TYPE_CHECKING` (so
type checkers and IDEs see every name), and installs the two hooks this module makes:

    _getattr, __dir__ = lazy_names(__name__, {"allama.mock._builder": ("ChatResponseBuilder",)})
    if not TYPE_CHECKING:
        __getattr__ = _getattr

The first access imports the defining module and stores the name in the package, so every
later access is a plain attribute look-up: nothing of this runs on a hot path. The hook is
hidden from type checkers so that a misspelt name stays an error for them.

A module that needs another only once it is called, not to be defined, binds it with
`deferred_module` (the real import under `TYPE_CHECKING`):

    if TYPE_CHECKING:
        from allama import stream
    else:
        stream = deferred_module("allama.stream", globals(), "stream")
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from types import ModuleType
from typing import Any

__all__ = ["deferred_module", "lazy_names", "load"]


def load(name: str) -> ModuleType:
    """The module `name`, imported if need be.

    Through `__import__`, the import statement's own path, rather than
    `importlib.import_module`: `python -X importtime` then lists the module and its cost.
    """
    __import__(name)
    return sys.modules[name]


def lazy_names(
    package: str, sources: Mapping[str, Iterable[str]]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose names are defined in `sources`
    (module name to the names it defines)."""
    module = sys.modules[package]
    where = {name: source for source, names in sources.items() for name in names}

    def getattr_(name: str) -> object:
        source = where.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(load(source), name)
        setattr(module, name, value)
        return value

    def dir_() -> list[str]:
        return sorted({*vars(module), *where})

    return getattr_, dir_


class _Deferred:
    """Stands for a module until one of its attributes is read."""

    __slots__ = ("_binding", "_name", "_namespace")

    def __init__(self, name: str, namespace: MutableMapping[str, Any], binding: str) -> None:
        self._name = name
        self._namespace = namespace
        self._binding = binding

    def __getattr__(self, attr: str) -> Any:
        module = load(self._name)
        self._namespace[self._binding] = module
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, not loaded yet>"


def deferred_module(name: str, namespace: MutableMapping[str, Any], binding: str) -> Any:
    """A stand-in for the module `name`, bound as `binding` in `namespace` (a module's
    globals): the first attribute read imports the module and rebinds `binding` to it, so
    every later read is a plain global and attribute look-up."""
    return _Deferred(name, namespace, binding)
