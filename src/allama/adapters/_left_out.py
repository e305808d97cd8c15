"""What an encoder says when it leaves out parts of a turn another API gave.

An Anthropic turn's server tool blocks (a search's calls and results) and reasoning with no
text (Anthropic's redacted thinking, OpenAI's encrypted reasoning without a summary) go back
only to the API that gave them; every other encoder sends the turn without them and says so
in the same words, so that a caller moving a conversation sees one sentence whichever API
it moved to.
"""

from __future__ import annotations

from allama._degradations import Degradations
from allama.types import AssistantMessage, Reasoning, RequestField
from allama.types._response import RESUME_KEY

__all__ = ["SERVER_BLOCKS_LEFT_OUT", "encrypted_reasoning_left_out", "server_blocks_left_out"]

SERVER_BLOCKS_LEFT_OUT = (
    "the server tool blocks of an Anthropic turn (a server tool's calls and results, in a "
    "finished turn, a paused one, or one whose code execution waits on tool calls) were left "
    "out: only Anthropic takes them back"
)
"""Said on `messages` by every other API's encoder that sends such a turn."""


def server_blocks_left_out(message: AssistantMessage, degradations: Degradations) -> None:
    """Say that an Anthropic turn holding server tool blocks (its searches' calls and
    results), which goes back whole to Anthropic whether it finished, paused in a server
    tool's run, or its code execution waits on tool calls, was sent without them: only
    Anthropic takes them back."""
    resume = message.provider_data.get("anthropic", {}).get(RESUME_KEY)
    layout = resume.get("blocks") if isinstance(resume, dict) else resume
    if isinstance(layout, list) and any(
        isinstance(item, dict) and isinstance(item.get("type"), str) for item in layout
    ):
        degradations.approximate(RequestField.MESSAGES, SERVER_BLOCKS_LEFT_OUT)


def encrypted_reasoning_left_out(
    message: AssistantMessage, degradations: Degradations, display: str
) -> None:
    """Say that reasoning with no text (another API's, meant to go back to it) was left out,
    where the endpoint (`display`) takes back reasoning as text alone: Ollama's `thinking`,
    DeepSeek's `reasoning_content`."""
    if any(
        isinstance(block, Reasoning) and block.encrypted_content and not block.text
        for block in message.content
    ):
        degradations.approximate(
            RequestField.REASONING,
            f"{display} takes back reasoning as text alone; encrypted reasoning with no text "
            "was left out of the conversation",
        )
