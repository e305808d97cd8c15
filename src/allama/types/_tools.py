"""Tools the model may call, how it must choose among them, and the format of its answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field, JsonValue, model_validator

from allama.types._base import Data


def _object_schema() -> dict[str, JsonValue]:
    return {"type": "object"}


class ToolDefinition(Data):
    """A tool offered to the model. `parameters` is the JSON Schema of its arguments.

    `strict=True` asks the provider to constrain the arguments to the schema.
    """

    name: str
    parameters: dict[str, JsonValue] = Field(default_factory=_object_schema)
    description: str | None = None
    strict: bool | None = None


class ToolChoice(Data):
    """How the model must use the tools: `auto`, `none`, `required`, or one named tool.

    >>> ToolChoice.tool("lookup").name
    'lookup'
    """

    mode: Literal["auto", "none", "required", "tool"]
    name: str | None = None

    @model_validator(mode="after")
    def _name_with_tool(self) -> ToolChoice:
        if (self.mode == "tool") != (self.name is not None):
            raise ValueError("a tool choice names a tool exactly when its mode is `tool`")
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
    strict: bool | None = None
    options: tuple[str, ...] | None = None

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
