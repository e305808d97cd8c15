"""What messages and responses are made of: text, images, tool calls, refusals, reasoning."""

from __future__ import annotations

import json
import mimetypes
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict, Unpack

from pydantic import Field, JsonValue, model_validator

from allama.types._base import Data, check_finite
from allama.types._redact import withheld


class TextPart(Data):
    """Text in a user message, or a block of text in a response."""

    type: Literal["text"] = "text"
    text: str

    def __repr__(self) -> str:
        return f"TextPart(text={withheld(self.text)})"


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")
"""A URL's scheme (RFC 3986), two characters or more: one letter is a Windows drive (`C:`)."""


def _unreachable(url: str, kind: str, part: str, example: str) -> str | None:
    """Why no provider can fetch `url`, or `None`. A path (no scheme, or a `file:` URL) names a
    file on this machine, which the provider would be sent and answer with a 400. Any other
    scheme is left to the provider: http(s), `data:`, Gemini's `gs://`, and what comes next."""
    scheme = _SCHEME.match(url.lstrip())
    if scheme is not None and scheme.group().lower() != "file:":
        return None
    what = "a `file:` URL" if scheme is not None else "a local path" if url.strip() else "empty"
    return (
        f"{kind}'s `url` is {what}, which no provider can fetch: give a URL the provider "
        f"can reach (https://..., data:...), or send the file's bytes, with "
        f"`{part}.from_file(path)` or `{part}(data=Path(path).read_bytes(), "
        f"media_type={example!r})`"
    )


def _not_bytes(data: Any, kind: str, part: str, example: str, text: str) -> None:
    """A TypeError for `data` that is a str or a path: a str is no file's path, and reading it
    as base64 (as the JSON form's text is read) turns text into other bytes or fails on it."""
    if isinstance(data, str):
        raise TypeError(
            f"{part}: `data` must be bytes, not str: pass the file's bytes, with "
            f"`{part}.from_file(path)` or `{part}(data=Path(path).read_bytes(), "
            f"media_type={example!r})`{text} (base64 text: `base64.b64decode(text)`)"
        )
    if isinstance(data, os.PathLike):
        raise TypeError(
            f"{part}: `data` must be bytes, not a path: read {kind}'s file with "
            f"`{part}.from_file(path)`"
        )


_COMPRESSED = {
    "application/gzip": "gzip",
    "application/x-gzip": "gzip",
    "application/x-bzip2": "bzip2",
    "application/x-xz": "xz",
    "application/zstd": "zstd",
}
"""Compressed files by the media type a name gives them where `mimetypes` reads no encoding
(`.zst`, or `.GZ`, whose encoding it reads in lower case alone)."""


_TEXT_APPLICATIONS = frozenset(
    {
        "json",
        "xml",
        "javascript",
        "x-javascript",
        "ecmascript",
        "x-ecmascript",
        "x-python",
        "x-sh",
        "x-shellscript",
        "x-csh",
        "sql",
        "x-sql",
        "yaml",
        "x-yaml",
        "toml",
        "x-tex",
        "x-latex",
        "x-ruby",
        "x-perl",
        "x-httpd-php",
    }
)
"""application/* types that are text: source code and data formats (Google lists
application/x-python and application/x-javascript among Gemini's text documents; a name's
type is application/sql, application/x-sh or application/x-tex on many systems). Not
application/x-python-code (`.pyc`, bytecode), nor application/rtf: RTF names its code page
inside the document, and is a word processor's format rather than text read as it is."""


def _is_text(media_type: str) -> bool:
    """Whether a file of `media_type` is text a model reads as it is (Markdown, CSV, HTML,
    JSON, XML, YAML, code), which a `charset` parameter describes."""
    if media_type.startswith("text/"):
        return True
    kind = media_type.partition("/")[2]
    return media_type.startswith("application/") and (
        kind in _TEXT_APPLICATIONS or kind.endswith(("+json", "+xml", "+yaml"))
    )


