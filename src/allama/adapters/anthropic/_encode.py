"""A `ChatRequest` to the HTTP request of `POST /v1/messages`, plus warnings.

What the model family cannot honour goes through `Degradations` (dropped with a warning
under `UnsupportedPolicy.WARN`, refused before sending under `ERROR`). Two things are
refused before sending whatever the policy, because Anthropic would only answer 400: a
response format whose schema its grammar cannot hold (so that automatic extraction falls
back to a forced tool, as the seed describes), a tool call whose arguments are not a
JSON object, and a tool call the next user turn gives no result for.

The Messages API reports no log-probabilities, and has no plain-text choice output:
`request.logprobs` and a `choice` response format are refused under the policy.

Thinking and a forced tool do not go together on Anthropic ("Thinking may not be enabled
when tool_choice forces tool use"): the forced tool wins, since it is what constrains the
output, and thinking is left off with a warning on `reasoning_effort` (and turned off
explicitly on the families that think unless told not to). The same holds for thinking, a
forced `tool_choice` and sampling fields given through the body option (`BODY_OPTION`).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, TypeGuard

from allama._degradations import FORMAT_NOT_SENT, STOPS_BLANK, Degradations, gives_tools
from allama.adapters._answered import (
    due_before,
    extra_result,
    extra_words,
    missing_words,
    moved_after_results,
    said_before_results,
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
    ANTHROPIC_IDS,
    anthropic_server_tool,
    repeated_in_body,
    repeated_tool_names,
    with_tool_ids,
)
from allama.adapters.anthropic._capabilities import ClaudeFamily, Thinking
from allama.adapters.anthropic._profile import AnthropicProfile
from allama.errors import InvalidRequestError
from allama.schema._errors import SchemaError
from allama.schema._inline import (
    no_object_parameters,
    object_parameters,
    without_root_combinators,
)
from allama.schema._limits import measure
from allama.schema._rewrite import Rewrite, SchemaNote, apply_strict_policy
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
    Warning,
    WarningKind,
)
from allama.types._content import OPENAI_REASONING_ID_PREFIX
from allama.types._data_urls import (
    UnreadablePart,
    data_url,
    document_text,
    inline_data,
    inline_document,
    inline_media_type,
    part_media_type,
)
from allama.types._response import RESUME_KEY

__all__ = [
    "BODY_OPTION",
    "DEFAULT_MAX_TOKENS",
    "THINKING_BUDGETS",
    "encode_request",
]

BODY_OPTION = "anthropic"
"""Request option namespace whose JSON object is merged into the body, for fields allama has no
name for (`request.with_option_json("anthropic", {"top_k": 40})`). Its fields replace
allama's, except `output_config`, whose keys are added to allama's (`format`, `effort`); its
own `output_config.format` or `tool_choice` is sent with a warning on the field. Its
`stream` is not sent where it differs from the call's (`chat` reads no stream), with a
warning on `options`; nor, with a warning on `options`, is its `thinking` beside a tool call
allama forces, or its `temperature`, `top_k` or `top_p` beside the thinking
`reasoning_effort` turns on (Anthropic refuses either pair; the option's own pair goes with
a warning). On a family that takes `temperature` or `top_p` one at a time, its `temperature`
or `top_p` goes in place of the request's other one, which is left out with a warning on the
request's field; its own pair goes as given. Its `tool_choice` forcing a call is not sent
without tools, or to a family that cannot be forced, with a warning on `options`; nor is its
`output_config.effort` at a level where the family refuses thinking turned off, beside
allama's `disabled` (Sonnet 5.5's `between_tools`). Its thinking budget is counted in the
`max_tokens` allama fills in, and lowered below the request's (or the family's limit), with
a warning on `options`, unless an `interleaved-thinking-*` beta lets it exceed `max_tokens`;
one below 1024, the least Anthropic takes, is raised to 1024 where that fits, with a warning
on `options`. Below the option's own `max_tokens` fits the budget `reasoning_effort` gives.
Its `thinking` or `output_config.effort` in place of what `reasoning_effort` asks goes with
a warning on `reasoning_effort`."""

DEFAULT_MAX_TOKENS = 16_384
"""`max_tokens` when the request sets none (Anthropic requires it): this, or the family's
output limit if lower, plus the thinking budget when thinking is on."""

THINKING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24_576}
"""`thinking.budget_tokens` per reasoning effort, on families that think with a budget."""

MAX_STRICT_TOOLS = 20
MAX_OPTIONAL = 24
MAX_UNIONS = 16

_NAMESPACE = "anthropic"
"""The `provider_data` namespace the decoder writes a turn's `RESUME_KEY` to:
`{"paused": bool, "blocks": [...]}` for a turn that goes back whole (one holding server
tool blocks, paused, or whose code waits on tool calls; an older version wrote the blocks
alone, as a list, for a paused turn), or `{"container": ..., "blocks": [...]}` for a turn that
ran in a code execution container (`blocks` when it goes back whole); a turn that goes back
whole names the provider that issued it there too (`"issuer"`, where the decoder was told
it), and goes back whole to that provider alone; a paused one says so (`"paused": true`)."""
_ISSUER = "issuer"
_PAUSED = "paused"

_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})

_PROPERTY_KEY_PATTERN = "^[a-zA-Z0-9_.-]{1,64}$"
"""The keys Anthropic takes in a tool's `input_schema.properties`, as its 400 words them."""
_PROPERTY_KEY = re.compile(_PROPERTY_KEY_PATTERN.strip("^$"))

_EXTRACTION_TOOL = "submit_structured_output"
"""The tool a forced-tool extraction names in `tool_choice` (`allama.extract.EXTRACTION_TOOL`,
a layer above this one: a test holds the two equal)."""


@dataclass(frozen=True, slots=True)
class _Measured(Rewrite):
    """A rewrite with what its schema adds to the per-request limits, counted once when it
    is made: rewrites are cached, so the same one is sent call after call."""

    optional: int = 0
    unions: int = 0


