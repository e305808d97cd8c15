"""A `ChatRequest` to the HTTP request of `models/{model}:generateContent`, plus warnings.

What the model family cannot honour goes through `Degradations` (dropped with a warning
under `UnsupportedPolicy.WARN`, refused before sending under `ERROR`). A response schema
is always enforced by Gemini, so one its surface cannot hold (recursion, a map on the
OpenAPI surface), or JSON output beside function declarations on a family that answers 400
to it, is refused before sending whatever the policy, and automatic extraction falls back
to a forced tool. So is cached content (the body option's `cachedContent`) beside a system
instruction, tools or a tool choice, which Gemini answers 400: they go into the cache when
it is made. A forced-tool extraction, whose tool is one, cannot use a cache; an automatic
one sends native output, beside which the cache goes.

A `choice` response format is Gemini's enum output: `responseMimeType: "text/x.enum"` and a
`STRING` enum as `responseSchema` (the surface the documentation shows for it, whatever
surface the family takes JSON schemas on); the answer is one of the options as plain text.

Log-probabilities (`request.logprobs`) are `responseLogprobs: true`, and `logprobs: n` for
`n` alternatives per position when `n` is at least 1. A family the preset's table says
reports none, and a streamed request (allama reads them from whole responses, not from
stream chunks), go through `Degradations`.

Thought signatures come back verbatim: a `Reasoning` block with a signature and no text
(as the decoder writes it, just before the part that carried the signature) puts the
signature on the next part, an empty text included (a turn may end with a signature on an
empty text part); a thought with text goes back as a thought part. A signature another
provider issued (`Reasoning.issuer`) is left out: Gemini would refuse it. The code the model
ran and its result (a text-less `Reasoning` whose encrypted content is the decoder's
`executableCode` or `codeExecutionResult` part) go back in their place as those parts, as
they came, their signatures on them.

Tool results that answer one model turn go in the order of its calls, whatever order the
caller gave them in: Gemini pairs a response with its call by position and name, and the
ids allama gives calls Gemini sent without one are not sent back. They go in a user content
of their own, and what the user says beside them (text, an image) in the next one: Gemini
answers 400 to a function-response content that holds anything else. A call the next user
turn gives no result for is refused before sending: Gemini answers 400 unless a call turn
gets as many responses as it has calls.

Reasoning effort `none` on a family that cannot turn thinking off sends its lowest thinking
level or budget, with a warning (refused under `UnsupportedPolicy.ERROR`): sent nothing, the
model would think at its default.
"""

from __future__ import annotations

import base64
import codecs
import json
import mimetypes
import re
from collections.abc import Mapping
from typing import Any

from allama._degradations import FORMAT_NOT_SENT, Degradations, gives_tools, stops_first
from allama.adapters._answered import (
    due_before,
    extra_result,
    extra_words,
    missing_words,
    moved_after_results,
    said_before_results,
    says_nothing,
)
from allama.adapters._arguments import call_arguments
from allama.adapters._http import (
    HttpRequest,
    option_fields,
    replaced_by_option,
    settings_as_sent,
)
from allama.adapters._rewrites import cached_rewrite
from allama.adapters._tool_ids import (
    option_tools,
    repeated_in_body,
    repeated_tool_names,
    results_in_call_order,
)
from allama.adapters.gemini._capabilities import GeminiFamily, SchemaSurface, Thinking
from allama.adapters.gemini._decode import SENT_BACK_PARTS
from allama.adapters.gemini._profile import GeminiProfile
from allama.errors import InvalidRequestError, UnsupportedError
from allama.schema._errors import SchemaError
from allama.schema._inline import no_object_parameters, object_parameters
from allama.schema._rewrite import Rewrite, apply_strict_policy
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
    SystemMessage,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
    WarningKind,
)
from allama.types._content import OPENAI_REASONING_ID_PREFIX, _is_text
from allama.types._data_urls import (
    data_url,
    decode_text,
    inline_data,
    inline_media_type,
    part_media_type,
    text_codec,
    unreadable_charset,
)

_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"})
"""The images Gemini reads ("Unsupported MIME type: image/gif")."""

SKIP_SIGNATURE_CHECK = "skip_thought_signature_validator"
"""The thought signature Google documents for a function call that has none of its own."""

__all__ = ["BODY_OPTION", "MAX_STOP_SEQUENCES", "THINKING_BUDGETS", "encode_request"]

BODY_OPTION = "gemini"
"""Request option namespace whose JSON object is merged into the body; a `generationConfig`
in it is merged into allama's, its `thinkingConfig` into allama's one level deeper
(`request.with_option_json("gemini", {"generationConfig": {"topK": 40}})`), and so is a
`toolConfig`. Its own response format fields or `functionCallingConfig` are sent in place of
allama's with a warning on the field. Google's snake_case spelling of a field
(`generation_config`, `response_mime_type`) is read as its camelCase one; a field given in
both spellings is refused. A `stream` is no field of Gemini's (the URL says whether the
answer streams): it is not sent, with a warning on `options` where it differs from the
call's. Its `cachedContent` is refused before sending beside a system instruction, tools or
a tool choice (`toolConfig`), which Gemini answers 400: those go into the cache when it is
made."""

THINKING_BUDGETS = {"minimal": 512, "low": 1024, "medium": 8192, "high": 24_576}
"""`thinkingBudget` per reasoning effort, within the family's range (Gemini 2.5): low,
medium and high as Google's own OpenAI-compatible endpoint maps them (1K, 8K, 24K)."""

MAX_STOP_SEQUENCES = 5

MAX_TEMPERATURE = 2.0
"""The highest `temperature` Gemini takes: the Gemini API's `GenerationConfig` documents
0.0 to 2.0, and Vertex AI the same for the Gemini models."""

_SYNTHETIC_ID = re.compile(r"call_\d+")
"""The ids the decoder gives calls Gemini sent without one: not Gemini's, so not sent back."""


