"""How one endpoint speaks Ollama's native dialect, apart from where it lives (the preset)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OllamaProfile"]


@dataclass(frozen=True, slots=True)
class OllamaProfile:
    """The endpoint's names; a local Ollama server and a hosted one speak the dialect alike."""

    name: str
    display_name: str
    cloud: bool = False
    """The endpoint is Ollama's cloud itself (a base URL on ollama.com, set by the preset's
    `url_profiles`): every model runs in the cloud, named there without `-cloud`, and none
    applies `format` ("Ollama's Cloud currently does not support structured outputs")."""