class _Encoder:
    def __init__(
        self,
        request: ChatRequest,
        profile: AnthropicProfile,
        family: ClaudeFamily,
        degradations: Degradations,
        *,
        stream: bool,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.request = request
        self.profile = profile
        self.family = family
        self.degradations = degradations
        self.stream = stream
        self.where = f"`{request.model}` on {profile.display_name}"
        extra = request.option_json(BODY_OPTION)
        self.option: dict[str, Any] = extra if isinstance(extra, dict) else {}
        self.withheld: set[str] = set()  # the option's fields not sent: Anthropic would refuse
        self.fitted: dict[str, Any] = {}  # the option's fields sent otherwise, with a warning
        betas = _betas(headers or {})
        longer = family.longer_output
        # The family's output limit, or the one its own beta raises it to (no other does).
        self.max_output = longer[1] if longer and longer[0] in betas else family.max_output
        # Interleaved thinking counts the budget over the turn: it may exceed `max_tokens`.
        self.interleaved = any(_INTERLEAVED.fullmatch(beta) for beta in betas)
        self.forces_tool = self.forcing()
        self.optional = 0
        self.unions = 0
        # The last turn sent back whole to be continued (paused, or its code waits).
        self.resuming: AssistantMessage | None = None
        self.paused_last = False  # the conversation ends in that turn
        self.container: str | None = None  # the container the last turn's code waits in
        self.as_sent: dict[str, Any] = {}  # settings sent otherwise than the request gives

    def forcing(self) -> bool:
        """Whether the body forces a tool call. The option's `tool_choice` goes in place of
        allama's, under the rules of the request's own: neither is sent forcing a call
        without tools given, nor where the family cannot be forced (allama's goes as `auto`
        there; the option's is not sent, with a warning on `options`, refused under
        `UnsupportedPolicy.ERROR`), so neither then counts as forcing one."""
        request = self.request
        tools = gives_tools(request, BODY_OPTION)
        unforced = self.family.forced_tool is CapabilitySupport.UNSUPPORTED
        if "tool_choice" in self.option:
            theirs = self.option["tool_choice"]
            if not _forces(theirs):
                return False
            if tools and not unforced:
                return True
            why = (
                f"{self.where} cannot be forced to call a tool"
                if unforced
                else "the request gives no tools to call"
            )
            self.degradations.refuse(
                RequestField.OPTIONS,
                f"{_option_field('tool_choice')} ({_json(theirs)}) forces a tool call, and {why}",
                instead="it was not sent",
            )
            self.withheld.add("tool_choice")
        choice = request.tool_choice
        return choice is not None and choice.mode in ("required", "tool") and tools and not unforced

    # Messages

    def conversation(self) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]]]:
        """The `system` blocks and the `messages`, consecutive turns of a role merged (a
        user turn after tool calls beginning with their results)."""
        system: list[dict[str, Any]] = []
        turns: list[dict[str, Any]] = []
        made_of: list[list[int]] = []  # each turn's messages, by index in the request's
        moved = False
        said_before: list[int] = []  # user messages sent after a tool result given later
        sent = with_tool_ids(self.request.messages, ANTHROPIC_IDS)
        for index, message in enumerate(sent):
            if isinstance(message, SystemMessage | DeveloperMessage):
                if message.content.strip():  # whitespace alone is refused, and says nothing
                    system.append({"type": "text", "text": message.content})
                moved = moved or bool(turns)
                continue
            role, blocks = self.message(message)
            self.paused_last = message is self.resuming
            if not blocks:
                continue
            if turns and turns[-1]["role"] == role:
                turns[-1]["content"].extend(blocks)
                made_of[-1].append(index)
            else:
                turns.append({"role": role, "content": blocks})
                made_of.append([index])
        for at, (before, turn) in enumerate(pairwise(turns)):
            if turn["role"] == "user" and _uses_tools(before):
                turn["content"] = _results_first(turn["content"])
                said_before.extend(said_before_results(made_of[at + 1], sent))
                # Due before the turn's first message of the user's own, else the next
                # assistant turn, else the end of the conversation.
                own = [i for i in made_of[at + 1] if isinstance(sent[i], UserMessage)]
                due = due_before(own[0], "user") if own else None
                if due is None:
                    later = made_of[at + 2][0] if at + 2 < len(made_of) else None
                    due = due_before(later, "assistant" if later is not None else None)
                self.answered(before, turn, sent, made_of[at], due)
        # A result beyond its turn's calls: "each tool_use must have a single result", or
        # "unexpected `tool_use_id` found in `tool_result` blocks" (one of another turn's).
        extra = extra_result(self.request.messages, merged=True)
        if extra is not None:
            raise self.invalid(extra_words(extra, self.profile.display_name))
        if moved:
            self.degradations.approximate(
                RequestField.SYSTEM,
                f"{self.profile.display_name} takes system instructions only before the "
                "conversation; those given later were moved there",
            )
        if said_before:
            self.degradations.approximate(
                RequestField.MESSAGES,
                f"{self.profile.display_name} takes a user turn after tool calls only with "
                f"their results first; {moved_after_results(said_before)}",
            )
        said = [
            m for m in self.request.messages if not isinstance(m, SystemMessage | DeveloperMessage)
        ]
        if (
            said
            and isinstance(said[-1], UserMessage)
            and (not turns or turns[-1]["role"] != "user")
        ):
            # Left out, the user's last words (whitespace alone) would leave the assistant's
            # turn last, to be continued rather than answered.
            raise self.invalid(
                "the last user message holds nothing but whitespace, which "
                f"{self.profile.display_name} refuses; without it the model would continue "
                "its own last turn"
            )
        return system or None, turns

    def answered(
        self,
        calls: dict[str, Any],
        turn: dict[str, Any],
        sent: Sequence[Message],
        made_of: list[int],
        due: str,
    ) -> None:
        """Refuse tool calls the user's next turn gives no result for: Anthropic answers 400
        ("tool_use ids were found without tool_result blocks immediately after"). Named by
        the caller's ids and the index of the turns in `request.messages`; `due`: the turn
        the results were due before, in words (`due_before`)."""
        results = {block["tool_use_id"] for block in turn["content"] if _is(block, "tool_result")}
        missing = [
            block["id"]
            for block in calls["content"]
            if _is(block, "tool_use") and block["id"] not in results
        ]
        if not missing:
            return
        given: dict[str, tuple[str, int]] = {}  # an id as sent: the caller's, and its turn
        for index in made_of:
            message = sent[index]
            if isinstance(message, AssistantMessage):
                own = self.request.messages[index]
                assert isinstance(own, AssistantMessage)
                for call, asked in zip(message.tool_calls, own.tool_calls, strict=True):
                    given.setdefault(call.id, (asked.id, index))
        named = [given.get(call_id, (call_id, made_of[0])) for call_id in missing]
        raise self.invalid(missing_words(named, due, self.profile.display_name))

    def message(self, message: Message) -> tuple[str, list[dict[str, Any]]]:
        if isinstance(message, UserMessage):
            # An empty text block is refused ("text content blocks must be non-empty"); it
            # says nothing, so it is left out (and a message of nothing else with it).
            parts = message.content
            return "user", [self.user_part(p) for p in parts if not _empty_text(p)]
        if isinstance(message, AssistantMessage):
            return "assistant", self.assistant(message)
        assert isinstance(message, ToolMessage)
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
        if message.content.strip():  # a result of nothing is sent with no content: text
            result["content"] = message.content  # blocks "must contain non-whitespace text"
        if message.is_error:
            result["is_error"] = True
        return "user", [result]

    def user_part(self, part: TextPart | ImagePart | DocumentPart) -> dict[str, Any]:
        if isinstance(part, TextPart):
            return {"type": "text", "text": part.text}
        if isinstance(part, ImagePart):
            return {"type": "image", "source": self.image_source(part)}
        document: dict[str, Any] = {"type": "document", "source": self.document_source(part)}
        if part.title:
            document["title"] = part.title
        return document

    def document_source(self, part: DocumentPart) -> dict[str, Any]:
        inline = None if part.url is None else data_url(part.url)
        media_type, charset = part_media_type(part.media_type)
        if part.url is not None and inline is None:
            if media_type not in ("", "application/pdf"):
                # A URL source is read as a PDF: a text file there would be refused.
                raise self.invalid(
                    f"{self.profile.display_name} takes a document by URL only as a PDF, not "
                    f"{media_type}; send the text itself"
                )
            return {"type": "url", "url": part.url}
        if inline is not None:  # a data URL: its bytes, which a URL source would not take
            found = inline_document(inline, part.media_type)
            if isinstance(found, str):
                raise self.invalid(found)
            data, media_type, charset = found
        else:
            data = part.data or b""
        if media_type == "application/pdf":
            encoded = base64.b64encode(data).decode("ascii")
            return {"type": "base64", "media_type": "application/pdf", "data": encoded}
        if media_type == "text/plain":
            return {"type": "text", "media_type": "text/plain", "data": self.text(data, charset)}
        raise self.invalid(
            f"{self.profile.display_name} takes PDF and plain-text documents, not "
            f"{media_type or 'one of no media type'}"
        )

    def text(self, data: bytes, charset: str | None) -> str:
        """A text/plain document's bytes as text, read in its `charset` (UTF-8 where the
        part names none): Anthropic takes the text itself."""
        try:
            return document_text(data, charset)
        except UnreadablePart as error:
            raise self.invalid(str(error)) from None

    def image_source(self, part: ImagePart) -> dict[str, Any]:
        inline = None if part.url is None else data_url(part.url)
        if part.url is not None and inline is None:
            return {"type": "url", "url": part.url}
        if inline is not None:
            media_type = inline_media_type(inline, part.media_type)[0]  # else the part's
            # Checked as a document's is, and sent as the standard base64 Anthropic takes as
            # `data`, not with the whitespace, `%3D` or URL-safe `-_` a data URL may hold.
            decoded = inline_data(inline, "image")
            if isinstance(decoded, str):
                raise self.invalid(decoded)
            data, raw = decoded
        else:
            media_type = part_media_type(part.media_type)[0]
            raw = part.data or b""
            data = base64.b64encode(raw).decode("ascii")
        if media_type not in _IMAGE_TYPES:
            raise self.invalid(
                f"{self.profile.display_name} takes JPEG, PNG, GIF and WebP images, "
                f"not {media_type or 'one of no media type'}"
            )
        if not raw:
            raise self.invalid(
                f"the image holds no data, which {self.profile.display_name} refuses"
            )
        return {"type": "base64", "media_type": media_type, "data": data}

    def assistant(self, message: AssistantMessage) -> list[dict[str, Any]]:
        encoded: list[dict[str, Any] | None] = []  # one for each block, `None` left out
        unsigned = False
        for block in message.content:
            wire: dict[str, Any] | None = None
            if isinstance(block, Reasoning):
                if not block.goes_back_to(self.degradations.provider):
                    unsigned = True  # signed by another provider (a Gemini thought signature)
                elif block.signature and block.signature.startswith(OPENAI_REASONING_ID_PREFIX):
                    unsigned = True  # a Responses item's id and content, not Anthropic's
                elif block.signature:
                    wire = {
                        "type": "thinking",
                        "thinking": block.text,
                        "signature": block.signature,
                    }
                elif block.encrypted_content and not block.text:
                    wire = {"type": "redacted_thinking", "data": block.encrypted_content}
                else:
                    unsigned = True
            elif isinstance(block, TextPart | Refusal):
                if block.text.strip():  # "text content blocks must contain non-whitespace text"
                    wire = {"type": "text", "text": block.text}
            else:
                assert isinstance(block, ToolCall)
                wire = {
                    "type": "tool_use",
                    "id": block.id,
                    "name": block.name,
                    "input": self.input(block),
                }
            encoded.append(wire)
        if unsigned:
            self.degradations.approximate(
                RequestField.REASONING,
                f"{self.profile.display_name} takes back only the reasoning it signed; "
                "reasoning without its signature (unsigned, or another provider's) was left "
                "out of the conversation",
            )
        layout = self.resumed(message)
        if layout is None:
            return [wire for wire in encoded if wire is not None]
        if _continued(message, layout):
            self.resuming = message
        # A turn holding server tool blocks goes back whole, in its order, its server blocks
        # and a call's `caller` verbatim: that is how Anthropic continues a paused turn (or
        # code waiting on tool calls), and how the model goes on from its searches' results.
        blocks = []
        for item in layout:
            if isinstance(item, int):
                wire = encoded[item]
            elif "type" in item:
                wire = item
            else:
                wire = encoded[item["index"]]
                if wire is not None:
                    wire = {**wire, **{k: v for k, v in item.items() if k != "index"}}
            if wire is not None:
                blocks.append(wire)
        return blocks

    def resumed(self, message: AssistantMessage) -> list[int | dict[str, Any]] | None:
        """The order of the blocks of a turn that goes back whole (each of `content` by its
        index, with the `caller` of a call made from code execution, each server block
        verbatim), when `message` is one, this provider issued it (`issued`), and it still
        holds the content it was given with.

        Notes the container of the latest turn whose code waits on its tool calls: the
        request names it (Anthropic continues that code only there), unless the `anthropic`
        option names its own. A finished turn's container is not named: it expires, and a
        request naming an expired one is refused (name one to keep its files, by the option).
        """
        resume = message.provider_data.get(_NAMESPACE, {}).get(RESUME_KEY)
        layout = resume
        self.container = None
        if isinstance(resume, dict):
            layout = resume.get("blocks")
        if layout is None:
            return None  # a finished turn: its container is not named, wherever it goes
        if not self.issued(message, resume):
            self.degradations.approximate(
                RequestField.MESSAGES,
                f"{self.profile.display_name} takes back server tool blocks only in the turns "
                "it issued; another provider's turn holding some (a server tool's calls and "
                "results, in a finished turn, a paused one, or one whose code execution waits "
                "on tool calls) was sent without its server tool blocks and container",
            )
            return None
        if isinstance(resume, dict):
            container = resume.get("container")
            waits = isinstance(layout, list) and any(
                isinstance(item, dict) and "index" in item for item in layout
            )
            if waits and isinstance(container, dict):
                named = container.get("id")
                self.container = named if isinstance(named, str) else None
        if _fits(layout, len(message.content)):
            return layout
        self.degradations.approximate(
            RequestField.MESSAGES,
            "a turn with server tool blocks (a server tool's calls and results, in a finished "
            "turn, a paused one, or one whose code execution waits on tool calls) no longer "
            "holds the content it came with; it was sent without its server tool blocks, so "
            "the model neither goes on from their results nor continues the turn",
        )
        return None

    def issued(self, message: AssistantMessage, resume: Any) -> bool:
        """Whether this provider issued the turn whose server blocks and container `resume`
        holds (they go back there alone, as signed reasoning does): the provider the decoder
        recorded, and the issuer of the turn's signed reasoning (`Reasoning.goes_back_to`,
        which tells hosts apart). A turn that names neither (kept by an older version) goes
        anywhere, as before."""
        provider = self.degradations.provider
        recorded = resume.get(_ISSUER) if isinstance(resume, dict) else None
        if isinstance(recorded, str) and recorded != provider:
            return False
        return all(
            block.goes_back_to(provider)
            for block in message.content
            if isinstance(block, Reasoning) and (block.signature or block.encrypted_content)
        )

    def input(self, call: ToolCall) -> Any:
        return call_arguments(
            call,
            provider=self.profile.name,
            display=self.profile.display_name,
            field="tool_use.input",
            degradations=self.degradations,
        )

    def invalid(self, why: str) -> InvalidRequestError:
        return InvalidRequestError(why).mark_authored().with_provider(self.profile.name)

    def prefill(self, messages: list[dict[str, Any]], *, constrained: bool, thinking: bool) -> None:
        """Drop a last assistant turn that the model or the request cannot continue."""
        if not messages or messages[-1]["role"] != "assistant":
            return
        why = None
        if not self.family.prefill:
            why = f"{self.where} does not continue a last assistant message (prefill)"
        elif constrained:
            why = f"{self.profile.display_name} does not continue a last assistant message "
            why += "under `output_config.format`"
        elif thinking:
            why = f"{self.profile.display_name} does not continue a last assistant message "
            why += "with thinking on"
        # A paused turn (or one whose code waits) is continued as sent; any other is a
        # prefill, a finished turn holding server tool blocks among them.
        if why is not None and not self.paused_last:
            self.degradations.refuse(RequestField.MESSAGES, why, instead="it was left out")
            messages.pop()
            return
        trimmed = False
        while messages and messages[-1]["role"] == "assistant":
            content = messages[-1]["content"]
            block: dict[str, Any] = content[-1]
            text = block.get("text") if block.get("type") == "text" else None
            if not isinstance(text, str) or text == text.rstrip():
                break
            trimmed = True  # "final assistant content cannot end with trailing whitespace"
            if text.rstrip():
                content[-1] = {**block, "text": text.rstrip()}
                break
            content.pop()
            if not content:
                messages.pop()
        if trimmed:
            self.degradations.approximate(
                RequestField.MESSAGES,
                "the last assistant message (prefill) was sent without the whitespace it "
                "ends with, which Anthropic refuses",
            )

    # Schemas

    def rewrite(self, schema: dict[str, Any], subject: str) -> Rewrite:
        profile = self.profile
        try:
            return cached_rewrite(
                schema,
                ("anthropic", profile.verified, profile.display_name),
                lambda: self._rewrite(schema),
            )
        except SchemaError as error:
            raise self.invalid(f"{subject} has a schema allama cannot read: {error}") from error

    def _rewrite(self, schema: dict[str, Any]) -> Rewrite:
        # The dialect is loaded when a schema is first rewritten (rewrites are cached).
        from allama.schema._dialects._anthropic import anthropic

        rewrite = anthropic(schema)
        notes = rewrite.notes
        if not self.profile.verified:
            unverified = SchemaNote(
                WarningKind.APPROXIMATED,
                "/",
                f"the schema at `/` is sent to {self.profile.display_name}, which does not say "
                "whether it enforces it as Anthropic does",
            )
            notes = (*notes, unverified)
        size = measure(rewrite.schema)
        return _Measured(rewrite.schema, notes, rewrite.dropped, size.optional, size.unions)

    def count(self, rewrite: Rewrite) -> None:
        if isinstance(rewrite, _Measured):
            self.optional += rewrite.optional
            self.unions += rewrite.unions
            return
        size = measure(rewrite.schema)
        self.optional += size.optional
        self.unions += size.unions

    def over_limits(self) -> str | None:
        if self.optional > MAX_OPTIONAL:
            return (
                f"the strict schemas of the request have {self.optional} optional properties, "
                f"more than the {MAX_OPTIONAL} {self.profile.display_name} allows per request"
            )
        if self.unions > MAX_UNIONS:
            return (
                f"the strict schemas of the request have {self.unions} unions, more than the "
                f"{MAX_UNIONS} {self.profile.display_name} allows per request"
            )
        return None

    # Response format

    def output_format(self) -> dict[str, Any] | None:
        fmt = self.request.response_format
        if fmt is None or fmt.type == "text":
            return None
        field = RequestField.RESPONSE_FORMAT
        display = self.profile.display_name
        if fmt.type == "choice":
            # Not a JSON Schema: the answer is plain text, which nothing constrains here.
            self.degradations.refuse(
                field,
                f"{display} has no plain-text choice output",
                code=FORMAT_NOT_SENT,
                instead="the answer was not constrained to the options",
            )
            return None
        if fmt.type == "json":
            self.degradations.refuse(
                field,
                f"{display} has no JSON mode without a schema",
                code=FORMAT_NOT_SENT,
                instead="the output is unconstrained",
            )
            return None
        if self.family.structured is CapabilitySupport.UNSUPPORTED:
            self.degradations.refuse(
                field,
                f"{self.where} has no structured outputs (`output_config.format`)",
                code=FORMAT_NOT_SENT,
            )
            return None
        schema: dict[str, Any] = fmt.json_schema or {}
        subject = f"the response format `{fmt.name or 'response'}`"
        rewrite = self.rewrite(schema, subject)
        if not rewrite.strict_representable:
            # `output_config.format` is always enforced: a schema the grammar cannot hold
            # is answered with 400, so it is refused here, before anything is paid for.
            reasons = "; ".join(
                note.message for note in rewrite.notes if note.kind is WarningKind.UNSUPPORTED
            )
            raise self.degradations.unsupported(
                field, f"{display} cannot enforce {subject} in `output_config.format`: {reasons}"
            )
        apply_strict_policy(rewrite, field=field, subject=subject, degradations=self.degradations)
        if self.family.host_models:
            # Sent as asked, not known to be applied: DeepSeek's host takes only the effort
            # of `output_config`, and the answer is then prose the schema never reached.
            self.degradations.refuse(
                field,
                f"{display} does not say that it applies `output_config.format`",
                instead=f"{subject} was sent, and the output is not known to follow it",
            )
        self.count(rewrite)
        return {"type": "json_schema", "schema": rewrite.schema}

    # Tools

    def tools(self) -> tuple[list[dict[str, Any]] | None, list[tuple[bool, list[Warning]]]]:
        """The tools, strict where they may be, and what each one's encoding says (whether
        it went strict, and its warnings), for `body` to record once the per-request limits
        are known to hold: past them every tool goes as its own schema, and what a strict
        rewrite removed was not removed after all."""
        if not self.request.tools:
            return None, []
        why = repeated_tool_names(self.request.tools, self.profile.display_name)
        if why is not None:
            raise self.invalid(why)
        strict_sent = 0
        tools = []
        said: list[tuple[bool, list[Warning]]] = []
        for tool in self.request.tools:
            scratch = Degradations(self.degradations.provider, self.degradations.policy)
            wire, sent = self.tool(tool, room=strict_sent < MAX_STRICT_TOOLS, record=scratch)
            strict_sent += sent
            tools.append(wire)
            said.append((sent, scratch.warnings))
        return tools, said

    def plain(self, tool: ToolDefinition, record: Degradations) -> dict[str, Any]:
        """`tool` without `strict`; what its schema loses goes to `record`."""
        return _named(tool, self.parameters(tool, record)[0])

    def parameters(
        self, tool: ToolDefinition, record: Degradations
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """`tool`'s `input_schema`, and the schema a strict rewrite starts from (the tool's
        own, unless a root combinator was taken out).

        The root must be `type: "object"`: Anthropic refuses `{}` and a root `$ref` (a
        recursive model's), sent as object roots, and a root union, refused here; and it
        takes no `anyOf`, `oneOf` or `allOf` beside the root's properties ("input_schema
        does not support oneOf, allOf, or anyOf at the top level"): an `allOf` is folded
        into the root, the others are left out."""
        display = self.profile.display_name
        schema = object_parameters(tool.parameters)
        if schema is None:
            raise self.invalid(no_object_parameters(tool.name, display))
        try:
            made = without_root_combinators(schema)
        except SchemaError as error:
            raise self.invalid(
                f"{display} takes no `allOf` at the top level of `input_schema`, and that of "
                f"tool `{tool.name}` cannot be folded into its root: {error}"
            ) from error
        self.property_keys(tool, made.schema)
        if made.dropped:
            named = " or ".join(f"`{key}`" for key in made.dropped)
            if len(made.dropped) == 1:
                left = f"it was left out of tool `{tool.name}`, so the rule it states is"
            else:
                left = f"they were left out of tool `{tool.name}`, so the rules they state are"
            record.approximate(
                RequestField.TOOLS,
                f"{display} takes no {named} at the top level of `input_schema`; {left} not "
                "enforced",
            )
        return made.schema, (tool.parameters if made.schema is schema else made.schema)

    def property_keys(self, tool: ToolDefinition, schema: dict[str, Any]) -> None:
        """Refuse a tool whose `input_schema` (as sent) names a property at its top level by
        a key Anthropic refuses: it answers 400 ("tools.N.custom.input_schema.properties:
        Property keys should match pattern '^[a-zA-Z0-9_.-]{1,64}$'") to `@type`, `$top`,
        `prénom`, a key over 64 characters. Only the top level is checked, as Anthropic
        checks it (a nested object's keys are taken). The extraction's forced tool is named
        by the type's fields, which the caller can rename or alias.

        Only where Anthropic's own service answers (`verified`: Anthropic, a gateway in
        front of it, Claude in Microsoft Foundry): an Anthropic-compatible host serves its
        own models and documents no such rule, so the keys go there as given."""
        if not self.profile.verified:
            return
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return
        refused = [key for key in properties if not _PROPERTY_KEY.fullmatch(key)]
        if not refused:
            return
        keys = ", ".join(f"`{key}`" for key in refused)
        one = len(refused) == 1
        rule = (
            f"{self.profile.display_name} takes only property keys matching "
            f"`{_PROPERTY_KEY_PATTERN}` at the top level of a tool's `input_schema`"
        )
        choice = self.request.tool_choice
        if (
            tool.name == _EXTRACTION_TOOL
            and choice is not None
            and choice.mode == "tool"
            and choice.name == _EXTRACTION_TOOL
        ):
            title = schema.get("title")
            extracted = f"`{title}`" if isinstance(title, str) and title else "the type"
            raise self.invalid(
                f"{rule}, so forced-tool mode cannot send {extracted}, whose "
                f"{'key' if one else 'keys'} {keys} {'does' if one else 'do'} not match; "
                f"give {'its field' if one else 'each field'} a name or alias that does (for "
                "an alias, `validate_by_name=True` with `validate_by_alias=False` on the model "
                "sends the field's name instead, and keeps the alias for output)"
            )
        raise self.invalid(
            f"{rule}, and tool `{tool.name}` has {keys}, which {'does' if one else 'do'} "
            f"not match; rename {'it' if one else 'them'}"
        )

    def tool(
        self, tool: ToolDefinition, *, room: bool, record: Degradations
    ) -> tuple[dict[str, Any], bool]:
        """`tool` on the wire, and whether it went strict; its warnings go to `record`."""
        schema, rewritten = self.parameters(tool, record)
        strict = False
        if tool.strict:
            subject = f"tool `{tool.name}`"
            field = RequestField.TOOLS
            if self.family.structured is CapabilitySupport.UNSUPPORTED:
                record.refuse(
                    field,
                    f"{self.where} has no strict tools",
                    instead=f"{subject} was sent without `strict`",
                )
            elif not room:
                record.refuse(
                    field,
                    f"{self.profile.display_name} takes at most {MAX_STRICT_TOOLS} strict tools "
                    "per request",
                    instead=f"{subject} was sent without `strict`",
                )
            else:
                rewrite = self.rewrite(rewritten, subject)
                # Without `strict` the tool's own schema is sent, not the rewrite.
                strict = apply_strict_policy(
                    rewrite,
                    field=field,
                    subject=subject,
                    degradations=record,
                    rewrite_sent_anyway=False,
                )
                if strict:
                    schema = rewrite.schema
                    self.count(rewrite)
        wire = _named(tool, schema)
        if strict:
            wire["strict"] = True
        return wire, strict

    def tool_choice(self) -> dict[str, Any] | None:
        choice = self.request.tool_choice
        parallel = self.request.parallel_tool_calls
        if choice is None:
            if parallel is False and gives_tools(self.request, BODY_OPTION):
                return {"type": "auto", "disable_parallel_tool_use": True}
            return None
        if self.degradations.choice_without_tools(self.request, BODY_OPTION):
            return None
        wire: dict[str, Any]
        if choice.mode in ("required", "tool") and self.family.forced_tool is (
            CapabilitySupport.UNSUPPORTED
        ):
            self.degradations.refuse(
                RequestField.TOOL_CHOICE,
                f"{self.where} cannot be forced to call a tool",
                instead="`auto` was sent instead",
            )
            wire = {"type": "auto"}
        elif choice.mode == "required":
            wire = {"type": "any"}
        elif choice.mode == "tool":
            wire = {"type": "tool", "name": choice.name}
        else:
            wire = {"type": choice.mode}
        # A named tool forced is asked for one call unless the caller says otherwise: left
        # unset, Anthropic lets the model answer with several (an extraction's forced tool
        # would be paid and unusable). `none` takes no such field.
        single = parallel is False or (parallel is None and wire["type"] == "tool")
        if single and wire["type"] != "none":
            wire["disable_parallel_tool_use"] = True
        return wire

    # Thinking and sampling

    def thinking(
        self, max_tokens: int | None, unsigned: bool = False
    ) -> tuple[dict[str, Any] | None, str | None, int]:
        """`thinking`, `output_config.effort`, and the budget `max_tokens` must exceed.

        `unsigned`: the conversation ends in a tool loop whose assistant turn opens with no
        thinking block (tool calls made elsewhere, or with thinking off), which Anthropic
        refuses with budget thinking (`enabled`). Adaptive thinking is left as asked: there
        the model may skip thinking, so a turn without it is its own normal output, and a
        tool loop keeps one thinking configuration throughout."""
        family = self.family
        effort = self.request.reasoning_effort
        field = RequestField.REASONING_EFFORT
        forced = self.forces_tool
        off = {"type": family.off} if family.thinks_by_default and family.can_disable else None
        unsigned = unsigned and family.thinking is Thinking.BUDGET
        if effort is None or effort == "none":
            if effort == "none" and family.thinks_by_default and not family.can_disable:
                self.degradations.refuse(field, f"{self.where} always thinks")
            elif (
                effort == "none"
                and family.off == "between_tools"
                and gives_tools(self.request, BODY_OPTION)
            ):
                # Without tools `between_tools` answers in text alone, as `disabled` does.
                self.degradations.approximate(
                    field,
                    f"{self.where} turns off only the thinking before it answers "
                    "(`between_tools`): between tool calls it still writes short notes as "
                    "thinking",
                )
            return (off if (effort == "none" or forced) else None), None, 0
        if family.thinking is Thinking.NONE:
            self.degradations.refuse(field, f"{self.where} has no extended thinking")
            return None, None, 0
        if unsigned:
            self.degradations.refuse(
                field,
                f"{self.profile.display_name} does not think in {_UNSIGNED_LOOP}",
                instead="thinking was left off",
            )
            return off, None, 0
        if forced:
            self.degradations.refuse(
                field,
                f"{self.profile.display_name} does not think while a tool call is forced",
                instead="thinking was left off so that the forced tool holds",
            )
            return off, None, 0
        if family.thinking is Thinking.ADAPTIVE:
            wanted = "low" if effort == "minimal" else str(effort)
            if wanted != effort:
                self.degradations.approximate(
                    field, f"{self.where} takes no reasoning effort `{effort}`; `low` was sent"
                )
            if wanted not in family.efforts:
                self.degradations.refuse(
                    field, f"{self.where} takes no reasoning effort `{wanted}`"
                )
                return {"type": "adaptive"}, None, 0
            return {"type": "adaptive"}, wanted, 0
        budget = THINKING_BUDGETS[str(effort)]
        if max_tokens is not None and budget >= max_tokens:
            budget = max_tokens - 1
            if budget < THINKING_BUDGETS["minimal"]:
                self.degradations.refuse(
                    field,
                    f"{self.profile.display_name} needs a thinking budget of at least 1024 "
                    f"tokens below `max_tokens` ({max_tokens})",
                    instead="thinking was left off",
                )
                return None, None, 0
            self.degradations.approximate(
                field,
                f"the thinking budget for `{effort}` was lowered to {budget} tokens, "
                f"below `max_tokens` ({max_tokens})",
            )
        return {"type": "enabled", "budget_tokens": budget}, None, budget

    def sampling(self, thinking: bool) -> tuple[float | None, float | None]:
        request = self.request
        temperature, top_p = request.temperature, request.top_p
        if not self.family.sampling:
            for field, value in (
                (RequestField.TEMPERATURE, temperature),
                (RequestField.TOP_P, top_p),
            ):
                if value is not None:
                    self.degradations.refuse(field, f"{self.where} takes no `{field}`")
            return None, None
        # The body option's own field goes in place of the request's of its name (its
        # `null` too): that one is not sent, so there is nothing of it to drop.
        if self.sends("temperature"):
            temperature = None
        if self.sends("top_p"):
            top_p = None
        display = self.profile.display_name
        known = self.profile.verified and self.family.pattern != "*"
        if known and temperature is not None and temperature > 1:
            self.degradations.refuse(
                RequestField.TEMPERATURE,
                f"{display} takes `temperature` from 0 to 1",
                instead=f"{temperature} was left out",
            )
            temperature = None
        if thinking and temperature is not None and temperature != 1:
            self.degradations.refuse(
                RequestField.TEMPERATURE,
                f"{display} takes `temperature` only at 1 with thinking on",
            )
            temperature = None
        if thinking and top_p is not None and top_p < 0.95:
            self.degradations.refuse(
                RequestField.TOP_P,
                f"{display} takes `top_p` from 0.95 to 1 with thinking on",
                instead=f"{top_p} was left out",
            )
            top_p = None
        if self.family.one_sampling:
            return self.one_sampling(temperature, top_p)
        return temperature, top_p

    def one_sampling(
        self, temperature: float | None, top_p: float | None
    ) -> tuple[float | None, float | None]:
        """The request's `temperature` and `top_p` left to send (those the body option
        replaces already taken out) on a family that takes one of them at a time (Anthropic
        answers 400 to both: "`temperature` and `top_p` cannot both be specified for this
        model"). The request's own pair sends the temperature, `top_p` left out; the option's
        one sends in place of the request's other, which is left out with a warning on its
        field (refused under `UnsupportedPolicy.ERROR`): the option's fields replace
        allama's. The option's own pair is the caller's, sent as given (as its sampling
        beside its own thinking is)."""
        theirs = {
            key: self.option[key]
            for key in ("temperature", "top_p")
            if self.sends(key) and self.option[key] is not None
        }
        if len(theirs) == 2:  # the caller's own pair, sent as given
            return temperature, top_p
        if temperature is not None and top_p is not None:
            # (Neither replaced: the option gives none of them.)
            self.degradations.refuse(
                RequestField.TOP_P,
                f"{self.where} takes `temperature` or `top_p`, not both",
                instead="`top_p` was left out",
            )
            return temperature, None
        if not theirs:
            return temperature, top_p
        [(key, value)] = theirs.items()
        field, given = (
            (RequestField.TOP_P, top_p)
            if key == "temperature"
            else (RequestField.TEMPERATURE, temperature)
        )
        if given is None:
            return temperature, top_p
        if (
            self.request.temperature is not None
            and self.request.top_p is not None
            and key == "temperature"
        ):
            # The request's own pair leaves its `top_p` out whatever the option gives.
            reason = f"{self.where} takes `temperature` or `top_p`, not both"
        else:
            reason = (
                f"{_option_field(key)} ({_json(value)}) goes in place of the request's "
                f"`{field}` ({_json(given)}), and {self.where} takes `temperature` or "
                "`top_p`, not both"
            )
        self.degradations.refuse(field, reason, instead=f"`{field}` was left out")
        return (None, top_p) if field is RequestField.TEMPERATURE else (temperature, None)

    def sends(self, key: str) -> bool:
        """Whether the body option's own `key` goes in the body, over allama's."""
        return key in self.option and key not in self.withheld

    def option_thinking(self, ours: dict[str, Any] | None, budget: int) -> tuple[bool, int]:
        """Whether the body thinks, and the budget `max_tokens` must exceed, once the body
        option's `thinking` goes over allama's (`ours`, with its `budget`).

        The option's thinking beside a tool call allama forces (an extraction's tool, the
        request's choice) is not sent, with a warning, refused under
        `UnsupportedPolicy.ERROR`: Anthropic would answer 400, and the forced tool is what
        an extraction's record stands on. Beside the option's own forced `tool_choice` it
        is sent as given, with a warning: both are the caller's."""
        if "thinking" not in self.option:
            return _thinks(ours), budget
        theirs = self.option["thinking"]
        if not _thinks(theirs):
            return False, 0
        if self.forces_tool:
            display = self.profile.display_name
            what = f"{_option_field('thinking')} ({_json(theirs)})"
            if self.sends("tool_choice"):
                self.degradations.warn(
                    Warning.unsupported(
                        RequestField.OPTIONS,
                        f"{what} turns thinking on beside the option's own forced "
                        f"`tool_choice`, which {display} refuses; both were sent as given",
                    )
                )
            else:
                self.degradations.refuse(
                    RequestField.OPTIONS,
                    f"{what} turns thinking on, and {display} does not think while a tool "
                    "call is forced",
                    instead="it was not sent, so that the forced tool holds",
                )
                self.withheld.add("thinking")
                return _thinks(ours), budget
        spent = theirs.get("budget_tokens") if theirs["type"] == "enabled" else None
        # A budget below the least is raised to it (`option_budget`): counted so.
        return True, max(spent, THINKING_BUDGETS["minimal"]) if _count(spent) else 0

    def option_budget(self, max_tokens: int, ours: dict[str, Any] | None, thinks: bool) -> bool:
        """Whether the body thinks, once the body option's thinking budget is fitted below
        `max_tokens` (Anthropic answers 400 to a budget not below it, unless interleaved
        thinking is on): lowered to fit, with a warning on `options` (refused under
        `UnsupportedPolicy.ERROR`), as `reasoning_effort`'s is; not sent where no budget of
        1024 tokens fits, allama's own thinking (`ours`) going instead. Beside the option's
        own `max_tokens` both are sent as given, with a warning: both are the caller's. A
        budget below 1024 (answered 400 whatever `max_tokens` is) goes the same way, raised
        to 1024 (`option_least_budget`)."""
        if not self.sends("thinking"):
            return thinks
        theirs = self.option["thinking"]
        asked = theirs.get("budget_tokens") if _thinks(theirs) else None
        if not _count(asked):
            return thinks
        if asked < THINKING_BUDGETS["minimal"] and theirs["type"] == "enabled":
            return self.option_least_budget(max_tokens, ours, thinks, asked)
        if self.interleaved or asked < max_tokens:
            return thinks
        what = f"{_option_field('thinking.budget_tokens')} ({asked})"
        display = self.profile.display_name
        if self.sends("max_tokens"):
            self.degradations.warn(
                Warning.unsupported(
                    RequestField.OPTIONS,
                    f"{what} is not below the option's own `max_tokens` ({max_tokens}), and "
                    f"{display} takes a thinking budget only below it; both were sent as given",
                )
            )
            return thinks
        fitted = max_tokens - 1
        if fitted < THINKING_BUDGETS["minimal"]:
            self.degradations.refuse(
                RequestField.OPTIONS,
                f"{what} is not below `max_tokens` ({max_tokens}), and {display} needs a "
                f"thinking budget of at least 1024 tokens below it",
                instead="`thinking` was not sent",
            )
            self.withheld.add("thinking")
            return _thinks(ours)
        self.degradations.refuse(
            RequestField.OPTIONS,
            f"{what} is not below `max_tokens` ({max_tokens}), and {display} takes a thinking "
            "budget only below it",
            instead=f"{fitted} was sent in place of {asked}",
        )
        self.fitted["thinking"] = {**theirs, "budget_tokens": fitted}
        return thinks

    def option_least_budget(
        self, max_tokens: int, ours: dict[str, Any] | None, thinks: bool, asked: int
    ) -> bool:
        """Whether the body thinks, once the body option's thinking budget below 1024 is
        raised to 1024 (Anthropic answers 400: "thinking.budget_tokens: Input should be
        greater than or equal to 1024"), with a warning on `options` (refused under
        `UnsupportedPolicy.ERROR`), where it fits below `max_tokens` (or interleaved
        thinking lets it exceed it); else not sent, allama's own thinking (`ours`) going
        instead, or, beside the option's own `max_tokens`, sent as given with a warning."""
        least = THINKING_BUDGETS["minimal"]
        what = f"{_option_field('thinking.budget_tokens')} ({asked})"
        display = self.profile.display_name
        if self.interleaved or least < max_tokens:
            self.degradations.refuse(
                RequestField.OPTIONS,
                f"{what} is below 1024, and {display} needs a thinking budget of at least "
                "1024 tokens",
                instead=f"{least} was sent in place of {asked}",
            )
            self.fitted["thinking"] = {**self.option["thinking"], "budget_tokens": least}
            return thinks
        if self.sends("max_tokens"):
            self.degradations.warn(
                Warning.unsupported(
                    RequestField.OPTIONS,
                    f"{what} is below 1024, and {display} needs a thinking budget of at "
                    f"least 1024 tokens below the option's own `max_tokens` ({max_tokens}); "
                    "both were sent as given",
                )
            )
            return thinks
        self.degradations.refuse(
            RequestField.OPTIONS,
            f"{what} is below 1024, and {display} needs a thinking budget of at least 1024 "
            f"tokens below `max_tokens` ({max_tokens})",
            instead="`thinking` was not sent",
        )
        self.withheld.add("thinking")
        return _thinks(ours)

    def option_sampling(self, thinks: bool) -> None:
        """Check the body option's sampling fields against thinking (Anthropic answers 400
        to `temperature` other than 1, any `top_k`, `top_p` below 0.95): beside thinking
        `reasoning_effort` turns on, the field is not sent, with a warning (refused under
        `UnsupportedPolicy.ERROR`), as the request's own would be; beside the option's own
        thinking it is sent as given, with a warning."""
        if not thinks:
            return
        display = self.profile.display_name
        theirs = self.sends("thinking")
        for key, rule in (
            ("temperature", "takes `temperature` only at 1"),
            ("top_k", "takes no `top_k`"),
            ("top_p", "takes `top_p` only from 0.95 to 1"),
        ):
            value = self.option.get(key)
            if not _refused_with_thinking(key, value):
                continue
            what = f"{_option_field(key)} ({_json(value)})"
            if theirs:
                self.degradations.warn(
                    Warning.unsupported(
                        RequestField.OPTIONS,
                        f"{what} goes beside the option's own thinking, and {display} "
                        f"{rule} with thinking on; both were sent as given",
                    )
                )
                continue
            self.degradations.refuse(
                RequestField.OPTIONS,
                f"{what} goes beside the thinking `reasoning_effort` turns on, and {display} "
                f"{rule} with thinking on",
                instead="it was not sent",
            )
            self.withheld.add(key)

    def output_limit(self) -> int | None:
        """The request's `max_tokens`, lowered to the output limit of a family the table
        knows (Anthropic answers 400 above it: "max_tokens: N > M, which is the maximum
        allowed number of output tokens"), or to the one the family's own beta raises it to
        (Claude 3.7 Sonnet's `output-128k-2025-02-19`: on other families it has no effect).
        Left as asked where the body option gives its own."""
        asked = self.request.max_output_tokens
        limit = self.max_output
        if (
            asked is None
            or asked <= limit
            or self.family.pattern == "*"
            or self.sends("max_tokens")
        ):
            return asked
        self.degradations.refuse(
            RequestField.MAX_OUTPUT_TOKENS,
            f"{self.where} writes at most {limit} output tokens",
            instead=f"{limit} was sent in place of {asked}",
        )
        return limit

    def stop_sequences(self) -> list[str]:
        """The stop sequences Anthropic takes: one of nothing but whitespace is answered 400
        ("each stop sequence must contain non-whitespace"), so it is left out."""
        stop = list(self.request.stop)
        kept = [sequence for sequence in stop if sequence.strip()]
        left_out = len(stop) - len(kept)
        if left_out:
            self.degradations.refuse(
                RequestField.STOP,
                f"{self.profile.display_name} takes no stop sequence of nothing but whitespace",
                instead=f"{'it was' if left_out == 1 else f'{left_out} were'} left out",
                code=STOPS_BLANK,
            )
        return kept

    # Everything

    def body(self) -> dict[str, Any]:
        request = self.request
        system, messages = self.conversation()
        output = self.output_format()
        tools, said = self.tools()
        # Past the limits, the strict tools give up `strict`, and the response format keeps
        # its enforcement: one over them by itself was refused above (its dialect counts).
        why = self.over_limits()
        for strict, warnings in said:
            # Past the limits every tool goes as its own schema: a strict tool's warnings
            # (what its rewrite changed) are not true of what was sent.
            if why is None or not strict:
                for warning in warnings:
                    self.degradations.warn(warning)
        if why is not None:
            self.degradations.refuse(
                RequestField.TOOLS, why, instead="the tools were sent without `strict`"
            )
            # (A tool's own warnings are said again where its strict ones were not kept.)
            tools = [self.plain(tool, self.degradations) for tool in self.request.tools]
        max_tokens = self.output_limit()
        theirs = self.option.get("max_tokens") if self.sends("max_tokens") else None
        # The budget `reasoning_effort` gives fits below the `max_tokens` sent: the option's
        # own, where it gives one.
        ceiling = theirs if _count(theirs) else max_tokens
        thinking, effort, budget = self.thinking(ceiling, _unsigned_tool_turn(messages))
        thinks, budget = self.option_thinking(thinking, budget)
        if max_tokens is None:
            # Above the option's own budget too: Anthropic needs `budget_tokens` below it.
            max_tokens = min(self.max_output, DEFAULT_MAX_TOKENS + budget)
        thinks = self.option_budget(theirs if _count(theirs) else max_tokens, thinking, thinks)
        self.prefill(messages, constrained=output is not None, thinking=thinks)
        if not messages:
            # Anthropic answers 400 ("at least one message is required"): system
            # instructions alone, or only turns left out above, are nothing to answer.
            raise self.invalid(
                f"{self.profile.display_name} needs at least one user or assistant message "
                "besides the system instructions, and the request has none left to send"
            )
        for turn in messages:  # a turn of one text block is its text, as Anthropic writes it
            blocks = turn["content"]
            if len(blocks) == 1 and blocks[0]["type"] == "text":
                turn["content"] = blocks[0]["text"]
        self.option_sampling(thinks)
        temperature, top_p = self.sampling(thinks)
        if request.seed is not None:
            self.degradations.refuse(RequestField.SEED, f"{self.profile.display_name} has no seed")
        if request.logprobs is not None:
            self.degradations.refuse(
                RequestField.LOGPROBS,
                f"{self.profile.display_name} reports no log-probabilities",
                instead="none were asked for",
            )
        config: dict[str, Any] = {}
        if output is not None:
            config["format"] = output
        if effort is not None:
            config["effort"] = effort
        body: dict[str, Any] = {"model": request.model, "max_tokens": max_tokens}
        if system is not None:
            body["system"] = system
        body["messages"] = messages
        if tools is not None:
            body["tools"] = tools
        choice = self.tool_choice()
        if choice is not None:
            body["tool_choice"] = choice
        if thinking is not None:
            body["thinking"] = thinking
        if config:
            body["output_config"] = config
        if temperature is not None:
            body["temperature"] = temperature
        if top_p is not None:
            body["top_p"] = top_p
        if stop := self.stop_sequences():
            body["stop_sequences"] = stop
        if self.container is not None:
            body["container"] = self.container
        if self.stream:
            body["stream"] = True
        extra = {
            key: self.fitted.get(key, value)
            for key, value in self.option.items()
            if key not in self.withheld
        }
        given: dict[str, Any] = {}
        if self.option:
            given = option_fields(
                body, extra, BODY_OPTION, stream=self.stream, degradations=self.degradations
            )
            for key, value in given.items():
                ours = body.get(key)
                if key == "output_config" and isinstance(ours, dict) and isinstance(value, dict):
                    # Independent settings (`format`, `effort`, ...): the option's are added
                    # to allama's, rather than dropping the response format.
                    body[key] = {**ours, **value}
                else:
                    body[key] = value
            self.option_replaced(body, output, choice)
            self.server_tools_forced_out(body, choice)
            self.effort_replaced(body, thinking, effort)
            self.effort_beside_disabled(body)
            # The option's tools go after the request's (an extraction's): one name in both
            # would be answered 400 ("Tool names must be unique").
            why = repeated_in_body(body, request.tools, self.profile.display_name, BODY_OPTION)
            if why is not None:
                raise self.invalid(why)
        if request.max_output_tokens != max_tokens:  # filled in (Anthropic requires one), or
            given = {**given, "max_tokens": body.get("max_tokens")}  # lowered to the family's
        if given:
            self.as_sent = settings_as_sent(request, given, _SETTINGS)
        return body

    def option_replaced(
        self, body: dict[str, Any], output: dict[str, Any] | None, choice: dict[str, Any] | None
    ) -> None:
        """Say where the body option's own value went in place of the request's response
        format or tool choice (the caller's wins): an extraction's record then shows its
        schema not sent, or its tool not forced."""
        sent = body.get("output_config")
        if output is not None:
            theirs = sent.get("format") if isinstance(sent, dict) else sent
            if theirs != output:
                where = "output_config.format" if isinstance(sent, dict) else "output_config"
                self.warn_replaced(RequestField.RESPONSE_FORMAT, where, theirs)
        if self.request.tool_choice is not None and choice is not None:
            theirs = body.get("tool_choice")
            if theirs != choice:
                self.warn_replaced(RequestField.TOOL_CHOICE, "tool_choice", theirs)

    def server_tools_forced_out(self, body: dict[str, Any], choice: dict[str, Any] | None) -> None:
        """Say that the body option's server tools (web search, code execution...) cannot run
        beside the tool call the request forces (an extraction's, in forced-tool mode):
        Anthropic forces one by prefilling the answer with it, so the answer comes without
        them, from the model's own knowledge. A warning on `tool_choice` (the extraction's
        record notes it), refused under `UnsupportedPolicy.ERROR`."""
        if choice is None or not _forces(choice) or body.get("tool_choice") != choice:
            return  # nothing forced, or the option's own choice went instead
        tools = body.get("tools") if self.sends("tools") else None
        forced = choice.get("name") if choice.get("type") == "tool" else None
        names = [
            f"`{tool.get('name')}`" if isinstance(tool.get("name"), str) else f"`{tool['type']}`"
            for tool in (tools if isinstance(tools, list) else ())
            if isinstance(tool, dict) and anthropic_server_tool(tool) and tool.get("name") != forced
        ]
        if not names:
            return
        self.degradations.refuse(
            RequestField.TOOL_CHOICE,
            f"{self.profile.display_name} forces a tool call (`tool_choice` "
            f"`{choice['type']}`) by prefilling the answer with it, so the server tools the "
            f"body option `{BODY_OPTION}` gives ({', '.join(names)}) cannot run",
            instead="they were sent all the same, and the answer does not draw on them",
        )

    def effort_replaced(
        self, body: dict[str, Any], thinking: dict[str, Any] | None, effort: str | None
    ) -> None:
        """Say where the body option's own `thinking` or `output_config.effort` went in place
        of what the request's `reasoning_effort` asks (the caller's wins), as for a response
        format or tool choice: the warning on `reasoning_effort` keeps the level off the
        call's span, since it was not what was sent. Thinking off either way (`disabled`,
        or none sent) is the same."""
        asked = self.request.reasoning_effort
        if asked is None:
            return
        said = f"was sent in place of the request's reasoning effort (`{asked}`)"
        if self.sends("thinking"):
            sent = body.get("thinking")
            if sent != thinking and (_thinks(sent) or _thinks(thinking)):
                what = f"{_option_field('thinking')} ({_json(sent)})"
                self.degradations.warn(
                    Warning.unsupported(RequestField.REASONING_EFFORT, f"{what} {said}")
                )
        config = body.get("output_config")
        sent = config.get("effort") if isinstance(config, dict) else config
        if effort is not None and sent != effort:
            where = "output_config.effort" if isinstance(config, dict) else "output_config"
            what = f"{_option_field(where)} ({_json(sent)})"
            self.degradations.warn(
                Warning.unsupported(RequestField.REASONING_EFFORT, f"{what} {said}")
            )

    def effort_beside_disabled(self, body: dict[str, Any]) -> None:
        """Leave out the body option's `output_config.effort` at a level where the family
        refuses thinking turned off (Opus 5 and Haiku 5.5 answer 400 to `disabled`, Sonnet
        5.5 to `between_tools`, at `xhigh` and `max`, levels `reasoning_effort` does not
        name, so the effort is the option's). Beside allama's (`reasoning_effort="none"`, a
        forced tool) it is not sent, with a warning on `options` (refused under
        `UnsupportedPolicy.ERROR`); beside the option's own both are sent as given, with a
        warning."""
        allowed = self.family.disable_efforts
        off = self.family.off
        theirs = self.option.get("output_config") if self.sends("output_config") else None
        config = body.get("output_config")
        thinking = body.get("thinking")
        if (
            allowed is None
            or not isinstance(theirs, dict)
            or "effort" not in theirs
            or not isinstance(config, dict)
            or not isinstance(thinking, dict)
            or thinking.get("type") != off
            or config.get("effort") in allowed
        ):
            return
        levels = ", ".join(f"`{level}`" for level in allowed[:-1])
        rule = f"{self.where} turns thinking off only at effort {levels} or `{allowed[-1]}`"
        what = f"{_option_field('output_config.effort')} ({_json(config.get('effort'))})"
        if self.sends("thinking"):
            self.degradations.warn(
                Warning.unsupported(
                    RequestField.OPTIONS,
                    f"{what} goes beside the option's own `thinking` (`{off}`), and "
                    f"{rule}; both were sent as given",
                )
            )
            return
        self.degradations.refuse(
            RequestField.OPTIONS,
            f"{what} goes beside thinking turned off (`{off}`), and {rule}",
            instead="it was not sent",
        )
        rest = {key: value for key, value in config.items() if key != "effort"}
        if rest:
            body["output_config"] = rest
        else:
            del body["output_config"]

    def warn_replaced(self, field: RequestField, where: str, theirs: Any) -> None:
        what = f"`{where}` of the body option `{BODY_OPTION}`"
        self.degradations.warn(replaced_by_option(self.request, field, what, theirs))


def encode_request(
    request: ChatRequest,
    profile: AnthropicProfile,
    family: ClaudeFamily,
    *,
    url: str,
    headers: Mapping[str, str],
    params: Mapping[str, str] | None = None,
    stream: bool,
    degradations: Degradations,
) -> HttpRequest:
    """The HTTP request for `request`; warnings collect in `degradations`.

    Raises `UnsupportedError` (stage `BEFORE_SENDING`) for what Anthropic cannot honour
    under `UnsupportedPolicy.ERROR`, and for a response format it cannot enforce under any
    policy; `InvalidRequestError` for a conversation it cannot take (tool call arguments
    that are not an object, a tool call the next user turn gives no result for, an image
    of another type, of no data or of invalid base64, no message but system ones), for
    a tool whose parameters are not an object, hold a root `allOf` that cannot be folded
    into the root, or name a property at their top level by a key Anthropic refuses
    (`^[a-zA-Z0-9_.-]{1,64}$`, on Anthropic's own service), and for tools of one name (the
    body option's among them).
    """
    encoder = _Encoder(request, profile, family, degradations, stream=stream, headers=headers)
    body = encoder.body()
    return HttpRequest("POST", url, headers, body, params or {}, as_sent=encoder.as_sent)


_SETTINGS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "max_output_tokens": "max_tokens",
    "stop": "stop_sequences",
}
"""The request settings the body sends, by `ChatRequest` field (`settings_as_sent`):
Anthropic has no seed."""


