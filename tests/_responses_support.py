"""Responses API traffic as OpenAI sends it, for the Responses tests: typed SSE framing, and
the stream of events that a response object is streamed as."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["pieces", "sse", "stream_of"]


def sse(*events: dict[str, Any] | tuple[str, str]) -> bytes:
    """Events as OpenAI frames them: `event: <type>` then `data: <json>`; a tuple is
    (event name, raw data)."""
    out = []
    for number, event in enumerate(events):
        if isinstance(event, tuple):
            name, data = event
        else:
            name, data = event["type"], json.dumps({**event, "sequence_number": number})
        out.append(f"event: {name}\ndata: {data}\n\n")
    return "".join(out).encode()


def pieces(text: str, parts: int = 3) -> list[str]:
    """The text in up to `parts` pieces, as a stream would send it."""
    step = max(1, -(-len(text) // parts))
    return [text[i : i + step] for i in range(0, len(text), step)]


def _item_events(index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    """The events OpenAI streams for one output item, from `added` to `done`."""
    kind = item.get("type")
    where = {"item_id": item.get("id"), "output_index": index}
    events: list[dict[str, Any]] = []
    if kind == "message":
        first = {**item, "status": "in_progress", "content": []}
        events.append({"type": "response.output_item.added", "output_index": index, "item": first})
        for position, part in enumerate(item["content"]):
            at = {**where, "content_index": position}
            if part.get("type") == "output_text":
                empty = {**part, "text": ""}
                delta_type, text = "response.output_text.delta", part["text"]
            elif part.get("type") == "refusal":
                empty = {**part, "refusal": ""}
                delta_type, text = "response.refusal.delta", part["refusal"]
            else:
                events.append({"type": "response.content_part.added", **at, "part": part})
                continue
            events.append({"type": "response.content_part.added", **at, "part": empty})
            events.extend({"type": delta_type, **at, "delta": piece} for piece in pieces(text))
            events.append({"type": "response.content_part.done", **at, "part": part})
    elif kind == "function_call":
        first = {**item, "status": "in_progress", "arguments": ""}
        events.append({"type": "response.output_item.added", "output_index": index, "item": first})
        events.extend(
            {"type": "response.function_call_arguments.delta", **where, "delta": piece}
            for piece in pieces(item["arguments"])
        )
        events.append(
            {
                "type": "response.function_call_arguments.done",
                **where,
                "arguments": item["arguments"],
            }
        )
    elif kind == "reasoning":
        first = {"id": item["id"], "type": "reasoning", "summary": []}
        events.append({"type": "response.output_item.added", "output_index": index, "item": first})
        for position, part in enumerate(item.get("summary") or []):
            at = {**where, "summary_index": position}
            empty = {"type": "summary_text", "text": ""}
            events.append({"type": "response.reasoning_summary_part.added", **at, "part": empty})
            events.extend(
                {"type": "response.reasoning_summary_text.delta", **at, "delta": piece}
                for piece in pieces(part["text"])
            )
            events.append({"type": "response.reasoning_summary_text.done", **at, **part})
        for position, part in enumerate(item.get("content") or []):
            at = {**where, "content_index": position}
            events.extend(
                {"type": "response.reasoning_text.delta", **at, "delta": piece}
                for piece in pieces(part["text"])
            )
    else:
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        events.append({"type": f"response.{kind}.in_progress", **where})
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


def stream_of(body: dict[str, Any]) -> bytes:
    """The stream OpenAI sends for a response: its start, each item's events, and the
    terminal event carrying the whole response."""
    start = {**body, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": start},
        {"type": "response.in_progress", "response": start},
    ]
    for index, item in enumerate(body["output"]):
        events.extend(_item_events(index, item))
    terminal = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
    events.append({"type": terminal, "response": body})
    return sse(*events)
