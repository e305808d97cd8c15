"""A request's input tokens guessed before any usage says: for a limit of tokens per minute
and a budget's guess of a batch job, which are only ever checked against such a guess.

Text is counted at four characters a token: the messages' text, and a document's that is
text (`text/plain` and the types read as text: Markdown, CSV, HTML, JSON, XML), read in its
charset, given as bytes or in a data URL. Images and PDFs are counted roughly as the
providers count them, from what their bytes tell without decoding the images or pages:

- an image: as Anthropic counts one (width x height / 750, the image scaled to fit 1568
  pixels a side, at most 1,600 tokens), at least 85 (OpenAI's least, at low detail). Its
  size is read from a PNG, JPEG, GIF or WebP header (of a data URL, the first few KB
  decoded); an image of another format, or given by URL, counts 1,600. OpenAI counts a
  large one at about half that (tiles of 512 pixels, 170 tokens each, and 85), Gemini at
  258 a tile of 768 pixels.
- a PDF: 2,000 tokens a page, as Anthropic and OpenAI read one (each page's text and an
  image of it: Anthropic says 1,500 to 3,000 a page); Gemini counts 258 a page. Its pages
  are counted by its `/Type /Page` objects, those in its object streams too (4 MB of them
  inflated at most); one whose pages are not all seen so counts one a 50 KB begun, or
  the pages seen where they are more (`pdf_pages`).
- a document given by URL, or of another type, counts as one PDF page.

So the guess errs high for Gemini's images and PDFs, and low for code, scripts other than
Latin, and a document by URL longer than a page.

What a document counts is kept while the part lives (`_counted`): a request is guessed at
each send, its retries and repairs too, and a template's parts are in every input's
request, so a PDF of a few MB is read once, not at each send.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
import zlib
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

if TYPE_CHECKING:
    from allama.types import ChatRequest
    from allama.types._content import DocumentPart, ImagePart, TextPart
    from allama.types._data_urls import DataUrl

__all__ = [
    "CHARS_PER_TOKEN",
    "IMAGE_TOKENS",
    "PDF_PAGE_TOKENS",
    "guessed_input_tokens",
    "image_size",
    "pdf_pages",
]

CHARS_PER_TOKEN = 4
"""About as many characters as a token of English text has (more tokens for code, and for
scripts other than Latin): the guess errs low there, never high."""

IMAGE_TOKENS = 1_600
"""The most an image is counted, and an image whose size is not known (by URL, or of a
format whose header is not read): about what Anthropic counts for the largest image it
reads without scaling it down (1.15 megapixels)."""

_LEAST_IMAGE_TOKENS = 85
"""OpenAI's count for any image at low detail, and its base for each at high detail."""

_IMAGE_EDGE = 1568
"""The longest side Anthropic reads an image at: a larger one is scaled down first."""

_PIXELS_PER_TOKEN = 750

PDF_PAGE_TOKENS = 2_000
"""A PDF page as Anthropic and OpenAI read it: its text and an image of it (about 1,600)."""

_PDF_BYTES_PER_PAGE = 50_000
"""How many bytes a page is taken for in a PDF whose pages its bytes do not show."""

_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z])")
"""A page object of a PDF (and not the `/Pages` of its tree), as its bytes show it."""

_PDF_OBJECT_STREAM = re.compile(rb"/Type\s*/ObjStm(?![A-Za-z])")

_PDF_INFLATED = 4_000_000
"""How many bytes of a PDF's object streams are inflated at most, to find its pages."""

_IMAGE_HEAD = 8_192
"""How many characters of an image's data URL are decoded first, for its size: about 6 KB,
which hold a PNG's, GIF's or WebP's header and most JPEGs' frame header."""

_COUNTED: WeakKeyDictionary[DocumentPart, dict[bool, tuple[int, int]]] = WeakKeyDictionary()
"""What each document part counts (its characters of text, its tokens), with media and
without, kept while the part lives. Parts are frozen models that hash by their fields,
whose bytes and text keep their hash once made: finding a part costs a few microseconds,
its bytes hashed once (a quarter of a millisecond a MB), where reading a PDF of 5 MB costs
2 to 17 ms, and one in a data URL 40. An image is not kept: its header alone is read."""


