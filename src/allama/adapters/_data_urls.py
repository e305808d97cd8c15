"""Data URLs (RFC 2397) in image and document parts, read alike by every encoder that sends
inline bytes (Anthropic, Gemini, Ollama): the scheme (RFC 3986), the media type and the
`base64` token have no case, so `DATA:IMAGE/PNG;BASE64,...` is inline data too. A part's
own media type is read the same way (`part_media_type`). A data URL's base64 is checked, and
sent without the whitespace a wrapped one may hold, alike too (`base64_data`)."""

from __future__ import annotations

import base64
from typing import NamedTuple


class DataUrl(NamedTuple):
    media_type: str
    """Lower case; empty where the URL names none."""
    base64: bool
    """Whether its data is marked base64 (the last parameter before the comma)."""
    data: str


def data_url(url: str) -> DataUrl | None:
    """`url` read as a data URL; `None` for any other URL."""
    if url[:5].lower() != "data:":
        return None
    header, _, data = url[5:].partition(",")
    params = [param.strip() for param in header.split(";")]
    return DataUrl(params[0].lower(), len(params) > 1 and params[-1].lower() == "base64", data)


class InlineData(NamedTuple):
    text: str
    """The base64 as sent: without whitespace, which providers do not take in it."""
    raw: bytes
    """The bytes it holds."""


def base64_data(url: DataUrl) -> InlineData | None:
    """A base64 data URL's data, read as browsers read it (WHATWG's forgiving base64): without
    the whitespace a wrapped URL may hold (RFC 2045 wraps base64 at 76 characters), its `=`
    padding restored where left out; `None` where what is left is no valid base64, which
    providers answer 400 to (Gemini: "Base64 decoding failed", Ollama: "illegal base64
    data")."""
    text = "".join(url.data.split())
    missing = -len(text) % 4
    if missing < 3 and not text.endswith("="):
        text += "=" * missing
    try:
        return InlineData(text, base64.b64decode(text, validate=True))
    except ValueError:
        return None


def part_media_type(given: str | None) -> tuple[str, str | None]:
    """A part's media type as providers name it (lower case, its parameters dropped: types
    have no case, and `text/plain; charset=utf-8` is text/plain), and its charset, if any."""
    kind, *params = (given or "").split(";")
    charset = None
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip('"').lower() or None
    return kind.strip().lower(), charset
