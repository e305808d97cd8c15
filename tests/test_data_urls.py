"""Data URLs in image and document parts, as Anthropic, Gemini, Ollama and the OpenAI
family (Chat Completions presets and the Responses API) are sent them: one reader for all. A
data URL's `charset` is read as a part's own media type's is (RFC 2397:
`data:text/plain;charset=iso-8859-1;base64,...`); its data is read as browsers read it,
percent-decoded first (`%3D` is `=`), so a document's text not marked base64 goes as its
text; base64 of the URL-safe alphabet is read too, and every provider is sent standard
base64. One that cannot be read (no valid base64, an image's of no data or not base64) is
refused before sending by every provider, rather than answered 400 or paid for without it."""

from __future__ import annotations

import base64
import codecs
from typing import Any

import pytest

import allama
from allama import ChatRequest
from allama.errors import InvalidRequestError
from allama.types import DocumentPart, ImagePart
from allama.types._data_urls import decode_text

MODELS = {
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
    "ollama": "llava",
    "openai": "gpt-4.1",
    "openai-responses": "gpt-4.1",
    "azure-openai": "gpt-4.1",
    "groq": "meta-llama/llama-4-scout-17b-16e-instruct",
    "mistral": "pixtral-large-latest",
    "openrouter": "openai/gpt-4.1",
}
CHAT = ["openai", "azure-openai", "groq", "mistral", "openrouter"]
"""The Chat Completions presets whose requests carry images as data URLs."""
IMAGES = ["anthropic", "gemini", "ollama", *CHAT, "openai-responses"]
DOCUMENTS = ["anthropic", "gemini", "ollama", "openai", "openai-responses"]


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)


def sent(preset: str, part: ImagePart | DocumentPart) -> tuple[Any, list[str]]:
    """What the provider is sent for `part` (given after a text part), and the warnings."""
    if preset == "openai-responses":
        target = allama.provider("openai", api="responses", api_key="k")
    elif preset == "azure-openai":
        target = allama.provider(preset, api_key="k", base_url="https://r.openai.azure.com")
    else:
        target = allama.provider(preset, api_key="k")
    http, warnings = target._prepare(ChatRequest(MODELS[preset]).user("x", part), stream=False)
    body = http.body
    if preset == "anthropic":
        wire = body["messages"][0]["content"][1]
    elif preset == "gemini":
        wire = body["contents"][0]["parts"][1]
    elif preset in CHAT:
        wire = body["messages"][0]["content"][1:]
    elif preset == "openai-responses":
        wire = body["input"][0]["content"][1:]
    else:
        wire = {key: value for key, value in body["messages"][0].items() if key != "role"}
    return wire, [warning.message for warning in warnings]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def as_text(preset: str, text: str) -> Any:
    """How each provider is sent a plain-text document holding `text`."""
    if preset == "anthropic":
        return {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": text},
        }
    if preset == "gemini":
        return {"inlineData": {"mimeType": "text/plain", "data": _b64(text.encode())}}
    if preset == "openai":
        return [{"type": "text", "text": text}]
    if preset == "openai-responses":
        return [{"type": "input_text", "text": text}]
    return {"content": f"x\n\n{text}"}


LATIN = _b64("café".encode("latin-1"))
UTF16 = _b64("hi".encode("utf-16-le"))


@pytest.mark.parametrize("preset", DOCUMENTS)
@pytest.mark.parametrize(
    ("document", "text"),
    [
        (DocumentPart(url=f"data:text/plain;charset=iso-8859-1;base64,{LATIN}"), "café"),
        (DocumentPart(url=f'DATA:Text/Plain;Charset="ISO-8859-1";Base64,{LATIN}'), "café"),
        (DocumentPart(url=f"data:text/plain;charset=utf-16le;base64,{UTF16}"), "hi"),
        # RFC 2397's shorthand: the type left out, the charset given, is text/plain.
        (DocumentPart(url=f"data:;charset=iso-8859-1;base64,{LATIN}"), "café"),
        # The part's charset where the URL names none; the URL's over the part's.
        (
            DocumentPart(
                url=f"data:text/plain;base64,{LATIN}", media_type="text/plain; charset=latin-1"
            ),
            "café",
        ),
        (
            DocumentPart(
                url=f"data:text/plain;charset=utf-8;base64,{_b64('café'.encode())}",
                media_type="text/plain; charset=latin-1",
            ),
            "café",
        ),
    ],
)
def test_a_document_data_url_is_read_in_its_charset(
    preset: str, document: DocumentPart, text: str
) -> None:
    assert sent(preset, document) == (as_text(preset, text), [])


