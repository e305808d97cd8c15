"""How one endpoint speaks the Gemini dialect, apart from where it lives (the preset)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GeminiProfile"]


@dataclass(frozen=True, slots=True)
class GeminiProfile:
    """The endpoint's names; the Gemini API and Vertex AI speak the dialect alike."""

    name: str
    display_name: str