@functools.cache
def _part_types() -> tuple[type[DocumentPart], type[ImagePart], type[TextPart], type[Any]]:
    """The message and part types, imported once as first needed (not at the top: building
    a provider imports this module, and no model; an import each call cost a microsecond)."""
    from allama.types._content import DocumentPart, ImagePart, TextPart
    from allama.types._messages import UserMessage

    return DocumentPart, ImagePart, TextPart, UserMessage


def guessed_input_tokens(request: ChatRequest, *, media: bool = True) -> int:
    """The request's input tokens, as the module says. `media=False`: its text alone (text
    documents too), which errs low as text does: for a check that must not err high, as
    whether a request alone is over a quota."""
    DocumentPart, ImagePart, TextPart, UserMessage = _part_types()
    chars = 0
    tokens = 0
    for message in request.messages:
        if not isinstance(message, UserMessage):
            chars += len(message.text() or "")
            continue
        for part in message.content:
            if isinstance(part, TextPart):
                chars += len(part.text)
            elif isinstance(part, DocumentPart):
                counted_chars, counted = _counted(part, media)
                chars += counted_chars
                tokens += counted
            elif media and isinstance(part, ImagePart):
                tokens += _image_tokens(part)  # (its header alone: microseconds)
    return chars // CHARS_PER_TOKEN + tokens


def _counted(part: DocumentPart, media: bool) -> tuple[int, int]:
    """A document's characters of text and tokens (`media` as `guessed_input_tokens`
    takes it), read once while the part lives (`_COUNTED`)."""
    try:
        kept = _COUNTED.get(part)
    except TypeError:  # (a part that neither hashes nor is weakly referred to: read again)
        kept = None
    found = None if kept is None else kept.get(media)
    if found is not None:
        return found
    text, tokens = _document(part, media=media)
    found = (len(text) + len(part.title or ""), tokens)
    if kept is None:
        with contextlib.suppress(TypeError):
            _COUNTED[part] = {media: found}
    else:
        kept[media] = found
    return found


def _document(part: DocumentPart, *, media: bool) -> tuple[str, int]:
    """A document's text, where it is text, and its tokens otherwise (a PDF's, or the
    default; none without `media`)."""
    from allama.types._content import _is_text
    from allama.types._data_urls import data_url, decode_text, inline_media_type, part_media_type

    media_type, charset = part_media_type(part.media_type)
    data = part.data
    if part.url is not None:
        inline = data_url(part.url)
        if inline is None:
            return "", PDF_PAGE_TOKENS if media else 0
        # The URL's own type and charset, else the part's, as the encoders read them.
        media_type, charset = inline_media_type(inline, part.media_type)
        media_type = media_type or "text/plain"  # RFC 2397's default
        data = _inline_bytes(inline)
    if data is None:
        return "", PDF_PAGE_TOKENS if media else 0
    if _is_text(media_type):
        try:
            return decode_text(data, charset, errors="replace"), 0
        except LookupError:  # a charset allama cannot read (refused when sent): as UTF-8
            return data.decode("utf-8", errors="replace"), 0
    if not media:
        return "", 0
    if media_type == "application/pdf":
        return "", PDF_PAGE_TOKENS * pdf_pages(data)
    return "", PDF_PAGE_TOKENS


def _inline_bytes(url: DataUrl) -> bytes | None:
    """A data URL's bytes (`None` where its base64 is not valid)."""
    from allama.types._data_urls import base64_data

    decoded = base64_data(url)
    return None if decoded is None else decoded.raw


