"""Turning the output into the value, with errors that name the field and say what is wrong.

The model reads these messages on a retry, so they name the place (`items[1].price`) and the
problem in plain words: a missing field, an unknown enum value, a wrong type, or the message
of the caller's own validator.
"""

from __future__ import annotations

import enum
import json
import re
import sys
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any, TypeGuard, cast

import pydantic.types
from pydantic import Secret, SecretBytes, SecretStr, TypeAdapter, ValidationError
from pydantic_core import CoreSchema, ErrorDetails, SchemaValidator
from pydantic_core.core_schema import (
    dict_schema,
    no_info_after_validator_function,
    no_info_wrap_validator_function,
)

from allama.extract._decimals import (
    MOST_TRIED,
    lossy_numbers,
    only_decimals_differ,
    quoted,
    same_but_decimals,
    stood_in,
    too_large,
)
from allama.extract._json import NotJsonError, keys_all_kept, read
from allama.extract._json_strict import BESIDE, said_first, validate_strict_json
from allama.extract._kept import NOT_FINITE, Merged, kept_keys, merged_keys, non_finite_place
from allama.extract._output import CAREFUL, OutputPlan, output_plan, schema_nodes
from allama.schema._nulls import normalize_strict_nulls
from allama.schema._types import CLASS_KINDS, flag_expected, named_fields
from allama.schema._undeclared import UndeclaredKey, find_undeclared_key, format_path, key_step


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a text did not become the value."""

    message: str
    path: str | None
    invalid_json: bool = False
    undeclared: bool = False
    kind: str | None = None
    """pydantic's kind of error (`int_parsing`), where validation said it."""
    bounds: bool = False
    """Every error validation said is a bound's (`_BOUNDS`): a value broke a limit, none
    was of the wrong type."""


