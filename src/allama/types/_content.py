"""What messages and responses are made of: text, images, tool calls, refusals, reasoning."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field, JsonValue, model_validator

from allama.types._base import Data
from allama.types._redact import withheld


class TextPart(Data):
    """Text in a user message, or a block of text in a response."""

    type: Literal["text"] = "text"
    text: str

    def __repr__(self) -> str:
        return f"TextPart(text={withheld(self.text)})"


class ImagePart(Data):
    """An image in a user message: a URL, or bytes with their media type."""

    type: Literal["image"] = "image"
    url: str | None = None
    data: bytes | None = None
    media_type: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> ImagePart:
        if (self.url is None) == (self.data is None):
            raise ValueError("an image needs exactly one of `url` and `data`")
        if self.data is not None and not self.media_type:
            raise ValueError("an image given as bytes needs its `media_type`, such as image/png")
        return self

    def __repr__(self) -> str:
        if self.data is not None:
            return f"ImagePart(media_type={self.media_type!r}, data=<{len(self.data)} bytes>)"
        return "ImagePart(url=<withheld>)"


class DocumentPart(Data):
    """A document in a user message: a PDF or plain text, as a URL or as bytes.

    `media_type` is required with bytes (`application/pdf`, `text/plain`); `title` names the
    document to the model where the provider takes one.
    """

    type: Literal["document"] = "document"
    url: str | None = None
    data: bytes | None = None
    media_type: str | None = None
    title: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> DocumentPart:
        if (self.url is None) == (self.data is None):
            raise ValueError("a document needs exactly one of `url` and `data`")
        if self.data is not None and not self.media_type:
            raise ValueError(
                "a document given as bytes needs its `media_type`, such as application/pdf"
            )
        return self

    def __repr__(self) -> str:
        if self.data is not None:
            return f"DocumentPart(media_type={self.media_type!r}, data=<{len(self.data)} bytes>)"
        return "DocumentPart(url=<withheld>)"


class ToolCall(Data):
    """A call the model made. `arguments` is the raw JSON text, exactly as the provider sent it."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: str = "{}"

    @classmethod
    def of(cls, id: str, name: str, arguments: JsonValue) -> ToolCall:
        """A call whose arguments are given as a value rather than as JSON text."""
        return cls(id=id, name=name, arguments=json.dumps(arguments, separators=(",", ":")))

    def parsed_arguments(self) -> Any:
        """The arguments decoded; raises `ValueError` when they are not valid JSON."""
        return json.loads(self.arguments)

    def __repr__(self) -> str:
        return f"ToolCall(id={self.id!r}, name={self.name!r}, arguments={withheld(self.arguments)})"


class Refusal(Data):
    """The model declined, in its own words, in place of the output."""

    type: Literal["refusal"] = "refusal"
    text: str

    def __repr__(self) -> str:
        return f"Refusal(text={withheld(self.text)})"


OPENAI_REASONING_ID_PREFIX = "rs_"
"""How the Responses API's reasoning item ids begin: a `Reasoning.signature` that begins so
is that item's id (kept to send the item back), not a signature another provider checks."""


class Reasoning(Data):
    """The model's reasoning, with the provider's signature or encrypted content kept verbatim.

    Providers that check reasoning on the next turn (Anthropic's `signature`, OpenAI's
    `encrypted_content`) need it sent back byte for byte, so it is never rewritten.

    `issuer` names the endpoint that issued the signature or encrypted content: the
    `ChatResponse.provider` of the response it came in (`anthropic`), with the host it was
    sent to where that is not the preset's own (`azure-openai@east.openai.azure.com`,
    `anthropic-compatible@api.deepseek.com`; never a key, path or query). They are sent back
    to that endpoint alone, since another one refuses what it did not issue (OpenAI's 400
    `invalid_encrypted_content`, Gemini's "Corrupted thought signature", Azure's "could not
    be verified" from another resource). A bare name, as every version marked blocks before
    hosts were named, is the preset's own host: a block an older version marked from
    another host (an Azure resource, a gateway) is left out there, with the warning, rather
    than risk the refusal. `None` (a block made by hand, or kept by a version that named no
    issuer) sends them to any provider that takes them.
    """

    type: Literal["reasoning"] = "reasoning"
    text: str = ""
    signature: str | None = None
    encrypted_content: str | None = None
    issuer: str | None = None

    def goes_back_to(self, provider: str) -> bool:
        """Whether `provider` (an endpoint as `issuer` names it: `HttpProvider.issuer`) may
        be sent this block's signature and encrypted content: it issued them, or nobody is
        named."""
        return self.issuer is None or self.issuer == provider

    def __repr__(self) -> str:
        signed = ", signed" if self.signature else ""
        encrypted = ", encrypted" if self.encrypted_content else ""
        issuer = f", issuer={self.issuer!r}" if self.issuer is not None else ""
        return f"Reasoning(text={withheld(self.text)}{signed}{encrypted}{issuer})"


UserPart = Annotated[TextPart | ImagePart | DocumentPart, Field(discriminator="type")]
"""A part of a user message."""

ContentBlock = Annotated[TextPart | ToolCall | Refusal | Reasoning, Field(discriminator="type")]
"""A block of a response or of an assistant message."""


def text_of(blocks: tuple[Any, ...]) -> str | None:
    """The text blocks joined, or `None` when there are none."""
    texts = [block.text for block in blocks if isinstance(block, TextPart)]
    return "".join(texts) if texts else None
