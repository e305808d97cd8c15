"""An incremental decoder from the bytes of an Ollama `/api/chat` stream to stream events.

Ollama streams NDJSON (`application/x-ndjson`): one chat response object per line, each
holding only what is new (`message.thinking` and `message.content` deltas, tool calls whole
in one chunk), the last with `done: true`, its `done_reason`, its counts and durations. An
error after the stream started comes as a line `{"error": "..."}` (the status stays 200).

Bytes may arrive split anywhere (inside a line, inside a UTF-8 character); the decoder keeps
the unfinished line and scans each byte once, so the work is linear in the stream. Each
chunk's message goes through the same `Layout` as `decode_response`, so a stream collects to
what the same response's body decodes to.

The `done: true` line ends the stream: it stops the open block and reports the usage, the
provider data and `Finish`, and `done` turns true (anything after it is ignored). A stream
that ends without it is left unfinished, so that collecting it raises
`IncompleteStreamError`; one cut inside a line raises it from `close()`. An error line is
raised after every event before it was yielded (those were paid for). A first line that is
not Ollama's (neither `message` nor `done`: another API's answer) is the retryable server
error the same body is (`decode_body`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from allama.adapters._http import read_json
from allama.adapters._json_text import Numbers
from allama.adapters._not_a_response import not_a_response
from allama.adapters.ollama._decode import (
    NAMESPACE,
    NO_RESPONSE_FIELDS,
    Layout,
    Unreadable,
    finish_reason_of,
    is_error_object,
    is_response_object,
    kept_data,
    usage_of,
)
from allama.adapters.ollama._errors import error_from_payload
from allama.errors import IncompleteStreamError, StreamDecodeError
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
)

__all__ = ["OllamaStreamDecoder", "decode_stream"]


class _Events:
    """A `BlockSink` that makes stream events, with allama's block indices from 0."""

    __slots__ = ("_index", "_next", "_type", "events")

    def __init__(self) -> None:
        self.events: list[StreamEvent] = []
        self._next = 0
        self._index = 0
        self._type = StreamBlockType.TEXT

    def start(
        self, block_type: StreamBlockType, *, id: str | None = None, name: str | None = None
    ) -> None:
        self._index = self._next
        self._next += 1
        self._type = block_type
        self.events.append(BlockStart(index=self._index, block_type=block_type, id=id, name=name))

    def text(self, text: str) -> None:
        if self._type is StreamBlockType.REASONING:
            self.events.append(ReasoningDelta(index=self._index, text=text))
        else:
            self.events.append(TextDelta(index=self._index, text=text))

    def arguments(self, arguments: str) -> None:
        self.events.append(ToolCallDelta(index=self._index, arguments=arguments))

    def stop(self) -> None:
        self.events.append(BlockStop(index=self._index))

    def drain(self) -> list[StreamEvent]:
        events, self.events = self.events, []
        return events


class OllamaStreamDecoder:
    """`/api/chat` NDJSON bytes to `StreamEvent`s, incrementally.

    `feed` and `close` are generators: an error line is raised after the events before it
    were yielded. `done` turns true after the `done: true` line.
    """

    def __init__(
        self, *, provider: str | None = None, model: str | None = None, cloud: bool = False
    ) -> None:
        self._provider = provider
        self._model = model
        self._cloud = cloud
        """Whether the server is Ollama's cloud: an error line's local remedy is left out."""
        self._buffer = bytearray()
        self._scanned = 0
        self._sink = _Events()
        self._layout = Layout(self._sink)
        self._started = False
        self._closed = False
        self.done = False

    def feed(self, chunk: bytes) -> Iterator[StreamEvent]:
        if self.done or self._closed:
            return
        self._buffer += chunk
        buffer = self._buffer
        start = 0
        try:
            while not self.done:
                end = buffer.find(b"\n", max(start, self._scanned))
                if end < 0:
                    break
                line = bytes(buffer[start:end])
                start = end + 1
                yield from self._line(line, at_end=False)
        finally:
            if self.done:
                buffer.clear()
                self._scanned = 0
            else:
                if start:
                    del buffer[:start]
                self._scanned = len(buffer)

    def close(self) -> Iterator[StreamEvent]:
        """The events at the end of input: a last line without its line break."""
        if self.done or self._closed:
            return
        self._closed = True
        line = bytes(self._buffer)
        self._buffer.clear()
        self._scanned = 0
        if line.strip():
            yield from self._line(line, at_end=True)

    def _line(self, line: bytes, *, at_end: bool) -> Iterator[StreamEvent]:
        if not line.strip():
            return
        try:
            payload: Any = read_json(line)
        except ValueError:
            if at_end:
                raise IncompleteStreamError(
                    "the stream ended in the middle of a line"
                ).mark_authored() from None
            raise StreamDecodeError("a stream line is not valid JSON").mark_authored() from None
        if not isinstance(payload, dict):
            raise StreamDecodeError("a stream line is not a JSON object").mark_authored()
        self._layout.numbers = Numbers(payload, line)  # a call's numbers as written
        if is_error_object(payload):
            raise error_from_payload(
                payload, provider=self._provider, model=self._model, cloud=self._cloud
            )
        if not self._started and not is_response_object(payload):
            # Another API's answer (a chat completion, say) is no empty one: as its body is.
            raise not_a_response(
                line, NO_RESPONSE_FIELDS, provider=self._provider, model=self._model
            )
        try:
            yield from self._chunk(payload)
        except Unreadable as why:
            raise StreamDecodeError(
                f"a stream line does not fit the chat response shape: {why}"
            ).mark_authored() from None

    def _chunk(self, payload: dict[str, Any]) -> Iterator[StreamEvent]:
        if not self._started:
            self._started = True
            model = payload.get("model")
            yield ResponseStart(model=model if isinstance(model, str) and model else self._model)
        usage = usage_of(payload)
        try:
            self._layout.place(payload.get("message"))
        except Unreadable:
            # Ollama counts tokens on the last line alone, and bills them on its cloud: a
            # line that does not read still says what the call cost.
            if usage is not None:
                yield UsageEvent(usage=usage)
            raise
        yield from self._sink.drain()
        if usage is not None:
            yield UsageEvent(usage=usage)
        if payload.get("done") is True:
            self.done = True
            self._layout.stop()
            yield from self._sink.drain()
            for key, value in kept_data(payload).items():
                yield ProviderDataEvent(namespace=NAMESPACE, key=key, value=value)
            reason = finish_reason_of(payload.get("done_reason"), tool_calls=self._layout.calls > 0)
            yield Finish(finish_reason=reason)


def decode_stream(
    data: bytes, *, provider: str | None = None, model: str | None = None
) -> list[StreamEvent]:
    """Every event of a whole recorded stream (raises the stream's error, if it has one)."""
    decoder = OllamaStreamDecoder(provider=provider, model=model)
    events = list(decoder.feed(data))
    events.extend(decoder.close())
    return events
