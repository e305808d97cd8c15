"""Tool calls a conversation gives no result for, found before a request is sent.

Providers answer 400 to an assistant turn whose calls are not each answered: OpenAI's and
Azure OpenAI's Chat Completions ("An assistant message with 'tool_calls' must be followed by
tool messages responding to each 'tool_call_id'"), DeepSeek's ("insufficient tool messages
following tool_calls message"), Mistral's ("Not the same number of function calls and
responses"), each wanting the results in the tool messages right after the turn; the
Responses API ("No tool output found for function call") wanting one anywhere in the input.
Found in the caller's messages, so that an error names the caller's ids and indexes, not
the ids an encoder sent in their place (`with_tool_ids`).

A result no call is left for is refused as well (`extra_result`): OpenAI's Chat Completions
("messages with role 'tool' must be a response to a preceding message with 'tool_calls'"),
Anthropic's ("each tool_use must have a single result", "unexpected `tool_use_id` found in
`tool_result` blocks"), Gemini's ("the number of function response parts is equal to the
number of function call parts of the function call turn").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from allama.types import AssistantMessage, Message, TextPart, ToolMessage, UserMessage

__all__ = [
    "Extra",
    "Unanswered",
    "due_before",
    "extra_result",
    "extra_words",
    "missing_words",
    "moved_after_results",
    "said_before_results",
    "says_nothing",
    "unanswered_calls",
    "unanswered_words",
]


@dataclass(frozen=True, slots=True)
class Unanswered:
    """The calls of one assistant message that no result answered."""

    calls: tuple[str, ...]
    """Their ids as the caller gave them, in the order of the turn's calls."""
    turn: int
    """The index of the assistant message in the messages searched."""
    before: int | None
    """The index of the user or assistant message that follows the turn's results (the next
    turn, before which they were due), `None` where the conversation ends first."""
    before_role: Literal["user", "assistant"] | None
    """That message's role, `None` with it."""


def unanswered_calls(messages: Sequence[Message], *, adjacent: bool = True) -> Unanswered | None:
    """The first assistant message, in `messages`, whose tool calls are not all answered.

    `adjacent`: a call is answered by a tool message in the run right after its turn (up to
    the next user or assistant message: a system or developer one between is passed over),
    as Chat Completions endpoints check. Otherwise by one anywhere after it, as the Responses
    API pairs them by id: a result answers the first call of its id in the latest turn of
    calls that no result answered yet, else the latest call of its id, as `with_tool_ids`
    pairs them when it makes ids unique.
    """
    open_calls: dict[int, list[str | None]] = {}  # each turn's calls, `None` once answered
    waiting: dict[str, list[tuple[int, int]]] = {}  # the latest turn's calls not yet answered
    latest: dict[str, tuple[int, int]] = {}  # an id's latest call: its turn and place
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            open_calls[index] = [call.id for call in message.tool_calls]
            waiting = {}
            for place, call in enumerate(message.tool_calls):
                waiting.setdefault(call.id, []).append((index, place))
                latest[call.id] = (index, place)
        elif isinstance(message, ToolMessage):
            queue = waiting.get(message.tool_call_id)
            if queue:
                turn, place = queue.pop(0)
            elif not adjacent and message.tool_call_id in latest:
                turn, place = latest[message.tool_call_id]
            else:
                continue  # answers no call it could: the provider's own error, if any
            open_calls[turn][place] = None
        elif adjacent and isinstance(message, UserMessage | AssistantMessage):
            waiting = {}  # the run of results is over: later ones answer none of these
    for turn, ids in open_calls.items():
        left = tuple(call_id for call_id in ids if call_id is not None)
        if left:
            for index in range(turn + 1, len(messages)):
                if isinstance(messages[index], UserMessage):
                    return Unanswered(left, turn, index, "user")
                if isinstance(messages[index], AssistantMessage):
                    return Unanswered(left, turn, index, "assistant")
            return Unanswered(left, turn, None, None)
    return None


def unanswered_words(found: Unanswered, display: str, *, adjacent: bool = True) -> str:
    """Why a request holding `found` is refused, naming the calls and the turns by the
    caller's ids and indexes, as the Anthropic encoder does (`display`: the endpoint's name).
    `adjacent`: the results were due right after the turn (Chat Completions), else anywhere
    after it (the Responses API)."""
    named = [(call_id, found.turn) for call_id in found.calls]
    if not adjacent:
        return f"{_no_result(named)}, and {display} needs a result for each call"
    return missing_words(named, due_before(found.before, found.before_role), display)


def missing_words(named: Sequence[tuple[str, int]], due: str, display: str) -> str:
    """Why calls left without a result right after their turn are refused: `named`, each
    call's id as the caller gave it and its assistant message's index; `due`, the turn the
    results were due before (`due_before`). The words of every encoder that refuses them
    (Chat Completions', Anthropic's and Gemini's, each on its own reading of a turn)."""
    head = _no_result(named)
    return f"{head} before {due}, and {display} needs each call's result right after it"


