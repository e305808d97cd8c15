"""Tools the model may call, how it must choose among them, and the format of its answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field, JsonValue, StrictBool, field_validator, model_validator

from allama.types._base import Data, check_finite


def _object_schema() -> dict[str, JsonValue]:
    return {"type": "object"}


class ToolDefinition(Data):
    """A tool offered to the model. `parameters` is the JSON Schema of its arguments.

    `strict=True` asks the provider to constrain the arguments to the schema.
    """

    name: str
    parameters: dict[str, JsonValue] = Field(default_factory=_object_schema)
    description: str | None = None
    strict: StrictBool | None = None

    @model_validator(mode="before")
    @classmethod
    def _not_openai(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "function" in data and "name" not in data:
            raise ValueError(
                "this is OpenAI's tool form ({'type': 'function', 'function': {...}}): give "
                "its fields, ToolDefinition(name=..., parameters=..., description=..., "
                "strict=...), or read OpenAI's tools with "
                "ChatRequest.from_openai(model, messages, tools=...)"
            )
        return data

    @field_validator("name")
    @classmethod
    def _named(cls, name: str) -> str:
        if not name:
            raise ValueError("a tool needs a name: every provider refuses an empty one")
        return name

    @field_validator("parameters")
    @classmethod
    def _finite(cls, parameters: dict[str, JsonValue]) -> dict[str, JsonValue]:
        check_finite(parameters, "parameters")
        return parameters


class ToolChoice(Data):
    """How the model must use the tools: `auto`, `none`, `required`, or one named tool.

    >>> ToolChoice.tool("lookup").name
    'lookup'
    """

    mode: Literal["auto", "none", "required", "tool"]
    name: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _not_openai(cls, data: Any) -> Any:
        if isinstance(data, str) and data in ("auto", "none", "required"):
            raise ValueError(
                f"a tool choice is a ToolChoice, not OpenAI's string: ToolChoice.{data}()"
            )
        if isinstance(data, Mapping) and "function" in data and "mode" not in data:
            raise ValueError(
                "this is OpenAI's tool choice form ({'type': 'function', 'function': "
                "{'name': ...}}): use ToolChoice.tool(name), or read OpenAI's form with "
                "ChatRequest.from_openai(model, messages, tool_choice=...)"
            )
        return data

    @model_validator(mode="after")
    def _name_with_tool(self) -> ToolChoice:
        if (self.mode == "tool") != (self.name is not None):
            raise ValueError("a tool choice names a tool exactly when its mode is `tool`")
        if self.name == "":
            raise ValueError("a tool choice names its tool: the name is empty")
        return self

    @classmethod
    def auto(cls) -> ToolChoice:
        return cls(mode="auto")

    @classmethod
    def none(cls) -> ToolChoice:
        return cls(mode="none")

    @classmethod
    def required(cls) -> ToolChoice:
        return cls(mode="required")

    @classmethod
    def tool(cls, name: str) -> ToolChoice:
        return cls(mode="tool", name=name)


class ResponseFormat(Data):
    """The form of the answer: free `text`, any `json` object, JSON matching `json_schema`,
    or one of the strings in `options`, as plain text (`choice`).

    A `choice` is constrained natively only where a provider has such an output (Gemini's
    `text/x.enum`, llama.cpp's grammars: `ChatCapability.CHOICE_OUTPUT`); elsewhere the
    adapter refuses it like any field it cannot honour. `allama.decide` picks the most
    native constraint each provider has.

    >>> ResponseFormat.for_schema({"type": "object"}, name="person").strict
    True
    >>> ResponseFormat.choice(["spam", "ham"]).options
    ('spam', 'ham')
    """

    type: Literal["text", "json", "json_schema", "choice"]
    json_schema: dict[str, JsonValue] | None = None
    name: str | None = None
    description: str | None = None
    strict: StrictBool | None = None
    options: tuple[str, ...] | None = None

    @model_validator(mode="before")
    @classmethod
    def _not_openai(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        if data.get("type") == "json_object":
            raise ValueError(
                "OpenAI's response format `json_object` is allama's `json`: "
                "ResponseFormat.json_object()"
            )
        if data.get("type") == "json_schema" and is_openai_envelope(data.get("json_schema")):
            raise ValueError(
                "`json_schema` holds OpenAI's envelope ({'name': ..., 'strict': ..., "
                "'schema': {...}}), not the JSON Schema itself: use "
                "ResponseFormat.for_schema(schema, name=..., strict=...), or read OpenAI's "
                "response_format with ChatRequest.from_openai(model, messages, "
                "response_format=...)"
            )
        return data

    @field_validator("json_schema")
    @classmethod
    def _finite(cls, schema: dict[str, JsonValue] | None) -> dict[str, JsonValue] | None:
        check_finite(schema, "json_schema")
        return schema

    @model_validator(mode="after")
    def _schema_with_json_schema(self) -> ResponseFormat:
        if (self.type == "json_schema") != (self.json_schema is not None):
            raise ValueError("a response format has a schema exactly when its type is json_schema")
        if (self.type == "choice") != (self.options is not None):
            raise ValueError("a response format has options exactly when its type is choice")
        if self.options is not None:
            if not self.options:
                raise ValueError("a choice needs at least one option")
            if any(not option for option in self.options):
                raise ValueError("a choice's options must not be empty strings")
            if len(set(self.options)) != len(self.options):
                raise ValueError("a choice's options must be distinct")
        return self

    @classmethod
    def text(cls) -> ResponseFormat:
        return cls(type="text")

    @classmethod
    def json_object(cls) -> ResponseFormat:
        return cls(type="json")

    @classmethod
    def for_schema(
        cls,
        schema: dict[str, JsonValue],
        *,
        name: str | None = None,
        strict: bool | None = True,
        description: str | None = None,
    ) -> ResponseFormat:
        return cls(
            type="json_schema",
            json_schema=schema,
            name=name,
            strict=strict,
            description=description,
        )

    @classmethod
    def choice(
        cls, options: Sequence[str], *, name: str | None = None, description: str | None = None
    ) -> ResponseFormat:
        """An answer that is exactly one of `options`, as plain text."""
        if isinstance(options, str) or not isinstance(options, Sequence):
            raise TypeError(
                "ResponseFormat.choice(): `options` must be a sequence of str, "
                f"not {type(options).__name__}"
            )
        return cls(type="choice", options=tuple(options), name=name, description=description)


_ENVELOPE = frozenset({"name", "strict", "schema", "description"})
"""The keys of OpenAI's `json_schema` object, which holds the schema under `schema`: none is
a JSON Schema keyword, so a schema made of them alone is that envelope."""


def is_openai_envelope(value: object, *, named: bool = False) -> bool:
    """Whether `value` is OpenAI's `json_schema` envelope rather than a JSON Schema: made of
    its keys alone, and holding a `schema` (or, with `named`, a `name` instead, which
    OpenAI requires: where OpenAI's form is expected, an envelope that lacks its schema)."""
    if not isinstance(value, Mapping) or not value.keys() <= _ENVELOPE:
        return False
    return "schema" in value or (named and "name" in value)
