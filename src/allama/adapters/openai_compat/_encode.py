"""A `ChatRequest` to the HTTP request of `POST /chat/completions`, plus warnings.

Everything the endpoint cannot honour goes through `Degradations`: under
`UnsupportedPolicy.WARN` it is dropped (or weakened) with a warning on the field, under
`ERROR` the encoding raises before anything is sent. A schema goes through the endpoint's
dialect rewrite and `apply_strict_policy`, so its warnings land on the field that carries
it: `response_format` for a response format, `tools` for a strict tool.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from allama._degradations import (
    NOT_ON_STREAMS,
    Degradations,
    gives_tools,
    option_tools,
    stops_first,
)
from allama.adapters._answered import (
    extra_result,
    extra_words,
    unanswered_calls,
    unanswered_words,
)
from allama.adapters._http import (
    HttpRequest,
    option_fields,
    replaced_by_option,
    settings_as_sent,
)
from allama.adapters._left_out import encrypted_reasoning_left_out, server_blocks_left_out
from allama.adapters._rewrites import cached_rewrite, unreported
from allama.adapters._tool_ids import (
    ANTHROPIC_IDS,
    MISTRAL_IDS,
    claude_model,
    limited_ids,
    mistral_model,
    repeated_in_body,
    results_in_call_order,
    with_tool_ids,
)
from allama.adapters.openai_compat._capabilities import ModelFamily, StructuredLevel
from allama.adapters.openai_compat._profile import SchemaDialect, WireProfile, pdfs_from
from allama.errors import InvalidRequestError
from allama.schema._errors import SchemaError
from allama.schema._rewrite import Rewrite, SchemaNote, apply_strict_policy
from allama.schema._walk import ANNOTATIONS, MAX_DEPTH, SCHEMA_LISTS, SCHEMA_MAPS, SCHEMA_SINGLE
from allama.types import (
    AssistantMessage,
    CapabilitySupport,
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
    ToolChoice,
    ToolDefinition,
    ToolMessage,
    UserMessage,
    Warning,
    WarningKind,
)
from allama.types._data_urls import UnreadablePart, data_url, inline_media_type, part_media_type
from allama.types._openai import NO_IMAGE_TYPE, inline_image, user_part_to_openai
from allama.types._response import AUDIO_KEY, REASONING_DETAILS_KEY

if TYPE_CHECKING:
    from allama.schema._dialects._openai_strict import OpenAIProfile

__all__ = [
    "BODY_OPTION",
    "encode_request",
    "schema_name",
]

BODY_OPTION = "openai_compat"
"""Request option namespace whose JSON object is merged into the body, for fields allama
has no name for (`request.with_option_json("openai_compat", {"top_k": 40})`). Its fields
replace allama's; its own `response_format` or `tool_choice` is sent with a warning on the
field. Its `stream` is not sent where it differs from the call's, nor its `stream_options`
on a whole response (each with a warning on `options`); on a stream, its `stream_options`
are added to allama's `include_usage`."""

_NAME = re.compile(r"[^a-zA-Z0-9_-]")


@functools.lru_cache(maxsize=1024)
def schema_name(name: str | None) -> str:
    """A response-format name the wire accepts (`[a-zA-Z0-9_-]{1,64}`); a type's name is
    cleaned once, not on every call."""
    cleaned = _NAME.sub("_", name or "")[:64]
    return cleaned or "response"


