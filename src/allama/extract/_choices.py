"""The options of a decision: what the model writes for each, what the caller gets back,
and what each means.

A decision's type is an `Enum`, a `Literal[...]` or `bool`. Every option becomes a label
the model writes (a string member's value, another member's name, a literal as written,
`Yes` and `No` for `bool`), so that one list of strings serves every constraint a provider
has: a plain-text choice, a JSON Schema enum, a tool argument, or the prompt alone.
"""

from __future__ import annotations

import typing
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import Any, Literal

__all__ = ["ABSTAIN_LABEL", "Option", "Options", "options_of"]

ABSTAIN_LABEL = "none of these"
"""The label of the explicit "none of these" option `allow_abstain=True` adds."""

_ABSTAIN_MEANS = "none of the other options fits"

_BOOL_LABELS = ((True, "Yes"), (False, "No"))


@dataclass(frozen=True, slots=True)
class Option:
    label: str
    """What the model writes."""
    value: Any
    """What the caller gets back (`None` for the abstain option)."""
    description: str | None = None


@dataclass(frozen=True, slots=True)
class Options:
    """The options of one decision, in the caller's order, the abstain option last."""

    name: str
    """The type's name, for messages (`Sentiment`, `Literal['a', 'b']`, `bool`)."""
    options: tuple[Option, ...]
    abstain: bool = False

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(option.label for option in self.options)

    def option(self, label: str) -> Option | None:
        for option in self.options:
            if option.label == label:
                return option
        return None

    def trimmed(self, answer: str) -> Option | None:
        """The option an answer read without the space at its ends names (labels are told
        apart that way too: `_check_distinct`)."""
        for option in self.options:
            if option.label.strip() == answer:
                return option
        return None

    def is_abstain(self, option: Option) -> bool:
        return self.abstain and option is self.options[-1]

    def listing(self) -> str:
        """The options as the prompt lists them, one per line, with what each means."""
        lines = []
        for option in self.options:
            meaning = f": {option.description}" if option.description else ""
            lines.append(f"- {option.label}{meaning}")
        return "\n".join(lines)


def options_of(
    tp: Any, descriptions: Mapping[Any, str] | None = None, *, allow_abstain: bool = False
) -> Options:
    """The options of `tp`; raises `TypeError` for a type that is not a choice and
    `ValueError` for options that cannot be told apart or descriptions of no option."""
    name, pairs, documented = _pairs(tp)
    found = [Option(label, value, documented.get(label)) for label, value in pairs]
    _check_distinct(found, name)
    if descriptions is not None:
        found = _described(found, descriptions, name)
    if allow_abstain:
        if any(_alike(option.label) == ABSTAIN_LABEL for option in found):
            raise ValueError(
                f"{name} already has an option `{ABSTAIN_LABEL}`; it cannot also abstain"
            )
        found.append(Option(ABSTAIN_LABEL, None, _ABSTAIN_MEANS))
    return Options(name, tuple(found), abstain=allow_abstain)


def _pairs(tp: Any) -> tuple[str, list[tuple[str, Any]], dict[str, str]]:
    if tp is bool:
        return "bool", [(label, value) for value, label in _BOOL_LABELS], {}
    if isinstance(tp, type) and issubclass(tp, Enum):
        # Every named member, once (an alias is its member's): a `Flag`'s iteration leaves
        # out those that combine others (`ALL = READ | WRITE`) and `0`, named options too.
        members = list(dict.fromkeys(tp.__members__.values()))
        if not members:
            raise ValueError(f"{tp.__name__} has no members to choose from")
        documented = _member_docs(tp)
        pairs = [(_member_label(member), member) for member in members]
        docs = {label: documented[m.name] for label, m in pairs if m.name in documented}
        return tp.__name__, pairs, docs
    if typing.get_origin(tp) is Literal:
        values = typing.get_args(tp)
        return _literal_name(tp, values), [(_literal_label(v), v) for v in values], {}
    raise TypeError(
        "decide() takes an Enum, a Literal[...] or bool as the type of its answer, "
        f"not {tp!r}; for other types use extract()"
    )


_NAME_CHARACTERS = 120
"""The longest a `Literal`'s name runs in messages and warnings: one of a thousand options
is named by its first few and their count."""


def _literal_name(tp: Any, values: tuple[Any, ...]) -> str:
    name = repr(tp).replace("typing.", "")
    if len(name) <= _NAME_CHARACTERS:
        return name
    shown = ""
    for value in values:
        more = f"{shown}{value!r}, "
        if len(more) > _NAME_CHARACTERS - 30:
            break
        shown = more
    return f"Literal[{shown}... {len(values)} options]"