class _Encoder:
    def __init__(
        self,
        request: ChatRequest,
        profile: GeminiProfile,
        family: GeminiFamily,
        degradations: Degradations,
        stream: bool = False,
    ) -> None:
        self.request = request
        self.profile = profile
        self.family = family
        self.degradations = degradations
        self.stream = stream
        self.where = f"`{request.model}` on {profile.display_name}"
        self.call_names: dict[str, str] = {}
        self.as_sent: dict[str, Any] = {}  # settings the body option replaced

    def invalid(self, why: str) -> InvalidRequestError:
        return InvalidRequestError(why).mark_authored().with_provider(self.profile.name)

    # Conversation

    def conversation(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """`systemInstruction` and `contents`, consecutive turns of a role merged; a user
        turn that answers function calls goes as two contents, its function responses alone,
        then what else it says (`_user_turn`), with a warning naming the user's messages
        given before a result, which the model then reads after it. Calls the user turn
        after them leaves unanswered are refused (`answered`)."""
        system: list[dict[str, Any]] = []
        contents: list[dict[str, Any]] = []
        moved = False
        calls: list[tuple[str, int]] = []  # the latest model turn's calls: id, message index
        results: list[str] = []  # the ids the user turn after those calls answers
        responses: list[tuple[str, dict[str, Any]]] = []  # its function responses, by id
        words: list[dict[str, Any]] = []  # and its other parts
        merged: list[int] = []  # the indexes of the messages it is made of
        # The user's messages of every turn given before one of its tool results: `_user_turn`
        # moves what they say after the responses.
        said_before: list[int] = []
        # The index of that user turn's first message (`after`), and of its first of the
        # user's own that says something (`said`; one of whitespace alone is not sent, and
        # is passed over as Anthropic's encoder leaves it out): a refusal names that one,
        # else the next model turn, as the turn the results were due before.
        after: int | None = None
        said: int | None = None
        # Tool results are only moved among themselves: each other message keeps its index.
        given = results_in_call_order(self.request.messages)
        for index, message in enumerate(given):
            if isinstance(message, SystemMessage | DeveloperMessage):
                if message.content:
                    system.append({"text": message.content})
                moved = moved or bool(contents or responses or words)
                continue
            role, parts = self.message(message)
            if not parts:
                continue
            if role == "user":
                after = index if after is None else after
                if said is None and isinstance(message, UserMessage) and not says_nothing(message):
                    said = index
                merged.append(index)
                if isinstance(message, ToolMessage):
                    results.append(message.tool_call_id)
                    responses.extend((message.tool_call_id, part) for part in parts)
                else:
                    words.extend(parts)
                continue
            if responses or words:
                contents.extend(_user_turn(calls, responses, words))
                said_before.extend(said_before_results(merged, given))
                responses, words, merged = [], [], []
            if not contents or contents[-1]["role"] != "model":
                self.answered(calls, results, after, said, index)
                calls, results, after, said = [], [], None, None
                contents.append({"role": role, "parts": []})
            contents[-1]["parts"].extend(parts)
            assert isinstance(message, AssistantMessage)
            calls.extend((call.id, index) for call in message.tool_calls)
        contents.extend(_user_turn(calls, responses, words))
        said_before.extend(said_before_results(merged, given))
        self.answered(calls, results, after, said, None)
        # A result beyond its turn's calls: answered 400 ("the number of function response
        # parts is equal to the number of function call parts of the function call turn").
        extra = extra_result(self.request.messages, merged=True)
        if extra is not None:
            raise self.invalid(extra_words(extra, self.profile.display_name))
        if moved:
            self.degradations.approximate(
                RequestField.SYSTEM,
                f"{self.profile.display_name} takes system instructions only apart from the "
                "conversation; those given later were moved there",
            )
        if said_before:
            self.degradations.approximate(
                RequestField.MESSAGES,
                f"{self.profile.display_name} takes a turn's function responses only together, "
                f"before what else the user says; {moved_after_results(said_before)}",
            )
        return ({"parts": system} if system else None), contents

    def answered(
        self,
        calls: list[tuple[str, int]],
        results: list[str],
        after: int | None,
        said: int | None,
        later: int | None,
    ) -> None:
        """Refuse function calls the user turn after them (at `after`) gives no result for:
        Gemini answers 400 ("the number of function response parts is equal to the number
        of function call parts of the function call turn"). Named by the calls' ids and the
        index of the turns in `request.messages`, as the Anthropic adapter names them: the
        results were due before the user's own message at `said`, else the model turn at
        `later`, else the end of the conversation."""
        if after is None:
            return  # the conversation ends with the calls: nothing answered them yet
        given = list(results)
        missing: list[tuple[str, int]] = []
        for call_id, index in calls:
            if call_id in given:
                given.remove(call_id)
            else:
                missing.append((call_id, index))
        if not missing:
            return
        if said is not None:
            due = due_before(said, "user")
        else:
            due = due_before(later, "assistant" if later is not None else None)
        raise self.invalid(missing_words(missing, due, self.profile.display_name))

    def message(self, message: Message) -> tuple[str, list[dict[str, Any]]]:
        if isinstance(message, UserMessage):
            return "user", [self.user_part(part) for part in message.content]
        if isinstance(message, AssistantMessage):
            return "model", self.model_turn(message)
        assert isinstance(message, ToolMessage)
        return "user", [self.tool_result(message)]

    def user_part(self, part: TextPart | ImagePart | DocumentPart) -> dict[str, Any]:
        if isinstance(part, TextPart):
            return {"text": part.text}
        inline = None if part.url is None else data_url(part.url)
        own, charset = part_media_type(part.media_type)
        if part.url is not None and inline is None:
            data: dict[str, Any] = {"fileUri": part.url}
            guessed = mimetypes.guess_type(part.url)[0]
            media_type = own or guessed
            if isinstance(part, ImagePart) and (own or (guessed or "").startswith("image/")):
                # Gemini refuses an image it does not read whether sent inline or by URL.
                # A URL whose name says no image type (a script, no extension) is the
                # server's to answer for, and is sent as it is.
                self.check_image(media_type)
            if media_type:
                data["mimeType"] = media_type
            return {"fileData": data}
        kind = "image" if isinstance(part, ImagePart) else "document"
        if inline is not None:
            # Checked, and sent as standard base64 alone (not the whitespace or `%3D` a data
            # URL may hold): Gemini reads `inlineData.data` as base64 ("Base64 decoding
            # failed"). A document's not marked base64 goes as its percent-decoded bytes; an
            # image's, in practice an SVG's, Gemini would not read.
            decoded = inline_data(inline, kind)
            if isinstance(decoded, str):
                raise self.invalid(decoded)
            encoded, raw = decoded
            # The URL's type and charset, else the part's. A data URL naming no type
            # (`data:;base64,...`) is text/plain by RFC 2397, but the part's own media type
            # says more; Gemini refuses an empty `mimeType`.
            media_type, charset = inline_media_type(inline, part.media_type)
            if not media_type and isinstance(part, DocumentPart):
                media_type = "text/plain"
            if not media_type:
                raise self.invalid(
                    "an image data URL that names no media type needs the part's "
                    "`media_type`, such as image/png"
                )
        else:
            raw = part.data or b""
            encoded = base64.b64encode(raw).decode("ascii")
            media_type = own
        if isinstance(part, ImagePart):
            self.check_image(media_type)
            if not raw:
                raise self.invalid(
                    f"the image holds no data, which {self.profile.display_name} cannot read"
                )
        if isinstance(part, DocumentPart) and media_type and _is_text(media_type):
            encoded = self.as_utf8(raw, encoded, media_type, charset)
        return {"inlineData": {"mimeType": media_type, "data": encoded}}

    def as_utf8(self, raw: bytes, encoded: str, media_type: str, charset: str | None) -> str:
        """Text in `charset` (given by the part's media type or its data URL's; UTF-8 where
        none is) as base64 of its UTF-8: the `mimeType` is sent without parameters, and
        Gemini reads text as UTF-8. Text is any type `_is_text` names: JSON, XML and code
        under application/* too, which may name a charset (`application/x-python;
        charset=utf-16`) as text/* does. A leading byte-order mark is no part of the text
        (`decode_text`): left out of UTF-8 too, whose bytes otherwise go as they are."""
        part = f"{'an' if media_type.startswith(('a', 'i')) else 'a'} {media_type} part"
        try:
            if text_codec(charset) == "utf-8":
                if raw.startswith(codecs.BOM_UTF8):
                    return base64.b64encode(raw[len(codecs.BOM_UTF8) :]).decode("ascii")
                return encoded
            text = decode_text(raw, charset)
        except LookupError:
            raise self.invalid(unreadable_charset(part, charset)) from None
        except UnicodeDecodeError:
            raise self.invalid(f"{part} must be text in its charset ({charset})") from None
        return base64.b64encode(text.encode("utf-8")).decode("ascii")

    def check_image(self, media_type: str | None) -> None:
        """Refuse, before sending, an image of a type Gemini does not read (it answers 400,
        "Unsupported MIME type")."""
        if media_type not in _IMAGE_TYPES:
            given = media_type or "an image of no media type"
            raise self.invalid(
                f"{self.profile.display_name} takes PNG, JPEG, WebP, HEIC and HEIF images, "
                f"not {given}"
            )

    def model_turn(self, message: AssistantMessage) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        signature: str | None = None
        unsigned = False
        for block in message.content:
            if isinstance(block, Reasoning):
                # Another endpoint's signature (Claude's, another Gemini host's, a Responses
                # item's id) is no thought signature here: Gemini would refuse it
                # ("Corrupted thought signature").
                issued = block.goes_back_to(self.degradations.provider)
                kept = _sent_back_part(block) if issued else None
                if kept is not None:
                    # Code the model ran, or its result, with its own signature: in its place.
                    parts.append(kept)
                    continue
                own = block.signature if issued else None
                if own and own.startswith(OPENAI_REASONING_ID_PREFIX):
                    own = None
                if (block.signature and not own) or (block.encrypted_content and not issued):
                    unsigned = True
                if block.text:
                    thought: dict[str, Any] = {"text": block.text, "thought": True}
                    if own:
                        thought["thoughtSignature"] = own
                    parts.append(thought)
                elif own:
                    signature = own
                continue
            if isinstance(block, TextPart | Refusal):
                if not block.text and signature is None:
                    # An empty text says nothing; one that carries a signature (Gemini 3
                    # may end a turn with it) goes back as it came.
                    continue
                part: dict[str, Any] = {"text": block.text}
            else:
                assert isinstance(block, ToolCall)
                part = {"functionCall": self.call(block)}
            if signature is not None:
                part["thoughtSignature"] = signature
                signature = None
            parts.append(part)
        if unsigned:
            self.degradations.approximate(
                RequestField.REASONING,
                f"{self.profile.display_name} takes back only the thought signatures it "
                "issued; reasoning another endpoint signed (another provider or host, or a "
                "Responses item's id) was sent without its signature, as an unsigned thought "
                "where it has text, and was left out of the conversation otherwise",
            )
        calls = [part for part in parts if "functionCall" in part]
        if (
            calls
            and self.family.thinking is Thinking.LEVEL
            and not any("thoughtSignature" in part for part in calls)
        ):
            # Gemini 3 refuses a function call of the conversation without its thought
            # signature ("Function call is missing a thought_signature"): one made by
            # another model, or kept without it, goes with the value Google gives for that.
            calls[0]["thoughtSignature"] = SKIP_SIGNATURE_CHECK
            self.degradations.approximate(
                RequestField.MESSAGES,
                "a function call without Gemini's thought signature (made by another model, "
                "or kept without it) was sent with the signature that skips its check; the "
                "model does not see the reasoning behind it",
            )
        return parts

    def call(self, block: ToolCall) -> dict[str, Any]:
        args = call_arguments(
            block,
            provider=self.profile.name,
            display=self.profile.display_name,
            field="functionCall.args",
            degradations=self.degradations,
        )
        self.call_names[block.id] = block.name
        call: dict[str, Any] = {"name": block.name, "args": args}
        if not _SYNTHETIC_ID.fullmatch(block.id):
            call = {"id": block.id, **call}
        return call

    def tool_result(self, message: ToolMessage) -> dict[str, Any]:
        name = self.call_names.get(message.tool_call_id)
        if name is None:
            raise self.invalid(
                f"the tool result for `{message.tool_call_id}` answers no tool call of an "
                f"earlier assistant turn, and {self.profile.display_name} needs the "
                "function's name"
            )
        key = "error" if message.is_error else "output"
        response: dict[str, Any] = {"name": name, "response": {key: message.content}}
        if not _SYNTHETIC_ID.fullmatch(message.tool_call_id):
            response = {"id": message.tool_call_id, **response}
        return {"functionResponse": response}

    # Schemas

    def rewrite(self, schema: dict[str, Any], subject: str, surface: SchemaSurface) -> Rewrite:
        try:
            return cached_rewrite(schema, ("gemini", surface), lambda: _rewrite(schema, surface))
        except SchemaError as error:
            raise self.invalid(f"{subject} has a schema allama cannot read: {error}") from error

    def generation(self) -> dict[str, Any]:
        """`generationConfig`: sampling, limits, stop sequences, output and thinking."""
        request = self.request
        config: dict[str, Any] = {}
        temperature = self.temperature_in_range(request.temperature)
        if temperature is not None:
            config["temperature"] = temperature
        if request.top_p is not None:
            config["topP"] = request.top_p
        if request.max_output_tokens is not None:
            config["maxOutputTokens"] = request.max_output_tokens
        if request.stop:
            stops = list(request.stop)
            if len(stops) > MAX_STOP_SEQUENCES:
                self.degradations.refuse(
                    RequestField.STOP,
                    f"{self.profile.display_name} takes at most {MAX_STOP_SEQUENCES} stop "
                    "sequences",
                    instead=f"the first {MAX_STOP_SEQUENCES} were sent",
                    code=stops_first(MAX_STOP_SEQUENCES),
                )
                stops = stops[:MAX_STOP_SEQUENCES]
            config["stopSequences"] = stops
        if request.seed is not None:
            if -(2**31) <= request.seed < 2**31:
                config["seed"] = request.seed
            else:  # `generationConfig.seed` is an int32: Gemini answers 400 to any other
                self.degradations.refuse(
                    RequestField.SEED,
                    f"{self.profile.display_name} takes a seed of 32 bits",
                    instead=f"{request.seed} was left out",
                )
        if request.logprobs is not None:
            config.update(self.logprobs(request.logprobs))
        config.update(self.output())
        thinking = self.thinking()
        if thinking is not None:
            config["thinkingConfig"] = thinking
        return config

    def temperature_in_range(self, temperature: float | None) -> float | None:
        """`temperature`, or `None` (with a warning) above what Gemini takes: sent, the whole
        request would be refused (the Gemini API and Vertex AI answer 400 past 2). (`top_p`
        outside 0 to 1 is refused when the request is made.)"""
        return self.degradations.temperature_within(
            temperature, MAX_TEMPERATURE, self.profile.display_name
        )

    def logprobs(self, top: int) -> dict[str, Any]:
        """`responseLogprobs` (and `logprobs`, the alternatives per position, 1 to 20)."""
        field = RequestField.LOGPROBS
        if self.family.logprobs is CapabilitySupport.UNSUPPORTED:
            self.degradations.refuse(field, f"{self.where} reports no log-probabilities")
            return {}
        if self.stream:
            self.degradations.refuse(
                field,
                "log-probabilities are read from whole responses, not streams; a stream "
                f"from {self.where} carries none",
            )
            return {}
        if top >= 1:
            return {"responseLogprobs": True, "logprobs": top}
        return {"responseLogprobs": True}

    def output(self) -> dict[str, Any]:
        fmt = self.request.response_format
        if fmt is None or fmt.type == "text":
            return {}
        field = RequestField.RESPONSE_FORMAT
        display = self.profile.display_name
        surface = self.family.schema
        choice = fmt.type == "choice"
        if surface is SchemaSurface.NONE:
            what = "constrained output" if choice else "JSON output"
            self.degradations.refuse(field, f"{self.where} has no {what}", code=FORMAT_NOT_SENT)
            return {}
        if choice:
            # Whether `text/x.enum` beside function declarations is refused like JSON is
            # not recorded: the provider decides.
            options = list(fmt.options or ())
            return {
                "responseMimeType": _CHOICE,
                "responseSchema": {"type": "STRING", "enum": options},
            }
        if not self.family.json_with_tools and (built_in := self.option_built_in()):
            # Not a refusal of the format alone: a forced tool in its place (an automatic
            # extraction's fallback) would be function calling beside the same tools.
            raise self.built_in_refused(built_in, "JSON output")
        if gives_tools(self.request, BODY_OPTION) and not self.family.json_with_tools:
            # The 400 is Gemini's to function declarations, the request's or the body
            # option's ("Function calling with a response mime type ... is unsupported").
            raise self.degradations.unsupported(
                field,
                f"{self.where} answers 400 to JSON output beside "
                + ("function declarations" if self.declares() else "its built-in tools"),
            )
        if fmt.type == "json":
            return {"responseMimeType": "application/json"}
        schema: dict[str, Any] = fmt.json_schema or {}
        subject = f"the response format `{fmt.name or 'response'}`"
        rewrite = self.rewrite(schema, subject, surface)
        if not rewrite.strict_representable:
            # Gemini always constrains to the schema it is given: one it cannot hold would
            # be narrower than the caller's, or refused, so it is refused here, unpaid.
            reasons = "; ".join(
                note.message for note in rewrite.notes if note.kind is WarningKind.UNSUPPORTED
            )
            raise self.degradations.unsupported(
                field, f"{display} cannot enforce {subject}: {reasons}"
            )
        apply_strict_policy(rewrite, field=field, subject=subject, degradations=self.degradations)
        key = "responseJsonSchema" if surface is SchemaSurface.JSON_SCHEMA else "responseSchema"
        return {"responseMimeType": "application/json", key: rewrite.schema}

    def thinking(self) -> dict[str, Any] | None:
        family = self.family
        effort = self.request.reasoning_effort
        field = RequestField.REASONING_EFFORT
        if effort is None:
            return None
        if effort == "none":
            if family.thinking is Thinking.NONE:
                return None  # no thinking is what this model does: nothing to send
            if family.can_disable:
                return {"thinkingBudget": 0}
            return self.least_thinking()
        if family.thinking is Thinking.NONE:
            self.degradations.refuse(field, f"{self.where} does not think")
            return None
        if family.thinking is Thinking.LEVEL:
            return {"thinkingLevel": self.level(str(effort))}
        low, high = family.budget
        wanted = THINKING_BUDGETS[str(effort)]
        budget = min(max(wanted, low), high)
        if budget != wanted:
            self.degradations.approximate(
                field,
                f"{self.where} takes a thinking budget of {low} to {high} tokens; "
                f"{budget} was sent for `{effort}`",
            )
        return {"thinkingBudget": budget}

    def least_thinking(self) -> dict[str, Any] | None:
        """For effort `none` on a family that cannot turn thinking off: its lowest level or
        budget, the nearest to none (sent nothing, the model would think at its default),
        with a warning; refused under `UnsupportedPolicy.ERROR`."""
        family = self.family
        why = f"{self.where} cannot turn thinking off"
        field = RequestField.REASONING_EFFORT
        if family.thinking is Thinking.LEVEL and family.levels:
            lowest = family.levels[0]
            self.degradations.refuse(field, why, instead=f"its lowest level, `{lowest}`, was sent")
            return {"thinkingLevel": lowest.upper()}
        if family.thinking is Thinking.BUDGET and family.budget[0] > 0:
            low = family.budget[0]
            self.degradations.refuse(
                field, why, instead=f"its lowest thinking budget, {low} tokens, was sent"
            )
            return {"thinkingBudget": low}
        self.degradations.refuse(field, why)
        return None

    def level(self, effort: str) -> str:
        levels = self.family.levels
        if effort in levels:
            return effort.upper()
        order = ("minimal", "low", "medium", "high")
        above = [level for level in levels if order.index(level) > order.index(effort)]
        sent = above[0] if above else levels[-1]
        self.degradations.approximate(
            RequestField.REASONING_EFFORT,
            f"{self.where} takes no thinking level `{effort}`; `{sent}` was sent",
        )
        return sent.upper()

    # Tools

    def tools(self) -> list[dict[str, Any]] | None:
        if not self.request.tools:
            return None
        if self.family.tools is CapabilitySupport.UNSUPPORTED:
            self.degradations.refuse(
                RequestField.TOOLS,
                f"`{self.request.model}` on {self.profile.display_name} has no function calling",
                instead="the tools were left out",
            )
            return None
        why = repeated_tool_names(self.request.tools, self.profile.display_name)
        if why is not None:
            raise self.invalid(why)
        return [{"functionDeclarations": [self.declaration(t) for t in self.request.tools]}]

    def declares(self) -> bool:
        """Whether function declarations go: the request's tools, or the body option's."""
        extra = self.request.option_json(BODY_OPTION)
        given = extra.get("tools") if isinstance(extra, dict) else None
        return bool(self.request.tools) or bool(option_tools(BODY_OPTION, given))

    def option_built_in(self) -> list[str]:
        """The built-in tools (`googleSearch`, `codeExecution`, ...) the body option's `tools`
        will send: a list goes after the request's tools, anything else only in place of
        none (`option_fields`)."""
        extra = self.request.option_json(BODY_OPTION)
        given = extra.get("tools") if isinstance(extra, dict) else None
        if given is None or (self.request.tools and not isinstance(given, list)):
            return []
        return _built_in(given)

    def built_in_refused(
        self, built_in: list[str], what: str, *, output: str = "JSON output"
    ) -> UnsupportedError:
        """The refusal, before sending and whatever the policy, of `what` (function
        declarations, JSON output, another response mime type) beside the body option's
        built-in tools on a family that answers 400 to either ("Tool use with function
        calling is unsupported", "Tool use with a response mime type ... is unsupported"),
        `output` the kind of output refused. Named on `options`, where the built-in tools
        are given: neither side is dropped, and a forced tool in place of JSON output would
        meet the same refusal."""
        names = ", ".join(f"`{name}`" for name in built_in)
        return self.degradations.unsupported(
            RequestField.OPTIONS,
            f"{self.where} answers 400 to {what} beside the built-in tools of the body option "
            f"`{BODY_OPTION}` ({names}): Gemini 2.x cannot mix built-in tools with function "
            f"calling or {output} (Gemini 3 can)",
        )

    def check_built_in(self, body: dict[str, Any], generation: dict[str, Any]) -> None:
        """Refuse the body as it would go (`built_in_refused`): built-in tools beside
        function declarations (the request's, an extraction's tool, the body option's), or
        beside a response mime type but `text/plain`: JSON output, or a decision's choice
        (`text/x.enum`), the request's or the body option's `generationConfig`'s. Gemini's
        400 names any response mime type ("Tool use with a response mime type ...")."""
        if self.family.json_with_tools:
            return
        tools = body.get("tools")
        built_in = _built_in(tools)
        if not built_in:
            return
        entries = tools if isinstance(tools, list) else [tools]
        if any(
            isinstance(tool, dict) and any(tool.get(key) for key in _DECLARATIONS)
            for tool in entries
        ):
            raise self.built_in_refused(built_in, "function declarations")
        mime = generation.get("responseMimeType")
        if mime == "application/json":
            raise self.built_in_refused(built_in, "JSON output")
        if isinstance(mime, str) and mime.strip().lower() not in ("", _PLAIN):
            what = f"the response mime type `{mime}`"
            if mime == _CHOICE:
                what = f"a choice of options (the response mime type `{_CHOICE}`)"
            output = f"a response mime type other than `{_PLAIN}`"
            raise self.built_in_refused(built_in, what, output=output)

    def declaration(self, tool: ToolDefinition) -> dict[str, Any]:
        # An object root, as the fields take: `{}` gets its `type`, a root `$ref` is
        # resolved into it, a union or a scalar is refused (`args` is always an object).
        parameters = object_parameters(tool.parameters)
        if parameters is None:
            raise self.invalid(no_object_parameters(tool.name, self.profile.display_name))
        declaration: dict[str, Any] = {"name": tool.name}
        if tool.description:
            declaration["description"] = tool.description
        if tool.strict:
            self.degradations.refuse(
                RequestField.TOOLS,
                f"{self.profile.display_name} has no strict function calling",
                instead=f"tool `{tool.name}` was sent without it",
            )
        if self.family.schema is SchemaSurface.RESPONSE_SCHEMA:
            subject = f"tool `{tool.name}`"
            rewrite = self.rewrite(parameters, subject, SchemaSurface.RESPONSE_SCHEMA)
            declaration["parameters"] = rewrite.schema
            # The OpenAPI subset drops or widens what it cannot say: the schema sent is not
            # the tool's, and each place is named.
            for note in rewrite.notes:
                self.degradations.approximate(
                    RequestField.TOOLS, f"{subject} was approximated: {note.message}"
                )
        else:
            declaration["parametersJsonSchema"] = parameters
        return declaration

    def tool_config(self) -> dict[str, Any] | None:
        request = self.request
        if request.parallel_tool_calls is not None:
            self.degradations.refuse(
                RequestField.PARALLEL_TOOL_CALLS,
                f"{self.profile.display_name} has no setting for parallel function calls",
            )
        choice = request.tool_choice
        if choice is None or self.degradations.choice_without_tools(request, BODY_OPTION):
            return None
        if self.family.tools is CapabilitySupport.UNSUPPORTED:
            return None  # the tools were left out, and said so
        config: dict[str, Any]
        if choice.mode == "tool":
            config = {"mode": "ANY", "allowedFunctionNames": [choice.name]}
        else:
            config = {"mode": {"auto": "AUTO", "none": "NONE", "required": "ANY"}[choice.mode]}
        return {"functionCallingConfig": config}

    # Everything

    def body(self) -> dict[str, Any]:
        system, contents = self.conversation()
        if system is not None and not self.family.system:
            # No system instruction on this model: its words open the first user turn.
            self.degradations.approximate(
                RequestField.SYSTEM,
                f"`{self.request.model}` on {self.profile.display_name} takes no system "
                "instruction; it was put at the start of the first user turn",
            )
            words = {"text": "\n\n".join(part["text"] for part in system["parts"])}
            if contents and contents[0]["role"] == "user":
                contents[0] = {**contents[0], "parts": [words, *contents[0]["parts"]]}
            else:
                contents.insert(0, {"role": "user", "parts": [words]})
            system = None
        for content in contents:
            # An empty text part among others is refused ("it has an empty text parameter",
            # "required oneof field 'data'"); like text of whitespace alone, it says nothing,
            # so it is left out. A turn of nothing else goes as it is: Gemini answered one
            # (a lone empty part, recorded), and without it there would be no turn.
            if content["role"] == "user":
                said = [part for part in content["parts"] if not _blank(part)]
                content["parts"] = said or content["parts"][:1]
        if not contents:
            # Gemini answers 400 ("contents is not specified"): system instructions alone,
            # or only turns left out above, are nothing to answer.
            raise self.invalid(
                f"{self.profile.display_name} needs at least one user or assistant message "
                "besides the system instructions, and the request has none left to send"
            )
        body: dict[str, Any] = {"contents": contents}
        if system is not None:
            body["systemInstruction"] = system
        tools = self.tools()
        if tools is not None:
            body["tools"] = tools
        tool_config = self.tool_config()
        if tool_config is not None:
            body["toolConfig"] = tool_config
        generation = self.generation()
        extra = self.request.option_json(BODY_OPTION)
        if isinstance(extra, dict):
            # `stream` is no field of Gemini's (answered 400): the URL says whether the
            # answer streams.
            given = option_fields(
                body,
                self.camel_option(extra),
                BODY_OPTION,
                stream=self.stream,
                degradations=self.degradations,
                no_field=self.profile.display_name,
            )
            more = given.pop("generationConfig", None)
            if isinstance(more, dict):
                merged = _merge_generation(generation, more)
                self.output_replaced(generation, merged)
                generation = merged
                self.as_sent = settings_as_sent(self.request, more, _SETTINGS)
            if "toolConfig" in given:
                body["toolConfig"] = self.merged_tool_config(tool_config, given.pop("toolConfig"))
            body.update(given)
            ours = {"systemInstruction": system, "tools": tools, "toolConfig": tool_config}
            self.check_cache(body, ours)
            # The option's declarations go after the request's, in their own tools: one name
            # in both is answered 400 ("Duplicate function declaration found").
            why = repeated_in_body(
                body,
                self.request.tools if tools is not None else (),
                self.profile.display_name,
                BODY_OPTION,
                entries=len(tools or ()),
            )
            if why is not None:
                raise self.invalid(why)
            self.check_built_in(body, generation)
        if generation:
            body["generationConfig"] = generation
        return body

    def check_cache(self, body: dict[str, Any], ours: dict[str, Any]) -> None:
        """Refuse, before sending and whatever the policy, cached content beside a system
        instruction, tools or a tool config: Gemini answers 400 to any of them ("CachedContent
        can not be used with GenerateContent request setting system_instruction, tools or
        tool_config"), which go into the cache when it is made. Neither side is dropped:
        without the cache the request is another, without the others the model answers
        without the instructions or tools the caller gave. Named on the request's field, or
        on `options` where the body option gave it (`ours` holds allama's own)."""
        if not body.get("cachedContent"):
            return
        for key, (field, what) in _NOT_WITH_CACHE.items():
            if not body.get(key):
                continue
            if ours[key]:
                beside = (
                    f"{what} beside cached content (`cachedContent` of the body option "
                    f"`{BODY_OPTION}`)"
                )
            else:
                field = RequestField.OPTIONS
                beside = f"`{key}` beside `cachedContent` in the body option `{BODY_OPTION}`"
            raise self.degradations.unsupported(
                field,
                f"{self.where} answers 400 to {beside}: the system instructions, tools and "
                "tool config go into the cache when it is made",
            )

    def camel_option(self, extra: dict[str, Any]) -> dict[str, Any]:
        """The body option with Google's snake_case field names (`generation_config`,
        `response_mime_type`) spelled as allama's camelCase ones, so that each field is
        merged with allama's and sent once; the message fields are renamed, never the
        property names of a schema nor the keys of a map. Both spellings of one field are
        refused: which one Gemini reads is not said."""
        renamed = self.camel(extra, "")
        for key in _CAMEL_DEEP:
            value = renamed.get(key)
            if isinstance(value, dict):
                renamed[key] = self.camel_deep(value, key)
        items = renamed.get("safetySettings")
        if isinstance(items, list):
            renamed["safetySettings"] = [
                self.camel_deep(item, "safetySettings") if isinstance(item, dict) else item
                for item in items
            ]
        return renamed

    def camel_deep(self, message: dict[str, Any], where: str) -> dict[str, Any]:
        """`message` and the messages in it renamed (`camel`), but for schemas and maps."""
        renamed = self.camel(message, where)
        for key, value in renamed.items():
            if isinstance(value, dict) and key not in _NOT_MESSAGES:
                renamed[key] = self.camel_deep(value, f"{where}.{key}")
            elif isinstance(value, list) and key not in _NOT_MESSAGES:
                renamed[key] = [
                    self.camel_deep(item, f"{where}.{key}") if isinstance(item, dict) else item
                    for item in value
                ]
        return renamed

    def camel(self, message: dict[str, Any], where: str) -> dict[str, Any]:
        """`message` with its own keys in camelCase."""
        renamed: dict[str, Any] = {}
        spelled: dict[str, str] = {}
        for key, value in message.items():
            name = _camel_case(key)
            if name in spelled:
                at = f" in `{where}`" if where else ""
                raise self.invalid(
                    f"the body option `{BODY_OPTION}` gives `{spelled[name]}` and `{key}`{at}, "
                    "one field spelled two ways; give one of them"
                )
            spelled[name] = key
            renamed[name] = value
        return renamed

    def output_replaced(self, ours: dict[str, Any], merged: dict[str, Any]) -> None:
        """Say where the body option's `generationConfig` changed the output allama asked
        for (the caller's wins): an extraction's record then shows its schema not sent."""
        if not any(key in ours for key in _OUTPUT):
            return
        changed = [key for key in _OUTPUT if merged.get(key) != ours.get(key)]
        if changed:
            # Named by the caller's own field (`_responseJsonSchema`), not allama's it took out.
            given = [key for key in changed if key in merged]
            where = f"generationConfig.{(given or changed)[0]}"
            self.warn_replaced(RequestField.RESPONSE_FORMAT, where, None)

    def merged_tool_config(self, ours: dict[str, Any] | None, theirs: Any) -> Any:
        """The body option's `toolConfig` merged into allama's (`retrievalConfig`, Google
        Maps grounding's location, beside the forced call); its own `functionCallingConfig`
        replaces allama's, with a warning that the call is no longer what the request chose."""
        if ours is None:
            return theirs
        if not isinstance(theirs, dict):
            self.warn_replaced(RequestField.TOOL_CHOICE, "toolConfig", theirs)
            return theirs
        merged = {**ours, **theirs}
        calling = merged.get("functionCallingConfig")
        if calling != ours["functionCallingConfig"]:
            where = "toolConfig.functionCallingConfig"
            self.warn_replaced(RequestField.TOOL_CHOICE, where, calling)
        return merged

    def warn_replaced(self, field: RequestField, where: str, theirs: Any) -> None:
        what = f"`{where}` of the body option `{BODY_OPTION}`"
        self.degradations.warn(replaced_by_option(self.request, field, what, theirs))


_DECLARATIONS = ("functionDeclarations", "function_declarations")
"""A tool's function declarations, by both spellings (`_gemini_tools`)."""

_CHOICE = "text/x.enum"
"""The response mime type of Gemini's enum output: a `choice` response format."""
_PLAIN = "text/plain"
"""The response mime type of plain text, the only one Gemini 2.x takes beside its built-in
tools."""


def _built_in(tools: Any) -> list[str]:
    """The built-in tools among `tools` as a body sends them (a list, or one tool): each
    field of a tool that holds an object, as every built-in tool is (`googleSearch: {}`,
    `codeExecution`, `urlContext`, kinds added later), by name, once each, in order. What
    has not that shape is no tool of Gemini's: the provider answers for it."""
    names: list[str] = []
    for tool in tools if isinstance(tools, list) else [tools]:
        for key, value in tool.items() if isinstance(tool, dict) else ():
            if isinstance(value, dict) and key not in _DECLARATIONS and key not in names:
                names.append(key)
    return names


_NOT_WITH_CACHE = {
    "systemInstruction": (RequestField.SYSTEM, "system instructions"),
    "tools": (RequestField.TOOLS, "tools"),
    "toolConfig": (RequestField.TOOL_CHOICE, "a tool choice (`toolConfig`)"),
}
"""The fields Gemini takes no `cachedContent` beside, by the request field each stands for
and how it is named."""

_CAMEL_DEEP = ("generationConfig", "toolConfig", "systemInstruction")
"""The body option's messages renamed all the way down (`_NOT_MESSAGES` aside), besides the
top level and each of `safetySettings`: those merged with allama's, or sent in their place."""

_NOT_MESSAGES = frozenset(
    {
        # Schemas: their keys are property names and keywords.
        "responseSchema",
        "responseJsonSchema",
        "_responseJsonSchema",
        "schema",  # `responseFormat.text.schema`
        "parameters",
        "parametersJsonSchema",
        "response",
        # A function call's arguments: the caller's own names.
        "args",
    }
)
"""Fields (camelCase) whose keys are not field names of Gemini's messages: left as given."""

_SNAKE = re.compile(r"(?<=[a-z0-9])_([a-z0-9])")


def _camel_case(name: str) -> str:
    """A proto field name in the lowerCamelCase of its JSON name (`response_mime_type` is
    `responseMimeType`); a leading underscore stays (`_response_json_schema`)."""
    return _SNAKE.sub(lambda found: found[1].upper(), name) if "_" in name else name


_SCHEMAS = ("responseSchema", "responseJsonSchema", "_responseJsonSchema", "responseFormat")
"""The `generationConfig` fields that carry a response schema, by each of Gemini's names:
the OpenAPI one, the JSON Schema one (and its older underscored name), and the newer
`responseFormat` (`{"text": {"mimeType", "schema"}}`)."""

_OUTPUT = ("responseMimeType", *_SCHEMAS)
"""The `generationConfig` fields that carry the response format."""

_OUR_SCHEMAS = ("responseSchema", "responseJsonSchema")
"""The fields allama sends a response schema in."""

_SETTINGS = {
    "temperature": "temperature",
    "top_p": "topP",
    "max_output_tokens": "maxOutputTokens",
    "seed": "seed",
    "stop": "stopSequences",
}
"""The request settings in `generationConfig`, by `ChatRequest` field (`settings_as_sent`)."""

_THINKING_AMOUNT = ("thinkingBudget", "thinkingLevel")
"""How much to think: Gemini takes one of the two, not both."""


def _merge_generation(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """The caller's `generationConfig` merged into allama's, the caller's keys winning (a
    response schema of the caller's, under any of its names, in place of allama's), and
    `thinkingConfig` one level deeper: `{"includeThoughts": true}` there keeps the budget or
    level `reasoning_effort` gave, unless the caller names a budget or level of its own."""
    merged = {**ours, **theirs}
    if any(key in theirs for key in _SCHEMAS):
        # The caller's schema, under whichever of Gemini's names, replaces allama's: sent
        # beside it, Gemini would get two schemas for one answer.
        for key in _OUR_SCHEMAS:
            if key not in theirs:
                merged.pop(key, None)
    our_thinking, their_thinking = ours.get("thinkingConfig"), theirs.get("thinkingConfig")
    if isinstance(our_thinking, dict) and isinstance(their_thinking, dict):
        if any(key in their_thinking for key in _THINKING_AMOUNT):
            our_thinking = {k: v for k, v in our_thinking.items() if k not in _THINKING_AMOUNT}
        merged["thinkingConfig"] = {**our_thinking, **their_thinking}
    return merged


def _rewrite(schema: dict[str, Any], surface: SchemaSurface) -> Rewrite:
    # A dialect is loaded when a schema is first rewritten in it (rewrites are cached).
    from allama.schema._dialects._gemini import gemini_json_schema, gemini_response_schema

    if surface is SchemaSurface.JSON_SCHEMA:
        return gemini_json_schema(schema)
    return gemini_response_schema(schema)


def encode_request(
    request: ChatRequest,
    profile: GeminiProfile,
    family: GeminiFamily,
    *,
    url: str,
    headers: Mapping[str, str],
    params: Mapping[str, str] | None = None,
    stream: bool = False,
    degradations: Degradations,
) -> HttpRequest:
    """The HTTP request for `request`. The body is the same streamed or not (`stream`): on
    Gemini the URL says which; only log-probabilities are refused in a stream.

    Raises `UnsupportedError` (stage `BEFORE_SENDING`) for what Gemini cannot honour under
    `UnsupportedPolicy.ERROR`, and for a response schema it cannot enforce or cached content
    beside system instructions or tools under any policy; `InvalidRequestError` for a
    conversation it cannot take (tool call arguments that are not an object, a tool result
    answering no call, a call with no result before the next user turn, no message but
    system ones, a data URL that is not valid base64, an image of another type or of no
    data), for a tool whose parameters are not an object, and for function declarations of
    one name (the body option's among them).
    """
    encoder = _Encoder(request, profile, family, degradations, stream)
    body = encoder.body()
    return HttpRequest("POST", url, headers, body, params or {}, as_sent=encoder.as_sent)


def _sent_back_part(block: Reasoning) -> dict[str, Any] | None:
    """The part a text-less `Reasoning` block carries as its encrypted content (the
    decoder's for `SENT_BACK_PARTS`: an `executableCode` or `codeExecutionResult` part as
    JSON), or `None` when it carries none (another provider's encrypted reasoning)."""
    content = block.encrypted_content
    if block.text or block.signature or not content or not content.startswith("{"):
        return None
    try:
        part = json.loads(content)
    except ValueError:
        return None
    if not isinstance(part, dict) or not part.keys() & SENT_BACK_PARTS:
        return None
    return part


def _blank(part: dict[str, Any]) -> bool:
    """A text part of nothing but whitespace (and nothing else, such as a signature)."""
    text = part.get("text")
    return len(part) == 1 and isinstance(text, str) and not text.strip()


def _user_turn(
    calls: list[tuple[str, int]],
    responses: list[tuple[str, dict[str, Any]]],
    words: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """The contents of one user turn: its function responses alone in the first, in the
    order of the calls they answer (`calls`, of the model turn before; Gemini pairs them by
    position), and what else it says in a second. Gemini answers 400 to a function-response
    content holding other parts ("Requests ending with a model turn are not supported"
    beside text; an image beside them is refused too), and takes two user contents in a
    row. Words of nothing but whitespace after the responses say nothing: left out."""
    turn: list[dict[str, Any]] = []
    if responses:
        position: dict[str, int] = {}
        for at, (call_id, _) in enumerate(calls):
            position.setdefault(call_id, at)
        ordered = sorted(responses, key=lambda response: position.get(response[0], len(calls)))
        turn.append({"role": "user", "parts": [part for _, part in ordered]})
    if words and not (responses and all(_blank(part) for part in words)):
        turn.append({"role": "user", "parts": words})
    return turn
