"""A request's input tokens as a tokens-per-minute limit guesses them before sending: text
documents count as text does, images and PDFs as the providers roughly count them."""

from __future__ import annotations

import base64
import struct
import zlib

import pytest

from allama import ChatRequest
from allama._tokens import guessed_input_tokens, image_size, pdf_pages
from allama.types import DocumentPart, ImagePart

ASKED = "Here is the invoice."  # 20 characters: 5 tokens


def _asking(*parts: ImagePart | DocumentPart) -> ChatRequest:
    return ChatRequest("m").system("Extract.").user(ASKED, *parts)


def _png(width: int, height: int) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + header + b"\0\0\0\0"


def _jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0"
    exif = b"\xff\xe1" + struct.pack(">H", 2 + 300) + b"\0" * 300
    frame = b"\xff\xc2" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\0"
    return b"\xff\xd8" + app0 + exif + frame + b"\xff\xda"


def _gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\0\0\0"


def _webp(width: int, height: int) -> bytes:
    sizes = (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    chunk = b"VP8X" + struct.pack("<I", 10) + b"\0\0\0\0" + sizes
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def test_a_text_document_counts_as_the_same_text_in_the_message() -> None:
    words = "word " * 20000
    document = DocumentPart(data=words.encode(), media_type="text/plain", title="invoice")
    as_document = guessed_input_tokens(ChatRequest("m").user(ASKED, document))
    as_text = guessed_input_tokens(ChatRequest("m").user(ASKED + words + "invoice"))
    assert (as_document, as_text) == (25006, 25006)


@pytest.mark.parametrize(
    ("data", "media_type"),
    [
        (("héllo wörld " * 100).encode("utf-16"), "text/plain; charset=UTF-16"),
        (("héllo wörld " * 100).encode("latin-1"), "text/plain; charset=iso-8859-1"),
        (("héllo wörld " * 100).encode(), "text/markdown"),
        (("héllo wörld " * 100).encode(), "application/json"),
        (("héllo wörld " * 100).encode(), "text/plain; charset=no-such-charset"),
        # Python's codecs of no charset: read as UTF-8, where they raised `UnicodeError`.
        (("héllo wörld " * 100).encode(), "text/plain; charset=undefined"),
        (("héllo wörld " * 100).encode(), "text/plain; charset=idna"),
        (("héllo wörld " * 100).encode(), "application/json; charset=punycode"),
    ],
)
def test_a_text_document_is_read_in_its_charset(data: bytes, media_type: str) -> None:
    document = DocumentPart(data=data, media_type=media_type)
    assert guessed_input_tokens(_asking(document)) == (8 + 20 + 1200) // 4


@pytest.mark.parametrize(
    "url",
    [
        "data:text/plain;base64," + base64.b64encode(b"x" * 400).decode(),
        "DATA:;BASE64," + base64.b64encode(b"x" * 400).decode(),  # RFC 2397's text/plain
        "data:text/csv," + "x" * 399 + "%20",
    ],
)
def test_a_text_document_in_a_data_url_counts_its_text(url: str) -> None:
    assert guessed_input_tokens(_asking(DocumentPart(url=url))) == (8 + 20 + 400) // 4


@pytest.mark.parametrize(
    ("image", "tokens"),
    [
        (_png(1000, 1000), 1334),  # 1,000,000 / 750, rounded up
        (_png(3000, 2000), 1600),  # scaled to 1568 x 1045: at most 1,600
        (_png(4000, 100), 85),  # scaled to 1568 x 39: 82, and at least 85
        (_png(10, 10), 85),
        (_jpeg(640, 480), 410),
        (_gif(300, 200), 85),
        (_gif(600, 500), 400),
        (_webp(800, 600), 640),
        (b"BM" + b"\0" * 100, 1600),  # a format whose header is not read
    ],
    ids=["png", "large", "long", "tiny", "jpeg", "gif", "gif-larger", "webp", "bmp"],
)
def test_an_image_counts_by_its_size(image: bytes, tokens: int) -> None:
    part = ImagePart(data=image, media_type="image/png")
    assert guessed_input_tokens(_asking(part)) == 7 + tokens


def test_an_image_in_a_data_url_is_read_and_one_by_url_counts_the_most() -> None:
    inline = "data:image/png;base64," + base64.b64encode(_png(1000, 1000)).decode()
    assert guessed_input_tokens(_asking(ImagePart(url=inline))) == 7 + 1334
    assert guessed_input_tokens(_asking(ImagePart(url="https://x.test/a.png"))) == 7 + 1600


def _pdf(*objects: bytes, padding: int = 0) -> bytes:
    body = b"".join(b"%d 0 obj\n" % n + each + b"\nendobj\n" for n, each in enumerate(objects, 1))
    return b"%PDF-1.4\n" + body + b"%" + b"x" * padding + b"\n%%EOF\n"


def test_a_pdf_counts_2000_tokens_a_page() -> None:
    pages = [b"<< /Type /Page /Parent 1 0 R >>", b"<</Type/Page/Parent 1 0 R>>"] * 2
    pdf = _pdf(b"<< /Type /Pages /Kids [2 0 R 3 0 R 4 0 R 5 0 R] /Count 4 >>", *pages)
    part = DocumentPart(data=pdf, media_type="application/pdf")
    assert (pdf_pages(pdf), guessed_input_tokens(_asking(part))) == (4, 7 + 8000)


def test_a_pdf_whose_pages_are_in_object_streams_is_counted_there() -> None:
    kept = b"2 0 3 30 << /Type /Page /Parent 1 0 R >> << /Type /Page /Parent 1 0 R >>"
    packed = zlib.compress(kept)
    stream = b"<< /Type /ObjStm /N 2 /First 8 /Filter /FlateDecode /Length %d >>\nstream\r\n"
    pdf = _pdf(stream % len(packed) + packed + b"\nendstream")
    assert pdf_pages(pdf) == 2


def test_a_pdf_whose_pages_do_not_show_counts_one_a_50_kb() -> None:
    pdf = _pdf(b"<< /Type /Catalog >>", padding=120_000)
    assert pdf_pages(pdf) == 3
    assert pdf_pages(b"%PDF-1.7\n") == 1


def test_a_document_by_url_or_of_another_type_counts_one_page() -> None:
    by_url = DocumentPart(url="https://x.test/report.pdf")
    other = DocumentPart(data=b"PK\x03\x04" + b"\0" * 5000, media_type="application/zip")
    assert guessed_input_tokens(_asking(by_url, other)) == 7 + 4000


def test_without_media_only_the_text_counts() -> None:
    request = _asking(
        ImagePart(data=_png(1000, 1000), media_type="image/png"),
        DocumentPart(data=_pdf(b"<< /Type /Page >>"), media_type="application/pdf"),
        DocumentPart(data=b"x" * 400, media_type="text/plain"),
    )
    assert guessed_input_tokens(request, media=False) == (8 + 20 + 400) // 4
    assert guessed_input_tokens(request) == (8 + 20 + 400) // 4 + 1334 + 2000


def test_image_size_reads_no_more_than_a_header_holds() -> None:
    assert image_size(_png(1, 2)[:20]) is None
    assert image_size(_jpeg(640, 480)[:100]) is None
    assert image_size(b"\xff\xd8\xff\xda") is None
    assert image_size(_webp(16383, 9)) == (16383, 9)


def test_a_document_is_read_once_while_it_lives_not_at_each_send(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A template's PDF is in every input's request, each guessed at each send (retries and
    # repairs too): it was read again each time, a few ms of the event loop a MB.
    import allama._tokens as tokens

    read: list[int] = []

    def counting(data: bytes) -> int:
        read.append(len(data))
        return pdf_pages(data)

    monkeypatch.setattr(tokens, "pdf_pages", counting)
    pdf = _pdf(b"<< /Type /Page >>", b"<< /Type /Page >>")
    shared = DocumentPart(data=pdf, media_type="application/pdf", title="invoice")
    equal = DocumentPart(data=bytes(bytearray(pdf)), media_type="application/pdf", title="invoice")
    guessed = [
        guessed_input_tokens(ChatRequest("m").user(ASKED + str(n), part))
        for n, part in enumerate((shared, shared, equal, shared))
    ]
    assert guessed == [(21 + 7) // 4 + 4000] * 4
    assert read == [len(pdf)]
    # Without media, its text alone, as before: the PDF is not read for it.
    assert guessed_input_tokens(ChatRequest("m").user(ASKED, shared), media=False) == 6
    assert read == [len(pdf)]


def test_an_image_in_a_data_url_is_sized_from_its_first_few_kb(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A 5 MB PNG's data URL was decoded whole at each send, its header alone needed.
    import allama._tokens as tokens

    seen: list[int] = []

    def recording(data: bytes) -> tuple[int, int] | None:
        seen.append(len(data))
        return image_size(data)

    monkeypatch.setattr(tokens, "image_size", recording)
    large = base64.b64encode(_png(1000, 1000) + b"\0" * 5_000_000).decode()
    wrapped = "\n".join(large[at : at + 76] for at in range(0, 20_000, 76)) + large[20_000:]
    for url in (f"data:image/png;base64,{large}", f"DATA:image/png;BASE64,{wrapped}"):
        assert guessed_input_tokens(_asking(ImagePart(url=url))) == 7 + 1334
    assert seen and max(seen) <= 6_144
    # A JPEG's frame header past a long EXIF segment is read as far as it lies.
    seen.clear()
    exif = b"\xff\xe1" + struct.pack(">H", 2 + 60_000) + b"\0" * 60_000
    jpeg = _jpeg(640, 480)
    photo = jpeg[:2] + exif + jpeg[2:] + b"\0" * 1_000_000
    url = "data:image/jpeg;base64," + base64.b64encode(photo).decode()
    assert guessed_input_tokens(_asking(ImagePart(url=url))) == 7 + 410
    assert max(seen) < 200_000
    # What is not base64 where the header is counts as an image not read, as before.
    assert guessed_input_tokens(_asking(ImagePart(url="data:image/png;base64,*" + large))) == (
        7 + 1600
    )


def _object_stream(content: bytes) -> bytes:
    packed = zlib.compress(content)
    head = b"<< /Type /ObjStm /Filter /FlateDecode /Length %d >>\nstream\n" % len(packed)
    return head + packed + b"\nendstream"


@pytest.mark.parametrize(
    "streams",
    [
        ("pages", "large"),  # the cap met after the pages: counted 2, the pages it saw
        ("large", "pages"),  # met before them: counted 3, one a 50 KB begun
        ("other", "pages"),  # a stream not Flate, not read: counted 2
    ],
)
def test_a_pdf_whose_object_streams_are_not_all_read_counts_at_least_by_its_size(
    monkeypatch: pytest.MonkeyPatch, streams: tuple[str, ...]
) -> None:
    import allama._tokens as tokens

    monkeypatch.setattr(tokens, "_PDF_INFLATED", 1_000)  # (4 MB: the test made small)
    made = {
        "pages": _object_stream(b"2 0 3 30 << /Type /Page >> << /Type /Page >>"),
        "large": _object_stream(b" " * 5_000),
        "other": b"<< /Type /ObjStm /Filter /LZWDecode >>\nstream\n\x80\x0b\x60\nendstream",
    }
    pdf = _pdf(*(made[name] for name in streams), padding=120_000)
    assert pdf_pages(pdf) == 3
    # Read whole, its pages are what they say, whatever its size.
    assert pdf_pages(_pdf(made["pages"], padding=120_000)) == 2


@pytest.mark.parametrize(
    ("url", "media_type"),
    [
        ("data:text/plain;charset=utf-16;base64,", None),
        ("data:text/plain;base64,", "text/plain; charset=utf-16"),  # the part's charset
    ],
)
def test_a_text_document_in_a_data_url_is_read_in_its_charset(
    url: str, media_type: str | None
) -> None:
    """UTF-16 read as UTF-8 would count twice the characters, and a BOM."""
    text = ("héllo wörld " * 100).encode("utf-16")
    document = DocumentPart(url=url + base64.b64encode(text).decode(), media_type=media_type)
    assert guessed_input_tokens(_asking(document)) == (8 + 20 + 1200) // 4
