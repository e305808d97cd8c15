"""Tool-call ids a target takes, whichever provider made the calls.

A conversation carries the ids of every provider it went through, and some repeat: allama's
stand-ins where a provider gives none (Gemini, Ollama) are `call_0`, `call_1`, ... in every
response. Anthropic refuses an id outside `[a-zA-Z0-9_-]` and one id for two calls (on its
own API, and through a gateway serving Claude on Chat Completions); Mistral's models take
9 letters and digits ("Tool call id was ... but must be a-z, A-Z, 0-9, with a length of
9"); OpenAI's Chat Completions take at most 40 characters (400
`string_above_max_length`: xAI's `call-<uuid>-0` has 43, vLLM's `chatcmpl-tool-<hex>` 46).
So a request's ids are mapped once, in conversation order, calls and results alike: an id
the target takes that no earlier call used (or any it takes, where it takes repeats) goes
as it is, any other gets one the target takes, unique in the request and made from it
deterministically, so that the same conversation always encodes the same way (prompt
caching). A result answers the first call of its id in the latest turn of calls that no
result answered yet (a server that gives two parallel calls one id), else the latest call
of its id before it; one that answers none keeps its id (the provider's own error).

Tool names too: every provider takes each name once in a request, over the request's tools
and those its body option adds (`repeated_tool_names`, `option_tools`).
"""

from __future__ import annotations

import functools
import hashlib
import re
import string
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from allama.types import (
    AssistantMessage,
    ChatRequest,
    Message,
    ToolCall,
    ToolDefinition,
    ToolMessage,
)

