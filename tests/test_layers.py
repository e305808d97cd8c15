"""The import graph follows the layer table of `docs/architecture.md`: each module imports
only from its own layer and the layers above it (imports for type checking excepted)."""

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


def _runtime_imports(tree: ast.Module) -> list[str]:
    """Modules imported at run time: `if TYPE_CHECKING:` blocks left out."""
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
