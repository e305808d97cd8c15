"""Undeclared keys and the mode choice held to seed 000 where an audit found them apart.

- Under a union, a key is undeclared when no branch that *may apply* declares it: a branch
  the object's tag rules out (a discriminator's `mapping`, a pinned `const`/`enum`) does not.
- A key written under an alias is not in the schema: rejected (and retried), whichever
  reading (one parse, or the careful walk) decides.
- The `{"value": ...}` wrapper of a root that is not an object takes part in the rule like
  any object: a key beside `value` is an undeclared key, allowed with the rest.
- With no mode to pick, the request's tools are not the error: clearing them would not help.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, TypeAdapter

import allama
from allama import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ExtractionMode,
    Extractor,
    ModeUnsupportedError,
    ParseError,
    RequestField,
    ToolDefinition,
    Warning,
)
from allama.extract._output import output_plan
from allama.extract._root import wrapped_schema
from allama.mock import ChatResponseBuilder, MockProvider
from allama.schema._nulls import _properties, normalize_strict_nulls
from allama.schema._types import type_schema
from allama.schema._undeclared import (
    UndeclaredKey,
    UndeclaredKeys,
    _candidates,
    _is_open,
    find_undeclared_key,
    format_path,
    may_ignore_undeclared_keys,
)
from allama.types import ChatResponse, ToolMessage

NATIVE = ChatRequest("m").user("Call Ada").with_option(ExtractionMode.NATIVE)
FORCED = ChatRequest("m").user("items").with_option(ExtractionMode.FORCED_TOOL)


def approximate(text: str) -> ChatResponse:
    """A pass the adapter reported approximating: its output is checked for undeclared keys."""
    warning = Warning.approximated(RequestField.RESPONSE_FORMAT, "`pattern` was removed")
    return ChatResponseBuilder().text(text).warning(warning).build()


# ----- 1. a branch the tag rules out declares nothing for the object


class Email(BaseModel):
    kind: Literal["email"]
    address: str | None = None
    tags: list[str] = []


class Phone(BaseModel):
    kind: Literal["phone"]
    number: str | None = None
    tags: list[str] | None = None


class Lead(BaseModel):
    reach: Annotated[Email | Phone, Field(discriminator="kind")]


class Untagged(BaseModel):
    reach: Email | Phone


LEAD = type_schema(Lead).schema


def test_a_key_only_a_branch_the_tag_rules_out_declares_is_rejected_and_retried() -> None:
    wrong = '{"reach": {"kind": "phone", "address": "555-0100"}}'
    right = '{"reach": {"kind": "phone", "number": "555-0100"}}'
    provider = MockProvider([approximate(wrong), approximate(right)])
    extracted = Extractor(retries=1).extract(provider, Lead, NATIVE)
    assert extracted.value == Lead(reach=Phone(kind="phone", number="555-0100"))
    assert (extracted.metadata.passes, extracted.metadata.undeclared_key_rejections) == (2, 1)

    with pytest.raises(ParseError) as caught:
        Extractor().extract(MockProvider([approximate(wrong)]), Lead, NATIVE)
    assert caught.value.path == "reach.address"
    assert (
        caught.value.detail == "unknown field `address`, expected one of `kind`, `number`, `tags`"
    )
    assert caught.value.metadata.undeclared_key_rejections == 1


@pytest.mark.parametrize("tp", [Lead, Untagged])
def test_the_walk_reads_the_tag_of_a_union_with_or_without_a_discriminator(tp: type) -> None:
    schema = type_schema(tp).schema
    found = find_undeclared_key({"reach": {"kind": "phone", "address": "x"}}, schema)
    assert found == UndeclaredKey(
        path="reach.address",
        message="unknown field `address`, expected one of `kind`, `number`, `tags`",
    )
    assert find_undeclared_key({"reach": {"kind": "email", "address": "x"}}, schema) is None
    found = find_undeclared_key({"reach": {"kind": "email", "number": "x"}}, schema)
    assert found is not None and found.path == "reach.number"


def test_where_the_tag_rules_out_every_branch_every_branch_is_checked() -> None:
    # No branch can be picked (validation then fails on the tag): a key some branch
    # declares passes the walk, one none declares does not.
    assert find_undeclared_key({"reach": {"kind": "fax", "number": "x"}}, LEAD) is None
    assert find_undeclared_key({"reach": {"number": "x", "address": "y"}}, LEAD) is None
    found = find_undeclared_key({"reach": {"kind": "fax", "numbr": "x"}}, LEAD)
    assert found is not None and found.path == "reach.numbr"


MAPPED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reach": {
            "oneOf": [{"$ref": "#/$defs/mail"}, {"$ref": "#/$defs/call"}],
            "discriminator": {
                "propertyName": "via",
                "mapping": {"mail": "#/$defs/mail", "call": "#/$defs/call"},
            },
        }
    },
    "$defs": {
        "mail": {"type": "object", "properties": {"via": {"type": "string"}, "address": {}}},
        "call": {"type": "object", "properties": {"via": {"type": "string"}, "number": {}}},
    },
}
"""A discriminator whose branches pin nothing: only its `mapping` tells them apart."""


def test_a_discriminators_mapping_picks_the_branch() -> None:
    walk = UndeclaredKeys(MAPPED)
    assert walk.find({"reach": {"via": "call", "number": 1}}) is None
    assert walk.find({"reach": {"via": "call", "address": 1}}) == UndeclaredKey(
        path="reach.address", message="unknown field `address`, expected one of `via`, `number`"
    )
    assert walk.find({"reach": {"via": "mail", "address": 1}}) is None
    assert walk.find({"reach": {"via": "fax", "address": 1, "number": 2}}) is None


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    kind: Literal["loose"]


class StrictLead(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reach: Annotated[Email | Loose, Field(discriminator="kind")]


def test_a_closed_branch_beside_an_open_one_is_checked_once_its_tag_picks_it() -> None:
    """Every branch together is open (`Loose` takes any key), so nothing could be undeclared;
    the tag leaves `Email` alone, which is closed: the questions about the schema as a whole
    must not skip it."""
    schema = type_schema(StrictLead).schema
    assert may_ignore_undeclared_keys(schema)
    assert find_undeclared_key({"reach": {"kind": "loose", "anything": 1}}, schema) is None
    found = find_undeclared_key({"reach": {"kind": "email", "adress": "x"}}, schema)
    assert found is not None and found.path == "reach.adress"

    text = '{"reach": {"kind": "email", "adress": "ada@example.com"}}'
    with pytest.raises(ParseError) as caught:
        Extractor().extract(MockProvider([approximate(text)]), StrictLead, NATIVE)
    assert caught.value.path == "reach.adress"
    assert caught.value.metadata.undeclared_key_rejections == 1


def test_strict_null_normalisation_reads_the_branch_the_tag_picks() -> None:
    # `Phone.tags` admits `null` (kept); `Email.tags` does not (a stand-in, removed).
    phone = {"reach": {"kind": "phone", "tags": None}}
    assert normalize_strict_nulls(phone, LEAD) == phone
    assert normalize_strict_nulls({"reach": {"kind": "email", "tags": None}}, LEAD) == {
        "reach": {"kind": "email"}
    }
    extracted = allama.extract(
        MockProvider([approximate('{"reach": {"kind": "email", "tags": null}}')]), Lead, NATIVE
    )
    assert extracted.value == Lead(reach=Email(kind="email"))


def _reference(value: Any, schemas: list[Any], root: dict[str, Any], path: tuple[Any, ...]) -> Any:
    """The walk as plain recursion, each object's branches chosen afresh from its tags."""
    candidates = _candidates(value, schemas, root)
    if candidates is None:
        return None
    if isinstance(value, dict):
        declared: dict[str, list[Any]] = {}
        for candidate in candidates:
            for key, sub in _properties(candidate, root).items():
                declared.setdefault(key, []).append(sub)
        if not any(_is_open(candidate) for candidate in candidates):
            for key in value:
                if key not in declared:
                    return format_path((*path, key))
        extra = [
            c["additionalProperties"]
            for c in candidates
            if isinstance(c.get("additionalProperties"), dict)
        ]
        for key, item in value.items():
            subs = declared.get(key) or extra
            found = _reference(item, subs, root, (*path, key)) if subs else None
            if found is not None:
                return found
        return None
    for index, item in enumerate(value):
        subs = [c["items"] for c in candidates if isinstance(c.get("items"), dict)]
        found = _reference(item, subs, root, (*path, index)) if subs else None
        if found is not None:
            return found
    return None


