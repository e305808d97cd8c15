"""A text document's charset, read alike by every encoder that sends inline text (Anthropic,
Gemini, Ollama) and by `tpm`'s estimate: one allama cannot read (a Python codec of no
charset among them) is refused before sending and estimated as UTF-8, and Gemini sends JSON
and XML in their charset as UTF-8, as it sends text/*."""

from __future__ import annotations

import base64
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
