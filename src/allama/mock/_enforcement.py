"""How far the mock providers say an answer holds to its schema, as a real adapter says it.

A mock claims no one provider's dialect: where a schema asks for a check no provider
enforces (allama's marks: `future-date`, `decimal` and the like), or for what no strict
dialect a provider sends it in rewrites exactly (`uniqueItems` of a `set`), its answer is
`approximated` on the field holding the schema, so that an extraction's record (and its
`min_enforcement`) reads as against a provider. The scripted providers and the test provider
share these warnings.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from allama.extract._root import ROOT_KEY, object_rooted
from allama.schema._pointer import display
from allama.schema._rewrite import Rewrite
from allama.types import RequestField, Warning

if TYPE_CHECKING:
    from allama.schema._dialects._openai_strict import OpenAIProfile

__all__ = ["beyond_dialects", "marked", "schema_key"]


def schema_key(schema: object, *more: object) -> Any:
    """What a schema is kept by: its JSON (with `more` beside it), `None` for one that
    has none (a schema built in Python that holds itself)."""
    try:
        text = json.dumps(schema, sort_keys=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        return None
    return (text, *more) if more else text


def marked(
    schema: object, field: RequestField, provider: str, who: str
) -> tuple[tuple[Warning, ...], list[str]]:
    """An `approximated` warning for each mark in `schema` of a check no provider enforces
    (reported as every provider reports it), and the places they are at; `who` is how the
    warnings name the mock."""
    from allama.mock._values import unenforced_marks  # the value generator: loaded when asked

    marks = unenforced_marks(schema)
    warnings = tuple(
        Warning.approximated(
            field,
            f"{what} at `{pointer or '/'}` asks for a check no provider enforces, so {who} "
            "does not say it holds either: its value may fail it",
        ).with_provider(provider)
        for pointer, what in marks
    )
    return warnings, [pointer for pointer, _ in marks]


def beyond_dialects(
    schema: object, field: RequestField, said: list[str], provider: str, who: str
) -> tuple[Warning, ...]:
    """Where no strict dialect a provider sends the schema in rewrites it exactly
    (beyond the places said already), the places they all fall short at, each named
    with the first dialect's note on it; none where any dialect is exact."""
    if not isinstance(schema, Mapping):
        return ()
    covered = [display(pointer) for pointer in said]
    short: list[tuple[str, list[tuple[str, str]]]] = []
    for label, rewrite, object_root in _DIALECTS[field]:
        try:
            notes = _rewritten(schema, rewrite, object_root)
        except (ValueError, RecursionError):  # a schema this dialect cannot read
            continue
        left = [(at, message) for at, message in notes if not _within(at, covered)]
        if not left:
            return ()  # a provider holds the answer to it exactly
        short.append((label, left))
    if not short:
        return ()
    label, first = short[0]
    # The places of the first dialect's notes that every other one falls short at too
    # (at the place, inside it or around it: a map one refuses whole, another inside).
    common = [
        at
        for at in dict.fromkeys(at for at, _ in first)
        if all(any(_related(at, where) for where, _ in notes) for _, notes in short[1:])
    ]
    if not common:
        return (
            Warning.approximated(
                field,
                f"no provider's dialect enforces the schema exactly, so {who} does not say it "
                f"holds either ({label}: {first[0][1]})",
            ).with_provider(provider),
        )
    return tuple(
        Warning.approximated(
            field,
            f"`{at}` is enforced exactly by no provider's dialect, so {who} does not say it "
            f"holds either ({label}: {next(message for where, message in first if where == at)})",
        ).with_provider(provider)
        for at in common
    )


_Dialect = tuple[str, Callable[[Mapping[str, Any]], Rewrite], bool]
"""A strict dialect a provider sends a schema in: its name, its rewrite, and whether it
takes only an object root (extraction then wraps another root, which changes nothing the
schema enforces)."""


def _openai(profile: OpenAIProfile) -> Callable[[Mapping[str, Any]], Rewrite]:
    def rewrite(schema: Mapping[str, Any]) -> Rewrite:
        from allama.schema._dialects._openai_strict import openai_strict

        return openai_strict(schema, profile=profile)

    return rewrite


