"""The import graph follows the layer table of `docs/architecture.md`: each module imports
only from its own layer and the layers above it (imports for type checking excepted, imports
deferred to first use included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

LAYERS = {
    "allama.types": 1,
    "allama.errors": 2,
    "allama._degradations": 2,
    "allama.stream": 2,
    "allama.schema": 3,
    "allama.adapters": 4,
    "allama.provider": 5,
    "allama.transport": 5,
    "allama.providers": 5,
    "allama.local": 5,
    "allama.extract": 6,
    "allama.wrappers": 7,
    "allama.mock": 8,
    "allama.cli": 9,
}


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None
    for prefix, layer in LAYERS.items():
        if (module == prefix or module.startswith(prefix + ".")) and (
            best is None or len(prefix) > best[0]
        ):
            best = (len(prefix), layer)
    return None if best is None else best[1]


def _named_modules(call: ast.Call) -> list[str]:
    """Modules a call loads by name: `deferred_module("m", ...)`, `load("m")`,
    `import_module("m")`, and the defining modules given to `lazy_names` (keys of its
    mapping)."""
    name = getattr(call.func, "id", None) or getattr(call.func, "attr", None)
    if name in ("deferred_module", "import_module", "load", "_load") and call.args:
        first = call.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return [first.value]
    if (
        name in ("lazy_names", "_lazy_names")
        and len(call.args) > 1
        and isinstance(call.args[1], ast.Dict)
    ):
        return [
            key.value
            for key in call.args[1].keys
            if isinstance(key, ast.Constant) and isinstance(key.value, str)
        ]
    return []


def _runtime_imports(tree: ast.Module) -> list[str]:
    """Modules imported at run time: `if TYPE_CHECKING:` blocks left out, modules loaded on
    first use (`allama._lazy`) counted."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.Call):
            found.extend(_named_modules(node))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted((SRC / "allama").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out.append((name, path))
    return out


@pytest.mark.parametrize(("module", "path"), _modules(), ids=lambda v: str(v))
def test_module_imports_only_layers_above_it(module: str, path: Path) -> None:
    mine = layer_of(module)
    if mine is None:
        return  # the package root and its re-exports sit above every layer
    below = [
        (imported, layer)
        for imported in _runtime_imports(ast.parse(path.read_text()))
        if (layer := layer_of(imported)) is not None and layer > mine
    ]
    assert below == []


def test_modules_loaded_on_first_use_are_counted() -> None:
    source = """
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from allama import stream
else:
    stream = deferred_module("allama.stream", globals(), "stream")
_getattr, __dir__ = lazy_names(__name__, {"allama.mock._builder": ("ChatResponseBuilder",)})
"""
    assert _runtime_imports(ast.parse(source)) == [
        "typing",
        "allama.stream",
        "allama.mock._builder",
    ]