_UNSIGNED_LOOP = (
    "a tool loop whose last assistant turn has no signed thinking to open it (tool calls "
    "made elsewhere, or with thinking off)"
)


def _unsigned_tool_turn(messages: list[dict[str, Any]]) -> bool:
    """Whether `messages` (each turn's content a list of blocks) end in a tool loop whose
    assistant turn opens with no thinking block: "a final assistant message must start with
    a thinking block" when budget thinking (`enabled`) is on.

    The loop is the assistant's one turn since the user's last words: its steps (tool calls,
    then their results) may think only in the first. A last assistant message (a prefill,
    which thinking leaves out) is set aside."""
    end = len(messages)
    if end and messages[-1]["role"] == "assistant":
        end -= 1
    if not end or not _results(messages[end - 1]):
        return False
    opening: dict[str, Any] | None = None
    for message in reversed(messages[:end]):
        if message["role"] == "assistant":
            opening = message
        elif not _results(message):
            break  # the user's own words: the turn began after them
    if opening is None:
        return False
    return opening["content"][0]["type"] not in ("thinking", "redacted_thinking")


_INTERLEAVED = re.compile(r"interleaved-thinking-\d{4}-\d{2}-\d{2}")
"""An `anthropic-beta` under which a thinking budget may exceed `max_tokens`
(`interleaved-thinking-2025-05-14`): it counts thinking over the whole turn."""


