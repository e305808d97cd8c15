"""Data URLs (RFC 2397) in image and document parts, read alike by every encoder that sends
inline bytes (Anthropic, Gemini, Ollama, OpenAI's): the scheme (RFC 3986), the media type and the
`base64` token have no case, so `DATA:IMAGE/PNG;BASE64,...` is inline data too, and the
media type's `charset` is read as a part's own media type's is (`part_media_type`). A data
URL's data is read alike too, as browsers read it (`base64_data`), and a document's text in
its charset (`decode_text`), by the encoders and `tpm`'s estimate alike. Here in the
vocabulary layer because OpenAI's message form (`allama.types._openai`) reads them as well
as the adapters."""

from __future__ import annotations

import base64
import binascii
import codecs
from typing import NamedTuple
from urllib.parse import unquote_to_bytes


class DataUrl(NamedTuple):
    media_type: str
    """Lower case, without its parameters; empty where the URL names none."""
    base64: bool
    """Whether its data is marked base64 (the last parameter before the comma)."""
    data: str
    """As given: percent-encoded, and base64 where marked so."""
    charset: str | None = None
    """Its media type's `charset` parameter (lower case), where it names one:
    `data:text/plain;charset=iso-8859-1;base64,...`, or RFC 2397's shorthand for text/plain,
    `data:;charset=iso-8859-1,...`."""


def data_url(url: str) -> DataUrl | None:
    """`url` read as a data URL (`data:[<mediatype>][;base64],<data>`, its media type with
    `;attribute=value` parameters); `None` for any other URL."""
    if url[:5].lower() != "data:":
        return None
    header, _, data = url[5:].partition(",")
    params = header.split(";")
    encoded = len(params) > 1 and params[-1].strip().lower() == "base64"
    media_type, charset = part_media_type(";".join(params[:-1] if encoded else params))
    return DataUrl(media_type, encoded, data, charset)


def inline_media_type(url: DataUrl, given: str | None) -> tuple[str, str | None]:
    """The media type and charset of a part given as a data URL: the URL's own, each where
    it names one, else those of the part's `media_type` (`given`), which may say what the
    URL leaves out (`data:;base64,...` beside `media_type="image/png"`, or a charset). Empty
    where neither names a type: RFC 2397's text/plain is the encoder's to fill in."""
    own, charset = part_media_type(given)
    return url.media_type or own, url.charset or charset


class InlineData(NamedTuple):
    text: str
    """Its bytes in standard base64, `=` padded and without whitespace: the one form every
    provider takes."""
    raw: bytes
    """The bytes it holds."""


_WHITESPACE = b" \t\n\f\r"
"""ASCII whitespace, which a base64 data URL wrapped at 76 characters (RFC 2045) holds."""


def base64_data(url: DataUrl) -> InlineData | None:
    """A data URL's bytes, read as browsers read the URL (WHATWG Fetch, data: URL
    processor): percent-decoded first (`%3D` is `=`), then, where marked base64, read as
    forgiving base64 (its whitespace dropped, its `=` padding optional), else taken as they
    are (RFC 2397's default form, `data:text/plain,hello%20world`). Base64 of the URL-safe
    alphabet (`-` and `_` for `+` and `/`, RFC 4648 section 5) is read too: Gemini's JSON
    (proto3 `bytes`) takes it, but Ollama (Go's `[]byte`, `base64.StdEncoding`) and
    Anthropic (`standard_b64encode` in its examples) take the standard alphabet, so the
    bytes go to each in that. `None` where what is marked base64 is not, which providers
    answer 400 to (Gemini: "Base64 decoding failed", Ollama: "illegal base64 data")."""
    data = unquote_to_bytes(url.data)
    if url.base64:
        data = data.translate(None, _WHITESPACE)
        if len(data) % 4 == 0:
            data = data.removesuffix(b"=").removesuffix(b"=")
        if b"=" in data or len(data) % 4 == 1:  # padding inside, or too much of it
            return None
        try:
            data = base64.b64decode(data + b"=" * (-len(data) % 4), b"-_", validate=True)
        except binascii.Error:
            return None
    return InlineData(base64.b64encode(data).decode("ascii"), data)


