"""Tool calls a conversation gives no result for, found before a request is sent.

Providers answer 400 to an assistant turn whose calls are not each answered: OpenAI's and
Azure OpenAI's Chat Completions ("An assistant message with 'tool_calls' must be followed by
tool messages responding to each 'tool_call_id'"), DeepSeek's ("insufficient tool messages
following tool_calls message"), Mistral's ("Not the same number of function calls and
responses"), each wanting the results in the tool messages right after the turn; the
Responses API ("No tool output found for function call") wanting one anywhere in the input.
Found in the caller's messages, so that an error names the caller's ids and indexes, not
the ids an encoder sent in their place (`with_tool_ids`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from allama.types import AssistantMessage, Message, ToolMessage, UserMessage

__all__ = ["Unanswered", "unanswered_calls", "unanswered_words"]


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
    ids = ", ".join(f"`{call_id}`" for call_id in found.calls)
    noun = "the tool call" if len(found.calls) == 1 else "the tool calls"
    head = f"{noun} {ids} of the assistant turn at `messages[{found.turn}]` got no tool result"
    if not adjacent:
        return f"{head}, and {display} needs a result for each call"
    if found.before is None:
        until = "the end of the conversation"
    else:
        until = f"the next {found.before_role} turn (`messages[{found.before}]`)"
    return f"{head} before {until}, and {display} needs each call's result right after it"
