"""`allama plan TYPE`: what each provider preset and mode would enforce, without sending."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from allama.errors import Error
from allama.extract import ExtractionMode, Extractor
from allama.provider import ChatProvider
from allama.types import ChatRequest


@dataclass(frozen=True, slots=True)
class PlanRow:
    provider: str
    model: str
    mode: str
    enforcement: str
    notes: tuple[str, ...]
    root_wrapped: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "model": self.model,
            "mode": self.mode,
            "enforcement": self.enforcement,
            "root_wrapped": self.root_wrapped,
            "notes": list(self.notes),
        }


WRAPPED_NOTE = (
    'sent wrapped in {"value": ...}: the provider takes only an object at the root; '
    "the answer is unwrapped"
)


def plan_rows(
    tp: Any, providers: list[tuple[str, str, ChatProvider]], *, stream: bool = False
) -> list[PlanRow]:
    """One row per provider and mode; a refusal before sending is reported as `refused`."""
    rows: list[PlanRow] = []
    extractor = Extractor()
    for name, model, provider in providers:
        for mode in (ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL):
            request = ChatRequest(model).user("plan").with_option(mode)
            try:
                plan = extractor.plan(provider, tp, request, stream=stream)
            except Error as error:
                message = error.message if error.authored else error.kind
                rows.append(PlanRow(name, model, mode.value, "refused", (message,)))
                continue
            notes = tuple(warning.message for warning in (*plan.degradations, *plan.notes))
            if plan.root_wrapped:
                notes = (WRAPPED_NOTE, *notes)
            if plan.coverage.value != "encoding":
                notes = (*notes, "capability table only: the schema is checked when sent")
            rows.append(
                PlanRow(name, model, mode.value, plan.enforcement.value, notes, plan.root_wrapped)
            )
    return rows


def render_table(label: str, rows: list[PlanRow], *, stream: bool = False) -> str:
    headers = ("provider", "model", "mode", "enforcement")
    widths = [
        max(len(h), *(len(getattr(row, h)) for row in rows)) if rows else len(h) for h in headers
    ]
    calls = "streamed calls" if stream else "calls"
    lines = [f"{label}: what each provider would enforce on {calls} (no model was asked)", ""]
    lines.append("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + "  notes")
    for row in rows:
        cells = [getattr(row, h).ljust(w) for h, w in zip(headers, widths, strict=True)]
        first, *rest = row.notes or ("",)
        lines.append("  ".join(cells) + "  " + first)
        indent = " " * (sum(widths) + 2 * len(widths))
        lines.extend(indent + note for note in rest)
    return "\n".join(lines)
