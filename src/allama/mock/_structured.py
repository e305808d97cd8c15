"""A scripted value that answers in whichever form the extraction asks for."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Sequence
from enum import Enum
from typing import Any, cast

import pydantic_core
from pydantic import (
    AliasChoices,
    AliasPath,
    Base64Bytes,
    Base64UrlBytes,
    BaseModel,
    PydanticUserError,
    Secret,
    SecretBytes,
    SecretStr,
    TypeAdapter,
    ValidationError,
)
from pydantic.fields import FieldInfo

from allama.errors import InvalidRequestError
from allama.extract._choices import _BOOL_LABELS, ABSTAIN_LABEL, _literal_label
from allama.extract._decide import PROMPT_OPTION
from allama.extract._root import ROOT_OPTION
from allama.mock._builder import ChatResponseBuilder
from allama.mock._conform import SchemaContext, SchemaError, canonical, json_equal
from allama.types import ChatRequest, ChatResponse, Usage

__all__ = ["MockScriptError", "Structured", "plain_options", "unoffered_tool"]


class MockScriptError(AssertionError):
    """A scripted provider's script does not fit the call it got (a test's setup is wrong).

    An `AssertionError`, so that code under test that handles `allama.Error` or `ValueError`
    does not swallow it.
    """


class Structured:
    """A scripted answer holding a value, written in the form the request asks for.

    A test scripts the value the model returns and stays true whichever mode the
    extraction picks: the answer is one call to the forced tool (the tool `tool_choice`
    names, or the only tool under `required`) with the value as its arguments, and
    otherwise the value as JSON text (a `json_schema` response format, or no format at
    all). When the request carries the option `allama.extraction.root`, the extraction
    wrapped a non-object type in a one-property object, and the answer is wrapped the same
    way: `{"value": ...}`. A `tool_choice` naming a tool the request does not offer is
    refused (`InvalidRequestError`), as a provider refuses it; one among no tools at all
    is not sent, as a provider's adapter leaves it out, and the value is JSON text.

    A decision's answer is written as the option it stands for: `True` as `Yes` (or
    `true`, whichever the options hold), an enum member as its label, `None` as the
    abstention's label (`decide(..., allow_abstain=True)`), as plain text for a choice
    format and for a decision sent as a plain prompt (no format, no tool: the request
    option `allama.decision.options` lists its labels), and as a JSON string where the
    schema is the options' `enum`.

    The value is anything pydantic can write as JSON (a model instance, a dataclass, a
    dict, a list, a scalar), written as the model would write it for the type's schema:
    by the names validation reads, secrets (`SecretStr`, `SecretBytes`) as their values,
    `Json` fields as text; a value outside a model is written as the answered schema reads
    it (as text where it is `Json`, bytes and text encoded where it is base64, as
    `Base64Bytes` and `Base64Str` read them; in a union, as the first branch that holds it
    so written). A value whose JSON does not read back as itself (a serializer of its own
    format, an excluded field) is a `TypeError`: script its JSON with
    `MockProvider.with_text`. `usage` is reported with the answer, as the other scripted
    responses report it, and the answer names the request's model, as a provider's does
    (so a provider named `openai` prices it).

    >>> import allama
    >>> from allama.mock import MockProvider
    >>> from pydantic import BaseModel
    >>> class Person(BaseModel):
    ...     name: str
    >>> provider = MockProvider.with_structured(Person(name="Ada"))
    >>> allama.extract(provider, Person, allama.ChatRequest("m").user("Ada?")).value
    Person(name='Ada')
    """

    __slots__ = ("_plain", "_tree", "labels", "usage")

    def __init__(self, value: Any, *, usage: Usage | None = None) -> None:
        try:
            self._tree = _tree(value, "", {})
        except pydantic_core.PydanticSerializationError as error:
            raise TypeError(
                f"Structured: a {type(value).__name__} cannot be written as JSON ({error})"
            ) from None
        if usage is not None and not isinstance(usage, Usage):
            raise TypeError(f"Structured: `usage` must be a Usage, not {type(usage).__name__}")
        try:
            self._plain: str | None = self._text(None, None)
        except MockScriptError:  # bytes that only a base64 schema can take
            self._plain = None
        self.labels = _labels(value)
        """How a decision's options may write the value (`Yes` and `true` for `True`)."""
        self.usage = usage

    @property
    def json_text(self) -> str:
        """The value's JSON where the schema asks for no form of its own (bytes as UTF-8
        text): a `TypeError` for bytes that are not UTF-8, written only as base64."""
        if self._plain is None:
            raise TypeError(
                "Structured: the value holds bytes that are not UTF-8 text, which JSON holds "
                "only where the schema reads them as base64"
            )
        return self._plain

    def _text(self, schema: Any, root: Any) -> str:
        """The value's JSON as `schema` reads it (`root` holding the `$defs` it refers to)."""
        return _dumps(_data(self._tree, schema, root)).decode()

    def response_for(self, request: ChatRequest, *, call_id: str = "call_mock_1") -> ChatResponse:
        """The answer to `request`: a forced tool call, JSON text, or an option's label (a
        choice format's, or a decision's in a plain prompt), by the request's model, as a
        provider's answer names it (its usage is priced by it)."""
        builder = ChatResponseBuilder().model(request.model)
        tool = _forced_tool(request)
        options = plain_options(request, tool)
        if options is not None:
            builder.text(self._option(options))
            if self.usage is not None:
                builder.usage_value(self.usage)
            return builder.build()
        key = request.option_json(ROOT_OPTION)
        schema = root = _answered_schema(request, tool)
        if key is not None:
            if not isinstance(key, str) or not key:
                raise MockScriptError(
                    f"the request option `{ROOT_OPTION}` must be the key the value is wrapped "
                    f"in (a non-empty string), not {type(key).__name__}"
                )
            properties = schema.get("properties") if isinstance(schema, dict) else None
            schema = properties.get(key) if isinstance(properties, dict) else None
            payload = f"{{{json.dumps(key)}:{self._in_enum(self._text(schema, root), schema)}}}"
        else:
            payload = self._in_enum(self._text(schema, root), schema)
        if tool is None:
            builder.text(payload)
        else:
            builder.tool_call(call_id, tool, payload)
        if self.usage is not None:
            builder.usage_value(self.usage)
        return builder.build()

    def _option(self, options: Sequence[str]) -> str:
        """The option of a choice format the value stands for (else its first label, or
        its JSON: an answer outside the options, as a model may give)."""
        for label in self.labels:
            if label in options:
                return label
        return self.labels[0] if self.labels else self._text(None, None)

    def _in_enum(self, payload: str, schema: Any) -> str:
        """The value as the label its schema's `enum` lists, where the enum holds the
        label and not the value (a decision's `Literal["Yes", "No"]` for `False`)."""
        enum = schema.get("enum") if isinstance(schema, dict) else None
        if not self.labels or not isinstance(enum, list):
            return payload
        written = json.loads(payload)
        if any(json_equal(written, option) for option in enum):
            return payload
        for label in self.labels:
            if label in enum:
                return json.dumps(label, ensure_ascii=False)
        return payload

    def __repr__(self) -> str:
        if self._plain is None:
            return "Structured(json=<withheld>)"
        return f"Structured(json=<withheld {len(self._plain)} chars>)"