class Shelf(BaseModel):
    leads: list[Annotated[Email | Phone | Loose, Field(discriminator="kind")]] = []
    byname: dict[str, Lead] = {}
    either: Email | Phone | None = None


TAGGED_KEYS = st.sampled_from(
    ["kind", "address", "number", "tags", "leads", "byname", "either", "reach", "x"]
)
TAGGED_JSON = st.recursive(
    st.none() | st.integers(0, 1) | st.sampled_from(["email", "phone", "loose", "fax"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TAGGED_KEYS, inner, max_size=4),
    max_leaves=20,
)


@given(st.lists(TAGGED_JSON, min_size=1, max_size=6))
def test_fields_kept_by_tag_answer_as_a_fresh_walk_does(values: list[Any]) -> None:
    for schema in (type_schema(Shelf).schema, LEAD, MAPPED):
        kept = UndeclaredKeys(schema)
        for value in values:
            found = kept.find(value)
            assert (found.path if found else None) == _reference(value, [schema], schema, ())


# ----- 2. a key under an alias the schema does not show


class Contact(BaseModel):
    email: str | None = Field(default=None, validation_alias=AliasChoices("email", "mail"))
    tags: list[str] = []


class Named(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    email: str | None = Field(default=None, alias="e-mail")
    tags: list[str] = []


@pytest.mark.parametrize(("tp", "key"), [(Contact, "mail"), (Named, "email")])
def test_a_key_the_schema_does_not_show_is_rejected_whatever_else_the_output_holds(
    tp: type[BaseModel], key: str
) -> None:
    # A stand-in `null` elsewhere sends the output to the careful reading; without one,
    # the one-parse reading must give the same answer.
    for rest in ("", ', "tags": []', ', "tags": null'):
        text = f'{{"{key}": "ada@example.com"{rest}}}'
        with pytest.raises(ParseError) as caught:
            allama.extract(MockProvider([approximate(text)]), tp, NATIVE)
        assert caught.value.path == key, text
        assert caught.value.detail.startswith(f"unknown field `{key}`"), text
        assert caught.value.metadata.undeclared_key_rejections == 1, text


@pytest.mark.parametrize(("tp", "key"), [(Contact, "mail"), (Named, "email")])
def test_a_key_under_an_alias_is_retried_and_allowed_with_undeclared_keys(
    tp: type[BaseModel], key: str
) -> None:
    shown = next(iter(tp.model_json_schema()["properties"]))
    provider = MockProvider(
        [approximate(f'{{"{key}": "ada@x"}}'), approximate(f'{{"{shown}": "ada@x"}}')]
    )
    extracted = Extractor(retries=1).extract(provider, tp, NATIVE)
    assert (extracted.metadata.passes, extracted.metadata.undeclared_key_rejections) == (2, 1)
    assert extracted.value.model_dump()["email"] == "ada@x"
    for rest in ("", ', "tags": null'):
        text = f'{{"{key}": "ada@x"{rest}}}'
        lenient = Extractor(allow_undeclared_keys=True)
        value = lenient.extract(MockProvider([approximate(text)]), tp, NATIVE).value
        assert value.model_dump()["email"] == "ada@x"


class Aliased(BaseModel):
    email: str | None = Field(default=None, alias="e-mail")


class SameName(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    email: str | None = Field(default=None, alias="email")


class OneChoice(BaseModel):
    email: str | None = Field(default=None, validation_alias=AliasChoices("mail"))


@pytest.mark.parametrize(
    ("tp", "renamed"),
    [(Aliased, False), (SameName, False), (OneChoice, False), (Contact, True), (Named, True)],
)
def test_the_one_parse_reading_knows_which_types_read_keys_their_schema_does_not_show(
    tp: type, renamed: bool
) -> None:
    adapter: TypeAdapter[Any] = TypeAdapter(tp)
    assert output_plan(adapter, type_schema(tp).schema).renamed is renamed


# ----- 3. the root wrapper's keys


class Item(BaseModel):
    name: str


def _not_enforced(args: dict[str, Any]) -> ChatResponse:
    """A forced-tool pass whose strict mode was not honoured."""
    warning = Warning.unsupported(RequestField.TOOLS, "strict is not supported")
    return (
        ChatResponseBuilder()
        .tool_call("c", "submit_structured_output", args)
        .warning(warning)
        .build()
    )


def _object_roots_only(provider: MockProvider) -> MockProvider:
    """A tool API that takes only an object as a tool's parameters: the root is wrapped."""
    return provider.with_chat_capability(
        ChatCapability.TOOL_SCHEMA_ANY_ROOT, CapabilitySupport.UNSUPPORTED
    )


@pytest.mark.parametrize(
    ("tp", "value"), [(list[Item], [{"name": "a"}]), (list[int], [1]), (int, 1)]
)
def test_a_key_beside_the_wrapped_value_is_ignored_when_undeclared_keys_are_allowed(
    tp: Any, value: Any
) -> None:
    provider = _object_roots_only(MockProvider([_not_enforced({"value": value, "note": "x"})]))
    extracted = Extractor(allow_undeclared_keys=True).extract(provider, tp, FORCED)
    assert extracted.value == TypeAdapter(tp).validate_python(value)
    assert extracted.metadata.root_wrapped
    sent = provider.last_request
    assert sent is not None and sent.tools[0].parameters["additionalProperties"] is False
    # The schema is closed and validation is not: the one-parse reading knows it.
    wrapped = wrapped_schema(tp, type_schema(tp))
    assert output_plan(wrapped.adapter, wrapped.schema).undeclared


@pytest.mark.parametrize(
    ("tp", "value"), [(list[Item], [{"name": "a"}]), (list[int], [1]), (int, 1)]
)
def test_a_key_beside_the_wrapped_value_is_an_undeclared_key(tp: Any, value: Any) -> None:
    wrong = _not_enforced({"value": value, "values": 2})
    with pytest.raises(ParseError) as caught:
        Extractor().extract(_object_roots_only(MockProvider([wrong])), tp, FORCED)
    failure = caught.value
    assert failure.path is None  # no place in the caller's type
    assert (
        failure.detail
        == "unknown field `values`, expected `value` (the key the value is wrapped in)"
    )
    assert failure.metadata.undeclared_key_rejections == 1
    assert failure.metadata.root_wrapped

    right = _not_enforced({"value": value})
    provider = _object_roots_only(MockProvider([wrong, right]))
    extracted = Extractor(retries=1).extract(provider, tp, FORCED)
    assert (extracted.metadata.passes, extracted.metadata.undeclared_key_rejections) == (2, 1)
    sent = provider.last_request
    assert sent is not None
    feedback = sent.messages[-1]
    assert isinstance(feedback, ToolMessage)
    assert re.search(r"at `values`: unknown field `values`", str(feedback.text())), feedback


# ----- 4. no mode to pick comes before the request's tools


def test_no_mode_to_pick_is_reported_before_the_requests_tools() -> None:
    provider = (
        MockProvider.with_text('{"name": "a"}')
        .with_chat_capability(ChatCapability.STRUCTURED_OUTPUT, CapabilitySupport.UNSUPPORTED)
        .with_chat_capability(ChatCapability.TOOL_CALLS, CapabilitySupport.UNSUPPORTED)
    )
    tools = [ToolDefinition(name="other", parameters={"type": "object"})]
    request = ChatRequest("m").user("x").with_tools(tools)
    with pytest.raises(ModeUnsupportedError):
        allama.extract(provider, Item, request)
    with pytest.raises(ModeUnsupportedError):
        Extractor().plan(provider, Item, request)
    assert provider.call_count == 0


def test_a_path_in_a_wrapped_output_is_said_in_the_callers_terms() -> None:
    from allama.extract._target import Target

    target = Target(type_schema(list[int]), "mock", "m", wrapped=True)
    assert [target.caller_path(p) for p in ("value", "value[1]", "value.a", "values", "note")] == [
        None,
        "[1]",
        "a",
        "values",  # a key beside the value keeps its own name
        "note",
    ]