def _media_type(path: Path, given: str | None, part: str, image: bool) -> str:
    """`given`, or the media type the file's name implies (an image's for an `image`).

    A compressed file (`.pdf.gz`) is refused: its name says the type of what it holds,
    which would go as the type of the compressed bytes. A text file a document is read from
    is `text/plain` (`DocumentPart.from_file`)."""
    if given is not None:
        return given
    guessed, encoding = mimetypes.guess_type(path.name)
    encoding = encoding or _COMPRESSED.get(guessed or "")
    if encoding is not None:
        raise ValueError(
            f"{part}.from_file: {path.name!r} is compressed ({encoding}), which no provider "
            "reads: decompress it first"
        )
    if guessed is None:
        raise ValueError(
            f"{part}.from_file: the file's name does not tell its media type; give it, "
            f"as in `{part}.from_file(path, media_type=...)`"
        )
    if guessed.startswith("image/") != image:
        kind, other = ("an image", "DocumentPart") if image else ("a document", "ImagePart")
        raise ValueError(
            f"{part}.from_file: the file's name says {guessed}, which is not {kind}; "
            f"use {other}.from_file, or give the media type"
        )
    return "text/plain" if not image and _is_text(guessed) else guessed


def _as_given(fields: Mapping[str, object], kind: str, part: tuple[str, str], text: str) -> Any:
    """A part's own arguments, checked where pydantic does not: `data` that is no bytes, and
    a URL no provider can fetch (a plain `ValueError`; the validator's, for a part read).
    Checked by pydantic from there."""
    _not_bytes(fields.get("data"), kind, *part, text)
    url = fields.get("url")
    problem = None if not isinstance(url, str) else _unreachable(url, kind, *part)
    if problem is not None:
        raise ValueError(problem)
    return dict(fields)


_IMAGE = ("ImagePart", "image/png")
_DOCUMENT = ("DocumentPart", "application/pdf")
"""The part's name and an example media type, as the messages above show them."""


_MEDIA_TYPE = re.compile(r"[A-Za-z0-9][\w.+-]{0,63}/[\w.+-]{1,64}")


def _image_problem(data: object, media_type: object) -> str | None:
    """Why bytes and a media type are no image to send, or `None`: no bytes (sent as
    `data:image/png;base64,`), or a media type no image has (a PDF is a document)."""
    if isinstance(data, bytes | bytearray) and not data:
        return "an image's `data` is empty: give the image file's bytes"
    if isinstance(media_type, str) and not media_type.lower().startswith("image/"):
        shown = f", not {media_type}" if _MEDIA_TYPE.fullmatch(media_type) else ""
        return (
            f"an image's `media_type` must be an image type (image/png, image/jpeg, ...)"
            f"{shown}: a PDF or a text goes in a DocumentPart"
        )
    return None


class _ImageFields(TypedDict, total=False):
    type: Literal["image"]
    url: str | None
    data: bytes | None
    media_type: str | None


