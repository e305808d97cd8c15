"""A whole response as the stream of events a provider would send for it."""

from __future__ import annotations

from allama.types import (
    BlockStart,
    BlockStop,
    ChatResponse,
    Finish,
    ProviderDataEvent,
    Reasoning,
    ReasoningDelta,
    Refusal,
    RefusalDelta,
    ResponseStart,
    StreamBlockType,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    UsageEvent,
    WarningEvent,
)

CHUNK = 8
"""Characters per delta, so that streamed tests see values arrive in pieces."""


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def response_events(response: ChatResponse, *, chunk: int = CHUNK) -> list[StreamEvent]:
    """The events of `response`: start, each block in pieces, warnings, usage, finish."""
    events: list[StreamEvent] = [ResponseStart(id=response.id, model=response.model)]
    for warning in response.warnings:
        events.append(WarningEvent(warning=warning))
    for index, block in enumerate(response.content):
        if isinstance(block, TextPart):
            events.append(BlockStart(index=index, block_type=StreamBlockType.TEXT))
            events.extend(TextDelta(index=index, text=p) for p in _pieces(block.text, chunk))
        elif isinstance(block, ToolCall):
            events.append(
                BlockStart(
                    index=index, block_type=StreamBlockType.TOOL_CALL, id=block.id, name=block.name
                )
            )
            events.extend(
                ToolCallDelta(index=index, arguments=p) for p in _pieces(block.arguments, chunk)
            )
        elif isinstance(block, Refusal):
            events.append(BlockStart(index=index, block_type=StreamBlockType.REFUSAL))
            events.extend(RefusalDelta(index=index, text=p) for p in _pieces(block.text, chunk))
        elif isinstance(block, Reasoning):
            events.append(BlockStart(index=index, block_type=StreamBlockType.REASONING))
            events.extend(ReasoningDelta(index=index, text=p) for p in _pieces(block.text, chunk))
            if block.signature or block.encrypted_content:
                events.append(
                    ReasoningDelta(
                        index=index,
                        signature=block.signature,
                        encrypted_content=block.encrypted_content,
                        issuer=block.issuer,
                    )
                )
        events.append(BlockStop(index=index))
    for namespace, entries in response.provider_data.items():
        events.extend(
            ProviderDataEvent(namespace=namespace, key=key, value=value)
            for key, value in entries.items()
        )
    if response.usage is not None:
        events.append(UsageEvent(usage=response.usage))
    events.append(Finish(finish_reason=response.finish_reason))
    return events
