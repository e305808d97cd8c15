"""Azure's Asynchronous Filter gives its verdict on content after the content, up to about
1,000 characters later, so a short answer's verdict may come after its finish. A verdict
that filtered is the stream's finish (`content_filter`), as it is where it comes before the
end and as the same answer unstreamed is: an extraction over it is refused, not given the
filtered value. A verdict that filtered nothing changes nothing.

A prompt the filter blocked is answered 400: the request's fault, never run nor billed,
which says what the filter flagged in the words a filtered answer uses. Verdicts on an
answer let through (and on its prompt) that detected something are kept in
`provider_data`; those that found everything safe, on every answer, are not. A filter that
did not run gives its error in place of the verdicts: kept where they would be, with a
warning, whole and streamed (once, where a stream sends it on every chunk).

On Your Data (`data_sources` through the body option) answers with `message.context`, the
citations its `[doc1]` markers point to: kept in `provider_data`, whole and streamed.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

import allama
from _recording import Recorder, provider
from allama import ChatRequest, ExtractionMode, RefusedError, Usage
from allama.adapters.openai_compat import decode_stream
from allama.adapters.openai_compat._errors import CONTENT_FILTER_KEY, error_from_payload
from allama.errors import InvalidRequestError, StreamDecodeError
from allama.stream import StreamCollector
from allama.types import (
    DECLINE_EXPLANATION_KEY,
    Finish,
    ProviderDataEvent,
    RequestField,
    TextDelta,
    Warning,
)

ENDPOINT = "https://r.openai.azure.com"


def _chunk(content: str | None = None, finish: str | None = None) -> dict[str, Any]:
    delta = {} if content is None else {"content": content}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": finish, "delta": delta}],
    }


def _verdict(*, filtered: bool, finish: str | None = "content_filter") -> dict[str, Any]:
    """An annotation chunk as the Asynchronous Filter sends it: no id, model or delta."""
    results = {
        "hate": {"filtered": False, "severity": "safe"},
        "protected_material_text": {"detected": filtered, "filtered": filtered},
    }
    choice = {
        "index": 0,
        "finish_reason": finish,
        "content_filter_results": results,
        "content_filter_offsets": {"check_offset": 35, "start_offset": 35, "end_offset": 70},
    }
    return {"id": "", "object": "", "created": 0, "model": "", "choices": [choice]}


USAGE = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "gpt-4o",
    "choices": [],
    "usage": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29},
}


def _sse(*chunks: dict[str, Any]) -> bytes:
    body = b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks)
    return body + b"data: [DONE]\n\n"


ANSWER = (_chunk(""), _chunk('{"name":"Ada",'), _chunk('"year":1843}'))
LATE = _sse(*ANSWER, _chunk(finish="stop"), _verdict(filtered=True), USAGE)
EXPLANATION = "the content filter flagged: protected_material_text (flagged)"


def _collected(body: bytes) -> allama.ChatResponse:
    collector = StreamCollector()
    for event in decode_stream(body, provider="azure-openai"):
        collector.push(event)
    return collector.finish()


def test_a_verdict_that_filtered_after_the_finish_is_the_streams_finish() -> None:
    events = decode_stream(LATE, provider="azure-openai")
    finishes = [event.finish_reason for event in events if isinstance(event, Finish)]
    assert finishes == ["stop", "content_filter"]
    told = [event for event in events if isinstance(event, ProviderDataEvent)]
    assert [(event.key, event.value) for event in told] == [(DECLINE_EXPLANATION_KEY, EXPLANATION)]
    response = _collected(LATE)
    assert response.finish_reason == "content_filter"
    assert response.text() == '{"name":"Ada","year":1843}'
    assert response.usage == Usage(input_tokens=20, output_tokens=9)


def test_a_filtered_category_without_a_finish_reason_after_the_finish_filters_too() -> None:
    body = _sse(*ANSWER, _chunk(finish="stop"), _verdict(filtered=True, finish=None))
    assert _collected(body).finish_reason == "content_filter"


@pytest.mark.parametrize("finish", [None, "stop"])
def test_a_verdict_that_filtered_nothing_after_the_finish_changes_nothing(
    finish: str | None,
) -> None:
    body = _sse(*ANSWER, _chunk(finish="stop"), _verdict(filtered=False, finish=finish), USAGE)
    events = decode_stream(body, provider="azure-openai")
    assert [e.finish_reason for e in events if isinstance(e, Finish)] == ["stop"]
    assert _collected(body).finish_reason == "stop"


def test_a_stream_filtered_before_its_end_finishes_once_whatever_verdicts_follow() -> None:
    body = _sse(*ANSWER, _verdict(filtered=True), _verdict(filtered=True), USAGE)
    events = decode_stream(body, provider="azure-openai")
    assert [e.finish_reason for e in events if isinstance(e, Finish)] == ["content_filter"]
    assert sum(isinstance(event, ProviderDataEvent) for event in events) == 1


def test_the_collector_takes_a_content_filter_finish_after_another_and_nothing_else() -> None:
    collector = StreamCollector()
    collector.push(TextDelta(index=0, text="hi"))
    collector.push(Finish(finish_reason="stop"))
    collector.push(Finish(finish_reason="content_filter"))
    assert collector.finish().finish_reason == "content_filter"
    again = StreamCollector()
    again.push(Finish(finish_reason="stop"))
    with pytest.raises(StreamDecodeError, match="after the response finished"):
        again.push(Finish(finish_reason="stop"))


class Person(BaseModel):
    name: str
    year: int


REQUEST = ChatRequest("dep").user("who?").with_option(ExtractionMode.NATIVE)


def _extract(made: Any) -> allama.Extracted[Person]:
    with allama.extract_stream(made, Person, REQUEST) as stream:
        for _ in stream:
            pass
        return stream.finish()


def _aextract(made: Any) -> allama.Extracted[Person]:
    async def run() -> allama.Extracted[Person]:
        async with allama.aextract_stream(made, Person, REQUEST) as stream:
            async for _ in stream:
                pass
            return await stream.finish()

    return asyncio.run(run())


@pytest.mark.parametrize("read", [_extract, _aextract], ids=["sync", "async"])
def test_a_streamed_extraction_filtered_after_its_finish_is_refused(read: Any) -> None:
    made, recorder = provider("azure-openai", (200, LATE), endpoint=ENDPOINT)
    with pytest.raises(RefusedError) as caught:
        read(made)
    assert caught.value.text == EXPLANATION
    assert caught.value.metadata.usage == Usage(input_tokens=20, output_tokens=9)
    assert len(recorder.bodies) == 1


def test_a_chat_stream_filtered_after_its_finish_ends_as_filtered() -> None:
    made, _ = provider("azure-openai", (200, LATE), endpoint=ENDPOINT)
    with made.chat_stream(ChatRequest("dep").user("who?")) as stream:
        for _ in stream:
            pass
        response = stream.response()
    assert response.finish_reason == "content_filter"
    assert response.provider_data["azure-openai"][DECLINE_EXPLANATION_KEY] == EXPLANATION


# A prompt the content filter blocked (HTTP 400), and verdicts that note without filtering

BLOCKED_WORDS = (
    "The response was filtered due to the prompt triggering Azure OpenAI's content "
    "management policy."
)


def _blocked(verdicts: dict[str, Any] | None) -> dict[str, Any]:
    error: dict[str, Any] = {
        "message": BLOCKED_WORDS,
        "type": None,
        "param": "prompt",
        "code": "content_filter",
        "status": 400,
    }
    if verdicts is not None:
        error["innererror"] = {
            "code": "ResponsibleAIPolicyViolation",
            "content_filter_result": verdicts,
        }
    return {"error": error}


JAILBREAK = {
    "hate": {"filtered": False, "severity": "safe"},
    "jailbreak": {"filtered": True, "detected": True},
    "violence": {"filtered": True, "severity": "medium"},
}
FLAGGED = "the content filter flagged: jailbreak (flagged), violence (medium)"


def _keyed(*answers: tuple[int, Any]) -> tuple[Any, Recorder]:
    """The provider over a recorder, with a key as long as a real one (a one-letter key
    would be cut out of every word an error says)."""
    recorder = Recorder(*answers)
    made = allama.provider(
        "azure-openai", api_key=KEY, endpoint=ENDPOINT, transport=recorder.transport()
    )
    return made, recorder


KEY = "azure-key-0123456789abcdef"


def _chat(made: Any) -> None:
    made.chat(ChatRequest("dep").user("hi"))


def _stream(made: Any) -> None:
    with made.chat_stream(ChatRequest("dep").user("hi")) as stream:
        for _ in stream:
            pass


@pytest.mark.parametrize("call", [_chat, _stream], ids=["chat", "stream"])
def test_a_prompt_the_content_filter_blocked_says_what_it_flagged(call: Any) -> None:
    made, _ = _keyed((400, _blocked(JAILBREAK)))
    with pytest.raises(InvalidRequestError) as caught:
        call(made)
    error = caught.value
    assert type(error) is InvalidRequestError
    assert str(error) == f"{BLOCKED_WORDS} ({FLAGGED})"
    assert (error.status, error.retryable) == (400, False)
    assert error.context.metadata[CONTENT_FILTER_KEY] == FLAGGED
    assert error.as_log()[CONTENT_FILTER_KEY] == FLAGGED  # allama's words: logged


def test_a_blocked_prompt_whose_error_names_no_category_is_still_marked() -> None:
    made, _ = _keyed((400, _blocked(None)))
    with pytest.raises(InvalidRequestError) as caught:
        _chat(made)
    assert str(caught.value) == BLOCKED_WORDS
    assert caught.value.context.metadata[CONTENT_FILTER_KEY] == (
        "the content filter flagged the request, naming no category"
    )


def test_a_blocked_prompt_error_in_a_stream_says_what_it_flagged() -> None:
    payload = _blocked(JAILBREAK)
    del payload["error"]["status"]
    error = error_from_payload(payload, provider="azure-openai")
    assert type(error) is InvalidRequestError
    assert str(error) == f"{BLOCKED_WORDS} ({FLAGGED})"
    assert error.context.metadata[CONTENT_FILTER_KEY] == FLAGGED


def test_an_extraction_of_a_blocked_prompt_fails_once_as_the_requests_fault() -> None:
    made, recorder = _keyed((400, _blocked(JAILBREAK)))
    with pytest.raises(InvalidRequestError) as caught:
        allama.extract(made, Person, REQUEST)
    assert not isinstance(caught.value, RefusedError)
    assert caught.value.context.metadata[CONTENT_FILTER_KEY] == FLAGGED
    assert len(recorder.bodies) == 1  # not retried: the same prompt meets the same filter


def _answer(**extra: Any) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": "stop",
        "message": {"role": "assistant", "content": "ok"},
    }
    choice.update(extra.pop("choice", {}))
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [choice],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
        **extra,
    }


SAFE = {"hate": {"filtered": False, "severity": "safe"}}
DETECTED_PROMPT = [
    {
        "prompt_index": 0,
        "content_filter_results": {**SAFE, "jailbreak": {"filtered": False, "detected": True}},
    }
]
DETECTED_ANSWER = {
    **SAFE,
    "protected_material_code": {
        "filtered": False,
        "detected": True,
        "citation": {"URL": "https://github.com/example/repo", "license": "MIT"},
    },
}


def test_verdicts_that_detected_something_without_filtering_are_kept() -> None:
    body = _answer(
        prompt_filter_results=DETECTED_PROMPT,
        choice={"content_filter_results": DETECTED_ANSWER},
    )
    made, _ = provider("azure-openai", (200, body), endpoint=ENDPOINT)
    response = made.chat(ChatRequest("dep").user("hi"))
    assert response.text() == "ok"
    assert response.provider_data == {
        "azure-openai": {
            "prompt_filter_results": DETECTED_PROMPT,
            "content_filter_results": DETECTED_ANSWER,
        }
    }


def test_verdicts_that_found_everything_safe_are_not_kept() -> None:
    body = _answer(
        prompt_filter_results=[{"prompt_index": 0, "content_filter_results": SAFE}],
        choice={"content_filter_results": SAFE},
    )
    made, _ = provider("azure-openai", (200, body), endpoint=ENDPOINT)
    assert made.chat(ChatRequest("dep").user("hi")).provider_data == {}


def test_prompt_verdicts_that_detected_something_are_kept_from_a_stream_as_from_a_body() -> None:
    first = {"id": "", "object": "", "created": 0, "model": "", "choices": []}
    body = _sse(
        {**first, "prompt_filter_results": DETECTED_PROMPT}, _chunk("ok"), _chunk(None, "stop")
    )
    response = _collected(body)
    assert response.text() == "ok"
    assert response.provider_data == {"azure-openai": {"prompt_filter_results": DETECTED_PROMPT}}


# A content filter that did not run: its error in place of the verdicts, on a 200 answer

NOT_RUN = {"error": {"code": "content_filter_error", "message": "The contents are not filtered"}}
NOT_RUN_PROMPT = [{"prompt_index": 0, "content_filter_results": NOT_RUN}]
NOT_RUN_ANSWER = (
    "Azure's content filter did not run on the completion: nothing in it was filtered or "
    "annotated (the filter's error is kept in `provider_data`, under `content_filter_results`)"
)
NOT_RUN_ON_PROMPT = (
    "Azure's content filter did not run on the prompt: nothing in it was filtered or "
    "annotated (the filter's error is kept in `provider_data`, under `prompt_filter_results`)"
)


def _unchecked_stream(spelling: str) -> bytes:
    """A stream the filter ran on neither the prompt nor the answer of, its error on every
    chunk: under `content_filter_result` beside an empty `content_filter_results`, as an
    Azure stream was recorded sending it, or under `content_filter_results` alone."""
    verdicts = (
        {"content_filter_result": NOT_RUN, "content_filter_results": {}}
        if spelling == "content_filter_result"
        else {"content_filter_results": NOT_RUN}
    )
    first = {"id": "", "object": "", "created": 0, "model": "", "choices": []}
    chunks = [_chunk(""), _chunk("generated "), _chunk("text"), _chunk(None, "stop")]
    for chunk in chunks:
        chunk["choices"][0].update(verdicts)
    return _sse({**first, "prompt_filter_results": NOT_RUN_PROMPT}, *chunks, USAGE)


def _read(
    made: Any, *, stream: bool, run_async: bool = False, request: ChatRequest | None = None
) -> allama.ChatResponse:
    """The response of a call: whole or streamed, sync or async."""
    request = request or ChatRequest("dep").user("hi")

    async def run() -> allama.ChatResponse:
        if not stream:
            return await made.achat(request)
        opened = await made.achat_stream(request)
        async with opened:
            async for _ in opened:
                pass
        return await opened.response()

    if run_async:
        return asyncio.run(run())
    if not stream:
        return made.chat(request)
    with made.chat_stream(request) as opened:
        for _ in opened:
            pass
        return opened.response()


@pytest.mark.parametrize("spelling", ["content_filter_results", "content_filter_result"])
@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
def test_an_answer_the_content_filter_did_not_run_on_keeps_its_error_and_says_so(
    spelling: str, run_async: bool
) -> None:
    body = _answer(prompt_filter_results=NOT_RUN_PROMPT, choice={spelling: NOT_RUN})
    made, _ = provider("azure-openai", (200, body), endpoint=ENDPOINT)
    response = _read(made, stream=False, run_async=run_async)
    assert (response.text(), response.finish_reason) == ("ok", "stop")
    assert response.provider_data == {
        "azure-openai": {
            "content_filter_results": NOT_RUN,
            "prompt_filter_results": NOT_RUN_PROMPT,
        }
    }
    assert list(response.warnings) == [
        Warning.unsupported(RequestField.OPTIONS, NOT_RUN_ANSWER).with_provider("azure-openai"),
        Warning.unsupported(RequestField.OPTIONS, NOT_RUN_ON_PROMPT).with_provider("azure-openai"),
    ]


@pytest.mark.parametrize("spelling", ["content_filter_results", "content_filter_result"])
@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
def test_a_stream_the_content_filter_did_not_run_on_keeps_its_error_and_says_so_once(
    spelling: str, run_async: bool
) -> None:
    made, _ = provider("azure-openai", (200, _unchecked_stream(spelling)), endpoint=ENDPOINT)
    response = _read(made, stream=True, run_async=run_async)
    assert (response.text(), response.finish_reason) == ("generated text", "stop")
    assert response.provider_data == {
        "azure-openai": {
            "content_filter_results": NOT_RUN,
            "prompt_filter_results": NOT_RUN_PROMPT,
        }
    }
    assert [w.message for w in response.warnings] == [NOT_RUN_ON_PROMPT, NOT_RUN_ANSWER]
    events = decode_stream(_unchecked_stream(spelling), provider="azure-openai")
    assert [type(e).__name__ for e in events if not isinstance(e, TextDelta)] == [
        "ResponseStart",
        "WarningEvent",  # the prompt's
        "ProviderDataEvent",
        "ResponseStart",  # (the answer's id, which the prompt's chunk had not)
        "WarningEvent",  # the answer's, once, whatever number of chunks say it
        "ProviderDataEvent",
        "BlockStart",
        "BlockStop",
        "Finish",
        "UsageEvent",
    ]


def test_a_prompt_alone_the_content_filter_did_not_run_on_is_said_alone() -> None:
    body = _answer(prompt_filter_results=NOT_RUN_PROMPT, choice={"content_filter_results": SAFE})
    made, _ = provider("azure-openai", (200, body), endpoint=ENDPOINT)
    response = made.chat(ChatRequest("dep").user("hi"))
    assert response.provider_data == {"azure-openai": {"prompt_filter_results": NOT_RUN_PROMPT}}
    assert [w.message for w in response.warnings] == [NOT_RUN_ON_PROMPT]


# Azure OpenAI On Your Data: the citations the answer's [doc1] markers point to

CONTEXT = {
    "citations": [
        {
            "content": "Ada Lovelace wrote the first program in 1843.",
            "title": "Ada",
            "url": None,
            "filepath": "ada.pdf",
            "chunk_id": "0",
        }
    ],
    "intent": '["who wrote the first program"]',
}
DATA_SOURCES = [
    {
        "type": "azure_search",
        "parameters": {"endpoint": "https://s.search.windows.net", "index_name": "idx"},
    }
]
ON_YOUR_DATA = (
    ChatRequest("dep")
    .user("who?")
    .with_option_json("openai_compat", {"data_sources": DATA_SOURCES})
)


def _grounded_stream() -> bytes:
    """On Your Data's stream: the context whole on the first delta, beside the role."""
    first = _chunk(None)
    first["choices"][0]["delta"] = {"role": "assistant", "context": CONTEXT}
    first["choices"][0]["end_turn"] = False
    return _sse(first, _chunk("Ada Lovelace [doc1]."), _chunk(None, "stop"))


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_on_your_datas_context_is_kept_whole_and_streamed(stream: bool) -> None:
    grounded = _answer(choice={"end_turn": True})
    grounded["choices"][0]["message"] = {
        "role": "assistant",
        "content": "Ada Lovelace [doc1].",
        "context": CONTEXT,
    }
    made, recorder = provider(
        "azure-openai", (200, _grounded_stream() if stream else grounded), endpoint=ENDPOINT
    )
    response = _read(made, stream=stream, request=ON_YOUR_DATA)
    assert recorder.bodies[0]["data_sources"] == DATA_SOURCES
    assert response.text() == "Ada Lovelace [doc1]."
    assert response.provider_data == {"azure-openai": {"context": CONTEXT}}


