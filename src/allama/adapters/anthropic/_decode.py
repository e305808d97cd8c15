"""An Anthropic Messages response to a `ChatResponse`, or to the `allama.Error` it stands for.

The body is read once by pydantic-core's JSON parser into plain data, so that blocks allama
has no type for (server tools and their results, types added later) can be kept verbatim:
they go, in order, under `provider_data["anthropic"]["server_blocks"]`, never into the text.
A turn that holds such blocks, or was paused (`pause_turn`), also keeps the order of all its
blocks under `resume`, so that `to_assistant_message()` sends it back whole: Anthropic
continues a paused turn only so, and the model goes on from a search (before a tool call or
an answer) only with its results; so does a turn with a tool call made from code execution
(a `tool_use` with a `caller`: the code waits on its result), the caller kept beside the
call's index. Such a turn says whether it paused (`{"paused": true, "blocks": [...]}`, a
finished one `"paused": false`): sent back last, a paused turn is continued (as one whose
code waits is), where a finished turn is a prefill like any other assistant turn. The code
execution container a message names is kept verbatim under `container`, and under `resume`
(then `{"container": ..., "blocks": [...]}`, `blocks` only for a turn that goes back whole):
the next request names it where the turn's code waits on tool calls, continued only there.
`thinking` and `redacted_thinking` become reasoning blocks with their signature or data kept
byte for byte (Anthropic checks them on the next turn). The citations of a text block are
kept verbatim under `provider_data["anthropic"]["citations"]`: a list, in block order, of
`{"index": i, "citations": [...]}` for each text block with at least one, where `i` is the
block's position in `ChatResponse.content`. Token counts follow allama's meaning:
`input_tokens` is all the input, cached or not, which Anthropic splits in three. Where usage
lists its sampling passes (`usage.iterations`: a compaction pass, the passes of a server
tool loop), the counts are their sum, which is what is billed (the top-level counts leave
out a compaction pass); the passes of another model are not summed in (an advisor's, an
attempt a server-side fallback declined: the counts are the attempt's that served), but
priced apart where billed. What usage says beyond the counts that changes the bill
(`server_tool_use`, `cache_creation` by cache lifetime, `service_tier`, `speed`,
`inference_geo`, `iterations`) is kept verbatim under
`provider_data["anthropic"]["usage_details"]`.
Other unknown fields are ignored everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import JsonValue

from allama.adapters._json_text import Numbers, arguments_text, json_text
from allama.adapters._not_a_response import not_a_response
from allama.adapters._surrogates import lone_surrogates, read_storable_json
from allama.adapters.anthropic._errors import error_from_payload, error_from_response
from allama.errors import Error, with_reported_usage
from allama.types import (
    DECLINE_EXPLANATION_KEY,
    ChatResponse,
    ContentBlock,
    FinishReason,
    Reasoning,
    TextPart,
    ToolCall,
    Usage,
    Warning,
)
from allama.types._response import RESUME_KEY, billed_extras, billed_passes

__all__ = [
    "CITATIONS_KEY",
    "CONTAINER_KEY",
    "ISSUER_KEY",
    "NAMESPACE",
    "PAUSED",
    "PAUSED_KEY",
    "REFUSAL_CATEGORY_KEY",
    "RESUME_KEY",
    "SERVER_BLOCKS_KEY",
    "STOP_SEQUENCE_KEY",
    "USAGE_DETAILS_KEY",
    "caller_of",
    "citations_of",
    "container_of",
    "decode_body",
    "decode_message",
    "decode_response",
    "finish_reason_of",
    "json_text",
    "resume_of",
    "stop_data",
    "usage_details_of",
    "usage_of",
]

NAMESPACE = "anthropic"
"""The `provider_data` namespace of what only Anthropic has."""
SERVER_BLOCKS_KEY = "server_blocks"
"""Content blocks allama has no type for (server tool calls and results), verbatim, in order."""
STOP_SEQUENCE_KEY = "stop_sequence"
"""The custom stop sequence that ended the response, when one did."""
REFUSAL_CATEGORY_KEY = "refusal_category"
"""The policy category Anthropic gave for a refusal (`cyber`, `bio`, ...)."""
CITATIONS_KEY = "citations"
"""The citations of text blocks, verbatim: a list, in block order, of `{"index": i,
"citations": [...]}` for each text block that has any; `content[i]` is the text they support."""
CONTAINER_KEY = "container"
"""The code execution container the message ran in, verbatim (`{"id", "expires_at"}`)."""
ISSUER_KEY = "issuer"
"""In `resume`, where it is a dict: the provider (its preset's name) that issued the turn,
whose server blocks and container go back to it alone."""
PAUSED_KEY = "paused"
"""In `resume`, `true` for a turn Anthropic paused (`pause_turn`): sent back last, it is
continued as it is, never dropped as a prefill the request cannot continue. A turn that
goes back whole for its server blocks alone, finished, is a prefill like any other there:
`false`, always written, since a resume that says neither this nor its issuer is an older
version's, kept only for a paused turn, and continued."""
USAGE_DETAILS_KEY = "usage_details"
"""What usage reports besides token counts that changes the bill, verbatim: whichever of
`server_tool_use`, `cache_creation`, `service_tier`, `speed`, `inference_geo` and
`iterations` it carries (a speed or a geography only where it is not the standard-priced
one; `cache_creation` summed over the passes `iterations` lists, where they carry it)."""

_USAGE_DETAILS = (
    "server_tool_use",
    "cache_creation",
    "service_tier",
    "speed",
    "inference_geo",
    "iterations",
)
"""The usage fields that change the bill: web searches, cache writes by how long they are
kept, the tier, fast mode (`speed`), the geography inference ran in (`inference_geo`:
`us` costs more on newer models) and the sampling passes (`iterations`: the long-context
rates apply to a pass by its own input)."""

_STANDARD: Mapping[str, frozenset[str]] = {
    "speed": frozenset({"standard"}),
    "inference_geo": frozenset({"global", "not_available"}),
}
"""The values of those fields billed at the standard price, which are not kept."""

_FINISH: dict[str, FinishReason] = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "tool_use": FinishReason.TOOL_CALLS,
    "max_tokens": FinishReason.LENGTH,
    "refusal": FinishReason.REFUSAL,
    "model_context_window_exceeded": FinishReason.CONTEXT_WINDOW,
}


