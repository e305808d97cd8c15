"""Finding the caller's type from `path/to/file.py:Name` or `package.module:Name`."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import sys
import sysconfig
import traceback
import typing
from collections.abc import Iterator
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
    # What the module prints as it loads goes to stderr: stdout is the command's own (a
    # `plan --json`, an `export --out -`) and a program reading it would read the prints.
    with contextlib.redirect_stdout(sys.stderr):
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
    if path.is_dir():
        raise TypeNotFound(f"`{module_ref}` is a folder: name a Python file (`{module_ref}/x.py`)")
    if not path.is_file():
        raise TypeNotFound(f"no such file: `{module_ref}`")
    file = path.resolve()
    dotted, root = _package_module(file)
    if dotted is None or root is None:
        with _on_path(str(file.parent)):  # as `python path/to/file.py` runs it
            return _exec_file(module_ref, path)
    # A file of a package is imported by its name, as `python -m` from the folder the package
    # is in would (its relative imports need its package); its own folder stays on the path,
    # as the file's imports of its siblings by their names need.
    taken = _taken(dotted, root)
    if taken is None:
        with _on_path(str(root), str(file.parent)):
            module = _import_as(module_ref, dotted)
        if Path(getattr(module, "__file__", None) or "").resolve() == file:
            return module
        taken = f"`{getattr(module, '__file__', None) or dotted}`'s"
    # The package's name is another module's: the file is loaded alone, as it was before.
    try:
        with _on_path(str(file.parent)):
            return _exec_file(module_ref, path)
    except TypeNotFound as error:
        cause = error.__cause__
        top = dotted.partition(".")[0]
        # A relative import (no name), or an absolute one of the package.
        if not isinstance(cause, ImportError) or (cause.name or top).partition(".")[0] != top:
            raise
        raise TypeNotFound(
            f"{error}; the file is in the package `{top}`, a name that is {taken} here: "
            "it was loaded alone, without its package"
        ) from error.__cause__


def _exec_file(module_ref: str, path: Path) -> Any:
    # Under a name of its own: a file named like another module (`json.py`) takes its place
    # in no one's imports, and loaded again it is run again.
    module_name = f"_allama_plan_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise TypeNotFound(f"`{module_ref}` cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        raise TypeNotFound(_import_failed(module_ref, error)) from error
    except SystemExit as exiting:  # a script's `sys.exit()` or `parse_args()` on import
        raise TypeNotFound(_exited(module_ref, exiting)) from None
    return module


def _package_module(file: Path) -> tuple[str | None, Path | None]:
    """The name `file` is imported by as part of its package (`shop.models`), and the folder
    the package is in, the nearest above it that is no package; `None`s for a file whose
    folder is no package (or is named as no module can be)."""
    parts = [] if file.stem == "__init__" else [file.stem]
    folder = file.parent
    while (folder / "__init__.py").is_file() and folder.name.isidentifier():
        parts.insert(0, folder.name)
        folder = folder.parent
    if folder == file.parent or not all(part.isidentifier() for part in parts):
        return None, None
    return ".".join(parts), folder


def _taken(dotted: str, root: Path) -> str | None:
    """Whose the package's name is here, when it is not the package in `root`'s (a standard
    library module's, an installed package's, another project's package loaded before):
    imported by its name, the file would be that one's, or would hide it."""
    top = dotted.partition(".")[0]
    if top in sys.stdlib_module_names:
        return "the standard library's"
    module = sys.modules.get(top)
    if module is not None:
        places: list[str | None] = list(
            getattr(module, "__path__", None) or [getattr(module, "__file__", None)]
        )
    else:
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            return None
        if spec is None:
            return None
        folders = spec.submodule_search_locations
        places = [spec.origin] if folders is None else list(folders)
    found = [place for place in places if place]
    if any(Path(place).resolve() == root / top for place in found):
        return None
    return f"`{found[0]}`'s" if found else "a module's without a file"


@contextlib.contextmanager
def _on_path(*folders: str) -> Iterator[None]:
    """`folders` first on the import path, then the current directory where it is not on it
    (a console script's path starts with its own directory, not the current one as under
    `python -m`), for an import; taken away after."""
    here = os.getcwd()
    added = [*folders, *([] if any(entry in ("", here) for entry in sys.path) else [here])]
    sys.path[:0] = added
    try:
        yield
    finally:
        for entry in added:
            with contextlib.suppress(ValueError):
                sys.path.remove(entry)


def _import(module_ref: str) -> Any:
    with _on_path():
        return _import_as(module_ref, module_ref)


def _import_as(module_ref: str, name: str) -> Any:
    """The module `name`, imported for the reference `module_ref`, its errors said in the
    reference's terms."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        if name != module_ref:  # a file's own import that failed
            raise TypeNotFound(_import_failed(module_ref, error)) from error
        raise TypeNotFound(f"cannot import `{module_ref}`: {error}") from error
    except Exception as error:
        raise TypeNotFound(_import_failed(module_ref, error)) from error
    except SystemExit as exiting:
        raise TypeNotFound(_exited(module_ref, exiting)) from None


def _import_failed(module_ref: str, error: Exception) -> str:
    """What went wrong importing the caller's module, and where: a syntax error at its
    file, line and column; another error by its type and its message's first line, at the
    last line of the caller's own files it passed (not the import machinery's)."""
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
    # The message's first line alone: the rest (pydantic's advice on its own hooks) runs
    # over lines that `batch run`'s one-line error would show as `\n`.
    reason = str(error).split("\n", 1)[0]
    return f"{said}: {type(error).__name__}: {reason}{at}"


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
