"""Tool-call ids a target takes, whichever provider made the calls.

A conversation carries the ids of every provider it went through, and some repeat: allama's
stand-ins where a provider gives none (Gemini, Ollama) are `call_0`, `call_1`, ... in every
response. Anthropic refuses an id outside `[a-zA-Z0-9_-]` and one id for two calls; Mistral's
models take 9 letters and digits ("Tool call id was ... but must be a-z, A-Z, 0-9, with a
length of 9"); OpenAI's Chat Completions take at most 40 characters (400
`string_above_max_length`: xAI's `call-<uuid>-0` has 43, vLLM's `chatcmpl-tool-<hex>` 46).
So a request's ids are mapped once, in conversation order, calls and results alike: an id
the target takes that no earlier call used (or any it takes, where it takes repeats) goes
as it is, any other gets one the target takes, unique in the request and made from it
deterministically, so that the same conversation always encodes the same way (prompt
caching). A result answers the first call of its id in the latest turn of calls that no
result answered yet (a server that gives two parallel calls one id), else the latest call
of its id before it; one that answers none keeps its id (the provider's own error).
"""

from __future__ import annotations

import functools
import hashlib
import re
import string
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from allama.types import AssistantMessage, Message, ToolCall, ToolDefinition, ToolMessage

__all__ = [
    "results_in_call_order",
    "repeated_tool_names",
    "ANTHROPIC_IDS",
    "MISTRAL_IDS",
    "IdRule",
    "hashed_id",
    "limited_ids",
    "mistral_model",
    "with_tool_ids",
]


@dataclass(frozen=True, slots=True)
class IdRule:
    """The ids a target takes, and how one is made for an id it refuses or has seen."""

    accepts: Callable[[str], bool]
    make: Callable[[str, int], str]
    """An id the target takes, from the original and a number (its occurrence, then higher
    until the id is unused in the request)."""
    unique: bool = True
    """Whether the target refuses one id for two calls (a repeat gets another), rather than
    taking a repeat as it is."""


_ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")
_ANTHROPIC_OUTSIDE = re.compile(r"[^a-zA-Z0-9_-]")


def _anthropic_id(original: str, number: int) -> str:
    base = _ANTHROPIC_OUTSIDE.sub("_", original) or "call"
    return f"{base}_{number}" if number else base


ANTHROPIC_IDS = IdRule(lambda given: _ANTHROPIC_ID.fullmatch(given) is not None, _anthropic_id)
"""Anthropic's `tool_use.id`: `^[a-zA-Z0-9_-]+$`; refused characters become `_`, a repeat
gets a suffix."""

_MISTRAL_ID = re.compile(r"[a-zA-Z0-9]{9}")
_BASE62 = string.digits + string.ascii_letters


def _mistral_id(original: str, number: int) -> str:
    digest = hashlib.sha256(f"{original}\x00{number}".encode()).digest()
    value = int.from_bytes(digest[:8], "big")
    letters = []
    for _ in range(9):
        value, digit = divmod(value, 62)
        letters.append(_BASE62[digit])
    return "".join(letters)


MISTRAL_IDS = IdRule(lambda given: _MISTRAL_ID.fullmatch(given) is not None, _mistral_id)
"""Mistral's models (mistral_common's check, on La Plateforme and wherever their chat
template runs): 9 letters and digits, here from a hash of the id and its occurrence."""

_HASHED_PREFIX = "call_"
_HASHED_LETTERS = 24


def hashed_id(original: str, number: int) -> str:
    """`call_` and 24 letters and digits from a hash of the id and its occurrence (29
    characters, shaped as OpenAI's own ids are): for a target that refuses the id's length."""
    digest = hashlib.sha256(f"{original}\x00{number}".encode()).digest()
    value = int.from_bytes(digest, "big")
    letters = []
    for _ in range(_HASHED_LETTERS):
        value, digit = divmod(value, 62)
        letters.append(_BASE62[digit])
    return _HASHED_PREFIX + "".join(letters)


@functools.cache
def limited_ids(limit: int) -> IdRule:
    """Ids of at most `limit` characters (OpenAI Chat Completions' 40), repeats as they are:
    a longer id is sent as `hashed_id`'s, its results with it."""
    if limit < len(_HASHED_PREFIX) + _HASHED_LETTERS:
        raise ValueError(f"no hashed id fits in {limit} characters")
    return IdRule(lambda given: len(given) <= limit, hashed_id, unique=False)