class ImagePart(Data):
    """An image in a user message: a URL, or bytes with their media type.

    `ImagePart.from_file(path)` reads a file on this machine: a provider can fetch no local
    path, so one given as `url` is refused.
    """

    type: Literal["image"] = "image"
    url: str | None = None
    data: bytes | None = None
    media_type: str | None = None

    def __init__(self, /, **fields: Unpack[_ImageFields]) -> None:
        # The caller's own call only: pydantic builds a part it reads from a dict or from
        # JSON without this `__init__` (see the flag below), reading `data` there as the
        # base64 the JSON form writes. Here a str or a path for `data` is refused, and a URL
        # no provider can fetch is a plain `ValueError` (the validator's, for a part read).
        given = _as_given(fields, "an image", _IMAGE, "")
        problem = _image_problem(given.get("data"), given.get("media_type"))
        if problem is not None:
            raise ValueError(problem)
        super().__init__(**given)

    # Marked as pydantic marks its own `BaseModel.__init__`, so that validation does not call
    # it (pydantic calls a model's own `__init__` with what it reads, JSON included).
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], media_type: str | None = None) -> ImagePart:
        """An image read from a file, its media type told by the file's name (`.png`:
        `image/png`) unless given. A compressed file (`.png.gz`) is refused."""
        file = Path(path)
        kind = _media_type(file, media_type, "ImagePart", image=True)
        return cls(data=file.read_bytes(), media_type=kind)

    @model_validator(mode="after")
    def _one_source(self) -> ImagePart:
        if (self.url is None) == (self.data is None):
            raise ValueError("an image needs exactly one of `url` and `data`")
        if self.data is not None and not self.media_type:
            raise ValueError("an image given as bytes needs its `media_type`, such as image/png")
        problem = _image_problem(self.data, self.media_type)
        if problem is None and self.url is not None:
            problem = _unreachable(self.url, "an image", *_IMAGE)
        if problem is not None:
            raise ValueError(problem)
        return self

    def __repr__(self) -> str:
        if self.data is not None:
            return f"ImagePart(media_type={self.media_type!r}, data=<{len(self.data)} bytes>)"
        return "ImagePart(url=<withheld>)"


class _DocumentFields(TypedDict, total=False):
    type: Literal["document"]
    url: str | None
    data: bytes | None
    media_type: str | None
    title: str | None


class DocumentPart(Data):
    """A document in a user message: a PDF or plain text, as a URL or as bytes.

    `media_type` is required with bytes (`application/pdf`, `text/plain`); `title` names the
    document to the model where the provider takes one. `DocumentPart.from_file(path)` reads
    a file on this machine (a local path given as `url` is refused).
    """

    type: Literal["document"] = "document"
    url: str | None = None
    data: bytes | None = None
    media_type: str | None = None
    title: str | None = None

    def __init__(self, /, **fields: Unpack[_DocumentFields]) -> None:
        # As `ImagePart.__init__`: the caller's arguments only, never a part read from JSON.
        text = "; text: `data=text.encode()` with `media_type='text/plain'`, or a `TextPart`"
        super().__init__(**_as_given(fields, "a document", _DOCUMENT, text))

    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        media_type: str | None = None,
        *,
        title: str | None = None,
    ) -> DocumentPart:
        """A document read from a file, its media type told by the file's name (`.pdf`:
        `application/pdf`, `.txt`: `text/plain`) unless given. The file's name is not sent:
        `title` names the document to the model.

        A text file of another kind (`.md`, `.csv`, `.html`, `.json`, `.xml`, code) is read
        as `text/plain`, its text as it is: the providers take PDF and plain-text documents
        (Anthropic, OpenAI and Ollama refuse `text/markdown`), and Gemini reads any document
        but a PDF as plain text. Give `media_type` to send another. A compressed file
        (`.pdf.gz`) is refused."""
        file = Path(path)
        kind = _media_type(file, media_type, "DocumentPart", image=False)
        return cls(data=file.read_bytes(), media_type=kind, title=title)

    @model_validator(mode="after")
    def _one_source(self) -> DocumentPart:
        if (self.url is None) == (self.data is None):
            raise ValueError("a document needs exactly one of `url` and `data`")
        if self.data is not None and not self.media_type:
            raise ValueError(
                "a document given as bytes needs its `media_type`, such as application/pdf"
            )
        problem = None if self.url is None else _unreachable(self.url, "a document", *_DOCUMENT)
        if self.data is not None and not self.data:
            problem = "a document's `data` is empty: give the document file's bytes"
        if problem is not None:
            raise ValueError(problem)
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
        """A call whose arguments are given as a value rather than as JSON text (finite
        numbers: JSON has no NaN or infinity)."""
        check_finite(arguments, "arguments")
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