def finish_reason_of(raw: Any) -> FinishReason | None:
    """The finish reason by its allama name; others (`pause_turn`, new ones) kept as sent."""
    if not isinstance(raw, str) or not raw:
        return None
    return _FINISH.get(raw) or FinishReason(raw)


def _count(value: Any) -> int | None:
    """A token count: an integer, or a whole-number float (`20.0`, as a proxy may write one,
    and as Chat Completions reads it) as its integer; a flag, a fraction, a negative float
    or anything else is none (not reported)."""
    if isinstance(value, float):
        return int(value) if value.is_integer() and value >= 0 else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _summed(passes: Sequence[Mapping[str, Any]], key: str, top: Any) -> int | None:
    """`key` summed over the passes that carry it; the top-level count where none does."""
    counts = [count for entry in passes if (count := _count(entry.get(key))) is not None]
    return sum(counts) if counts else _count(top)


def usage_of(usage: Mapping[str, Any]) -> Usage:
    """Token counts by allama's names. Anthropic's `input_tokens` leaves out the cached input
    (read or written), which allama's includes; a count not reported stays `None`. Where
    `usage.iterations` lists the sampling passes, each count is their sum (the top-level
    counts leave out a compaction pass), over those of the message's model alone
    (`billed_passes`: not an attempt a server-side fallback declined)."""
    passes = billed_passes(usage.get("iterations")) if "iterations" in usage else None
    if passes is None:
        uncached = _count(usage.get("input_tokens"))
        written = _count(usage.get("cache_creation_input_tokens"))
        read = _count(usage.get("cache_read_input_tokens"))
        output = _count(usage.get("output_tokens"))
    else:
        uncached = sum(entry["input_tokens"] for entry in passes)
        output = sum(entry["output_tokens"] for entry in passes)
        written = _summed(
            passes, "cache_creation_input_tokens", usage.get("cache_creation_input_tokens")
        )
        read = _summed(passes, "cache_read_input_tokens", usage.get("cache_read_input_tokens"))
    details = usage.get("output_tokens_details")
    thinking = _count(details.get("thinking_tokens")) if isinstance(details, dict) else None
    return Usage(
        input_tokens=None if uncached is None else uncached + (written or 0) + (read or 0),
        output_tokens=output,
        reasoning_tokens=thinking,
        cache_read_tokens=read,
        cache_write_tokens=written,
    )


