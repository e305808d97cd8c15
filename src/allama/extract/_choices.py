"""The options of a decision: what the model writes for each, what the caller gets back,
and what each means.

A decision's type is an `Enum`, a `Literal[...]` or `bool` (or an alias of one, `Annotated`
around one, or a union of `Literal`s). Every option becomes a label the model writes (a
string member's value, another member's name, a literal as written, `Yes` and `No` for
`bool`), so that one list of strings serves every constraint a provider has: a plain-text
choice, a JSON Schema enum, a tool argument, or the prompt alone.
"""

from __future__ import annotations

import json
import sys
import types
import typing
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import Annotated, Any, Literal, Union

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

    def as_listed(self, answer: str) -> Option | None:
        """The option `answer` names as the listing writes it, where that is a JSON string
        (`listed_label`): a model told to write the option as listed may copy its quotes."""
        if not answer.startswith('"'):
            return None
        try:
            label = json.loads(answer)
        except ValueError:
            return None
        option = self.option(label) if isinstance(label, str) else None
        return option if option is not None and _quoted(option.label) else None

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
        """The options as the prompt lists them, one per line, with what each means: a
        label that would not read as itself there is written as a JSON string
        (`listed_label`), and a description's further lines are indented, so that neither
        shows the model an option that is not one."""
        lines = []
        for option in self.options:
            meaning = f": {_indented(option.description)}" if option.description else ""
            lines.append(f"- {listed_label(option.label)}{meaning}")
        return "\n".join(lines)


def listed_label(label: str) -> str:
    """`label` as the prompt lists it: as it is, or as a JSON string where it holds a line
    break or another control character (a listing of one option would read as two), or
    space at its ends (which a listing does not show), or begins with a quote (which would
    read as such a string)."""
    return json.dumps(label, ensure_ascii=False) if _quoted(label) else label


def _quoted(label: str) -> bool:
    """Whether `listed_label` writes `label` as a JSON string."""
    return (
        label.strip() != label
        or label.startswith('"')
        or any(unicodedata.category(c) in _UNSEEN for c in label)
    )


_UNSEEN = frozenset({"Cc", "Zl", "Zp"})
"""The categories of characters a listed label is quoted for: control characters (`\\n`,
`\\t`, U+0085) and the line and paragraph separators, which break a line or show nothing."""


def _indented(description: str) -> str:
    """A description with each further line indented: under its option, not a new one."""
    first, *rest = description.splitlines() or [""]
    return "\n".join([first, *(f"  {line}" if line.strip() else "" for line in rest)])


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
    name, pairs, documented = _choice_pairs(_unwrapped(tp, ()), tp)
    return _alias_name(tp) or name, pairs, documented


def _alias_name(tp: Any) -> str | None:
    """The name of the alias the caller gave (`Color` of `type Color = Literal[...]`), also
    under `Annotated`."""
    while typing.get_origin(tp) is Annotated:
        tp = tp.__origin__
    return str(tp.__name__) if _is_alias(tp) else None


def _is_alias(tp: Any) -> bool:
    """`type X = ...` (Python 3.12+), or `typing_extensions.TypeAliasType` before it (as the
    CLI's loader tells them: `typing_extensions` is read where it is loaded)."""
    extensions = sys.modules.get("typing_extensions")
    kinds = (getattr(typing, "TypeAliasType", None), getattr(extensions, "TypeAliasType", None))
    return any(kind is not None and isinstance(tp, kind) for kind in kinds)


def _unwrapped(tp: Any, seen: tuple[Any, ...]) -> Any:
    """The choice an alias, an `Annotated` or a union of `Literal`s stands for: the alias's
    value, the annotated type (its metadata says nothing of the options), and the union's
    values in order (alike ones are refused after, as in one `Literal`). Anything else is
    left as it is, for `_choice_pairs` to take or refuse."""
    if _is_alias(tp):
        if any(tp is each for each in seen):  # `type X = Literal["a"] | X`: no options end it
            return tp
        return _unwrapped(tp.__value__, (*seen, tp))
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _unwrapped(tp.__origin__, seen)
    if origin is Union or origin is types.UnionType:
        members = [_unwrapped(member, seen) for member in typing.get_args(tp)]
        if all(_literal_values(member) is not None for member in members):
            values = [value for member in members for value in _literal_values(member) or ()]
            return _Flattened(tp, tuple(values))
    return tp


def _literal_values(tp: Any) -> tuple[Any, ...] | None:
    """The values of a `Literal`, or of a union of them already flattened (an alias's)."""
    if isinstance(tp, _Flattened):
        return tp.values
    return typing.get_args(tp) if typing.get_origin(tp) is Literal else None


@dataclass(frozen=True, slots=True)
class _Flattened:
    """A union of `Literal`s, as its values in order (`typing.Literal` would drop alike ones,
    which the options refuse) and named as written."""

    union: Any
    values: tuple[Any, ...]


def _choice_pairs(tp: Any, given: Any) -> tuple[str, list[tuple[str, Any]], dict[str, str]]:
    """The name, labels and values, and documented meanings of the choice `tp` (`given`
    unwrapped: `_unwrapped`); a `TypeError` naming `given` for a type that is no choice."""
    if isinstance(tp, _Flattened):
        values = tp.values
        return _literal_name(tp.union, values), [(_literal_label(v), v) for v in values], {}
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
        f"not {given!r}; for other types use extract()"
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
        if not _utf8(option.label):
            raise ValueError(
                f"{name} has an option written {option.label!a}, which holds a lone surrogate "
                "that UTF-8 cannot carry (text cut between the halves of a character?)"
            )
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


def _utf8(label: str) -> bool:
    """Whether `label` can be sent: a lone surrogate is in no UTF-8 text (or JSON schema)."""
    try:
        label.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