def plain_options(request: ChatRequest, tool: str | None) -> Sequence[str] | None:
    """The options a plain-text answer is one of: a choice format's, or a decision's sent
    as a plain prompt (marked `allama.decision.options`, with neither a format nor a tool),
    whose options are in the prompt alone; `None` for any other request, or where `tool`
    is the tool the answer calls."""
    if tool is not None:
        return None
    response_format = request.response_format
    if response_format is not None and response_format.options is not None:
        return response_format.options
    labels = request.option_json(PROMPT_OPTION)
    if labels is None or request.tools:
        return None
    if response_format is not None and response_format.type != "text":
        return None
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise MockScriptError(
            f"the request option `{PROMPT_OPTION}` must be the decision's labels (a list "
            f"of strings), not {type(labels).__name__}"
        )
    return cast("list[str]", labels)


def _labels(value: Any) -> tuple[str, ...]:
    """The labels a decision writes for `value`: `Yes`/`No` (`bool`) or `true`/`false`
    (`Literal[True, False]`) for a bool, a member's label, a literal as written, the
    abstention's for `None`."""
    if isinstance(value, bool):
        return (dict(_BOOL_LABELS)[value], _literal_label(value))
    if isinstance(value, Enum | str | int):
        # A member with no label of its own (`Flag(0)`'s name is `None`) has none: it is
        # written as its JSON, which no option is.
        label: object = _literal_label(value)
        return (label,) if isinstance(label, str) else ()
    if value is None:  # a decision that abstains, as its options write it
        return (ABSTAIN_LABEL,)
    return ()


