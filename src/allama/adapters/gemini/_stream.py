"""An incremental decoder from the bytes of a Gemini `streamGenerateContent` stream to events.

Two framings, told apart by the first byte that is not whitespace:

- server-sent events (`?alt=sse`): `data: <GenerateContentResponse JSON>` events. An error
  may come in the middle as a raw JSON error object that is not on a `data:` line and is
  spread over several lines; it is put together (brace and string aware) and raised.
- a streamed JSON array (no `alt=sse`): `[{...},\\r\\n{...}]`, its elements read one by one
  as they complete.

Bytes may arrive split anywhere (inside a line, a string, a UTF-8 character); each byte is
scanned once, so the work is linear in the stream. Each chunk holds only the new parts;
they go through the same `Layout` as `decode_response`, so a stream collects to what the
same response's body decodes to (text parts join into one text block, thought parts into
one reasoning block, a thought signature on a non-thought part is a signed text-less
reasoning block opened and closed right before that part's block). Function calls arrive
whole: a tool-call block with its arguments in one delta. Only the candidate with index 0
streams; other candidates (`candidateCount` > 1) are left out of the stream, and `close()`
warns of them (`unread_candidates`, counting the distinct indexes that came), as a body's
are warned of.

Candidate metadata (see `_decode`) is put together over the chunks of candidate 0 so that a
stream collects to what the same response's body keeps, and reported once, by `close()`:

- `citationMetadata`: each chunk cites the sources of its own text, their `startIndex` and
  `endIndex` counted in the whole text, so the lists of every chunk (`citationSources`, or
  Vertex's `citations`) are appended in order into one; any other field, the last one sent
  wins. Google's Vertex AI Node SDK (`aggregateCitationMetadataForCandidate`) appends the
  chunks' citations the same way; Google's ADK (`StreamingResponseAggregator`) and the older
  Gemini JS SDK (`aggregateResponses`) keep only the last chunk's, as if each chunk resent
  all of them. So a chunk whose list begins with the whole list collected so far is taken
  to resend it, and adds only what follows: either way the stream keeps each source once.
- `groundingMetadata` and `urlContextMetadata`: the last one that says something wins, whole
  (a later chunk without one, or with `{}`, does not erase it). Each comes whole on one
  chunk, usually the last but not always; the ADK and the older Gemini JS SDK keep the last
  one. Only the Vertex AI Node SDK appends their lists instead; were Gemini to send the
  grounding in pieces, this rule would keep only the last piece.

Gemini sends no end marker: the last chunk carries the `finishReason`, and `done` stays
false (a `data: [DONE]` line, OpenAI's end marker, which a proxy may add, is skipped).
`close()` (at the end of the bytes) stops the open block, reports the parts kept verbatim,
the candidate metadata and the finish's provider data, and then `Finish` if a chunk carried
a finish reason; a stream that ends without one is left unfinished, so that collecting it
raises `IncompleteStreamError`. But a stream none of whose chunks had a candidate, nor a
blocked prompt, and one of them a usage, ends as the same body reads: an empty response of
no finish reason, its last such usage (whole, as a finishing chunk's) the call's. Usage
comes from each chunk's `usageMetadata` (running totals: a count reported replaces the one
before). Chunks before the one with the finish reason carry the input counts and running (or
no) output counts, which omitted read as 0: their output and reasoning counts (and output
audio, image and video tokens) are not reported, so a stream that fails, is cut or is
cancelled before its finishing chunk keeps its input count and an unknown output, as the
Anthropic decoder does. A chunk's usage goes out before its content (as Anthropic's comes
before the answer), so a stream closed between them keeps the input count that came. The
finishing chunk's usage (or a later chunk's) is the whole call's, read as a body's is. An
error object is raised after every event before it was yielded (those were paid for); one
after the finish reason, after the events `close()` would have given (`Finish` among them),
so the stream ends there with its answer whole. A chunk that does not fit the response
shape raises `StreamDecodeError` after its usage, read by the same rule, was reported, and
with that usage on the error, as a body's that cannot be read has it.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Generator, Iterator
from typing import Any

from pydantic import JsonValue

from allama.adapters._http import read_json
from allama.adapters._json_text import Numbers
from allama.adapters._sse import SseEvent, SseParser
from allama.adapters.gemini._decode import (
    AUDIO_TOKENS_KEY,
    NAMESPACE,
    PARTS_KEY,
    Chunk,
    Layout,
    Unreadable,
    billed_chunk,
    candidate_index,
    finish_data,
    finish_reason_of,
    is_error_object,
    metadata_data,
    read_chunk,
    says_finish,
    says_something,
    unread_candidates,
    with_billed_usage,
)
from allama.adapters.gemini._errors import error_from_payload
from allama.errors import Error, IncompleteStreamError, StreamDecodeError
from allama.types import (
    SERVICE_TIER_KEY,
    BlockStart,
    BlockStop,
    Finish,
    FinishReason,
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
from allama.types._response import MEDIA_TOKENS_KEY

__all__ = ["GenerateStreamDecoder", "decode_stream"]

_IN_STRING = re.compile(r'["\\]')
_OUTSIDE_STRING = re.compile(r'[\[\]{}"]')
_WHITESPACE = " \t\r\n"
_DONE = "[DONE]"


class _Depth:
    """How deep in JSON nesting text read in pieces is: string and escape aware."""

    __slots__ = ("depth", "escaped", "in_string")

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = False
        self.escaped = False

    def close_at(self, text: str, start: int) -> int:
        """Scan `text` from `start` (an opening bracket when the depth is 0); the index just
        after the bracket that brings the depth back to 0, or -1 if the text ends first."""
        i, end = start, len(text)
        if self.escaped and i < end:
            self.escaped = False
            i += 1
        while i < end:
            if self.in_string:
                match = _IN_STRING.search(text, i)
                if match is None:
                    return -1
                j = match.start()
                if text[j] == '"':
                    self.in_string = False
                    i = j + 1
                elif j + 1 < end:
                    i = j + 2
                else:
                    self.escaped = True
                    return -1
            else:
                match = _OUTSIDE_STRING.search(text, i)
                if match is None:
                    return -1
                j = match.start()
                char = text[j]
                if char == '"':
                    self.in_string = True
                elif char in "[{":
                    self.depth += 1
                else:
                    self.depth -= 1
                    if self.depth <= 0:
                        self.depth = 0
                        return j + 1
                i = j + 1
        return -1


class _ArrayReader:
    """The elements of a streamed JSON array, as text, as each one completes."""

    __slots__ = ("_closed", "_decoder", "_depth", "_opened", "_pieces")

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._depth = _Depth()
        self._pieces: list[str] = []
        self._opened = False
        self._closed = False

    @property
    def inside(self) -> bool:
        """Whether an element has started and not ended."""
        return self._depth.depth > 0

    def feed(self, data: bytes, *, final: bool = False) -> Iterator[str]:
        text = self._decoder.decode(data, final)
        i, end = 0, len(text)
        while i < end:
            if self._depth.depth > 0:
                i = yield from self._element(text, i)
                continue
            char = text[i]
            if char in _WHITESPACE:
                i += 1
            elif not self._opened and char == "[":
                self._opened = True
                i += 1
            elif self._opened and not self._closed and char == ",":
                i += 1
            elif self._opened and not self._closed and char == "]":
                self._closed = True
                i += 1
            elif self._opened and not self._closed and char == "{":
                i = yield from self._element(text, i)
            else:
                raise StreamDecodeError(
                    "the stream is not a JSON array of response objects"
                ).mark_authored()

    def _element(self, text: str, start: int) -> Generator[str, None, int]:
        """Read on in the element that starts (or goes on) at `start`; yields it when it
        ends, and returns where reading goes on."""
        end = self._depth.close_at(text, start)
        if end < 0:
            self._pieces.append(text[start:])
            return len(text)
        self._pieces.append(text[start:end])
        element = "".join(self._pieces)
        self._pieces = []
        yield element
        return end


class _RawJson(SseEvent):
    """JSON text that came outside any `data:` line (Gemini's mid-stream error object)."""

    __slots__ = ()


class _SseReader(SseParser):
    """The shared SSE framing, plus the raw JSON lines Gemini sends between events: a line
    starting with `{` or `[` begins a JSON value that ends where its brackets close."""

    def __init__(self) -> None:
        super().__init__()
        self._raw: _Depth | None = None
        self._raw_lines: list[str] = []

    @property
    def raw_pending(self) -> bool:
        """Whether a raw JSON value has started and not ended."""
        return self._raw is not None

    def _line(self, line: str, events: list[SseEvent]) -> None:
        if self._raw is None:
            stripped = line.lstrip(_WHITESPACE)
            if not stripped or stripped[0] not in "{[":
                super()._line(line, events)
                return
            self._dispatch(events)
            self._raw = _Depth()
            start = len(line) - len(stripped)
        else:
            start = 0
        self._raw_lines.append(line)
        if self._raw.close_at(line, start) >= 0:
            events.append(_RawJson(None, "\n".join(self._raw_lines)))
            self._raw = None
            self._raw_lines = []


def _resent(held: list[Any], items: list[Any]) -> int:
    """How many of `items` resend `held`: all of it when `items` begins with the whole of
    `held`, else none. Stops at the first difference, so the work is at most `len(items)`."""
    if len(items) < len(held):
        return 0
    for old, new in zip(held, items, strict=False):
        if old != new:
            return 0
    return len(held)


def _merge_citations(held: Any, metadata: Any) -> Any:
    """The `citationMetadata` collected so far, `held`, with one more chunk's: lists appended
    (what a chunk resends of them skipped), other fields replaced; something that is not an
    object replaces the whole."""
    if not isinstance(metadata, dict):
        return metadata
    if not isinstance(held, dict):
        held = {}
    for key, value in metadata.items():
        before = held.get(key)
        if isinstance(value, list) and isinstance(before, list):
            before.extend(value[_resent(before, value) :])
        else:
            held[key] = list(value) if isinstance(value, list) else value
    return held


def _input_side(tokens: dict[str, JsonValue] | None) -> dict[str, JsonValue] | None:
    """The input side of a chunk's audio, image or video tokens: the output's are not final
    before the finishing chunk."""
    if tokens is None:
        return None
    kept = {key: value for key, value in tokens.items() if not key.startswith("output_")}
    return kept or None


def _running(chunk: Chunk) -> None:
    """`chunk`'s usage as a chunk before the finishing one says it: the output is still
    being written, its counts running or omitted (which `usage_of` reads as 0), so a stream
    that ends here has an output of unknown size; the input is known from the first chunk."""
    if chunk.usage is not None:
        chunk.usage = chunk.usage.model_copy(
            update={"output_tokens": None, "reasoning_tokens": None}
        )
    tokens = {key: _input_side(value) for key, value in chunk.tokens.items()}
    chunk.tokens = {key: value for key, value in tokens.items() if value is not None}


def _held(chunk: Chunk) -> Chunk:
    """A copy of `chunk`'s usage (its counts, billed tokens and tier), kept whole before
    `_running` takes out what a chunk before the finishing one cannot know."""
    held = Chunk()
    held.usage = chunk.usage
    held.tokens = {key: dict(value) for key, value in chunk.tokens.items()}
    held.tier = chunk.tier
    held.tier_said = chunk.tier_said
    return held


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

    def signature(self, signature: str) -> None:
        self.events.append(ReasoningDelta(index=self._index, signature=signature))

    def arguments(self, arguments: str) -> None:
        self.events.append(ToolCallDelta(index=self._index, arguments=arguments))

    def encrypted(self, content: str) -> None:
        self.events.append(ReasoningDelta(index=self._index, encrypted_content=content))

    def stop(self) -> None:
        self.events.append(BlockStop(index=self._index))

    def drain(self) -> list[StreamEvent]:
        events, self.events = self.events, []
        return events


class GenerateStreamDecoder:
    """`streamGenerateContent` bytes (SSE or a JSON array) to `StreamEvent`s, incrementally.

    `feed` and `close` are generators: an error is raised after the events before it were
    yielded. `done` stays false (Gemini sends no end marker); `finished` turns true when a
    chunk carries a finish reason or a blocked prompt, and `close()` (or an error object
    that comes after) then ends the stream with `Finish`.
    """

    def __init__(self, *, provider: str | None = None, model: str | None = None) -> None:
        self._provider = provider
        self._model = model
        self._served = model
        """The model the stream says served it (`ResponseStart.model`)."""
        self._framing: _SseReader | _ArrayReader | None = None
        self._head = bytearray()
        self._sink = _Events()
        self._layout = Layout(self._sink)
        self._started = False
        self._finish: str | None = None
        self._finish_message: Any = None
        self._blocked: dict[str, JsonValue] | None = None
        self._answered = False
        """Whether a chunk has carried the response candidate."""
        self._unanswered: Chunk | None = None
        """The last chunk with neither a candidate nor a blocked prompt but a usage, while no
        chunk has had a candidate: its usage whole, read as the finishing chunk's is."""
        self._citations: Any = None
        self._grounding: Any = None
        self._url_context: Any = None
        self._others: set[int] = set()
        """The indexes of the other candidates that came (`candidateCount` > 1): warned of
        at the end, as a body's are, and not kept."""
        self._billed: dict[str, Any] = {}
        """What the usage said it is billed at (audio, image and video tokens, a tier), as
        last said."""
        self._closed = False
        self._ended = False
        self.finished = False
        self.done = False

    def feed(self, chunk: bytes) -> Iterator[StreamEvent]:
        if self._closed:
            return
        if self._framing is None:
            stripped = chunk.lstrip()
            if not stripped:
                self._head += chunk
                return
            self._framing = _ArrayReader() if stripped[:1] == b"[" else _SseReader()
            chunk = bytes(self._head) + chunk
            self._head.clear()
        if isinstance(self._framing, _ArrayReader):
            for element in self._framing.feed(chunk):
                yield from self._data(element, at_end=False)
        else:
            for event in self._framing.feed(chunk):
                yield from self._event(event, at_end=False)

    def close(self) -> Iterator[StreamEvent]:
        """The events at the end of input: a last event without its blank line, the stop of
        the open block, the provider data, and `Finish` if a finish reason came."""
        if self._closed:
            return
        self._closed = True
        framing = self._framing
        if isinstance(framing, _ArrayReader):
            for element in framing.feed(b"", final=True):
                yield from self._data(element, at_end=False)
            if framing.inside:
                raise self._cut()
        elif framing is not None:
            events, cut = framing.close()
            for event in events:
                yield from self._event(event, at_end=cut)
            if framing.raw_pending:
                raise self._cut()
        yield from self._end()

    @staticmethod
    def _cut() -> IncompleteStreamError:
        return IncompleteStreamError("the stream ended in the middle of a chunk").mark_authored()

    def _event(self, event: SseEvent, *, at_end: bool) -> Iterator[StreamEvent]:
        data = event.data.strip()
        if data == _DONE and not isinstance(event, _RawJson):
            # The end marker of OpenAI's streams, which a proxy in front of Gemini may add:
            # it says nothing (a stream without a finish reason still ends unfinished).
            return
        if data:
            yield from self._data(event.data, at_end=at_end)

    def _data(self, data: str, *, at_end: bool) -> Iterator[StreamEvent]:
        try:
            payload: Any = read_json(data)
        except ValueError:
            if at_end:
                raise self._cut() from None
            raise StreamDecodeError("a stream chunk is not valid JSON").mark_authored() from None
        self._layout.numbers = Numbers(payload, data)  # a call's numbers as written
        yield from self._payload(payload)

    def _payload(self, payload: Any) -> Iterator[StreamEvent]:
        if isinstance(payload, list):
            # An error object wrapped in an array, or chunks sent as one.
            for item in payload:
                if isinstance(item, list):
                    raise StreamDecodeError("a stream chunk is a nested array").mark_authored()
                yield from self._payload(item)
            return
        if not isinstance(payload, dict):
            raise StreamDecodeError("a stream chunk is not a JSON object").mark_authored()
        if is_error_object(payload):
            if self.finished:
                # The answer came whole: its end (`Finish` among it) goes out before the
                # error, as Anthropic's and Chat Completions' streams, which say their finish
                # at once, have it, so the stream ends there with its answer kept.
                yield from self._end()
            raise error_from_payload(payload, provider=self._provider, model=self._model)
        try:
            chunk = read_chunk(payload, first_listed=False)
        except Unreadable as why:
            yield from self._unfit(payload, why, said=False)
        yield from self._chunk(chunk, payload)

    def _unfit(
        self, payload: dict[str, Any], why: Unreadable, *, said: bool
    ) -> Iterator[StreamEvent]:
        """Raise the error of a chunk that does not fit the response shape (`why`). Its
        tokens were billed all the same: its usage is reported before the error (unless
        already `said`, before the part that does not fit), and kept on it, as a body's
        that cannot be read is (`_decode._with_usage`)."""
        error = StreamDecodeError(f"a stream chunk does not fit the response shape: {why}")
        billed = billed_chunk(payload)
        billed.model = billed.model or self._served
        if not (self.finished or says_finish(payload)):
            _running(billed)
        if not said:
            yield from self._usage(billed)
        raise with_billed_usage(error.mark_authored(), billed) from None

    def _chunk(self, chunk: Chunk, payload: dict[str, Any]) -> Iterator[StreamEvent]:
        if not self._started:
            self._started = True
            self._served = chunk.model or self._model
            yield ResponseStart(id=chunk.id, model=self._served)
        if says_something(chunk.citations):
            self._citations = _merge_citations(self._citations, chunk.citations)
        if says_something(chunk.grounding):
            self._grounding = chunk.grounding
        if says_something(chunk.url_context):
            self._url_context = chunk.url_context
        if chunk.finish is not None:
            # The last finish reason reported is the one (Gemini reports it once, last).
            self._finish = chunk.finish
            self._finish_message = chunk.finish_message
            self.finished = True
        elif chunk.blocked is not None and self._blocked is None:
            # A blocked prompt (in the first chunk, which has no candidate).
            self._blocked = chunk.blocked
            self.finished = True
        self._others.update(
            candidate_index(other) for other in chunk.others if isinstance(other, dict)
        )
        if chunk.has_candidate:
            self._answered = True
            self._unanswered = None
        elif not self._answered and chunk.blocked is None and chunk.usage is not None:
            # No candidate and no blocked prompt, as a body may be: if the stream ends with
            # no candidate, its usage is the call's, and the answer is an empty one.
            self._unanswered = _held(chunk)
        if not self.finished:
            _running(chunk)
        # The chunk's usage before its content, as Anthropic's comes before the answer: a
        # stream closed (or cut) between them keeps the input count that came with it.
        yield from self._usage(chunk)
        for part in chunk.parts:
            try:
                self._layout.place(part)
            except Unreadable as why:
                yield from self._unfit(payload, why, said=True)
            yield from self._sink.drain()

    def _usage(self, chunk: Chunk) -> Iterator[StreamEvent]:
        """The events of a chunk's usage, if it reports one."""
        if chunk.usage is None:
            return
        yield UsageEvent(usage=chunk.usage)  # the last usage reported is the whole call's
        # What the usage says it is billed at, said at once: a stream that fails later
        # was still billed at its audio and image prices and its tier's.
        for key, value in (
            (AUDIO_TOKENS_KEY, chunk.tokens.get(AUDIO_TOKENS_KEY)),
            (MEDIA_TOKENS_KEY, chunk.tokens.get(MEDIA_TOKENS_KEY)),
            (SERVICE_TIER_KEY, chunk.tier),
        ):
            if value is not None and value != self._billed.get(key):
                self._billed[key] = value
                yield ProviderDataEvent(namespace=NAMESPACE, key=key, value=value)
        if chunk.tier_said and chunk.tier is None and self._billed.get(SERVICE_TIER_KEY):
            # A later usage says the standard tier: the last one reported is the call's.
            self._billed[SERVICE_TIER_KEY] = None
            yield ProviderDataEvent(namespace=NAMESPACE, key=SERVICE_TIER_KEY, value=None)

    def broken(self, error: Error) -> Iterator[StreamEvent]:
        """The events of a stream whose body broke (`error`, raised by the caller after
        them) once its finish reason came: the answer came whole, and its end (`Finish`
        among it), held for `close()`, goes out, so the stream ends there. Before the finish,
        nothing."""
        return self._end() if self.finished else iter(())

    def _end(self) -> Iterator[StreamEvent]:
        """The end events, once: the open block's stop, what was held for the end, and
        `Finish` if a finish reason came."""
        if self._ended:
            return
        self._ended = True
        self._closed = True  # (nothing read after the end, or after an error, counts)
        self._layout.stop()
        yield from self._sink.drain()
        if self._layout.others:
            yield ProviderDataEvent(namespace=NAMESPACE, key=PARTS_KEY, value=self._layout.others)
        metadata = metadata_data(self._citations, self._grounding, self._url_context)
        for key, value in metadata.items():
            yield ProviderDataEvent(namespace=NAMESPACE, key=key, value=value)
        if self._others:
            # Paid for (their tokens are in the usage), not read: said, as a body's are.
            count = len(self._others | ({0} if self._answered else set()))
            warning = unread_candidates(count, self._provider, streamed=True)
            yield WarningEvent(warning=warning)
        if self._finish is not None:
            for key, value in finish_data(self._finish, self._finish_message).items():
                yield ProviderDataEvent(namespace=NAMESPACE, key=key, value=value)
            reason = finish_reason_of(self._finish, tool_calls=self._layout.calls > 0)
            yield Finish(finish_reason=reason)
        elif self._blocked is not None:
            for key, value in self._blocked.items():
                yield ProviderDataEvent(namespace=NAMESPACE, key=key, value=value)
            yield Finish(finish_reason=FinishReason.CONTENT_FILTER)
        elif self._unanswered is not None and not self._answered:
            # Gemini answered with no candidate, and did not say the prompt was blocked: an
            # empty response of no finish reason, as the same body reads, its usage whole.
            yield from self._usage(self._unanswered)
            yield Finish(finish_reason=None)


def decode_stream(
    data: bytes, *, provider: str | None = None, model: str | None = None
) -> list[StreamEvent]:
    """Every event of a whole recorded stream (raises the stream's error, if it has one)."""
    decoder = GenerateStreamDecoder(provider=provider, model=model)
    events = list(decoder.feed(data))
    events.extend(decoder.close())
    return events
