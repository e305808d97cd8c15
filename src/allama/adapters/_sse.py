"""Server-sent events from bytes in any chunking: the framing every SSE dialect shares.

Bytes may arrive split anywhere (inside a line, inside a UTF-8 character); the parser keeps
the unfinished line and scans each byte once, so the work is linear in the stream.
"""

from __future__ import annotations

__all__ = ["SseEvent", "SseParser"]


class SseEvent:
    """One server-sent event: its `event:` name (if any) and its joined `data:` lines."""

    __slots__ = ("data", "event")

    def __init__(self, event: str | None, data: str) -> None:
        self.event = event
        self.data = data

    def __repr__(self) -> str:
        return f"SseEvent(event={self.event!r}, data=<{len(self.data)} chars>)"


class SseParser:
    """Bytes in any chunking to `SseEvent`s. Lines end with LF or CRLF."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scanned = 0
        self._data: list[str] = []
        self._event: str | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        self._buffer += chunk
        events: list[SseEvent] = []
        buffer = self._buffer
        start = 0
        while True:
            end = buffer.find(b"\n", max(start, self._scanned))
            if end < 0:
                break
            line = buffer[start:end]
            if line.endswith(b"\r"):
                line = line[:-1]
            self._line(line.decode("utf-8", "replace"), events)
            start = end + 1
        if start:
            del buffer[:start]
        self._scanned = len(buffer)
        return events

    def close(self) -> tuple[list[SseEvent], bool]:
        """The events left at the end of input, and whether a line was cut off."""
        events: list[SseEvent] = []
        cut = bool(self._buffer)
        if cut:
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