def _answered_schema(request: ChatRequest, tool: str | None) -> Any:
    """The schema the answer is held to: the forced tool's parameters, or the response
    format's."""
    if tool is not None:
        for definition in request.tools:
            if definition.name == tool:
                return definition.parameters
        return None
    response_format = request.response_format
    return None if response_format is None else response_format.json_schema


def unoffered_tool(request: ChatRequest) -> str | None:
    """Why `request` cannot be answered, where its `tool_choice` names a tool it does not
    offer among those it gives (a provider answers 400); `None` where it names none, or one
    offered, or where it gives no tools (the choice is not sent, as a provider's adapter
    leaves it out: `Degradations.choice_without_tools`)."""
    choice = request.tool_choice
    if choice is None or choice.mode != "tool" or not request.tools:
        return None
    if all(tool.name != choice.name for tool in request.tools):
        return f"tool_choice names `{choice.name}`, which is not among the tools"
    return None


def _forced_tool(request: ChatRequest) -> str | None:
    """The tool the request forces a call to, if it forces one; a tool it does not offer
    is refused, as a provider refuses it (`InvalidRequestError`). A choice among no tools
    forces none: it is not sent."""
    unoffered = unoffered_tool(request)
    if unoffered is not None:
        raise InvalidRequestError(unoffered).mark_authored()
    choice = request.tool_choice
    if choice is None or choice.mode in ("auto", "none") or not request.tools:
        return None
    if choice.mode == "tool":
        return choice.name
    if len(request.tools) != 1:
        raise MockScriptError(
            f"a structured answer calls one tool; the request asks for a call under tool "
            f"choice `required` with {len(request.tools)} tools, so which one is unclear"
        )
    return request.tools[0].name


_SECRETS = (SecretStr, SecretBytes, Secret)
_PLAIN = (str, int, float, bool, type(None))


@dataclasses.dataclass(frozen=True, slots=True)
class _Written:
    """A part of the value written as JSON data by its own type (a model, a secret, a
    scalar): the schema may take it as text, but does not rewrite what is in it."""

    data: Any


_Tree = _Written | bytes | str | dict[str, Any] | list[Any]
"""The value as JSON data, but for the bytes and strings outside models, kept until the
schema says how it reads them (as text, or base64: `Base64Str` reads the base64 of it)."""