def _describe(value: Any, secret: bool = False, unquoted: bool = False) -> str:
    """The value that failed, as the message says it: quoted, or only its JSON type where it
    is (in) a field the caller typed secret (`SecretStr`, `Secret[int]`), or where
    `unquoted` (a configuration that hides the input from its errors,
    `hide_input_in_errors`)."""
    if secret and value is not None:
        return _SECRET_KINDS.get(type(value), "a secret value")
    if unquoted and value is not None:
        return _UNQUOTED_KINDS.get(type(value), "a value")
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value}`"
    if isinstance(value, str):
        return f"string {json.dumps(value)}"
    if isinstance(value, list):
        return "a sequence"
    if isinstance(value, dict):
        return "a map"
    return type(value).__name__


_UNQUOTED_KINDS = {
    bool: "a boolean",
    int: "an integer",
    float: "a floating point number",
    str: "a string",
    list: "a sequence",
    dict: "a map",
}
"""A value the message does not quote, by its JSON type."""

_SECRET_KINDS = {
    kind: said if kind in (list, dict) else f"a secret {said.split(' ', 1)[1]}"
    for kind, said in _UNQUOTED_KINDS.items()
}
"""A value in a secret-typed field, by its JSON type: a container says no more."""


_EXPECTED = {
    "int": "an integer",
    "float": "a number",
    "string": "a string",
    "bool": "a boolean",
    "list": "a list",
    "tuple": "a list",
    "set": "a list",
    "frozen_set": "a list",
    "dict": "an object",
    "model": "an object",
    "model_attributes": "an object",
    "dataclass": "an object",
    "typed_dict": "an object",
}


def _message(
    error: ErrorDetails, secret: bool = False, listed: str | None = None, unquoted: bool = False
) -> str:
    """What `error` says, in plain words; where `secret` (its place is, or is in, a
    secret-typed field) or `unquoted` (its type's configuration hides the input from its
    errors), without the value the model wrote there. `listed` is what the schema lists at
    an enum's place where pydantic's list of its members says less (a flag's sums,
    `flag_expected`)."""
    kind = error["type"]
    value = error.get("input")
    ctx = error.get("ctx") or {}
    withheld = (secret or unquoted) and kind not in _CALLERS
    msg = _withheld(error["msg"], ctx) if withheld else error["msg"]
    if kind == "missing":
        return f"missing field `{error['loc'][-1]}`" if error["loc"] else "missing value"
    if kind in ("enum", "literal_error"):
        expected = str(ctx.get("expected", ""))
        as_json = (listed, True) if listed is not None else _listed_as_json(expected)
        if as_json is None:
            written = _describe_variant(value, secret, unquoted)
            return f"unknown variant {written}, expected {expected}"
        said, scalars = as_json
        written = (
            _describe(value, secret, unquoted)
            if scalars
            else _describe_variant(value, secret, unquoted)
        )
        return f"unknown variant {written}, expected {said}"
    if kind == "value_error":
        reason = ctx.get("error")
        return str(reason) if reason is not None else msg.removeprefix("Value error, ")
    if kind == "assertion_error":
        return msg.removeprefix("Assertion failed, ")
    if kind == "extra_forbidden":
        return f"unknown field `{error['loc'][-1]}`"
    if kind.endswith(("_type", "_parsing")):
        base = kind.removesuffix("_type").removesuffix("_parsing")
        expected = _EXPECTED.get(base, msg.removeprefix("Input should be ").lower())
        return f"invalid type: {_describe(value, secret, unquoted)}, expected {expected}"
    if kind in (
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
        "multiple_of",
        "string_too_short",
        "string_too_long",
        "too_short",
        "too_long",
        "string_pattern_mismatch",
        "finite_number",
    ):
        return f"invalid value: {_describe(value, secret, unquoted)}, expected {_bound(msg)}"
    return str(msg)


_CALLERS = frozenset({"value_error", "assertion_error"})
"""Kinds whose message is the caller's own validator's: said as it is written."""


def _withheld(msg: str, ctx: dict[str, Any]) -> str:
    """pydantic's message without the part its parser wrote of the input (`invalid
    character: found `z` at 0` of a UUID)."""
    said = ctx.get("error")
    if isinstance(said, str) and said and said in msg:
        return msg[: msg.index(said)].rstrip(" ,:")
    return msg


def _bound(msg: str) -> str:
    """What a bound expects, from pydantic's message: `Input should be greater than 3` is
    `greater than 3`, `Value should have at most 8 items after validation, not 18` is `at
    most 8 items after validation, not 18`, `String should match pattern 'x'` is `to match
    pattern 'x'`."""
    subject, should, rest = msg.partition(" should ")
    if not should or " " in subject:
        return msg
    for verb in ("be ", "have "):
        if rest.startswith(verb):
            return rest.removeprefix(verb)
    return f"to {rest}"


def _describe_variant(value: Any, secret: bool = False, unquoted: bool = False) -> str:
    if isinstance(value, str) and not (secret or unquoted):
        return f"`{value}`"
    return _describe(value, secret, unquoted)


_PY_STRING = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
_PY_SCALAR = r"True|False|None|-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_LISTED = re.compile(rf"(?P<string>{_PY_STRING})|(?P<scalar>{_PY_SCALAR})")
_BETWEEN = (", ", " or ")
_AS_JSON = {"True": "true", "False": "false", "None": "null"}


def _listed_as_json(expected: str) -> tuple[str, bool] | None:
    """Pydantic's list of an enum's or `Literal`'s values (`1.5, True or 'a'`, each as
    Python writes it) with its booleans and `None` as JSON writes them (`1.5, true or
    'a'`), and whether any value is not a string: then a string the model wrote is said as
    one (`string "2"`, not `2`, where `1 or 2` is expected). `None` for any other text
    (a decision's own list of its options), which is said as it is."""
    out: list[str] = []
    scalars = False
    at = 0
    while True:
        found = _LISTED.match(expected, at)
        if found is None:
            return None
        token = found.group()
        if found.group("scalar") is not None:
            scalars = True
            token = _AS_JSON.get(token, token)
        out.append(token)
        at = found.end()
        if at == len(expected):
            return "".join(out), scalars
        between = next((sep for sep in _BETWEEN if expected.startswith(sep, at)), None)
        if between is None:
            return None
        out.append(between)
        at += len(between)


def _path(error: ErrorDetails, output: Any, hidden: frozenset[int] = frozenset()) -> str | None:
    """Where in the output an error is: the parts of pydantic's location that are keys and
    indices of the output, walked through it. The others are no place in it: a union's
    member (`int`, a model's name), a tagged branch, a validator, a key that is missing
    (the path names the object that lacks it), and they are left out, whatever a real key
    holds (`a[0]`, `function-x`). A key at a part in `hidden` is said `<secret key>`."""
    node = output
    kept: list[Any] = []
    secret: list[int] = []
    for at, part in enumerate(error["loc"]):
        key = isinstance(node, dict) and isinstance(part, str) and part in node
        index = (
            isinstance(node, list)
            and isinstance(part, int)
            and not isinstance(part, bool)
            and 0 <= part < len(node)
        )
        if key or index:
            node = node[part]
            if at in hidden:
                secret.append(len(kept))
            kept.append(part)
    if secret:
        return _spelled(tuple(kept), frozenset(secret)) or None
    return format_path(tuple(kept)) or None


SECRET_KEY = "<secret key>"
"""How a path says a key of a map whose keys are typed secret (`dict[SecretStr, int]`), or
a key inside a secret-typed value: `by_key.<secret key>` (no key written is spelled so:
one with a space is quoted)."""


def _spelled(parts: tuple[Any, ...], hidden: frozenset[int] = frozenset()) -> str:
    """`format_path` of `parts`, a key at an index in `hidden` said as `SECRET_KEY`."""
    if not hidden:
        return format_path(parts)
    out = ""
    for at, part in enumerate(parts):
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
            continue
        step = f".{SECRET_KEY}" if at in hidden else key_step(str(part))
        out += step if out or step.startswith("[") else step[1:]
    return out


def from_validation_error(
    error: ValidationError, output: Any, adapter: TypeAdapter[Any] | None = None
) -> Failure:
    """The first error of validating `output` (the JSON value read), as a `Failure` (of
    those a validator's Python objects did not cause, where there are some: `said_first`).
    Where `adapter`'s type places it in a secret-typed field, the value goes unquoted."""
    errors = error.errors(include_url=False)
    first = said_first(errors)
    bounds = all(each["type"] in _BOUNDS for each in errors)
    unquoted = False
    places = None if adapter is None else _places_of(adapter)
    if places is not None:
        # Named by the keys the schema sent shows, whatever the type's `loc_by_alias`.
        loc, unquoted = places.place(tuple(first["loc"]), output)
        first = cast(ErrorDetails, {**first, "loc": loc})
    loc = tuple(first["loc"])
    listed = _flag_listed(adapter, loc) if adapter is not None and first["type"] == "enum" else None
    secrets = None if adapter is None else _secrets_of(adapter)
    if secrets is None:
        message = _message(first, listed=listed, unquoted=unquoted)
        return Failure(message, _path(first, output), kind=first["type"], bounds=bounds)
    hidden = secrets.hidden(loc)
    message = _message(first, secrets.holds(loc), listed, unquoted)
    if first["type"] == "extra_forbidden" and len(loc) - 1 in hidden:
        message = "an unknown field"  # a key the model wrote inside a secret value
    path = _path(first, output, hidden)
    return Failure(message, path, kind=first["type"], bounds=bounds)


@dataclass(frozen=True, slots=True)
class _Secrets:
    """A type's core schema that holds a secret-typed field somewhere, with the schemas it
    defines by `ref`: to tell whether an error's place is in one."""

    core: dict[str, Any]
    refs: dict[str, dict[str, Any]]
    sought: Callable[[dict[str, Any]], bool] | None = None
    """What a node is sought for, where not for being secret (`_is_secret`): a flag's."""

    def holds(self, loc: tuple[Any, ...]) -> bool:
        """Whether the place pydantic names `loc` is, or is in, a secret-typed value (some
        reading of it is, where `loc` may be read more than one way: a union's member)."""
        return self._holds(self.core, loc, 0, set())

    def _holds(self, node: Any, loc: tuple[Any, ...], at: int, seen: set[tuple[int, int]]) -> bool:
        if not isinstance(node, dict) or (id(node), at) in seen:
            return False
        seen.add((id(node), at))
        if (_is_secret if self.sought is None else self.sought)(node):
            return True
        kind = node.get("type")
        if kind == "definition-ref":
            return self._holds(self.refs.get(node.get("schema_ref", "")), loc, at, seen)
        inner = [node[key] for key in _PASSED if key in node]
        if kind == "chain":
            inner.extend(node.get("steps", ()))
        if inner:  # a wrapper that adds no part to the place
            return any(self._holds(each, loc, at, seen) for each in inner)
        if kind == "union":
            choices = [each[0] if isinstance(each, tuple) else each for each in node["choices"]]
            if at == len(loc) or len(choices) == 1 or "custom_error_type" in node:
                # The error is the union's own: the value is one a secret member could hold.
                return any(self._holds(each, loc, at, seen) for each in choices)
            if at + 1 == len(loc):
                # A member refused the union's value itself, which every member was given:
                # it is secret where one member is (`int | SecretStr` refusing `1.5`).
                return any(self._holds(each, loc, at + 1, seen) for each in choices)
            named = [
                choice
                for choice, label in zip(choices, _labels(node["choices"], self.refs), strict=True)
                if label == loc[at]
            ]
            return any(self._holds(each, loc, at + 1, seen) for each in named or choices)
        if kind == "tagged-union":
            choices = node["choices"]
            if at == len(loc):
                return any(self._holds(each, loc, at, seen) for each in choices.values())
            tagged = [each for tag, each in choices.items() if str(tag) == str(loc[at])]
            return any(self._holds(each, loc, at + 1, seen) for each in tagged)
        if at == len(loc):
            return False  # the error is the container's own (a model given a string)
        return any(self._holds(each, loc, end, seen) for each, end in _parts(node, loc, at))

    def hidden(self, loc: tuple[Any, ...], labels: bool = True) -> frozenset[int]:
        """The parts of the place `loc` that a message must not quote: a key of a map whose
        keys are typed secret, or any part inside a secret-typed value; and `len(loc)` where
        the value at the place is itself (in) one. `loc` is pydantic's location (with a
        union member's label, a tag, `[key]`), or where `labels` is false a place in the
        JSON value (keys and indices alone: every member of a union is a reading of it)."""
        found: set[int] = set()
        self._hide(self.core, loc, 0, labels, found, set())
        return frozenset(found)

    def _hide(
        self,
        node: Any,
        loc: tuple[Any, ...],
        at: int,
        labels: bool,
        found: set[int],
        seen: set[tuple[int, int]],
    ) -> None:
        if not isinstance(node, dict) or (id(node), at) in seen:
            return
        seen.add((id(node), at))
        if _is_secret(node):
            found.update(range(at, len(loc) + 1))
            return
        kind = node.get("type")
        if kind == "definition-ref":
            self._hide(self.refs.get(node.get("schema_ref", "")), loc, at, labels, found, seen)
            return
        if kind in ("union", "tagged-union"):
            for each, end in self._members(node, loc, at, labels):
                self._hide(each, loc, end, labels, found, seen)
            return
        inner = [node[key] for key in _PASSED if key in node]
        if kind == "chain":
            inner.extend(node.get("steps", ()))
        for each in inner:  # a wrapper that adds no part to the place
            self._hide(each, loc, at, labels, found, seen)
        if inner or at == len(loc):
            return
        if kind == "dict":
            if self._secret_keys(node.get("keys_schema")):
                found.add(at)
            if labels and loc[at + 1 : at + 2] == ("[key]",):
                self._hide(node.get("keys_schema"), loc, at + 2, labels, found, seen)
            else:
                self._hide(node.get("values_schema"), loc, at + 1, labels, found, seen)
            return
        parts = list(_parts(node, loc, at))
        if kind in ("model-fields", "typed-dict") and self._secret_keys(
            node.get("extras_keys_schema")
        ):
            fields = [each for each, _ in parts if each is not node.get("extras_schema")]
            if not fields:  # an extra key, of a type given its extras' keys
                found.add(at)
        for each, end in parts:
            self._hide(each, loc, end, labels, found, seen)

    def _members(
        self, node: dict[str, Any], loc: tuple[Any, ...], at: int, labels: bool
    ) -> list[tuple[Any, int]]:
        """A union's members that `loc[at:]` may go on into, each with where the rest of the
        place starts (past a member's label or tag, in pydantic's location), as `_holds`
        reads them."""
        if node.get("type") == "tagged-union":
            choices = node["choices"]
            if not labels or at == len(loc):
                return [(each, at) for each in choices.values()]
            return [(each, at + 1) for tag, each in choices.items() if str(tag) == str(loc[at])]
        listed = node["choices"]
        choices = [each[0] if isinstance(each, tuple) else each for each in listed]
        if not labels or at == len(loc) or len(choices) == 1 or "custom_error_type" in node:
            return [(each, at) for each in choices]
        named = [
            choice
            for choice, label in zip(choices, _labels(listed, self.refs), strict=True)
            if label == loc[at]
        ]
        return [(each, at + 1) for each in named or choices]

    def _secret_keys(self, keys: Any) -> bool:
        """Whether a map's key schema is (some reading of it is) secret-typed."""
        return keys is not None and self._holds(keys, (), 0, set())


_Reading = tuple[tuple[Any, ...], bool, bool]
"""A place read through a type's core schema (`_Places`): its parts as the schema sent
names them, whether its input is hidden, and whether each field named was found."""


@dataclass(frozen=True, slots=True)
class _Places:
    """A type's core schema where some model, dataclass or `TypedDict` names its errors'
    places by field name (`loc_by_alias=False`) or hides their input
    (`hide_input_in_errors=True`), with the schemas it defines by `ref`: the schema sent
    shows a field by its alias, which a model obeying it writes, and a place or a message
    naming the field otherwise sends it to write what the schema does not show."""

    core: dict[str, Any]
    refs: dict[str, dict[str, Any]]

    def place(
        self, loc: tuple[Any, ...], output: Any, labels: bool = True
    ) -> tuple[tuple[Any, ...], bool]:
        """The place pydantic names `loc` (with a union member's label, a tag, `[key]`; or
        where `labels` is false, a place in the JSON `output`: keys and indices alone), each
        field in it named as the output wrote it (or, where it did not, as the schema shows
        it), and whether a configuration over it (the type's, or that of a model it is in)
        hides the input from its errors: pydantic honours the outermost type's alone, but
        a model that asks keeps its values out of the message inside another too."""
        found = self._walk(self.core, loc, 0, output, None, False, labels, set())
        return (loc, False) if found is None else found[:2]

    def _walk(
        self,
        node: Any,
        loc: tuple[Any, ...],
        at: int,
        value: Any,
        config: Any,
        hides: bool,
        labels: bool,
        seen: set[tuple[int, int]],
    ) -> _Reading | None:
        """`loc[at:]` read from `node`, over the JSON `value` at its place, with `config` the
        configuration in force; `None` where `node` cannot be read (a loop of refs)."""
        if not isinstance(node, dict) or (id(node), at) in seen:
            return None
        seen.add((id(node), at))
        kind = node.get("type")
        own = node.get("config")
        if kind in CLASS_KINDS and isinstance(own, dict):
            config = own
            hides = hides or own.get("hide_input_in_errors") is True
        if kind == "definition-ref":
            target = self.refs.get(node.get("schema_ref", ""))
            return self._walk(target, loc, at, value, config, hides, labels, seen)
        inner = [node[key] for key in _PASSED if key in node]
        if kind == "chain":
            inner.extend(node.get("steps", ()))
        if inner:  # a wrapper that adds no part to the place
            return _best(
                self._walk(each, loc, at, value, config, hides, labels, seen) for each in inner
            )
        if at == len(loc):
            return (), hides, True
        part = loc[at]

        def then(steps: tuple[Any, ...], child: Any, end: int, held: Any) -> _Reading:
            found = self._walk(child, loc, end, held, config, hides, labels, seen)
            if found is None:
                return (*steps, *loc[end:]), hides, True
            return (*steps, *found[0]), found[1], found[2]

        if kind in ("union", "tagged-union"):
            members = self._members(node, loc, at, labels)
            if members is None:
                return loc[at:], hides, False
            steps = (part,) if members and members[0][1] > at else ()
            return _best(then(steps, each, end, value) for each, end in members)
        if kind in ("list", "set", "frozenset", "generator", "tuple") and isinstance(part, int):
            held = value[part] if isinstance(value, list) and 0 <= part < len(value) else None
            for child, end in _parts(node, loc, at):
                return then((part,), child, end, held)
            return loc[at:], hides, True
        if kind == "dict":
            if loc[at + 1 : at + 2] == ("[key]",):
                return then((part, "[key]"), node.get("keys_schema"), at + 2, part)
            held = value.get(part) if isinstance(value, dict) else None
            return then((part,), node.get("values_schema"), at + 1, held)
        if kind in _FIELDED:
            return self._field(node, loc, at, value, config, hides, labels, then)
        return loc[at:], hides, True  # a node of its own: the rest is its own place

    def _field(
        self,
        node: dict[str, Any],
        loc: tuple[Any, ...],
        at: int,
        value: Any,
        config: Any,
        hides: bool,
        labels: bool,
        then: Callable[[tuple[Any, ...], Any, int, Any], _Reading],
    ) -> _Reading:
        """`loc[at:]` read from a node of named fields: a field named by its name where the
        configuration names places so (`loc_by_alias=False`), by the key pydantic found
        it under otherwise."""
        named = [{**field, "name": name} for name, field in named_fields(node)]
        by_name = labels and isinstance(config, dict) and config.get("loc_by_alias") is False
        for field in named:
            name = field.get("name")
            if by_name:
                if loc[at] == name:
                    key = _written_key(field, value, config)
                    return then(key, field.get("schema"), at + 1, _at(value, key))
                continue
            for key in _field_keys(field):
                if loc[at : at + len(key)] == key:
                    return then(key, field.get("schema"), at + len(key), _at(value, key))
        if node.get("extras_schema") is not None:
            held = value.get(loc[at]) if isinstance(value, dict) else None
            return then((loc[at],), node["extras_schema"], at + 1, held)
        return loc[at:], hides, False

    def _members(
        self, node: dict[str, Any], loc: tuple[Any, ...], at: int, labels: bool
    ) -> list[tuple[Any, int]] | None:
        """A union's members `loc[at:]` may go on into, each with where the rest starts
        (past a label or tag); `None` where `loc[at]` names none of its members."""
        if node.get("type") == "tagged-union":
            choices = node["choices"]
            if not labels:
                return [(each, at) for each in choices.values()]
            tagged = [(each, at + 1) for tag, each in choices.items() if str(tag) == str(loc[at])]
            return tagged or None
        listed = node["choices"]
        choices = [each[0] if isinstance(each, tuple) else each for each in listed]
        if not labels or len(choices) == 1 or "custom_error_type" in node:
            return [(each, at) for each in choices]
        named = [
            (choice, at + 1)
            for choice, label in zip(choices, _labels(listed, self.refs), strict=True)
            if label == loc[at]
        ]
        return named or None


_FIELDED = frozenset({"model-fields", "typed-dict", "dataclass-args"})


def _best(readings: Iterable[_Reading | None]) -> _Reading | None:
    """The first reading that found every field it named; else the first reading."""
    first: _Reading | None = None
    for reading in readings:
        if reading is None:
            continue
        if reading[2]:
            return reading
        first = first or reading
    return first


_ABSENT: Any = object()


def _at(value: Any, steps: tuple[Any, ...]) -> Any:
    """What the JSON `value` holds at `steps` (keys and indices); `_ABSENT` where nothing."""
    for step in steps:
        key = isinstance(value, dict) and isinstance(step, str) and step in value
        index = isinstance(value, list) and type(step) is int and 0 <= step < len(value)
        if not (key or index):
            return _ABSENT
        value = value[step]
    return value


def _written_key(field: dict[str, Any], value: Any, config: Any) -> tuple[Any, ...]:
    """The key (or path) of a field as pydantic names it by alias: the first the JSON
    object `value` holds of those validation reads it from, else the key its JSON Schema
    shows (pydantic's: its alias, or the first one-key choice of its aliases, or its
    name)."""
    name = field.get("name")
    alias = field.get("validation_alias")
    settings = config if isinstance(config, dict) else {}
    by_alias = settings.get("validate_by_alias") is not False
    by_name = bool(settings.get("validate_by_name") or settings.get("populate_by_name"))
    paths: list[tuple[Any, ...]] = []
    if by_alias and isinstance(alias, str):
        paths.append((alias,))
    elif by_alias and isinstance(alias, list) and alias:
        for path in alias if isinstance(alias[0], list) else [alias]:
            paths.append(tuple(path) if isinstance(path, list) else (path,))
    if alias is None or by_name or not by_alias:
        paths.append((name,))
    for path in paths:
        if _at(value, path) is not _ABSENT:
            return path
    if isinstance(alias, str):
        return (alias,)
    if isinstance(alias, list):
        for path in alias:
            if isinstance(path, list) and len(path) == 1 and isinstance(path[0], str):
                return (path[0],)
    return (name,)


_places: weakref.WeakKeyDictionary[TypeAdapter[Any], _Places | None] = weakref.WeakKeyDictionary()


def _places_of(adapter: TypeAdapter[Any]) -> _Places | None:
    """Where `adapter`'s type names places by field name or hides its errors' input;
    `None` where no configuration in it does either. Worked out once per type, on its
    first failure."""
    try:
        return _places[adapter]
    except KeyError:
        pass
    core, refs, nodes = _core_of(adapter)
    found = any(_configured_apart(node) for node in nodes)
    places = _places[adapter] = _Places(core, refs) if found else None
    return places


def _configured_apart(node: dict[str, Any]) -> bool:
    """Whether `node` is a model, dataclass or `TypedDict` that names its errors' places by
    field name or hides their input."""
    config = node.get("config")
    if node["type"] not in CLASS_KINDS or not isinstance(config, dict):
        return False
    return config.get("loc_by_alias") is False or config.get("hide_input_in_errors") is True


def _core_of(
    adapter: TypeAdapter[Any],
) -> tuple[dict[str, Any], dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """`adapter`'s core schema, the schemas it defines by `ref`, and all its nodes: what a
    place is read through (`_Places`, `_Secrets`, `_Flags`), walked once."""
    core = cast(dict[str, Any], adapter.core_schema)
    nodes = list(schema_nodes(core))
    refs = {node["ref"]: node for node in nodes if isinstance(node.get("ref"), str)}
    return core, refs, nodes


_PASSED = (
    "schema",
    "json_schema",
    "python_schema",
    "lax_schema",
    "strict_schema",
)
"""Keys of a core schema node whose schema validates the same value: the error's place
has no part for them (`function-after`, `nullable`, `json-or-python`, a model's fields)."""


def _parts(node: dict[str, Any], loc: tuple[Any, ...], at: int) -> Iterator[tuple[Any, int]]:
    """The schemas that `loc[at:]` may go on into from a container's `node`, each with where
    the rest of the place starts."""
    kind, part = node.get("type"), loc[at]
    if kind in ("list", "set", "frozenset", "generator") and isinstance(part, int):
        yield node.get("items_schema"), at + 1
    elif kind == "tuple" and isinstance(part, int):
        items, variadic = node.get("items_schema", []), node.get("variadic_item_index")
        if variadic is None or part < variadic:
            yield from ((each, at + 1) for each in items[part : part + 1])
        else:  # the variadic item or one after it, as the value's length decides
            yield from ((each, at + 1) for each in items[variadic:])
    elif kind == "dict":
        if loc[at + 1 : at + 2] == ("[key]",):
            yield node.get("keys_schema"), at + 2
        else:
            yield node.get("values_schema"), at + 1
    elif kind in ("model-fields", "typed-dict", "dataclass-args"):
        named = [{**field, "name": name} for name, field in named_fields(node)]
        found = False
        for field in named:
            for key in _field_keys(field):
                if loc[at : at + len(key)] == key:
                    found = True
                    yield field.get("schema"), at + len(key)
        if not found and node.get("extras_schema") is not None:
            yield node["extras_schema"], at + 1


def _field_keys(field: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The places a field's errors are named by: its name, its validation alias, each path
    of an alias path."""
    keys: list[tuple[Any, ...]] = [(field.get("name"),)]
    alias = field.get("validation_alias")
    if isinstance(alias, str):
        keys.append((alias,))
    elif isinstance(alias, list):
        for path in alias:
            keys.append(tuple(path) if isinstance(path, list) else (path,))
    return keys


def _labels(choices: list[Any], refs: dict[str, dict[str, Any]]) -> list[Any]:
    """A union's members as its errors name them, where cheaply known: a label given, a
    model's or a dataclass's class name, a plain type's kind (`int`); `None` otherwise."""
    labels = []
    for choice in choices:
        if isinstance(choice, tuple):
            labels.append(choice[1])
            continue
        node = choice
        if node.get("type") == "definition-ref":
            node = refs.get(node.get("schema_ref", ""), {})
        kind = node.get("type")
        cls = node.get("cls") if kind in ("model", "dataclass") else None
        labels.append(cls.__name__ if isinstance(cls, type) else kind)
    return labels


_SECRET_CLASSES = (Secret, SecretStr, SecretBytes)
_SECRET_SERIALIZERS = tuple(
    each
    for each in (
        getattr(pydantic.types, "_serialize_secret", None),
        getattr(pydantic.types, "_serialize_secret_field", None),
    )
    if each is not None
)
"""pydantic's serializers of its secret types (private names: looked for, not relied on)."""


def _is_secret(node: dict[str, Any]) -> bool:
    """Whether a core schema node validates one of pydantic's secret types: it serializes
    as one, or its function makes one (`SecretStr` itself; `Secret[int]`'s lambda, which
    holds its class)."""
    serialization = node.get("serialization")
    if isinstance(serialization, dict) and any(
        serialization.get("function") is each for each in _SECRET_SERIALIZERS
    ):
        return True
    function = node.get("function")
    made = function.get("function") if isinstance(function, dict) else None
    if isinstance(made, type):
        return issubclass(made, _SECRET_CLASSES)
    cells = getattr(made, "__closure__", None) or ()
    for cell in cells:
        try:
            held = cell.cell_contents
        except ValueError:  # a cell not yet filled
            continue
        if isinstance(held, type) and issubclass(held, _SECRET_CLASSES):
            return True
    return False


_secrets: weakref.WeakKeyDictionary[TypeAdapter[Any], _Secrets | None] = weakref.WeakKeyDictionary()


def _secrets_of(adapter: TypeAdapter[Any]) -> _Secrets | None:
    """Where `adapter`'s type holds secrets; `None` where it holds none. Worked out once per
    type (the adapter is cached with it), on its first failure: a type's reading that
    succeeds never walks its schema for this."""
    try:
        return _secrets[adapter]
    except KeyError:
        pass
    core, refs, nodes = _core_of(adapter)
    secrets = _secrets[adapter] = _Secrets(core, refs) if any(map(_is_secret, nodes)) else None
    return secrets


_flags: weakref.WeakKeyDictionary[TypeAdapter[Any], _Flags | None] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, slots=True)
class _Flags:
    """A type's core schema that holds a flag (`enum.Flag`) whose schema lists other than
    its members (`flag_expected`), with the schemas it defines by `ref` and what each
    flag's schema lists."""

    core: dict[str, Any]
    refs: dict[str, dict[str, Any]]
    listed: dict[type[enum.Flag], str]


def _flag_listed(adapter: TypeAdapter[Any], loc: tuple[Any, ...]) -> str | None:
    """What the schema lists of the flag at the place pydantic names `loc`, in a failure's
    words (the first found, where a union's readings of `loc` reach more than one); `None`
    where no flag is there. A type's flags are found once, on its first enum error."""
    try:
        flags = _flags[adapter]
    except KeyError:
        core, refs, nodes = _core_of(adapter)
        listed: dict[type[enum.Flag], str] = {}
        for node in nodes:
            cls = node.get("cls")
            if node.get("type") == "enum" and isinstance(cls, type) and issubclass(cls, enum.Flag):
                said = flag_expected(cls)
                if said is not None:
                    listed[cls] = said
        flags = _flags[adapter] = _Flags(core, refs, listed) if listed else None
    if flags is None:
        return None
    for cls, said in flags.listed.items():

        def is_it(node: dict[str, Any], cls: type[enum.Flag] = cls) -> bool:
            return node.get("type") == "enum" and node.get("cls") is cls

        if _Secrets(flags.core, flags.refs, is_it).holds(loc):
            return said
    return None


def _overflows(value: Any) -> bool:
    """Whether a JSON value holds a number no float holds: one read as infinite, or an
    integer past the largest float."""
    stack = [value]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is float:
            if node in (_INFINITY, -_INFINITY):
                return True
        elif kind is int:
            if not -_LARGEST <= node <= _LARGEST:
                return True
        elif kind is dict:
            stack.extend(node.values())
        elif kind is list:
            stack.extend(node)
    return False


_INFINITY = float("inf")
_LARGEST = int(sys.float_info.max)


class _Halves:
    """Whether a reading of an output met half of a character (a lone surrogate), read as
    U+FFFD: the answer is then told `lone_surrogates`."""

    __slots__ = ("met",)

    def __init__(self) -> None:
        self.met = False


def check(
    raw: str,
    adapter: TypeAdapter[Any],
    schema: dict[str, Any] | None,
    reject_undeclared: bool,
) -> Any | Failure:
    """The value in `raw`, or why there is none (`check_answer`'s, without whether the text
    held half of a character)."""
    return check_answer(raw, adapter, schema, reject_undeclared)[0]


def check_answer(
    raw: str,
    adapter: TypeAdapter[Any],
    schema: dict[str, Any] | None,
    reject_undeclared: bool,
) -> tuple[Any | Failure, bool]:
    """The value in `raw`, or why there is none, and whether the text held half of a
    character (a lone surrogate, which JSON may escape, `\\ud83d`), read as U+FFFD: the
    answer that holds it is told so (`lone_surrogates`), as a body holding one is.

    Stand-in `null`s are removed first (against `schema`), then undeclared keys are looked
    for (when asked), then the value is validated strictly, as JSON: `"31"` is not an int.
    Where the type's plan can tell that none of that changes anything, the text is
    validated once, directly (`OutputPlan.validate_once`). A `Decimal` gets the number
    written, not the float nearest it, nor a refusal where it is too large for a float
    (`_decimals`).
    """
    halves = _Halves()
    value = _checked(raw, adapter, schema, reject_undeclared, halves)
    return value, halves.met


def _checked(
    raw: str,
    adapter: TypeAdapter[Any],
    schema: dict[str, Any] | None,
    reject_undeclared: bool,
    halves: _Halves,
) -> Any | Failure:
    """`check_answer`'s value, `halves` told of half of a character met."""
    plan = None if schema is None else output_plan(adapter, schema)
    value = _check(raw, adapter, schema, reject_undeclared, plan, halves)
    if plan is None or not plan.decimals:
        return value
    lossy = lossy_numbers(raw)
    if not lossy:
        return value
    if not plan.generators:
        return _as_decimals(
            raw,
            value,
            lossy,
            lambda text: _check(text, adapter, schema, reject_undeclared, plan, halves),
        )
    # An `Iterable`'s items are not in the type's value (its iterator reads them as it is
    # iterated): the readings are compared whole, each `Iterable` a list (`_read_whole`),
    # and the value is the type's own reading of the text chosen, its iterators over the
    # numbers as written.
    read: list[tuple[Any, str]] = []

    def read_whole(text: str) -> Any:
        whole = _check(text, adapter, schema, reject_undeclared, plan, halves, whole=True)
        read.append((whole, text))
        return whole

    first = value if isinstance(value, Failure) else read_whole(raw)
    chosen = _as_decimals(raw, first, lossy, read_whole)
    if chosen is first or isinstance(chosen, Failure):
        return value if chosen is first else chosen
    for whole, text in read:
        if whole is chosen:
            return _check(text, adapter, schema, reject_undeclared, plan, halves)
    return value  # not reached: the reading chosen is one of the texts read


def _as_decimals(
    raw: str, value: Any, lossy: list[tuple[int, int]], read: Callable[[str], Any]
) -> Any:
    """`value`, read from `raw`, or a reading of `raw` with the numbers at `lossy` written as
    numerals where they go to `Decimal`s (`read` reads a text)."""
    huge = too_large(raw, lossy) if isinstance(value, Failure) else []
    if not huge:
        return _exact_decimals(raw, value, lossy, read)
    # Refused as too large for a float: read as numerals where each is a `Decimal` (a value
    # the same but for its `Decimal`s as with the largest float there), or breaks a bound.
    written = quoted(raw, huge)
    numerals = read(written)
    if isinstance(numerals, Failure):
        if not numerals.bounds:
            return value
    else:
        try:
            if not same_but_decimals(read(stood_in(raw, huge)), numerals):
                return value
        except Exception:  # a type's own `__eq__`: the refusal stands
            return value
    exact = _exact_decimals(written, numerals, lossy_numbers(written), read)
    return _as_written(exact, raw, huge) if isinstance(exact, Failure) else exact


def _exact_decimals(
    raw: str, value: Any, lossy: list[tuple[int, int]], read: Callable[[str], Any]
) -> Any:
    """`value`, read from `raw`, or the reading with the numbers at `lossy` (each one a
    float does not hold) written as numerals where they go to `Decimal`s."""
    failed = isinstance(value, Failure)
    if not lossy or (failed and not value.bounds):
        return value

    def read_as_numerals(spans: list[tuple[int, int]]) -> Any:
        """The reading with the numbers at `spans` as written: a value, a `Failure` where
        one of them breaks a bound (the written number's, which its float may not break),
        or `None` where one goes elsewhere than a `Decimal` (a float, a union's string).
        After a first reading that failed on a bound, any value read is the one."""
        again = read(quoted(raw, spans))
        if isinstance(again, Failure):
            return _as_written(again, raw, spans) if again.bounds else None
        if failed:
            return again
        try:
            return again if only_decimals_differ(value, again) else None
        except Exception:  # a type's own `__eq__`: the first reading stands
            return None

    exact = read_as_numerals(lossy)
    if exact is not None or len(lossy) > MOST_TRIED:
        return value if exact is None else exact
    # Some go to floats: each of the others on its own. One that reads, or breaks a bound
    # alone (its own, or, after a failed first reading, another's float still unread),
    # goes to a `Decimal`; the numbers so found are read as written together.
    kept = [span for span in lossy if read_as_numerals([span]) is not None]
    exact = read_as_numerals(kept) if kept else None
    return value if exact is None else exact


_BOUNDS = frozenset(
    {
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
        "multiple_of",
        "finite_number",
        "decimal_max_digits",
        "decimal_max_places",
        "decimal_whole_digits",
    }
)
"""Kinds of failure a number's value decides, not its type: where a `Decimal` is read from
the float nearest the number written, the written number decides them."""


def _as_written(failure: Failure, raw: str, spans: list[tuple[int, int]]) -> Failure:
    """`failure` of a reading with numbers written as strings, saying them as the numbers
    the output wrote (the model reads it on a retry)."""
    message = failure.message
    for start, end in spans:
        number = raw[start:end]
        message = message.replace(f'string "{number}"', f"number `{number}`")
    return replace(failure, message=message)


def _check(
    raw: str,
    adapter: TypeAdapter[Any],
    schema: dict[str, Any] | None,
    reject_undeclared: bool,
    plan: OutputPlan | None,
    halves: _Halves,
    whole: bool = False,
) -> Any | Failure:
    """`check`'s reading of `raw`; where `whole`, the value with every `Iterable` a list of
    its items (`_read_whole`), for a type that holds one. Half of a character in `raw` is
    read as U+FFFD (the value is validated from its JSON written again), `halves` told."""
    if plan is not None:
        once = plan.validate_once(raw, adapter, reject_undeclared)
        if once is not CAREFUL:
            return once
    try:
        value, held = read(raw)  # read strictly, each half of a character U+FFFD
    except NotJsonError as error:
        if error.number is not None:
            return _too_large(raw, error, adapter, schema, reject_undeclared, plan, halves)
        return _not_json(error, adapter)
    except ValueError as error:  # a `JSONDecodeError`, or a number too long to convert
        return Failure(message=str(error), path=None, invalid_json=True)
    except RecursionError:
        return Failure(message="the JSON value nests too deep", path=None, invalid_json=True)
    # Half of a character, read as U+FFFD in the value, is in `raw` as pydantic refuses it:
    # the value is validated from its JSON written again.
    halves.met = halves.met or held
    text = json.dumps(value) if held else raw
    if schema is not None:
        # Without a `null` in the text, or a property a stand-in could fill, there is
        # nothing to normalise: skip the walk.
        nulls = plan is not None and plan.nulls and "null" in raw
        normalized = normalize_strict_nulls(value, schema) if nulls else value
        if reject_undeclared:
            undeclared = find_undeclared_key(normalized, schema)
            if undeclared is not None:
                return _undeclared(undeclared, normalized, adapter)
        if normalized is not value:
            text = json.dumps(normalized)
    written = normalized if schema is not None else value
    try:
        validated = validate_strict_json(adapter, text)
        listed = _read_whole(adapter, text) if plan is None or plan.generators else None
    except ValidationError as error:
        return from_validation_error(error, written, adapter)
    # What the keys and floats are counted in: the value, or where the type holds an
    # `Iterable`, its whole reading (the value's iterators hold their items unread).
    seen = validated if listed is None else listed[0]
    kept = kept_keys(seen)
    if kept != NOT_FINITE and not keys_all_kept(text, kept) and kept < kept_keys(written):
        # Fewer keys kept than written (no key was written twice: `read` says so): a key
        # the type ignores, or two keys it reads as one, whose values one would drop. Only
        # keys the text wrote are counted (a default's are not), and pydantic gives no map
        # more keys than its object wrote: a map that lost one shows in the totals, however
        # many the others hold. The walk then compares map by map.
        core = adapter.core_schema if listed is None else listed[1]
        merged = merged_keys(core, seen, written)
        if merged is not None:
            return _keys_read_as_one(merged, adapter)
    if kept == NOT_FINITE and _overflows(value):
        # A number too large for a float (`1e400`, a long integer), in a float field, reads
        # as infinity. One the output does not hold is the type's own: a default of
        # `float("inf")`, a validator's. It is valid JSON (RFC 8259 sets numbers no limit):
        # the type's range is what it breaks, a mismatch at its place (`path`, said once).
        path = _non_finite_path(seen)
        return Failure("a number is too large for a floating point value", path)
    return seen if whole else validated


def _read_whole(adapter: TypeAdapter[Any], text: str) -> tuple[Any, Any] | None:
    """`text` read by `adapter`'s type with every `Iterable` (pydantic's `generator`) read
    as a list of its items, with the core schema that reads it so (`_whole_reader`); `None`
    where the type holds no `Iterable`. The type's own validation leaves an `Iterable`'s
    items to the caller's iteration, where one that does not fit would raise after the
    answer was taken: raises the `ValidationError` of the first that does not fit. The
    value the caller gets is the type's own, its iterator as lazy as ever (over items now
    known to fit)."""
    reader = _whole_reader(adapter)
    return None if reader is None else reader.read(text)


class _WholeReader:
    """A type's reader with every `Iterable` read as a list of its items. `core_schema` is
    the type's core schema so listed (what `validate_strict_json` and the walk of merged
    keys read); the validator is built of a copy of it whose models and dataclasses are
    made by functions of allama's, not by their classes' own validators (`_Lister`)."""

    def __init__(self, listed: CoreSchema, built: CoreSchema) -> None:
        self.core_schema = listed
        self.validator = SchemaValidator(built)

    def validate_json(self, text: str, strict: bool | None = None) -> Any:
        return self.validator.validate_json(text, strict=strict)

    def read(self, text: str) -> tuple[Any, Any] | None:
        """The whole reading of `text` and its core schema; `None` where the caller's code
        raised on an item (it raises as the caller iterates, as before)."""
        try:
            return validate_strict_json(cast(TypeAdapter[Any], self), text), self.core_schema
        except ValidationError:
            raise
        except Exception:
            return None


_whole: weakref.WeakKeyDictionary[TypeAdapter[Any], _WholeReader | None] = (
    weakref.WeakKeyDictionary()
)


def ready_to_read(adapter: TypeAdapter[Any], schema: dict[str, Any]) -> None:
    """Make, before anything is sent, the whole reader of a type that holds an `Iterable`
    (`_whole_reader`): a type whose items cannot be checked is refused (`TypeError`) before
    an answer is paid for, not when it is read."""
    if output_plan(adapter, schema).generators:
        _whole_reader(adapter)


def _whole_reader(adapter: TypeAdapter[Any]) -> _WholeReader | None:
    """The reader of `adapter`'s type with its `Iterable`s read whole; `None` where it holds
    none. Made once per type (the adapter is cached with it), on its first output that
    validates. Where the reader cannot be built, a `TypeError`: the answer's items would
    go unchecked, to fail in the caller's code (`list[...]` in place of the `Iterable` is
    read whole by pydantic itself)."""
    try:
        return _whole[adapter]
    except KeyError:
        pass
    core = adapter.core_schema
    lister = _Lister(core)
    listed, built, lazy = lister.copy(core)
    reader: _WholeReader | None = None
    if lazy:
        try:
            lister.own_inits(built)
            reader = _WholeReader(cast(CoreSchema, listed), cast(CoreSchema, built))
        except Exception as error:
            raise TypeError(
                f"allama cannot check the items of an `Iterable` in {_type_name(adapter)} when "
                f"the answer is read ({type(error).__name__}: {error}); use a `list` in its "
                "place"
            ) from error
    _whole[adapter] = reader
    return reader


def _type_name(adapter: TypeAdapter[Any]) -> str:
    core = cast(dict[str, Any], adapter.core_schema)
    cls = core.get("cls")
    return f"`{cls.__name__}`" if isinstance(cls, type) else "the type"


class _Lister:
    """Copies a core schema with every `generator` node a `list` of the same items and
    bounds: one copy as it is (`listed`), and one to build a validator of (`built`), where a
    complete model or pydantic dataclass under which there is a `generator` is made by
    allama's function (`_MadeModel`, `_MadeDataclass`) of what a stand-in class of allama's
    holds: pydantic-core would take the caller's class's own validator, which reads its
    `Iterable`s lazily. The caller's classes are not subclassed (a subclass would run their
    `__init_subclass__` and show in their `__subclasses__()`), nor changed. The caller's
    functions are kept: they run on the items as iterating would, and the caller's
    validators and `model_post_init` run in this check as well as in the type's own reading
    (twice for each answer, as before)."""

    def __init__(self, core: Any) -> None:
        self.lazy = _lazy_refs(core)
        self.inits: list[_Inited] = []

    def copy(self, node: Any) -> tuple[Any, Any, bool]:
        """The two copies of `node`, and whether a `generator` is under it (here, or in a
        definition it refers to); `node` itself for both where none is."""
        if isinstance(node, list | tuple):
            copies = [self.copy(each) for each in node]
            if not any(lazy for _, _, lazy in copies):
                return node, node, False
            firsts = [each for each, _, _ in copies]
            seconds = [each for _, each, _ in copies]
            if isinstance(node, tuple):
                return tuple(firsts), tuple(seconds), True
            return firsts, seconds, True
        if not isinstance(node, dict):
            return node, node, False
        kind = node.get("type")
        if kind == "generator":
            bounds = {key: node[key] for key in ("min_length", "max_length", "ref") if key in node}
            items, built_items, _ = self.copy(node.get("items_schema", {"type": "any"}))
            return (
                {"type": "list", "items_schema": items, **bounds},
                {"type": "list", "items_schema": built_items, **bounds},
                True,
            )
        if kind == "definition-ref":
            return node, node, node.get("schema_ref") in self.lazy
        beside = BESIDE if isinstance(kind, str) else frozenset()  # fields by name: all copied
        listed: dict[str, Any] = {}
        built: dict[str, Any] = {}
        lazy = node.get("ref") in self.lazy
        for key, value in node.items():
            if key in beside:
                listed[key] = built[key] = value
            else:
                listed[key], built[key], under = self.copy(value)
                lazy = lazy or under
        if not lazy:
            return node, node, False
        cls = node.get("cls")
        # A complete class's own validator would be taken for its node.
        if kind in ("model", "dataclass") and _complete(cls):
            built = self._made(kind, cls, built)
        return listed, built, True

    def _made(self, kind: str, cls: type[Any], node: dict[str, Any]) -> dict[str, Any]:
        """In place of a model's or a dataclass's `node`: the node with allama's stand-in
        class, whose instance a function makes the caller's class's (under the node's
        `ref`)."""
        ref = node.get("ref")
        inner = {key: value for key, value in node.items() if key != "ref"}
        made: Any
        if kind == "dataclass":
            inner.update(cls=_HeldDataclass, slots=False)
            make: Any = _MadeDataclass(cls, bool(node.get("slots")), bool(node.get("post_init")))
            made = no_info_after_validator_function(make, cast(CoreSchema, inner))
        else:
            post_init = inner.pop("post_init", None)
            inner.update(cls=_HeldModel, custom_init=False)
            make = _MadeModel(cls, post_init, bool(node.get("root_model")))
            made = no_info_after_validator_function(make, cast(CoreSchema, inner))
            if node.get("custom_init"):
                # Its `__init__` is the caller's: run as pydantic runs it, on an object
                # written, with this model's fields read as `inner` reads them.
                own = {**inner, "post_init": post_init} if post_init else inner
                inited = _Inited(cls, own)
                self.inits.append(inited)
                made = no_info_wrap_validator_function(inited, cast(CoreSchema, made))
        if ref is not None:
            made["ref"] = ref
        return cast(dict[str, Any], made)

    def own_inits(self, built: Any) -> None:
        """Build the validator each `_Inited` hands the caller's `__init__`, with the
        definitions of the whole copy (its fields may refer to them)."""
        definitions = built.get("definitions", []) if built.get("type") == "definitions" else []
        for inited in self.inits:
            schema = {"type": "definitions", "schema": inited.node, "definitions": definitions}
            inited.validator = SchemaValidator(cast(CoreSchema, schema))


class _HeldModel:
    """What pydantic-core makes in place of a model's instance in the whole reading: the
    attributes it sets on one, for `_MadeModel` to give the caller's class's."""

    __slots__ = (
        "__dict__",
        "__pydantic_extra__",
        "__pydantic_fields_set__",
        "__pydantic_private__",
    )
    __pydantic_extra__: dict[str, Any] | None
    __pydantic_fields_set__: set[str]


class _HeldDataclass:
    """What pydantic-core makes in place of a pydantic dataclass's instance: its fields, and
    the arguments it would call `__post_init__` with."""

    __slots__ = ("__dict__", "args")
    args: tuple[Any, ...]

    def __post_init__(self, *args: Any) -> None:
        self.args = args


@dataclass(frozen=True, slots=True)
class _MadeModel:
    """Makes the caller's model of a `_HeldModel`, as pydantic-core makes one: its fields,
    extras and fields set given, then `model_post_init` where the class has one."""

    cls: type[Any]
    post_init: str | None
    root: bool

    def __call__(self, held: _HeldModel) -> Any:
        made = _bare(self.cls)
        object.__setattr__(made, "__dict__", held.__dict__)
        if not self.root:  # a root model has no extras nor private slot of its own
            object.__setattr__(made, "__pydantic_extra__", held.__pydantic_extra__)
            object.__setattr__(made, "__pydantic_private__", None)
        object.__setattr__(made, "__pydantic_fields_set__", held.__pydantic_fields_set__)
        if self.post_init:
            getattr(made, self.post_init)(None)
        return made


@dataclass(frozen=True, slots=True)
class _MadeDataclass:
    """Makes the caller's pydantic dataclass of a `_HeldDataclass`, as pydantic-core does."""

    cls: type[Any]
    slots: bool
    post_init: bool

    def __call__(self, held: _HeldDataclass) -> Any:
        made = _bare(self.cls)
        if self.slots:
            for name, value in held.__dict__.items():
                object.__setattr__(made, name, value)
        else:
            object.__setattr__(made, "__dict__", held.__dict__)
        if self.post_init:
            made.__post_init__(*getattr(held, "args", ()))
        return made


class _Inited:
    """A model whose `__init__` is the caller's, read as pydantic reads it from an object:
    `cls(**object)`. The instance's validator (which pydantic's `__init__` validates with)
    is, on that one instance, the whole reading's of its fields (`node`, built last)."""

    def __init__(self, cls: type[Any], node: dict[str, Any]) -> None:
        self.cls = cls
        self.node = node
        self.validator: SchemaValidator | None = None

    def __call__(self, value: Any, handler: Callable[[Any], Any]) -> Any:
        if not isinstance(value, dict) or self.validator is None:
            return handler(value)  # not an object: refused as the model refuses it
        made = _bare(self.cls)
        object.__setattr__(made, "__dict__", {"__pydantic_validator__": self.validator})
        init: Any = self.cls.__init__
        init(made, **value)
        return made


def _bare(cls: type[Any]) -> Any:
    """An instance of `cls` made as pydantic-core makes one: by its `__new__` alone."""
    new: Any = cls.__new__
    return new(cls)


def _complete(cls: Any) -> TypeGuard[type[Any]]:
    """Whether `cls` is a class pydantic-core would take the validator of (a complete model or
    pydantic dataclass's own, where a node names it)."""
    return isinstance(cls, type) and bool(cls.__dict__.get("__pydantic_complete__"))


def _lazy_refs(core: Any) -> set[str]:
    """The definitions (by `ref`) under which a `generator` is, or under a definition they
    refer to."""

    direct: dict[str, tuple[bool, set[str]]] = {}
    for node in schema_nodes(core):
        ref = node.get("ref")
        if isinstance(ref, str):
            under = list(schema_nodes(node))
            refs = {
                each["schema_ref"]
                for each in under
                if each["type"] == "definition-ref" and isinstance(each.get("schema_ref"), str)
            }
            generator = any(each["type"] == "generator" for each in under)
            direct[ref] = (generator, refs)
    lazy = {ref for ref, (generator, _) in direct.items() if generator}
    grew = True
    while grew:
        grew = False
        for ref, (_, refs) in direct.items():
            if ref not in lazy and refs & lazy:
                lazy.add(ref)
                grew = True
    return lazy


def _keys_read_as_one(merged: Merged, adapter: TypeAdapter[Any]) -> Failure:
    """The failure of an object two of whose keys the type reads as one key: refused as a
    key written twice is (the model's answer lost a value either way), naming both where
    the map's keys can be read on their own, and are not typed secret. The JSON itself is
    valid (its keys differ): a mismatch with the type at the map's place, said so on a
    retry."""
    secrets = _secrets_of(adapter)
    first = next(iter(merged.written), "")
    hidden = frozenset() if secrets is None else secrets.hidden((*merged.path, first), False)
    path = _spelled(merged.path, hidden)
    where = f" at `{path}`" if path else ""
    pair = None if len(merged.path) in hidden else _same_key(merged)
    keys = "two keys" if pair is None else f"the keys `{pair[0]}` and `{pair[1]}`"
    return Failure(f"{keys} are the same key to the type in the object{where}", path or None)


def _not_json(error: NotJsonError, adapter: TypeAdapter[Any]) -> Failure:
    """The failure of an output that is not strict JSON: the reader's message, or where the
    type places a key it names in a map typed secret (or a key in a secret value), made
    again without it."""
    secrets = _secrets_of(adapter)
    if secrets is None:  # the usual type: the message stands
        return Failure(message=str(error), path=error.path, invalid_json=True)
    parts = error.parts if error.key is None else (*error.parts, error.key)
    hidden = secrets.hidden(parts, labels=False)
    said = error.said
    if error.key is not None and len(parts) - 1 in hidden:
        said = "a secret key appears twice in the object"
    path = _spelled(error.parts, hidden) or None
    message = f"{said} at `{path}`" if path else said
    return Failure(message=message, path=path, invalid_json=True)


def _too_large(
    raw: str,
    error: NotJsonError,
    adapter: TypeAdapter[Any],
    schema: dict[str, Any] | None,
    reject_undeclared: bool,
    plan: OutputPlan | None,
    halves: _Halves,
) -> Failure:
    """The failure of a number written too large for a float (`1e400`, `error.number`).

    It is valid JSON (RFC 8259 sets numbers no limit): what it breaks is the type at its
    place, a mismatch the model is told of there, not a text to write again as JSON. The
    text is read once more with floats near the largest in place of such numbers
    (`stood_in`): where the type refuses that at the number's place (an `int`, a `str`, a
    bound), its refusal is the one, said of the number written (of its JSON type alone in
    a secret-typed field: `a secret floating point number`, expected an integer); where it
    takes it (a float), the number is past a float's range."""
    secrets = _secrets_of(adapter)
    hidden = frozenset() if secrets is None else secrets.hidden(error.parts, labels=False)
    secret = len(error.parts) in hidden
    places = _places_of(adapter)
    unquoted = places is not None and places.place(error.parts, None, labels=False)[1]
    path = _spelled(error.parts, hidden) or None
    huge = too_large(raw, lossy_numbers(raw))
    if huge:
        written = stood_in(raw, huge)
        again = _check(written, adapter, schema, reject_undeclared, plan, halves)
        if isinstance(again, Failure) and again.path == path:
            if secret or unquoted:
                return again  # its value said by its JSON type alone
            return replace(again, message=_said_as_written(again.message, written, error))
    if secret:
        return Failure("a secret number is too large for a floating point value", path)
    if unquoted:
        return Failure("a number is too large for a floating point value", path)
    return Failure(f"the number `{error.number}` is too large for a floating point value", path)


def _said_as_written(message: str, written: str, error: NotJsonError) -> str:
    """`message`, of a reading of `written` (the output with stand-ins for its numbers too
    large for a float), saying the number at `error`'s place as the output wrote it."""
    node: Any = json.loads(written)
    try:
        for part in error.parts:
            node = node[part]
    except (KeyError, IndexError, TypeError):  # a key written twice on the way: unsaid
        return message
    if type(node) is not float:
        return message
    stand_in = repr(node)
    message = message.replace(f"floating point `{stand_in}`", f"number `{error.number}`")
    return message.replace(stand_in, str(error.number))


def _undeclared(found: UndeclaredKey, written: Any, adapter: TypeAdapter[Any]) -> Failure:
    """The failure of an undeclared key: as the walk says it, or with the keys of maps
    typed secret on its way not quoted (nor the key, inside a secret value)."""
    secrets = _secrets_of(adapter)
    parts = None if secrets is None else _place_of(found.path, written)
    if secrets is None or not parts:
        return Failure(found.message, found.path, undeclared=True)
    hidden = secrets.hidden(parts, labels=False)
    message = found.message
    if len(parts) - 1 in hidden:
        message = message.replace(f"unknown field `{parts[-1]}`", "an unknown field", 1)
    return Failure(message, _spelled(parts, hidden) or None, undeclared=True)


def _place_of(path: str, value: Any) -> tuple[str | int, ...] | None:
    """The keys and indices of the JSON `value` that `format_path` spells `path` (a place a
    walk of it named), found by following only the steps that spell a start of it."""
    stack: list[tuple[tuple[str | int, ...], str, Any]] = [((), "", value)]
    while stack:
        parts, spelled, node = stack.pop()
        if parts and spelled == path:
            return parts
        steps: Any = node.items() if isinstance(node, dict) else ()
        if isinstance(node, list):
            steps = enumerate(node)
        for key, child in steps:
            step = f"[{key}]" if isinstance(key, int) else key_step(key)
            spelling = spelled + (step if spelled or step.startswith("[") else step[1:])
            if path.startswith(spelling):
                stack.append(((*parts, key), spelling, child))
    return None


def _non_finite_path(validated: Any) -> str | None:
    """Where in the value a float is not finite: a key of a secret type (`SecretStr`) is
    said `SECRET_KEY`, another that is no string as `str()` says it."""
    place = non_finite_place(validated)
    if place is None:
        return None
    hidden = frozenset(at for at, part in enumerate(place) if isinstance(part, _SECRET_CLASSES))
    parts = tuple(part if type(part) in (str, int) else str(part) for part in place)
    return _spelled(parts, hidden)


def _same_key(merged: Merged) -> tuple[str, str] | None:
    """The first two keys of the object that the map's key schema reads as one; `None`
    where that schema cannot be read on its own (it refers to a definition elsewhere)."""
    keys = merged.keys_schema or {"type": "any"}
    try:
        validator = SchemaValidator(dict_schema(keys_schema=cast(CoreSchema, keys)))
        seen: dict[Any, str] = {}
        for key in merged.written:
            read = next(iter(validator.validate_json(json.dumps({key: None}), strict=True)))
            if read in seen:
                return seen[read], key
            seen[read] = key
    except Exception:  # a schema of its own, a key it now refuses: the keys go unnamed
        return None
    return None