def _betas(headers: Mapping[str, str]) -> list[str]:
    """The betas `headers` opt into (`anthropic-beta` lists them separated by commas)."""
    return [
        beta.strip()
        for name, value in headers.items()
        if name.lower() == "anthropic-beta"
        for beta in value.split(",")
    ]


def _named(tool: ToolDefinition, schema: dict[str, Any]) -> dict[str, Any]:
    wire: dict[str, Any] = {"name": tool.name}
    if tool.description:
        wire["description"] = tool.description
    wire["input_schema"] = schema
    return wire


def _thinks(thinking: object) -> bool:
    """Whether a body's `thinking` turns thinking on (`enabled` or `adaptive`)."""
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def _count(value: object) -> TypeGuard[int]:
    """Whether a body's token count is an integer (a value of another type is Anthropic's
    to answer)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _forces(choice: object) -> bool:
    """Whether a body's `tool_choice` forces a tool call (`tool` or `any`)."""
    return isinstance(choice, dict) and choice.get("type") in ("tool", "any")


def _refused_with_thinking(key: str, value: object) -> bool:
    """Whether Anthropic refuses a body's sampling field `key` at `value` with thinking on:
    `top_k` at all, `temperature` other than 1, `top_p` below 0.95."""
    if key == "top_k":
        return value is not None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False  # (not a number: Anthropic's to answer)
    return value != 1 if key == "temperature" else value < 0.95