def test_a_context_streamed_in_pieces_is_merged() -> None:
    first, second = _chunk(None), _chunk(None)
    first["choices"][0]["delta"] = {"role": "assistant", "context": {"intent": "x"}}
    second["choices"][0]["delta"] = {"context": {"citations": CONTEXT["citations"]}}
    body = _sse(first, second, _chunk("Ada [doc1]."), _chunk(None, "stop"))
    response = _collected(body)
    assert response.provider_data == {
        "azure-openai": {"context": {"intent": "x", "citations": CONTEXT["citations"]}}
    }


SEARCH_KEY = "search-admin-key-0123456789"
SEARCHED = {
    "data_sources": [
        {
            "type": "azure_search",
            "parameters": {
                "endpoint": "https://s.search.windows.net",
                "index_name": "docs",
                "authentication": {"type": "api_key", "key": SEARCH_KEY},
            },
        }
    ]
}


def test_a_search_key_given_in_the_body_option_is_cut_from_an_error_that_echoes_it() -> None:
    """On Your Data's search key goes in the body, not a header: a 400 that quotes the data
    source back (an index it cannot reach) would have put it in the error's message."""
    echoed = {
        "error": {
            "code": "invalid_request_error",
            "message": f"Invalid data source: authentication key {SEARCH_KEY} for index docs "
            "was rejected",
        }
    }
    made, recorder = provider("azure-openai", (400, echoed), endpoint=ENDPOINT)
    request = ChatRequest("gpt-4o").user("q").with_option_json("openai_compat", SEARCHED)
    with pytest.raises(InvalidRequestError) as caught:
        made.chat(request)
    assert SEARCH_KEY in json.dumps(recorder.bodies[0])  # (sent, as the caller asked)
    assert caught.value.message == (
        "Invalid data source: authentication key <redacted> for index docs was rejected"
    )
    assert SEARCH_KEY not in (caught.value.context.body or "")


def test_the_models_words_under_a_key_named_key_are_not_taken_for_a_credential() -> None:
    """A tool call's `{"key": "max_tokens"}` (an object in Anthropic's body) is the
    conversation, not a credential of the call's: an error that quotes `max_tokens` keeps
    it."""
    from allama.types import ToolCall

    said = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "max_tokens too large for model"},
    }
    made, _ = provider("anthropic", (400, said))
    call = ToolCall.of("toolu_1", "set_setting", {"key": "max_tokens", "value": "messages"})
    request = ChatRequest("claude-sonnet-4-5").user("hi").assistant([call])
    with pytest.raises(InvalidRequestError) as caught:
        made.chat(request.tool_result(call, "ok").user("again"))
    assert caught.value.message == "max_tokens too large for model"
