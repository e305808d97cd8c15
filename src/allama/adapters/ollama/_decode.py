"""An Ollama `/api/chat` response to a `ChatResponse`, or to the `allama.Error` it stands for.

The body is read once by pydantic-core's JSON parser into plain data. Unknown fields are
ignored everywhere.

The message, in order:

- `thinking` becomes reasoning (never text);
- `content` becomes text;
- each of `tool_calls` becomes a `ToolCall`: its `id`, or `call_<n>` when Ollama gave none
  (before v0.12.10 it never did; `n` counts the response's calls from 0, in order), its
  `function.name`, and its `function.arguments` (an object) as compact JSON text, key order,
  non-ASCII characters and numbers as written kept.

An empty `thinking` or `content` makes no block. A stream gives the same blocks
(`OllamaStreamDecoder`, through the same `Layout`): a block goes on while chunks carry the
same kind, and the text of consecutive chunks joins into one.

Finish. `done_reason` `stop` is `tool_calls` when the message holds calls (Ollama has no
reason of its own for them), else `stop`; `length` (the `num_predict` limit) is `length`;
any other (`load`, `unload`, reasons added later) is kept as sent. None, or an empty one, is
`None`.

Usage. `input_tokens` is `prompt_eval_count` and `output_tokens` is `eval_count` (which
counts the thinking too: Ollama does not count it apart, so `reasoning_tokens` is `None`).
Ollama leaves a count out of the JSON when it is zero (a prompt read whole from the cache,
on older versions); allama does not guess, so an absent count stays `None`, and a response
with neither has no usage.

Log-probabilities. The top-level `logprobs` list (OpenAI's shape: `token`, `logprob`,
`bytes`, `top_logprobs`) holds every token the model generated, which for a thinking model
includes its thinking and the tags around it (and, under `format`, the run Ollama cancelled
when the thinking ended): only the tokens of the answer's text are kept, the last ones,
whose bytes spell `content` exactly. A list that does not end with tokens spelling the text
at a token boundary gives none (`None`), with a warning saying so (`UNSPELT_LOGPROBS`); so
do a list of another shape and a response without text, without one.

A 2xx object with neither `message` nor `done` (Ollama's own fields; `model` and
`created_at` other APIs' bodies carry too) is another API's answer, not an empty one: a
retryable server error of unknown cost (`not_a_response`), as every decoder's.

Ollama sends no response id. Under `provider_data["ollama"]`: `created_at`, the durations
in nanoseconds as sent (`total_duration`, `load_duration`, `prompt_eval_duration`,
`eval_duration`), and `remote_model` / `remote_host` for a model run on another host.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pydantic import JsonValue

from allama.adapters._json_text import Numbers, arguments_text, json_text
from allama.adapters._logprobs import openai_logprobs
from allama.adapters._not_a_response import not_a_response
from allama.adapters._surrogates import lone_surrogates, read_storable_json
from allama.adapters.ollama._errors import error_from_payload, error_from_response
from allama.errors import with_reported_usage
from allama.types import (
    ChatResponse,
    ContentBlock,
    FinishReason,
    Reasoning,
    RequestField,
    StreamBlockType,
    TextPart,
    TokenLogprob,
    ToolCall,
    Usage,
    Warning,
)

__all__ = [
    "KEPT_FIELDS",
    "NAMESPACE",
    "NO_RESPONSE_FIELDS",
    "UNSPELT_LOGPROBS",
    "BlockSink",
    "Layout",
    "Unreadable",
    "decode_body",
    "decode_payload",
    "decode_response",
    "finish_reason_of",
    "is_error_object",
    "is_response_object",
    "json_text",
    "kept_data",
    "text_logprobs",
    "usage_of",
]

NAMESPACE = "ollama"
"""The `provider_data` namespace of what only Ollama reports."""
KEPT_FIELDS = (
    "created_at",
    "total_duration",
    "load_duration",
    "prompt_eval_duration",
    "eval_duration",
    "remote_model",
    "remote_host",
)
"""Top-level fields kept verbatim under `provider_data["ollama"]`."""

# Ollama's own top-level fields, of which each chat response (and stream line) has one:
# `model` and `created_at` are not, other APIs' bodies carry them too.
_RESPONSE_FIELDS = ("message", "done")

NO_RESPONSE_FIELDS = "it has none of the fields of a response"
"""Why a 2xx object is not an Ollama response: another API's body (a chat completion, a
Responses or Anthropic message, a gateway's object), not an empty answer."""


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _count(value: Any) -> int | None:
    """A token count: an integer, or a whole-number float (`20.0`, as a proxy may write one,
    and as Chat Completions reads it) as its integer; a flag, a fraction, a negative float
    or anything else is none (not reported)."""
    if isinstance(value, float):
        return int(value) if value.is_integer() and value >= 0 else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def finish_reason_of(raw: Any, *, tool_calls: bool = False) -> FinishReason | None:
    """The finish reason by its allama name, others kept as sent. `tool_calls` says whether
    the message holds calls (Ollama says `stop`)."""
    if not isinstance(raw, str) or not raw:
        return None
    if raw == "stop":
        return FinishReason.TOOL_CALLS if tool_calls else FinishReason.STOP
    if raw == "length":
        return FinishReason.LENGTH
    return FinishReason(raw)