def _no_result(named: Sequence[tuple[str, int]]) -> str:
    ids = ", ".join(f"`{call_id}`" for call_id, _ in named)
    where = ", ".join(f"`messages[{index}]`" for index in sorted({index for _, index in named}))
    noun = "the tool call" if len(named) == 1 else "the tool calls"
    return f"{noun} {ids} of the assistant turn at {where} got no tool result"


def due_before(before: int | None, role: Literal["user", "assistant"] | None) -> str:
    """The turn a call's results were due before, in words: the message at `before` (of
    `role`), else the end of the conversation. Shared by the encoders that refuse a call
    left unanswered, so that each names the turn alike."""
    if before is None:
        return "the end of the conversation"
    return f"the next {role} turn (`messages[{before}]`)"


@dataclass(frozen=True, slots=True)
class Extra:
    """A tool result that answers no call left unanswered in the turn before it."""

    index: int
    """The tool message's index in the messages searched."""
    call_id: str
    """Its id as the caller gave it."""
    turn: int | None
    """The index of the assistant message whose calls it comes after, `None` where no
    assistant message with tool calls comes before it (right before it, with `merged`
    false)."""
    again: bool
    """Whether that turn has a call of its id: one an earlier result already answered."""


def extra_result(messages: Sequence[Message], *, merged: bool = False) -> Extra | None:
    """The first tool message in `messages` for a call made earlier that no call of the turn
    before it is left for.

    A result answers a call of its id in the assistant message before it, each call once
    (calls sharing an id are each answered by one result, in order). `merged`: the results
    are due anywhere in the user turn after the calls (up to the next assistant message:
    a user message between does not end it), and consecutive assistant messages are one
    turn, as Anthropic's and Gemini's encoders merge them; else in the run of tool messages
    right after the assistant message (Chat Completions). A system or developer message
    between is passed over either way. Only a result for a call made earlier is counted
    (a second one, or one for an earlier turn's call): one whose id no call has is left to
    the endpoint, as `unanswered_calls` leaves it (a call made another way, perhaps).
    """
    made: set[str] = set()  # the ids of every call so far
    left: Counter[str] = Counter()  # the turn's calls no result answered yet
    calls: set[str] = set()  # the turn's ids
    turn: int | None = None
    follows_assistant = False  # the last message (system ones passed over) is an assistant's
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage):
            ids = [call.id for call in message.tool_calls]
            if not (merged and follows_assistant):
                left, calls, turn = Counter(), set(), None
            left.update(ids)
            calls.update(ids)
            made.update(ids)
            if turn is None and ids:
                turn = index
            follows_assistant = True
        elif isinstance(message, UserMessage):
            follows_assistant = False
            if not merged:
                left, calls, turn = Counter(), set(), None
        elif isinstance(message, ToolMessage):
            follows_assistant = False
            call_id = message.tool_call_id
            if left[call_id] > 0:
                left[call_id] -= 1
            elif call_id in made:
                return Extra(index, call_id, turn, call_id in calls)
    return None


def extra_words(found: Extra, display: str) -> str:
    """Why a request holding `found` is refused, naming the result by the caller's index
    and id (`display`: the endpoint's name)."""
    head = f"the tool result at `messages[{found.index}]` (for `{found.call_id}`)"
    if found.turn is None:
        return (
            f"{head} comes after no assistant turn with tool calls, and {display} needs each "
            "result right after the call it answers"
        )
    if found.again:
        return (
            f"{head} answers a call of the assistant turn at `messages[{found.turn}]` that "
            f"another result already answered, and {display} takes one result for each call"
        )
    return (
        f"{head} answers no call of the assistant turn at `messages[{found.turn}]` before it, "
        f"and {display} needs each result right after the call it answers"
    )


def said_before_results(turn: Sequence[int], messages: Sequence[Message]) -> list[int]:
    """The indexes of the user's own messages of one merged user turn (`turn`, the indexes
    in `messages` of the messages it was merged from, in order) given before one of its tool
    results: the encoders that put a turn's results first (Anthropic's, Gemini's) move what
    they say after the results, changing the order the caller gave. One of whitespace alone
    says nothing (Anthropic's encoder leaves it out): it is not named (`moved_after_results`)."""
    moved: list[int] = []
    said: list[int] = []  # the user's messages since the last tool result
    for index in turn:
        message = messages[index]
        if isinstance(message, ToolMessage):
            moved.extend(said)
            said = []
        elif isinstance(message, UserMessage) and not says_nothing(message):
            said.append(index)
    return moved


def says_nothing(message: UserMessage) -> bool:
    """A user message of no parts but text of whitespace alone (or of no parts at all)."""
    return all(isinstance(part, TextPart) and not part.text.strip() for part in message.content)


def moved_after_results(indexes: Sequence[int]) -> str:
    """The words naming the user messages an encoder moved after their turn's tool results
    (Anthropic's lead its user turn, Gemini's function responses of a turn go together), by
    index alone: what they say is the caller's, never put in a warning."""
    where = ", ".join(f"`messages[{index}]`" for index in indexes)
    if len(indexes) == 1:
        return (
            f"the user message at {where}, given before a tool result of its turn, was "
            "moved after the turn's results"
        )
    return (
        f"the user messages at {where}, each given before a tool result of its turn, were "
        "moved after the turn's results"
    )