def _tree(value: Any, where: str, adapters: dict[type, TypeAdapter[Any] | None]) -> _Tree:
    """`value` as the model would write it, outside the schema: by the names validation
    reads (aliases, validation aliases, or field names where a `serialization_alias`
    differs), `Json` fields as text, secrets as their values, models inside lists and dicts
    too. A part whose JSON does not read back as itself (a model's serializer of its own
    format, a field excluded from its JSON, a scalar's type that writes what it does not
    read) is refused: no answer gives it."""
    if _is_model(value):
        return _Written(json.loads(_model_written(value)))
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if type(value) is str:
        return value
    if isinstance(value, dict):
        return {
            _key(key): _tree(item, f"{where}.{_key(key)}", adapters) for key, item in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [_tree(item, f"{where}[{index}]", adapters) for index, item in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        # Written `Infinity` or `NaN`, which is no JSON: no answer holds it (inside a model
        # pydantic writes `null`, refused on reading back).
        at = f" (at `{where.lstrip('.')}`)" if where else ""
        raise TypeError(
            f"Structured: a {type(value).__name__} written as JSON does not read back as "
            f"itself: JSON has no number {value!r}{at}; script its JSON text instead, with "
            "`MockProvider.with_text`"
        )
    data = (
        _secret_data(value)
        if isinstance(value, _SECRETS)
        else json.loads(pydantic_core.to_json(value, by_alias=True, round_trip=True))
    )
    if type(value) not in _PLAIN:
        _check_read_back(value, data, where, adapters)
    return _Written(data)


def _check_read_back(
    value: Any, data: Any, where: str, adapters: dict[type, TypeAdapter[Any] | None]
) -> None:
    """Refuses a value outside a model whose JSON its own type reads back (strictly, as
    extraction reads it) as another value, or not at all."""
    kind = type(value)
    if kind not in adapters:
        try:
            adapters[kind] = TypeAdapter(kind)
        except (PydanticUserError, TypeError):  # a type pydantic writes but cannot read
            adapters[kind] = None
    adapter = adapters[kind]
    if adapter is None:
        return
    at = f" (at `{where.lstrip('.')}`)" if where else ""
    try:
        read = adapter.validate_json(_dumps(data), strict=True)
    except ValidationError as error:
        cause = f"reading it back fails{at}: {_first_error(error)}"
    else:
        if _same(read, value):
            return
        cause = f"it reads back as another value{at}"
    raise TypeError(
        f"Structured: a {kind.__name__} written as JSON does not read back as itself: "
        f"{cause}; script its JSON text instead, with `MockProvider.with_text`"
    )


def _secret_data(secret: Any) -> Any:
    """A secret as JSON data: its value, which validation reads (pydantic writes a mask)."""
    return json.loads(pydantic_core.to_json(secret.get_secret_value(), round_trip=True))


def _data(tree: _Tree, schema: Any, root: Any) -> Any:
    """The value as JSON data that `schema` reads: text where the schema is `Json`'s (a
    string holding JSON), bytes and text as base64 where its format says so (bytes else as
    UTF-8 text). In a union, as the first branch that reads the value so written
    (`_branch_for`)."""
    schema = _resolved(schema, root)
    if isinstance(schema, dict) and _one_of(schema):
        null = isinstance(tree, _Written) and tree.data is None
        branches = [
            branch
            for branch in (_resolved(b, root) for b in _one_of(schema))
            if not (isinstance(branch, dict) and branch.get("type") == "null")
        ]
        if null:
            schema = None
        elif len(branches) == 1:
            schema = branches[0]
        else:
            schema = _branch_for(tree, branches, root)
    if not isinstance(schema, dict):
        schema = {}
    if _is_json_text(schema):
        return _dumps(_data(tree, schema.get("contentSchema"), root)).decode()
    if isinstance(tree, _Written):
        return tree.data
    if isinstance(tree, bytes):
        return _bytes_data(tree, schema.get("format"))
    if isinstance(tree, str):
        return _text_data(tree, schema.get("format"))
    if isinstance(tree, dict):
        properties = schema.get("properties")
        return {
            key: _data(item, _property(properties, schema, key), root) for key, item in tree.items()
        }
    items = schema.get("prefixItems")
    return [
        _data(
            item,
            items[index] if isinstance(items, list) and index < len(items) else schema.get("items"),
            root,
        )
        for index, item in enumerate(tree)
    ]


def _is_json_text(schema: dict[str, Any]) -> bool:
    """Whether `schema` is `Json`'s: a string holding JSON."""
    return schema.get("type") == "string" and schema.get("contentMediaType") == "application/json"


def _branch_for(tree: _Tree, branches: list[Any], root: Any) -> Any:
    """The first branch of a union whose schema holds the value as that branch writes it
    (bytes as base64 where its format says so, JSON as text where it is `Json`'s, with the
    JSON its `contentSchema` holds), as pydantic's union reads the first of the branches
    that take it; `None` (the value as it is) where none holds it (an answer the type
    refuses, as a test may script)."""
    written: list[tuple[Any, Any]] = []
    for branch in branches:
        try:
            data = _data(tree, branch, root)
        except MockScriptError:  # bytes this branch reads as text, and are not UTF-8
            continue
        written.append((branch, data))
    if len({canonical(data) for _, data in written}) <= 1 and len(written) == len(branches):
        return branches[0]  # written alike by each: no check needed
    checker = _checker(root)
    for branch, data in written:
        if checker is not None and _holds(checker, branch, data, root):
            return branch
    return None


def _checker(root: Any) -> SchemaContext | None:
    """A validator of the schemas under `root` (`None` where it cannot read them)."""
    try:
        return SchemaContext(root if isinstance(root, dict | bool) else {})
    except SchemaError:
        return None


def _holds(checker: SchemaContext, branch: Any, data: Any, root: Any) -> bool:
    """Whether `branch` holds `data`, and where it is `Json`'s, its `contentSchema` the
    JSON in the text (which a validator takes as a note)."""
    try:
        if not checker.is_valid(data, branch):
            return False
        if isinstance(branch, dict) and _is_json_text(branch) and isinstance(data, str):
            content = _resolved(branch.get("contentSchema"), root)
            return content is None or checker.is_valid(json.loads(data), content)
    except ValueError:  # a `$ref` to nothing (`SchemaError`), text not JSON: not this one
        return False
    return True


def _one_of(schema: dict[str, Any]) -> list[Any]:
    """The branches of a union schema (`anyOf`, `oneOf`, a lone `allOf`), else none."""
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            return branches
    branches = schema.get("allOf")
    return branches if isinstance(branches, list) and len(branches) == 1 else []


def _property(properties: Any, schema: dict[str, Any], key: str) -> Any:
    if isinstance(properties, dict) and key in properties:
        return properties[key]
    return schema.get("additionalProperties")


def _resolved(schema: Any, root: Any) -> Any:
    """`schema` with a `$ref` into the root's `$defs` (or `definitions`) followed."""
    for _ in range(32):  # a cycle of bare references reads as no schema
        ref = schema.get("$ref") if isinstance(schema, dict) else None
        if not isinstance(ref, str):
            return schema
        section, _, name = ref.removeprefix("#/").partition("/")
        defs = root.get(section) if isinstance(root, dict) else None
        schema = defs.get(name) if isinstance(defs, dict) and ref.startswith("#/") else None
    return None


@functools.cache
def _base64(kind: str) -> TypeAdapter[bytes]:
    return TypeAdapter(Base64UrlBytes if kind == "base64url" else Base64Bytes)


def _bytes_data(value: bytes, written_as: Any) -> Any:
    """Bytes as the schema's format reads them: base64 (as pydantic's `Base64Bytes` and
    `Base64UrlBytes` write it), else UTF-8 text, as pydantic reads bytes by default."""
    if written_as in ("base64", "base64url"):
        return _base64(written_as).dump_python(value, mode="json")
    try:
        return json.loads(pydantic_core.to_json(value))
    except pydantic_core.PydanticSerializationError:
        raise MockScriptError(
            f"the scripted value holds bytes that are not UTF-8 text, and the schema reads "
            f"those bytes as text (format {written_as!r}), not as base64: script text, or "
            f"extract a type that reads base64 (`Base64Bytes`)"
        ) from None


def _text_data(value: str, written_as: Any) -> str:
    """Text as the schema's format reads it: the base64 of its UTF-8 where the format is
    base64 (`Base64Str` and `Base64UrlStr` read the text that decodes to the value), else
    as it is."""
    if written_as in ("base64", "base64url"):
        encoded: str = _bytes_data(value.encode(), written_as)
        return encoded
    return value


def _is_model(value: Any) -> bool:
    return isinstance(value, BaseModel) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    )


def _holds_models(value: Any) -> bool:
    """Whether a list, tuple, set or dict holds a model or dataclass, at any depth."""
    if isinstance(value, dict):
        return any(_is_model(item) or _holds_models(item) for item in value.values())
    if isinstance(value, list | tuple | set | frozenset):
        return any(_is_model(item) or _holds_models(item) for item in value)
    return False


def _jsonable(value: Any) -> Any:
    """`value` as JSON data, each model in it written as its own type's validation reads it."""
    if _is_model(value):
        return json.loads(_model_written(value))
    if isinstance(value, dict):
        return {_key(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(item) for item in value]
    if isinstance(value, _SECRETS):
        return _secret_data(value)
    return json.loads(pydantic_core.to_json(value, by_alias=True, round_trip=True))


def _key(key: Any) -> str:
    """A dict key as pydantic writes it in JSON."""
    written = json.loads(pydantic_core.to_json(key, round_trip=True))
    return written if isinstance(written, str) else json.dumps(written)


def _dumps(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


def _model_written(value: Any) -> bytes:
    """A model's JSON that its type reads back as itself: by alias, by field name, or by
    the names validation reads (a `validation_alias` that serialization does not write)."""
    adapter: TypeAdapter[Any] = TypeAdapter(type(value))
    attempts = [
        _model_json(value, adapter, by_alias=True),
        _model_json(value, adapter, by_alias=False),
    ]
    by_names = _by_validation_names(value, adapter)
    if by_names is not None:
        attempts.append(by_names)
    cause: str | None = None
    for written in dict.fromkeys(attempts):
        try:
            read = adapter.validate_json(written, strict=True)  # as extraction reads it
        except ValidationError as error:
            cause = cause or f"reading it back fails: {_first_error(error)}"
            continue
        if _same(read, value):
            return written
        cause = cause or (
            "it reads back as another value (a field excluded from the JSON, or a "
            "serializer of its own format)"
        )
    raise TypeError(
        f"Structured: a {type(value).__name__} written as JSON does not read back as itself: "
        f"{cause}; script the model's JSON text instead, with `MockProvider.with_text`"
    )


def _model_json(value: Any, adapter: TypeAdapter[Any], *, by_alias: bool) -> bytes:
    """The model's JSON with its secrets written as their values: pydantic writes a mask,
    which reads back as another secret. A secret is found where the Python dump holds one."""
    written = pydantic_core.to_json(value, by_alias=by_alias, round_trip=True)
    try:
        python = adapter.dump_python(value, by_alias=by_alias, round_trip=True, warnings=False)
    except pydantic_core.PydanticSerializationError:
        return written
    if not _holds_secret(python):
        return written
    return _dumps(_unmasked(json.loads(written), python))


def _holds_secret(python: Any) -> bool:
    if isinstance(python, _SECRETS):
        return True
    if isinstance(python, dict):
        return any(_holds_secret(item) for item in python.values())
    if isinstance(python, list | tuple | set | frozenset):
        return any(_holds_secret(item) for item in python)
    return False


def _unmasked(data: Any, python: Any) -> Any:
    """`data` (JSON) with each secret the Python dump holds at the same place written as
    its value; where the two differ in shape (a serializer of its own), left as written."""
    if isinstance(python, _SECRETS):
        return _secret_data(python) if isinstance(data, str) else data
    if isinstance(python, dict) and isinstance(data, dict) and len(python) == len(data):
        return {
            key: _unmasked(item, own)
            for (key, item), own in zip(data.items(), python.values(), strict=True)
        }
    if (
        isinstance(python, list | tuple | set | frozenset)
        and isinstance(data, list)
        and len(python) == len(data)
    ):
        return [_unmasked(item, own) for item, own in zip(data, python, strict=True)]
    return data


def _first_error(error: ValidationError) -> str:
    first = error.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"at `{where}`: {first['msg']}" if where else str(first["msg"])


def _same(read: Any, value: Any) -> bool:
    """Equal, or for a dataclass without `==` of its own (`eq=False`), equal field by field."""
    if read == value:
        return True
    own_eq: Any = type(value).__eq__
    if type(read) is not type(value) or not dataclasses.is_dataclass(value):
        return False
    if own_eq is not object.__eq__:
        return False
    return all(
        _same(getattr(read, field.name), getattr(value, field.name))
        for field in dataclasses.fields(value)
    )


def _by_validation_names(value: Any, adapter: TypeAdapter[Any]) -> bytes | None:
    """The model's JSON with each field under the name validation reads; `None` where
    that name cannot be written (a model serialized as other than an object, say)."""
    fields = getattr(type(value), "__pydantic_fields__", None)
    if not isinstance(fields, dict):
        return None
    base = json.loads(_model_json(value, adapter, by_alias=False))
    if not isinstance(base, dict):
        return None
    out: dict[str, Any] = {}
    for name, info in fields.items():
        if name not in base:
            continue
        path = _read_path(name, info)
        if path is None:
            return None
        written = base.pop(name)
        item = getattr(value, name, None)
        data = _jsonable(item) if _is_model(item) or _holds_models(item) else written
        target = out
        for part in path[:-1]:
            nested = target.setdefault(part, {})
            if not isinstance(nested, dict):
                return None
            target = nested
        target[path[-1]] = data
    for key, item in base.items():  # computed fields and extras, as written
        out.setdefault(key, item)
    return _dumps(out)


def _read_path(name: str, info: FieldInfo) -> list[str] | None:
    """The keys validation reads a field under: its validation alias (the first of
    several), else its alias, else its name; `None` for a path through a list."""
    alias: Any = info.validation_alias
    if isinstance(alias, AliasChoices):
        alias = alias.choices[0] if alias.choices else None
    if isinstance(alias, AliasPath):
        path = alias.path
        return [str(part) for part in path] if all(isinstance(p, str) for p in path) else None
    if isinstance(alias, str):
        return [alias]
    return [info.alias or name]