_MISTRAL_MODEL = re.compile(
    r"mistral|mixtral|ministral|magistral|codestral|devstral|pixtral|voxtral", re.IGNORECASE
)


def mistral_model(model: str) -> bool:
    """Whether `model` names one of Mistral's models, whose template checks tool-call ids
    on any endpoint that serves it (vLLM, OpenRouter, Azure AI Foundry)."""
    return _MISTRAL_MODEL.search(model) is not None


def with_tool_ids(messages: Sequence[Message], rule: IdRule) -> Sequence[Message]:
    """`messages` with each call's id and its results' as `rule` takes them (`messages`
    itself when every id goes as it is)."""
    sent: set[str] = set()  # the ids of the calls so far, as sent
    latest: dict[str, str] = {}  # an original id to the id its latest call was sent as
    seen: Counter[str] = Counter()  # calls so far per original id
    unanswered: dict[str, list[str]] = {}  # the latest turn's calls no result answered yet
    out: list[Message] = []
    changed = False
    for message in messages:
        if isinstance(message, AssistantMessage) and message.tool_calls:
            blocks = []
            renamed = False
            unanswered = {}
            for block in message.content:
                if isinstance(block, ToolCall):
                    new = _assign(block.id, rule, sent, seen)
                    latest[block.id] = new
                    unanswered.setdefault(block.id, []).append(new)
                    if new != block.id:
                        block = block.model_copy(update={"id": new})
                        renamed = True
                blocks.append(block)
            if renamed:
                message = message.model_copy(update={"content": tuple(blocks)})
                changed = True
        elif isinstance(message, ToolMessage):
            waiting = unanswered.get(message.tool_call_id)
            if waiting:
                new = waiting.pop(0)
            else:
                new = latest.get(message.tool_call_id, message.tool_call_id)
            if new != message.tool_call_id:
                message = message.model_copy(update={"tool_call_id": new})
                changed = True
        out.append(message)
    return tuple(out) if changed else messages


def _assign(original: str, rule: IdRule, sent: set[str], seen: Counter[str]) -> str:
    number = seen[original]
    seen[original] += 1
    given = original
    if not rule.accepts(original) or (rule.unique and original in sent):
        given = rule.make(original, number)
        while given in sent:
            number += 1
            given = rule.make(original, number)
    sent.add(given)
    return given


def results_in_call_order(messages: Sequence[Message]) -> list[Message]:
    """The messages, with the tool results that follow an assistant turn put in the order
    of its calls, for a target that pairs results with calls by position (Gemini's
    `functionResponse`, where the ids of calls Gemini gave none are not sent; Ollama's
    `tool_name`; an open model's chat template behind Chat Completions, which writes them
    with no id): results given Rome, then Paris, for calls Paris, Rome would be read as the
    wrong call's. Only the run of tool results right after the turn is reordered; one
    that answers no call of that turn keeps its place after those that do."""
    ordered: list[Message] = []
    at = 0
    while at < len(messages):
        message = messages[at]
        ordered.append(message)
        at += 1
        if not isinstance(message, AssistantMessage):
            continue
        position: dict[str, int] = {}
        for index, call in enumerate(message.tool_calls):
            position.setdefault(call.id, index)
        end = at
        while end < len(messages) and isinstance(messages[end], ToolMessage):
            end += 1
        results = [result for result in messages[at:end] if isinstance(result, ToolMessage)]
        results.sort(key=lambda result: position.get(result.tool_call_id, len(position)))
        ordered.extend(results)
        at = end
    return ordered


def repeated_tool_names(tools: Sequence[ToolDefinition], display: str) -> str | None:
    """Why `tools` cannot go to a provider that takes each name once, or `None`.

    A call names its tool, so of two tools of one name which one was called could not be
    told; Anthropic answers 400 ("Tool names must be unique"), Gemini "Duplicate function
    declaration found"."""
    places: dict[str, list[int]] = {}
    for index, tool in enumerate(tools):
        places.setdefault(tool.name, []).append(index)
    twice = [(name, at) for name, at in places.items() if len(at) > 1]
    if not twice:
        return None
    said = "; ".join(
        f"`{name}` names the tools at positions {_positions(at)}" for name, at in twice
    )
    return (
        f"{display} takes each tool name once, and the request's tools repeat names "
        f"(positions count from 0): {said}"
    )


def _positions(places: list[int]) -> str:
    """`[0, 2, 5]` as "0, 2 and 5"."""
    *most, last = (str(place) for place in places)
    return f"{', '.join(most)} and {last}"