class _Encoder:
    namespace = BODY_OPTION
    """The request option merged into the body."""

    def __init__(
        self,
        request: ChatRequest,
        profile: WireProfile,
        family: ModelFamily,
        degradations: Degradations,
        *,
        stream: bool,
    ) -> None:
        self.request = request
        self.profile = profile
        self.family = family
        self.degradations = degradations
        self.stream = stream
        self.schema_instruction: str | None = None
        """The schema, in words, where only `json_object` can carry it (`json_object_note`)."""
        self.as_sent: dict[str, Any] = {}
        """The request settings the body option replaced (`HttpRequest.as_sent`)."""

    @property
    def strict_profile(self) -> OpenAIProfile:
        """The strict subset sent: the model family's where it has its own, else the
        endpoint's."""
        return self.family.strict_profile or self.profile.strict_profile

    # Messages

    def messages(self) -> list[dict[str, Any]]:
        self.every_call_answered(adjacent=True)
        # Servers running an open model's chat template (vLLM, llama.cpp, Ollama, and the
        # hosts serving Llama or Qwen) write results by position, with no id.
        messages: Sequence[Message] = results_in_call_order(self.request.messages)
        if self.profile.name == "mistral" or mistral_model(self.request.model):
            # Their template refuses other providers' ids, and repeated ones.
            messages = with_tool_ids(messages, MISTRAL_IDS)
        else:
            if claude_model(self.request.model):
                # A gateway relays Anthropic's 400 for an id outside its characters (Kimi's
                # `functions.weather:0`), or one id for two calls (the stand-ins `call_0`).
                messages = with_tool_ids(messages, ANTHROPIC_IDS)
            if self.profile.max_tool_call_id is not None:
                # OpenAI refuses a longer id (xAI's and vLLM's are), and takes repeats.
                messages = with_tool_ids(messages, limited_ids(self.profile.max_tool_call_id))
        wire = [self.message(message) for message in messages]
        if self.profile.mistral_turns:
            wire = self.mistral_turns(wire)
        if not wire:
            # Answered 400 ("[] is too short - 'messages'"): nothing to answer, and a
            # round-trip paid to hear it. System instructions alone are sent.
            raise self.no_messages()
        return wire

    def every_call_answered(self, *, adjacent: bool) -> None:
        """Refuse a tool call the conversation gives no result for, where the endpoint
        answers 400 to one (`WireProfile.needs_call_results`): in the tool messages right
        after its turn (`adjacent`, Chat Completions), or anywhere after it (the Responses
        API). Named by the caller's ids and the index of the turns in `request.messages`.
        A result beyond its turn's calls (a second one for a call, or one for a call of an
        earlier turn) is refused on Chat Completions too: answered 400 ("messages with role
        'tool' must be a response to a preceding message with 'tool_calls'"). The Responses
        API's results may answer calls of a `previous_response_id`, so none is extra there."""
        if not self.profile.needs_call_results:
            return
        display = self.profile.display_name
        found = unanswered_calls(self.request.messages, adjacent=adjacent)
        if found is not None:
            raise self.invalid(unanswered_words(found, display, adjacent=adjacent))
        extra = extra_result(self.request.messages) if adjacent else None
        if extra is not None:
            raise self.invalid(extra_words(extra, display))

    def no_messages(self) -> InvalidRequestError:
        """The error for a request with no message left to send (not raised here)."""
        return (
            InvalidRequestError(
                f"{self.profile.display_name} needs at least one message, and the request "
                "has none left to send"
            )
            .mark_authored()
            .with_provider(self.profile.name)
        )

    def mistral_turns(self, wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The conversation as Mistral's check takes it, rather than answered 400: an
        assistant turn with nothing to send (one that only reasoned) left out, a system turn
        after an assistant turn or a tool result moved to the system instructions before the
        conversation, an assistant turn put between a tool result and a user turn, and a
        last assistant turn (prefill) marked `prefix`."""
        display = self.profile.display_name
        turns: list[dict[str, Any]] = []
        moved: list[str] = []
        for turn in wire:
            role = turn["role"]
            if role == "assistant" and not turn.get("content") and not turn.get("tool_calls"):
                self.degradations.approximate(
                    RequestField.MESSAGES,
                    f"{display} refuses an assistant turn with neither text nor tool calls; "
                    "one (that only reasoned, or said nothing) was left out",
                )
                continue
            if role == "system" and turns and turns[-1]["role"] in ("assistant", "tool"):
                # "Unexpected role 'system' after role 'assistant'" (or 'tool'); a bridging
                # assistant turn would only move the refusal one turn up.
                moved.append(turn["content"])
                continue
            if turns and turns[-1]["role"] == "tool" and role not in ("tool", "assistant"):
                self.degradations.approximate(
                    RequestField.MESSAGES,
                    f"{display} refuses a {role} turn straight after a tool result; an "
                    f'assistant turn saying "{AFTER_TOOL_RESULTS}" was put between them',
                )
                turns.append({"role": "assistant", "content": AFTER_TOOL_RESULTS})
            turns.append(turn)
        if moved:
            self.degradations.approximate(
                RequestField.SYSTEM,
                f"{display} takes system instructions only before the conversation or after a "
                "user turn; those given after an assistant turn or a tool result were moved "
                "before the conversation",
            )
            lead = 0
            while lead < len(turns) and turns[lead]["role"] == "system":
                lead += 1
            if lead:  # merged into the last of the opening ones, keeping their order
                last = turns[lead - 1]
                turns[lead - 1] = {**last, "content": "\n\n".join([last["content"], *moved])}
            else:
                turns.insert(0, {"role": "system", "content": "\n\n".join(moved)})
        if turns and turns[-1]["role"] == "assistant":
            turns[-1] = {**turns[-1], "prefix": True}
        return turns

    def instructions_in_first_turn(self, wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`wire` for a model that answers 400 to a `system` or `developer` message (o1-mini,
        o1-preview): their text (allama's own instructions among it, the JSON-mode note or
        a decision's options) opens the first user turn, in their order, each apart by a
        blank line, rather than the request refused or the instructions lost. An empty
        one says nothing, and goes without a word."""
        words = [
            turn["content"]
            for turn in wire
            if turn["role"] in ("system", "developer") and turn["content"]
        ]
        turns = [turn for turn in wire if turn["role"] not in ("system", "developer")]
        if not words:
            if not turns:  # empty system messages alone: nothing to answer
                raise self.no_messages()
            return turns
        self.degradations.approximate(
            RequestField.SYSTEM,
            f"`{self.request.model}` on {self.profile.display_name} takes no system or "
            "developer messages; the system instructions were put at the start of the first "
            "user turn",
        )
        text = "\n\n".join(words)
        at = next((i for i, turn in enumerate(turns) if turn["role"] == "user"), None)
        if at is None:
            return [{"role": "user", "content": text}, *turns]
        content = turns[at]["content"]
        if isinstance(content, list):
            content = [{"type": "text", "text": text}, *content]
        else:
            content = f"{text}\n\n{content}" if content else text
        turns[at] = {**turns[at], "content": content}
        return turns

    def message(self, message: Message) -> dict[str, Any]:
        if isinstance(message, SystemMessage):
            return {"role": "system", "content": message.content}
        if isinstance(message, DeveloperMessage):
            role = "developer" if self.profile.developer_role else "system"
            return {"role": role, "content": message.content}
        if isinstance(message, UserMessage):
            return self.user(message)
        if isinstance(message, AssistantMessage):
            return self.assistant(message)
        return self.tool_result(message)

    def user(self, message: UserMessage) -> dict[str, Any]:
        parts = message.content
        if len(parts) == 1 and isinstance(parts[0], TextPart):
            return {"role": "user", "content": parts[0].text}
        content: list[Any] = []
        for part in parts:
            if isinstance(part, TextPart):
                content.append({"type": "text", "text": part.text})
            elif isinstance(part, ImagePart):
                if self.takes_images() and (url := self.image_url(part)) is not None:
                    content.append({"type": "image_url", "image_url": {"url": url}})
            elif (document := self.document(part)) is not None:
                content.append(document)
        return {"role": "user", "content": content or ""}

    def takes_images(self) -> bool:
        """Whether an image goes out; one the model does not read is left out, with a
        warning (refused under the error policy), rather than sent to be answered 400."""
        if self.family.images is not CapabilitySupport.UNSUPPORTED:
            return True
        self.degradations.refuse(
            RequestField.IMAGES,
            f"`{self.request.model}` on {self.profile.display_name} takes no images",
            instead="the image was left out",
        )
        return False

    def image_url(self, part: ImagePart) -> str | None:
        """The image's URL, or its bytes as a data URL, checked as the other encoders check
        one and of standard base64 alone (not the whitespace, `%3D` or URL-safe `-_` a data
        URL may hold): OpenAI answers 400 "Invalid base64 image_url" to those. A type the
        endpoint does not read in a data URL goes as `data:;base64,` (`image_data_types`,
        Ollama's); `None` (with a warning) for an image by URL where the endpoint takes none
        (`image_urls`)."""
        try:
            found = inline_image(part)
        except UnreadablePart as error:
            raise self.invalid(str(error)) from None
        if found is None:
            if self.profile.image_urls:
                return part.url or ""
            self.degradations.refuse(
                RequestField.IMAGES,
                f"{self.profile.display_name} takes images only as their bytes, not by URL",
                instead="the image was left out",
            )
            return None
        if not found.raw:
            raise self.invalid(
                f"the image holds no data, which {self.profile.display_name} cannot read"
            )
        media_type = found.media_type
        named = self.profile.image_data_types
        if named is not None:
            media_type = media_type if media_type in named else ""
        elif not media_type:
            raise self.invalid(NO_IMAGE_TYPE)
        return f"data:{media_type};base64,{found.text}"

    def invalid(self, why: str) -> InvalidRequestError:
        """The error for input no endpoint can read, refused before sending (not raised
        here)."""
        return InvalidRequestError(why).mark_authored().with_provider(self.profile.name)

    def document(self, part: DocumentPart) -> dict[str, Any] | None:
        display = self.profile.display_name
        # A PDF's bytes, given or in a data URL (an http URL is refused as a URL, below).
        inline = None if part.url is None else data_url(part.url)
        media_type = (
            part_media_type(part.media_type)
            if inline is None
            else inline_media_type(inline, part.media_type)
        )[0]
        is_pdf = media_type == "application/pdf"
        if is_pdf and (part.data is not None or inline is not None) and not self.profile.file_parts:
            self.degradations.refuse(
                RequestField.DOCUMENTS,
                f"{display} takes no PDF documents{pdfs_from(self.profile)}",
                instead="it was left out",
            )
            return None
        try:
            return user_part_to_openai(part)
        except UnreadablePart as error:  # bad input, as the other encoders refuse it
            raise self.invalid(str(error)) from None
        except ValueError as error:
            self.degradations.refuse(RequestField.DOCUMENTS, str(error), instead="it was left out")
            return None

    def assistant(self, message: AssistantMessage) -> dict[str, Any]:
        """The turn as the wire takes it back. Its refusal goes in `content` where the turn
        has no text, as every endpoint reads it; beside text, in the message's `refusal`
        field where the API has one (`_REFUSAL_FIELD`), elsewhere in `content` with the
        text, in their order, rather than left out."""
        texts = [block.text for block in message.content if isinstance(block, TextPart)]
        refusals = [block.text for block in message.content if isinstance(block, Refusal)]
        refusal_apart = bool(texts and refusals) and self.profile.name in _REFUSAL_FIELD
        if refusals and not refusal_apart:
            texts = [b.text for b in message.content if isinstance(b, TextPart | Refusal)]
        calls = [self.tool_call(block) for block in message.content if isinstance(block, ToolCall)]
        audio = self.audio_id(message)
        wire: dict[str, Any] = {"role": "assistant"}
        if texts or not (calls or audio):
            wire["content"] = "".join(texts)
        if refusal_apart:
            wire["refusal"] = "".join(refusals)
        if audio is not None:
            wire["audio"] = {"id": audio}
        field = self.profile.reasoning_back
        if field is not None:
            # The endpoint checks that a tool-calling turn has its reasoning on the next
            # request, even none (a turn from elsewhere, or one that reasoned nothing).
            reasoning = "".join(
                block.text for block in message.content if isinstance(block, Reasoning)
            )
            if reasoning or calls:
                wire[field] = reasoning
        if calls:
            wire["tool_calls"] = calls
        details = self.reasoning_details(message)
        if details is not None:
            wire["reasoning_details"] = details
        elif field is None:
            self.reasoning_left_out(message)
        else:
            encrypted_reasoning_left_out(message, self.degradations, self.profile.display_name)
        server_blocks_left_out(message, self.degradations)
        return wire

    def reasoning_left_out(self, message: AssistantMessage) -> None:
        """Say that the turn's signed or encrypted reasoning (a signed Anthropic thinking
        block, OpenAI's encrypted reasoning: another API's, which it meant to be sent back)
        was left out, where the endpoint takes none back, as the other APIs' encoders say of
        what they leave out. Plain reasoning text, which Chat Completions endpoints give and
        take none of back (Groq's, xAI's, vLLM's), goes without a word: it would be said on
        every turn of their tool loops."""
        if any(
            isinstance(block, Reasoning) and (block.signature or block.encrypted_content)
            for block in message.content
        ):
            self.degradations.approximate(
                RequestField.REASONING,
                f"{self.profile.display_name} takes back no reasoning through Chat Completions; "
                "reasoning was left out of the conversation",
            )

    def reasoning_details(self, message: AssistantMessage) -> list[Any] | None:
        """OpenRouter's `reasoning_details` of the turn, to go back unmodified (as OpenRouter
        asks, to continue a tool-calling turn with reasoning): those kept in this provider's
        own namespace alone, the one its responses are decoded into, so that they go back
        only to the provider that gave them, never to another endpoint."""
        namespace = self.degradations.provider or "openai"
        details = message.provider_data.get(namespace, {}).get(REASONING_DETAILS_KEY)
        return details if isinstance(details, list) and details else None

    def audio_id(self, message: AssistantMessage) -> str | None:
        """The id of the turn's audio answer (`AUDIO_KEY`), by which OpenAI takes an audio
        turn back (the audio stays on its server, until its `expires_at`): kept in this
        provider's own namespace alone, as `reasoning_details` are, so that it goes back
        only to the provider that gave it, never to another endpoint."""
        namespace = self.degradations.provider or "openai"
        audio = message.provider_data.get(namespace, {}).get(AUDIO_KEY)
        found = audio.get("id") if isinstance(audio, dict) else None
        return found if isinstance(found, str) and found else None

    def tool_call(self, call: ToolCall) -> dict[str, Any]:
        """A call as the wire takes it back: a function's, or a call of a tool of another
        type the body option gives (a `custom` tool), its arguments the free-text `input`."""
        kind = self.other_tools.get(call.name)
        if kind is not None:
            return {"id": call.id, "type": kind, kind: {"name": call.name, "input": call.arguments}}
        return {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": sent_arguments(call)},
        }

    @functools.cached_property
    def other_tools(self) -> dict[str, str]:
        """The type of each tool of another type than `function` in the body option's
        `tools` (`{"type": "custom", "custom": {"name": ...}}`), by name."""
        extra = self.request.option_json(BODY_OPTION)
        tools = extra.get("tools") if isinstance(extra, dict) else None
        kinds: dict[str, str] = {}
        for tool in tools if isinstance(tools, list) else ():
            kind = tool.get("type") if isinstance(tool, dict) else None
            if isinstance(tool, dict) and isinstance(kind, str) and kind != "function":
                spec = tool.get(kind)
                name = spec.get("name") if isinstance(spec, dict) else None
                if isinstance(name, str):
                    kinds[name] = kind
        return kinds

    def tool_result(self, message: ToolMessage) -> dict[str, Any]:
        if message.is_error:
            self.degradations.refuse(
                RequestField.TOOL_RESULT_ERROR,
                f"{self.profile.display_name} has no error flag for tool results",
                instead="the result was sent as plain content",
            )
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}

    # Tools

    @property
    def no_function_calling(self) -> bool:
        """Whether the model takes no function tools (its family's `tools` answer): o1-mini
        and o1-preview take no tools, deep research only its built-in ones."""
        return self.family.tools is CapabilitySupport.UNSUPPORTED

    def refuse_function_tools(self, instead: str) -> None:
        self.degradations.refuse(
            RequestField.TOOLS,
            f"`{self.request.model}` on {self.profile.display_name} has no function calling",
            instead=instead,
        )

    @functools.cached_property
    def option_tools_kept(self) -> Any:
        """The body option's `tools` as sent: where the model has no function calling,
        without their function and custom tools (the model's built-in ones, deep research's
        web search or MCP servers, are its own, and go as given)."""
        extra = self.request.option_json(self.namespace)
        tools = extra.get("tools") if isinstance(extra, dict) else None
        if not self.no_function_calling or not isinstance(tools, list):
            return tools
        return [tool for tool in tools if _tool_type(tool) not in _FUNCTION_TYPES]

    def offers_tools(self) -> bool:
        """Whether the body gives tools to call (`gives_tools`): where the model has no
        function calling, only the built-in ones of the body option."""
        if self.no_function_calling:
            return bool(self.option_tools_kept)
        return gives_tools(self.request, self.namespace)

    def option_tools_left_out(self, given: dict[str, Any]) -> None:
        """The body option's fields (`given`) without the function and custom tools the
        model does not take (`option_tools_kept`), with a refusal on `tools`: sent, they
        would be answered 400 with the rest of the request."""
        tools = given.get("tools")
        if not self.no_function_calling or not isinstance(tools, list):
            return
        kinds = [kind for kind in _FUNCTION_TYPES if any(_tool_type(t) == kind for t in tools)]
        if not kinds:
            return
        self.refuse_function_tools(
            f"the {' and '.join(kinds)} tools of the body option `{self.namespace}` were left out"
        )
        if self.option_tools_kept:
            given["tools"] = self.option_tools_kept
        else:
            del given["tools"]

    def choice_left_out(self, choice: ToolChoice) -> bool:
        """Whether a tool choice goes unsent where the model has no function calling: one
        that names a tool (a function or custom one, which were left out), or that chooses
        among no tools the model takes. The tools' refusal says so, unless the named tool
        was not among them."""
        if not self.no_function_calling:
            return False
        if choice.mode != "tool" and self.option_tools_kept:
            return False  # it chooses among the model's built-in tools
        if choice.mode == "tool" and choice.name not in self.function_names():
            self.degradations.refuse(
                RequestField.TOOL_CHOICE,
                f"`{self.request.model}` on {self.profile.display_name} has no function calling",
                instead=f"`tool_choice` naming `{choice.name}` was not sent",
            )
        return True

    def function_names(self) -> set[str]:
        """The names of the request's tools and of the body option's function and custom
        ones."""
        extra = self.request.option_json(self.namespace)
        given = extra.get("tools") if isinstance(extra, dict) else None
        names = {tool.name for tool in self.request.tools}
        for tool in given if isinstance(given, list) else ():
            kind = _tool_type(tool)
            if isinstance(tool, dict) and kind in _FUNCTION_TYPES:
                spec = tool.get(kind)
                name = spec.get("name") if isinstance(spec, dict) else tool.get("name")
                if isinstance(name, str):
                    names.add(name)
        return names

    def tools(self) -> list[dict[str, Any]] | None:
        if not self.request.tools:
            return None
        if self.no_function_calling:
            self.refuse_function_tools("the tools were left out")
            return None
        choice = self.request.tool_choice
        if choice is not None and choice.mode == "none" and not self.profile.tool_choice:
            # The one way to keep `none` where `tool_choice` is ignored: offered, the tools
            # could be called.
            return None
        return [self.tool(tool) for tool in self.request.tools]

    def tool(self, tool: ToolDefinition) -> dict[str, Any]:
        parameters: dict[str, Any] = tool.parameters
        strict = tool.strict
        if strict:
            parameters = _of_no_arguments(parameters)
            subject = f"tool `{tool.name}`"
            if self.profile.tool_dialect is SchemaDialect.NOT_HONOURED:
                self.degradations.refuse(
                    RequestField.TOOLS,
                    f"{self.profile.display_name} does not enforce `strict` on tools",
                    instead=f"{subject} was sent without it",
                )
                strict = None
            else:
                parameters, strict = self.strict_schema(
                    self.profile.tool_dialect, parameters, RequestField.TOOLS, subject
                )
                if strict and not self.family.strict_tools:
                    self.degradations.approximate(
                        RequestField.TOOLS,
                        f"{self.profile.display_name} does not say that it enforces `strict` "
                        f"on tools for `{self.request.model}`; {subject} was sent with it, "
                        "and its arguments follow the schema as far as the model does",
                    )
        parameters = self.without_schema_ids(parameters, RequestField.TOOLS, f"tool `{tool.name}`")
        parameters = _object_typed(self.in_taken_shapes(parameters, f"tool `{tool.name}`"))
        parameters = _with_properties(
            parameters, open_beside=self.profile.tool_dialect is SchemaDialect.LLAMA_CPP
        )
        function = _present(
            name=tool.name, description=tool.description, parameters=parameters, strict=strict
        )
        return {"type": "function", "function": function}

    def without_schema_ids(
        self, schema: dict[str, Any], field: RequestField, subject: str
    ) -> dict[str, Any]:
        """`schema` as sent, without the `$schema` and `$id` at its root on Mistral, which
        answers 400 to them ("failed to compile JSON schema"; litellm strips them alike),
        with a warning. They say nothing of what the schema accepts: a strict rewrite drops
        them already, but a schema that goes as given (not strict, or one the strict subset
        cannot hold) keeps them, as an MCP server's or zod's schema has them."""
        found = [key for key in _SCHEMA_IDS if key in schema]
        if self.profile.name != "mistral" or not found:
            return schema
        keys = " and ".join(f"`{key}`" for key in found)
        self.degradations.approximate(
            field,
            f"{self.profile.display_name} cannot compile a schema whose root holds `$schema` "
            f"or `$id`; {subject} was sent without its {keys}",
        )
        return {key: value for key, value in schema.items() if key not in _SCHEMA_IDS}

    def in_taken_shapes(self, schema: dict[str, Any], subject: str) -> dict[str, Any]:
        """`schema` as xAI takes it, which answers 400 to a boolean subschema and to `items`
        as an array: `true` as `{}` and a tuple as `prefixItems`, as the grammar dialects
        send them, and `false` as `{"not": {}}`, each accepting the same values. Its strict
        rewrite has neither; a schema that goes as given (not strict, or one its strict
        subset cannot hold) may. Elsewhere `schema` goes as it is."""
        if self.profile.strict_profile != "xai":
            return schema
        try:
            rewrite = cached_rewrite(schema, _TAKEN_SHAPES, lambda: Rewrite(_taken_shapes(schema)))
        except SchemaError as error:
            raise self.unreadable(subject, error) from error
        return rewrite.schema

    def strict_schema(
        self, dialect: SchemaDialect, schema: dict[str, Any], field: RequestField, subject: str
    ) -> tuple[dict[str, Any], bool]:
        """`schema` rewritten in `dialect` for `strict` (a tool's or a response format's),
        and whether it goes strict under the policy; where it does not, the caller's schema
        goes as given, unless the dialect's rewrite is sent anyway (`_rewrite_sent_anyway`)."""
        rewrite = self.rewrite(dialect, schema, subject)
        anyway = _rewrite_sent_anyway(dialect)
        strict = apply_strict_policy(
            rewrite,
            field=field,
            subject=subject,
            degradations=self.degradations,
            rewrite_sent_anyway=anyway,
        )
        return (rewrite.schema if strict or anyway else schema), strict

    def tool_choice(self) -> str | dict[str, Any] | None:
        choice = self.request.tool_choice
        if choice is None or self.degradations.choice_without_tools(self.request, BODY_OPTION):
            return None
        if self.choice_left_out(choice):
            return None
        display = self.profile.display_name
        if not self.profile.tool_choice:
            # `none`: the request's tools were left out, not the body option's own.
            kept = choice.mode == "none" and not option_tools(self.request, BODY_OPTION)
            if choice.mode != "auto" and not kept:
                self.degradations.refuse(
                    RequestField.TOOL_CHOICE,
                    f"{display} ignores `tool_choice`",
                    instead="the model chooses whether to call a tool",
                )
            return None
        if choice.mode in ("required", "tool") and self.thinks():
            self.degradations.refuse(
                RequestField.TOOL_CHOICE,
                f"`{self.request.model}` on {display} cannot be forced to call a tool"
                f"{self.unforced_why()}",
                instead="`auto` was sent instead",
            )
            return "auto"
        if choice.mode == "required":
            return self.profile.required_tool_choice
        if choice.mode == "tool":
            if not self.profile.named_tool_choice:
                self.degradations.refuse(
                    RequestField.TOOL_CHOICE,
                    f"{display} cannot force a named tool",
                    instead=f"`{self.profile.required_tool_choice}` was sent instead",
                )
                return self.profile.required_tool_choice
            if self.other_tools.get(choice.name or "") == "custom":
                # A `custom` tool the body option gives is forced as one.
                return {"type": "custom", "custom": {"name": choice.name}}
            return {"type": "function", "function": {"name": choice.name}}
        return choice.mode

    def parallel_tool_calls(self, tools: list[dict[str, Any]] | None) -> bool | None:
        parallel = self.request.parallel_tool_calls
        if not tools and not self.offers_tools():
            return None  # "only allowed when 'tools' are specified": nothing to call at all
        if parallel is not None:
            if not self.profile.parallel_tool_calls:
                self.degradations.refuse(
                    RequestField.PARALLEL_TOOL_CALLS,
                    f"{self.profile.display_name} ignores `parallel_tool_calls`",
                )
                return None
            if self.family.parallel_tools is CapabilitySupport.UNSUPPORTED:
                self.degradations.refuse(
                    RequestField.PARALLEL_TOOL_CALLS,
                    f"`{self.request.model}` on {self.profile.display_name} takes no "
                    "`parallel_tool_calls`",
                )
                self.strict_unserialised(self.strict_tools(tools))
                return None
            if parallel:
                self.strict_in_parallel(self.strict_tools(tools))
            return parallel
        strict = self.strict_tools(tools)
        if strict and self.family.parallel_tools is not CapabilitySupport.UNSUPPORTED:
            # Strict tool calls do not hold under parallel calls on this endpoint; a model
            # that takes no `parallel_tool_calls` (OpenAI's o-series answer 400 to it, even
            # `false`) gets none.
            return False
        self.strict_unserialised(strict)
        return None

    def strict_tools(self, tools: list[dict[str, Any]] | None) -> list[str]:
        """The names of the tools sent `strict` where the endpoint enforces that only
        without parallel calls (`serial_strict_tools`)."""
        if not self.profile.serial_strict_tools:
            return []
        return [tool["function"]["name"] for tool in tools or () if tool["function"].get("strict")]

    def strict_in_parallel(self, names: list[str]) -> None:
        """Say that the strict tools `names` are not enforced under the caller's own
        `parallel_tool_calls: true`, which is sent as asked: OpenAI documents Structured
        Outputs as not compatible with parallel calls (a parallel call may not match the
        schema). On `tools`, the field an extraction's enforcement reads."""
        for name in names:
            self.degradations.approximate(
                RequestField.TOOLS,
                f"{self.profile.display_name} does not enforce `strict` on tools while "
                f"parallel tool calls are on: tool `{name}` was sent with it beside "
                "`parallel_tool_calls: true`, as asked, and its arguments follow the schema as "
                "far as the model does (leave `parallel_tool_calls` unset, or false, to have "
                "it enforced)",
            )

    def strict_unserialised(self, names: list[str]) -> None:
        """Say that the strict tools `names` are not enforced where the api-version takes
        no `parallel_tool_calls` (`parallel_tool_calls_from`): parallel calls stay on, so
        `false`, which keeps `strict` enforced on a later version, cannot go. On `tools`,
        the field an extraction's enforcement reads, as `strict_in_parallel` says it."""
        version = self.profile.parallel_tool_calls_from
        if version is None:
            return
        for name in names:
            self.degradations.approximate(
                RequestField.TOOLS,
                f"{self.profile.display_name} does not enforce `strict` on tools while "
                "parallel tool calls are on, and takes no `parallel_tool_calls` to turn them "
                f"off: tool `{name}` was sent with it, and its arguments follow the schema as "
                f"far as the model does (from api-version {version} on, "
                "`parallel_tool_calls: false` goes beside it to have it enforced)",
            )

    # Response format

    def unreadable(self, subject: str, error: SchemaError) -> InvalidRequestError:
        return (
            InvalidRequestError(f"{subject} has a schema allama cannot read: {error}")
            .mark_authored()
            .with_provider(self.profile.name)
        )

    def rewrite(self, dialect: SchemaDialect, schema: dict[str, Any], subject: str) -> Rewrite:
        """The rewrite of `schema`, made once per dialect and endpoint."""
        profile = self.profile
        try:
            return cached_rewrite(
                schema,
                (dialect, self.strict_profile, profile.display_name),
                lambda: self._rewrite(dialect, schema),
            )
        except SchemaError as error:
            raise self.unreadable(subject, error) from error

    def _rewrite(self, dialect: SchemaDialect, schema: dict[str, Any]) -> Rewrite:
        # A dialect is loaded when a schema is first rewritten in it (rewrites are cached),
        # so that a provider loads only the dialect it speaks, and only once it sends a schema.
        if dialect is SchemaDialect.OPENAI_STRICT:
            from allama.schema._dialects._openai_strict import openai_strict

            return openai_strict(schema, profile=self.strict_profile)
        if dialect is SchemaDialect.LLAMA_CPP:
            from allama.schema._dialects._llama_cpp import llama_cpp

            # Measured against the real server: its notes are the whole story there.
            rewrite = llama_cpp(schema)
            if self.profile.converter_measured:
                return rewrite
            return unreported(rewrite, f"{self.profile.display_name}'s llama.cpp grammar converter")
        if dialect is SchemaDialect.GRAMMAR:
            from allama.schema._dialects._grammar import grammar_engine

            # The server picks its grammar backend and does not say which keywords it
            # enforces.
            return unreported(
                grammar_engine(schema), f"{self.profile.display_name}'s grammar backend"
            )
        if dialect is SchemaDialect.FIREWORKS:
            from allama.schema._dialects._grammar import fireworks

            return fireworks(schema)
        return self._unchecked(schema)

    def _unchecked(self, schema: dict[str, Any]) -> Rewrite:
        """An endpoint that publishes no subset of its own: OpenAI's strict subset is assumed.

        Its `strict` flag is OpenAI's, and the upstreams that enforce it (OpenRouter's OpenAI
        and Azure ones, Azure AI Foundry's OpenAI deployments) reject a schema outside
        OpenAI's strict subset: an object not closed, an optional property not required. The
        schema goes as OpenAI's strict rewrite (optional properties nullable, their stand-in
        `null`s removed before validation), approximate, as the endpoint does not report
        which keywords it enforces; one the subset cannot hold (a map, which needs an open
        object) goes as given, without `strict` (not enforced).
        """
        from allama.schema._dialects._openai_strict import openai_strict
        from allama.schema._dialects._passthrough import passthrough

        sent = passthrough(schema)
        strict = openai_strict(schema, profile=self.strict_profile)
        if strict.strict_representable:
            return Rewrite(strict.schema, (*strict.notes, *sent.notes), strict.dropped)
        display = self.profile.display_name
        refused = tuple(
            SchemaNote(
                WarningKind.UNSUPPORTED,
                note.pointer,
                f"{note.message}; {display} publishes no strict subset of its own, so "
                "OpenAI's is assumed",
            )
            for note in strict.notes
            if note.kind is WarningKind.UNSUPPORTED
        )
        return Rewrite(sent.schema, refused)

    def response_format(self) -> dict[str, Any] | None:
        fmt = self.request.response_format
        if fmt is None:
            return None
        field = RequestField.RESPONSE_FORMAT
        display = self.profile.display_name
        if fmt.type != "text" and self.stream and not self.profile.json_mode_streams:
            self.degradations.refuse(
                field, f"{display} has no JSON mode on streamed responses", code=NOT_ON_STREAMS
            )
            self._in_words(fmt)
            return None
        if fmt.type == "json_schema" and self.stream and not self.profile.schema_streams:
            self.degradations.refuse(
                field,
                f"{display} has no JSON Schema output on streamed responses",
                code=NOT_ON_STREAMS,
            )
            self._in_words(fmt)
            return None
        if fmt.type == "text":
            return {"type": "text"}
        if fmt.type == "json":
            self.json_mode_unapplied()
            self.json_mode_note()
            return {"type": "json_object"}
        if fmt.type == "choice":
            # A grammar (llama.cpp's own field), or nothing: Chat Completions has no such
            # response format, and a JSON enum would change the answer's form.
            if not self.profile.choice_grammar:
                self.degradations.refuse(
                    field,
                    f"{display} has no plain-text choice output; the answer was not "
                    "constrained to the options (allama.decide sends them as a JSON Schema "
                    "enum instead)",
                )
            return None
        return self.json_schema(fmt)

    def json_mode_unapplied(self) -> None:
        """Say that JSON mode is sent and not applied where the endpoint or the model's server
        applies no response format (Ollama's cloud), as a strict schema is said not enforced
        there: refused, under the policy."""
        if self.profile.applies_format and self.family.applies_format:
            return
        self.degradations.refuse(
            RequestField.RESPONSE_FORMAT,
            f"{self.profile.display_name} does not apply JSON mode for `{self.request.model}`",
            instead="`json_object` was sent, and the output is not constrained to JSON",
        )

    def json_mode_note(self) -> None:
        """allama's note for JSON mode, with a warning, where the endpoint takes the mode only
        when the messages say "json" (OpenAI's) and none does."""
        if not self.profile.json_mode_word or _says_json(self.request.messages):
            return
        self.schema_instruction = JSON_OBJECT_NOTE
        self.degradations.approximate(
            RequestField.RESPONSE_FORMAT,
            f"{self.profile.display_name} takes JSON mode only when the messages ask for JSON; "
            f'"{JSON_OBJECT_NOTE}" was added to the system instructions',
        )

    def schema_note_place(self) -> str:
        """Where the schema in words goes for a family with JSON mode alone, as its
        refusal says."""
        return "into the instructions"

    def option_replaced(self, field: RequestField, where: str, theirs: Any) -> None:
        """Say that the body option's `where` went in place of what `field` made allama send
        (the caller's wins): an extraction's record then shows its schema not sent, or its
        tool not forced."""
        self.degradations.warn(
            replaced_by_option(
                self.request, field, f"`{where}` of the body option `{self.namespace}`", theirs
            )
        )

    def _in_words(self, fmt: ResponseFormat) -> None:
        """A schema no field of a stream can carry is written into the instructions, as for
        `json_object` alone: nothing else tells the model its fields (said in a warning of
        its own, after the refusal, which an auto extraction falls back on instead)."""
        if fmt.type != "json_schema":
            return
        from allama.schema._dialects._passthrough import json_object_fallback

        try:
            rewrite = json_object_fallback(fmt.json_schema or {})
        except SchemaError as error:
            raise self.unreadable(
                f"the response format `{schema_name(fmt.name)}`", error
            ) from error
        self.schema_instruction = json_object_note(rewrite.schema)
        self.degradations.approximate(
            RequestField.RESPONSE_FORMAT,
            "the schema was written into the instructions, where nothing enforces it",
        )

    def grammar(self) -> str | None:
        """The options of a `choice` as a GBNF grammar, for an endpoint that takes one."""
        fmt = self.request.response_format
        if fmt is None or fmt.options is None or not self.profile.choice_grammar:
            return None
        if any("\x00" in option for option in fmt.options):
            # llama.cpp's grammars cannot match code point 0: the server fails the call.
            self.degradations.refuse(
                RequestField.RESPONSE_FORMAT,
                f"{self.profile.display_name} cannot match the character U+0000 in a grammar, "
                "and an option holds it; the answer was not constrained to the options",
            )
            return None
        return choice_grammar(fmt.options)

    def logprobs(self, effort: str | None) -> int | None:
        """How many alternatives to ask for per token, or `None` (not asked, or refused;
        `effort`: the reasoning effort sent, `logprobs_refused_at`)."""
        top = self.request.logprobs
        if top is None:
            return None
        where = f"`{self.request.model}` on {self.profile.display_name}"
        if self.stream:
            self.degradations.refuse(
                RequestField.LOGPROBS,
                "log-probabilities are read from whole responses, not streams",
                instead="the stream was sent without asking for them",
            )
            return None
        if self.family.logprobs is CapabilitySupport.UNSUPPORTED:
            self.degradations.refuse(RequestField.LOGPROBS, f"{where} reports no log-probabilities")
            return None
        if self.logprobs_refused_at(effort):
            return None
        most = self.profile.max_top_logprobs
        if most is not None and top > most:
            self.degradations.approximate(
                RequestField.LOGPROBS,
                f"{self.profile.display_name} takes at most {most} alternatives per token "
                f"(`top_logprobs`); {most} were asked for, not {top}",
            )
            return most
        return top

    def logprobs_refused_at(self, effort: str | None) -> bool:
        """Whether the model refuses log-probabilities at the reasoning `effort` sent (said,
        under the policy): one that takes sampling only at effort `none` (GPT-5.1 and
        later, or a deployment taken for a reasoning model) takes them on the same terms,
        and OpenAI answers 400 at another."""
        if self.takes_sampling() != "without_reasoning" or effort in (None, "none"):
            return False
        self.degradations.refuse(
            RequestField.LOGPROBS,
            f"`{self.request.model}` on {self.profile.display_name} reports no "
            f"log-probabilities at reasoning effort `{effort}`{self.guessed_why()}",
        )
        return True

    def json_schema(self, fmt: ResponseFormat) -> dict[str, Any]:
        field = RequestField.RESPONSE_FORMAT
        display = self.profile.display_name
        model = self.request.model
        schema: dict[str, Any] = fmt.json_schema or {}
        name = schema_name(fmt.name)
        subject = f"the response format `{name}`"
        level = self.family.structured
        if level is StructuredLevel.JSON_OBJECT:
            # Only `json_object` exists: the fallback dialect reads the schema (a broken one
            # fails here); the refusal says what is lost, on the field, under the policy.
            from allama.schema._dialects._passthrough import json_object_fallback

            try:
                rewrite = json_object_fallback(schema)
            except SchemaError as error:
                raise self.unreadable(subject, error) from error
            for note in rewrite.notes:
                if note.kind is WarningKind.APPROXIMATED:
                    self.degradations.approximate(
                        field, f"{subject} was approximated: {note.message}"
                    )
            self.degradations.refuse(
                field,
                f"`{model}` on {display} has no JSON Schema output",
                instead=f"{subject} was sent as `json_object`, which only constrains the output "
                f"to a JSON object, with the schema written {self.schema_note_place()}",
            )
            self.schema_instruction = json_object_note(rewrite.schema)
            return {"type": "json_object"}
        if not self.family.json_with_tools and gives_tools(self.request, BODY_OPTION):
            # Neither dropped: without the format the answer is prose, without the tools
            # the model cannot call them; the caller chooses.
            raise self.degradations.unsupported(
                field,
                f"`{model}` on {display} answers 400 to JSON Schema output beside tools",
            )
        strict: bool | None = fmt.strict
        if fmt.strict:
            if (
                level is StructuredLevel.BEST_EFFORT
                or self.profile.response_dialect is SchemaDialect.NOT_HONOURED
            ):
                self.degradations.refuse(
                    field,
                    f"{display} does not enforce `strict` for `{model}`",
                    instead=f"{subject} was sent without it",
                )
                strict = False
            else:
                schema, strict = self.strict_schema(
                    self.profile.response_dialect, schema, field, subject
                )
        schema = self.without_schema_ids(schema, field, subject)
        schema = _object_typed(self.in_taken_shapes(schema, subject))
        if self.profile.json_schema_shape == "raw":
            return {"type": "json_schema", "json_schema": schema}
        body: dict[str, Any] = {"name": name, "schema": schema}
        if fmt.description:
            body["description"] = fmt.description
        if strict is not None:
            body["strict"] = strict
        return {"type": "json_schema", "json_schema": body}

    def effort(self, wanted: str) -> str | None:
        allowed = self.family.efforts
        if allowed is None:
            return wanted
        sent = dict(allowed).get(wanted)
        where = f"`{self.request.model}` on {self.profile.display_name}"
        lowest = self.family.none_as
        if sent is None and wanted == "none" and lowest is not None:
            self.degradations.refuse(
                RequestField.REASONING_EFFORT,
                f"{where} cannot turn reasoning off (it reasons whatever it is told)",
                instead=f"its lowest effort, `{lowest}`, was sent",
            )
            return lowest
        if sent is None:
            self.degradations.refuse(
                RequestField.REASONING_EFFORT, f"{where} takes no reasoning effort `{wanted}`"
            )
        elif sent != wanted:
            self.degradations.approximate(
                RequestField.REASONING_EFFORT,
                f"{where} takes no reasoning effort `{wanted}`; `{sent}` was sent",
            )
        return sent

    def stop(self) -> list[str] | None:
        if not self.request.stop:
            return None
        if not self.family.stop:
            self.degradations.refuse(
                RequestField.STOP,
                f"`{self.request.model}` on {self.profile.display_name} takes no stop sequences",
            )
            return None
        stops = list(self.request.stop)
        most = self.profile.max_stop_sequences
        if most is not None and len(stops) > most:
            self.degradations.refuse(
                RequestField.STOP,
                f"{self.profile.display_name} takes at most {most} stop sequences",
                instead=f"the first {most} were sent",
                code=stops_first(most),
            )
            stops = stops[:most]
        return stops

    def sampling(self, effort: str | None) -> tuple[float | None, float | None]:
        """`temperature` and `top_p` as the model takes them: where it takes only their
        default (1), another value is left out, with a warning (`effort` is the reasoning
        effort sent: some models take them only without reasoning, some only with thinking
        turned off in the body option)."""
        request = self.request
        takes = self.takes_sampling()
        if (
            takes == "yes"
            or (takes == "without_reasoning" and effort in (None, "none"))
            or (takes == "without_thinking" and not self.thinks())
        ):
            return self.temperature_in_range(request.temperature), request.top_p
        unless = {
            "without_reasoning": " unless it reasons at effort `none`",
            "without_thinking": self.thinking_why("to use it", by_effort=False),
        }.get(takes, "")
        if self.reasoning_guessed():
            unless = f" at reasoning effort `{effort}`{self.guessed_why()}"
        kept: list[float | None] = []
        for field, value in (
            (RequestField.TEMPERATURE, request.temperature),
            (RequestField.TOP_P, request.top_p),
        ):
            if value is None or value == 1:
                kept.append(value)
                continue
            self.degradations.refuse(
                field,
                f"`{request.model}` on {self.profile.display_name} takes no `{field}` other "
                f"than 1{unless}",
            )
            kept.append(None)
        return kept[0], kept[1]

    def takes_sampling(self) -> str:
        """On what terms the model takes sampling (and log-probabilities): its family's,
        or only without reasoning where it is taken for a reasoning model
        (`reasoning_guessed`)."""
        return "without_reasoning" if self.reasoning_guessed() else self.family.sampling

    def reasoning_guessed(self) -> bool:
        """Whether a deployment named for no model, asked for an effort, is taken for a
        reasoning model (Azure's `prod` serving o3): it takes sampling and log-probabilities
        at effort `none` alone. Only on Azure, whose model ids are its user's names: an
        unknown id elsewhere may reason and take sampling (Qwen3)."""
        return (
            self.family.sampling == "yes"
            and self.profile.name == "azure-openai"
            and self.effort_says_reasoning()
        )

    def guessed_why(self) -> str:
        """Why a refusal holds, where only `reasoning_guessed` says the model reasons."""
        if not self.reasoning_guessed():
            return ""
        return (
            " (a deployment that names no model, asked for a reasoning effort, is taken for a "
            "reasoning model)"
        )

    def reasoning_model(self) -> bool:
        """Whether the model is a reasoning model: as its family says, else as the request's
        effort says (`effort_says_reasoning`)."""
        return self.family.reasoning is CapabilitySupport.SUPPORTED or self.effort_says_reasoning()

    def never_thinks_asked_none(self) -> bool:
        """Whether the request asks a model that never reasons not to: it already does as
        asked, so nothing goes and nothing is said (as on Anthropic), rather than refusing
        the effort under `UnsupportedPolicy.ERROR`."""
        return (
            self.request.reasoning_effort == "none"
            and self.family.reasoning is CapabilitySupport.UNSUPPORTED
        )

    def effort_says_reasoning(self) -> bool:
        """Whether only the request says the model reasons: a model of a family that may
        (a deployment named for no model, Azure's `prod` serving o3) asked for an effort,
        `none` included, is a reasoning model's, which takes only its limit's field and, at
        an effort other than `none`, no sampling."""
        return (
            self.family.reasoning is CapabilitySupport.UNKNOWN
            and self.request.reasoning_effort is not None
        )

    def thinks(self) -> bool:
        """Whether the request runs in DeepSeek's thinking mode, where a forced `tool_choice`
        is answered 400 ("Thinking mode does not support this tool_choice") and sampling
        has no effect: always on `deepseek-reasoner`; elsewhere as the body option's
        `thinking` turns it, which goes in place of allama's own; else at the model's
        default, on for V4 unless reasoning effort `none` turns it off
        (`thinking_off_by_effort`). A `thinking` of no type DeepSeek names (`null`, `{}`)
        leaves the model's default, effort `none` or not: it is what goes."""
        mode = self.family.thinking
        if mode is None:
            return False
        if mode == "always":
            return True
        turned = self.option_turns_thinking()
        if turned is not None:
            return turned
        if self.option_gives_thinking():
            return mode == "by_default"
        return mode == "by_default" and not self.thinking_off_by_effort()

    def option_gives_thinking(self) -> bool:
        """Whether the body option has a `thinking` of its own, sent in place of allama's."""
        extra = self.request.option_json(self.namespace)
        return isinstance(extra, dict) and "thinking" in extra

    def option_turns_thinking(self) -> bool | None:
        """Whether the body option's `thinking` turns thinking on (`enabled`) or off
        (`disabled`); `None` where it gives none, or none of those types."""
        extra = self.request.option_json(self.namespace)
        thinking = extra.get("thinking") if isinstance(extra, dict) else None
        kind = thinking.get("type") if isinstance(thinking, dict) else None
        return {"enabled": True, "disabled": False}.get(kind) if isinstance(kind, str) else None

    def thinking_off_by_effort(self) -> bool:
        """Whether reasoning effort `none` turns the family's thinking mode off: sent as
        `"thinking": {"type": "disabled"}` (DeepSeek V4, which takes no effort `none`, and the
        models that think only when asked, where it is what they do unasked)."""
        return (
            self.family.thinking in ("by_default", "when_asked")
            and self.request.reasoning_effort == "none"
        )

    def effort_without_thinking(self) -> None:
        """Refuse an effort that would go to no effect (`ModelFamily.effort_thinks_only`):
        thinking is not turned on in its place, since DeepSeek documents no `enabled` on
        `deepseek-chat` (the body option may send one). `none` never comes here
        (`thinking_off_by_effort`)."""
        self.degradations.refuse(
            RequestField.REASONING_EFFORT,
            f"`{self.request.model}` on {self.profile.display_name} takes no reasoning effort "
            f"`{self.request.reasoning_effort}` outside thinking mode, which "
            '`"thinking": {"type": "enabled"}` in the body option turns on',
        )

    def unforced_why(self) -> str:
        """Why no tool is forced in thinking mode, and how to leave it where the model can."""
        if self.family.thinking == "always":
            return ": it always thinks, and thinking mode takes no forced `tool_choice`"
        return self.thinking_why("to force one", by_effort=True)

    def thinking_why(self, to: str, *, by_effort: bool) -> str:
        """Where the request's thinking mode comes from, and how to turn it off `to` do what
        it refuses: by reasoning effort `none` too (`by_effort`, where that holds), unless
        the body option's `thinking` goes in its place."""
        if self.option_turns_thinking():
            return (
                ' in thinking mode, which `"thinking": {"type": "enabled"}` in the body option '
                "turns on"
            )
        effort = (
            "reasoning effort `none`, or " if by_effort and not self.option_gives_thinking() else ""
        )
        return (
            f" in thinking mode, its default ({to}, turn thinking off: {effort}"
            '`"thinking": {"type": "disabled"}` in the body option)'
        )

    def effort_replaced(self, theirs: Any) -> None:
        """Say where the body option's own `thinking` (`theirs`) went in place of the
        `disabled` reasoning effort `none` asked for and leaves thinking on (`enabled`, or
        one of no type, which leaves V4's default), as the Anthropic encoder says it: on
        `reasoning_effort`, whose level was not what was sent."""
        if not self.thinks():
            return
        given = json.dumps(theirs, ensure_ascii=False, separators=(",", ":"), default=repr)
        self.degradations.warn(
            Warning.unsupported(
                RequestField.REASONING_EFFORT,
                f"`thinking` of the body option `{self.namespace}` ({given}) was sent in place "
                f"of the request's reasoning effort (`{self.request.reasoning_effort}`)",
            )
        )

    def output_limit(self, field: str) -> int | None:
        """The request's output limit, lowered to the model's where the table knows it
        (`ModelFamily.max_output`: OpenAI answers 400 above it, "max_tokens is too large: N.
        This model supports at most M completion tokens"), with a warning, refused under
        `UnsupportedPolicy.ERROR`. Left as asked where the body option gives its own `field`,
        which goes in its place."""
        asked = self.request.max_output_tokens
        limit = self.family.max_output
        extra = self.request.option_json(self.namespace)
        if (
            asked is None
            or limit is None
            or asked <= limit
            or (isinstance(extra, dict) and field in extra)
        ):
            return asked
        self.degradations.refuse(
            RequestField.MAX_OUTPUT_TOKENS,
            f"`{self.request.model}` on {self.profile.display_name} writes at most {limit} "
            "output tokens",
            instead=f"{limit} was sent in place of {asked}",
        )
        return limit

    def temperature_in_range(self, temperature: float | None) -> float | None:
        """`temperature`, or `None` (with a warning) above what the endpoint takes: sent,
        the whole request would be refused."""
        profile = self.profile
        return self.degradations.temperature_within(
            temperature, profile.max_temperature, profile.display_name
        )

    # Everything

    def body(self) -> dict[str, Any]:
        request = self.request
        profile = self.profile
        tools = self.tools()
        extras: dict[str, Any] = {}
        max_tokens = request.max_output_tokens
        limit_field: str = profile.token_field
        if max_tokens is not None:
            if profile.reasoning_token_field is not None and self.reasoning_model():
                limit_field = profile.reasoning_token_field
            max_tokens = self.output_limit(limit_field)
            extras[limit_field] = max_tokens
        if request.seed is not None:
            if profile.seed_32_bits:
                seed = self.degradations.seed_within_32_bits(request.seed, profile.display_name)
                if seed is not None:
                    extras[profile.seed_field] = seed
            elif -(2**63) <= request.seed < 2**63:
                extras[profile.seed_field] = request.seed
            else:  # the wire's `seed` is an int64: a larger one is answered 400
                self.degradations.refuse(
                    RequestField.SEED,
                    f"{profile.display_name} takes a seed of 64 bits",
                    instead=f"{request.seed} was left out",
                )
        effort: str | None = None
        thinking: dict[str, str] | None = None
        if self.never_thinks_asked_none():
            pass  # nothing to send, and nothing lost
        elif self.thinking_off_by_effort():
            thinking = {"type": "disabled"}  # no reasoning, as asked: nothing lost
        elif request.reasoning_effort is not None:
            if (
                not profile.reasoning_effort
                or self.family.reasoning is CapabilitySupport.UNSUPPORTED
            ):
                self.degradations.refuse(
                    RequestField.REASONING_EFFORT,
                    f"`{request.model}` on {profile.display_name} takes no reasoning effort",
                )
            elif self.family.effort_thinks_only and not self.thinks():
                self.effort_without_thinking()
            else:
                effort = self.effort(str(request.reasoning_effort))
        stream_options = {"include_usage": True} if self.stream and profile.stream_usage else None
        top_logprobs = self.logprobs(effort)
        temperature, top_p = self.sampling(effort)
        # The body is written as plain JSON data in `WireRequest`'s shape (absent fields
        # left out, never `null`); the schemas in it are the dialect rewrite's own (cached)
        # objects, put in as they are rather than copied.
        body = _present(
            model=request.model,
            messages=self.messages(),
            temperature=temperature,
            top_p=top_p,
            stop=self.stop(),
            stream=True if self.stream else None,
            stream_options=stream_options,
            tools=tools,
            tool_choice=self.tool_choice(),
            parallel_tool_calls=self.parallel_tool_calls(tools),
            response_format=self.response_format(),
            grammar=self.grammar(),
            reasoning_effort=effort,
            thinking=thinking,
            logprobs=True if top_logprobs is not None else None,
            top_logprobs=top_logprobs or None,
        )
        body.update(extras)
        if self.schema_instruction is not None:
            body["messages"] = _instructed(body["messages"], self.schema_instruction)
        if not self.family.system_role:
            body["messages"] = self.instructions_in_first_turn(body["messages"])
        extra = request.option_json(BODY_OPTION)
        given = (
            option_fields(
                body, extra, BODY_OPTION, stream=self.stream, degradations=self.degradations
            )
            if isinstance(extra, dict)
            else {}
        )
        self.option_tools_left_out(given)
        if "stream_options" in given:
            self.option_stream_options(body, given.pop("stream_options"))
        for key, field in _CARRIERS:
            if key in body and key in given and given[key] != body[key]:
                self.option_replaced(field, key, given[key])
        routed = _routed_parameters({**body, **given})
        if profile.require_parameters and routed:
            body["provider"] = self.strict_routing(given, routed)
            given.pop("provider", None)
        if thinking is not None and "thinking" in given:
            self.effort_replaced(given["thinking"])
        settings = given
        if max_tokens != request.max_output_tokens:  # lowered to the model's output limit
            settings = {**given, limit_field: max_tokens}
        if settings:
            self.as_sent = self.settings_replaced(
                settings, limit_field, request.max_output_tokens is None
            )
        body.update(given)
        self.check_names(body, tools)
        return body

    def check_names(self, body: dict[str, Any], tools: list[dict[str, Any]] | None) -> None:
        """Refuse, before sending, tools of one name in `body` (`tools` allama's, sent
        first): the request's, an extraction's and the body option's, after them. Answered
        400 where the endpoint checks (DeepSeek: "Tool names must be unique"), and where it
        does not, which tool a call named could not be told."""
        ours = self.request.tools if tools is not None else ()
        why = repeated_in_body(body, ours, self.profile.display_name, self.namespace)
        if why is not None:
            raise self.invalid(why)

    def strict_routing(self, option: Mapping[str, Any], routed: list[str]) -> dict[str, Any]:
        """OpenRouter's `provider` for a request whose answer hangs on a parameter an
        upstream may drop (`routed`, `_routed_parameters`): the caller's routing (`order`,
        `allow_fallbacks`, in the body `option`) with `require_parameters: true`, since
        without it OpenRouter treats `response_format` and `tools` as a preference, routes
        to upstreams that ignore them, and drops them where none of the model's takes them
        (and a model with none that takes them answers the 404 an extraction falls back
        on). What the caller gave in its place is not sent, with a refusal on
        `RequestField.OPTIONS`, as the stream's `include_usage` is kept: a
        `require_parameters` other than true, a `provider` that is no object."""
        ours: dict[str, Any] = {"require_parameters": True}
        if "provider" not in option:
            return ours
        theirs = option["provider"]
        what = f"`provider` of the body option `{self.namespace}`"
        one = routed != ["tools"] and len(routed) == 1
        why = (
            f"the request's {' and '.join(routed)} {'needs' if one else 'need'} "
            f"`require_parameters: true`, or {self.profile.display_name} may route it to an "
            f"upstream that ignores {'it' if one else 'them'}"
        )
        if not isinstance(theirs, dict):
            given = json.dumps(theirs, ensure_ascii=False, separators=(",", ":"), default=repr)
            self.degradations.refuse(
                RequestField.OPTIONS,
                f"{what} ({given}) was not sent: it is not an object, and {why}",
                instead='`{"require_parameters":true}` was sent',
            )
            return ours
        if theirs.get("require_parameters", True) is not True:
            said = json.dumps(theirs["require_parameters"], ensure_ascii=False, default=repr)
            self.degradations.refuse(
                RequestField.OPTIONS,
                f"`require_parameters` of {what} ({said}) was not sent: {why}",
                instead="`require_parameters: true` was sent",
            )
        return {**theirs, **ours}

    def settings_replaced(
        self, given: dict[str, Any], limit_field: str, no_limit: bool
    ) -> dict[str, Any]:
        """The request settings the body option's fields (`given`) replaced. The limit is
        the option's in allama's own field (`limit_field`), or, where the request set none,
        in whichever of the two fields the option gives."""
        if no_limit and limit_field not in given:
            limit_field = next((key for key in _LIMIT_FIELDS if key in given), limit_field)
        keys = {
            "temperature": "temperature",
            "top_p": "top_p",
            "max_output_tokens": limit_field,
            "seed": self.profile.seed_field,
            "stop": "stop",
        }
        return settings_as_sent(self.request, given, keys)

    def option_stream_options(self, body: dict[str, Any], theirs: Any) -> None:
        """The body option's `stream_options` in `body`: not on a whole response (the
        endpoint refuses them without `stream`), and on a stream with allama's own
        `include_usage` kept, which the usage of the answer comes with."""
        given = json.dumps(theirs, ensure_ascii=False, separators=(",", ":"))
        what = f"`stream_options` of the body option `{BODY_OPTION}`"
        if not self.stream:
            if theirs is not None:
                self.degradations.refuse(
                    RequestField.OPTIONS,
                    f"{what} ({given}) was not sent: they are for streams, and this call "
                    "reads one whole response (`chat_stream` streams, `chat` does not)",
                )
            return
        ours = body.get("stream_options")
        if ours is None:
            body["stream_options"] = theirs
            return
        usage = "the stream's usage is read from its end, so `include_usage: true` was sent"
        if not isinstance(theirs, dict):
            self.degradations.refuse(
                RequestField.OPTIONS, f"{what} ({given}) was not sent: {usage}"
            )
            return
        if theirs.get("include_usage", True) is not True:
            said = json.dumps(theirs["include_usage"], ensure_ascii=False)
            self.degradations.refuse(
                RequestField.OPTIONS, f"`include_usage` of {what} ({said}) was not sent: {usage}"
            )
        body["stream_options"] = {**theirs, **ours}