@pytest.mark.parametrize("preset", DOCUMENTS)
@pytest.mark.parametrize(
    ("url", "text"),
    [
        ("data:text/plain,hello%20world", "hello world"),
        ("data:,hello", "hello"),  # RFC 2397: text/plain
        ("data:text/plain;charset=iso-8859-1,caf%E9", "café"),
    ],
)
def test_a_document_data_url_not_marked_base64_goes_as_its_text(
    preset: str, url: str, text: str
) -> None:
    assert sent(preset, DocumentPart(url=url)) == (as_text(preset, text), [])


@pytest.mark.parametrize("preset", ["openai", "openai-responses"])
@pytest.mark.parametrize(
    ("media_type", "data", "text"),
    [
        ("text/plain; charset=utf-8", "café".encode(), "café"),
        ("Text/Plain; Charset=ISO-8859-1", "café".encode("latin-1"), "café"),
    ],
)
def test_openai_reads_a_text_document_in_the_charset_its_media_type_names(
    preset: str, media_type: str, data: bytes, text: str
) -> None:
    document = DocumentPart(data=data, media_type=media_type)
    assert sent(preset, document) == (as_text(preset, text), [])


INVOICE = "Invoice total: 42 €"
CJK = "合計金額は四十二ユーロ"
CHINESE = "一个人走在路上。\n他看见一棵树。\n一只鸟在唱歌。"
JAPANESE = "\u3000吾輩は猫である。名前はまだ無い。\n\u3000どこで生れたかとんと見当がつかぬ。"
CYRILLIC = "Привет мир"
KOREAN = (
    "대한민국은 민주공화국이다. 대한민국의 주권은 국민에게 있고, 모든 권력은 국민으로부터 나온다."
)


@pytest.mark.parametrize("preset", DOCUMENTS)
@pytest.mark.parametrize(
    ("charset", "data", "text"),
    [
        # With no byte-order mark, the order is where the zero bytes of Latin text fall:
        # little-endian as Windows and .NET write it, big-endian too, alike on every machine.
        pytest.param("utf-16", INVOICE.encode("utf-16-le"), INVOICE, id="utf16-le"),
        pytest.param("utf-16", INVOICE.encode("utf-16-be"), INVOICE, id="utf16-be"),
        pytest.param("UTF-32", INVOICE.encode("utf-32-le"), INVOICE, id="utf32-le"),
        pytest.param("UTF-32", INVOICE.encode("utf-32-be"), INVOICE, id="utf32-be"),
        # (every UTF-32 unit has its zero byte, whatever the script)
        pytest.param("utf-32", CJK.encode("utf-32-be"), CJK, id="utf32-be-cjk"),
        # No zero byte tells the order of CJK text in UTF-16: little-endian, as WHATWG reads it.
        pytest.param("utf-16", CJK.encode("utf-16-le"), CJK, id="utf16-cjk"),
        # A character whose low byte is zero (`一`, the ideographic space) reads as Latin
        # the other way: the spread of the high bytes tells the order, not such a byte.
        pytest.param("utf-16", CHINESE.encode("utf-16-le"), CHINESE, id="utf16-le-chinese"),
        pytest.param("utf-16", CHINESE.encode("utf-16-be"), CHINESE, id="utf16-be-chinese"),
        pytest.param("utf-16", JAPANESE.encode("utf-16-le"), JAPANESE, id="utf16-le-japanese"),
        pytest.param("utf-16", JAPANESE.encode("utf-16-be"), JAPANESE, id="utf16-be-japanese"),
        pytest.param("utf-16", CYRILLIC.encode("utf-16-be"), CYRILLIC, id="utf16-be-cyrillic"),
        pytest.param("utf-16", KOREAN.encode("utf-16-be"), KOREAN, id="utf16-be-korean"),
        # A mark decides the order, and is no part of the text.
        pytest.param(
            "utf-16", codecs.BOM_UTF16_LE + INVOICE.encode("utf-16-le"), INVOICE, id="le-mark"
        ),
        pytest.param("utf-16", codecs.BOM_UTF16_BE + CJK.encode("utf-16-be"), CJK, id="be-mark"),
        pytest.param(
            "utf-32", codecs.BOM_UTF32_LE + INVOICE.encode("utf-32-le"), INVOICE, id="utf32-le-mark"
        ),
        pytest.param(
            "utf-32", codecs.BOM_UTF32_BE + INVOICE.encode("utf-32-be"), INVOICE, id="utf32-be-mark"
        ),
    ],
)
def test_a_utf16_or_utf32_documents_order_is_its_mark_or_where_its_zero_bytes_fall(
    preset: str, charset: str, data: bytes, text: str
) -> None:
    document = DocumentPart(url=f"data:text/plain;charset={charset};base64,{_b64(data)}")
    assert sent(preset, document) == (as_text(preset, text), [])