def usage_of(payload: Mapping[str, Any]) -> Usage | None:
    """The token counts of a response (or a stream's last chunk); `None` when it has none."""
    prompt = _count(payload.get("prompt_eval_count"))
    generated = _count(payload.get("eval_count"))
    if prompt is None and generated is None:
        return None
    return Usage(input_tokens=prompt, output_tokens=generated)


def text_logprobs(raw: Any, text: str) -> tuple[TokenLogprob, ...] | None:
    """The tokens of `raw` (a `logprobs` list) that spell `text`: the last ones, from a token
    boundary on; `None` when there are none such, or `raw` has another shape."""
    tokens = openai_logprobs(raw)
    if tokens is None or not text:
        return None
    return _spelling(tokens, text)


def _spelling(tokens: tuple[TokenLogprob, ...], text: str) -> tuple[TokenLogprob, ...] | None:
    """The last of `tokens`, from a token boundary on, whose bytes spell `text`, or `None`."""
    wanted = text.encode("utf-8")
    spelled = [token.utf8() for token in tokens]
    cut = sum(map(len, spelled)) - len(wanted)
    if cut < 0:
        return None
    start = 0
    while cut > 0 and start < len(spelled):
        cut -= len(spelled[start])
        start += 1
    if cut != 0 or b"".join(spelled[start:]) != wanted:
        return None
    return tokens[start:]


UNSPELT_LOGPROBS = "the tokens the provider reported do not spell the output: they were left out"
"""The warning on a response whose log-probabilities were read but spell no end of its text
(a token that holds part of a character given U+FFFD's bytes, as some versions send it): a
decision names it, where it would say none came, as it does on Chat Completions."""


def kept_data(payload: Mapping[str, Any]) -> dict[str, JsonValue]:
    """The fields kept under `provider_data["ollama"]` that the payload carries."""
    return {key: payload[key] for key in KEPT_FIELDS if payload.get(key) is not None}


def is_error_object(payload: Mapping[str, Any]) -> bool:
    """Whether a parsed object is an error (`{"error": "..."}`) rather than a response."""
    return payload.get("error") is not None and "message" not in payload


def is_response_object(payload: Mapping[str, Any]) -> bool:
    """Whether a parsed object (not an error object) is an Ollama chat response or stream
    line: one that carries Ollama's own fields (`_RESPONSE_FIELDS`)."""
    return any(field in payload for field in _RESPONSE_FIELDS)


class Unreadable(ValueError):
    """A part of a response does not fit the chat response shape; says which."""


class BlockSink(Protocol):
    """What a `Layout` builds: blocks opened, filled and closed one at a time."""

    def start(
        self, block_type: StreamBlockType, *, id: str | None = None, name: str | None = None
    ) -> None: ...

    def text(self, text: str) -> None: ...

    def arguments(self, arguments: str) -> None: ...

    def stop(self) -> None: ...


class Layout:
    """Where each field of a message goes, one message (or stream chunk) at a time: the
    rule the body decoder and the stream decoder share, so that both give the same blocks.

    `calls` counts the tool calls placed. `numbers` is the text the message placed next was
    read from (a body's, a stream line's), whose numbers a call's arguments keep as written
    (a float keeps 17 digits); without it they are written as read.
    """

    __slots__ = ("_open", "_sink", "calls", "numbers")

    def __init__(self, sink: BlockSink) -> None:
        self._sink = sink
        self._open: StreamBlockType | None = None
        self.calls = 0
        self.numbers: Numbers | None = None

    def place(self, message: Any) -> None:
        """Place one message's fields; raises `Unreadable` when it does not fit the shape."""
        if message is None:
            return
        if not isinstance(message, dict):
            raise Unreadable("its `message` is not an object")
        self._piece(message.get("thinking"), StreamBlockType.REASONING, "thinking")
        self._piece(message.get("content"), StreamBlockType.TEXT, "content")
        calls = message.get("tool_calls")
        if calls is None:
            return
        if not isinstance(calls, list):
            raise Unreadable("its `tool_calls` is not a list")
        for call in calls:
            self._call(call)

    def stop(self) -> None:
        """Close the open block, if one is open."""
        if self._open is not None:
            self._sink.stop()
            self._open = None

    def _piece(self, value: Any, block_type: StreamBlockType, name: str) -> None:
        if value is None or value == "":
            return
        if not isinstance(value, str):
            raise Unreadable(f"its `{name}` is not a string")
        if self._open is not block_type:
            self.stop()
            self._sink.start(block_type)
            self._open = block_type
        self._sink.text(value)

    def _call(self, call: Any) -> None:
        if not isinstance(call, dict):
            raise Unreadable("a tool call is not an object")
        function = call.get("function")
        if not isinstance(function, dict):
            raise Unreadable("a tool call has no `function` object")
        name = function.get("name")
        if not isinstance(name, str):
            raise Unreadable("a tool call has no string `name`")
        arguments = arguments_text(function.get("arguments"), self.numbers)
        call_id = _text(call.get("id")) or f"call_{self.calls}"
        self.calls += 1
        self.stop()
        self._sink.start(StreamBlockType.TOOL_CALL, id=call_id, name=name)
        self._sink.arguments(arguments)
        self._sink.stop()


