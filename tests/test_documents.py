"""Documents in a user turn (PDF and plain text), on each dialect that takes them."""

from __future__ import annotations

import base64
from typing import Any

import pytest

import allama
from allama import ChatRequest
from allama.errors import InvalidRequestError, UnsupportedError
from allama.types import DocumentPart, RequestField, UnsupportedPolicy, UserMessage, Warning

PDF = b"%PDF-1.7 tiny"
PDF_B64 = base64.b64encode(PDF).decode()


def body(name: str, request: ChatRequest) -> tuple[dict[str, Any], list[Warning]]:
    target = allama.provider(name, api_key="k", base_url="http://test")
    http, warnings = target._prepare(request, stream=False)
    return http.body, warnings


def test_a_document_needs_one_source_and_a_media_type_with_bytes() -> None:
    with pytest.raises(ValueError, match="exactly one of `url` and `data`"):
        DocumentPart()
    with pytest.raises(ValueError, match="needs its `media_type`"):
        DocumentPart(data=PDF)
    assert repr(DocumentPart(data=PDF, media_type="application/pdf")) == (
        "DocumentPart(media_type='application/pdf', data=<13 bytes>)"
    )
    assert (
        repr(DocumentPart(url="https://secret.example.com/x.pdf")) == "DocumentPart(url=<withheld>)"
    )


def test_anthropic_takes_pdf_bytes_urls_and_plain_text_with_titles() -> None:
    request = ChatRequest("claude-sonnet-4-5").user(
        "Summarise",
        DocumentPart(data=PDF, media_type="application/pdf", title="Report"),
        DocumentPart(url="https://example.com/a.pdf"),
        DocumentPart(data="héllo".encode(), media_type="text/plain"),
    )
    sent, warnings = body("anthropic", request)
    assert sent["messages"][0]["content"] == [
        {"type": "text", "text": "Summarise"},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64},
            "title": "Report",
        },
        {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "héllo"},
        },
    ]
    assert warnings == []
    other = ChatRequest("claude-sonnet-4-5").user(
        "x", DocumentPart(data=b"PK", media_type="application/zip")
    )
    with pytest.raises(
        InvalidRequestError, match="takes PDF and plain-text documents, not application/zip"
    ):
        body("anthropic", other)


def test_openai_takes_pdf_bytes_as_a_file_part_and_text_as_text() -> None:
    request = ChatRequest("gpt-5-mini").user(
        "Summarise",
        DocumentPart(data=PDF, media_type="application/pdf", title="report.pdf"),
        DocumentPart(data=b"plain words", media_type="text/plain"),
    )
    sent, warnings = body("openai", request)
    assert sent["messages"][0]["content"] == [
        {"type": "text", "text": "Summarise"},
        {
            "type": "file",
            "file": {
                "filename": "report.pdf",
                "file_data": f"data:application/pdf;base64,{PDF_B64}",
            },
        },
        {"type": "text", "text": "plain words"},
    ]
    assert warnings == []


def test_what_chat_completions_cannot_carry_is_left_out_with_a_warning_or_refused() -> None:
    by_url = ChatRequest("gpt-5-mini").user("x", DocumentPart(url="https://example.com/a.pdf"))
    sent, warnings = body("openai", by_url)
    assert sent["messages"][0]["content"] == [{"type": "text", "text": "x"}]
    assert [w.message for w in warnings] == [
        "Chat Completions takes no document by URL, only its bytes; it was left out"
    ]
    pdf = ChatRequest("openai/gpt-oss-120b").user(
        "x", DocumentPart(data=PDF, media_type="application/pdf")
    )
    sent, warnings = body("groq", pdf)
    assert sent["messages"][0]["content"] == [{"type": "text", "text": "x"}]
    assert [w.message for w in warnings] == ["Groq takes no PDF documents; it was left out"]
    with pytest.raises(UnsupportedError) as caught:
        body("groq", pdf.with_unsupported_policy(UnsupportedPolicy.ERROR))
    assert caught.value.field is RequestField.DOCUMENTS
    # A PDF in a data URL, or named in capitals, is a PDF too.
    for part in (
        DocumentPart(url="data:application/pdf;base64,JVBERi0xLjc="),
        DocumentPart(data=PDF, media_type="Application/PDF"),
    ):
        sent, warnings = body("groq", ChatRequest("openai/gpt-oss-120b").user("x", part))
        assert sent["messages"][0]["content"] == [{"type": "text", "text": "x"}]
        assert [w.message for w in warnings] == ["Groq takes no PDF documents; it was left out"]


def test_openai_form_round_trip_keeps_a_pdf() -> None:
    request = ChatRequest("gpt-5-mini").user(
        "x", DocumentPart(data=PDF, media_type="application/pdf", title="r.pdf")
    )
    messages = request.to_openai_messages()
    back = ChatRequest.from_openai("gpt-5-mini", messages)
    (message,) = back.messages
    assert isinstance(message, UserMessage)
    assert message.documents == (
        DocumentPart(data=PDF, media_type="application/pdf", title="r.pdf"),
    )
    with pytest.raises(ValueError, match="uploaded by id cannot be read back"):
        ChatRequest.from_openai(
            "m", [{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]}]
        )


@pytest.mark.parametrize(
    ("document", "why"),
    [
        (
            DocumentPart(url="https://example.com/r.pdf", media_type="application/pdf"),
            "Chat Completions takes no document by URL, only its bytes",
        ),
        (
            DocumentPart(data=b"<p>x</p>", media_type="text/html"),
            "Chat Completions takes PDF and plain-text documents, not text/html",
        ),
    ],
)
def test_openai_form_says_which_document_it_cannot_hold(document: DocumentPart, why: str) -> None:
    """A conversation that went to a provider taking documents by URL (Anthropic, the
    Responses API) cannot be written in Chat Completions' form: the error says which."""
    request = (
        ChatRequest("m")
        .system("Be brief.")
        .user("Hi")
        .assistant("Hello")
        .user("Read this", document)
    )
    with pytest.raises(ValueError) as caught:
        request.to_openai_messages()
    assert str(caught.value) == f"message 3 (user), part 1: {why}; the form has no place for it"
