"""Finding the caller's type from `path/to/file.py:Name` or `package.module:Name`."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any


class TypeNotFound(Exception):
    """The type reference could not be loaded; the message says what and where."""


def load_type(reference: str) -> Any:
    """The object named by `reference`: `examples/invoice.py:Invoice` or `pkg.mod:Invoice`."""
    module_ref, sep, name = reference.rpartition(":")
    if not sep or not module_ref or not name:
        raise TypeNotFound(
            f"`{reference}` is not a type reference: write `path/to/file.py:Name` or "
            "`package.module:Name`"
        )
    if module_ref.endswith(".py") or "/" in module_ref:
        path = Path(module_ref)
        if not path.is_file():
            raise TypeNotFound(f"no such file: `{module_ref}`")
        module_name = f"_allama_plan_{path.stem}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise TypeNotFound(f"`{module_ref}` cannot be imported as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.resolve().parent))
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as error:
            raise TypeNotFound(f"importing `{module_ref}` failed: {error!r}") from error
        finally:
            sys.path.pop(0)
    else:
        try:
            module = importlib.import_module(module_ref)
        except ImportError as error:
            raise TypeNotFound(f"cannot import `{module_ref}`: {error}") from error
    target: Any = module
    for part in name.split("."):
        if not hasattr(target, part):
            raise TypeNotFound(f"`{module_ref}` has no `{name}`")
        target = getattr(target, part)
    return target
