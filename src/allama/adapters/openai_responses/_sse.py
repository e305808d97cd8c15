"""An incremental decoder from the bytes of a Responses API stream to stream events.

Bytes may arrive split anywhere; the shared SSE framing keeps the unfinished line and scans
each byte once, so the work is linear in the stream. Events are typed (`type` in the data,
the same name on the `event:` line) and the stream ends at a terminal event, with no
`[DONE]` (a server that sends one anyway, OpenRouter, is read to the end the same way):

- `response.created`, `response.in_progress`, `response.queued`: the response's id and model.
- `response.output_item.added`: a function call, a custom tool's call (`custom_tool_call`)
  or a reasoning item opens its block; a message opens one block per content part
  (`response.content_part.added`, or its first delta), an `output_text` part a text block
  and a `refusal` part a refusal block. A
  message announced in the `commentary` phase opens none: its deltas are passed over, and
  the finished item is kept whole with the items allama has no type for, as
  `decode_object` keeps it (the phase is read from the item as announced). A call
  announced without its `call_id` or `name` (M365-Copilot2API's, which names it only when
  it finishes) opens its block once the finished item or the terminal response gives them:
  its arguments, and every event after them, wait till then, so that the block starts
  with the id and name `decode_object` gives (with what is known, at the stream's end or
  its error, if none ever does).
- `response.output_text.delta`, `response.refusal.delta`,
  `response.function_call_arguments.delta`, `response.custom_tool_call_input.delta` (a
  custom tool's free-text input, the call's arguments; its `.done` brings the end the
  deltas did not), `response.reasoning_summary_text.delta` (and
  `response.reasoning_text.delta`, for an item with no summary): the block's pieces. A
  reasoning item's summaries are joined by a blank line, as `decode_object` joins them.
  Its summary is its text, as `decode_object` reads it, so reasoning text is held back
  while a summary may still come, and given when the item finishes without one. One may
  come whatever the response's `reasoning.summary` says (xAI's is `null`, and it streams
  summaries): only for a response with no reasoning configuration at all (`reasoning:
  null` at `response.created`, OpenRouter's for the models whose raw reasoning it streams)
  does reasoning text stream as it comes.
- `response.output_text.annotation.added`: an annotation of a text part, kept verbatim at
  its `annotation_index`, and reported as provider data (below).
- `response.content_part.done`: the part's text beyond what its deltas brought, and its
  annotations; `response.output_text.done`, `response.refusal.done` and
  `response.function_call_arguments.done`: the text or arguments beyond the deltas.
- `response.output_item.done`: the item's blocks stop, after the reasoning item's
  encrypted content and whatever the finished item holds beyond the deltas (a server
  that sends an item whole); an item allama has no type for is reported as provider data,
  the list of every such item so far, so that the collected response holds what
  `decode_object` gives for the same response. A reasoning item's encrypted content is
  given as each copy of the item brings another (OpenAI's added item carries one its
  finished item replaces), the last copy's last: that is the one a body gives and the one
  the next turn must send back.
- `response.completed`, `response.incomplete` (and `response.done`): items the stream never
  announced, the annotations of the finished ones, the ids of the items the blocks came
  from, the reasoning items' own parts and the types of the items a next turn goes without
  (`resume`, from each finished reasoning item, the terminal response's copy last), a
  finished reasoning item's encrypted content where its copy here is another (after its
  block stopped), the usage, the warning on items that wait for the caller's answer, and
  the finish reason, read as `decode_object` reads them.
- `response.failed` (or a terminal response that is an error as `decode_object` reads it:
  `response_error`): its usage, when it has one, then its error; `error`: the error. Either
  is raised after every event before it was yielded (those were paid for, as may be the
  tokens the usage counts). An `error` event is held while the stream is read on to its
  terminal event or its end, for OpenAI follows it with `response.failed`, whose usage
  counts the tokens paid for: that usage is yielded, then the error raised (the event's,
  which carries the error's `type` and `param`, unless it only says the server failed
  where the failed response names more). A failed response whose error says nothing is
  held the same way, for Azure sends the reason after it in an `error` frame; only a
  stream that ends without one raises that the provider did not say why. Events between
  are passed over: the answer failed.

A finished text (a `.done` event's, a finished part's or item's, the terminal response's)
is the streamed text, or the streamed text followed by the rest (the halves of an emoji
whose escape came split across deltas are one character, as the collected response joins
them); one that is anything else
(deltas repeated, lost or out of order) raises `StreamDecodeError`, naming the output item
and part, for the text the caller was given is not the response's (a call's arguments
alike; an empty text, or text of another kind, a reasoning summary after reasoning text,
contradicts nothing). It is raised at the terminal event, after the usage that event
reports (the tokens were paid for), or at the stream's end; an `error` event before then
is raised instead. A piece for an item not open (a stray event: a delta after its item
finished, a part added before its item) is passed over when it is empty, as it says
nothing, and the stream is read to its end; one with text, which has nowhere to go, is
held and raised the same way. An event whose `sequence_number` came before with the same
data is a repeat, read once. An item added at the output index of another item, under
another id (Ollama adds a function call at the index of its message still open), finishes
that item as its `done` would; events that name an item by `item_id` find it wherever its
index went.

Annotations are reported as `decode_object` keeps them, under `annotations`: the list, in
block order, of `{"index": i, "annotations": [...]}` for every text block with any so far,
again at each change. A finished part is authoritative (as in OpenAI's own SDK, whose
stream result is the final response and never the `annotation.added` events): the
`annotations` list of the part in `response.content_part.done`, `response.output_item.done`
or the terminal response's output replaces what the events announced, so an annotation
announced both ways is kept once, and the collected stream holds what `decode_object` gives
for the final response. An `annotation.added` event only adds (or, at an index it already
filled, replaces) until then; one that names no open message item, or comes after its part
finished, is left to the finished part. A part without an `annotations` list changes
nothing.

Other events (web search progress, events added later) say nothing allama reads. allama's
block indices count only the blocks it surfaces, densely from 0, in the order they open.
"""

from __future__ import annotations

import bisect
import json
from collections import deque
from collections.abc import Iterator
from typing import Any

from pydantic import JsonValue

