"""`allama.provider(name, ...)`: a provider from a preset name."""

from __future__ import annotations

import difflib
import importlib
import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, Unpack, overload

from allama.providers._http import HttpOptions, HttpProvider
from allama.providers._presets import PRESETS, Preset

if TYPE_CHECKING:
    from allama.local._engine import LocalEngine
    from allama.local._provider import LlamaCppProvider

__all__ = ["PRESET_NAMES", "ProviderOptions", "provider"]

PRESET_NAMES: tuple[str, ...] = tuple(PRESETS)
"""Every preset name `provider` accepts, in a stable order."""

_ALIASES = {
    "azure": "azure-openai",
    "azure-ai-foundry": "azure-foundry",
    "foundry": "azure-foundry",
    "cloudflare": "workers-ai",
    "claude": "anthropic",
    "foundry-anthropic": "azure-anthropic",
    "google": "gemini",
    "vertex": "vertex-gemini",
    "vertex-ai": "vertex-gemini",
}


def preset_named(name: str) -> Preset:
    """The preset `name` names (hyphens or underscores, an alias); a `ValueError` that lists
    the known ones for another, and a `TypeError` for a name that is no string."""
    if not isinstance(name, str):
        raise TypeError(
            f"name must be a preset name such as 'openai' (a str), got {type(name).__name__}"
        )
    key = name.strip().lower().replace("_", "-")
    preset = PRESETS.get(_ALIASES.get(key, key))
    if preset is None:
        known = ", ".join(PRESET_NAMES)
        raise ValueError(f"unknown provider {name!r}; known presets: {known}")
    return preset


class ProviderOptions(HttpOptions, total=False):
    """`provider()`'s keyword options: `HttpProvider`'s, the API to speak, and the options
    of the `local` engine (refused by every other preset)."""

    api: str | None
    model: str | os.PathLike[str] | None
    threads: int | None
    context: int | None
    parallel: int | None
    chat_template: str | None
    engine: LocalEngine | None


# The names `preset_named` reads as the llama.cpp presets (it ignores case and takes
# underscores for hyphens), in the casings one writes: any other is still a LlamaCppProvider
# at runtime, typed as its base class.
_LlamaCppName = Literal[
    "local",
    "Local",
    "LOCAL",
    "llama-cpp",
    "llama_cpp",
    "Llama-cpp",
    "Llama_cpp",
    "LLAMA-CPP",
    "LLAMA_CPP",
]


@overload
def provider(name: _LlamaCppName, **options: Unpack[ProviderOptions]) -> LlamaCppProvider: ...
@overload
def provider(name: str, **options: Unpack[ProviderOptions]) -> HttpProvider: ...
def provider(name: str, **options: Any) -> HttpProvider:
    """The provider for a preset: `provider("groq")`, `provider("openai-compatible", base_url=...)`.

    Options: `api` (which of the endpoint's APIs to speak: `"chat"`, Chat Completions, by
    default; `"responses"`, the Responses API, on `openai`, `azure-openai`, `xai`,
    `openrouter` and `openai-compatible`), `api_key` (else the preset's environment
    variable), `base_url`, `timeout`, `deadline`, `headers`, `transport`, and per preset
    `endpoint` / `api_version` (Azure OpenAI and Azure AI Foundry),
    `account_id` (Workers AI), or `model` / `threads` / `context` / `parallel` (`local`,
    which starts llama.cpp on its first request); `tracer_provider` and `capture_content`
    for OpenTelemetry spans of its calls (see `HttpProvider`). A preset without its base URL
    (`openai-compatible` without `base_url`, Azure without `endpoint`) can still plan and
    validate; it fails when it sends. Underscores and hyphens in the name are interchangeable.

    >>> provider("groq").name
    'groq'
    >>> provider("openai", api="responses").preset.api
    'responses'
    """
    preset = _speaking(preset_named(name), options.pop("api", None))
    unknown = sorted(options.keys() - _OPTIONS)
    if unknown:
        raise TypeError(_unknown_option(preset.name, unknown[0]))
    if preset.provider_class is not None:
        module, _, name = preset.provider_class.partition(":")
        factory: type[HttpProvider] = getattr(importlib.import_module(module), name)
        return factory(preset, **options)
    local = sorted(options.keys() & _LOCAL_OPTIONS)
    if local:
        hint = "; the model is named by each request: ChatRequest(model)"
        if "model" not in local:
            hint = ""
        raise TypeError(
            f"provider({preset.name!r}) takes no {local[0]!r}: "
            f"{', '.join(sorted(_LOCAL_OPTIONS))} are options of provider('local'){hint}"
        )
    return HttpProvider(preset, **options)


_LOCAL_OPTIONS = frozenset({"model", "threads", "context", "parallel", "chat_template", "engine"})
_OPTIONS = ProviderOptions.__optional_keys__ | ProviderOptions.__required_keys__


def _speaking(preset: Preset, api: object) -> Preset:
    """The preset changed to speak `api` (`None`: its own API), as its `apis` data says."""
    if api is None or api == preset.api:
        return preset
    if not isinstance(api, str):
        raise TypeError(f"api must be a str such as 'responses', not {type(api).__name__}")
    changes = preset.apis.get(api)
    if changes is not None:
        return replace(preset, **changes)
    having = [other.name for other in PRESETS.values() if api == other.api or api in other.apis]
    if not having:
        known = sorted({api for other in PRESETS.values() for api in (other.api, *other.apis)})
        raise ValueError(f"unknown api {api!r}; known APIs: {', '.join(known)}")
    spoken = [repr(name) for name in (preset.api, *preset.apis)]  # its own, and its others
    speaks = f"{', '.join(spoken[:-1])} and {spoken[-1]}" if len(spoken) > 1 else spoken[0]
    raise ValueError(
        f"{preset.name} has no api={api!r} (it speaks {speaks}); "
        f"the presets that have it: {', '.join(having)}"
    )


_OTHER_NAMES = {
    "key": "api_key",
    "url": "base_url",
    "api_base": "base_url",
    "default_headers": "headers",
    "token": "access_token",
}
"""Other SDKs' names for options `provider()` names otherwise, too unlike to be guessed."""


def _unknown_option(preset: str, option: str) -> str:
    """The error for an option `provider()` has not, with the likeliest one meant (`apikey`:
    `api_key`), rather than the error of the class the options are handed to."""
    spelt = option.lower().replace("-", "_")
    meant = _OTHER_NAMES.get(spelt) or next(
        iter(difflib.get_close_matches(spelt, sorted(_OPTIONS), n=1, cutoff=0.7)), None
    )
    if meant is not None:
        hint = f"did you mean {meant!r}?"
    elif spelt in ("retries", "max_retries"):
        hint = "retries are a wrapper's: allama.RetryingProvider(provider)"
    else:
        hint = f"its options: {', '.join(sorted(_OPTIONS))}"
    return f"allama.provider({preset!r}) has no option {option!r}; {hint}"
