"""An incremental decoder from the bytes of a Chat Completions stream to stream events.

Bytes may arrive split anywhere (inside a line, inside a UTF-8 character); the decoder
keeps the unfinished line and scans each byte once, so the work is linear in the stream.
It reads `data:` and `event:` lines, skips comment lines (`: OPENROUTER PROCESSING`), stops
at `data: [DONE]`, folds tool-call deltas by their `index` (by `id`, or onto the call before,
when a server leaves the index out), reads the deprecated `delta.function_call` as one tool
call, takes usage from any chunk (the usage-only chunk with empty `choices`, Groq's
`x_groq.usage`), and raises the error an error object in the stream stands for, after the
content and usage that arrived with it (those were paid for).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from allama.adapters._sse import SseEvent, SseParser
from allama.adapters.openai_compat._decode import (
    choice_error,
    content_parts,
    filter_explanation,
    finish_reason_of,
    reasoning_text,
    usage_of,
)
from allama.adapters.openai_compat._errors import error_from_payload
from allama.adapters.openai_compat._wire import WireChunk, WireChunkChoice, WireUsage
from allama.errors import IncompleteStreamError, StreamDecodeError
from allama.types import (
    DECLINE_EXPLANATION_KEY,
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
)

__all__ = ["ChatStreamDecoder", "SseEvent", "SseParser", "decode_stream"]

_DONE = "[DONE]"


class ChatStreamDecoder:
    """Chat Completions stream bytes to `StreamEvent`s, incrementally.

    `feed` and `close` are generators: an error object in the stream is raised after the
    events before it (and the content and usage in the same chunk) were yielded. Only the
    first choice (`index` 0) is read.
    """

    def __init__(
        self,
        *,
        provider: str | None = None,
        model: str | None = None,
        reasoning_outside_completion: bool = False,
    ) -> None:
        self._parser = SseParser()
        self._provider = provider
        self._model = model
        self._reasoning_outside = reasoning_outside_completion
        self._blocks: dict[object, int] = {}
        self._open: list[int] = []
        self._tool_count = 0
        self._last_tool: object | None = None
        self._has_tool_calls = False
        self._started = False
        self._known_id = False
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
        if self.done:
            return
        data = event.data.strip()
        if data == _DONE:
            self.done = True
            if not self.finished:
                yield from self._finish(None)
            return
        if not data:
            return
        if event.event != "error":
            try:
                chunk = WireChunk.model_validate_json(data)
            except ValidationError:
                chunk = None
            if chunk is not None:
                failure = self._failure(chunk, data)
                if failure is not None:
                    # OpenRouter ends a failed stream with the error (beside the choices, or
                    # on the choice), a delta with finish reason `error`, and sometimes the
                    # usage: keep what it reports.
                    yield from self._chunk(chunk, failed=True)
                    raise error_from_payload(
                        failure, provider=self._provider, model=self._model
                    ).with_body(data)
                yield from self._chunk(chunk)
                return
        # An error event, or a payload that is not a chunk: find out which.
        try:
            payload: Any = json.loads(data)
        except ValueError:
            if at_end:
                raise IncompleteStreamError(
                    "the stream ended in the middle of an event"
                ).mark_authored() from None
            raise StreamDecodeError("a stream event is not valid JSON").mark_authored() from None
        if isinstance(payload, dict) and (event.event == "error" or payload.get("error")):
            usage = self._usage_of(payload)
            if usage is not None:
                yield usage
            raise error_from_payload(payload, provider=self._provider, model=self._model)
        raise StreamDecodeError(
            "a stream event does not fit the chat completion chunk shape"
        ).mark_authored()

    @staticmethod
    def _failure(chunk: WireChunk, data: str) -> dict[str, Any] | None:
        """The error payload a chunk carries: beside its choices, on its first, or as the
        reason Groq gives for stopping a stream early (`x_groq.error`, a string)."""
        extra = chunk.model_extra or {}
        if extra.get("error"):
            payload: dict[str, Any] = json.loads(data)
            return payload
        groq = extra.get("x_groq")
        if isinstance(groq, dict) and isinstance(groq.get("error"), str) and groq["error"]:
            return {"error": {"message": groq["error"]}}
        return choice_error(next((c for c in chunk.choices if c.index == 0), None))

    def _usage_of(self, payload: dict[str, Any]) -> UsageEvent | None:
        """The usage an error payload reports, if it reports one that can be read."""
        raw = payload.get("usage")
        groq = payload.get("x_groq")
        if not isinstance(raw, dict) and isinstance(groq, dict):
            raw = groq.get("usage")
        if not isinstance(raw, dict):
            return None
        try:
            usage = WireUsage.model_validate(raw)
        except ValidationError:
            return None
        return UsageEvent(
            usage=usage_of(usage, reasoning_outside_completion=self._reasoning_outside)
        )

    def _chunk(self, chunk: WireChunk, *, failed: bool = False) -> Iterator[StreamEvent]:
        """The events of one chunk; a `failed` chunk (one carrying an error) never finishes."""
        if not self.finished and (not self._started or (chunk.id and not self._known_id)):
            self._started = True
            self._known_id = bool(chunk.id)
            yield ResponseStart(id=chunk.id or None, model=chunk.model or None)
        for choice in chunk.choices:
            if choice.index == 0:
                yield from self._choice(choice, failed=failed)
        usage = chunk.usage
        extra = chunk.model_extra or {}
        groq = extra.get("x_groq")
        if usage is None and isinstance(groq, dict) and isinstance(groq.get("usage"), dict):
            usage = WireUsage.model_validate(groq["usage"])
        if usage is not None:
            yield UsageEvent(
                usage=usage_of(usage, reasoning_outside_completion=self._reasoning_outside)
            )

    def _block(self, key: object) -> tuple[int, bool]:
        index = self._blocks.get(key)
        if index is not None:
            return index, False
        index = self._blocks[key] = len(self._blocks)
        self._open.append(index)
        return index, True

    def _choice(self, choice: WireChunkChoice, *, failed: bool = False) -> Iterator[StreamEvent]:
        delta = choice.delta
        if self.finished:
            if delta.content or delta.tool_calls or delta.refusal or delta.function_call:
                raise StreamDecodeError(
                    "the stream sent content after its finish reason"
                ).mark_authored()
            return
        text, thinking = content_parts(delta.content)
        reasoning = reasoning_text(delta.reasoning, delta.reasoning_content) + thinking
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
        if delta.refusal:
            index, new = self._block("refusal")
            if new:
                yield BlockStart(index=index, block_type=StreamBlockType.REFUSAL)
            yield RefusalDelta(index=index, text=delta.refusal)
        for call in delta.tool_calls or ():
            key: object
            if call.index is not None:
                key = ("tool", call.index)
            elif call.id:
                key = ("tool_id", call.id)
            else:
                key = self._last_tool if self._last_tool is not None else ("tool", 0)
            self._last_tool = key
            function = call.function
            index, new = self._block(key)
            if new:
                self._has_tool_calls = True
                yield BlockStart(
                    index=index,
                    block_type=StreamBlockType.TOOL_CALL,
                    id=call.id or f"call_{self._tool_count}",
                    name=function.name if function is not None else None,
                )
                self._tool_count += 1
            if function is not None and function.arguments:
                yield ToolCallDelta(index=index, arguments=function.arguments)
        legacy = delta.function_call
        if legacy is not None:
            # The deprecated single call: one block, its arguments in pieces like a tool's.
            index, new = self._block("function_call")
            if new:
                self._has_tool_calls = True
                yield BlockStart(
                    index=index,
                    block_type=StreamBlockType.TOOL_CALL,
                    id=f"call_{self._tool_count}",
                    name=legacy.name,
                )
                self._tool_count += 1
            if legacy.arguments:
                yield ToolCallDelta(index=index, arguments=legacy.arguments)
        if failed:
            return
        if choice.finish_reason is not None and choice.finish_reason != "":
            yield from self._finish(choice.finish_reason)
            explanation = filter_explanation(
                (choice.model_extra or {}).get("content_filter_results")
            )
            if choice.finish_reason == "content_filter" and explanation:
                yield ProviderDataEvent(
                    namespace=self._provider or "openai",
                    key=DECLINE_EXPLANATION_KEY,
                    value=explanation,
                )

    def _finish(self, raw: str | None) -> Iterator[StreamEvent]:
        self.finished = True
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
) -> list[StreamEvent]:
    """Every event of a whole recorded stream (raises the stream's error, if it has one)."""
    decoder = ChatStreamDecoder(
        provider=provider,
        model=model,
        reasoning_outside_completion=reasoning_outside_completion,
    )
    events = list(decoder.feed(data))
    events.extend(decoder.close())
    return events
