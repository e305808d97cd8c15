"""A text document's charset, read alike by every encoder that sends inline text (Anthropic,
Gemini, Ollama) and by `tpm`'s estimate: one allama cannot read (a Python codec of no
charset among them) is refused before sending and estimated as UTF-8, and Gemini sends JSON,
XML and code under application/* (application/x-python) in their charset as UTF-8, as it
sends text/*."""

from __future__ import annotations

import base64
import mimetypes
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from tests._recording import provider

import allama
from allama import ChatRequest
from allama._tokens import guessed_input_tokens
from allama.errors import InvalidRequestError
from allama.types import DocumentPart

ANSWERS: dict[str, dict[str, Any]] = {
    "anthropic": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": '{"n": 1}'}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 5},
    },
    "gemini": {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": '{"n": 1}'}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5},
        "modelVersion": "gemini-x",
    },
    "ollama": {
        "model": "m",
        "created_at": "2025-01-01T00:00:00Z",
        "message": {"role": "assistant", "content": '{"n": 1}'},
        "done": True,
        "done_reason": "stop",
    },
}
MODELS = {"anthropic": "claude-sonnet-4-5", "gemini": "gemini-2.5-flash", "ollama": "llama3.2"}
OPTIONS: dict[str, dict[str, Any]] = {"ollama": {"base_url": "http://127.0.0.1:9"}}
SUBJECT = {"anthropic": "a text/plain document", "gemini": "a text/plain part"}

NO_CHARSETS = [
    "undefined",
    "idna",
    "punycode",
    "unicode-escape",
    "raw-unicode-escape",
    "base64",
    "utf-8\x00",
]
"""Python's codecs that read no charset: `undefined` and IDNA raised a bare `UnicodeError`
(IDNA with `errors="replace"` in the estimate); the rest read bytes as no document is
written. A name holding a NUL raised `ValueError` ("embedded null character")."""


def _documents(charset: str) -> list[DocumentPart]:
    return [
        DocumentPart(data=b"hello", media_type=f"text/plain; charset={charset}"),
        DocumentPart(url=f"data:text/plain;charset={charset},hello"),
        DocumentPart(url="data:;base64,aGVsbG8=", media_type=f"text/plain; charset={charset}"),
    ]


@pytest.mark.parametrize("name", ["anthropic", "gemini", "ollama"])
@pytest.mark.parametrize("charset", NO_CHARSETS)
def test_a_charset_allama_cannot_read_is_refused_before_sending(name: str, charset: str) -> None:
    target, recorder = provider(name, (200, ANSWERS[name]), **OPTIONS.get(name, {}))
    subject = SUBJECT.get(name, "a text/plain document")
    for document in _documents(charset):
        with pytest.raises(InvalidRequestError) as caught:
            target.chat(ChatRequest(MODELS[name]).user("Read.", document))
        assert str(caught.value) == f"{subject} names charset {charset}, which allama cannot read"
    assert recorder.bodies == []


@pytest.mark.parametrize("charset", NO_CHARSETS)
def test_the_estimate_reads_a_charset_allama_cannot_read_as_utf8(charset: str) -> None:
    for document in _documents(charset):
        request = ChatRequest("m").user("Read.", document)
        assert guessed_input_tokens(request) == (5 + 5) // 4


def test_a_batch_under_tpm_fails_the_input_whose_charset_allama_cannot_read_alone() -> None:
    class Row(BaseModel):
        n: int

    target, recorder = provider("anthropic", (200, ANSWERS["anthropic"]))

    def asking(charset: str) -> ChatRequest:
        document = DocumentPart(data=b"n is 1", media_type=f"text/plain; charset={charset}")
        return ChatRequest(MODELS["anthropic"]).user("Read n.", document)

    run = allama.batch(
        target, Row, ["utf-8", "undefined", "idna"], request=asking, tpm=100_000, concurrency=1
    )
    results = sorted(run, key=lambda result: result.index)
    unread = "a text/plain document names charset {}, which allama cannot read [provider=anthropic]"
    assert [(r.value, r.failure and (r.failure.kind, r.failure.message)) for r in results] == [
        (Row(n=1), None),
        (None, ("invalid_request", unread.format("undefined"))),
        (None, ("invalid_request", unread.format("idna"))),
    ]
    assert len(recorder.bodies) == 1


def _gemini_sends(document: DocumentPart) -> dict[str, Any]:
    target, recorder = provider("gemini", (200, ANSWERS["gemini"]))
    target.chat(ChatRequest(MODELS["gemini"]).user("Read.", document))
    sent: dict[str, Any] = recorder.bodies[-1]["contents"][0]["parts"][1]
    return sent


def _inline(media_type: str, text: str) -> dict[str, Any]:
    data = base64.b64encode(text.encode()).decode()
    return {"inlineData": {"mimeType": media_type, "data": data}}