def _option_field(key: str) -> str:
    return f"`{key}` of the body option `{BODY_OPTION}`"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)


def _continued(message: AssistantMessage, layout: list[int | dict[str, Any]]) -> bool:
    """Whether a turn that goes back whole is one Anthropic continues: it paused
    (`pause_turn`), or its code execution waits on tool calls (a call with its `caller`).
    Sent last, such a turn is continued as sent; a finished one (its searches done) is a
    prefill like any other assistant turn, dropped where the request cannot continue it.

    A turn kept by an older version says neither: its resume names no issuer (a list of
    blocks, or `{"container": ..., "blocks": [...]}`), and was written only for a paused
    turn or code waiting on tool calls, so it is continued as it was then."""
    resume = message.provider_data.get(_NAMESPACE, {}).get(RESUME_KEY)
    if not isinstance(resume, dict) or (_ISSUER not in resume and _PAUSED not in resume):
        return True  # an older version's
    paused = resume.get(_PAUSED) is True
    return paused or any(isinstance(item, dict) and "index" in item for item in layout)


def _fits(layout: object, count: int) -> TypeGuard[list[int | dict[str, Any]]]:
    """Whether `layout` orders `count` content blocks, each once and in order (by its
    index, or as `{"index": i, ...}` with fields to add to it), among server blocks
    (objects with a `type`)."""
    if not isinstance(layout, list):
        return False
    indices = []
    for item in layout:
        if isinstance(item, dict) and "type" not in item:
            item = item.get("index")
        if isinstance(item, int) and not isinstance(item, bool):
            indices.append(item)
        elif not (isinstance(item, dict) and isinstance(item.get("type"), str)):
            return False
    return indices == list(range(count))


def _results(message: dict[str, Any]) -> bool:
    """Whether `message` is the user's turn that answers tool calls."""
    return message["role"] == "user" and any(
        block["type"] == "tool_result" for block in message["content"]
    )


def _is(block: object, kind: str) -> bool:
    return isinstance(block, dict) and block.get("type") == kind


def _uses_tools(turn: dict[str, Any]) -> bool:
    return turn["role"] == "assistant" and any(
        block.get("type") == "tool_use" for block in turn["content"]
    )


def _results_first(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turn's `tool_result` blocks, then its other blocks, each in their order.

    A turn after `tool_use` blocks must begin with their results (Anthropic answers 400
    otherwise), while merged user messages may have put a remark or an image before or
    among them. The model then reads those after every result (`said_before_results`
    names them for the warning)."""
    results = [block for block in blocks if block.get("type") == "tool_result"]
    return results + [block for block in blocks if block.get("type") != "tool_result"]


def _empty_text(part: TextPart | ImagePart | DocumentPart) -> bool:
    """Text of nothing but whitespace, which Anthropic refuses ("text content blocks must
    contain non-whitespace text")."""
    return isinstance(part, TextPart) and not part.text.strip()