def pdf_pages(data: bytes) -> int:
    """A PDF's pages, roughly: its page objects, those in its object streams too (which a
    PDF since 1.5 may keep them in, compressed: 4 MB of them inflated at most). Where its
    pages are not all seen so (none shows; or an object stream is past the 4 MB, cut by
    them, or not Flate), it counts one page a 50 KB begun, or the pages seen where they
    are more: the same whether the cap fell before the streams holding its pages or among
    them, where the pages seen before it were counted alone."""
    found = len(_PDF_PAGE.findall(data))
    if found:
        return found
    view = memoryview(data)
    budget = _PDF_INFLATED
    whole = True
    for stream in _PDF_OBJECT_STREAM.finditer(data):
        begins = data.find(b"stream", stream.end())
        if begins < 0:
            break
        if budget <= 0:
            whole = False
            break
        begins += 6
        begins += 2 if data[begins : begins + 2] == b"\r\n" else 1
        inflating = zlib.decompressobj()
        try:
            inflated = inflating.decompress(view[begins:], budget)
        except zlib.error:  # not Flate: not read
            whole = False
            continue
        budget -= len(inflated)
        whole = whole and inflating.eof  # (a stream the cap cut, or cut short itself)
        found += len(_PDF_PAGE.findall(inflated))
    by_size = max(1, -(-len(data) // _PDF_BYTES_PER_PAGE))
    if not whole:
        return max(found, by_size)
    return found or by_size


def _image_tokens(part: ImagePart) -> int:
    if part.url is not None:
        size = _inline_image_size(part.url)
    else:
        size = None if part.data is None else image_size(part.data)
    if size is None:
        return IMAGE_TOKENS
    width, height = size
    scale = min(1.0, _IMAGE_EDGE / max(width, height, 1))
    pixels = (width * scale) * (height * scale)
    return max(_LEAST_IMAGE_TOKENS, min(IMAGE_TOKENS, math.ceil(pixels / _PIXELS_PER_TOKEN)))


def _inline_image_size(url: str) -> tuple[int, int] | None:
    """The size of an image given by URL, where it is a data URL: from the first few KB of
    its data (`_IMAGE_HEAD`), not all of it, nor a copy of it. A JPEG whose frame header
    lies past them (after an EXIF thumbnail) is read 16 times as far, and so on, up to the
    whole."""
    from allama.types._data_urls import data_url, leading_data

    begins = url.find(",") + 1
    inline = data_url(url[:begins]) if begins else None  # (its header alone)
    if inline is None:
        return None
    chars = _IMAGE_HEAD
    while begins + chars < len(url):
        head = leading_data(url[begins : begins + chars], encoded=inline.base64)
        if head is None:
            return None
        size = image_size(head)
        if size is not None or head[:2] != b"\xff\xd8":
            return size
        chars *= 16
    data = _inline_bytes(inline._replace(data=url[begins:]))
    return None if data is None else image_size(data)


def image_size(data: bytes) -> tuple[int, int] | None:
    """An image's width and height in pixels, read from its PNG, GIF, WebP or JPEG header;
    `None` for another format, or a header cut short."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp_size(data)
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width = int.from_bytes(data[26:28], "little") & 0x3FFF
        return width, int.from_bytes(data[28:30], "little") & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(data) >= 30:
        width = int.from_bytes(data[24:27], "little") + 1
        return width, int.from_bytes(data[27:30], "little") + 1
    return None


_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
"""The markers of a JPEG's frame header (SOFn), which holds its size: not the Huffman and
arithmetic coding tables (C4, CC) nor the reserved C8."""

_JPEG_BARE = frozenset((0x01, *range(0xD0, 0xD9)))
"""Markers with no length after them."""


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """A JPEG's size from its frame header, found by the segments' lengths (a few steps
    past the metadata segments, reading none of them)."""
    at = 2
    while at + 9 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill
            at += 1
            continue
        if marker in _JPEG_FRAMES:
            height = int.from_bytes(data[at + 5 : at + 7], "big")
            return int.from_bytes(data[at + 7 : at + 9], "big"), height
        if marker in _JPEG_BARE:
            at += 2
            continue
        if marker == 0xDA:  # the scan begins, with no frame header before it
            return None
        at += 2 + int.from_bytes(data[at + 2 : at + 4], "big")
    return None
