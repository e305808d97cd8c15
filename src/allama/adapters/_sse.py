"""Server-sent events from bytes in any chunking: the framing every SSE dialect shares.

Bytes may arrive split anywhere (inside a line, inside a UTF-8 character); the parser keeps
the unfinished line and scans each byte once, so the work is linear in the stream.
"""

from __future__ import annotations

from typing import Any

from allama.adapters._http import read_json
from allama.errors import IncompleteStreamError, StreamDecodeError

__all__ = ["SseEvent", "SseParser", "event_json"]

_BOM = b"\xef\xbb\xbf"


class SseEvent:
    """One server-sent event: its `event:` name (if any) and its joined `data:` lines."""

    __slots__ = ("data", "event")

    def __init__(self, event: str | None, data: str) -> None:
        self.event = event
        self.data = data

    def __repr__(self) -> str:
        return f"SseEvent(event={self.event!r}, data=<{len(self.data)} chars>)"


class SseParser:
    """Bytes in any chunking to `SseEvent`s. Lines end with LF, CRLF or CR, as the SSE
    format allows; a byte-order mark that opens the stream is not part of its first line."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scanned = 0
        self._data: list[str] = []
        self._event: str | None = None
        self._opened = False

    def feed(self, chunk: bytes) -> list[SseEvent]:
        self._buffer += chunk
        events: list[SseEvent] = []
        buffer = self._buffer
        if not self._opened:
            if _BOM.startswith(bytes(buffer[:3])) and len(buffer) < len(_BOM):
                return events  # (the mark's first bytes, or none yet)
            if buffer.startswith(_BOM):
                del buffer[: len(_BOM)]
            self._opened = True
        start = 0
        if buffer.find(b"\r", self._scanned) < 0:
            # No CR (the usual stream, or its CRLF lines whole in the lines read so far):
            # lines end with LF.
            while True:
                end = buffer.find(b"\n", max(start, self._scanned))
                if end < 0:
                    break
                self._line(buffer[start:end].decode("utf-8", "replace"), events)
                start = end + 1
            if start:
                del buffer[:start]
            self._scanned = len(buffer)
            return events
        # The next LF and CR from where the scan is (-1: none in the rest of the buffer),
        # each searched for again only once passed: every byte is scanned once.
        lf = cr = -2
        while True:
            at = max(start, self._scanned)
            if -1 < lf < at or lf == -2:
                lf = buffer.find(b"\n", at)
            if -1 < cr < at or cr == -2:
                cr = buffer.find(b"\r", at)
            if cr < 0 or (-1 < lf < cr):
                if lf < 0:
                    break
                end, after = lf, lf + 1
            elif cr + 1 == len(buffer):  # CR, or CRLF whose LF is in the next chunk
                self._scanned = cr
                break
            else:
                end, after = cr, cr + (2 if buffer[cr + 1] == 0x0A else 1)
            self._line(buffer[start:end].decode("utf-8", "replace"), events)
            start = after
        scanned = self._scanned if cr == len(buffer) - 1 and cr >= start else len(buffer)
        if start:
            del buffer[:start]
        self._scanned = scanned - start
        return events

    def close(self) -> tuple[list[SseEvent], bool]:
        """The events left at the end of input, and whether a line was cut off."""
        events: list[SseEvent] = []
        ended = self._buffer.endswith(b"\r")  # a line whose end is a CR: whole
        cut = bool(self._buffer) and not ended
        if self._buffer:
            line = self._buffer.rstrip(b"\r").decode("utf-8", "replace")
            self._buffer.clear()
            self._scanned = 0
            self._line(line, events)
        self._dispatch(events)
        return events, cut

    def _line(self, line: str, events: list[SseEvent]) -> None:
        if not line:
            self._dispatch(events)
            return
        if line.startswith(":"):
            return
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value

    def _dispatch(self, events: list[SseEvent]) -> None:
        if self._data:
            events.append(SseEvent(self._event, "\n".join(self._data)))
        self._data = []
        self._event = None


def event_json(event: SseEvent, data: str, *, at_end: bool) -> dict[str, Any] | str:
    """The JSON object of an event's `data`, or the words of an `error` event that holds no
    JSON object (a proxy's `Internal Server Error`, a JSON string, cut or not): the server's
    error, for the dialect to raise. Any other event that is no JSON object is an
    `IncompleteStreamError` where the stream ended in it, else a `StreamDecodeError`.

    JSON is read by pydantic-core, or by the standard library for what pydantic-core
    refuses (an escaped lone surrogate, half an emoji whose other half comes later).
    """
    try:
        payload: Any = read_json(data)
    except ValueError:
        if event.event != "error":
            if at_end:
                raise IncompleteStreamError(
                    "the stream ended in the middle of an event"
                ).mark_authored() from None
            raise StreamDecodeError("a stream event is not valid JSON").mark_authored() from None
        return data.strip()
    if isinstance(payload, dict):
        return payload
    if event.event != "error":
        raise StreamDecodeError("a stream event is not a JSON object").mark_authored()
    return payload if isinstance(payload, str) else data.strip()
