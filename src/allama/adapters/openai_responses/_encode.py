"""A `ChatRequest` to the HTTP request of `POST /responses`, plus warnings.

Schemas are spoken exactly as Chat Completions speaks them to the same endpoint: the
encoder is the Chat Completions one, with the conversation, the tools, the response format
and the settings laid out as the Responses API takes them. So a schema goes through the
endpoint's dialect rewrite and `apply_strict_policy` with the same warnings and refusals,
on `response_format` (`text.format`) and `tools`; a family with only JSON mode gets
`json_object` with the same refusal. What differs from Chat Completions:

- `strict` is always sent, on tools and on `text.format`: a tool without it is made strict
  by the server when it can be, and silently left loose when it cannot.
- The instructions: the system messages that open the request, before any other message,
  are `instructions`; a later one is a `system` input item, in its place, so that no
  message moves. A developer message is a `developer` input item in its place where the
  endpoint has the role (the profile's `developer_role`), and ends the opening run as any
  other message does; elsewhere it is read as a system message. xAI answers 400 to
  `instructions` beside a `previous_response_id` the body option gives: there they go as
  a `system` input item, first. A request with nothing to send (no message left, no
  instructions, and no input the body option gives: `previous_response_id`,
  `conversation`, `prompt`, `input`) is refused before sending, as Chat Completions
  refuses `messages: []`, rather than sent as `"input": []`.
- `json_object` is taken only when an input message says "json" (OpenAI's rule, where the
  endpoint has Chat Completions' `json_mode_word`): `instructions` do not count. Where no
  input message does, allama's note for the mode (the schema in words, or "Answer with one
  JSON object.") goes as a `developer` message (`system` where the endpoint has no such
  role) first in the input, rather than in the instructions.
- `store` is `false` unless the caller sets it: extraction needs no state kept on the
  server, and a conversation is sent whole each turn. So that reasoning can go back on the
  next turn, `include: ["reasoning.encrypted_content"]` is asked for when the model
  reasons (its family does, or an effort was asked of a family nobody knows); a model that
  does not reason answers 400 to it. Reasoning goes back as a `reasoning` item only when
  it is this API's own (its id, `rs_...`, is kept in the block's `signature`), issued by
  this provider (`Reasoning.issuer`: OpenAI, xAI, OpenRouter and Azure all give `rs_` ids,
  and OpenAI answers 400 to content it did not issue), and can be read back: with its
  encrypted content, or by id under `store: true`. Other reasoning is left out of the
  conversation with a warning on `reasoning`, as is every reasoning item sent to a model
  whose family does not reason (OpenAI answers 400: a conversation moved to another model;
  one whose family is unknown, an Azure deployment's name, is sent them), and so is a
  reasoning item not directly followed, in its turn, by the message or function call it
  preceded (the API refuses one without its following item: a turn cut short while
  reasoning, or one that only reasoned). Under `store: true` a reasoning item without
  encrypted content goes by its id alone, and the API requires the items after it named by
  their own ids (`msg_...`, `fc_...`, kept with the response under `resume`): they are
  sent with them, and one whose following item's id is not known is left out too. The
  item that followed a reasoning item may be the server's own tool call (`rs,
  web_search_call, rs, web_search_call, message`), which is no block (its type and id are
  kept under `resume`): under `store: true`, from a stored response, such a call
  (`SERVER_CALLS`) goes back after its reasoning as an `item_reference` to its id;
  otherwise it does not go back (the input takes one only with its `id`, which names
  nothing unstored), and the reasoning item before it, as one before any other item that
  does not go back (a commentary message, a generated image), is left out with the same
  warning, rather than sent before the next item, which the API refuses. A
  reasoning item goes back with one `summary_text` part of its block's text, unless the
  turn kept the item's own `summary` and `content` lists (`resume`: several summary parts,
  reasoning text) and the text is still theirs: then with those, as received, since a
  backend that checks the item against its encrypted content (xAI) refuses one rewritten.
- A reasoning effort is `reasoning.effort` alone. No `summary` is asked for unless the
  caller asks (the body option's `{"reasoning": {"summary": "auto"}}`, added to the
  effort): OpenAI answers 400 (`reasoning.summary`, "Your organization must be verified to
  generate reasoning summaries") to any from an organization it has not verified, where
  Chat Completions takes the same effort. Reasoning is read and sent back without one: an
  item with no summary is a reasoning block with no text, its encrypted content kept.
- There are no stop sequences and no seed in this API: both are refused. An output limit
  below the API's minimum (16 tokens) is raised to it, with a warning; one above the
  model's (`ModelFamily.max_output`) is lowered to it, as on Chat Completions.
- Log-probabilities (`request.logprobs`) are asked for with
  `include: ["message.output_text.logprobs"]`, and `top_logprobs` when alternatives are
  wanted. A family that reports none (OpenAI's reasoning models answer 400) is refused, and
  so is a streamed call: allama reads them from whole responses.
- There is no plain-text choice output: a `choice` response format is refused (never sent
  as a JSON Schema).
- An assistant message goes back as an input message, `{"role": "assistant", "content":
  "..."}` as a user's does, its content its text and its refusal in their order (no input
  content part is a refusal; a refusal alone goes so too): an output message must carry
  its `id` and `status`, and strict Responses servers (vLLM, Azure AI Foundry, LiteLLM)
  answer 400 to one without them, or without each `output_text` part's `annotations`.
  One sent by its id (after a reasoning item that goes by id alone, above) is an output
  message whole: its id, `status: "completed"`, and its parts with the fields the spec
  requires, a refusal kept one.
- Each call goes with a `call_id` no other call in the request has (`with_tool_ids`): the
  API answers 400 to two calls or results of one id, which a conversation carries when it
  went through Gemini or Ollama (allama's stand-ins `call_0`, `call_1`, ... restart in
  every response). A repeat gets its id with a suffix (`call_0_1`) and its results with
  it; an id no earlier call used goes as it is, unless it is longer than the 64 characters
  the spec allows (or empty): then as `call_` and 24 letters and digits from its hash. A
  gateway's Claude model (OpenRouter's `anthropic/claude-sonnet-4.5`) gets them in
  Anthropic's characters first, and a Mistral model 9 letters and digits, as Chat
  Completions sends them: the gateway relays their own API's 400 for another id.
- A call of a `custom` tool the body option's `tools` give (by its name) goes back as a
  `custom_tool_call` item, its arguments the free-text `input`, and its result as a
  `custom_tool_call_output`; every other call as a `function_call`. Forcing one by name
  is the custom tool choice (`{"type": "custom", "name": ...}`). A result whose call is not
  in the messages (one made before a `previous_response_id`) goes as a function's, for a
  `ToolMessage` does not name its tool: where the body option gives `custom` tools, with a
  warning on `messages`. A call the input holds no result for (a function's or a custom
  tool's) is refused before sending where the endpoint answers 400 to one (OpenAI and Azure:
  "No tool output found for function call"), naming the call and its turn.
- An assistant turn goes without the output items its response held that allama has no
  type for; those the next turn would miss (calls waiting for the caller's answer,
  generated images, compactions: their types kept under `resume`) with a warning on
  `messages`.
- The request option `openai_responses` is merged into the body last (for
  `previous_response_id`, `store`, `truncation`, `metadata`...); its `text` and
  `reasoning` objects are added to allama's, and its `include` list to allama's, rather
  than replacing them.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Mapping, Sequence
from itertools import islice
from typing import Any

from allama._degradations import Degradations
from allama.adapters._http import HttpRequest, option_fields, settings_as_sent
from allama.adapters._left_out import server_blocks_left_out
from allama.adapters._tool_ids import (
    ANTHROPIC_IDS,
    MISTRAL_IDS,
    IdRule,
    claude_model,
    hashed_id,
    mistral_model,
    with_tool_ids,
)
from allama.adapters.openai_compat._capabilities import ModelFamily
from allama.adapters.openai_compat._encode import (
    JSON_OBJECT_NOTE,
    _routed_parameters,
    sent_arguments,
)
from allama.adapters.openai_compat._encode import _Encoder as _ChatEncoder
from allama.adapters.openai_compat._profile import WireProfile, pdfs_from
from allama.adapters.openai_responses._decode import (
    FOLLOWING_KEY,
    ITEM_IDS_KEY,
    LEFT_OUT_KEY,
    NAMESPACE,
    REASONING_PARTS_KEY,
    reasoning_text,
)
from allama.types import (
    AssistantMessage,
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    DeveloperMessage,
    DocumentPart,
    ImagePart,
    Message,
    Reasoning,
    Refusal,
    RequestField,
    ResponseFormat,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from allama.types._content import OPENAI_REASONING_ID_PREFIX
from allama.types._data_urls import (
    UnreadablePart,
    data_url,
    document_text,
    inline_document,
    part_media_type,
)
from allama.types._response import RESUME_KEY

__all__ = [
    "BODY_OPTION",
    "ENCRYPTED_REASONING",
    "LOGPROBS_INCLUDE",
    "MIN_OUTPUT_TOKENS",
    "REASONING_ID_PREFIX",
    "SERVER_CALLS",
    "encode_request",
]

BODY_OPTION = "openai_responses"
"""Request option namespace whose JSON object is merged into the body, for fields allama
has no name for (`request.with_option_json("openai_responses", {"store": True,
"previous_response_id": "resp_..."})`). Its `text` and `reasoning` objects are added to
allama's and its `include` list to allama's; its other fields replace allama's (its own
`text.format` or `tool_choice` with a warning on the field), but for a `stream` that differs
from the call's (`chat` reads no stream), not sent, with a warning on `options`."""

