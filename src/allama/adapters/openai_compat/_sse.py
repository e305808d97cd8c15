"""An incremental decoder from the bytes of a Chat Completions stream to stream events.

Bytes may arrive split anywhere (inside a line, inside a UTF-8 character); the decoder
keeps the unfinished line and scans each byte once, so the work is linear in the stream.
It reads `data:` and `event:` lines, skips comment lines (`: OPENROUTER PROCESSING`), stops
at `data: [DONE]`, folds tool-call deltas by their `index` (by `id`, or onto the call before,
when a server leaves the index out; a delta whose `id` differs from the one its index's call
has is a call of its own, as Ollama sends every call with index 0), reads the deprecated
`delta.function_call` as one tool call, and a call of a tool of another type (`custom`) as
a tool call whose arguments are its `input`. A call's id that comes after its arguments began
(the start gave a stand-in) comes as a second `BlockStart` of the block with that id. A
finish reason `""` (xAI's, with tool calls) is read from the content, as in a body, at
`[DONE]`, or at the end of input where it came on a last delta with nothing in it (servers
that send `""` on every chunk send it with content: a stream of theirs cut short still
ends incomplete). A call's block starts at its first arguments piece that comes once it has
a name: pieces before its name (or with the name `""`) are held and given after the start,
so a name that comes after the arguments began is kept (as OpenAI's SDK joins a name
whenever its pieces come); a call that ends (the stream finishes or fails) still held
starts with what it has. It takes usage from any chunk (the usage-only chunk with empty
`choices`, Groq's `x_groq.usage`), and raises the error an error object in the stream stands
for, after the content and usage that arrived with it (those were paid for). Where the
profile says so (`think_tags`), a `<think>…</think>` block that opens the content is
reasoning, as in a body, however its tags are split across chunks (`_ThinkSplitter`). A
finish reason `stop` after tool calls is `tool_calls`, as in a body.

What allama has no type for goes to `provider_data[provider or "openai"]` as
`ProviderDataEvent`s (the collector keeps the last value per key), under the keys the body
decoder uses, so a collected stream equals the decoded body of the same message:

- `ANNOTATIONS_KEY`: the `delta.annotations` lists (OpenAI's web search sends its
  `url_citation`s on a delta of their own near the end, OpenRouter's web plugin likewise),
  appended in order; each chunk that carries some emits the whole list so far.
- `AUDIO_KEY`: OpenAI's `delta.audio` pieces (the answer's audio, where the request asked
  for it), joined into the object a non-streamed `message.audio` is: their `transcript`
  strings appended in order; their `data` strings each decoded on its own (as OpenAI's
  clients decode each piece: a piece is base64 of its own, `=` padding and all, so the
  strings appended would not decode whole) and the bytes of all of them given as one base64
  string (where a piece is no base64 of its own, the strings appended, as given); each other
  field (`id`, which may come on every piece, `expires_at`) as first given (or filling one
  given as `null`).
  Emitted at the end (finish, `[DONE]`, end of input, an error), not with each piece: the
  audio is the whole answer's, its `data` long.
- `CONTEXT_KEY`: Azure OpenAI On Your Data's `delta.context` (the citations and intent of
  an answer over `data_sources`), which its stream gives whole on the first delta, beside
  the role: kept as given; should it come in pieces, their fields are merged into one object
  (a field given again takes the place of the one before), emitted with each piece.
- `CONTENT_FILTER_RESULTS_KEY`: the error Azure's content filter gives in place of its
  verdicts on a chunk (`content_filter_results`, or `content_filter_result` as some of its
  streams spell it, on every chunk) where it did not run on the answer: the first one, once,
  with the body's warning (`filter_not_run`). The verdicts that note something on the
  answer's chunks are not kept: each chunk's are on its own piece of the answer, and a
  filtered one is the stream's finish (`_late_verdict`).
- `PROMPT_FILTER_RESULTS_KEY`: the `prompt_filter_results` Azure sends on a chunk of their
  own, before the answer, where they note something or are the filter's error (with the
  body's warning), as a body keeps them: the first such, once.
- `EXECUTED_TOOLS_KEY`: Groq's compound systems' `delta.executed_tools`, in order, a tool
  sent again under the same `index` (once it ran, with its output) in the place of the one
  before (`_executed_tools`); each chunk that carries some emits the whole list so far.
- `USAGE_BREAKDOWN_KEY`: Groq's compound systems' `x_groq.usage_breakdown` on the final
  chunk (each model's tokens), verbatim.
- `CONTENT_PARTS_KEY`: the parts of a `delta.content` list no text was read from, appended
  in order, with the body's warning (`UNREAD_PARTS`) once. A `refusal` part is not among
  them: it is the refusal, streamed as `delta.refusal` is (`message_parts`).
- `USAGE_COST_KEY`: the money fields of each usage reported (the usage-only chunk, Groq's
  `x_groq.usage`, the usage of an error chunk or error event); the last one wins.
- `AUDIO_TOKENS_KEY`: the audio tokens of each usage reported that has some (OpenAI's
  audio models), by genai-prices' names; the last one wins (a later usage without audio
  tokens, after one with some, empties it: the call's usage is the last one).
- `REASONING_DETAILS_KEY`: OpenRouter's `delta.reasoning_details`, assembled into the
  entries a non-streamed `message.reasoning_details` holds. OpenRouter streams one entry in
  pieces that repeat its `type`, `index` and `format`: `reasoning.text` pieces of `text`,
  then a piece with an empty `text` and the `signature` (Anthropic); `reasoning.summary`
  pieces of `summary`, then a whole `reasoning.encrypted` entry with its `id` and `data`
  (OpenAI). The rule: a piece continues the entry before it when both are objects with the
  same `type` and the same (present) `index`, and their `id`s do not differ; its `text`,
  `summary`, `data` and `signature` strings are appended to the entry's, and its other
  fields fill those the entry lacks (or has as `null`). Any other piece starts a new entry;
  entries are never reordered, and pieces without an `index` are never joined. The list is
  emitted when an entry is complete and at the end (finish, `[DONE]`, end of input, an
  error), the entry still arriving joined into a copy, so the work stays linear in the
  stream. Where a stream numbers an entry differently from the non-streamed answer (OpenAI's
  `reasoning.encrypted` had `index` 0 in a stream and 1 in a body), the stream's own fields
  are kept as sent.
- `OTHER_CHOICES_KEY`: the text, refusal, tool calls, audio (joined as `AUDIO_KEY`'s) and
  finish reason of each choice after the first (`n` above 1), whose deltas are not read as
  the answer (each choice's read by a decoder of its own, as the first's are), with the
  warning a body's gets (`unread_choices`): both at the end (`[DONE]`, end of input), when
  the count is known.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Generator, Iterator
from typing import Any, Literal

from pydantic import ValidationError

from allama.adapters._sse import SseEvent, SseParser
from allama.adapters.openai_compat._decode import (
    ANNOTATIONS_KEY,
    AUDIO_KEY,
    AUDIO_TOKENS_KEY,
    CONTENT_FILTER_RESULTS_KEY,
    CONTENT_PARTS_KEY,
    CONTEXT_KEY,
    EXECUTED_TOOLS_KEY,
    OTHER_CHOICES_KEY,
    PROMPT_FILTER_RESULTS_KEY,
    REASONING_DETAILS_KEY,
    THINK_CLOSE,
    THINK_OPEN,
    USAGE_BREAKDOWN_KEY,
    USAGE_COST_KEY,
    audio_tokens_of,
    choice_error,
    filter_explanation,
    filter_not_run,
    finish_error,
    finish_reason_of,
    kept_list,
    kept_object,
    loose_usage,
    message_parts,
    other_choice,
    prompt_verdicts,
    reasoning_text,
    refit,
    unchecked_verdicts,
    unread_choices,
    unread_parts,
    usage_breakdown,
    usage_cost,
    usage_of,
)
from allama.adapters.openai_compat._errors import error_from_payload
from allama.adapters.openai_compat._wire import (
    WireChunk,
    WireChunkChoice,
    WireToolCallDelta,
    WireUsage,
)
from allama.errors import Error, IncompleteStreamError, StreamDecodeError
from allama.stream import StreamCollector
from allama.types import (
    DECLINE_EXPLANATION_KEY,
    SERVICE_TIER_KEY,
    BlockStart,
    BlockStop,
    Finish,
    FinishReason,
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
from allama.types._response import service_tier_of

__all__ = ["ChatStreamDecoder", "SseEvent", "SseParser", "decode_stream"]

_DONE = "[DONE]"

_JOINED = frozenset({"text", "summary", "data", "signature"})
"""The string fields of a `reasoning_details` entry that its streamed pieces spell in parts."""

_AUDIO_JOINED = frozenset({"transcript", "data"})
"""The string fields of the answer's audio (`AUDIO_KEY`) that its streamed pieces spell in
parts (`data`'s pieces each base64 of their own: `_audio_piece`)."""


class _Pieced:
    """An object a stream sends in pieces (an audio, a `reasoning_details` entry): the
    strings of its `joined` fields appended, its other fields as first given (a later piece
    fills one missing or `null`), each in its place as first given."""

    __slots__ = ("fields", "joined", "pieces")

    def __init__(self, joined: frozenset[str]) -> None:
        self.joined = joined
        self.fields: dict[str, Any] = {}
        self.pieces: dict[str, list[str]] = {}
        """The string pieces of each joined field so far."""

    def add(self, piece: dict[str, Any]) -> None:
        for key, value in piece.items():
            if key in self.joined and isinstance(value, str):
                self.pieces.setdefault(key, []).append(value)
                self.fields.setdefault(key, value)
            elif self.fields.get(key) is None:
                self.fields[key] = value

    def value(self) -> dict[str, Any]:
        """A copy of the object so far, its string pieces joined."""
        value = dict(self.fields)
        for key, pieces in self.pieces.items():
            value[key] = pieces[0] if len(pieces) == 1 else "".join(pieces)
        return value


def _continues(entry: dict[str, Any], piece: dict[str, Any]) -> bool:
    """Whether `piece` is a further piece of the `reasoning_details` entry `entry`."""
    index = piece.get("index")
    if index is None or index != entry.get("index") or piece.get("type") != entry.get("type"):
        return False
    ours, theirs = entry.get("id"), piece.get("id")
    return ours is None or theirs is None or ours == theirs


def _partial_tag(text: str, tag: str) -> int:
    """How many characters at the end of `text` may begin `tag` (a tag split across deltas)."""
    for size in range(min(len(text), len(tag) - 1), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0


class _ThinkSplitter:
    """A `<think>…</think>` that opens a stream's content, moved into reasoning as the body
    decoder moves it (`leading_think`), its tags possibly split across deltas: only what may
    still be a tag, or the whitespace before the answer, is held back."""

    __slots__ = ("held", "state")

    def __init__(self) -> None:
        self.state: Literal["start", "inside", "after", "done"] = "start"
        self.held = ""

    def feed(self, text: str) -> tuple[str, str]:
        """The reasoning and the answer text in the next piece of content."""
        if self.state == "done":
            return "", text
        self.held += text
        if self.state == "start":
            opened = self.held.lstrip()
            if opened.startswith(THINK_OPEN):
                self.held = opened[len(THINK_OPEN) :]
                self.state = "inside"
            elif THINK_OPEN.startswith(opened):
                return "", ""  # (whitespace, or the opening tag's first characters)
            else:
                self.state = "done"
                answer, self.held = self.held, ""
                return "", answer
        reasoning = ""
        if self.state == "inside":
            at = self.held.find(THINK_CLOSE)
            if at < 0:
                cut = len(self.held) - _partial_tag(self.held, THINK_CLOSE)
                reasoning, self.held = self.held[:cut], self.held[cut:]
                return reasoning, ""
            reasoning, self.held = self.held[:at], self.held[at + len(THINK_CLOSE) :]
            self.state = "after"
        answer, self.held = self.held.lstrip(), ""
        if answer:
            self.state = "done"
        return reasoning, answer

    def end(self) -> tuple[str, str]:
        """What was held back, at the end: reasoning inside an unclosed block, else text."""
        held, self.held = self.held, ""
        if self.state == "inside":
            return held, ""
        return "", held if self.state == "start" else ""


class ChatStreamDecoder:
    """Chat Completions stream bytes to `StreamEvent`s, incrementally.

    `feed` and `close` are generators: an error object in the stream is raised after the
    events before it (and the content and usage in the same chunk) were yielded. Only the
    first choice (`index` 0) is read; the others' text, refusals, tool calls, audio and
    finish reasons are kept, and told at the end (`_told_others`).
    """

    def __init__(
        self,
        *,
        provider: str | None = None,
        model: str | None = None,
        reasoning_outside_completion: bool = False,
        think_tags: bool = False,
    ) -> None:
        self._parser = SseParser()
        self._think = _ThinkSplitter() if think_tags else None
        """Where a `<think>` block opening the content is split off (`think_tags`)."""
        self._provider = provider
        self._model = model
        self._reasoning_outside = reasoning_outside_completion
        self._blocks: dict[object, int] = {}
        self._open: list[int] = []
        self._tool_count = 0
        self._last_tool: object | None = None
        self._has_tool_calls = False
        self._held: dict[int, list[str | None]] = {}
        """Tool calls whose block has not started: their id and name so far, until the
        first piece of their arguments that comes once they have a name (only `index` need
        come on a call's first delta)."""
        self._held_arguments: dict[int, list[str]] = {}
        """The arguments pieces of held calls that came before their name, by block."""
        self._tool_keys: dict[int, object] = {}
        """The block key of the call each wire `index` stands for now."""
        self._ids: dict[int, str | None] = {}
        """Each tool call's id from the server (`None` while it gave none), by block."""
        self._kinds: dict[int, str] = {}
        """The type of each call of a tool of another type than `function`, by block."""
        self._blank_finish = False
        """A finish reason `""` came: the one `[DONE]` gives is read from the content."""
        self._blank_last = False
        """The last delta had nothing in it and the finish reason `""`."""
        self._started = False
        self._known_id = False
        self._tier_told = False
        self._audio_told = False
        self._annotations: list[Any] = []
        self._context: dict[str, Any] = {}
        """On Your Data's `delta.context` so far (`CONTEXT_KEY`)."""
        self._unchecked_told = False
        """Whether the content filter's error on the answer (`CONTENT_FILTER_RESULTS_KEY`)
        was kept: Azure may send it on every chunk."""
        self._prompt_told = False
        """Whether the verdicts on the prompt (`PROMPT_FILTER_RESULTS_KEY`) were kept."""
        self._executed: list[Any] = []
        """Groq's compound systems' executed tools so far (`_executed_tools`)."""
        self._executed_at: dict[int | str, int] = {}
        """The place in `_executed` of each executed tool's `index`."""
        self._unread_parts: list[Any] = []
        """The content parts no text was read from so far (`CONTENT_PARTS_KEY`)."""
        self._details: list[Any] = []
        """The `reasoning_details` entries complete so far."""
        self._detail: _Pieced | None = None
        """The entry whose pieces are still arriving."""
        self._details_changed = False
        self._audio: _Pieced | None = None
        """The answer's audio so far (`AUDIO_KEY`)."""
        self._audio_bytes: bytearray | None = bytearray()
        """The bytes of the audio's `data` pieces so far, each decoded on its own; `None` once
        one is no base64 of its own (the pieces are then joined as strings)."""
        self._audio_changed = False
        self.finished = False
        self._filtered = False
        """Whether the stream's finish says a content filter filtered it."""
        self._failed_finish: Error | None = None
        """The error a finish reason alone says the answer ended in (`error`, DeepSeek's
        `insufficient_system_resource`), held to `[DONE]` or the stream's end: the usage
        chunk a server sends after the finish (vLLM's, with `include_usage`) is its call's."""
        self._others: dict[int, tuple[ChatStreamDecoder, StreamCollector]] = {}
        """Each choice after the first (`n` above 1), by index: a decoder of its own that
        reads its deltas as the first's are read, and the collector of what it gives."""
        self._other_finish: dict[int, str] = {}
        self._others_told = False
        self.done = False

    def feed(self, chunk: bytes) -> Iterator[StreamEvent]:
        for event in self._parser.feed(chunk):
            yield from self._event(event, at_end=False)

    def broken(self, error: Error) -> Iterator[StreamEvent]:
        """A break of the body after a finish reason that said the answer failed is not
        the failure: the finish's error is raised (as at the stream's end)."""
        if self._failed_finish is not None:
            raise self._failed_finish from error
        return iter(())

    def close(self) -> Iterator[StreamEvent]:
        """The events at the end of input (a last event without its blank line)."""
        events, cut = self._parser.close()
        for event in events:
            yield from self._event(event, at_end=cut)
        if self._failed_finish is not None:
            raise self._failed_finish
        if not self.finished and not self.done and self._blank_last and self._has_tool_calls:
            # xAI's finish reason for tool calls, with no `[DONE]` after it: the answer whole.
            yield from self._finish("")
        if not self.finished:
            yield from self._held_text()
        yield from self._flush_details()
        yield from self._told_others()

    def _event(self, event: SseEvent, *, at_end: bool) -> Iterator[StreamEvent]:
        if self.done:
            return
        data = event.data.strip()
        if self._failed_finish is not None:
            yield from self._after_failed_finish(data)
            return
        if data == _DONE:
            self.done = True
            if not self.finished:
                yield from self._finish("" if self._blank_finish else None)
            else:
                yield from self._flush_details()
            yield from self._told_others()
            return
        if not data:
            return
        chunk: WireChunk | None = None
        if event.event != "error":
            try:
                chunk = WireChunk.model_validate_json(data)
            except ValidationError as invalid:
                chunk = refit(WireChunk, data, invalid)  # a usage detail of another shape
        if chunk is None:
            chunk = yield from self._not_a_chunk(event, data, at_end=at_end)
        failure, said = self._failure(chunk, data)
        if failure is not None:
            if said:
                yield from self._chunk(chunk, failed=True)
                yield from self._flush_details()
                self._failed_finish = error_from_payload(
                    failure, provider=self._provider, model=self._model
                ).with_body(data)
                return
            yield from self._failed(chunk, data, failure)
        yield from self._chunk(chunk)

    def _after_failed_finish(self, data: str) -> Iterator[StreamEvent]:
        """An event after a finish that said the answer failed: its usage is yielded (the
        call's, paid for); `[DONE]` raises the finish's error. Anything else is passed over."""
        held = self._failed_finish
        assert held is not None
        if data == _DONE:
            self.done = True
            raise held
        try:
            payload = json.loads(data) if data else None
        except ValueError:
            return  # (cut or garbled after the failed answer: the finish's error stands)
        if isinstance(payload, dict):
            yield from self._usage_of(payload)

    def _not_a_chunk(
        self, event: SseEvent, data: str, *, at_end: bool
    ) -> Generator[StreamEvent, None, WireChunk]:
        """An error event, or a payload pydantic-core did not read as a chunk: the error it
        is (raised), or the chunk the standard library reads it as."""
        try:
            payload: Any = json.loads(data)
        except RecursionError:
            raise StreamDecodeError(
                "a stream event is JSON nested too deeply to read"
            ).mark_authored() from None
        except ValueError:
            if at_end and event.event != "error":  # (an error event is one, cut or not)
                yield from self._flush_details()
                raise IncompleteStreamError(
                    "the stream ended in the middle of an event"
                ).mark_authored() from None
            if event.event == "error":  # the server's own words (`Internal Server Error`)
                yield from self._flush_details()
                raise error_from_payload(
                    {"error": {"message": data}}, provider=self._provider, model=self._model
                ) from None
            raise StreamDecodeError("a stream event is not valid JSON").mark_authored() from None
        if event.event == "error" and not isinstance(payload, dict):
            payload = {"error": {"message": payload if isinstance(payload, str) else data}}
        if isinstance(payload, dict) and (event.event == "error" or payload.get("error")):
            yield from self._usage_of(payload)
            yield from self._flush_details()
            raise error_from_payload(payload, provider=self._provider, model=self._model)
        if isinstance(payload, dict):
            # JSON pydantic-core refuses and the standard library reads: an escaped lone
            # surrogate (half an emoji, its other half in the next chunk), which the text's
            # collector pairs again.
            try:
                return WireChunk.model_validate(payload)
            except ValidationError as invalid:
                chunk = refit(WireChunk, data, invalid)  # (its usage of another shape)
                if chunk is not None:
                    return chunk
        raise StreamDecodeError(
            "a stream event does not fit the chat completion chunk shape"
        ).mark_authored()

    def _failed(
        self, chunk: WireChunk, data: str, failure: dict[str, Any]
    ) -> Iterator[StreamEvent]:
        """A chunk that carries an error. OpenRouter ends a failed stream with the error
        (beside the choices, or on the choice), a delta with finish reason `error`, and
        sometimes the usage: what it reports is kept, then the error raised."""
        yield from self._chunk(chunk, failed=True)
        yield from self._flush_details()
        raise error_from_payload(failure, provider=self._provider, model=self._model).with_body(
            data
        )

    @staticmethod
    def _failure(chunk: WireChunk, data: str) -> tuple[dict[str, Any] | None, bool]:
        """The error payload a chunk carries: beside its choices, on its first, or as the
        reason Groq gives for stopping a stream early (`x_groq.error`, a string); and
        whether it is its first choice's finish reason's alone (`finish_error`)."""
        extra = chunk.model_extra or {}
        if extra.get("error"):
            payload: dict[str, Any] = json.loads(data)
            return payload, False
        groq = extra.get("x_groq")
        if isinstance(groq, dict) and isinstance(groq.get("error"), str) and groq["error"]:
            return {"error": {"message": groq["error"]}}, False
        first = next((c for c in chunk.choices if c.index == 0), None)
        said = finish_error(first)
        return (said, True) if said is not None else (choice_error(first), False)

    def _usage_of(self, payload: dict[str, Any]) -> Iterator[StreamEvent]:
        """The usage (and its cost) an error payload reports, if it reports one that can be
        read."""
        raw = payload.get("usage")
        groq = payload.get("x_groq")
        if not isinstance(raw, dict) and isinstance(groq, dict):
            raw = groq.get("usage")
        usage = loose_usage(raw)
        if usage is not None:
            yield from self._usage(usage)

    def _usage(self, usage: WireUsage) -> Iterator[StreamEvent]:
        yield UsageEvent(
            usage=usage_of(usage, reasoning_outside_completion=self._reasoning_outside)
        )
        cost = usage_cost(usage)
        if cost is not None:
            yield self._data(USAGE_COST_KEY, cost)
        audio = audio_tokens_of(usage)
        if audio is not None or self._audio_told:
            self._audio_told = True
            yield self._data(AUDIO_TOKENS_KEY, audio or {})

    def _data(self, key: str, value: Any) -> ProviderDataEvent:
        # Built without validation: the values are parsed JSON already, and checking a whole
        # list again each time it grows would make a long stream cost quadratic time.
        return ProviderDataEvent.model_construct(
            namespace=self._provider or "openai", key=key, value=value
        )

    def _kept(self, extra: dict[str, Any]) -> Iterator[StreamEvent]:
        """The annotations, On Your Data's context, executed tools, audio and reasoning
        details a delta carries (its `model_extra`)."""
        annotations = kept_list(extra, "annotations")
        if annotations is not None:
            self._annotations.extend(annotations)
            yield self._data(ANNOTATIONS_KEY, list(self._annotations))
        context = kept_object(extra, "context")
        if context is not None:
            self._context.update(context)
            yield self._data(CONTEXT_KEY, dict(self._context))
        audio = kept_object(extra, "audio")
        if audio is not None:
            self._audio_piece(audio)
            if self.finished:
                # Nothing more marks the end after the finish reason: emit it as it comes.
                yield from self._flush_details()
        executed = kept_list(extra, "executed_tools")
        if executed is not None:
            self._executed_tools(executed)
            yield self._data(EXECUTED_TOOLS_KEY, list(self._executed))
        details = kept_list(extra, "reasoning_details")
        if details is None:
            return
        for piece in details:
            yield from self._detail_piece(piece)
        if self.finished:
            # Nothing more marks the end after the finish reason: emit them as they come.
            yield from self._flush_details()

    def _audio_piece(self, piece: dict[str, Any]) -> None:
        """Add one `delta.audio` piece (`_Pieced`), its `data` decoded as well: each piece is
        base64 of its own, its `=` padding at its own end, so the strings appended may not
        decode whole."""
        self._audio_changed = True
        if self._audio is None:
            self._audio = _Pieced(_AUDIO_JOINED)
        self._audio.add(piece)
        data = piece.get("data")
        if isinstance(data, str) and self._audio_bytes is not None:
            try:
                self._audio_bytes += base64.b64decode(data, validate=True)
            except ValueError:  # (pieces of one string cut anywhere: joined as such)
                self._audio_bytes = None

    def _joined_audio(self) -> dict[str, Any] | None:
        """A copy of the audio so far (`None` before any), its `data` the base64 of the bytes
        of its pieces, where each was base64 of its own, so that it decodes whole to the
        bytes a body's would (one piece goes as given)."""
        if self._audio is None:
            return None
        value = self._audio.value()
        if len(self._audio.pieces.get("data", ())) > 1 and self._audio_bytes is not None:
            value["data"] = base64.b64encode(self._audio_bytes).decode("ascii")
        return value

    def _executed_tools(self, tools: list[Any]) -> None:
        """Groq's compound systems' `delta.executed_tools`, added to those so far. Groq sends
        a tool twice, as it starts (its arguments) and once it ran (its output and results
        too), under the same `index`: the later takes the earlier's place, so that the list
        is the body's `message.executed_tools`. One with no index is added."""
        for tool in tools:
            index = tool.get("index") if isinstance(tool, dict) else None
            at = self._executed_at.get(index) if isinstance(index, int | str) else None
            if at is not None:
                self._executed[at] = tool
                continue
            if isinstance(index, int | str):
                self._executed_at[index] = len(self._executed)
            self._executed.append(tool)

    def _detail_piece(self, piece: Any) -> Iterator[StreamEvent]:
        """Add one piece of `reasoning_details`; emit the list when an entry is complete."""
        self._details_changed = True
        entry = self._detail
        if entry is not None and isinstance(piece, dict) and _continues(entry.fields, piece):
            entry.add(piece)
            return
        if entry is not None:
            self._details.append(entry.value())
        self._detail = None
        if isinstance(piece, dict):
            self._detail = _Pieced(_JOINED)
            self._detail.add(piece)
        else:
            self._details.append(piece)
        if entry is not None:
            yield from self._flush_details()

    def _flush_details(self) -> Iterator[StreamEvent]:
        """The `reasoning_details` and the audio so far, if they changed since they were
        last emitted (and the tool calls held until their arguments, as the stream ends)."""
        for index in list(self._held):
            yield from self._tool_start(index)
        if self._audio_changed:
            self._audio_changed = False
            yield self._data(AUDIO_KEY, self._joined_audio())
        if not self._details_changed:
            return
        self._details_changed = False
        value = list(self._details)
        if self._detail is not None:
            value.append(self._detail.value())
        yield self._data(REASONING_DETAILS_KEY, value)

    def _chunk(self, chunk: WireChunk, *, failed: bool = False) -> Iterator[StreamEvent]:
        """The events of one chunk; a `failed` chunk (one carrying an error) never finishes."""
        if not self.finished and (not self._started or (chunk.id and not self._known_id)):
            self._started = True
            self._known_id = bool(chunk.id)
            yield ResponseStart(id=chunk.id or None, model=chunk.model or None)
        for choice in chunk.choices:
            if choice.index == 0:
                yield from self._choice(choice, failed=failed)
            else:
                self._other(choice)
        usage = chunk.usage
        extra = chunk.model_extra or {}
        if not self._prompt_told and "prompt_filter_results" in extra:
            yield from self._prompt_verdicts(extra)
        if not self._tier_told and "service_tier" in extra:
            tier = service_tier_of(extra["service_tier"])
            if tier is not None:  # on every chunk: told once
                self._tier_told = True
                yield self._data(SERVICE_TIER_KEY, tier)
        groq = extra.get("x_groq")
        if not isinstance(groq, dict):
            groq = None
        if usage is None and groq is not None:
            usage = loose_usage(groq.get("usage"))
        if usage is not None:
            yield from self._usage(usage)
        # Groq's compound systems give each model's tokens on the final chunk, in `x_groq`
        # (a body beside its usage).
        breakdown = usage_breakdown(groq) or usage_breakdown(extra)
        if breakdown is not None:
            yield self._data(USAGE_BREAKDOWN_KEY, breakdown)

    def _prompt_verdicts(self, extra: dict[str, Any]) -> Iterator[StreamEvent]:
        """The verdicts on the prompt, kept as a body keeps them (`prompt_verdicts`), once."""
        kept, not_run = prompt_verdicts(extra)
        if kept is None:
            return
        self._prompt_told = True
        if not_run:
            yield WarningEvent(warning=filter_not_run("prompt", self._provider))
        yield self._data(PROMPT_FILTER_RESULTS_KEY, kept)

    def _unchecked(self, extra: dict[str, Any]) -> Iterator[StreamEvent]:
        """The content filter's error on the answer, where it did not run, kept and warned
        of once (Azure may send it on every chunk)."""
        unchecked = unchecked_verdicts(extra)
        if unchecked is None:
            return
        self._unchecked_told = True
        yield WarningEvent(warning=filter_not_run("completion", self._provider))
        yield self._data(CONTENT_FILTER_RESULTS_KEY, unchecked)

    def _other(self, choice: WireChunkChoice) -> None:
        """A delta of a choice after the first, kept: read by the choice's own decoder as
        the first's deltas are (tool calls folded by index, a name held until it comes, an
        id that comes late), so that its entry equals the body's; its finish reason is kept
        as sent, apart (the decoder is never finished, and a delta after it still read)."""
        other = self._others.get(choice.index)
        if other is None:
            decoder = ChatStreamDecoder(provider=self._provider, model=self._model)
            other = self._others[choice.index] = (decoder, StreamCollector())
        decoder, collector = other
        for event in decoder._choice(choice.model_copy(update={"finish_reason": None})):
            collector.push(event)
        if choice.finish_reason is not None:
            self._other_finish[choice.index] = choice.finish_reason

    def _told_others(self) -> Iterator[StreamEvent]:
        """The choices after the first, once, at the end: kept, and warned of (the count of
        choices taken as theirs and the first's)."""
        if not self._others or self._others_told:
            return
        self._others_told = True
        entries = []
        for index in sorted(self._others):
            decoder, collector = self._others[index]
            for event in decoder._flush_details():  # (a call still held starts as it is)
                collector.push(event)
            blocks = collector.partial_response().content
            audio = decoder._joined_audio()
            entries.append(other_choice(index, blocks, self._other_finish.get(index), audio))
        yield self._data(OTHER_CHOICES_KEY, entries)
        yield WarningEvent(warning=unread_choices(len(self._others) + 1, self._provider))

    def _block(self, key: object) -> tuple[int, bool]:
        index = self._blocks.get(key)
        if index is not None:
            return index, False
        index = self._blocks[key] = len(self._blocks)
        self._open.append(index)
        return index, True

    def _choice(self, choice: WireChunkChoice, *, failed: bool = False) -> Iterator[StreamEvent]:
        delta = choice.delta
        extra = delta.model_extra
        if extra:
            yield from self._kept(extra)
        if not self._unchecked_told and choice.model_extra:
            yield from self._unchecked(choice.model_extra)
        if self.finished:
            if delta.content or delta.tool_calls or delta.refusal or delta.function_call:
                raise StreamDecodeError(
                    "the stream sent content after its finish reason"
                ).mark_authored()
            if not failed:
                yield from self._late_verdict(choice)
            return
        text, thinking, refused, unread = message_parts(delta.content)
        refusal = delta.refusal or ""
        if refused and refused != refusal:  # (one refusal given both ways is said once)
            refusal = refused + refusal
        if unread:
            if not self._unread_parts:
                yield WarningEvent(warning=unread_parts(self._provider))
            self._unread_parts.extend(unread)
            yield self._data(CONTENT_PARTS_KEY, list(self._unread_parts))
        reasoning = reasoning_text(delta.reasoning, delta.reasoning_content) + thinking
        said = bool(text or reasoning or refusal or delta.tool_calls)
        if self._think is not None and text:
            thought, text = self._think.feed(text)
            reasoning += thought
        yield from self._reasoning_and_text(reasoning, text)
        if refusal:
            index, new = self._block("refusal")
            if new:
                yield BlockStart(index=index, block_type=StreamBlockType.REFUSAL)
            yield RefusalDelta(index=index, text=refusal)
        for call in delta.tool_calls or ():
            key = self._tool_key(call)
            self._last_tool = key
            index, new = self._block(key)
            kind = call.type if call.type and call.type != "function" else None
            name, arguments = call.piece(kind or self._kinds.get(index))
            if new:
                self._has_tool_calls = True
                self._held[index] = [call.id, name]
                self._ids[index] = call.id
                if kind is not None:
                    self._kinds[index] = kind
            else:
                if call.id and self._ids.get(index) is None:  # the call's id, come late
                    self._ids[index] = call.id
                    held = self._held.get(index)
                    if held is not None:
                        held[0] = call.id
                    else:  # (its start gave a stand-in)
                        yield BlockStart(
                            index=index, block_type=StreamBlockType.TOOL_CALL, id=call.id
                        )
                self._name_piece(index, name)
            if arguments:
                yield from self._arguments(index, arguments)
        legacy = delta.function_call
        if legacy is not None:
            # The deprecated single call: one block, its arguments in pieces like a tool's
            # (its name held as a tool call's is, until the arguments begin).
            index, new = self._block("function_call")
            if new:
                self._has_tool_calls = True
                self._held[index] = [None, legacy.name]
            else:
                self._name_piece(index, legacy.name)
            if legacy.arguments:
                yield from self._arguments(index, legacy.arguments)
        if failed:
            return
        blank = choice.finish_reason == ""
        self._blank_finish = self._blank_finish or blank
        self._blank_last = blank and not said and legacy is None
        if choice.finish_reason is not None and not blank:
            yield from self._finish(choice.finish_reason)
            if choice.finish_reason == "content_filter":
                self._filtered = True
                yield from self._explained(choice)

    def _late_verdict(self, choice: WireChunkChoice) -> Iterator[StreamEvent]:
        """Azure's Asynchronous Filter gives its verdict on content after the content, up
        to about 1,000 characters later: after the finish where the answer is short. One
        that filtered (`content_filter` as the reason, or a category `filtered`) becomes
        the stream's finish, as it is where it comes before the end (the collector takes a
        content-filter finish after another); one that filtered nothing changes nothing."""
        if self._filtered:
            return
        results = (choice.model_extra or {}).get("content_filter_results")
        if choice.finish_reason != "content_filter" and filter_explanation(results) is None:
            return
        self._filtered = True
        yield Finish(finish_reason=FinishReason.CONTENT_FILTER)
        yield from self._explained(choice)

    def _explained(self, choice: WireChunkChoice) -> Iterator[StreamEvent]:
        explanation = filter_explanation((choice.model_extra or {}).get("content_filter_results"))
        if explanation:
            yield ProviderDataEvent(
                namespace=self._provider or "openai",
                key=DECLINE_EXPLANATION_KEY,
                value=explanation,
            )

    def _reasoning_and_text(self, reasoning: str, text: str) -> Iterator[StreamEvent]:
        if reasoning:
            index, new = self._block("reasoning")
            if new:
                yield BlockStart(index=index, block_type=StreamBlockType.REASONING)
            yield ReasoningDelta(index=index, text=reasoning)
        if text:
            index, new = self._block("text")
            if new:
                yield BlockStart(index=index, block_type=StreamBlockType.TEXT)
            yield TextDelta(index=index, text=text)

    def _held_text(self) -> Iterator[StreamEvent]:
        """What the `<think>` splitter still holds, as the content ends."""
        if self._think is not None:
            yield from self._reasoning_and_text(*self._think.end())

    def _name_piece(self, index: int, name: str | None) -> None:
        """A piece of a held call's name, on a later delta: joined, as the SDK joins them
        (a server that repeats the whole name on every delta says it once)."""
        held = self._held.get(index)
        if held is not None and name and name != held[1]:
            held[1] = (held[1] or "") + name

    def _arguments(self, index: int, arguments: str) -> Iterator[StreamEvent]:
        """A piece of a call's arguments: it starts the call's block, unless the call has no
        name yet (its name comes later): then it is held for the start."""
        held = self._held.get(index)
        if held is not None and not held[1]:
            self._held_arguments.setdefault(index, []).append(arguments)
            return
        yield from self._tool_start(index)
        yield ToolCallDelta(index=index, arguments=arguments)

    def _tool_key(self, call: WireToolCallDelta) -> object:
        """The block a tool-call delta belongs to. A delta that names a tool under an id
        other than the call's on its index is a call of its own, as in a body (Ollama gives
        each call whole, every one with index 0); one that goes on with the arguments under
        another id is the same call (some servers give each delta an id of its own, Poolside
        and older vLLM among them), as OpenAI's SDK reads it."""
        if call.index is None:
            if call.id and not self._unnamed_last():
                return ("tool_id", call.id)
            if self._last_tool is not None:
                return self._last_tool  # (the call before, whose id comes now if it had none)
        at = call.index or 0
        key = self._tool_keys.get(at)
        if key is None or (
            call.id
            and call.piece(None)[0]
            and self._ids.get(self._blocks[key]) not in (None, call.id)
        ):
            key = self._tool_keys[at] = ("tool", at, len(self._blocks))
        return key

    def _unnamed_last(self) -> bool:
        """Whether the last tool call has no id yet (one without an index, whose id comes on
        a later delta)."""
        if self._last_tool is None:
            return False
        return self._ids.get(self._blocks[self._last_tool], "") is None

    def _tool_start(self, index: int) -> Iterator[StreamEvent]:
        held = self._held.pop(index, None)
        if held is None:
            return
        call_id, name = held
        yield BlockStart(
            index=index,
            block_type=StreamBlockType.TOOL_CALL,
            id=call_id or f"call_{self._tool_count}",
            name=name,
        )
        self._tool_count += 1
        before = self._held_arguments.pop(index, None)
        if before:
            yield ToolCallDelta(index=index, arguments="".join(before))

    def _finish(self, raw: str | None) -> Iterator[StreamEvent]:
        yield from self._held_text()
        self.finished = True
        yield from self._flush_details()
        for index in self._open:
            yield BlockStop(index=index)
        self._open = []
        yield Finish(finish_reason=finish_reason_of(raw, has_tool_calls=self._has_tool_calls))


def decode_stream(
    data: bytes,
    *,
    provider: str | None = None,
    model: str | None = None,
    reasoning_outside_completion: bool = False,
    think_tags: bool = False,
) -> list[StreamEvent]:
    """Every event of a whole recorded stream (raises the stream's error, if it has one)."""
    decoder = ChatStreamDecoder(
        provider=provider,
        model=model,
        reasoning_outside_completion=reasoning_outside_completion,
        think_tags=think_tags,
    )
    events = list(decoder.feed(data))
    events.extend(decoder.close())
    return events