@pytest.mark.parametrize("preset", DOCUMENTS)
@pytest.mark.parametrize(
    ("charset", "mark", "codec"),
    [
        ("utf-16le", codecs.BOM_UTF16_LE, "utf-16-le"),
        ("UTF-16BE", codecs.BOM_UTF16_BE, "utf-16-be"),
        ("utf-32le", codecs.BOM_UTF32_LE, "utf-32-le"),
        ("utf-32be", codecs.BOM_UTF32_BE, "utf-32-be"),
    ],
    ids=["utf-16le", "utf-16be", "utf-32le", "utf-32be"],
)
def test_a_documents_own_byte_order_mark_is_no_part_of_its_text_in_a_stated_order(
    preset: str, charset: str, mark: bytes, codec: str
) -> None:
    # As WHATWG leaves it out, and as a UTF-8 document's is: only the leading one.
    data = mark + "h\ufeffé".encode(codec)
    document = DocumentPart(data=data, media_type=f"text/plain; charset={charset}")
    assert sent(preset, document) == (as_text(preset, "h\ufeffé"), [])


@pytest.mark.parametrize("preset", ["anthropic", "ollama", "openai", "openai-responses"])
@pytest.mark.parametrize("media_type", ["text/plain", "text/plain; charset=utf-8"])
def test_a_utf8_documents_leading_byte_order_mark_is_no_part_of_its_text(
    preset: str, media_type: str
) -> None:
    # Only the leading one: a U+FEFF inside the text is the text's.
    data = codecs.BOM_UTF8 + "caf\ufeffé".encode()
    assert sent(preset, DocumentPart(data=data, media_type=media_type)) == (
        as_text(preset, "caf\ufeffé"),
        [],
    )


def test_the_reading_of_a_document_is_the_same_on_every_machine() -> None:
    assert decode_text("hi".encode("utf-16-be"), "utf-16") == "hi"
    assert decode_text("hi".encode("utf-16-le"), "utf-16") == "hi"
    assert decode_text("hi".encode("utf-32-le"), "u32") == "hi"  # Python's alias of UTF-32
    assert decode_text(CJK.encode("utf-16-le"), "utf-16") == CJK
    # A zero byte beside a surrogate's tells nothing: U+1F600's low half is DE00.
    assert decode_text("a😀".encode("utf-16-be"), "utf-16") == "a😀"
    assert decode_text(codecs.BOM_UTF8 + b"hi", None) == "hi"
    assert decode_text(codecs.BOM_UTF8 + b"\xffhi", None, errors="replace") == "\ufffdhi"


PDF = b"%PDF-1.7"


PDF_URL = f"data:application/pdf;base64,{_b64(PDF)}"
SENT_PDF = {
    "openai": {"type": "file", "file": {"filename": "a.pdf", "file_data": PDF_URL}},
    "openai-responses": {"type": "input_file", "filename": "a.pdf", "file_data": PDF_URL},
}


@pytest.mark.parametrize("preset", ["openai", "openai-responses"])
@pytest.mark.parametrize(
    "url",
    [
        PDF_URL,
        "DATA:Application/PDF;Base64," + _b64(PDF).rstrip("=").replace("/", "_"),
        "data:application/pdf,%25PDF-1.7",
    ],
)
def test_openai_sends_a_pdf_data_urls_bytes_as_standard_base64(preset: str, url: str) -> None:
    assert sent(preset, DocumentPart(url=url, title="a.pdf")) == ([SENT_PDF[preset]], [])


@pytest.mark.parametrize("preset", ["openai", "openai-responses"])
@pytest.mark.parametrize("url", ["data:application/pdf;base64,%%%", "data:text/plain;base64,%%%"])
def test_openai_refuses_a_document_data_url_of_no_valid_base64(preset: str, url: str) -> None:
    """As Anthropic, Gemini and Ollama refuse it: left out, the request was sent and paid
    for without the document."""
    with pytest.raises(InvalidRequestError) as raised:
        sent(preset, DocumentPart(url=url))
    assert str(raised.value) == "the document's data URL holds no valid base64"