class _Blocks:
    """A `BlockSink` that builds content blocks."""

    __slots__ = ("_id", "_name", "_pieces", "_type", "blocks")

    def __init__(self) -> None:
        self.blocks: list[ContentBlock] = []
        self._type: StreamBlockType | None = None
        self._id: str | None = None
        self._name: str | None = None
        self._pieces: list[str] = []

    def start(
        self, block_type: StreamBlockType, *, id: str | None = None, name: str | None = None
    ) -> None:
        self._type, self._id, self._name = block_type, id, name
        self._pieces = []

    def text(self, text: str) -> None:
        self._pieces.append(text)

    def arguments(self, arguments: str) -> None:
        self._pieces.append(arguments)

    def stop(self) -> None:
        text = "".join(self._pieces)
        if self._type is StreamBlockType.TOOL_CALL:
            self.blocks.append(ToolCall(id=self._id or "", name=self._name or "", arguments=text))
        elif self._type is StreamBlockType.REASONING:
            self.blocks.append(Reasoning(text=text))
        else:
            self.blocks.append(TextPart(text=text))
        self._type = None


def decode_payload(
    payload: Mapping[str, Any],
    *,
    provider: str | None = None,
    model: str | None = None,
    warnings: Sequence[Warning] = (),
    numbers: Numbers | None = None,
) -> ChatResponse:
    """A response object, already parsed, as a `ChatResponse`. Raises `Unreadable` (a
    `ValueError`, with the reason) when it does not fit the response shape. `numbers`: the
    text it was read from, whose numbers a call's arguments keep as written."""
    sink = _Blocks()
    layout = Layout(sink)
    layout.numbers = numbers
    layout.place(payload.get("message"))
    layout.stop()
    kept = kept_data(payload)
    raw_logprobs = payload.get("logprobs")
    logprobs = None
    text = "".join(block.text for block in sink.blocks if isinstance(block, TextPart))
    tokens = openai_logprobs(raw_logprobs) if raw_logprobs is not None and text else None
    if tokens is not None:
        logprobs = _spelling(tokens, text)
        if logprobs is None:
            unspelt = Warning.unsupported(RequestField.LOGPROBS, UNSPELT_LOGPROBS)
            warnings = (*warnings, unspelt if provider is None else unspelt.with_provider(provider))
    return ChatResponse(
        tuple(sink.blocks),
        finish_reason=finish_reason_of(payload.get("done_reason"), tool_calls=layout.calls > 0),
        usage=usage_of(payload),
        warnings=tuple(warnings),
        provider_data={NAMESPACE: kept} if kept else {},
        model=_text(payload.get("model")) or model,
        provider=provider,
        logprobs=logprobs,
    )


def decode_body(
    body: bytes | str,
    *,
    provider: str | None = None,
    model: str | None = None,
    warnings: Sequence[Warning] = (),
    cloud: bool = False,
) -> ChatResponse:
    """A successful (2xx) body as a `ChatResponse`; an error object in it raises that error
    (`cloud`: the server is Ollama's cloud, where a local remedy does nothing)."""
    try:
        payload, halves = read_storable_json(body)
    except ValueError:
        raise not_a_response(body, "it is not JSON", provider=provider, model=model) from None
    if halves:  # half of a character, escaped: read as U+FFFD, as every API reads it
        warnings = (*warnings, lone_surrogates(provider))
    if not isinstance(payload, dict):
        raise not_a_response(body, "it is not a JSON object", provider=provider, model=model)
    if is_error_object(payload):
        raise error_from_payload(payload, provider=provider, model=model, cloud=cloud)
    if not is_response_object(payload):
        raise not_a_response(body, NO_RESPONSE_FIELDS, provider=provider, model=model)
    numbers = Numbers(payload, body, halves=halves)
    try:
        return decode_payload(
            payload, provider=provider, model=model, warnings=warnings, numbers=numbers
        )
    except Unreadable as why:
        error = not_a_response(body, str(why), provider=provider, model=model)
        usage = usage_of(payload)  # the tokens it reported (Ollama Cloud bills them)
        if usage is not None:
            dumped = usage.model_dump(mode="json", exclude_none=True)
            with_reported_usage(error, dumped, payload.get("model"))
        raise error from None


def decode_response(
    status: int,
    headers: Mapping[str, str],
    content: bytes,
    *,
    provider: str | None = None,
    model: str | None = None,
    warnings: Sequence[Warning] = (),
    cloud: bool = False,
) -> ChatResponse:
    """An HTTP response as a `ChatResponse`; raises the `allama.Error` of an error response
    (`cloud` as for `decode_body`)."""
    if status >= 400:
        raise error_from_response(
            status, headers, content, provider=provider, model=model, cloud=cloud
        )
    return decode_body(content, provider=provider, model=model, warnings=warnings, cloud=cloud)
