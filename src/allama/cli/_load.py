"""Finding the caller's type from `path/to/file.py:Name` or `package.module:Name`."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import sysconfig
import traceback
import typing
from pathlib import Path
from typing import Any


class TypeNotFound(Exception):
    """The type reference could not be loaded; the message says what and where."""


def load_type(reference: str) -> Any:
    """The type named by `reference`: `examples/invoice.py:Invoice` or `pkg.mod:Invoice`.

    A module path is imported as `python -m` would, with the current directory first on
    the path, so `allama plan mypackage.models:Invoice` works from a project's root.
    """
    module_ref, sep, name = reference.rpartition(":")
    if not sep or not module_ref or not name:
        raise TypeNotFound(
            f"`{reference}` is not a type reference: write `path/to/file.py:Name` or "
            "`package.module:Name`"
        )
    if ".py:" in module_ref:
        raise TypeNotFound(
            f"`{reference}` is not a type reference: one `:` goes between the file and the "
            "type's name (`path/to/file.py:Name`; a class inside another is `Outer.Inner`)"
        )
    if module_ref.endswith(".py") or "/" in module_ref or os.sep in module_ref:
        module = _load_file(module_ref)
    else:
        module = _import(module_ref)
    target: Any = module
    for part in name.split("."):
        if not hasattr(target, part):
            raise TypeNotFound(f"`{module_ref}` has no `{name}`")
        target = getattr(target, part)
    what = _not_a_type(target)
    if what is not None:
        raise TypeNotFound(
            f"`{reference}` is not a type: it is {what}; name a class (a pydantic model, a "
            "dataclass, a TypedDict, an Enum) or a type alias such as `list[Invoice]`"
        )
    return target


def _load_file(module_ref: str) -> Any:
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
        raise TypeNotFound(_import_failed(module_ref, error)) from error
    except SystemExit as exiting:  # a script's `sys.exit()` or `parse_args()` on import
        raise TypeNotFound(_exited(module_ref, exiting)) from None
    finally:
        sys.path.pop(0)
    return module


def _import(module_ref: str) -> Any:
    # A console script's path starts with its own directory, not the current one as under
    # `python -m`; the current directory is put first for the import, then taken away.
    here = os.getcwd()
    added = not any(entry in ("", here) for entry in sys.path)
    if added:
        sys.path.insert(0, here)
    try:
        return importlib.import_module(module_ref)
    except ImportError as error:
        raise TypeNotFound(f"cannot import `{module_ref}`: {error}") from error
    except Exception as error:
        raise TypeNotFound(_import_failed(module_ref, error)) from error
    except SystemExit as exiting:
        raise TypeNotFound(_exited(module_ref, exiting)) from None
    finally:
        if added:
            sys.path.remove(here)


def _import_failed(module_ref: str, error: Exception) -> str:
    """What went wrong importing the caller's module, and where: a syntax error at its
    file, line and column; another error as raised, at the last line of the caller's
    own files it passed (not the import machinery's)."""
    said = f"importing `{module_ref}` failed"
    if isinstance(error, SyntaxError):
        where = f"line {error.lineno}" + (f", column {error.offset}" if error.offset else "")
        return f"{said}: {error.msg} (`{error.filename or module_ref}`, {where})"
    installed = tuple({sysconfig.get_path(name) for name in ("stdlib", "purelib", "platlib")})
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not frame.filename.startswith(("<", *installed))
    ]
    at = f" (`{frames[-1].filename}`, line {frames[-1].lineno})" if frames else ""
    return f"{said}: {type(error).__name__}: {error}{at}"


def _exited(module_ref: str, exiting: SystemExit) -> str:
    return (
        f"importing `{module_ref}` exited (`SystemExit({exiting.code!r})`): a module run as a "
        "script does its work on import; keep the type where importing it does nothing else, "
        'or under `if __name__ == "__main__":`'
    )


def _extensions_alias() -> type | None:
    """`typing_extensions.TypeAliasType`, where the module is loaded (pydantic loads it);
    on Python 3.12 and later it is `typing`'s own."""
    extensions = sys.modules.get("typing_extensions")
    return getattr(extensions, "TypeAliasType", None)


def _not_a_type(target: Any) -> str | None:
    """What `target` is instead of a type (`a function`), or `None` when it is one."""
    if isinstance(target, type) or typing.get_origin(target) is not None:
        return None  # a class, or `list[X]`, `Literal[...]`, `Annotated[...]`, `X | Y`
    # `type X = ...` (Python 3.12+), or `typing_extensions.TypeAliasType` before it.
    aliases = (getattr(typing, "TypeAliasType", None), _extensions_alias())
    if any(alias is not None and isinstance(target, alias) for alias in aliases):
        return None
    if isinstance(target, typing.NewType) or target is typing.Any:
        return None
    if inspect.ismodule(target):
        return "a module"
    if inspect.isroutine(target):
        return "a function"
    return f"a value of type `{type(target).__name__}`"