ENCRYPTED_REASONING = "reasoning.encrypted_content"
"""The `include` entry that returns a reasoning item's encrypted content."""

LOGPROBS_INCLUDE = "message.output_text.logprobs"
"""The `include` entry that returns the log-probabilities of the output text's tokens."""

MIN_OUTPUT_TOKENS = 16
"""The smallest `max_output_tokens` the Responses API takes."""

REASONING_ID_PREFIX = OPENAI_REASONING_ID_PREFIX
"""How the ids of this API's reasoning items begin (OpenAI, Azure, xAI, OpenRouter): a
`Reasoning.signature` that does not is another provider's signature, not an item id."""

SERVER_CALLS = frozenset(
    {"web_search_call", "file_search_call", "code_interpreter_call", "mcp_call"}
)
"""The output items of the server's own tool calls, run and finished within their response,
that a turn sent back under `store: true` names in their place by reference
(`{"type": "item_reference", "id": ...}`): a reasoning item may have preceded one, and goes
back only directly before it."""

_UNSENT: dict[str, Any] = {}
"""In a turn's items, an output item that followed a reasoning item and does not go back
(`following`): the reasoning item is left out, as one before nothing is (`paired`)."""

_XAI = "xai"
"""The profile of xAI, which takes no `instructions` beside a `previous_response_id`."""

_OPTION_INPUT = ("previous_response_id", "conversation", "prompt", "input")
"""Body option fields that give the model input besides the request's messages: a request
with none of its own and one of these is not empty."""

