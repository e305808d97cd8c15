"""A `ChatRequest` to the HTTP request of Ollama's `POST /api/chat`, plus warnings.

What Ollama cannot honour goes through `Degradations` (dropped with a warning under
`UnsupportedPolicy.WARN`, refused before sending under `ERROR`):

- Ollama has no `tool_choice`: a forced tool (`required` or a named one) cannot be
  expressed, so it is refused and the tools are offered for the model to choose; `none` is
  honoured by not offering the tools (a choice without tools is not sent, and refused only
  where it asked for a call, as on every provider). There is no strict mode for tools
  either (Ollama even narrows tool schemas on input), nor a setting for parallel calls.
  Ollama drops a property's `$ref`, `oneOf`, `const` and `allOf`, so tool parameters go
  with their local `$ref`s inlined, `oneOf` as `anyOf`, `const` as a one-value `enum` and a
  lone `allOf` beside annotations merged (`_parameters`); a recursion cut, or an `allOf`
  left, where Ollama drops it is said on `tools`.
- Images go as base64 in the message's `images` (a data URL's checked and sent as standard
  base64; an image of no data is refused); an image URL cannot be sent. Documents go as
  text when they are plain text (bytes or a data URL, read in their charset); any other
  document cannot be sent.
- A tool result has no error flag; its text goes as the `tool` message's content.

Messages. A message holds one `content` string: the text parts of a user turn (and its
plain-text documents) are joined with a blank line, its images go in `images`. An assistant
turn sends its text, its reasoning as `thinking` (Ollama passes it to the model's template),
and its calls as `tool_calls` with `function.arguments` as a JSON object (blank arguments,
another provider's call of a tool that takes none, as `{}`); reasoning with no text
(another API's, encrypted) and an Anthropic turn's server tool blocks are left out, each
with a warning. A call's `id`, and a tool result's `tool_call_id`, are sent unless they are
the `call_<n>` ids the decoder gives calls Ollama sent without one (fewer than 8 digits:
Ollama's own ids have 8 characters after `call_`, and may all be digits); a tool result
names its function in `tool_name` when the call it answers is in the conversation. Tool
results that answer one assistant turn go in the order of its calls, whatever order the
caller gave them in: without a `tool_call_id` (a stand-in id is not sent) a result is paired
with its call by position and name.

Structured output. `format` takes the JSON Schema itself (or `"json"` for JSON mode). Ollama
compiles it with llama.cpp's JSON-Schema-to-grammar converter (in process up to v0.29, in
the `llama-server` runner since v0.30), so the schema goes through the `llama_cpp` dialect,
whose keyword support was measured against llama.cpp's server: every keyword the grammar
ignores or cannot compile is reported, on the response format. Enforcement is approximate
even when nothing is lost: Ollama does not report what it enforces, the converter is
whichever llama.cpp build the server carries, models on its MLX runner (safetensors) show no
`format` handling in Ollama's source, and its cloud models do not apply `format` at all
(those are refused by the capability table: a `-cloud` name, or any model on ollama.com
itself, where names carry no `-cloud`; nothing in a request tells a model on the MLX runner
apart).

Thinking. `think` is `false` for `reasoning_effort="none"`. Otherwise it is `true`, the form
every Ollama version and thinking model takes (the effort's level is lost, with a warning),
except for families that take levels by name (gpt-oss: `low`, `medium`, `high`), which get
the level (`minimal` as the lowest, with a warning). Those ignore `think: false` and cannot
stop reasoning, so `none` is refused for them: under `WARN` their lowest level is sent. A
body option's own `think` that differs is sent in place of allama's, with a warning on
`reasoning_effort` (and no word on how allama would have mapped the effort). Without
`reasoning_effort`, `think` is left out and the model thinks by its default.

Log-probabilities. `request.logprobs` is `logprobs: true`, with `top_logprobs` when
alternatives are wanted (Ollama v0.12.11 on; an older server ignores both). A streamed call
is refused them: allama reads them from whole responses. There is no plain-text choice
output (`format` constrains JSON only), so a `choice` response format is refused.

Context. `truncate: false` is always sent (a body option's own `truncate` wins): without it
Ollama drops the oldest messages, or cuts the prompt, to fit `num_ctx`, and answers 200, so
an extraction over a long document would read part of it without a sign. Told not to, it
answers an error instead ("exceeds the available context size"), a
`ContextWindowExceededError`. The field came in October 2025 (ollama/ollama#12582); an older
server ignores it, as Go's JSON decoding ignores any field it does not know.

Seed. Ollama's `-1` is a random seed, and its runners read `seed` as 32 bits without a sign
(llama-server's 4294967295, which -1 becomes, is random too): a seed outside 0 to
4294967294 is left out with a warning, as on llama.cpp's server.

`stream` is always sent: Ollama streams unless told not to. It is the call's (a whole
response is read from `chat`, a stream from `chat_stream`): a body option's own `stream`
that differs is not sent, with a warning on `options` (refused under `ERROR`).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from allama._degradations import FORMAT_NOT_SENT, Degradations, option_tools
from allama.adapters._arguments import call_arguments
from allama.adapters._http import (
    HttpRequest,
    option_fields,
    replaced_by_option,
    settings_as_sent,
)
from allama.adapters._left_out import encrypted_reasoning_left_out, server_blocks_left_out
from allama.adapters._rewrites import cached_rewrite, unreported
from allama.adapters._tool_ids import repeated_in_body, results_in_call_order
from allama.adapters.ollama._capabilities import OllamaFamily, Thinking
from allama.adapters.ollama._parameters import inline_refs
from allama.adapters.ollama._profile import OllamaProfile
from allama.errors import InvalidRequestError
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
from allama.types._data_urls import (
    UnreadablePart,
    data_url,
    document_text,
    inline_data,
    inline_document,
    part_media_type,
)

__all__ = ["BODY_OPTION", "encode_request"]

BODY_OPTION = "ollama"
"""Request option namespace whose JSON object is merged into the body, for fields allama has
no name for (`keep_alive`, `truncate: true` to let Ollama cut a prompt too long for its
context, ...); an `options` object in it is merged into
allama's (`request.with_option_json("ollama", {"options": {"num_ctx": 8192},
"keep_alive": "10m"})`); its own `format` is sent with a warning on the response format,
its own `think` with one on the reasoning effort, its own `stream` is not sent (the call's
is)."""

PART_SEPARATOR = "\n\n"
"""Between the text parts of a user turn, which Ollama takes as one string."""

_SYNTHETIC_ID = re.compile(r"call_\d{1,7}")
"""The ids the decoder gives calls Ollama sent without one (`call_<n>`, `n` counting a
response's calls): not Ollama's, so not sent back. Ollama's own are `call_` and 8 random
letters or digits, which may all be digits."""


class _Said(NamedTuple):
    """What allama would say about the `think` it sends, held back until the body option
    shows whether its own `think` is sent instead (which makes the words untrue)."""

    refused: bool
    message: str
    instead: str | None = None


def _present(**fields: Any) -> dict[str, Any]:
    """The fields that are not `None`, in order."""
    return {key: value for key, value in fields.items() if value is not None}


class _Encoder:
    def __init__(
        self,
        request: ChatRequest,
        profile: OllamaProfile,
        family: OllamaFamily,
        degradations: Degradations,
        *,
        stream: bool,
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

    # Messages

    def messages(self) -> list[dict[str, Any]]:
        """The conversation; a request with none is refused before sending: Ollama answers
        `messages: []` by loading the model alone (`done_reason: "load"`), no answer, which
        would be read as a response with no text. System instructions alone are sent."""
        if not self.request.messages:
            raise self.invalid(
                f"{self.profile.display_name} needs at least one message, and the request "
                "has none left to send"
            )
        return [self.message(message) for message in results_in_call_order(self.request.messages)]

    def message(self, message: Message) -> dict[str, Any]:
        if isinstance(message, SystemMessage | DeveloperMessage):
            return {"role": "system", "content": message.content}
        if isinstance(message, UserMessage):
            return self.user(message)
        if isinstance(message, AssistantMessage):
            return self.assistant(message)
        assert isinstance(message, ToolMessage)
        return self.tool_result(message)

    def user(self, message: UserMessage) -> dict[str, Any]:
        texts: list[str] = []
        images: list[str] = []
        for part in message.content:
            if isinstance(part, TextPart):
                texts.append(part.text)
            elif isinstance(part, ImagePart):
                image = self.image(part)
                if image is not None:
                    images.append(image)
            else:
                text = self.document(part)
                if text is not None:
                    texts.append(text)
        wire: dict[str, Any] = {"role": "user", "content": PART_SEPARATOR.join(texts)}
        if images:
            wire["images"] = images
        return wire

    def image(self, part: ImagePart) -> str | None:
        """The image as base64 text; `None` (with a warning) for one only a URL names. A
        data URL's goes checked, as standard base64 alone (not the whitespace, `%3D` or
        URL-safe `-_` it may hold): Ollama reads `images` as Go's `[]byte`, standard base64
        ("illegal base64 data at input byte ...")."""
        url = part.url
        if url is None:
            raw = part.data or b""
            encoded = base64.b64encode(raw).decode("ascii")
        else:
            inline = data_url(url)
            if inline is None:
                self.degradations.refuse(
                    RequestField.IMAGES,
                    f"{self.profile.display_name} takes images only as their bytes, not by URL",
                    instead="the image was left out",
                )
                return None
            decoded = inline_data(inline, "image")
            if isinstance(decoded, str):
                raise self.invalid(decoded)
            encoded, raw = decoded
        if not raw:
            raise self.invalid(
                f"the image holds no data, which {self.profile.display_name} cannot read"
            )
        return encoded

    def document(self, part: DocumentPart) -> str | None:
        """A plain-text document's text, given as bytes or in a data URL and read in its
        charset (UTF-8 where it names none), as Anthropic's encoder reads one: the media
        type without its case and parameters (`text/plain; charset=utf-8` is plain text), a
        data URL's own type and charset over the part's, RFC 2397's text/plain where neither
        names a type; a data URL's text percent-decoded where not marked base64
        (`data:text/plain,hello%20world`). `None` (with a warning) for any other document,
        and for a URL that is no data URL."""
        display = self.profile.display_name
        inline = None if part.url is None else data_url(part.url)
        media_type, charset = part_media_type(part.media_type)
        data: bytes | None
        if inline is not None:
            found = inline_document(inline, part.media_type)
            if isinstance(found, str):
                raise self.invalid(found)
            data, media_type, charset = found
        else:
            data = part.data
        if data is None:
            why = "takes no document by URL, only plain text given as bytes or in a data URL"
        elif media_type != "text/plain":
            why = f"takes plain-text documents only, not {media_type}"
        else:
            # Bytes that are no text in their charset are the caller's to mend, refused
            # before sending as every encoder refuses them.
            try:
                return document_text(data, charset)
            except UnreadablePart as error:
                raise self.invalid(str(error)) from None
        self.degradations.refuse(
            RequestField.DOCUMENTS, f"{display} {why}", instead="it was left out"
        )
        return None

    def assistant(self, message: AssistantMessage) -> dict[str, Any]:
        texts: list[str] = []
        thinking: list[str] = []
        calls: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, TextPart | Refusal):
                texts.append(block.text)
            elif isinstance(block, Reasoning):
                # Signatures and encrypted reasoning are other providers'; Ollama takes text.
                thinking.append(block.text)
            else:
                assert isinstance(block, ToolCall)
                calls.append(self.call(block))
        wire: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
        if any(thinking):
            wire["thinking"] = "".join(thinking)
        if calls:
            wire["tool_calls"] = calls
        encrypted_reasoning_left_out(message, self.degradations, self.profile.display_name)
        server_blocks_left_out(message, self.degradations)
        return wire

    def call(self, block: ToolCall) -> dict[str, Any]:
        arguments = call_arguments(
            block,
            provider=self.profile.name,
            display=self.profile.display_name,
            field="function.arguments",
            degradations=self.degradations,
        )
        self.call_names[block.id] = block.name
        wire: dict[str, Any] = {"function": {"name": block.name, "arguments": arguments}}
        if not _SYNTHETIC_ID.fullmatch(block.id):
            wire = {"id": block.id, **wire}
        return wire

    def tool_result(self, message: ToolMessage) -> dict[str, Any]:
        if message.is_error:
            self.degradations.refuse(
                RequestField.TOOL_RESULT_ERROR,
                f"{self.profile.display_name} has no error flag for tool results",
                instead="the result was sent as plain content",
            )
        wire: dict[str, Any] = {"role": "tool", "content": message.content}
        name = self.call_names.get(message.tool_call_id)
        if name is not None:
            wire["tool_name"] = name
        if not _SYNTHETIC_ID.fullmatch(message.tool_call_id):
            wire["tool_call_id"] = message.tool_call_id
        return wire

    # Tools

    def tools(self) -> list[dict[str, Any]] | None:
        request = self.request
        display = self.profile.display_name
        choice = request.tool_choice
        if request.parallel_tool_calls is not None:
            self.degradations.refuse(
                RequestField.PARALLEL_TOOL_CALLS,
                f"{display} has no setting for parallel tool calls",
            )
        if choice is not None and self.degradations.choice_without_tools(request, BODY_OPTION):
            choice = None
        if choice is not None and choice.mode in ("required", "tool"):
            self.degradations.refuse(
                RequestField.TOOL_CHOICE,
                f"{display} has no `tool_choice` and cannot force a tool call",
                instead="the tools were offered and the model chooses whether to call one",
            )
        if choice is not None and choice.mode == "none":
            # Without `tool_choice`, the one way to keep the model from calling a tool; the
            # body option's own tools are sent as given, and may be called.
            if option_tools(request, BODY_OPTION):
                self.degradations.refuse(
                    RequestField.TOOL_CHOICE,
                    f"{display} has no `tool_choice`",
                    instead="the body option's tools were offered and may be called",
                )
            return None
        if not request.tools:
            return None
        return [self.tool(tool) for tool in request.tools]

    def tool(self, tool: ToolDefinition) -> dict[str, Any]:
        # Ollama's decoder drops `$ref` (it keeps the root's `$defs`, and what is under
        # `items`), `oneOf`, `const`, `allOf` and root unions: a root `$ref` would leave no
        # parameters, a property's `$ref` or `oneOf` a property of any value, so each is
        # inlined or put in the keywords Ollama keeps; one left where it drops it is said.
        display = self.profile.display_name
        inlined = inline_refs(tool.parameters)
        parameters = object_parameters(inlined.schema)
        if parameters is None:
            raise self.invalid(no_object_parameters(tool.name, display))
        for note in inlined.notes(tool.name, display):
            self.degradations.approximate(RequestField.TOOLS, note)
        if tool.strict:
            self.degradations.refuse(
                RequestField.TOOLS,
                f"{self.profile.display_name} has no strict tools",
                instead=f"tool `{tool.name}` was sent without `strict`",
            )
        function = _present(
            name=tool.name, description=tool.description or None, parameters=parameters
        )
        return {"type": "function", "function": function}

    # Response format

    def rewrite(self, schema: dict[str, Any], subject: str) -> Rewrite:
        display = self.profile.display_name
        try:
            return cached_rewrite(schema, ("ollama", display), lambda: _rewrite(schema, display))
        except SchemaError as error:
            raise self.invalid(f"{subject} has a schema allama cannot read: {error}") from error

    def format(self) -> str | dict[str, Any] | None:
        fmt = self.request.response_format
        if fmt is None or fmt.type == "text":
            return None
        field = RequestField.RESPONSE_FORMAT
        if fmt.type == "choice":
            # Not a JSON Schema: an enum in `format` would come back as a quoted JSON string.
            self.degradations.refuse(
                field,
                f"{self.profile.display_name} has no plain-text choice output",
                code=FORMAT_NOT_SENT,
                instead="the answer was not constrained to the options",
            )
            return None
        if self.family.structured is CapabilitySupport.UNSUPPORTED:
            self.degradations.refuse(
                field,
                f"{self.where} does not apply `format` (it runs on Ollama's cloud, which has "
                "no structured outputs)",
                code=FORMAT_NOT_SENT,
                instead="the output is unconstrained",
            )
            return None
        if fmt.type == "json":
            return "json"
        schema: dict[str, Any] = fmt.json_schema or {}
        subject = f"the response format `{fmt.name or 'response'}`"
        rewrite = self.rewrite(schema, subject)
        if not rewrite.strict_representable:
            # `format` has no non-strict form: what the grammar cannot hold goes as JSON mode.
            reasons = "; ".join(
                note.message for note in rewrite.notes if note.kind is WarningKind.UNSUPPORTED
            )
            self.degradations.refuse(
                field,
                f"{self.profile.display_name} cannot enforce {subject}: {reasons}",
                instead='it was sent as `format: "json"`, which only constrains the output to JSON',
            )
            return "json"
        apply_strict_policy(rewrite, field=field, subject=subject, degradations=self.degradations)
        return rewrite.schema

    # Sampling and thinking

    def options(self) -> dict[str, Any]:
        request = self.request
        return _present(
            temperature=request.temperature,
            top_p=request.top_p,
            seed=self.seed(),
            num_predict=request.max_output_tokens,
            stop=list(request.stop) if request.stop else None,
        )

    def seed(self) -> int | None:
        """The request's seed, or `None` (with a warning) for one Ollama's runners would not
        keep (`Degradations.seed_within_32_bits`)."""
        return self.degradations.seed_within_32_bits(self.request.seed, self.profile.display_name)

    def think(self) -> tuple[bool | str | None, _Said | None]:
        """The `think` for the reasoning effort, and what to say of it (`say_think`)."""
        effort = self.request.reasoning_effort
        if effort is None:
            return None, None
        family = self.family
        if family.thinking is Thinking.LEVELS and family.levels:
            if effort == "none":
                # Ollama's documentation: gpt-oss ignores `think: false`, and its reasoning
                # "cannot be fully disabled"; the lowest level is the nearest to none.
                lowest = family.levels[0]
                return lowest, _Said(
                    True,
                    f"{self.where} cannot turn thinking off (it reasons whatever `think` says)",
                    f"its lowest level, `{lowest}`, was sent",
                )
            if effort in family.levels:
                return str(effort), None
            order = ("minimal", "low", "medium", "high")
            above = [level for level in family.levels if level in order[order.index(effort) :]]
            sent = above[0] if above else family.levels[-1]
            return sent, _Said(
                False, f"{self.where} takes no thinking level `{effort}`; `{sent}` was sent"
            )
        if effort == "none":
            return False, None
        return True, _Said(
            False,
            f"{self.where} turns thinking on or off, without a level; `think: true` was sent "
            f"for `{effort}`",
        )

    def say_think(self, said: _Said) -> None:
        field = RequestField.REASONING_EFFORT
        if said.refused:
            self.degradations.refuse(field, said.message, instead=said.instead)
        else:
            self.degradations.approximate(field, said.message)

    def think_replaced(self, theirs: Any) -> None:
        """The body option's `think` went in place of the one for the reasoning effort:
        worded as a body option's `format` in place of the response format is."""
        from allama.types import Warning

        given = json.dumps(theirs, ensure_ascii=False, separators=(",", ":"), default=repr)
        self.degradations.warn(
            Warning.unsupported(
                RequestField.REASONING_EFFORT,
                f"`think` of the body option `{BODY_OPTION}` ({given}) was sent in place of "
                f"the request's reasoning effort (`{self.request.reasoning_effort}`), which "
                "was not sent",
            )
        )

    # Log-probabilities

    def logprobs(self) -> int | None:
        """How many alternatives per token to ask for (0: the chosen token alone), or `None`
        when no log-probabilities are asked for (or they were refused)."""
        top = self.request.logprobs
        if top is None:
            return None
        if self.family.logprobs is CapabilitySupport.UNSUPPORTED:
            self.degradations.refuse(
                RequestField.LOGPROBS, f"{self.where} reports no log-probabilities"
            )
            return None
        if self.stream:
            self.degradations.refuse(
                RequestField.LOGPROBS,
                "log-probabilities are read from whole responses, not streams",
                instead="the stream was sent without asking for them",
            )
            return None
        return top

    # Everything

    def body(self) -> dict[str, Any]:
        request = self.request
        body: dict[str, Any] = {"model": request.model, "messages": self.messages()}
        tools = self.tools()
        if tools is not None:
            body["tools"] = tools
        fmt = self.format()
        if fmt is not None:
            body["format"] = fmt
        options = self.options()
        extra = request.option_json(BODY_OPTION)
        think, said = self.think()
        # The option's `think` is written over allama's below: what allama would say of
        # its own is then untrue, and the replacement is said instead.
        think_replaced = (
            think is not None
            and isinstance(extra, dict)
            and "think" in extra
            and not _same(extra["think"], think)
        )
        if said is not None and not think_replaced:
            self.say_think(said)
        if think is not None:
            body["think"] = think
        top_logprobs = self.logprobs()
        if top_logprobs is not None:
            body["logprobs"] = True
            if top_logprobs:
                body["top_logprobs"] = top_logprobs
        body["stream"] = self.stream
        # Told so, Ollama answers a prompt past `num_ctx` with an error, not by cutting it.
        body["truncate"] = False
        if isinstance(extra, dict):
            given = option_fields(
                body, extra, BODY_OPTION, stream=self.stream, degradations=self.degradations
            )
            more = given.pop("options", None)
            if isinstance(more, dict):
                options = {**options, **more}
                self.as_sent = settings_as_sent(request, more, _SETTINGS)
            elif "options" in extra:
                # Ollama reads `options` as an object alone (a 400 otherwise); allama's own
                # (temperature, seed, the output limit) still go.
                self.degradations.refuse(
                    RequestField.OPTIONS,
                    f"`options` of the body option `{BODY_OPTION}` was not sent: it is "
                    f"{_json_kind(more)}, where Ollama reads an object of model parameters",
                    instead="the request's own were sent",
                )
            if fmt is not None and "format" in given and given["format"] != fmt:
                # The caller's wins; an extraction's record shows its schema not sent.
                what = f"`format` of the body option `{BODY_OPTION}`"
                self.degradations.warn(
                    replaced_by_option(
                        self.request, RequestField.RESPONSE_FORMAT, what, given["format"]
                    )
                )
            if think_replaced:
                self.think_replaced(extra["think"])
            body.update(given)
        # The body option's tools go after the request's: of two of one name, which one a
        # call named could not be told.
        ours = request.tools if tools is not None else ()
        why = repeated_in_body(body, ours, self.profile.display_name, BODY_OPTION)
        if why is not None:
            raise self.invalid(why)
        if options:
            body["options"] = options
        return body


def _rewrite(schema: dict[str, Any], display: str) -> Rewrite:
    # The dialect is loaded when a schema is first rewritten (rewrites are cached).
    from allama.schema._dialects._llama_cpp import llama_cpp

    return unreported(llama_cpp(schema), f"{display}'s llama.cpp grammar converter")


def encode_request(
    request: ChatRequest,
    profile: OllamaProfile,
    family: OllamaFamily,
    *,
    url: str,
    headers: Mapping[str, str],
    params: Mapping[str, str] | None = None,
    stream: bool,
    degradations: Degradations,
) -> HttpRequest:
    """The HTTP request for `request`; warnings collect in `degradations`.

    Raises `UnsupportedError` (stage `BEFORE_SENDING`) for what Ollama cannot honour under
    `UnsupportedPolicy.ERROR`; `InvalidRequestError` for a conversation it cannot take (no
    message at all, tool call arguments that are not an object, an image data URL that is
    not valid base64, a document data URL marked base64 that is not, an image of no data),
    for a tool whose parameters are not an object, and for tools of one name.
    """
    encoder = _Encoder(request, profile, family, degradations, stream=stream)
    body = encoder.body()
    return HttpRequest("POST", url, headers, body, params or {}, as_sent=encoder.as_sent)


_SETTINGS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "max_output_tokens": "num_predict",
    "seed": "seed",
    "stop": "stop",
}
"""The request settings in `options`, by `ChatRequest` field (`settings_as_sent`)."""


def _same(theirs: object, ours: object) -> bool:
    """Whether a body option's JSON value is the one allama sends (`1` is not `true`)."""
    return type(theirs) is type(ours) and theirs == ours


def _json_kind(value: object) -> str:
    """What a JSON value is, in words, for a message about a value of the wrong kind."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "a string" if isinstance(value, str) else "a list"
