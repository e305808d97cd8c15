"""A scripted value that answers in whichever form the extraction asks for."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pydantic_core
from pydantic import BaseModel, TypeAdapter

from allama.extract._root import ROOT_OPTION
from allama.mock._builder import ChatResponseBuilder
from allama.types import ChatRequest, ChatResponse, Usage

__all__ = ["MockScriptError", "Structured"]


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
    way: `{"value": ...}`.

    The value is anything pydantic can write as JSON (a model instance, a dataclass, a
    dict, a list, a scalar), written as the model would write it for the type's schema:
    by the names validation reads, `Json` fields as text. A model or dataclass whose JSON
    does not read back as itself (a serializer of its own format, an excluded field) is a
    `TypeError`: script its JSON with `MockProvider.with_text`. `usage` is reported with
    the answer, as the other scripted responses report it.

    >>> import allama
    >>> from allama.mock import MockProvider
    >>> from pydantic import BaseModel
    >>> class Person(BaseModel):
    ...     name: str
    >>> provider = MockProvider.with_structured(Person(name="Ada"))
    >>> allama.extract(provider, Person, allama.ChatRequest("m").user("Ada?")).value
    Person(name='Ada')
    """

    __slots__ = ("json_text", "usage")

    def __init__(self, value: Any, *, usage: Usage | None = None) -> None:
        try:
            written = _written(value)
        except pydantic_core.PydanticSerializationError as error:
            raise TypeError(
                f"Structured: a {type(value).__name__} cannot be written as JSON ({error})"
            ) from None
        if usage is not None and not isinstance(usage, Usage):
            raise TypeError(f"Structured: `usage` must be a Usage, not {type(usage).__name__}")
        self.json_text = written.decode()
        self.usage = usage

    def response_for(self, request: ChatRequest, *, call_id: str = "call_mock_1") -> ChatResponse:
        """The answer to `request`: a forced tool call, or JSON text."""
        payload = self.json_text
        key = request.option_json(ROOT_OPTION)
        if key is not None:
            if not isinstance(key, str) or not key:
                raise MockScriptError(
                    f"the request option `{ROOT_OPTION}` must be the key the value is wrapped "
                    f"in (a non-empty string), not {type(key).__name__}"
                )
            payload = f"{{{json.dumps(key)}:{payload}}}"
        builder = ChatResponseBuilder()
        tool = _forced_tool(request)
        if tool is None:
            builder.text(payload)
        else:
            builder.tool_call(call_id, tool, payload)
        if self.usage is not None:
            builder.usage_value(self.usage)
        return builder.build()

    def __repr__(self) -> str:
        return f"Structured(json=<withheld {len(self.json_text)} chars>)"


def _forced_tool(request: ChatRequest) -> str | None:
    """The tool the request forces a call to, if it forces one."""
    choice = request.tool_choice
    if choice is None or choice.mode in ("auto", "none"):
        return None
    if choice.mode == "tool":
        return choice.name
    if len(request.tools) != 1:
        raise MockScriptError(
            f"a structured answer calls one tool; the request asks for a call under tool "
            f"choice `required` with {len(request.tools)} tools, so which one is unclear"
        )
    return request.tools[0].name


def _written(value: Any) -> bytes:
    """`value` as the model would write it for its type's schema: by the names validation
    reads (aliases, or field names where a `serialization_alias` differs), `Json` fields
    as text. A model or dataclass whose JSON does not read back as itself (a serializer
    of its own format, a field excluded from its JSON) is refused: no answer gives it."""
    first = pydantic_core.to_json(value, by_alias=True, round_trip=True)
    if not (isinstance(value, BaseModel) or dataclasses.is_dataclass(value)):
        return first
    adapter: TypeAdapter[Any] = TypeAdapter(type(value))
    for written in (first, pydantic_core.to_json(value, by_alias=False, round_trip=True)):
        try:
            if adapter.validate_json(written) == value:
                return written
        except ValueError:
            continue
    raise TypeError(
        f"Structured: a {type(value).__name__} written as JSON does not read back as itself "
        "(a serializer of its own format, a field excluded from the JSON): script the "
        "model's JSON text instead, with `MockProvider.with_text`"
    )