__all__ = [
    "ANTHROPIC_CLIENT_TOOLS",
    "ANTHROPIC_SERVER_TOOLS",
    "OptionTool",
    "anthropic_client_tool",
    "anthropic_server_tool",
    "option_tools",
    "options_with_own_tools",
    "own_option_tools",
    "results_in_call_order",
    "repeated_in_body",
    "repeated_tool_names",
    "ANTHROPIC_IDS",
    "MISTRAL_IDS",
    "IdRule",
    "claude_model",
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


def claude_model(model: str) -> bool:
    """Whether `model` names one of Anthropic's Claude models (`claude-sonnet-4-5`,
    `anthropic/claude-sonnet-4.5`): a gateway serving one on Chat Completions (OpenRouter,
    LiteLLM) relays Anthropic's 400 for an id it refuses."""
    return "claude" in model.lower()


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


def repeated_tool_names(
    tools: Sequence[ToolDefinition],
    display: str,
    option: Sequence[OptionTool] = (),
    namespace: str = "",
) -> str | None:
    """Why the tools a body carries cannot go to a provider that takes each name once, or
    `None`: `tools` the request's as sent, `option` those of the body option `namespace`
    sent after them (`option_tools`), each by the name a call of it gives.

    A call names its tool, so of two tools of one name which one was called could not be
    told; Anthropic answers 400 ("Tool names must be unique"), Gemini "Duplicate function
    declaration found". An option's tools count too: they go in the same list, so a
    function tool named like an extraction's (or a request's) tool is the same repeat."""
    places: dict[str, list[tuple[bool, int]]] = {}
    for index, tool in enumerate(tools):
        places.setdefault(tool.name, []).append((False, index))
    for index, given in enumerate(option):
        if given.name is not None:
            places.setdefault(given.name, []).append((True, index))
    twice = [(name, at) for name, at in places.items() if len(at) > 1]
    if not twice:
        return None
    if not any(theirs for _, at in twice for theirs, _ in at):
        said = "; ".join(
            f"`{name}` names the tools at positions {_positions([i for _, i in at])}"
            for name, at in twice
        )
        return (
            f"{display} takes each tool name once, and the request's tools repeat names "
            f"(positions count from 0): {said}"
        )
    noun = option[0].noun if option else "tool"
    said = "; ".join(f"`{name}` names {_places(at, namespace, noun)}" for name, at in twice)
    return (
        f"{display} takes each tool name once, and the tools sent repeat names (positions "
        f"count from 0): {said}"
    )


def repeated_in_body(
    body: Mapping[str, Any],
    ours: Sequence[ToolDefinition],
    display: str,
    namespace: str,
    *,
    entries: int | None = None,
) -> str | None:
    """`repeated_tool_names` over the tools `body` carries, as it goes: `ours` (the
    request's tools as sent, in the first `entries` items of its `tools`, one each unless
    said), then the body option `namespace`'s, which `option_fields` added after them or
    sent alone."""
    sent = body.get("tools")
    skip = len(ours) if entries is None else entries
    given = sent[skip:] if isinstance(sent, list) else []
    return repeated_tool_names(ours, display, option_tools(namespace, given), namespace)


def _places(at: list[tuple[bool, int]], namespace: str, noun: str) -> str:
    """Where a repeated name is: among the request's tools, among the option's, or both."""
    ours = [index for theirs, index in at if not theirs]
    given = [index for theirs, index in at if theirs]
    said = []
    if ours:
        said.append(
            f"the request's tool at position {ours[0]}"
            if len(ours) == 1
            else f"the request's tools at positions {_positions(ours)}"
        )
    if given:
        where = f"`tools` in the body option `{namespace}`"
        said.append(
            f"the {noun} at position {given[0]} of {where}"
            if len(given) == 1
            else f"the {noun}s at positions {_positions(given)} of {where}"
        )
    return " and ".join(said)


def _positions(places: list[int]) -> str:
    """`[0, 2, 5]` as "0, 2 and 5"."""
    *most, last = (str(place) for place in places)
    return f"{', '.join(most)} and {last}"


# The tools a body option gives

_FUNCTION_TYPES = ("function", "custom")
"""The types of the tools the caller runs on Chat Completions and Ollama: a function, or a
custom tool (free-text input). Every other type there is the provider's own (Groq's browser
search), but for the Anthropic client tools a gateway serving Claude takes
(`anthropic_client_tool`)."""

ANTHROPIC_SERVER_TOOLS = (
    "web_search_",
    "web_fetch_",
    "code_execution_",
    "advisor_",
    "tool_search_tool_",
    "mcp_toolset",
)
"""How the types of the tools Anthropic runs itself begin (its tool reference). Every other
tool is a client tool, run by the caller ("your application handles execution"): a custom
one (no `type`, or `custom`), and the typed ones Anthropic defines the input of
(`ANTHROPIC_CLIENT_TOOLS`)."""

ANTHROPIC_CLIENT_TOOLS = ("bash_", "text_editor_", "computer_", "memory_")
"""How the types of Anthropic's typed client tools begin (`bash_20250124`,
`text_editor_20250728`, `computer_20250124`, `memory_20250818`): the caller runs their
calls, as a custom tool's."""

_RESPONSES_OWN = frozenset(
    {"function", "custom", "computer_use_preview", "computer", "local_shell", "apply_patch"}
)
"""The types of the Responses API's tools whose calls the caller runs and answers: a
function or custom tool, the computer use tools (the caller takes the actions and the
screenshots), the local shell, and `apply_patch` (the caller applies the diff). `shell` is
the caller's too unless it runs in a container OpenAI hosts (`_HOSTED_SHELL`); a
`namespace` groups function and custom tools, a client-run `tool_search` is answered by
the caller, and an `mcp` tool's calls wait for the caller's approval unless it says
`require_approval: "never"`. Every other type (web search, file search, code interpreter,
image generation) is OpenAI's own."""

_HOSTED_SHELL = frozenset({"container_auto", "container_reference"})
"""The `environment` types of a `shell` tool whose commands OpenAI runs (hosted shell)."""


def anthropic_server_tool(tool: object) -> bool:
    """Whether a tool as Anthropic takes it (a body's, or a body option's) is one Anthropic
    runs itself (`ANTHROPIC_SERVER_TOOLS`): web search, code execution... Any other object
    is the caller's to run, a typed client tool (`bash_...`) as a custom one."""
    kind = tool.get("type") if isinstance(tool, dict) else None
    return isinstance(kind, str) and kind.startswith(ANTHROPIC_SERVER_TOOLS)


def anthropic_client_tool(kind: object) -> bool:
    """Whether a tool type is one of Anthropic's typed client tools
    (`ANTHROPIC_CLIENT_TOOLS`), as a gateway serving Claude on Chat Completions takes them
    (LiteLLM: `{"type": "bash_20250124", "name": "bash"}`): the caller runs their calls."""
    return isinstance(kind, str) and kind.startswith(ANTHROPIC_CLIENT_TOOLS)


@dataclass(frozen=True, slots=True)
class OptionTool:
    """A tool of a body option's `tools`, as far as its name goes."""

    name: str | None
    """The name a call of it gives; `None` for a tool called by none (Gemini's Google
    Search, OpenAI's web search) or given as no object."""
    own: bool
    """Whether the caller runs its calls (a function or custom tool, a client tool such as
    Anthropic's `bash_...` or OpenAI's computer use): a tool of the request's own, which an
    extraction refuses, where a server tool the provider runs (web search, code execution)
    goes beside its schema."""
    noun: str = "tool"
    """What it is called in a message."""


def _anthropic_tools(tools: list[Any]) -> list[OptionTool]:
    """Anthropic's tools, each called by its `name`: a server tool (`anthropic_server_tool`)
    is Anthropic's, any other the caller's (a custom tool, or a typed client tool such as
    `bash_20250124`)."""
    found = []
    for tool in tools:
        name = tool.get("name") if isinstance(tool, dict) else None
        own = isinstance(tool, dict) and not anthropic_server_tool(tool)
        found.append(OptionTool(name if isinstance(name, str) else None, own))
    return found


def _chat_tools(tools: list[Any]) -> list[OptionTool]:
    """Chat Completions' tools and Ollama's: a function's name is in its `function`, a
    custom tool's in its `custom`; another type's, where it has one, beside its type (an
    Anthropic client tool's, which is the caller's too)."""
    found = []
    for tool in tools:
        kind = tool.get("type") if isinstance(tool, dict) else None
        nested = kind in _FUNCTION_TYPES
        spec = tool.get(kind) if isinstance(tool, dict) and isinstance(kind, str) else None
        name = spec.get("name") if nested and isinstance(spec, dict) else None
        if not nested and isinstance(tool, dict):
            name = tool.get("name")
        own = nested or anthropic_client_tool(kind)
        found.append(OptionTool(name if isinstance(name, str) else None, own))
    return found


def _responses_tools(tools: list[Any]) -> list[OptionTool]:
    """The Responses API's tools, flat: `{"type": "function", "name": ...}`; the caller's
    own those of `_RESPONSES_OWN`, a local `shell`, a `namespace` (of function and custom
    tools, whose calls give their own names), a client-run `tool_search` and an `mcp` tool
    that waits for approval."""
    found = []
    for tool in tools:
        kind = tool.get("type") if isinstance(tool, dict) else None
        name = tool.get("name") if isinstance(tool, dict) else None
        if kind == "namespace":
            name = None  # (its calls name the tools in it)
        found.append(OptionTool(name if isinstance(name, str) else None, _responses_own(tool)))
    return found


def _responses_own(tool: object) -> bool:
    """Whether the caller runs the calls of a Responses API tool (`_RESPONSES_OWN`), or
    answers them: an `mcp` tool's calls wait for the caller's approval (an
    `mcp_approval_request`, whose answer holds no text) unless it says
    `require_approval: "never"`; a filter approving only some tools is read as waiting."""
    if not isinstance(tool, dict):
        return False
    kind = tool.get("type")
    if kind == "shell":
        environment = tool.get("environment")
        hosted = environment.get("type") if isinstance(environment, dict) else None
        return hosted not in _HOSTED_SHELL
    if kind == "tool_search":
        return tool.get("execution") == "client"
    if kind == "mcp":  # (OpenAI calls the server, but waits for the caller to approve)
        return tool.get("require_approval") != "never"
    return kind == "namespace" or kind in _RESPONSES_OWN


def _gemini_tools(tools: list[Any]) -> list[OptionTool]:
    """Gemini's function declarations (`functionDeclarations`, or `function_declarations`
    as Google's SDKs spell it), over every tool in turn; its built-in tools (Google Search,
    code execution) have no name."""
    found = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        for key in ("functionDeclarations", "function_declarations"):
            declarations = tool.get(key)
            for declaration in declarations if isinstance(declarations, list) else ():
                name = declaration.get("name") if isinstance(declaration, dict) else None
                named = name if isinstance(name, str) else None
                found.append(OptionTool(named, True, "function declaration"))
    return found


_OPTION_TOOLS: dict[str, Callable[[list[Any]], list[OptionTool]]] = {
    "anthropic": _anthropic_tools,
    "gemini": _gemini_tools,
    "ollama": _chat_tools,
    "openai_compat": _chat_tools,
    "openai_responses": _responses_tools,
}
"""How each adapter's body option (its `BODY_OPTION`) gives its tools."""


def option_tools(namespace: str, tools: Any) -> list[OptionTool]:
    """The tools in `tools`, as the body option `namespace` gives them (or as its body
    sends them); nothing where it is no list."""
    if not isinstance(tools, list):
        return []
    return _OPTION_TOOLS[namespace](tools)


def own_option_tools(request: ChatRequest) -> list[OptionTool]:
    """The tools of the caller's own (functions, custom tools, client tools such as
    Anthropic's `bash_...` or OpenAI's computer use) that the body options of `request`
    give, each adapter's: they are the request's own tools as much as `request.tools` are,
    and refused by an extraction the same way, whichever provider it goes to (a request
    with its own tools fails the same way everywhere). Server tools (web search) are not
    among them."""
    own: list[OptionTool] = []
    for namespace in _OPTION_TOOLS:
        extra = request.option_json(namespace)
        if isinstance(extra, dict) and extra.get("tools"):
            own.extend(tool for tool in option_tools(namespace, extra["tools"]) if tool.own)
    return own


def options_with_own_tools(request: ChatRequest) -> list[str]:
    """The body options of `request` that give tools of the caller's own
    (`own_option_tools`), by name, in order: where an extraction's conflict says they are."""
    return sorted(
        namespace
        for namespace in _OPTION_TOOLS
        if isinstance(extra := request.option_json(namespace), dict)
        and any(tool.own for tool in option_tools(namespace, extra.get("tools")))
    )
