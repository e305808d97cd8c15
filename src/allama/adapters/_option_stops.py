"""The stop sequences a body option sends, by dialect.

A body option's fields are written over allama's (`option_fields`, each encoder's
`_SETTINGS`): a stop sequence given there is sent as surely as the request's `stop`, in the
place each dialect's body holds it. What reads the answer needs to know them too: a stop
that cuts it ends the text where the server found it (and leaves it out).
"""

from __future__ import annotations

from dataclasses import dataclass

from allama.types import ChatRequest

__all__ = ["OptionStops", "option_stops"]


@dataclass(frozen=True, slots=True)
class OptionStops:
    """The stop sequences of one body option, and the field that gives them, as spelt
    there (`generationConfig.stopSequences`)."""

    namespace: str
    field: str
    stops: tuple[str, ...]


_FIELDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "openai_compat": (("stop",),),
    "anthropic": (("stop_sequences",),),
    # Google's snake_case spellings are read as the camelCase ones (`camel_option`).
    "gemini": tuple(
        (outer, inner)
        for outer in ("generationConfig", "generation_config")
        for inner in ("stopSequences", "stop_sequences")
    ),
    "ollama": (("options", "stop"),),
}
"""Where each dialect's body option gives stop sequences: the path of keys to the field.
The Responses API has none."""


def option_stops(request: ChatRequest, namespace: str) -> OptionStops | None:
    """The stop sequences the body option `namespace` of `request` sends, where it gives
    any: one given as a string is one sequence (as `settings_as_sent` reads it); what is no
    string among them is nothing a server matches."""
    for path in _FIELDS.get(namespace, ()):
        value: object = request.option_json(namespace)
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        given = [value] if isinstance(value, str) else value
        if not isinstance(given, list):
            continue
        stops = tuple(each for each in given if isinstance(each, str) and each)
        if stops:
            return OptionStops(namespace, ".".join(path), stops)
    return None