from allama.adapters._sse import SseEvent, SseParser, event_json
from allama.adapters.openai_responses._decode import (
    ANNOTATIONS_KEY,
    CALL_ITEMS,
    ITEMS_KEY,
    NAMESPACE,
    SURFACED_ITEMS,
    _says_something,
    failed_error,
    finish_reason_of,
    is_commentary,
    json_text,
    kept_annotations,
    kept_reasoning,
    left_out_kinds,
    reasoning_parts,
    response_error,
    turn_resume,
    usage_of,
    uses_search_preview,
    waiting_kinds,
    waiting_warning,
)
from allama.adapters.openai_responses._errors import error_from_payload
from allama.errors import Error, ServerError, StreamDecodeError
from allama.stream import _joined
from allama.types import (
    SERVICE_TIER_KEY,
    BlockStart,
    BlockStop,
    Finish,
    ProviderDataEvent,
    ReasoningDelta,
    RefusalDelta,
    ResponseStart,
    StreamBlockType,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    UsageEvent,
    WarningEvent,
)
from allama.types._response import (
    RESUME_KEY,
    USAGE_COST_KEY,
    WEB_SEARCH_PREVIEW_KEY,
    money_fields,
    service_tier_of,
)

__all__ = ["ResponsesStreamDecoder", "decode_stream"]

_DONE = "[DONE]"
_ERRORS = frozenset({"error", "response.error"})
"""Events that are an error: OpenAI's, and OpenRouter's `response.error`."""
_STARTS = frozenset({"response.created", "response.in_progress", "response.queued"})
_ENDS = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.done": "completed",
}
_INPUTS = {
    "response.function_call_arguments.delta": "function_call",
    "response.custom_tool_call_input.delta": "custom_tool_call",
    "response.custom_tool_call_input.done": "custom_tool_call",
}
"""The events that bring a call's arguments, and the type of the item each is for."""
_PART_BLOCKS = {"output_text": StreamBlockType.TEXT, "refusal": StreamBlockType.REFUSAL}
_FINISHED = {
    "response.output_text.done": ("text", StreamBlockType.TEXT),
    "response.refusal.done": ("refusal", StreamBlockType.REFUSAL),
    "response.function_call_arguments.done": ("arguments", StreamBlockType.TOOL_CALL),
}
"""The events that finish a part's text or a call's arguments: the key of the whole of it."""
_SEPARATOR = "\n\n"
_COMMENTARY = "message:commentary"
"""The kind of a message announced in the `commentary` phase: no type's name, so no other
item is read as one."""


class _Block:
    """A block allama surfaces: its index, type, and the pieces it streamed so far."""

    __slots__ = (
        "annotations",
        "block_type",
        "encrypted",
        "final",
        "held",
        "held_part",
        "index",
        "last",
        "open",
        "pieces",
        "positions",
        "signed",
        "source",
    )

    def __init__(self, index: int, block_type: StreamBlockType) -> None:
        self.index = index
        self.block_type = block_type
        self.pieces: list[str] = []
        self.open = True
        self.source: str | None = None
        """A reasoning block's text so far: `summary` or `content`."""
        self.last: int | None = None
        """The summary or content part the last reasoning piece belonged to."""
        self.signed = False
        self.encrypted: str | None = None
        """A reasoning block's encrypted content as last given (a later copy may change it)."""
        self.annotations: list[JsonValue] = []
        """A text block's annotations so far, in order."""
        self.positions: list[int] = []
        """The `annotation_index` of each of them, ascending."""
        self.final = False
        """Whether a finished part gave the annotations (events no longer change them)."""
        self.held: list[str] = []
        """A reasoning block's reasoning text held back while a summary may still come."""
        self.held_part: int | None = None
        """The content part the last held piece belonged to."""

    def streamed(self) -> str:
        """The text so far, as the collected response joins it: the halves of an emoji whose
        escape came split across deltas are one character, as in the finished text."""
        return _joined(self.pieces)

    def hold(self, part: int, text: str) -> None:
        """A piece of reasoning text, kept back; a new part begins with the blank line."""
        if self.held and part != self.held_part:
            self.held.append(_SEPARATOR)
        self.held.append(text)
        self.held_part = part

    def release(self) -> str:
        """The reasoning text held back, no longer held."""
        text = "".join(self.held)
        self.held = []
        return text

    def annotate(self, position: int | None, annotation: JsonValue) -> bool:
        """An annotation at its `annotation_index` (after the others without one); whether
        anything changed."""
        if self.final:
            return False
        if position is None:
            position = self.positions[-1] + 1 if self.positions else 0
        at = bisect.bisect_left(self.positions, position)
        if at < len(self.positions) and self.positions[at] == position:
            if self.annotations[at] == annotation:
                return False
            self.annotations[at] = annotation
        else:
            self.positions.insert(at, position)
            self.annotations.insert(at, annotation)
        return True

    def replace_annotations(self, annotations: list[JsonValue], *, final: bool) -> bool:
        """The annotations a whole part holds; whether anything changed."""
        if self.final and not final:
            return False
        self.final = self.final or final
        if annotations == self.annotations:
            return False
        self.annotations = list(annotations)
        self.positions = list(range(len(annotations)))
        return True