_MERGED = ("text", "reasoning")
"""Option fields whose keys are added to allama's own object of that name."""

_SETTINGS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "max_output_tokens": "max_output_tokens",
}
"""The request settings the body sends, by `ChatRequest` field (`settings_as_sent`): the API
has no stop sequences and no seed."""


_MAX_CALL_ID = 64
"""The longest `call_id` the API takes (the spec's `maxLength`, `minLength` 1)."""


def _repeat_id(original: str, number: int) -> str:
    given = f"{original}_{number}" if number else original
    return given if 0 < len(given) <= _MAX_CALL_ID else hashed_id(original, number)


_RESPONSES_IDS = IdRule(lambda given: 0 < len(given) <= _MAX_CALL_ID, _repeat_id)
"""The API takes a `call_id` of 1 to 64 characters once in a request: a repeat gets a suffix
(`call_0_1`), an id the API refuses (or a repeat the suffix would make too long) one made
from a hash of it (`hashed_id`)."""


class _Encoder(_ChatEncoder):
    """The Chat Completions encoder, with the Responses API's layout."""

    namespace = BODY_OPTION

    def __init__(
        self,
        request: ChatRequest,
        profile: WireProfile,
        family: ModelFamily,
        degradations: Degradations,
        *,
        stream: bool,
    ) -> None:
        super().__init__(request, profile, family, degradations, stream=stream)
        extra = request.option_json(BODY_OPTION)
        self.extra: dict[str, Any] = extra if isinstance(extra, dict) else {}
        self.store = self.extra.get("store") is True
        # The opening instructions, and whether an input message says "json": `body` sets
        # them before the response format, whose note and warnings depend on them.
        self.instructions: str | None = None
        self.input_json = False

    # Input

    def conversation(self) -> tuple[str | None, list[dict[str, Any]]]:
        """`instructions` (the system messages that open the request) and the input items.

        The opening run ends at the first message sent as anything but `system` (a
        `developer` one included): a system message after it is an input item in its place,
        since `instructions` come before every item."""
        self.every_call_answered(adjacent=False)
        instructions: list[str] = []
        items: list[dict[str, Any]] = []
        started = False
        for message in self.sent_messages:
            role = self.instruction_role(message)
            if role is not None:
                assert isinstance(message, SystemMessage | DeveloperMessage)
                if role == "system" and not started:
                    instructions.append(message.content)
                else:
                    started = True
                    items.append({"role": role, "content": message.content})
                continue
            started = True
            items.extend(self.items(message))
        return ("\n\n".join(instructions) if instructions else None), items

    @functools.cached_property
    def sent_messages(self) -> Sequence[Message]:
        """The request's messages, each call's id one no other call in the request has
        (its results' with it): the API answers 400 to a repeated `call_id`. A gateway's
        Claude or Mistral model gets ids as its own API takes them first, as on Chat
        Completions."""
        messages: Sequence[Message] = self.request.messages
        if mistral_model(self.request.model):
            # Their template refuses other providers' ids, and repeated ones.
            messages = with_tool_ids(messages, MISTRAL_IDS)
        elif claude_model(self.request.model):
            # A gateway relays Anthropic's 400 for an id outside its characters (Kimi's
            # `functions.weather:0`), or one id for two calls.
            messages = with_tool_ids(messages, ANTHROPIC_IDS)
        return with_tool_ids(messages, _RESPONSES_IDS)

    def instruction_role(self, message: Message) -> str | None:
        if isinstance(message, SystemMessage):
            return "system"
        if isinstance(message, DeveloperMessage):
            return "developer" if self.profile.developer_role else "system"
        return None

    def items(self, message: Message) -> list[dict[str, Any]]:
        if isinstance(message, UserMessage):
            return [self.user_item(message)]
        if isinstance(message, AssistantMessage):
            return self.assistant_items(message)
        assert isinstance(message, ToolMessage)
        return [self.tool_output(message)]

    def user_item(self, message: UserMessage) -> dict[str, Any]:
        parts = message.content
        if len(parts) == 1 and isinstance(parts[0], TextPart):
            return {"role": "user", "content": parts[0].text}
        content: list[dict[str, Any]] = []
        for part in parts:
            if isinstance(part, TextPart):
                content.append({"type": "input_text", "text": part.text})
            elif isinstance(part, ImagePart):
                # (No URL where the endpoint takes no image by URL: left out, with a warning.)
                if self.takes_images() and (url := self.image_url(part)) is not None:
                    content.append({"type": "input_image", "image_url": url, "detail": "auto"})
            elif (document := self.input_document(part)) is not None:
                content.append(document)
        # Every part left out (an image to a model without vision): empty text, as Chat
        # Completions sends it, rather than a content list with nothing in it.
        return {"role": "user", "content": content or ""}

    def input_document(self, part: DocumentPart) -> dict[str, Any] | None:
        """An `input_file` (PDF bytes as a data URL, or a URL), or text as `input_text`: a
        data URL's bytes read as bytes are (`inline_document`), text in its charset; one
        whose bytes cannot be read is refused before sending, as the other encoders refuse
        it, rather than the request paid for without it."""
        display = self.profile.display_name
        media_type, charset = part_media_type(part.media_type)
        data = part.data
        inline = None if part.url is None else data_url(part.url)
        if inline is not None:
            found = inline_document(inline, part.media_type)
            if isinstance(found, str):  # bad input, refused as the other encoders refuse it
                raise self.invalid(found)
            data, media_type, charset = found
        if media_type == "text/plain" and data is not None:
            try:
                return {"type": "input_text", "text": document_text(data, charset)}
            except UnreadablePart as error:
                raise self.invalid(str(error)) from None
        if data is not None and media_type != "application/pdf":
            self.degradations.refuse(
                RequestField.DOCUMENTS,
                "the Responses API takes PDF and plain-text documents, not "
                f"{media_type or 'one of no media type'}",
                instead="it was left out",
            )
            return None
        if not self.profile.file_parts:
            self.degradations.refuse(
                RequestField.DOCUMENTS,
                f"{display} takes no PDF documents{pdfs_from(self.profile)}",
                instead="it was left out",
            )
            return None
        if data is None:
            return {"type": "input_file", "file_url": part.url}
        encoded = base64.b64encode(data).decode("ascii")
        return {
            "type": "input_file",
            "filename": part.title or "document.pdf",
            "file_data": f"data:application/pdf;base64,{encoded}",
        }

    def assistant_items(self, message: AssistantMessage) -> list[dict[str, Any]]:
        """The turn's blocks in order: runs of text and refusals as one `message` item (one
        per output item it came from), tool calls as `function_call` items (a custom tool's
        as `custom_tool_call`), reasoning as `reasoning` items, each directly before the item
        it preceded (`paired`)."""
        items: list[tuple[dict[str, Any] | None, str | None]] = []
        written: list[dict[str, Any]] = []
        written_id: str | None = None
        kept = self.reasoning_parts(message)
        following = self.following(message)
        for position, (block, item_id) in enumerate(
            zip(message.content, self.item_ids(message), strict=True)
        ):
            if isinstance(block, TextPart | Refusal):
                if written and item_id != written_id:
                    items.append((_output_message(written), written_id))
                    written = []
                if isinstance(block, TextPart):
                    written.append(_output_text(block.text))
                else:
                    written.append({"type": "refusal", "refusal": block.text})
                written_id = item_id
                continue
            if written:
                items.append((_output_message(written), written_id))
                written = []
            if isinstance(block, ToolCall):
                items.append((self.call_item(block), item_id))
            elif isinstance(block, Reasoning):
                # `None`: left out
                items.append((self.reasoning_item(block, kept[position]), item_id))
                after = following[position]
                if after is not None:  # the item no block stands for that followed it
                    items.append(after)
        if written:
            items.append((_output_message(written), written_id))
        server_blocks_left_out(message, self.degradations)
        self.items_left_out(message)
        return self.paired(items)

    def items_left_out(self, message: AssistantMessage) -> None:
        """Say that the turn goes without output items its response held that allama has
        no type for and that the next turn would miss (calls waiting for the caller's
        answer, generated images, compactions), as its response kept their types
        (`resume`)."""
        resume = message.provider_data.get(NAMESPACE, {}).get(RESUME_KEY)
        kinds = resume.get(LEFT_OUT_KEY) if isinstance(resume, dict) else None
        names = (
            [f"`{kind}`" for kind in kinds if isinstance(kind, str)]
            if isinstance(kinds, list)
            else []
        )
        if names:
            self.degradations.approximate(
                RequestField.MESSAGES,
                f"the turn's {', '.join(names)} output items were left out of the "
                "conversation: allama sends back only its messages, function and custom "
                "tool calls, and reasoning",
            )

    def call_item(self, call: ToolCall) -> dict[str, Any]:
        """A call as the API takes it back: a custom tool's with its free-text `input`, or a
        function's."""
        if self.other_tools.get(call.name) == "custom":
            return {
                "type": "custom_tool_call",
                "call_id": call.id,
                "name": call.name,
                "input": call.arguments,
            }
        return {
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": sent_arguments(call),
        }

    @functools.cached_property
    def other_tools(self) -> dict[str, str]:
        """The type of each tool of another type than `function` in the body option's
        `tools`, by name (flat, as this API takes tools: `{"type": "custom", "name": ...}`)."""
        tools = self.extra.get("tools")
        kinds: dict[str, str] = {}
        for tool in tools if isinstance(tools, list) else ():
            kind = tool.get("type") if isinstance(tool, dict) else None
            name = tool.get("name") if isinstance(tool, dict) else None
            if isinstance(kind, str) and kind != "function" and isinstance(name, str):
                kinds[name] = kind
        return kinds

    @functools.cached_property
    def custom_calls(self) -> frozenset[str]:
        """The ids of the conversation's calls that go back as custom tools' calls, whose
        results go back as theirs."""
        return frozenset(
            block.id
            for message in self.sent_messages
            if isinstance(message, AssistantMessage)
            for block in message.content
            if isinstance(block, ToolCall) and self.other_tools.get(block.name) == "custom"
        )

    @functools.cached_property
    def seen_calls(self) -> frozenset[str]:
        """The ids of the calls the conversation's assistant turns hold."""
        return frozenset(
            block.id
            for message in self.sent_messages
            if isinstance(message, AssistantMessage)
            for block in message.content
            if isinstance(block, ToolCall)
        )

    def unseen_call(self, call_id: str) -> bool:
        """Whether a result answers a call the messages do not hold, where the body option's
        tools include `custom` ones: a result goes as a function's or a custom tool's by its
        call, which ToolMessage does not name, so such a result may go as the wrong one."""
        return "custom" in self.other_tools.values() and call_id not in self.seen_calls

    def item_ids(self, message: AssistantMessage) -> list[str | None]:
        """The id of the output item each block came from, under `store: true` (elsewhere
        no item is named by id), when the turn keeps them (`resume`) and they still fit its
        content (a reasoning block's is its `signature`); `None` each otherwise."""
        none: list[str | None] = [None] * len(message.content)
        if not self.store:
            return none
        resume = message.provider_data.get(NAMESPACE, {}).get(RESUME_KEY)
        ids = resume.get(ITEM_IDS_KEY) if isinstance(resume, dict) else None
        if not isinstance(ids, list) or len(ids) != len(message.content):
            return none
        kept: list[str | None] = []
        for block, item_id in zip(message.content, ids, strict=True):
            if item_id is not None and not isinstance(item_id, str):
                return none
            if isinstance(block, Reasoning) and item_id != block.signature:
                return none
            kept.append(item_id)
        return kept

    def following(
        self, message: AssistantMessage
    ) -> list[tuple[dict[str, Any], str | None] | None]:
        """For each block, the item no block stands for that directly followed it, when it is
        a reasoning block and the turn keeps one (`resume`) that still fits its content: the
        server's own tool call (`SERVER_CALLS`) by reference under `store: true`, from a
        stored response; any other, `_UNSENT`. `None` each otherwise."""
        none: list[tuple[dict[str, Any], str | None] | None] = [None] * len(message.content)
        resume = message.provider_data.get(NAMESPACE, {}).get(RESUME_KEY)
        kept = resume.get(FOLLOWING_KEY) if isinstance(resume, dict) else None
        if not isinstance(kept, list) or len(kept) != len(message.content):
            return none
        items: list[tuple[dict[str, Any], str | None] | None] = []
        for block, entry in zip(message.content, kept, strict=True):
            if not isinstance(block, Reasoning) or not isinstance(entry, dict):
                items.append(None)
                continue
            kind, item_id = entry.get("type"), entry.get("id")
            if self.store and kind in SERVER_CALLS and isinstance(item_id, str) and item_id:
                items.append(({"type": "item_reference", "id": item_id}, item_id))
            else:
                items.append((_UNSENT, None))
        return items

    def reasoning_parts(self, message: AssistantMessage) -> list[dict[str, Any] | None]:
        """Each block's reasoning item lists as received (`summary`, `content`), when the turn
        keeps them (`resume`) and they still fit its content; `None` each otherwise."""
        none: list[dict[str, Any] | None] = [None] * len(message.content)
        resume = message.provider_data.get(NAMESPACE, {}).get(RESUME_KEY)
        parts = resume.get(REASONING_PARTS_KEY) if isinstance(resume, dict) else None
        if not isinstance(parts, list) or len(parts) != len(message.content):
            return none
        kept: list[dict[str, Any] | None] = []
        for block, entry in zip(message.content, parts, strict=True):
            if (
                isinstance(block, Reasoning)
                and isinstance(entry, dict)
                and isinstance(entry.get("summary"), list)
                and isinstance(entry.get("content"), list)
            ):
                kept.append(entry)
            else:
                kept.append(None)
        return kept

    def paired(self, items: list[tuple[dict[str, Any] | None, str | None]]) -> list[dict[str, Any]]:
        """The turn's items (`None` for reasoning left out, `_UNSENT` where an item stood that
        does not go back), each reasoning item kept only directly before a message, a
        function call or a server tool call's reference it can precede: the API refuses one
        without its following item, and such a reference without its reasoning item (left
        out: another provider's, a model that does not reason). A reasoning item that goes
        by its id alone (stored,
        `store: true`) can precede only an item sent with its own id: the items after it, up
        to the next reasoning, are sent with theirs."""
        sent: list[dict[str, Any]] = []
        by_id = False
        for position, (item, item_id) in enumerate(items):
            if item is None:
                by_id = False
                continue
            if item is _UNSENT:
                continue
            if item["type"] == "item_reference" and not (
                sent and sent[-1].get("type") == "reasoning"
            ):
                # A stored item named without the reasoning that preceded it is refused
                # ("provided without its required 'reasoning' item"): the search goes too.
                continue
            if item["type"] == "reasoning":
                by_id = self.store and "encrypted_content" not in item
                later = islice(items, position + 1, None)
                after, after_id = next(((i, n) for i, n in later if i is not None), (None, None))
                if (
                    after is None
                    or after.get("type") not in _FOLLOWING
                    or (by_id and after_id is None)
                ):
                    by_id = False
                    self.degradations.approximate(
                        RequestField.REASONING,
                        f"{self.profile.display_name} takes back a reasoning item only "
                        "directly before the item that followed it in its turn: a message or "
                        "a function call (named by its id, for one that goes by id with "
                        "`store: true`), or a server tool call such as a web search (by "
                        "reference, with `store: true` only); reasoning without one was left "
                        "out of the conversation",
                    )
                    continue
            elif by_id and item_id is not None:
                item = {**item, "id": item_id}
            if item["type"] == "message":
                item = _message_item(item)
            sent.append(item)
        return sent

    def reasoning_item(
        self, block: Reasoning, kept: dict[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """The block as a `reasoning` item, or `None` (left out, with a warning) when this
        endpoint cannot read it back. `kept`: the item's own lists, sent instead of a rebuilt
        summary when the block's text is still what they say (an edited text is rebuilt)."""
        if self.family.reasoning is CapabilitySupport.UNSUPPORTED:
            # OpenAI answers 400: "Reasoning input items can only be provided to a
            # reasoning or computer use model" (a conversation moved to another model).
            self.degradations.approximate(
                RequestField.REASONING,
                f"`{self.request.model}` on {self.profile.display_name} does not reason and "
                "takes back no reasoning items; reasoning was left out of the conversation",
            )
            return None
        item_id = block.signature
        readable = bool(block.encrypted_content) or self.store
        # Every endpoint of this API gives `rs_` ids: the issuer tells whose item it is
        # (the provider's name, which its warnings carry).
        own = block.goes_back_to(self.degradations.provider)
        if not own or not item_id or not item_id.startswith(REASONING_ID_PREFIX) or not readable:
            self.degradations.approximate(
                RequestField.REASONING,
                f"{self.profile.display_name} takes back only the reasoning items it gave, "
                "with their encrypted content (or by id, with `store: true`); other "
                "reasoning was left out of the conversation",
            )
            return None
        if kept is not None and reasoning_text(kept) == block.text:
            # As received: the issuer checks the item against its encrypted content.
            item = {"type": "reasoning", "id": item_id, "summary": kept["summary"]}
            if kept["content"]:
                item["content"] = kept["content"]
        else:
            summary = [{"type": "summary_text", "text": block.text}] if block.text else []
            item = {"type": "reasoning", "id": item_id, "summary": summary}
        if block.encrypted_content:
            item["encrypted_content"] = block.encrypted_content
        return item

    def tool_output(self, message: ToolMessage) -> dict[str, Any]:
        if message.is_error:
            self.degradations.refuse(
                RequestField.TOOL_RESULT_ERROR,
                f"{self.profile.display_name} has no error flag for tool results",
                instead="the result was sent as plain content",
            )
        custom = message.tool_call_id in self.custom_calls
        if not custom and self.unseen_call(message.tool_call_id):
            # Its call came another way (`previous_response_id`): whose it is, unknown.
            self.degradations.approximate(
                RequestField.MESSAGES,
                f"the result of tool call `{message.tool_call_id}`, whose call is not in the "
                "messages (as one made before a `previous_response_id`), was sent as a "
                "function's (`function_call_output`): the body option's tools include "
                "`custom` ones, whose results go as `custom_tool_call_output`, and a result "
                "does not name its tool; to send it as a custom tool's, send the turn with "
                "its call in the messages",
            )
        return {
            "type": "custom_tool_call_output" if custom else "function_call_output",
            "call_id": message.tool_call_id,
            "output": message.content,
        }

    # Tools

    def tool(self, tool: ToolDefinition) -> dict[str, Any]:
        """Chat Completions' tool, flat, with `strict` always said."""
        function = super().tool(tool)["function"]
        flat: dict[str, Any] = {"type": "function", **function}
        flat["strict"] = bool(function.get("strict"))
        return flat

    def tool_choice(self) -> str | dict[str, Any] | None:
        choice = self.request.tool_choice
        if choice is None or self.degradations.choice_without_tools(self.request, BODY_OPTION):
            return None
        if self.choice_left_out(choice):
            return None
        if choice.mode == "tool":
            # A `custom` tool the body option gives is forced as one (`ToolChoiceCustom`).
            kind = "custom" if self.other_tools.get(choice.name or "") == "custom" else "function"
            return {"type": kind, "name": choice.name}
        return choice.mode

    def parallel_tool_calls(self, tools: list[dict[str, Any]] | None) -> bool | None:
        if not tools and not self.offers_tools():
            return None  # nothing to call at all
        parallel = self.request.parallel_tool_calls
        if parallel is not None:
            if parallel:
                self.strict_in_parallel(self.strict_tools(tools))
            return parallel
        if self.strict_tools(tools):
            # Strict tool calls do not hold under parallel calls on this endpoint.
            return False
        return None

    def strict_tools(self, tools: list[dict[str, Any]] | None) -> list[str]:
        """Chat Completions' rule, over this API's flat tools."""
        if not self.profile.serial_strict_tools:
            return []
        return [tool["name"] for tool in tools or () if tool["strict"]]

    # Response format

    def response_format(self) -> dict[str, Any] | None:
        fmt = self.request.response_format
        if fmt is not None and fmt.type == "choice":
            # Not a JSON Schema: the answer is plain text, which `text.format` cannot constrain.
            self.degradations.refuse(
                RequestField.RESPONSE_FORMAT,
                f"{self.profile.display_name} has no plain-text choice output",
                instead="the answer was not constrained to the options",
            )
            return None
        return super().response_format()

    def json_schema(self, fmt: ResponseFormat) -> dict[str, Any]:
        """Chat Completions' format, flat, with `strict` always said."""
        chat = super().json_schema(fmt)
        inner = chat.get("json_schema")
        if not isinstance(inner, dict):
            return chat  # `json_object`: the family has no JSON Schema output
        flat: dict[str, Any] = {"type": "json_schema", **inner}
        flat["strict"] = bool(inner.get("strict"))
        return flat

    def text(self) -> dict[str, Any] | None:
        fmt = self.response_format()
        return None if fmt is None else {"format": fmt}

    def json_mode_note(self) -> None:
        """allama's note for JSON mode, with a warning, where the endpoint takes the mode only
        when an input message says "json" (OpenAI: "Response input messages must contain
        the word 'json'") and none does: `instructions` do not count, unless they go as an
        input item (xAI's, `no_instructions`). The warning names them only where the
        request has some."""
        if not self.profile.json_mode_word or self.input_json:
            return
        counted = self.no_instructions()
        if counted and "json" in (self.instructions or "").lower():
            return
        self.schema_instruction = JSON_OBJECT_NOTE
        unless = ""
        if self.instructions is not None and not counted:
            unless = ", and `instructions` do not count"
        place = f"first in the input as a {self.note_role()} message"
        if counted:  # (the instructions are the system message that opens the input)
            place = "to the system message that opens the input"
        self.degradations.approximate(
            RequestField.RESPONSE_FORMAT,
            f"{self.profile.display_name} takes JSON mode only when the input messages ask "
            f'for JSON{unless}; "{JSON_OBJECT_NOTE}" was added {place}',
        )

    def note_first(self) -> bool:
        """Whether allama's note for `json_object` (JSON mode's, or the schema in words) goes
        first in the input, as the instructions a developer message is: where the endpoint
        reads the input alone for "json" (`json_mode_note`), and none of it says the word."""
        return self.profile.json_mode_word and not self.input_json and not self.no_instructions()

    def note_role(self) -> str:
        return "developer" if self.profile.developer_role else "system"

    def schema_note_place(self) -> str:
        if self.note_first():
            return f"first in the input as a {self.note_role()} message"
        return super().schema_note_place()

    # Settings

    def input_given(self) -> bool:
        """Whether the body option gives input the request's messages do not: a stored
        conversation to go on from (`previous_response_id`, `conversation`), a stored
        prompt (`prompt`), or its own `input`."""
        return any(self.extra.get(key) for key in _OPTION_INPUT)

    def no_instructions(self) -> bool:
        """Whether the instructions go as a `system` input item rather than `instructions`:
        xAI answers 400 to `instructions` beside a `previous_response_id` ("Argument not
        supported: instructions and previous_response_id together")."""
        previous = self.extra.get("previous_response_id")
        return self.profile.name == _XAI and isinstance(previous, str) and bool(previous)

    def reasoning(self) -> tuple[dict[str, Any] | None, bool]:
        """`reasoning`, and whether the model reasons (so its reasoning can be kept)."""
        request = self.request
        wanted = request.reasoning_effort
        reasons = self.family.reasoning is CapabilitySupport.SUPPORTED
        if wanted is None or self.never_thinks_asked_none():
            return None, reasons
        if not self.profile.reasoning_effort or self.family.reasoning is (
            CapabilitySupport.UNSUPPORTED
        ):
            self.degradations.refuse(
                RequestField.REASONING_EFFORT,
                f"`{request.model}` on {self.profile.display_name} takes no reasoning effort",
            )
            return None, False
        effort = self.effort(str(wanted))
        if effort is None:
            return None, reasons
        # No `summary` unless the body option asks for one: OpenAI answers 400 to any from an
        # organization it has not verified, where Chat Completions takes the same effort.
        return {"effort": effort}, effort != "none"

    def max_output_tokens(self) -> int | None:
        """The output limit: the model's where the request's is above it (`output_limit`),
        the API's minimum where it is below that."""
        tokens = self.output_limit("max_output_tokens")
        if tokens is not None and tokens < MIN_OUTPUT_TOKENS:
            self.degradations.approximate(
                RequestField.MAX_OUTPUT_TOKENS,
                f"the Responses API takes at least {MIN_OUTPUT_TOKENS} output tokens; "
                f"{MIN_OUTPUT_TOKENS} were asked for instead of {tokens}",
            )
            return MIN_OUTPUT_TOKENS
        return tokens

    def output_logprobs(self, effort: str | None) -> int | None:
        """How many alternatives per token to ask for (0: the chosen token alone), or `None`
        when no log-probabilities are asked for (or they were refused; `effort`: the
        reasoning effort sent, `logprobs_refused_at`)."""
        top = self.request.logprobs
        if top is None:
            return None
        field = RequestField.LOGPROBS
        family = self.family
        if family.support(ChatCapability.LOGPROBS) is CapabilitySupport.UNSUPPORTED:
            where = f"`{self.request.model}` on {self.profile.display_name}"
            why = f"{where} reports no log-probabilities"
            if family.reasoning is CapabilitySupport.SUPPORTED:
                why += " (logprobs are not supported for reasoning models)"
            self.degradations.refuse(field, why)
            return None
        if self.stream:
            self.degradations.refuse(
                field,
                "log-probabilities are read from whole responses, not streams",
                instead="the stream was sent without asking for them",
            )
            return None
        if self.logprobs_refused_at(effort):
            return None
        return top

    def refuse_missing(self) -> None:
        """What the Responses API has no field for."""
        request = self.request
        if request.stop:
            self.degradations.refuse(RequestField.STOP, "the Responses API takes no stop sequences")
        if request.seed is not None:
            self.degradations.refuse(RequestField.SEED, "the Responses API takes no seed")

    # Everything

    def body(self) -> dict[str, Any]:
        request = self.request
        self.refuse_missing()
        instructions, items = self.conversation()
        if not items and instructions is None and not self.input_given():
            # Nothing to answer, and a round-trip paid to hear it: refused as Chat
            # Completions refuses `messages: []`. System instructions alone are sent.
            raise self.no_messages()
        self.instructions, self.input_json = instructions, _input_says_json(items)
        tools = self.tools()
        reasoning, reasons = self.reasoning()
        top_logprobs = self.output_logprobs(None if reasoning is None else reasoning["effort"])
        body: dict[str, Any] = {"model": request.model}
        text = self.text()  # before the instructions: it may add the schema to them
        note = self.schema_instruction
        json_object = text is not None and text["format"].get("type") == "json_object"
        if note is not None and json_object and self.note_first():
            items = [{"role": self.note_role(), "content": note}, *items]
        elif note is not None:
            instructions = note if instructions is None else f"{instructions}\n\n{note}"
        if instructions is not None and self.no_instructions():
            # The same text, first, as the system message it was.
            items = [{"role": "system", "content": instructions}, *items]
        elif instructions is not None:
            body["instructions"] = instructions
        body["input"] = items
        if tools is not None:
            body["tools"] = tools
        choice = self.tool_choice()
        if choice is not None:
            body["tool_choice"] = choice
        parallel = self.parallel_tool_calls(tools)
        if parallel is not None:
            body["parallel_tool_calls"] = parallel
        if text is not None:
            body["text"] = text
        if reasoning is not None:
            body["reasoning"] = reasoning
        max_tokens = self.max_output_tokens()
        if max_tokens is not None:
            body["max_output_tokens"] = max_tokens
        temperature, top_p = self.sampling(None if reasoning is None else reasoning["effort"])
        if temperature is not None:
            body["temperature"] = temperature
        if top_p is not None:
            body["top_p"] = top_p
        if top_logprobs:
            body["top_logprobs"] = top_logprobs
        body["store"] = False
        include: list[str] = []
        if reasons and not self.store:
            include.append(ENCRYPTED_REASONING)
        if top_logprobs is not None:
            include.append(LOGPROBS_INCLUDE)
        if include:
            body["include"] = include
        if self.stream:
            body["stream"] = True
        given = option_fields(
            body, self.extra, BODY_OPTION, stream=self.stream, degradations=self.degradations
        )
        self.option_tools_left_out(given)
        settings = given
        if max_tokens is not None and max_tokens < (request.max_output_tokens or 0):
            settings = {**given, "max_output_tokens": max_tokens}  # the model's output limit
        if settings:
            self.as_sent = settings_as_sent(request, settings, _SETTINGS)
        for key, value in given.items():
            ours = body.get(key)
            if key in _MERGED and isinstance(ours, dict) and isinstance(value, dict):
                body[key] = {**ours, **value}
            elif key == "include" and isinstance(ours, list) and isinstance(value, list):
                body[key] = [*ours, *(entry for entry in value if entry not in ours)]
            else:
                body[key] = value
        routed = _routed(body)
        if self.profile.require_parameters and routed:
            body["provider"] = self.strict_routing(given, routed)
        if text is not None:
            sent = body.get("text")
            theirs = sent.get("format") if isinstance(sent, dict) else sent
            if theirs != text["format"]:
                where = "text.format" if isinstance(sent, dict) else "text"
                self.option_replaced(RequestField.RESPONSE_FORMAT, where, theirs)
        if choice is not None and body.get("tool_choice") != choice:
            self.option_replaced(RequestField.TOOL_CHOICE, "tool_choice", body.get("tool_choice"))
        self.check_names(body, tools)
        return body


_FOLLOWING = frozenset({"message", "function_call", "custom_tool_call", "item_reference"})
"""The items a reasoning item goes back before (`paired`): a server tool call's by
reference (`SERVER_CALLS`)."""


def _routed(body: Mapping[str, Any]) -> list[str]:
    """`_routed_parameters` of a body (the body option's fields in it) whose response format
    is `text.format`, as the Chat Completions body's is `response_format`: OpenRouter's
    Responses API routes on the same parameters."""
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, dict) else text
    return _routed_parameters(
        {"response_format": fmt, "tools": body.get("tools"), "tool_choice": body.get("tool_choice")}
    )


def _input_says_json(items: list[dict[str, Any]]) -> bool:
    """Whether an input message's text says "json", in any case (what OpenAI looks for
    before it takes `json_object`). Other items (calls, their results) are not counted."""
    for item in items:
        if "role" not in item:
            continue
        content = item.get("content")
        parts = content if isinstance(content, list) else [{"text": content}]
        for part in parts:
            words = part.get("text", part.get("refusal")) if isinstance(part, dict) else None
            if isinstance(words, str) and "json" in words.lower():
                return True
    return False


def _output_text(text: str) -> dict[str, Any]:
    """An `output_text` part with the fields the spec requires of one (`annotations` and
    `logprobs`), empty, as the API gives them back."""
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _output_message(content: list[dict[str, Any]]) -> dict[str, Any]:
    """A run of an assistant turn's text and refusal parts, before `_message_item` gives it
    the form it is sent in."""
    return {"type": "message", "role": "assistant", "content": content}


def _message_item(message: dict[str, Any]) -> dict[str, Any]:
    """An assistant message as the spec's `InputItem` takes it: with its id, an output
    message (whose `id` and `status` are required); without, an input message whose content
    is its text and its refusal, in their order, since neither `output_text` nor `refusal`
    is an input content part (and the API refuses `input_text` from the assistant): a
    refusal goes as a refusal alone does, rather than left out beside text."""
    parts: list[dict[str, Any]] = message["content"]
    item_id = message.get("id")
    if isinstance(item_id, str):
        return {**message, "status": "completed"}
    texts = [part["text"] if part["type"] == "output_text" else part["refusal"] for part in parts]
    return {"role": "assistant", "content": "".join(texts)}


def encode_request(
    request: ChatRequest,
    profile: WireProfile,
    family: ModelFamily,
    *,
    url: str,
    headers: Mapping[str, str],
    params: Mapping[str, str] | None = None,
    stream: bool,
    degradations: Degradations,
) -> HttpRequest:
    """The HTTP request for `request`; warnings collect in `degradations`.

    Raises `UnsupportedError` (stage `BEFORE_SENDING`) for what the endpoint cannot honour
    under `UnsupportedPolicy.ERROR`; `InvalidRequestError` for input no endpoint takes (an
    image's or a document's data URL that cannot be read, text not in its charset), for a
    tool call given no result anywhere in the input, and for tools of one name (the body
    option's among them).
    """
    encoder = _Encoder(request, profile, family, degradations, stream=stream)
    body = encoder.body()
    return HttpRequest("POST", url, headers, body, params or {}, as_sent=encoder.as_sent)