def _member_label(member: Enum) -> str:
    return member.value if isinstance(member.value, str) else member.name


def _literal_label(value: Any) -> str:
    if isinstance(value, Enum):
        return _member_label(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int):
        return str(value)
    raise TypeError(
        f"a decision's Literal takes str, int, bool and Enum members, not {type(value).__name__}"
    )


def _alike(label: str) -> str:
    """What a label is told apart by: its text without the space at its ends, in Unicode's
    composed form (NFC), since `é` and `e` with a combining accent are one word to a reader,
    and a model writes either."""
    return unicodedata.normalize("NFC", label.strip())


def _check_distinct(options: list[Option], name: str) -> None:
    seen: dict[str, Option] = {}
    values: dict[Any, Option] = {}
    for option in options:
        if not option.label.strip():
            raise ValueError(f"{name} has an option written as a blank string")
        label = _alike(option.label)
        other = seen.get(label)
        if other is not None:
            same = other.label == option.label
            written = f"`{option.label}`" if same else f"`{other.label}` and `{option.label}`"
            raise ValueError(
                f"{name} has two options written {written} "
                f"({other.value!r} and {option.value!r}); the model could not tell them apart"
                + _why_alike(other.label, option.label)
            )
        seen[label] = option
        twin = values.get(option.value)
        if twin is not None:  # `1` and `True`, an `IntEnum` member and its value
            raise ValueError(
                f"{name} has two options equal in Python ({twin.value!r} == "
                f"{option.value!r}): the value and the probabilities given back could not "
                "tell them apart"
            )
        values[option.value] = option


def _why_alike(first: str, second: str) -> str:
    """What makes two labels alike that are not written the same (`_alike`)."""
    if first == second:
        return ""
    if first.strip() == second.strip():
        return " (an answer is read without the space at its ends)"
    spaced = first.strip() != first or second.strip() != second
    return (
        f" ({first!a} and {second!a} are the same text once Unicode-normalized "
        "(NFC)" + (", and read without the space at its ends" if spaced else "") + ")"
    )


def _described(options: list[Option], descriptions: Mapping[Any, str], name: str) -> list[Option]:
    """Descriptions given by option (its value, or its label) override the type's own."""
    if isinstance(descriptions, str) or not isinstance(descriptions, Mapping):
        raise TypeError(
            f"`descriptions` must map options to what they mean, not {type(descriptions).__name__}"
        )
    by_key: dict[tuple[str, Any], int] = {}
    for index, option in enumerate(options):
        by_key.setdefault(("str", option.label), index)
        by_key.setdefault(_tagged(option.value), index)
    described = list(options)
    for key, text in descriptions.items():
        if not isinstance(text, str):
            raise TypeError(
                f"the description of option {key!r} must be a str, not {type(text).__name__}"
            )
        found = by_key.get(_tagged(key))
        if found is None:
            raise ValueError(f"`descriptions` names {key!r}, which is not an option of {name}")
        option = described[found]
        described[found] = Option(option.label, option.value, text.strip() or None)
    return described


def _tagged(key: Any) -> tuple[str, Any]:
    """A key that tells `True` from `1` and a `StrEnum` member from its value."""
    for tag, kind in (("enum", Enum), ("bool", bool), ("str", str), ("int", int)):
        if isinstance(key, kind):
            return tag, key
    return "other", id(key)


@lru_cache(maxsize=256)
def _member_docs(enum: type[Enum]) -> dict[str, str]:
    """Each member's docstring: the string written under its assignment in the class body
    (read from the source, as documentation tools read attribute docstrings), else a
    `__doc__` the member was given of its own. Nothing when the source is not at hand."""
    import ast  # documentation is read once per Enum: these load only when it is
    import inspect
    import textwrap

    found: dict[str, str] = {}
    class_doc = enum.__doc__
    for member in enum:
        own = member.__dict__.get("__doc__")
        if isinstance(own, str) and own.strip() and own != class_doc:
            found[member.name] = inspect.cleandoc(own)
    try:
        source = textwrap.dedent(inspect.getsource(enum))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return found
    body = next((n for n in tree.body if isinstance(n, ast.ClassDef)), None)
    if body is None:
        return found
    previous: str | None = None
    for node in body.body:
        if (
            previous is not None
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            found.setdefault(previous, inspect.cleandoc(node.value.value))
        previous = _assigned_name(node)
    return {name: doc for name, doc in found.items() if name in enum.__members__}


def _assigned_name(node: Any) -> str | None:
    import ast

    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        return target.id if isinstance(target, ast.Name) else None
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    return None