@pytest.mark.parametrize(
    ("text", "media_type", "charset", "sent_as"),
    [
        ('{"a": "é"}', "application/json", "utf-16", "application/json"),
        ("<a>é</a>", "Application/XML", "iso-8859-1", "application/xml"),
        ('{"@id": "é"}', "application/ld+json", "utf-16-le", "application/ld+json"),
        ("<rss>é</rss>", "application/rss+xml", "windows-1252", "application/rss+xml"),
    ],
)
def test_gemini_sends_json_and_xml_in_their_charset_as_utf8(
    text: str, media_type: str, charset: str, sent_as: str
) -> None:
    data = text.encode(charset)
    given = DocumentPart(data=data, media_type=f"{media_type}; charset={charset}")
    assert _gemini_sends(given) == _inline(sent_as, text)
    encoded = base64.b64encode(data).decode()
    in_url = DocumentPart(url=f"data:{media_type};charset={charset};base64,{encoded}")
    assert _gemini_sends(in_url) == _inline(sent_as, text)


def test_gemini_refuses_json_that_is_no_text_in_its_charset_or_names_none_it_reads() -> None:
    target, recorder = provider("gemini", (200, ANSWERS["gemini"]))
    for document, why in [
        (
            DocumentPart(data=b'{"a": "\xff"}', media_type="application/json; charset=us-ascii"),
            "an application/json part must be text in its charset (us-ascii)",
        ),
        (
            DocumentPart(data=b"{}", media_type="application/json; charset=undefined"),
            "an application/json part names charset undefined, which allama cannot read",
        ),
    ]:
        with pytest.raises(InvalidRequestError) as caught:
            target.chat(ChatRequest(MODELS["gemini"]).user("Read.", document))
        assert str(caught.value) == why
    assert recorder.bodies == []


def test_gemini_sends_a_pdf_naming_a_charset_as_its_bytes() -> None:
    """A charset on a type that is no text says nothing of its bytes."""
    pdf = b"%PDF-1.7 \xff\xfe"
    document = DocumentPart(data=pdf, media_type="application/pdf; charset=utf-16")
    sent = _gemini_sends(document)
    assert sent == {
        "inlineData": {"mimeType": "application/pdf", "data": base64.b64encode(pdf).decode()}
    }


@pytest.mark.parametrize(
    ("text", "media_type", "charset"),
    [
        ("s = 'é'", "application/x-python", "utf-16"),
        ("var s = 'é';", "application/x-javascript", "iso-8859-1"),
        ("s = 'é'", "text/x-python", "utf-16"),
        ("echo é", "application/x-sh", "windows-1252"),
        ("SELECT 'é';", "application/sql", "utf-16-le"),
        ("a: é", "application/yaml", "iso-8859-1"),
        ("a = 'é'", "application/toml", "utf-16"),
    ],
)
def test_gemini_sends_code_under_application_in_its_charset_as_utf8(
    text: str, media_type: str, charset: str
) -> None:
    """Google lists application/x-python and application/x-javascript among the text
    documents Gemini reads, as UTF-8: raw UTF-16 would be read as other characters."""
    given = DocumentPart(data=text.encode(charset), media_type=f"{media_type}; charset={charset}")
    assert _gemini_sends(given) == _inline(media_type, text)


@pytest.mark.parametrize("media_type", ["application/rtf", "application/x-python-code"])
def test_gemini_sends_rtf_and_python_bytecode_naming_a_charset_as_their_bytes(
    media_type: str,
) -> None:
    """RTF names its code page inside the document, and bytecode is no text: neither is
    converted."""
    data = "é".encode("utf-16")
    sent = _gemini_sends(DocumentPart(data=data, media_type=f"{media_type}; charset=utf-16"))
    assert sent == _inline_bytes(media_type, data)


def _inline_bytes(media_type: str, data: bytes) -> dict[str, Any]:
    return {"inlineData": {"mimeType": media_type, "data": base64.b64encode(data).decode()}}


def test_the_estimate_reads_code_under_application_as_text_in_its_charset() -> None:
    """Twelve characters of Python in UTF-16 (26 bytes with its mark): 4 tokens with the
    prompt's 5 characters, not a page's 2,000."""
    code = "print('é')\n#"
    media_type = "application/x-python; charset=utf-16"
    document = DocumentPart(data=code.encode("utf-16"), media_type=media_type)
    assert guessed_input_tokens(ChatRequest("m").user("Read.", document)) == (5 + 12) // 4


@pytest.mark.parametrize(
    ("guessed", "read_as"),
    [
        ("text/x-python", "text/plain"),
        ("application/x-python", "text/plain"),
        ("application/javascript", "text/plain"),
        ("application/x-sh", "text/plain"),
        ("application/sql", "text/plain"),
        ("application/x-tex", "text/plain"),
        ("application/rtf", "application/rtf"),
        ("application/x-python-code", "application/x-python-code"),
    ],
)
def test_a_file_named_as_code_under_application_is_read_as_plain_text(
    guessed: str,
    read_as: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a name says depends on the system's `mime.types` (`.sh` is text/x-sh on one,
    application/x-sh on another): the guess is fixed here."""
    path = tmp_path / "file.code"
    path.write_bytes(b"x = 1\n")
    monkeypatch.setattr(mimetypes, "guess_type", lambda name: (guessed, None))
    assert DocumentPart.from_file(path).media_type == read_as