def usage_details_of(usage: Mapping[str, Any]) -> dict[str, JsonValue]:
    """The usage fields beyond token counts that change the bill, as sent; those that are
    missing or null left out, and a speed or a geography billed at the standard price (every
    message says one). The cache writes by lifetime (`cache_creation`) are summed over the
    sampling passes where `iterations` lists them with theirs, as the counts are."""
    details: dict[str, JsonValue] = {
        key: usage[key]
        for key in _USAGE_DETAILS
        if usage.get(key) is not None
        and not (isinstance(usage[key], str) and usage[key] in _STANDARD.get(key, ()))
    }
    if "iterations" in details:
        passes = billed_passes(usage.get("iterations"))
        written = _cache_creation(passes) if passes is not None else None
        if written is not None:
            details["cache_creation"] = written
    return details


def _cache_creation(passes: Sequence[Mapping[str, Any]]) -> dict[str, JsonValue] | None:
    """The cache writes by lifetime summed over the passes that say them; `None` where none
    does."""
    summed: dict[str, int] = {}
    for entry in passes:
        split = entry.get("cache_creation")
        if not isinstance(split, dict):
            continue
        for key, value in split.items():
            count = _count(value)
            if count is not None:
                summed[key] = summed.get(key, 0) + count
    return dict(summed) if summed else None


def citations_of(block: Mapping[str, Any]) -> list[JsonValue]:
    """A text block's citations as sent; none when it has no list of them."""
    citations = block.get("citations")
    return citations if isinstance(citations, list) else []


def stop_data(message: Mapping[str, Any]) -> dict[str, JsonValue]:
    """What a message (or a stream's `message_delta.delta`) says about its stop beyond the
    reason: the stop sequence that matched, and a refusal's explanation and category."""
    out: dict[str, JsonValue] = {}
    sequence = message.get("stop_sequence")
    if isinstance(sequence, str) and sequence:
        out[STOP_SEQUENCE_KEY] = sequence
    details = message.get("stop_details")
    if isinstance(details, dict) and details.get("type") == "refusal":
        explanation = details.get("explanation")
        if isinstance(explanation, str) and explanation.strip():
            out[DECLINE_EXPLANATION_KEY] = explanation
        category = details.get("category")
        if isinstance(category, str) and category:
            out[REFUSAL_CATEGORY_KEY] = category
    return out


PAUSED = "pause_turn"
"""The stop reason of a turn paused in a server tool's run, continued by sending it back
as it is (`to_assistant_message()`): its blocks are kept in order under `RESUME_KEY`, each
block allama has a type for as its index in `content` (a tool call with a `caller` as
`{"index": i, "caller": ...}`), each other one verbatim."""


def caller_of(block: Mapping[str, Any]) -> JsonValue | None:
    """The `caller` of a `tool_use` block made from code execution (programmatic tool
    calling), verbatim; `None` for a call the model made itself."""
    caller = block.get("caller")
    return caller if isinstance(caller, dict) and caller.get("type") != "direct" else None


