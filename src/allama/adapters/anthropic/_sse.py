"""An incremental decoder from the bytes of an Anthropic Messages stream to stream events.

Bytes may arrive split anywhere; the shared SSE framing keeps the unfinished line and scans
each byte once, so the work is linear in the stream. Anthropic numbers its content blocks
itself, server-tool blocks included; allama's block indices count only the blocks it
surfaces (text, tool calls, reasoning), densely from 0. A block allama has no type for is
assembled from its start and deltas and, at its stop, reported as provider data: the list
of every such block so far, so that the collected response holds what `decode_response`
gives for the same message. The citations of a text block (a list on its start, and each
`citations_delta`) are kept verbatim and, at its stop, reported the same way under
`citations`: every cited text block so far, by allama's index for it, which is its position
in the collected content; each event holds the list as it stood then. The usage fields
beyond the token counts that change the bill (`server_tool_use`, `cache_creation`,
`service_tier`, `iterations`) are running totals like the counts, a later report of one
replacing the earlier; they are reported under `usage_details` whenever they change. Where
the usage lists its sampling passes (`iterations`, given whole in `message_delta`), each
count reported is their sum, as in `decode_response`. The container a
message names (on `message_start`'s message or in `message_delta`'s delta) is reported under
`container` when it arrives. A tool call's input given on its start is held until its stop
and used there only if no `input_json_delta` carried its arguments (deltas replace it).
Half of a character escaped alone in the arguments' JSON text (`\\ud83d`) is U+FFFD, with
the lone-surrogate warning, as the same call's `input` object reads in a body: an escape a
delta cuts short, or a first half at a delta's end, is given with the next delta or at
the block's stop (`EscapedHalves`). A block kept verbatim reads each half in it as U+FFFD
at its stop, with the warning, as the body does.
What `decode_response` keeps under `resume` (a paused turn's blocks in order, a turn's with
a tool call from code execution, the container) is reported before the finish. An `event:
error` is raised after every event before it was yielded (those were paid for); one after
the finish ends the stream with its answer whole (the streams' own rule, `allama.stream`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Any

from pydantic import JsonValue

from allama.adapters._http import wire_json
from allama.adapters._sse import SseEvent, SseParser, event_json
from allama.adapters._surrogates import (
    EscapedHalves,
    holds_lone_surrogate,
    lone_surrogates,
    storable_json,
)
from allama.adapters.anthropic._decode import (
    CITATIONS_KEY,
    CONTAINER_KEY,
    NAMESPACE,
    PAUSED,
    RESUME_KEY,
    SERVER_BLOCKS_KEY,
    USAGE_DETAILS_KEY,
    caller_of,
    citations_of,
    container_of,
    finish_reason_of,
    json_text,
    resume_of,
    stop_data,
    usage_details_of,
    usage_of,
)
from allama.adapters.anthropic._errors import error_from_payload
from allama.errors import StreamDecodeError
from allama.types import (
    BlockStart,
    BlockStop,
    Finish,
    ProviderDataEvent,
    ReasoningDelta,
    ResponseStart,
    StreamBlockType,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    UsageEvent,
    WarningEvent,
)

__all__ = ["MessagesStreamDecoder", "decode_stream"]

_OUTPUT_COUNTS = frozenset({"output_tokens", "output_tokens_details"})

# Which delta types fit which surfaced block.
_DELTA_BLOCK: dict[str, StreamBlockType] = {
    "text_delta": StreamBlockType.TEXT,
    "input_json_delta": StreamBlockType.TOOL_CALL,
    "thinking_delta": StreamBlockType.REASONING,
    "signature_delta": StreamBlockType.REASONING,
}


class _Surfaced:
    """A block allama surfaces: its own index, its type, whether arguments arrived as
    deltas, and (a tool call) their reading (`EscapedHalves`), the input its start gave,
    held until its stop, (a text block) the citations that arrived for it, verbatim, and
    (a tool call made from code execution) its caller."""

    __slots__ = (
        "arguments",
        "block_type",
        "caller",
        "citations",
        "has_arguments",
        "index",
        "initial",
    )

    def __init__(self, index: int, block_type: StreamBlockType) -> None:
        self.index = index
        self.block_type = block_type
        self.has_arguments = False
        self.arguments = EscapedHalves()
        self.initial = ""
        self.citations: list[JsonValue] = []
        self.caller: JsonValue | None = None


class _Server:
    """A block allama keeps verbatim, put together from its start and its deltas.

    Pieces are kept in lists and joined once at the stop, so many deltas cost linear time.
    """

    __slots__ = ("block", "citations", "json_parts", "strings")

    def __init__(self, block: dict[str, Any]) -> None:
        self.block = dict(block)
        self.json_parts: list[str] = []
        self.strings: dict[str, list[str]] = {}
        self.citations: list[Any] = []

    def add(self, delta: dict[str, Any]) -> None:
        kind = delta.get("type")
        if kind == "input_json_delta":
            self.json_parts.append(_str(delta.get("partial_json")))
        elif kind == "text_delta":
            self._append("text", delta.get("text"))
        elif kind == "thinking_delta":
            self._append("thinking", delta.get("thinking"))
        elif kind == "signature_delta":
            self.block["signature"] = _str(delta.get("signature"))
        elif kind == "citations_delta" and "citation" in delta:
            self.citations.append(delta["citation"])

    def _append(self, key: str, value: Any) -> None:
        parts = self.strings.get(key)
        if parts is None:
            parts = self.strings[key] = [_str(self.block.get(key))]
        parts.append(_str(value))

    def build(self) -> JsonValue:
        block = self.block
        for key, parts in self.strings.items():
            block[key] = "".join(parts)
        if self.citations:
            earlier = block.get("citations")
            block["citations"] = [*(earlier if isinstance(earlier, list) else ()), *self.citations]
        text = "".join(self.json_parts)
        if text:
            # The input as the non-streamed message has it: parsed, or (if the pieces do not
            # make JSON) the text itself, so that nothing is lost.
            try:
                block["input"] = wire_json(text)
            except ValueError:
                block["input"] = text
        return block


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


class MessagesStreamDecoder:
    """Messages stream bytes to `StreamEvent`s, incrementally.

    `feed` and `close` are generators: an error event is raised after the events before it
    were yielded. `done` turns true at `message_stop`; anything after it is ignored.
    """

    def __init__(self, *, provider: str | None = None, model: str | None = None) -> None:
        self._parser = SseParser()
        self._provider = provider
        self._model = model
        self._surfaced: dict[int, _Surfaced] = {}
        self._open: dict[int, _Surfaced] = {}
        self._server: dict[int, _Server] = {}
        self._server_done: list[tuple[int, JsonValue]] = []
        self._cited: list[dict[str, Any]] = []
        self._usage: dict[str, Any] = {}
        self._usage_details: dict[str, JsonValue] = {}
        self._container: JsonValue | None = None
        self._halves_told = False
        self.finished = False
        self.done = False

    def feed(self, chunk: bytes) -> Iterator[StreamEvent]:
        for event in self._parser.feed(chunk):
            yield from self._event(event, at_end=False)

    def close(self) -> Iterator[StreamEvent]:
        """The events at the end of input (a last event without its blank line)."""
        events, cut = self._parser.close()
        for event in events:
            yield from self._event(event, at_end=cut)

    def _event(self, event: SseEvent, *, at_end: bool) -> Iterator[StreamEvent]:
        if self.done or not event.data.strip():
            return
        payload = event_json(event, event.data, at_end=at_end)
        if isinstance(payload, str):  # an error event in the server's own words
            payload = {"type": "error", "error": {"type": "api_error", "message": payload}}
        kind = payload.get("type", event.event)
        # An event with no type that holds an error object is another host's error in
        # OpenAI's shape, sent unnamed (`data: {"error": {"message": ..., "code": 429}}`).
        unnamed = "type" not in payload and isinstance(payload.get("error"), dict)
        if kind == "error" or event.event == "error" or unnamed:
            raise error_from_payload(payload, provider=self._provider, model=self._model)
        if kind == "message_start":
            yield from self._message_start(payload)
        elif kind == "content_block_start":
            yield from self._block_start(payload)
        elif kind == "content_block_delta":
            yield from self._block_delta(payload)
        elif kind == "content_block_stop":
            yield from self._block_stop(payload)
        elif kind == "message_delta":
            yield from self._message_delta(payload)
        elif kind == "message_stop":
            self.done = True
            if not self.finished:
                yield from self._finish(None)
        # `ping` and event types added later say nothing allama reads.

    def _message_start(self, payload: dict[str, Any]) -> Iterator[StreamEvent]:
        message = payload.get("message")
        if not isinstance(message, dict):
            raise StreamDecodeError("`message_start` carries no message").mark_authored()
        body_id = message.get("id")
        body_model = message.get("model")
        yield ResponseStart(
            id=body_id if isinstance(body_id, str) and body_id else None,
            model=body_model if isinstance(body_model, str) and body_model else self._model,
        )
        usage = message.get("usage")
        if isinstance(usage, dict):
            # The input counts; the output counts here only start a running total.
            self._usage = {k: v for k, v in usage.items() if k not in _OUTPUT_COUNTS}
            yield UsageEvent(usage=usage_of(self._usage))
            yield from self._details()
        yield from self._container_in(message)

    def _container_in(self, message: dict[str, Any]) -> Iterator[StreamEvent]:
        """The container `message` names, when it names one it did not before."""
        container = container_of(message)
        if container is not None and container != self._container:
            self._container = container
            yield ProviderDataEvent(namespace=NAMESPACE, key=CONTAINER_KEY, value=container)

    def _index(self, payload: dict[str, Any]) -> int:
        index = payload.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            raise StreamDecodeError(
                f"a `{payload.get('type')}` event has no block index"
            ).mark_authored()
        return index

    def _content_allowed(self, payload: dict[str, Any]) -> None:
        if self.finished:
            raise StreamDecodeError(
                f"the stream sent `{payload.get('type')}` after its stop reason"
            ).mark_authored()

    def _block_start(self, payload: dict[str, Any]) -> Iterator[StreamEvent]:
        self._content_allowed(payload)
        index = self._index(payload)
        block = payload.get("content_block")
        if not isinstance(block, dict):
            raise StreamDecodeError(
                f"`content_block_start` for block {index} carries no block"
            ).mark_authored()
        if index in self._surfaced or index in self._server:
            raise StreamDecodeError(f"block {index} started twice").mark_authored()
        kind = block.get("type")
        if kind == "text":
            ours = self._surface(index, StreamBlockType.TEXT)
            ours.citations.extend(citations_of(block))
            yield BlockStart(index=ours.index, block_type=StreamBlockType.TEXT)
            text = _str(block.get("text"))
            if text:
                yield TextDelta(index=ours.index, text=text)
        elif kind == "tool_use":
            ours = self._surface(index, StreamBlockType.TOOL_CALL)
            ours.caller = caller_of(block)
            name = block.get("name")
            call_id = block.get("id")
            yield BlockStart(
                index=ours.index,
                block_type=StreamBlockType.TOOL_CALL,
                id=call_id if isinstance(call_id, str) and call_id else None,
                name=name if isinstance(name, str) else None,
            )
            # The start carries `input: {}` and the arguments follow as deltas; an input
            # given whole at the start is its arguments, unless deltas follow it too (they
            # replace it, as in Anthropic's SDK): held until the stop, so never both.
            initial = block.get("input")
            if initial:
                ours.initial = initial if isinstance(initial, str) else json_text(initial)
        elif kind == "thinking":
            ours = self._surface(index, StreamBlockType.REASONING)
            yield BlockStart(index=ours.index, block_type=StreamBlockType.REASONING)
            text = _str(block.get("thinking"))
            if text:
                yield ReasoningDelta(index=ours.index, text=text)
            signature = _str(block.get("signature"))
            if signature:
                yield ReasoningDelta(index=ours.index, signature=signature)
        elif kind == "redacted_thinking":
            ours = self._surface(index, StreamBlockType.REASONING)
            yield BlockStart(index=ours.index, block_type=StreamBlockType.REASONING)
            yield ReasoningDelta(index=ours.index, encrypted_content=_str(block.get("data")))
        else:
            self._server[index] = _Server(block)

    def _surface(self, index: int, block_type: StreamBlockType) -> _Surfaced:
        ours = _Surfaced(len(self._surfaced), block_type)
        self._surfaced[index] = ours
        self._open[index] = ours
        return ours

    def _block_delta(self, payload: dict[str, Any]) -> Iterator[StreamEvent]:
        self._content_allowed(payload)
        index = self._index(payload)
        delta = payload.get("delta")
        if not isinstance(delta, dict):
            return
        server = self._server.get(index)
        if server is not None:
            server.add(delta)
            return
        ours = self._open.get(index)
        if ours is None:
            raise StreamDecodeError(f"a delta for block {index}, which is not open").mark_authored()
        kind = delta.get("type")
        if kind == "citations_delta":
            # Kept for a text block (the only kind Anthropic cites), reported at its stop.
            if ours.block_type is StreamBlockType.TEXT and "citation" in delta:
                ours.citations.append(delta["citation"])
            return
        fits = _DELTA_BLOCK.get(kind) if isinstance(kind, str) else None
        if fits is None:
            return  # delta types added later
        if fits is not ours.block_type:
            raise StreamDecodeError(
                f"a `{kind}` for block {index}, which is a `{ours.block_type}` block"
            ).mark_authored()
        if kind == "text_delta":
            text = _str(delta.get("text"))
            if text:
                yield TextDelta(index=ours.index, text=text)
        elif kind == "input_json_delta":
            piece = _str(delta.get("partial_json"))
            if piece:
                ours.has_arguments = True
                arguments = ours.arguments.read(piece)
                yield from self._halves(ours.arguments.met)
                if arguments:
                    yield ToolCallDelta(index=ours.index, arguments=arguments)
        elif kind == "thinking_delta":
            text = _str(delta.get("thinking"))
            if text:
                yield ReasoningDelta(index=ours.index, text=text)
        else:
            signature = _str(delta.get("signature"))
            if signature:
                yield ReasoningDelta(index=ours.index, signature=signature)

    def _block_stop(self, payload: dict[str, Any]) -> Iterator[StreamEvent]:
        self._content_allowed(payload)
        index = self._index(payload)
        server = self._server.pop(index, None)
        if server is not None:
            block = server.build()
            halves = holds_lone_surrogate(block)
            if halves:  # (its `input`'s text escaped one, or its event did): U+FFFD
                block = storable_json(block)
            yield from self._halves(halves)
            bisect.insort(self._server_done, (index, block), key=lambda pair: pair[0])
            # Built without validation: the values are parsed JSON already, and checking the
            # whole list again at every stop would make many server blocks cost quadratic time.
            yield ProviderDataEvent.model_construct(
                namespace=NAMESPACE,
                key=SERVER_BLOCKS_KEY,
                value=[block for _, block in self._server_done],
            )
            return
        ours = self._open.pop(index, None)
        if ours is None:
            raise StreamDecodeError(
                f"`content_block_stop` for block {index}, which is not open"
            ).mark_authored()
        yield from self._stop(ours)

    def _stop(self, ours: _Surfaced) -> Iterator[StreamEvent]:
        if ours.block_type is StreamBlockType.TOOL_CALL:
            rest = ours.arguments.end()  # (an escape that waited for the next delta)
            yield from self._halves(ours.arguments.met)
            if rest:
                yield ToolCallDelta(index=ours.index, arguments=rest)
            if not ours.has_arguments:
                # No deltas: the input its start gave; a call without arguments streams
                # none, and its arguments are the empty object, as in the non-streamed
                # message.
                yield ToolCallDelta(index=ours.index, arguments=ours.initial or "{}")
        yield BlockStop(index=ours.index)
        if ours.citations:
            # In block order (blocks stop in order, as a rule: then this appends).
            entry = {"index": ours.index, "citations": ours.citations}
            bisect.insort(self._cited, entry, key=lambda cited: cited["index"])
            # A snapshot of the list so far (an event kept by the caller does not change
            # as later blocks stop), built without validating it again: a copy of a list
            # of references, small beside what a message of cited blocks carries.
            yield ProviderDataEvent.model_construct(
                namespace=NAMESPACE, key=CITATIONS_KEY, value=list(self._cited)
            )

    def _halves(self, met: bool) -> Iterator[StreamEvent]:
        """The lone-surrogate warning, once, when half of a character was `met` alone (a
        tool call's arguments, a server block) and read as U+FFFD, as a body's reader
        reads it."""
        if met and not self._halves_told:
            self._halves_told = True
            yield WarningEvent(warning=lone_surrogates(self._provider))

    def _details(self) -> Iterator[StreamEvent]:
        """The usage details so far, when they changed."""
        details = usage_details_of(self._usage)
        if details and details != self._usage_details:
            self._usage_details = details
            yield ProviderDataEvent(namespace=NAMESPACE, key=USAGE_DETAILS_KEY, value=details)

    def _message_delta(self, payload: dict[str, Any]) -> Iterator[StreamEvent]:
        usage = payload.get("usage")
        if isinstance(usage, dict):
            # Running totals: each count reported replaces the one before.
            self._usage.update((k, v) for k, v in usage.items() if v is not None)
            yield UsageEvent(usage=usage_of(self._usage))
            yield from self._details()
        delta = payload.get("delta")
        if not isinstance(delta, dict) or self.finished:
            return
        yield from self._container_in(delta)
        reason = delta.get("stop_reason")
        if not reason:
            return
        for key, value in stop_data(delta).items():
            yield ProviderDataEvent(namespace=NAMESPACE, key=key, value=value)
        yield from self._finish(reason)

    def _finish(self, raw: Any) -> Iterator[StreamEvent]:
        self.finished = True
        for ours in self._open.values():
            yield from self._stop(ours)
        self._open.clear()
        resume = resume_of(
            self._layout(), paused=raw == PAUSED, container=self._container, issuer=self._provider
        )
        if resume is not None:
            yield ProviderDataEvent.model_construct(
                namespace=NAMESPACE, key=RESUME_KEY, value=resume
            )
        yield Finish(finish_reason=finish_reason_of(raw))

    def _layout(self) -> list[JsonValue]:
        """Every block in Anthropic's order: allama's index for each it surfaced (with the
        caller of a tool call made from code execution), each other one verbatim (what
        `decode_response` keeps of a turn that goes back whole)."""
        blocks: list[tuple[int, JsonValue]] = [
            (
                index,
                ours.index if ours.caller is None else {"index": ours.index, "caller": ours.caller},
            )
            for index, ours in self._surfaced.items()
        ]
        blocks.extend(self._server_done)
        return [block for _, block in sorted(blocks, key=lambda pair: pair[0])]


def decode_stream(
    data: bytes, *, provider: str | None = None, model: str | None = None
) -> list[StreamEvent]:
    """Every event of a whole recorded stream (raises the stream's error, if it has one)."""
    decoder = MessagesStreamDecoder(provider=provider, model=model)
    events = list(decoder.feed(data))
    events.extend(decoder.close())
    return events
