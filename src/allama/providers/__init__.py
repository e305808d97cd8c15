"""HTTP providers: presets for the OpenAI-compatible family, and `provider(name)`."""

from allama.providers._http import OpenAICompatibleProvider
from allama.providers._presets import PRESETS, Preset
from allama.providers._registry import PRESET_NAMES, provider

__all__ = ["PRESETS", "PRESET_NAMES", "OpenAICompatibleProvider", "Preset", "provider"]