def container_of(message: Mapping[str, Any]) -> JsonValue | None:
    """The container a message (or a stream's `message_delta.delta`) names, verbatim."""
    container = message.get("container")
    if isinstance(container, dict) and isinstance(container.get("id"), str):
        return container
    return None


def resume_of(
    layout: list[JsonValue],
    *,
    paused: bool,
    container: JsonValue | None,
    issuer: str | None = None,
) -> JsonValue | None:
    """What `to_assistant_message()` carries for Anthropic to continue the turn: its blocks'
    order when it goes back whole (paused, its code execution waits on a tool call, or it
    holds server blocks: the searches and results the model goes on from, which a turn sent
    back without them loses), and the container it ran in, which the next request names;
    with the provider that issued the turn (`ISSUER_KEY`), where one is named, since they go
    back there alone, and whether it paused (`PAUSED_KEY`), to be continued: said of a
    finished turn too, which a bare list of blocks would leave to be read as an older
    version's paused one."""
    whole = paused or any(
        isinstance(item, dict) and ("index" in item or "type" in item) for item in layout
    )
    if not whole:
        return None if container is None else {"container": container}
    resume: dict[str, JsonValue] = {} if issuer is None else {ISSUER_KEY: issuer}
    resume[PAUSED_KEY] = paused
    if container is not None:
        resume["container"] = container
    resume["blocks"] = layout
    return resume


_TYPED = frozenset({"text", "tool_use", "thinking", "redacted_thinking"})


class _Unreadable(ValueError):
    """A part of the body does not fit the message shape; says which."""


def _string(block: Mapping[str, Any], key: str, *, optional: bool = False) -> str:
    value = block.get(key)
    if isinstance(value, str):
        return value
    if optional and value is None:
        return ""
    raise _Unreadable(f"a `{block.get('type')}` block has no string `{key}`")


def _blocks(
    content: list[Any], numbers: Numbers | None
) -> tuple[list[ContentBlock], list[JsonValue], list[JsonValue], list[JsonValue]]:
    """The content blocks allama has types for, the others verbatim, the citations of the
    text blocks by their position among the first, and the order of them all (`layout`).
    A call's `input` is written with its numbers as `numbers` (the body's text) has them."""
    blocks: list[ContentBlock] = []
    server: list[JsonValue] = []
    cited: list[JsonValue] = []
    layout: list[JsonValue] = []
    for block in content:
        if not isinstance(block, dict):
            raise _Unreadable("a content block is not an object")
        kind = block.get("type")
        caller = caller_of(block) if kind == "tool_use" else None
        if caller is not None:
            layout.append({"index": len(blocks), "caller": caller})
        else:
            typed = isinstance(kind, str) and kind in _TYPED  # (a `type` not a string: unknown)
            layout.append(len(blocks) if typed else block)
        if kind == "text":
            citations = citations_of(block)
            if citations:
                cited.append({"index": len(blocks), "citations": citations})
            blocks.append(TextPart(text=_string(block, "text")))
        elif kind == "tool_use":
            arguments = arguments_text(block.get("input"), numbers)
            blocks.append(
                ToolCall(id=_string(block, "id"), name=_string(block, "name"), arguments=arguments)
            )
        elif kind == "thinking":
            signature = _string(block, "signature", optional=True)
            blocks.append(Reasoning(text=_string(block, "thinking"), signature=signature or None))
        elif kind == "redacted_thinking":
            blocks.append(Reasoning(text="", encrypted_content=_string(block, "data")))
        else:
            server.append(block)
    return blocks, server, cited, layout