def _anthropic(schema: Mapping[str, Any]) -> Rewrite:
    from allama.schema._dialects._anthropic import anthropic

    return anthropic(schema)


def _gemini_json_schema(schema: Mapping[str, Any]) -> Rewrite:
    from allama.schema._dialects._gemini import gemini_json_schema

    return gemini_json_schema(schema)


def _gemini_response_schema(schema: Mapping[str, Any]) -> Rewrite:
    from allama.schema._dialects._gemini import gemini_response_schema

    return gemini_response_schema(schema)


def _llama_cpp(schema: Mapping[str, Any]) -> Rewrite:
    from allama.schema._dialects._llama_cpp import llama_cpp

    return llama_cpp(schema)


_OPENAI_DIALECTS: tuple[_Dialect, ...] = (
    ("OpenAI strict mode", _openai("current"), True),
    ("Azure OpenAI's strict mode (older API versions)", _openai("azure_legacy"), True),
    ("OpenAI strict mode (fine-tuned models)", _openai("fine_tuned"), True),
    ("xAI's strict mode", _openai("xai"), True),
    ("Anthropic strict mode", _anthropic, True),
)
_DIALECTS: dict[RequestField, tuple[_Dialect, ...]] = {
    RequestField.RESPONSE_FORMAT: (
        *_OPENAI_DIALECTS,
        ("Gemini responseJsonSchema", _gemini_json_schema, False),
        ("Gemini responseSchema", _gemini_response_schema, False),
        ("llama.cpp's grammar", _llama_cpp, False),
    ),
    # Gemini has no strict function calling.
    RequestField.TOOLS: (
        *_OPENAI_DIALECTS,
        ("DeepSeek's strict tools", _openai("deepseek"), True),
        ("llama.cpp's grammar", _llama_cpp, False),
    ),
}
"""The strict dialects providers send the schema on a field in, OpenAI's first (exact
most often: the rest are not loaded then). Each is loaded when first asked, as the
adapters load theirs. A grammar backend that does not report what it enforces (vLLM's,
Fireworks') is never exact, so it is not asked."""


def _rewritten(
    schema: Mapping[str, Any], rewrite: Callable[[Mapping[str, Any]], Rewrite], object_root: bool
) -> list[tuple[str, str]]:
    """The notes of `schema` rewritten, as (pointer, message): a root that is no object
    wrapped first where the dialect takes only objects, as extraction wraps it, and its
    notes' pointers read as the unwrapped schema's."""
    if not object_root or object_rooted(dict(schema)):
        return [(display(note.pointer), note.message) for note in rewrite(schema).notes]
    inner = {key: value for key, value in schema.items() if key not in _HOISTED}
    wrapper: dict[str, Any] = {
        "type": "object",
        "properties": {ROOT_KEY: inner},
        "required": [ROOT_KEY],
        "additionalProperties": False,
    }
    wrapper.update((key, value) for key, value in schema.items() if key in _HOISTED)
    prefix = f"/properties/{ROOT_KEY}"
    return [
        (
            _unwrapped(display(note.pointer), prefix),
            note.message.replace(f"`{prefix}`", "`/`").replace(f"`{prefix}/", "`/"),
        )
        for note in rewrite(wrapper).notes
    ]


def _unwrapped(pointer: str, prefix: str) -> str:
    """A pointer into the wrapped schema as the unwrapped one's (its value is the root)."""
    if pointer == prefix or pointer.startswith(f"{prefix}/"):
        return display(pointer.removeprefix(prefix))
    return pointer


_HOISTED = ("$defs", "definitions", "$schema")
"""Root keywords that stay at the root of a wrapped schema (its `$ref`s point there)."""


def _related(one: str, other: str) -> bool:
    """Whether one of two places holds the other (or they are the same)."""
    return _within(one, [other]) or _within(other, [one])


def _within(pointer: str, places: list[str]) -> bool:
    """Whether `pointer` is one of `places`, or inside one (`/` holds every place)."""
    return any(
        place == "/" or pointer == place or pointer.startswith(f"{place}/") for place in places
    )