AFTER_TOOL_RESULTS = "I have the tool results."
"""The assistant turn put between a tool result and a user turn where the endpoint refuses
one straight after the other (Mistral)."""

JSON_OBJECT_NOTE = "Answer with one JSON object."
"""What JSON mode is told where the caller's messages do not ask for JSON."""


_SCHEMA_IDS = ("$schema", "$id")
"""The root keywords Mistral cannot compile a schema with (`without_schema_ids`)."""

_LIMIT_FIELDS = ("max_completion_tokens", "max_tokens")
"""The fields an output limit goes in on Chat Completions."""

_FUNCTION_TYPES = ("function", "custom")
"""The tool types a model with no function calling is not sent (the body option's others
are the model's built-in tools)."""

_REFUSAL_FIELD = frozenset({"openai", "azure-openai"})
"""The presets whose assistant message takes a `refusal` string beside its `content`
(OpenAI's spec, Azure's alike); other endpoints may not read the field."""


def _object_typed(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with a root `"type": ["object"]` written `"object"`: the same type, as a
    list of one, which an extraction sends unwrapped (`object_rooted`). A strict rewrite
    writes it so already (`Engine.object_root`); a schema that goes as given (not strict,
    or one the strict subset cannot hold: Together's, DeepSeek's and Fireworks' forced
    tools) goes in the form endpoints check a root for, as every other tool wire sends it
    (`object_parameters`)."""
    if schema.get("type") != ["object"]:
        return schema
    return {**schema, "type": "object"}


def _of_no_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with `"properties": {}` where it is an object root that says nothing of its
    keys (a `ToolDefinition`'s default `{"type": "object"}`, annotations aside, or one
    closed to every key): a tool of no arguments, which the strict subset holds as an
    object closed with no keys, where the root without `properties` reads as an object
    open to any keys and goes without `strict`. A root that allows keys of its own
    (`additionalProperties: true` or a schema, `patternProperties`...) goes as it is."""
    if schema.get("type") not in ("object", ["object"]) or "properties" in schema:
        return schema
    for key, value in schema.items():
        closed = key == "additionalProperties" and value is False
        if not (key == "type" or key in ANNOTATIONS or closed or (key, value) == _NONE_REQUIRED):
            return schema
    return {**schema, "properties": {}}


_NONE_REQUIRED: tuple[str, list[Any]] = ("required", [])
"""A root's `required` that names no key: as good as none, beside `properties` left empty."""


def _with_properties(schema: dict[str, Any], *, open_beside: bool) -> dict[str, Any]:
    """`schema` with `"properties": {}` at an object root that has none: OpenAI answers 400
    to one without (`invalid_function_parameters`, "object schema missing properties",
    gpt-5), as the default `{"type": "object"}` of a tool of no arguments is. An empty
    `properties` allows every key it allowed, save in llama.cpp's converter, whose grammar
    reads `properties` without `additionalProperties` as an object closed to any other key
    (measured: a bare object's call then writes only `{}`). There (`open_beside`, where the
    tool's arguments are compiled by it) `"additionalProperties": true` goes beside them,
    as the llama.cpp dialect writes one it gives `properties`: the object stays open to
    any key, as the root without them was."""
    if schema.get("type") != "object" or "properties" in schema:
        return schema
    if open_beside and "additionalProperties" not in schema:
        return {**schema, "properties": {}, "additionalProperties": True}
    return {**schema, "properties": {}}


_TAKEN_SHAPES = "xai_shapes"
"""The cache key of a schema in the shapes xAI takes (`in_taken_shapes`)."""
_SWITCHES = frozenset(
    {"additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems"}
)
"""The keywords whose `true` or `false` opens or closes an object or array, the form
OpenAI's strict mode and xAI's documentation write them in: kept."""
_VALUE_SCHEMAS = frozenset({*SCHEMA_SINGLE, "items"})
_TUPLE_KEYS = {"items": "prefixItems", "additionalItems": "items"}
"""A tuple's keywords before 2020-12, and theirs since."""
_SCHEMA_MAPS = frozenset({*SCHEMA_MAPS, "dependencies"})
_OLD_DRAFTS = re.compile(r"draft-0[3-7]")
"""A `$schema` naming a draft that reads `prefixItems` as no keyword at all."""


def _taken_shapes(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with each boolean subschema as an object schema and each `items` array as
    `prefixItems` (its `additionalItems` as `items`), for `in_taken_shapes`; what nests past
    `MAX_DEPTH` goes as it is. Where a tuple moved, a root `$schema` naming an older draft,
    which reads `prefixItems` as no keyword, is not sent (it says nothing of the values)."""
    moved = False

    def shaped(node: Any, depth: int) -> Any:
        nonlocal moved
        if node is True:
            return {}
        if node is False:
            return {"not": {}}
        if not isinstance(node, dict) or depth >= MAX_DEPTH:
            return node
        out: dict[str, Any] = {}
        tuple_items = isinstance(node.get("items"), list) and "prefixItems" not in node
        moved = moved or tuple_items
        after_tuple = tuple_items or "prefixItems" in node
        for key, value in node.items():
            if tuple_items and key in _TUPLE_KEYS:
                key = _TUPLE_KEYS[key]
            if key in SCHEMA_LISTS and isinstance(value, list):
                out[key] = [shaped(sub, depth + 1) for sub in value]
            elif key in _SCHEMA_MAPS and isinstance(value, dict):
                out[key] = {
                    name: sub if isinstance(sub, list) else shaped(sub, depth + 1)
                    for name, sub in value.items()
                }
            elif isinstance(value, bool) and (key in _SWITCHES or (key == "items" and after_tuple)):
                out[key] = value  # whether more properties or items may follow: a switch
            elif key in _VALUE_SCHEMAS:
                out[key] = shaped(value, depth + 1)
            else:
                out[key] = value
        return out

    sent: dict[str, Any] = shaped(schema, 0)
    draft = sent.get("$schema")
    if moved and isinstance(draft, str) and _OLD_DRAFTS.search(draft):
        del sent["$schema"]
    return sent


_ROUTED_FORMATS = {"json_schema": "schema", "json_object": "JSON mode"}
"""How a routing refusal names the response format a request's answer hangs on."""


def _routed_parameters(body: Mapping[str, Any]) -> list[str]:
    """What of `body` (the body option's fields in it) a router's upstream may drop
    without a word, in a routing refusal's words: a response format other than `text`
    (its schema, or JSON mode), and tools (which a forced `tool_choice` needs, and without
    which the model cannot call one; not under `tool_choice: none`, which calls none);
    empty where the answer hangs on neither."""
    routed: list[str] = []
    fmt = body.get("response_format")
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if fmt is not None and kind != "text":
        named = _ROUTED_FORMATS.get(kind) if isinstance(kind, str) else None
        routed.append(named or "response format")
    if body.get("tools") and body.get("tool_choice") != "none":
        routed.append("tools")
    return routed


def _tool_type(tool: Any) -> str | None:
    kind = tool.get("type") if isinstance(tool, dict) else None
    return kind if isinstance(kind, str) else None


_CARRIERS = (
    ("response_format", RequestField.RESPONSE_FORMAT),
    ("grammar", RequestField.RESPONSE_FORMAT),
    ("tool_choice", RequestField.TOOL_CHOICE),
)
"""The body fields that carry the request's schema or force its tool: the body option's
own value there is sent, with a warning."""


def json_object_note(schema: dict[str, Any]) -> str:
    """What `json_object` mode is told in words: the endpoint refuses the mode unless the
    messages say "JSON" (OpenAI, DeepSeek, Groq), and nothing else carries the schema."""
    text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    return f"Answer with one JSON object that follows this JSON Schema:\n{text}"


def _says_json(messages: Sequence[Message]) -> bool:
    """Whether a message's text says "json", in any case (what the endpoints look for)."""
    return any("json" in (message.text() or "").lower() for message in messages)


def _instructed(messages: list[dict[str, Any]], note: str) -> list[dict[str, Any]]:
    """`messages` with `note` added to the opening system message, or opening them as one."""
    first = messages[0] if messages else None
    if first is not None and first["role"] == "system" and isinstance(first["content"], str):
        return [{**first, "content": f"{first['content']}\n\n{note}"}, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]


def _present(**fields: Any) -> dict[str, Any]:
    """The fields that are not `None`, in order."""
    return {key: value for key, value in fields.items() if value is not None}


def _gbnf_literal(text: str) -> str:
    """`text` as a GBNF string literal: quotes, backslashes and control characters escaped,
    everything else as its UTF-8 self."""
    escaped = []
    for char in text:
        if char in '"\\':
            escaped.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            escaped.append(f"\\x{ord(char):02X}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def choice_grammar(options: tuple[str, ...]) -> str:
    """A GBNF grammar whose only sentences are the options."""
    return "root ::= " + " | ".join(_gbnf_literal(option) for option in options)


def sent_arguments(call: ToolCall) -> str:
    """A function call's arguments as they go back: blank ones (a call of no arguments,
    as some models write it) as `{}`, since the wire's `arguments` is JSON text of an
    object, which Ollama reads with `json.Unmarshal` and answers 400 to where it is blank,
    as the native Ollama and Gemini encoders send them."""
    return call.arguments if call.arguments.strip() else "{}"


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
    image's or a document's data URL that cannot be read, text not in its charset, no
    message), for a tool call given no result where the endpoint needs one
    (`needs_call_results`), and for tools of one name (the body option's among them).
    """
    encoder = _Encoder(request, profile, family, degradations, stream=stream)
    body = encoder.body()
    return HttpRequest("POST", url, headers, body, params or {}, as_sent=encoder.as_sent)


def _rewrite_sent_anyway(dialect: SchemaDialect) -> bool:
    """Whether a schema that cannot go `strict` still goes as `dialect`'s rewrite. Not
    OpenAI's strict one: without `strict` it only narrows what the caller asked (optional
    properties required and nullable, objects closed) or breaks it (a root `anyOf` of
    required sets, no object root, which OpenAI refuses for any function), so the
    caller's schema goes as given. The grammar dialects' rewrites are what their
    converters can read, enforced with or without `strict`."""
    return dialect is not SchemaDialect.OPENAI_STRICT