class _Item:
    """An output item the stream announced: its type, its blocks, whether it is done."""

    __slots__ = (
        "added",
        "block",
        "call_id",
        "done",
        "item_id",
        "kept",
        "kind",
        "name",
        "named",
        "parts",
        "position",
    )

    def __init__(self, kind: str, item_id: str | None, position: int) -> None:
        self.kind = kind
        self.item_id = item_id
        self.position = position
        """Its `output_index`."""
        self.block: _Block | None = None
        """The block of a function call or a reasoning item."""
        self.parts: dict[int, _Block] = {}
        """The blocks of a message's content parts, by content index."""
        self.done = False
        self.added: dict[str, Any] | None = None
        """A call item as it was added, whose arguments are taken only where none stream."""
        self.kept: JsonValue | None = None
        """A reasoning item's own parts, from its finished copy (`kept_reasoning`)."""
        self.call_id = ""
        self.name = ""
        """A call's `call_id` and `name` as known so far (held back while either is not)."""
        self.named = False
        """Whether a copy of the call gave a string `name` (`""` too): one never named
        starts with none, which the collector refuses as a body's decoder does."""

    def call_start(self) -> BlockStart:
        """The start of a call's block, with its id and name as `decode_object` reads them."""
        assert self.block is not None
        return BlockStart(
            index=self.block.index,
            block_type=StreamBlockType.TOOL_CALL,
            id=self.call_id or self.item_id,
            name=self.name if self.named else None,
        )


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class ResponsesStreamDecoder:
    """Responses API stream bytes to `StreamEvent`s, incrementally.

    `feed` and `close` are generators: an error is raised after the events before it were
    yielded. An `error` event is raised at the terminal event after it (with that event's
    usage yielded first) or, when none comes, by `close`. `done` turns true at the terminal
    event; anything after it is ignored.
    """

    def __init__(self, *, provider: str | None = None, model: str | None = None) -> None:
        self._parser = SseParser()
        self._provider = provider
        self._model = model
        self._items: dict[int, _Item] = {}
        """The item at each output index."""
        self._retired: list[_Item] = []
        """Items whose output index the server gave another item (Ollama's function call,
        added at the index of the message still open)."""
        self._by_id: dict[str, _Item] = {}
        self._numbers: dict[int, int] = {}
        """The hash of the data of the event at each `sequence_number` seen."""
        self._count = 0
        self._others: list[tuple[int, JsonValue]] = []
        self._entries: dict[int, JsonValue] = {}
        """The entries of the reported annotations list, by the index of their text block."""
        self._started: tuple[str | None, str | None] | None = None
        self._summaries: bool | None = None
        """Whether a reasoning summary may come (`None`: the response did not say): it may,
        unless the response has no reasoning configuration at all."""
        self._has_calls = False
        self._waiting: dict[int, _Item] = {}
        """The calls announced without their `call_id` or `name`, by block index, whose
        start is held back until the values come."""
        self._queue: deque[StreamEvent] = deque()
        """The events held back: from the start of a call still waiting, in order."""
        self._settled = False
        """Whether the terminal response was read: no call can learn its name after it."""
        self._stored = False
        """Whether the response says the server stored it (the latest of its copies that
        says)."""
        self._preview = False
        """Whether the response's tools include `web_search_preview` (said once)."""
        self._held: Error | None = None
        """The error to raise at the terminal event or the stream's end (an `error` event, a
        failed response that did not say why, deltas that disagree with their finished
        text), read on for the usage a terminal event may still report."""
        self._unsaid = False
        """Whether the held error is a failed response's that said nothing (its usage given):
        an `error` frame after it is the reason."""
        self._mismatch: StreamDecodeError | None = None
        """The last disagreement of deltas with a finished text (or text for an item not
        open), known as it is raised."""
        self.finished = False
        self.done = False

    def broken(self, error: Error) -> Iterator[StreamEvent]:
        """A break of the stream's body (`error`): the events held back for a call still
        waiting for its name, as they are. After an error the provider sent, held while the
        decoder read on for a terminal event's usage, the break is not the failure: the
        provider's error is raised (a request it refused is not to be tried again, as a
        network error is). Otherwise the break stands."""
        yield from self._release(force=True)
        if self._held is not None:
            raise self._held from error

    def feed(self, chunk: bytes) -> Iterator[StreamEvent]:
        for event in self._parser.feed(chunk):
            yield from self._ordered(self._event(event, at_end=False))

    def close(self) -> Iterator[StreamEvent]:
        """The events at the end of input (a last event without its blank line); the held
        error, if the stream ended without the terminal event it waited for."""
        try:
            events, cut = self._parser.close()
            for event in events:
                yield from self._ordered(self._event(event, at_end=cut))
        except Error as error:
            if self._held is None or error is self._held:
                raise
            raise self._held from error  # (the stream cut after the error: the error stands)
        yield from self._release(force=True)  # (the stream ended: no name comes now)
        if self._held is not None and not self.done:
            raise self._held

    # A call's start held back until its id and name are known

    def _ordered(self, events: Iterator[StreamEvent]) -> Iterator[StreamEvent]:
        """`events`, with the start of a call that waits for its `call_id` or `name`, and
        every event after it, held back until the call's finished copy gives them, for a
        block's start is its only word on them. An error is raised after the events held
        (with what is known of the call): they came before it."""
        try:
            for event in events:
                if self._queue or (isinstance(event, BlockStart) and event.index in self._waiting):
                    self._queue.append(event)
                    yield from self._release()
                else:
                    yield event
            if self._queue:
                yield from self._release()
        except Exception:
            yield from self._release(force=True)
            raise

    def _release(self, *, force: bool = False) -> Iterator[StreamEvent]:
        """The events held back, up to the start of a call still waiting (none with
        `force`, or once the terminal response was read: its values are what is known)."""
        queue = self._queue
        while queue:
            head = queue[0]
            if isinstance(head, BlockStart) and head.index in self._waiting:
                known = self._waiting[head.index]
                if not (force or self._settled or (known.call_id and known.name)):
                    return
                del self._waiting[head.index]
                head = known.call_start()
            queue.popleft()
            yield head

    def _learn_call(self, known: _Item, item: dict[str, Any]) -> None:
        """A waiting call's `call_id` and `name` from a finished copy of it (the last that
        gives one is what a body gives)."""
        known.call_id = _str(item.get("call_id")) or known.call_id
        known.name = _str(item.get("name")) or known.name
        known.named = known.named or isinstance(item.get("name"), str)

    # Events

    def _event(self, event: SseEvent, *, at_end: bool) -> Iterator[StreamEvent]:
        data = event.data.strip()
        if self.done or not data:
            return
        if self._held is not None:
            yield from self._after_error(event, data, at_end=at_end)
            return
        try:
            yield from self._read(event, data, at_end=at_end)
        except StreamDecodeError as error:
            if error is not self._mismatch or self.done:
                raise
            # Deltas that disagree with their finished text (or text for an item not open):
            # raised at the terminal event, whose usage counts the tokens paid for.
            self._held = error

    def _read(self, event: SseEvent, data: str, *, at_end: bool) -> Iterator[StreamEvent]:
        if data == _DONE:
            self.done = True
            return
        payload = event_json(event, data, at_end=at_end)
        if isinstance(payload, str):  # an error event in the server's own words
            payload = {"error": {"message": payload}}
        if self._repeated(payload, data):
            return
        kind = _kind_of(payload, event)
        if _is_error(kind, event, payload):
            # `error`, OpenRouter's `response.error`, or an event that is only an error
            # object (OpenRouter's errors mid-generation): the provider's error, as it says,
            # held while a `response.failed` with the usage may follow (OpenAI's order).
            self._held = error_from_payload(payload, provider=self._provider, model=self._model)
            return
        if kind == "response.failed":
            response = payload.get("response")
            yield from self._fail(response if isinstance(response, dict) else {})
        if kind in _STARTS:
            yield from self._start(payload.get("response"))
        elif kind == "response.output_item.added":
            yield from self._item_added(payload)
        elif kind == "response.content_part.added":
            yield from self._part_added(payload)
        elif kind == "response.output_text.delta":
            yield from self._part_delta(payload, StreamBlockType.TEXT)
        elif kind == "response.refusal.delta":
            yield from self._part_delta(payload, StreamBlockType.REFUSAL)
        elif kind in _INPUTS:
            yield from self._arguments(payload, _INPUTS[kind], done=kind.endswith(".done"))
        elif kind == "response.reasoning_summary_text.delta":
            yield from self._reasoning_delta(payload, "summary", "summary_index")
        elif kind == "response.reasoning_text.delta":
            yield from self._reasoning_delta(payload, "content", "content_index")
        elif kind == "response.output_text.annotation.added":
            yield from self._annotation_added(payload)
        elif kind == "response.content_part.done":
            yield from self._part_done(payload)
        elif kind in _FINISHED:
            yield from self._finished(payload, *_FINISHED[kind])
        elif kind == "response.output_item.done":
            yield from self._item_done(payload)
        elif kind in _ENDS:
            response = payload.get("response")
            if not isinstance(response, dict):
                raise StreamDecodeError(f"`{kind}` carries no response").mark_authored()
            yield from self._end(response, _ENDS[kind])

    def _after_error(self, event: SseEvent, data: str, *, at_end: bool) -> Iterator[StreamEvent]:
        """An event after the error the stream holds: a terminal event's usage is yielded,
        then the error raised; an `error` frame after a failed response that said nothing is
        its reason, raised. Anything else is passed over (the answer failed)."""
        held = self._held
        assert held is not None
        if data == _DONE:
            raise held
        try:
            payload = event_json(event, data, at_end=at_end)
        except Error as garbled:
            raise held from garbled  # (an event cut or garbled after the error: it stands)
        if isinstance(payload, str):
            payload = {"error": {"message": payload}}
        if self._repeated(payload, data):
            return
        kind = _kind_of(payload, event)
        if _is_error(kind, event, payload):
            error = error_from_payload(payload, provider=self._provider, model=self._model)
            if self._unsaid:
                raise error  # the reason the failed response did not give (Azure's)
            if held is self._mismatch:
                self._held = error  # the provider's word on why the answer is not whole
            return
        if kind != "response.failed" and kind not in _ENDS:
            return
        if self._unsaid:
            raise held  # (its usage was given with the failed response)
        response = payload.get("response")
        response = response if isinstance(response, dict) else {}
        failed = response.get("error")
        if (
            (kind == "response.failed" or response.get("status") == "failed")
            and isinstance(failed, dict)
            and _says_something(failed)
        ):
            theirs = failed_error(response, provider=self._provider, model=self._model)
            held = _more_specific(held, theirs, mismatch=held is self._mismatch)
        self.done = True
        yield from self._fail(response, held)

    def _repeated(self, payload: dict[str, Any], data: str) -> bool:
        """Whether an event is one already read: its `sequence_number` and its data both seen
        (a relay's repeat, whose delta would be text twice). An event without a number is
        new; one whose number came with other data is kept, as a server that numbers many
        events alike sends them, and finished texts still check what its deltas made."""
        number = _int(payload.get("sequence_number"))
        if number is None:
            return False
        digest = hash(data)
        seen = self._numbers.get(number)
        if seen is None:
            self._numbers[number] = digest
            return False
        return seen == digest

    def _start(self, response: Any) -> Iterator[StreamEvent]:
        if not isinstance(response, dict):
            return
        if self._summaries is None and "reasoning" in response:
            self._summaries = _may_summarize(response["reasoning"])
        if "store" in response:
            self._stored = response["store"] is True
        start = (_str(response.get("id")) or None, _str(response.get("model")) or self._model)
        if self._started is None or (start != self._started and not self.finished):
            self._started = start
            yield ResponseStart(id=start[0], model=start[1])
        if not self._preview and uses_search_preview(response):
            # Its searches are not at the `web_search` tool's price.
            self._preview = True
            yield ProviderDataEvent(namespace=NAMESPACE, key=WEB_SEARCH_PREVIEW_KEY, value=True)

    # Items and their blocks

    def _lookup(self, payload: dict[str, Any]) -> tuple[int | None, _Item | None]:
        """The output index an event names and the item there: the one at its
        `output_index`, unless its `item_id` names an item whose index the server gave a
        later one (or the event has no index, or none is there)."""
        index = _int(payload.get("output_index"))
        known = self._pick(index, _str(payload.get("item_id")), moved=True)
        return (known.position if known is not None else index), known

    def _pick(self, index: int | None, item_id: str, *, moved: bool = False) -> _Item | None:
        """The item at `index`, or the one `item_id` names when that is another: any other
        (a finished item names itself), or with `moved` only one no longer at its index (an
        event's `item_id`, which a server may fill loosely, where its index decided before).
        An id several items share leaves each at its own index."""
        known = self._items.get(index) if index is not None else None
        named = self._by_id.get(item_id) if item_id else None
        if named is None or named is known or (known is not None and known.item_id == item_id):
            return known
        if known is None or not moved or self._items.get(named.position) is not named:
            return named
        return known

    def _output_index(self, payload: dict[str, Any]) -> int:
        index, _ = self._lookup(payload)
        if index is None:
            raise StreamDecodeError(
                f"a `{payload.get('type')}` event names no output item"
            ).mark_authored()
        return index

    def _surface(self, block_type: StreamBlockType) -> _Block:
        if self.finished:
            raise StreamDecodeError("the stream sent content after it finished").mark_authored()
        block = _Block(self._count, block_type)
        self._count += 1
        return block

    def _announce(self, index: int, item: dict[str, Any]) -> tuple[_Item, list[StreamEvent]]:
        """The item at `index`, announced now (with the events that open its block)."""
        kind = _COMMENTARY if is_commentary(item) else _str(item.get("type"))
        item_id = _str(item.get("id")) or None
        known = _Item(kind, item_id, index)
        self._items[index] = known
        if item_id is not None:
            self._by_id[item_id] = known
        events: list[StreamEvent] = []
        if kind in CALL_ITEMS:
            block = known.block = self._surface(StreamBlockType.TOOL_CALL)
            self._has_calls = True
            known.call_id, known.name = _str(item.get("call_id")), _str(item.get("name"))
            known.named = isinstance(item.get("name"), str)
            if not (known.call_id and known.name):
                self._waiting[block.index] = known  # its start held back (`_ordered`)
            events.append(known.call_start())
        elif kind == "reasoning":
            block = known.block = self._surface(StreamBlockType.REASONING)
            events.append(BlockStart(index=block.index, block_type=StreamBlockType.REASONING))
            events.extend(self._seal(block, item))
        return known, events

    def _item_added(self, payload: dict[str, Any]) -> Iterator[StreamEvent]:
        item = payload.get("item")
        if not isinstance(item, dict):
            raise StreamDecodeError("`response.output_item.added` carries no item").mark_authored()
        index = self._output_index(payload)
        earlier = self._items.get(index)
        if earlier is not None:
            item_id = _str(item.get("id"))
            if not item_id or earlier.item_id in (None, item_id):
                raise StreamDecodeError(f"output item {index} was added twice").mark_authored()
            # Another item at the same index (Ollama adds a function call at the index of the
            # message still open): the earlier one is finished, its events found by its id.
            yield from self._retire(earlier)
        known, events = self._announce(index, item)
        yield from events
        if known.kind in CALL_ITEMS:
            # A call's arguments in the added item are held: a server may stream them again
            # as deltas (vLLM does), and its finished item holds them all.
            known.added = item
            return
        # An item added with content already in it streams the rest as deltas.
        yield from self._complete(known, item, stop=False)

    def _retire(self, known: _Item) -> Iterator[StreamEvent]:
        """An item whose index went to another: closed as its `done` would close it (an item
        allama has no type for stays open, for its `done` to report it), kept for the end."""
        if not known.done and known.kind in SURFACED_ITEMS:
            known.done = True
            yield from self._complete(known, {}, stop=True)
        self._retired.append(known)

    def _known(self) -> list[_Item]:
        """Every item announced, those whose index went to another among them."""
        return [*self._retired, *self._items.values()]

    @staticmethod
    def _where(known: _Item, part: int | None = None) -> str:
        """Where a block's text is, to say in an error (never the text)."""
        where = f"output item {known.position}"
        return where if part is None else f"{where}, content part {part}"

    def _item(self, payload: dict[str, Any], text: str) -> _Item | None:
        """The open item an event brings `text` for, or `None` for an event to pass over. One
        for an item not open (a stray event: an empty delta after its item finished, a part
        added before its item) that brings nothing contradicts nothing, and is passed over;
        one that brings text has nowhere to put it, and is held as a disagreement of deltas
        is (`_disagree`), raised at the terminal event after the usage it reports."""
        index, known = self._lookup(payload)
        if index is None:
            raise StreamDecodeError(
                f"a `{payload.get('type')}` event names no output item"
            ).mark_authored()
        if known is not None and not known.done:
            return known
        if not text or (known is not None and known.kind == _COMMENTARY):
            return None  # (a commentary message's text is not the answer)
        self._mismatch = StreamDecodeError(
            f"a `{payload.get('type')}` event for output item {index}, which is not open"
        ).mark_authored()
        raise self._mismatch

    def _part(self, known: _Item, payload: dict[str, Any], block_type: StreamBlockType) -> _Block:
        """The block of a message's content part, opened on first sight."""
        if known.kind != "message":
            raise StreamDecodeError(
                f"a `{payload.get('type')}` event for a `{known.kind}` item"
            ).mark_authored()
        content_index = _int(payload.get("content_index")) or 0
        block = known.parts.get(content_index)
        if block is None:
            block = known.parts[content_index] = self._surface(block_type)
        elif block.block_type is not block_type:
            raise StreamDecodeError(
                f"a `{payload.get('type')}` event for a {block.block_type} part"
            ).mark_authored()
        return block

    def _part_added(self, payload: dict[str, Any]) -> Iterator[StreamEvent]:
        part = payload.get("part")
        kind = part.get("type") if isinstance(part, dict) else None
        block_type = _PART_BLOCKS.get(kind) if isinstance(kind, str) else None
        if block_type is None or not isinstance(part, dict):
            return  # a reasoning item's text part, and parts nobody knows yet
        text = _str(part.get("text" if block_type is StreamBlockType.TEXT else "refusal"))
        known = self._item(payload, text)
        if known is None or known.kind != "message":
            return
        content_index = _int(payload.get("content_index")) or 0
        new = content_index not in known.parts
        block = self._part(known, payload, block_type)
        if new:
            yield BlockStart(index=block.index, block_type=block_type)
        yield from self._piece(block, text)
        if block_type is StreamBlockType.TEXT:
            yield from self._annotations(block, part, final=False)

    def _part_done(self, payload: dict[str, Any]) -> Iterator[StreamEvent]:
        """A finished part: the end of its text the deltas did not bring, and its annotations.
        One of an item not open is left to the item's `done` (or the final response)."""
        known = self._open_item(payload)
        part = payload.get("part")
        kind = part.get("type") if isinstance(part, dict) else None
        block_type = _PART_BLOCKS.get(kind) if isinstance(kind, str) else None
        if known is None or known.kind != "message" or block_type is None:
            return
        if not isinstance(part, dict):
            return
        content_index = _int(payload.get("content_index")) or 0
        block = known.parts.get(content_index)
        if block is None:
            block = known.parts[content_index] = self._surface(block_type)
            yield BlockStart(index=block.index, block_type=block_type)
        elif block.block_type is not block_type:
            return
        key = "text" if block_type is StreamBlockType.TEXT else "refusal"
        yield from self._rest(block, _str(part.get(key)), self._where(known, content_index))
        if block_type is StreamBlockType.TEXT:
            yield from self._annotations(block, part, final=True)

    def _finished(
        self, payload: dict[str, Any], key: str, block_type: StreamBlockType
    ) -> Iterator[StreamEvent]:
        """A part's whole text or a call's whole arguments (`output_text.done`,
        `refusal.done`, `function_call_arguments.done`): the end its deltas did not bring.
        One for an item not open or a block never opened is left to the finished part or
        item; one that is not a string (arguments as an object) to the finished item."""
        known = self._open_item(payload)
        whole = payload.get(key)
        if known is None or not isinstance(whole, str):
            return
        if block_type is StreamBlockType.TOOL_CALL:
            block = known.block if known.kind == "function_call" else None
            where = self._where(known)
        elif known.kind == "message":
            content_index = _int(payload.get("content_index")) or 0
            block = known.parts.get(content_index)
            where = self._where(known, content_index)
        else:
            return
        if block is not None and block.block_type is block_type:
            yield from self._rest(block, whole, where)

    def _open_item(self, payload: dict[str, Any]) -> _Item | None:
        """The announced, unfinished item an event names, if it names one."""
        _, known = self._lookup(payload)
        return None if known is None or known.done else known

    # Annotations

    def _annotation_added(self, payload: dict[str, Any]) -> Iterator[StreamEvent]:
        annotation = payload.get("annotation")
        known = self._open_item(payload)
        if annotation is None or known is None or known.kind != "message":
            return  # nothing to keep, or nowhere to keep it: the finished part will say
        content_index = _int(payload.get("content_index")) or 0
        block = known.parts.get(content_index)
        if block is None:
            block = known.parts[content_index] = self._surface(StreamBlockType.TEXT)
            yield BlockStart(index=block.index, block_type=StreamBlockType.TEXT)
        elif block.block_type is not StreamBlockType.TEXT:
            return
        if block.annotate(_int(payload.get("annotation_index")), annotation):
            yield self._report(block)

    def _annotations(
        self, block: _Block, part: dict[str, Any], *, final: bool
    ) -> Iterator[StreamEvent]:
        """The annotations a whole part holds. A finished part's replace whatever came
        before, for good; a part announced with some already (a server that sends parts
        whole) counts as the events would, and an empty list there says nothing yet."""
        annotations = kept_annotations(part)
        if annotations is None or (not final and not annotations):
            return
        if block.replace_annotations(annotations, final=final):
            yield self._report(block)

    def _report(self, block: _Block) -> ProviderDataEvent:
        """Every annotated text block's annotations, after `block`'s changed."""
        if block.annotations:
            self._entries[block.index] = {
                "index": block.index,
                "annotations": list(block.annotations),
            }
        else:
            self._entries.pop(block.index, None)
        # Built without validation: the values are parsed JSON already, and checking the
        # whole list again at every annotation would make many of them cost quadratic time.
        return ProviderDataEvent.model_construct(
            namespace=NAMESPACE,
            key=ANNOTATIONS_KEY,
            value=[self._entries[index] for index in sorted(self._entries)],
        )

    def _part_delta(
        self, payload: dict[str, Any], block_type: StreamBlockType
    ) -> Iterator[StreamEvent]:
        delta = _str(payload.get("delta"))
        known = self._item(payload, delta)
        if known is None or known.kind == _COMMENTARY:
            return  # (a commentary message is not the answer: the finished item is kept whole)
        content_index = _int(payload.get("content_index")) or 0
        new = content_index not in known.parts
        block = self._part(known, payload, block_type)
        if new:
            yield BlockStart(index=block.index, block_type=block_type)
        yield from self._piece(block, delta)

    def _piece(self, block: _Block, text: str) -> Iterator[StreamEvent]:
        if not text:
            return
        block.pieces.append(text)
        if block.block_type is StreamBlockType.TEXT:
            yield TextDelta(index=block.index, text=text)
        elif block.block_type is StreamBlockType.REFUSAL:
            yield RefusalDelta(index=block.index, text=text)
        elif block.block_type is StreamBlockType.TOOL_CALL:
            yield ToolCallDelta(index=block.index, arguments=text)
        else:
            yield ReasoningDelta(index=block.index, text=text)

    def _arguments(
        self, payload: dict[str, Any], kind: str, *, done: bool
    ) -> Iterator[StreamEvent]:
        """A piece of a call's arguments (`delta`), or the whole of them (`input`, `done`:
        one for an item not open is left to the finished item, as the other `.done` events
        are)."""
        text = _str(payload.get("input" if done else "delta"))
        known = self._open_item(payload) if done else self._item(payload, text)
        if known is None:
            return
        if known.kind != kind or known.block is None:
            raise StreamDecodeError(f"`{kind}` arguments for a `{known.kind}` item").mark_authored()
        if done:
            yield from self._rest(known.block, text, self._where(known))
        else:
            yield from self._piece(known.block, text)

    def _reasoning_delta(
        self, payload: dict[str, Any], source: str, part_key: str
    ) -> Iterator[StreamEvent]:
        delta = _str(payload.get("delta"))
        known = self._item(payload, delta)
        if known is None:
            return
        block = known.block
        if known.kind != "reasoning" or block is None:
            raise StreamDecodeError(f"reasoning text for a `{known.kind}` item").mark_authored()
        yield from self._reasoning_piece(block, source, _int(payload.get(part_key)) or 0, delta)

    def _reasoning_piece(
        self, block: _Block, source: str, part: int, text: str
    ) -> Iterator[StreamEvent]:
        """A piece of a summary, or of the reasoning text while no summary came: a new part
        after text of another begins with the blank line that joins them. Reasoning text is
        held back while a summary may still come, which would replace it."""
        if not text or (source == "content" and block.source == "summary"):
            return
        if source == "content" and self._summaries is not False and block.source is None:
            block.hold(part, text)
            return
        if source == "summary":
            block.held = []  # the summary is the text
        if block.pieces and (source, part) != (block.source, block.last):
            text = _SEPARATOR + text
        block.source, block.last = source, part
        yield from self._piece(block, text)

    def _seal(self, block: _Block, item: dict[str, Any]) -> Iterator[StreamEvent]:
        """A reasoning item's id, once, as soon as it appears, and its encrypted content as
        soon as it appears and again whenever a later copy of the item (its `done`, the
        terminal response's) carries another: OpenAI's added item carries one its finished
        item replaces, and the last is what a body gives and what the next turn must send
        back. A copy without one changes nothing."""
        item_id = _str(item.get("id"))
        if item_id and not block.signed:
            block.signed = True
            yield ReasoningDelta(index=block.index, signature=item_id)
        encrypted = _str(item.get("encrypted_content"))
        if encrypted and encrypted != block.encrypted:
            block.encrypted = encrypted
            yield ReasoningDelta(index=block.index, encrypted_content=encrypted)

    def _complete(self, known: _Item, item: dict[str, Any], *, stop: bool) -> Iterator[StreamEvent]:
        """What the item holds beyond what streamed (all of it, from a server that sends
        items whole), and with `stop` the stops of its blocks."""
        if known.kind == "message":
            content = item.get("content")
            parts = content if isinstance(content, list) else []
            for position, part in enumerate(parts):
                kind = part.get("type") if isinstance(part, dict) else None
                block_type = _PART_BLOCKS.get(kind) if isinstance(kind, str) else None
                if block_type is None or not isinstance(part, dict):
                    continue
                block = known.parts.get(position)
                if block is None:
                    block = known.parts[position] = self._surface(block_type)
                    yield BlockStart(index=block.index, block_type=block_type)
                if block.block_type is block_type:
                    key = "text" if block_type is StreamBlockType.TEXT else "refusal"
                    where = self._where(known, position)
                    yield from self._rest(block, _str(part.get(key)), where)
                    if block_type is StreamBlockType.TEXT:
                        yield from self._annotations(block, part, final=stop)
            if stop:
                for block in sorted(known.parts.values(), key=lambda b: b.index):
                    yield from self._stop(block)
            return
        block = known.block
        if block is None:
            return
        if known.kind in CALL_ITEMS:
            yield from self._call_rest(known, block, item)
        else:
            yield from self._reasoning_rest(block, item, stop=stop, where=self._where(known))
            yield from self._seal(block, item)
        if stop:
            yield from self._stop(block)

    def _call_rest(
        self, known: _Item, block: _Block, item: dict[str, Any]
    ) -> Iterator[StreamEvent]:
        """What a finished call's arguments hold beyond what streamed. Arguments a server
        sends as an object agree with streamed text that is the same JSON."""
        key = "input" if known.kind == "custom_tool_call" else "arguments"
        raw = item.get(key)
        if raw is None and known.added is not None and not block.streamed():
            raw = known.added.get(key)  # a finished item without them: the added one's
        if raw is None:
            return
        if isinstance(raw, str):
            yield from self._rest(block, raw, self._where(known))
        elif not _parses_to(block.streamed(), raw):
            yield from self._rest(block, json_text(raw), self._where(known))

    def _reasoning_rest(
        self, block: _Block, item: dict[str, Any], *, stop: bool, where: str
    ) -> Iterator[StreamEvent]:
        """What a reasoning item holds beyond what streamed: its summary, or else (once no
        summary can come) its reasoning text, or the text held back if it has none."""
        summary, content = reasoning_parts(item)
        if summary:
            block.held = []
            yield from self._reasoning_final(block, summary, "summary", where)
        elif block.source != "summary":
            if stop or self._summaries is False or block.source == "content":
                held = block.release()
                yield from self._reasoning_final(block, content or held, "content", where)
            elif content:
                block.held = [content]  # the item's own words for it, still held back

    def _reasoning_final(
        self, block: _Block, final: str, source: str, where: str
    ) -> Iterator[StreamEvent]:
        """The end of a reasoning item's finished text the deltas did not bring. Text of the
        other source (a summary after reasoning text streamed) is not what streamed, so it
        contradicts nothing: the streamed text stays."""
        streamed = block.streamed()
        if not final or final == streamed:
            return
        if block.open and final.startswith(streamed):
            block.source = block.source or source
            yield from self._piece(block, final[len(streamed) :])
        elif block.source in (None, source):
            raise self._disagree(where)

    def _rest(self, block: _Block, final: str, where: str) -> Iterator[StreamEvent]:
        """The end of `final` (a finished text) the deltas did not bring. One that is not
        what streamed followed by more, or comes after the block stopped with more, says
        the deltas were wrong (repeated, lost, out of order): raised, for the text the
        caller was given is not the response's. An empty one says nothing."""
        streamed = block.streamed()
        if not final or final == streamed:
            return
        if not block.open or not final.startswith(streamed):
            raise self._disagree(where)
        yield from self._piece(block, final[len(streamed) :])

    def _disagree(self, where: str) -> StreamDecodeError:
        """The error of deltas that are not the text the stream finished with (the text is
        not quoted: it is the model's), known as it unwinds (`_event` holds it)."""
        self._mismatch = StreamDecodeError(
            f"the streamed deltas of {where} disagree with its finished text"
        ).mark_authored()
        return self._mismatch

    @staticmethod
    def _stop(block: _Block) -> Iterator[StreamEvent]:
        if block.open:
            block.open = False
            yield BlockStop(index=block.index)

    def _item_done(self, payload: dict[str, Any]) -> Iterator[StreamEvent]:
        item = payload.get("item")
        if not isinstance(item, dict):
            raise StreamDecodeError("`response.output_item.done` carries no item").mark_authored()
        index = self._output_index(payload)
        yield from self._finish_item(index, item)

    def _finish_item(self, index: int, item: dict[str, Any]) -> Iterator[StreamEvent]:
        item_id = _str(item.get("id"))
        known = self._pick(index, item_id)
        if known is None:
            # Never announced: a server that sends finished items only.
            known, events = self._announce(index, item)
            yield from events
        same = not item_id or known.item_id in (None, item_id)
        if known.block is not None and known.block.index in self._waiting and same:
            self._learn_call(known, item)
        if known.kind == "reasoning" and same and ("summary" in item or "content" in item):
            # The last finished copy says (the terminal response's is what a body gives).
            known.kept = kept_reasoning(item)
        if known.done:
            # Finished again (by the final response): a message's annotations are the last
            # word, and its text, or a call's arguments, must be what streamed (unless the
            # item found at its index is another, by its id).
            if known.kind == "message":
                yield from self._final_annotations(known, item, check=same)
            elif known.kind in CALL_ITEMS and known.block is not None and same:
                yield from self._call_rest(known, known.block, item)
            elif known.kind == "reasoning" and known.block is not None and same:
                # Its block stopped, but its seal is the last copy's, as in a body.
                known.item_id = known.item_id or item_id or None
                yield from self._seal(known.block, item)
            return
        known.done = True
        known.item_id = known.item_id or _str(item.get("id")) or None
        if known.kind in SURFACED_ITEMS:
            yield from self._complete(known, item, stop=True)
            return
        bisect.insort(self._others, (index, item), key=lambda pair: pair[0])
        # Built without validation: the values are parsed JSON already, and checking the
        # whole list again at every item would make many items cost quadratic time.
        yield ProviderDataEvent.model_construct(
            namespace=NAMESPACE, key=ITEMS_KEY, value=[other for _, other in self._others]
        )

    def _final_annotations(
        self, known: _Item, item: dict[str, Any], *, check: bool
    ) -> Iterator[StreamEvent]:
        """The annotations of a finished message's parts, given again, and (with `check`)
        their text, which must be what streamed."""
        content = item.get("content")
        for position, part in enumerate(content if isinstance(content, list) else ()):
            block = known.parts.get(position)
            kind = part.get("type") if isinstance(part, dict) else None
            block_type = _PART_BLOCKS.get(kind) if isinstance(kind, str) else None
            if block is None or block_type is not block.block_type or not isinstance(part, dict):
                continue
            if check:
                key = "text" if block_type is StreamBlockType.TEXT else "refusal"
                yield from self._rest(block, _str(part.get(key)), self._where(known, position))
            if block_type is StreamBlockType.TEXT:
                yield from self._annotations(block, part, final=True)

    # The end

    def _fail(self, response: dict[str, Any], error: Error | None = None) -> Iterator[StreamEvent]:
        """A failed response's usage, when it has one (the tokens may have been paid for),
        with the model and the service tier it names (whose prices were paid), then its
        error (`error`, or that of a failed response). A failed response whose error says
        nothing is held instead: Azure sends the reason after it, in an `error` frame."""
        usage = response.get("usage")
        if isinstance(usage, dict):
            yield from self._start(response)
            yield UsageEvent(usage=usage_of(usage))
            yield from self._money(usage)
            yield from self._tier(response)
        if error is not None:
            raise error
        error = failed_error(response, provider=self._provider, model=self._model)
        failed = response.get("error")
        if isinstance(failed, dict) and _says_something(failed):
            raise error
        self._held, self._unsaid = error, True

    def _money(self, usage: dict[str, Any]) -> Iterator[StreamEvent]:
        money = money_fields(usage)
        if money is not None:  # what the provider says it cost (OpenRouter, xAI)
            yield ProviderDataEvent.model_construct(
                namespace=NAMESPACE, key=USAGE_COST_KEY, value=money
            )

    def _tier(self, response: dict[str, Any]) -> Iterator[StreamEvent]:
        tier = service_tier_of(response.get("service_tier"))
        if tier is not None:  # billed at other prices
            yield ProviderDataEvent.model_construct(
                namespace=NAMESPACE, key=SERVICE_TIER_KEY, value=tier
            )

    def _item_ids(self) -> Iterator[StreamEvent]:
        """The ids of the items each block came from, the reasoning items' own parts and the
        items no block stands for that followed reasoning, as `decode_object` keeps them."""
        owners = sorted(
            (
                (block.index, block.block_type is StreamBlockType.REASONING, known)
                for known in self._known()
                for block in _blocks_of(known)
            ),
            key=lambda owner: owner[0],
        )
        entries = [(reasoning, known.item_id) for _, reasoning, known in owners]
        parts = [known.kept if reasoning else None for _, reasoning, known in owners]
        left_out = left_out_kinds([other for _, other in self._others])
        resume = turn_resume(
            entries,
            parts,
            stored=self._stored,
            left_out=left_out,
            places=[known.position for _, _, known in owners],
            others=self._others,
        )
        if resume is not None:
            yield ProviderDataEvent.model_construct(
                namespace=NAMESPACE, key=RESUME_KEY, value=resume
            )

    def _end(self, response: dict[str, Any], status: str) -> Iterator[StreamEvent]:
        terminal = response if response.get("status") else {**response, "status": status}
        if terminal.get("status") == "failed":  # as `decode_object` decides (`response_error`)
            yield from self._fail(response)
            return  # (held: a failed response that did not say why)
        error = response_error(terminal, provider=self._provider, model=self._model)
        if error is not None:  # as `decode_object` decides for the same response
            yield from self._fail(response, error)
        output = response.get("output")
        try:
            for index, item in enumerate(output if isinstance(output, list) else ()):
                if isinstance(item, dict):
                    yield from self._finish_item(index, item)
        except StreamDecodeError as mismatch:
            if mismatch is not self._mismatch:
                raise
            self.done = True
            yield from self._fail(response, mismatch)  # after the usage the tokens cost
        self._settled = True  # (a call still waiting for its name starts as it is)
        blocks = [block for known in self._known() for block in _blocks_of(known)]
        for block in sorted(blocks, key=lambda b: b.index):
            if block.open and block.held and not block.pieces:
                # Reasoning text of an item that never finished: no summary came.
                yield from self._piece(block, block.release())
            yield from self._stop(block)
        yield from self._start(response)
        yield from self._item_ids()
        usage = response.get("usage")
        if isinstance(usage, dict):
            yield UsageEvent(usage=usage_of(usage))
            yield from self._money(usage)
        yield from self._tier(response)
        waiting = waiting_kinds([other for _, other in self._others])
        if waiting:  # calls allama does not read, which the caller must answer
            yield WarningEvent(warning=waiting_warning(waiting, self._provider))
        self.finished = self.done = True
        calls = self._has_calls or bool(waiting)
        yield Finish(finish_reason=finish_reason_of(terminal, has_tool_calls=calls))


