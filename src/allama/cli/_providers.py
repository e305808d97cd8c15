"""The providers `allama plan` asks: every preset, built offline with a representative model.

A preset's other APIs are rows of their own, named `openai (responses)`, with the preset's
model; `--provider openai:responses` (or `"openai (responses)"`) picks one, and `--model`
plans the caller's model on the providers named instead (what is enforced depends on the
model: Groq's gpt-oss has JSON Schema output, its Llama does not). Planning only
encodes requests (a dry run), so no key is needed and no model is asked for an answer
(a `llama-cpp` server that answers is asked what its chat template can do: `GET /props`).
"""

from __future__ import annotations

from allama.provider import ChatProvider

PLAN_MODELS: dict[str, str] = {
    "openai": "gpt-5-mini",
    "azure-openai": "gpt-4o",
    "azure-foundry": "Mistral-large-2411",
    "groq": "openai/gpt-oss-120b",
    "xai": "grok-4",
    "mistral": "mistral-small-latest",
    "openrouter": "openai/gpt-5-mini",
    "deepseek": "deepseek-chat",
    "together": "meta-llama/Llama-3.3-70B-Instruct-Turbo",
    "fireworks": "accounts/fireworks/models/llama-v3p1-8b-instruct",
    "deepinfra": "meta-llama/Meta-Llama-3.1-8B-Instruct",
    "vllm": "served-model",
    "workers-ai": "@cf/meta/llama-3.1-8b-instruct",
    "ollama-openai": "llama3.1",
    "ollama": "llama3.1",
    "openai-compatible": "model",
    "anthropic": "claude-sonnet-4-5",
    "azure-anthropic": "claude-sonnet-4-5",
    "anthropic-compatible": "model",
    "gemini": "gemini-2.5-flash",
    "vertex-gemini": "gemini-2.5-flash",
    "local": "smollm2",
    "llama-cpp": "served-model",
}
"""A model per preset whose capability answers are typical of the preset."""


def planning_providers(
    names: list[str] | None, model: str | None = None
) -> list[tuple[str, str, ChatProvider]]:
    """The providers `names` picks (each preset and API by default), once each in the order
    given (a name given twice would plan it twice), with `model`, else the preset's own."""
    from allama.providers import PRESET_NAMES, PRESETS, provider

    chosen = names or [
        choice
        for name in PRESET_NAMES
        for choice in (name, *(f"{name}:{api}" for api in PRESETS[name].apis))
    ]
    out: list[tuple[str, str, ChatProvider]] = []
    seen: set[str] = set()
    for choice in dict.fromkeys(chosen):
        name, api = _api_of(choice)
        try:
            built = provider(name) if api is None else provider(name, api=api)
        except ValueError as error:
            raise KeyError(str(error)) from None
        label = built.name if api is None else f"{built.name} ({api})"
        if label in seen:  # the same one named otherwise (`openai:responses`, `openai (responses)`)
            continue
        seen.add(label)
        out.append((label, model or PLAN_MODELS.get(built.name, "model"), built))
    return out


def _api_of(choice: str) -> tuple[str, str | None]:
    """`openai:responses` or `openai (responses)` as the preset and the API; a bare name is
    the preset's own API."""
    if choice.endswith(")") and " (" in choice:
        name, _, api = choice[:-1].partition(" (")
        return name.strip(), api.strip()
    name, colon, api = choice.partition(":")
    return (name.strip(), api.strip()) if colon else (choice, None)
