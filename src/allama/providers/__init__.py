"""HTTP providers: one provider class for every dialect, the presets, and `provider(name)`."""

from allama.providers._http import HttpProvider, OpenAICompatibleProvider
from allama.providers._presets import PRESETS, Preset
from allama.providers._registry import PRESET_NAMES, ProviderOptions, provider

__all__ = [
    "PRESETS",
    "PRESET_NAMES",
    "HttpProvider",
    "OpenAICompatibleProvider",
    "Preset",
    "ProviderOptions",
    "provider",
]