def _may_summarize(reasoning: Any) -> bool:
    """Whether summaries may come for a response whose `reasoning` is this: unless it has
    no reasoning configuration at all (`null`, OpenRouter's for the models it gives raw
    reasoning text of). A `summary` of `null` is no promise: xAI says so, and summarizes."""
    return reasoning is not None


def _more_specific(held: Error, theirs: Error, *, mismatch: bool) -> Error:
    """The error to raise of an `error` event's (`held`) and the failed response's after it
    (`theirs`): the event's, which carries the error's `type` and `param` beside the code
    and message the failed response repeats, unless it only says the server failed where
    the failed response names more. A disagreement of deltas gives way to the provider's
    failure, which says why the answer is not whole."""
    if mismatch or (type(held) is ServerError and type(theirs) is not ServerError):
        return theirs
    return held


def _parses_to(text: str, value: Any) -> bool:
    """Whether `text` is JSON for `value` (a call's arguments a server sent as an object)."""
    try:
        parsed: Any = json.loads(text)
    except ValueError:
        return False
    return bool(parsed == value)


def _blocks_of(known: _Item) -> list[_Block]:
    return [known.block] if known.block is not None else list(known.parts.values())


def decode_stream(
    data: bytes, *, provider: str | None = None, model: str | None = None
) -> list[StreamEvent]:
    """Every event of a whole recorded stream (raises the stream's error, if it has one)."""
    decoder = ResponsesStreamDecoder(provider=provider, model=model)
    events = list(decoder.feed(data))
    events.extend(decoder.close())
    return events


def _kind_of(payload: dict[str, Any], event: SseEvent) -> str | None:
    """An event's type: its `type`, else (none given) its SSE name. A `type` that is not a
    string is one allama does not know, as an unknown name is (its JSON text, which names
    no event), not a `TypeError` where it is looked up."""
    kind = payload.get("type")
    if not kind:
        return event.event
    return kind if isinstance(kind, str) else json.dumps(kind)


def _is_error(kind: str | None, event: SseEvent, payload: dict[str, Any]) -> bool:
    """Whether an event is the provider's error: `error`, OpenRouter's `response.error`, or
    an event that is only an error object."""
    return (
        kind in _ERRORS
        or event.event in _ERRORS
        or (not kind and isinstance(payload.get("error"), dict))
    )