PNG = b"\x89PNG\r\n\x1a\n\x00\xfb\xff\xbe\x01"
PNG_B64 = _b64(PNG)  # iVBORw0KGgoA+/++AQ==: `+` and `/`, and padding


def as_image(preset: str) -> Any:
    if preset == "anthropic":
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
        }
    if preset == "gemini":
        return {"inlineData": {"mimeType": "image/png", "data": PNG_B64}}
    if preset in CHAT:
        return [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}}]
    if preset == "openai-responses":
        url = f"data:image/png;base64,{PNG_B64}"
        return [{"type": "input_image", "image_url": url, "detail": "auto"}]
    return {"content": "x", "images": [PNG_B64]}


@pytest.mark.parametrize("preset", IMAGES)
@pytest.mark.parametrize(
    "data",
    [
        PNG_B64,
        PNG_B64.replace("/", "%2F")
        .replace("=", "%3D")
        .replace("+", "%2B"),  # percent-encoded, as browsers read
        base64.urlsafe_b64encode(PNG).decode(),  # URL-safe alphabet
        base64.urlsafe_b64encode(PNG).decode().rstrip("="),
        f"{PNG_B64[:6]}%0A{PNG_B64[6:]}",  # a percent-encoded line break
    ],
)
def test_an_image_data_url_goes_as_standard_base64(preset: str, data: str) -> None:
    assert sent(preset, ImagePart(url=f"data:image/png;base64,{data}")) == (as_image(preset), [])


@pytest.mark.parametrize("preset", IMAGES)
@pytest.mark.parametrize(
    "url",
    [
        f"DATA:Image/PNG;Base64,{PNG_B64}",  # the type sent in lower case
        f"data:image/png;name=a.png;base64,{PNG_B64}",  # and without its parameters
    ],
)
def test_an_image_data_urls_type_goes_as_providers_name_it(preset: str, url: str) -> None:
    assert sent(preset, ImagePart(url=url)) == (as_image(preset), [])


@pytest.mark.parametrize("preset", [*CHAT, "openai-responses"])
def test_an_image_data_url_naming_no_type_goes_with_the_parts(preset: str) -> None:
    part = ImagePart(url=f"data:;base64,{PNG_B64}", media_type="Image/PNG")
    assert sent(preset, part) == (as_image(preset), [])


@pytest.mark.parametrize("preset", [*CHAT, "openai-responses"])
@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("data:image/png;base64,%%%", "the image's data URL holds no valid base64"),
        ("data:image/svg+xml,<svg/>", "an image data URL must be base64-encoded"),
        (
            f"data:;base64,{PNG_B64}",
            "an image data URL that names no media type needs the part's `media_type`, such "
            "as image/png",
        ),
    ],
)
def test_the_openai_family_refuses_an_image_data_url_it_cannot_send(
    preset: str, url: str, why: str
) -> None:
    """Sent as given, each is answered 400 ("Invalid base64 image_url"): refused before
    sending, as Anthropic, Gemini and Ollama refuse it, in their words."""
    with pytest.raises(InvalidRequestError) as raised:
        sent(preset, ImagePart(url=url))
    assert str(raised.value) == why


@pytest.mark.parametrize(
    ("preset", "display"),
    [
        ("openai", "OpenAI"),
        ("mistral", "Mistral"),
        ("openrouter", "OpenRouter"),
        ("openai-responses", "OpenAI"),
    ],
)
def test_the_openai_family_refuses_an_image_data_url_of_no_data(preset: str, display: str) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        sent(preset, ImagePart(url="data:image/png;base64,"))
    assert str(raised.value) == f"the image holds no data, which {display} cannot read"


@pytest.mark.parametrize("preset", IMAGES)
@pytest.mark.parametrize(
    "data",
    [
        f"{PNG_B64[:-1]}",  # one `=` where two are needed, as browsers refuse too
        f"{PNG_B64}{PNG_B64}",  # padding inside
        f"{PNG_B64[:4]}%FF{PNG_B64[4:]}",  # percent-decoded to no base64 character
        f"{PNG_B64[:5]}",  # one character past a whole group
    ],
)
def test_an_image_data_url_of_no_valid_base64_is_refused(preset: str, data: str) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        sent(preset, ImagePart(url=f"data:image/png;base64,{data}"))
    assert str(raised.value) == "the image's data URL holds no valid base64"