def decode_message(
    message: Mapping[str, Any],
    *,
    provider: str | None = None,
    model: str | None = None,
    warnings: Sequence[Warning] = (),
    numbers: Numbers | None = None,
) -> ChatResponse:
    """A message object, already parsed, as a `ChatResponse`. Raises `ValueError` (with the
    reason) when it does not fit the message shape. `numbers`: the text it was read from,
    whose numbers a tool call's `input` keeps as written (a float keeps 17 digits)."""
    content = message.get("content")
    if not isinstance(content, list):
        raise _Unreadable("it has no `content` list")
    blocks, server, cited, layout = _blocks(content, numbers)
    provider_data = stop_data(message)
    if server:
        provider_data[SERVER_BLOCKS_KEY] = server
    container = container_of(message)
    if container is not None:
        provider_data[CONTAINER_KEY] = container
    paused = message.get("stop_reason") == PAUSED
    resume = resume_of(layout, paused=paused, container=container, issuer=provider)
    if resume is not None:
        provider_data[RESUME_KEY] = resume
    if cited:
        provider_data[CITATIONS_KEY] = cited
    usage = message.get("usage")
    details = usage_details_of(usage) if isinstance(usage, dict) else None
    if details:
        provider_data[USAGE_DETAILS_KEY] = details
    body_model = message.get("model")
    body_id = message.get("id")
    return ChatResponse(
        tuple(blocks),
        finish_reason=finish_reason_of(message.get("stop_reason")),
        usage=usage_of(usage) if isinstance(usage, dict) else None,
        warnings=tuple(warnings),
        provider_data={NAMESPACE: provider_data} if provider_data else {},
        model=body_model if isinstance(body_model, str) and body_model else model,
        provider=provider,
        id=body_id if isinstance(body_id, str) and body_id else None,
    )


def decode_body(
    body: bytes | str,
    *,
    provider: str | None = None,
    model: str | None = None,
    warnings: Sequence[Warning] = (),
) -> ChatResponse:
    """A successful (2xx) body as a `ChatResponse`; an error object in it raises that error."""
    try:
        payload, halves = read_storable_json(body)
    except ValueError:
        raise not_a_response(
            body, "it is not JSON", provider=provider, model=model, what="a message"
        ) from None
    if halves:  # half of a character, escaped: read as U+FFFD, as every API reads it
        warnings = (*warnings, lone_surrogates(provider))
    if not isinstance(payload, dict):
        raise not_a_response(
            body, "it is not a JSON object", provider=provider, model=model, what="a message"
        )
    kind = payload.get("type")
    if kind == "error" or (kind is None and isinstance(payload.get("error"), dict)):
        raise error_from_payload(payload, provider=provider, model=model)
    if kind is not None and kind != "message":
        raise not_a_response(
            body, "its `type` is not `message`", provider=provider, model=model, what="a message"
        )
    numbers = Numbers(payload, body, halves=halves)
    try:
        response = decode_message(
            payload, provider=provider, model=model, warnings=warnings, numbers=numbers
        )
    except _Unreadable as why:
        error = not_a_response(body, str(why), provider=provider, model=model, what="a message")
        raise _with_usage(error, payload) from None
    return response


def _with_usage(error: Error, payload: Mapping[str, Any]) -> Error:
    """`error` with the usage the message it could not read reported (its tokens were
    billed), with what it was billed beyond them."""
    usage = payload.get("usage")
    if not isinstance(usage, dict):
        return error
    details = usage_details_of(usage)
    return with_reported_usage(
        error,
        usage_of(usage).model_dump(mode="json", exclude_none=True),
        payload.get("model"),
        details.get("service_tier"),
        extras=billed_extras({NAMESPACE: {USAGE_DETAILS_KEY: details}}),
    )


def decode_response(
    status: int,
    headers: Mapping[str, str],
    content: bytes,
    *,
    provider: str | None = None,
    model: str | None = None,
    warnings: Sequence[Warning] = (),
) -> ChatResponse:
    """An HTTP response as a `ChatResponse`; raises the `allama.Error` of an error response."""
    if status >= 400:
        raise error_from_response(status, headers, content, provider=provider, model=model)
    return decode_body(content, provider=provider, model=model, warnings=warnings)