def inline_data(url: DataUrl, kind: str) -> InlineData | str:
    """`base64_data` of an image's or a document's data URL (`kind`), or why it cannot be
    sent, in the encoders' words: an image's must be base64 (one that is not is an SVG's in
    practice, which no provider reads), and what is marked base64 must be."""
    if kind == "image" and not url.base64:
        return "an image data URL must be base64-encoded"
    decoded = base64_data(url)
    return f"the {kind}'s data URL holds no valid base64" if decoded is None else decoded


def inline_document(url: DataUrl, given: str | None) -> tuple[bytes, str, str | None] | str:
    """A document's data URL as its bytes, media type and charset (the URL's, else the
    part's media type `given`, else RFC 2397's text/plain), or why it cannot be sent."""
    decoded = inline_data(url, "document")
    if isinstance(decoded, str):
        return decoded
    media_type, charset = inline_media_type(url, given)
    return decoded.raw, media_type or "text/plain", charset


def leading_data(text: str, *, encoded: bool) -> bytes | None:
    """The bytes the start of a data URL's data holds (its last escape and base64 quantum
    left out where cut); `None` where what is marked base64 is not (a guess: the whole
    is checked when the part is sent): the base64 read as `base64_data` reads it."""
    cut = text.rfind("%", len(text) - 2)
    data = unquote_to_bytes(text if cut < 0 else text[:cut])
    if not encoded:
        return data
    data = data.translate(None, _WHITESPACE)
    try:  # (the URL-safe alphabet too, as `base64_data` reads it)
        return base64.b64decode(data[: len(data) // 4 * 4], b"-_", validate=True)
    except binascii.Error:
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


_NOT_CHARSETS = frozenset({"undefined", "idna", "punycode", "unicode-escape", "raw-unicode-escape"})
"""Python's codecs of text that are no charset (none is one IANA registers): `undefined`
reads nothing, IDNA and Punycode read a domain name's labels, and the escapes are Python's
own. No document is written in them, and `undefined` and IDNA raise a bare `UnicodeError`
where a charset's codec raises `UnicodeDecodeError`."""


def text_codec(charset: str | None) -> str:
    """The name of Python's codec for a document's `charset` (UTF-8 where it names none).
    `LookupError` for a charset allama cannot read: one Python does not know (a name
    holding a NUL, which `codecs.lookup` raises `ValueError` for, too), or one of
    `_NOT_CHARSETS`."""
    if charset is None:
        return "utf-8"
    try:
        name = codecs.lookup(charset).name
    except ValueError:
        raise LookupError("no charset's name") from None
    if name in _NOT_CHARSETS:
        raise LookupError(f"{name} is no charset")
    return name


_MARKS = {
    "utf-16": (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE),
    "utf-32": (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE),
}
"""The byte-order marks (little-endian's, big-endian's) of the charsets of no stated order
(IANA's `UTF-16` and `UTF-32`), which Python's codecs read, without a mark, in the host's
own order, which differs between machines."""

_OWN_MARKS = {
    "utf-16-le": codecs.BOM_UTF16_LE,
    "utf-16-be": codecs.BOM_UTF16_BE,
    "utf-32-le": codecs.BOM_UTF32_LE,
    "utf-32-be": codecs.BOM_UTF32_BE,
}
"""The byte-order mark of each charset of a stated order, which Python's codecs read as
text (U+FEFF)."""

_SNIFFED = 1 << 14
"""How many leading bytes of a UTF-16 or UTF-32 text without a mark its order is read from
(`_sniffed_order`): thousands of characters, where a line tells."""


def _marked_codec(codec: str, data: bytes) -> tuple[str, bytes]:
    """The codec that reads `data` in `codec` alike on every machine, and the bytes it
    reads. A leading byte-order mark is no text of the document's (U+FEFF at its start
    otherwise): left out of UTF-8, and of UTF-16 and UTF-32 of a stated order (`utf-16le`)
    where it is their own, as the WHATWG Encoding Standard leaves it out; in `UTF-16` and
    `UTF-32` it decides the order. Without one, their order is read from the text
    (`_sniffed_order`), where Python's codecs read it in the host's order."""
    if codec == "utf-8":
        return "utf-8-sig", data
    own = _OWN_MARKS.get(codec)
    if own is not None:
        return codec, data.removeprefix(own)
    marks = _MARKS.get(codec)
    if marks is None:
        return codec, data
    for mark, order in zip(marks, ("le", "be"), strict=True):
        if data.startswith(mark):
            return f"{codec}-{order}", data[len(mark) :]
    return f"{codec}-{_sniffed_order(codec, data)}", data


def _sniffed_order(codec: str, data: bytes) -> str:
    """The byte order (`le`, `be`) of UTF-16 or UTF-32 text without a byte-order mark.
    UTF-16: the order in which its units' high bytes are fewer apart (`_high_bytes`): a
    script's characters share a few high bytes (ASCII's is zero, CJK's fall in one block),
    where their low bytes spread, so a character whose low byte is zero (`一`, U+4E00; the
    ideographic space, U+3000) does not read as Latin the other way; where that does not
    tell, the order in which more of its units read as Latin text (`_reads_as_text`). UTF-32:
    the order in which more of its units are characters at all. Little-endian where nothing
    tells, as the WHATWG Encoding Standard reads the label `utf-16`, and as such text is
    written in the wild (Windows' and .NET's "Unicode"), not RFC 2781's big-endian."""
    size = 2 if codec == "utf-16" else 4
    sample = data[:_SNIFFED]
    if size == 2:
        big_spread, little_spread = _high_bytes(sample[0::2]), _high_bytes(sample[1::2])
        if big_spread != little_spread:
            return "be" if big_spread < little_spread else "le"
    big = little = 0
    for start in range(0, len(sample) - size + 1, size):
        unit = sample[start : start + size]
        big += _reads_as_text(int.from_bytes(unit, "big"), size)
        little += _reads_as_text(int.from_bytes(unit, "little"), size)
    return "be" if big > little else "le"


def _high_bytes(bytes_: bytes) -> int:
    """How many different values the high bytes of UTF-16 units take, read in one order
    (every other byte of the text, from the first or the second)."""
    return len(set(bytes_))


def _reads_as_text(value: int, size: int) -> bool:
    """Whether a unit of `size` bytes read in one order as `value` tells that order. UTF-16:
    a character below U+0100 (Latin letters, digits, markup: its high byte zero, where it
    falls in that order), but U+00D8 to U+00DF, whose byte begins a surrogate (the low half
    of U+1F600, DE00, is U+00DE read the other way). UTF-32: a character at all (its
    highest byte zero and its next at most 0x10), which few are read the other way."""
    if size == 2:
        return value < 0x100 and not 0xD8 <= value <= 0xDF
    return value <= 0x10FFFF


def decode_text(data: bytes, charset: str | None, errors: str = "strict") -> str:
    """A text document's bytes as text in its `charset` (UTF-8 where it names none): one
    reading for every encoder, and for `tpm`'s estimate (with `errors="replace"`), alike on
    every machine (`_marked_codec`: a byte-order mark is no part of the text, and UTF-16's
    and UTF-32's order without one is read from the text).
    `LookupError` for a charset allama cannot read (`text_codec`; a codec of no text, as
    `base64`, or one that raises a bare `UnicodeError`, too), `UnicodeDecodeError` for bytes
    that are no text in it."""
    codec = text_codec(charset)
    read, text = _marked_codec(codec, data)
    try:
        return text.decode(read, errors)
    except UnicodeDecodeError:
        raise
    except UnicodeError as error:  # (a codec's own refusal, not the bytes')
        raise LookupError(f"{codec} reads no text") from error


def unreadable_charset(what: str, charset: str | None) -> str:
    """Why a document whose charset `decode_text` cannot read is refused, in the words
    every encoder uses: `what` is the document (`a text/plain document`)."""
    return f"{what} names charset {charset}, which allama cannot read"


class UnreadablePart(ValueError):
    """A part whose own bytes cannot be read (a data URL of no valid base64, text not in its
    charset): the caller's input to mend, which an encoder refuses before sending, where
    another `ValueError` is a part the form has no place for, left out with a warning."""


def document_text(data: bytes, charset: str | None) -> str:
    """A text/plain document's bytes as text, read in its `charset` (UTF-8 where it names
    none), for the encoders that send a document as its text (Anthropic, OpenAI, Ollama);
    an `UnreadablePart` saying why, in the words each refuses it with, where it cannot be
    read."""
    try:
        return decode_text(data, charset)
    except LookupError:
        raise UnreadablePart(unreadable_charset("a text/plain document", charset)) from None
    except UnicodeDecodeError:
        utf8 = charset is None or charset in ("utf-8", "utf8")
        read = "UTF-8 text" if utf8 else f"text in its charset ({charset})"
        raise UnreadablePart(f"a text/plain document must be {read}") from None
