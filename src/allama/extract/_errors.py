"""Why an extraction failed after (or before) calling the provider: one class per reason.

`str()` of a failure says what happened and where, for the caller: never the raw output
whole, but a parse detail may quote the value that did not fit (`invalid type: string
"abc", expected an integer`; one in a field typed secret, `SecretStr` or `Secret[int]`, by
its JSON type only: `a secret string`), and a refusal is quoted. The log view (`as_log()`)
leaves out the refusal text and the parse detail, which come from the model: log that, not
`str()`. The full form (`to_dict`) keeps the response for the caller.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Self

from pydantic import JsonValue

from allama.adapters._tool_ids import options_with_own_tools
from allama.errors import EXTRACTION_METADATA_KEY, ExtractionError, MessageOrigin
from allama.extract._metadata import ExtractionMetadata
from allama.extract._mode import ExtractionMode, SchemaEnforcement
from allama.types import ChatRequest, ChatResponse, FinishReason
from allama.types._redact import withheld

EXTRACTION_TOOL = "submit_structured_output"

__all__ = [
    "EnforcementBelowError",
    "MissingStructuredTextError",
    "MissingToolCallError",
    "ModeUnsupportedError",
    "ParseError",
    "RefusalSource",
    "RefusedError",
    "ToolConflictError",
    "TruncatedError",
    "UnexpectedToolCallCountError",
]


class _Failure(ExtractionError):
    """Shared by every extraction failure: the response, the record, and serialisation."""

    _field_names: ClassVar[tuple[str, ...]] = ()
    _withheld_fields: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *, provider: str, metadata: ExtractionMetadata, **fields: Any) -> None:
        self.provider_name = provider
        for name in self._field_names:
            setattr(self, name, fields.get(name))
        super().__init__(self._describe(), origin=MessageOrigin.AUTHORED)
        self.context.provider = provider
        self.response: ChatResponse | None = None
        self.metadata = metadata

    def _describe(self) -> str:
        raise NotImplementedError

    def with_response(self, response: ChatResponse) -> Self:
        self.response = response
        return self

    @property
    def retryable(self) -> bool:
        return False

    def _fields(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {"provider": self.provider_name}
        for name in self._field_names:
            value = getattr(self, name)
            if value is not None:
                out[name] = value.value if hasattr(value, "value") else value
        out["metadata"] = self.metadata.to_json_dict()
        if self.response is not None:
            out["response"] = self.response.model_dump(mode="json")
        return out

    @classmethod
    def _restore(cls, message: str, fields: dict[str, Any]) -> Self:
        metadata = ExtractionMetadata.from_json_dict(fields.get("metadata") or {"mode": "auto"})
        values = {name: fields.get(name) for name in cls._field_names}
        failure = cls(provider=str(fields.get("provider", "")), metadata=metadata, **values)
        response = fields.get("response")
        if isinstance(response, dict):
            failure.response = ChatResponse.model_validate(response)
        return failure

    def _log_fields(self) -> dict[str, JsonValue]:
        # The record under the key a provider error raised mid-extraction carries it
        # (`ExtractionMetadata.attach_to`): one family of keys and the same figures, usage
        # and cost, in the log view whichever way the extraction failed.
        return {EXTRACTION_METADATA_KEY: self.metadata.to_json_dict()}

    def __repr__(self) -> str:
        shown = [f"provider={self.provider_name!r}"]
        for name in self._field_names:
            value = getattr(self, name)
            if value is None:
                continue
            if name in self._withheld_fields and isinstance(value, str):
                shown.append(f"{name}={withheld(value)}")
            elif name in self._withheld_fields and isinstance(value, list):
                shown.append(f"{name}=[{', '.join(withheld(str(each)) for each in value)}]")
            else:
                shown.append(f"{name}={getattr(value, 'value', value)!r}")
        if self.response is not None:
            shown.append("response=<withheld>")
        shown.append(f"metadata={self.metadata!r}")
        return f"{type(self).__name__}({', '.join(shown)})"


def _mode(value: Any) -> ExtractionMode:
    return ExtractionMode(value)


class ModeUnsupportedError(_Failure):
    """No mode could be selected: the capability answers rule out both, or `parse` got AUTO."""

    kind = "extraction_unsupported"
    _field_names = ("mode",)
    mode: ExtractionMode

    def _describe(self) -> str:
        mode = _mode(self.mode)
        if mode is ExtractionMode.AUTO:
            return (
                f"{self.provider_name}: the provider reports that the model supports neither "
                "structured output nor forced tool calls, so extraction mode `auto` has no "
                "mode to pick; set ExtractionMode explicitly, or override the capability "
                "answers with a capability resolver"
            )
        return (
            f"{self.provider_name}: extraction mode `{mode.value}` is not supported; set "
            "ExtractionMode explicitly or override the capability answers with a capability "
            "resolver"
        )


class ToolConflictError(_Failure):
    """The request carries tools of its own, which extraction refuses in every mode: in
    `tools`, or as tools the caller runs (function, custom or client tools, such as
    Anthropic's `bash_...` or OpenAI's computer use) in a body option's `tools`
    (`option_tools` names those options).

    Clear them (`request.without_tools()`, the option's `tools`) or start a fresh request
    from the messages.
    """

    kind = "extraction_tool_conflict"
    _field_names = ("request_tools", "option_tools")
    request_tools: bool | None
    """Whether `request.tools` has tools; `None` (a conflict not told where) reads as yes."""
    option_tools: list[str] | None
    """The body options (`openai_compat`, `anthropic`) that give tools the caller runs."""

    @classmethod
    def of(
        cls, provider: str, request: ChatRequest, mode: ExtractionMode
    ) -> ToolConflictError | None:
        """The conflict of `request`'s own tools with an extraction in `mode`, naming where
        they are, or `None` where it has none. A body option's function, custom and client
        tools are its own as much as `request.tools` are (`own_option_tools`): sent beside
        the schema, the model could call one in place of answering."""
        given = options_with_own_tools(request)
        if not request.tools and not given:
            return None
        return cls(
            provider=provider,
            metadata=ExtractionMetadata.new(mode),
            request_tools=bool(request.tools),
            option_tools=given or None,
        )

    def _describe(self) -> str:
        start = f"{self.provider_name}: extraction cannot be combined with request tools"
        fresh = "or start a fresh request from the messages"
        if not self.option_tools:
            return f"{start}; clear `tools` and `tool_choice`, {fresh}"
        many = len(self.option_tools) > 1
        *first, last = (f"`{namespace}`" for namespace in self.option_tools)
        named = f"{', '.join(first)} and {last}" if first else last
        options = f"the body option{'s' if many else ''} {named}"
        # Not function tools alone: a client tool (`bash_...`, computer use) is the
        # caller's to run too (`own_option_tools`), and may be all an option gives.
        kinds = "function, custom or client tools"
        gives = f"as tools the caller runs ({kinds}) in {'their' if many else 'its'} `tools`"
        there = "those options" if many else "that option"
        if self.request_tools is False:
            return (
                f"{start}, which {options} give{'' if many else 's'} {gives}; take them out "
                f"of {there}, {fresh}"
            )
        return (
            f"{start}, which the request gives in `tools` and {options} {gives}; clear "
            f"`tools` and `tool_choice` and take the tools the caller runs out of {there}, "
            f"{fresh}"
        )


def _how_it_stopped(finish_reason: str | None) -> str:
    """The finish reason, when the response did not end the way an answer ends: an output
    missing after `model_armor` or `insufficient_system_resource` is the provider's
    doing, not the model's."""
    if finish_reason is None or FinishReason(finish_reason).finished_normally():
        return ""
    return f" (finish reason `{finish_reason}`)"


class _Missing(_Failure):
    """No output to read; `finish_reason` is how the response ended."""

    _field_names = ("finish_reason",)
    finish_reason: FinishReason | None

    @classmethod
    def _restore(cls, message: str, fields: dict[str, Any]) -> Self:
        if fields.get("finish_reason") is not None:
            fields["finish_reason"] = FinishReason(fields["finish_reason"])
        return super()._restore(message, fields)


class MissingStructuredTextError(_Missing):
    """The response had no text to parse (native mode), or only whitespace."""

    kind = "extraction_missing_text"

    def _describe(self) -> str:
        return f"{self.provider_name}: the model did not return structured text" + (
            _how_it_stopped(self.finish_reason)
        )


class MissingToolCallError(_Missing):
    """The response did not call the extraction tool (forced-tool mode)."""

    kind = "extraction_missing_tool_call"

    def _describe(self) -> str:
        return (
            f"{self.provider_name}: the model did not call the extraction tool "
            f"'{EXTRACTION_TOOL}'{_how_it_stopped(self.finish_reason)}"
        )


class UnexpectedToolCallCountError(_Failure):
    """The response called the extraction tool more than once."""

    kind = "extraction_tool_call_count"
    _field_names = ("count",)
    count: int

    def _describe(self) -> str:
        return (
            f"{self.provider_name}: the model returned {self.count} extraction tool calls, "
            "expected one"
        )


class TruncatedError(_Failure):
    """The output was cut off at the output token limit, by a full context window, or at a
    stop sequence the request sets, or the provider paused the turn (Anthropic's
    `pause_turn`).

    Never retried: the same limit (or stop sequence) would cut it off again. At the token
    limit, raise `max_output_tokens` (on a reasoning model, or lower the reasoning effort);
    at the context window (`finish_reason == "context_window"`), shorten the input, or where
    the output took most of the window, bound the type (the message says which); at a stop
    sequence (`finish_reason == "stop"`, the sequences in `stop`), leave them out of the
    extraction, where the request gives them: its `stop` (`request_stop`), or the field of
    a body option (`option_stops`); a paused turn continues when the conversation is sent
    back with it.
    """

    kind = "extraction_truncated"
    _field_names = (
        "mode",
        "finish_reason",
        "output_tokens",
        "reasoning_tokens",
        "input_tokens",
        "stop",
        "request_stop",
        "option_stops",
    )
    _withheld_fields = ("stop",)  # the caller's text, as the log view leaves it out
    mode: ExtractionMode
    finish_reason: FinishReason
    output_tokens: int | None
    reasoning_tokens: int | None
    input_tokens: int | None
    stop: list[str] | None
    """The request's stop sequences, where the output ended at one (`finish_reason` stop)."""
    request_stop: bool | None
    """Whether some of `stop` are given in the request's own `stop`, told where a body option
    gives some (`option_stops`); `None` reads as yes."""
    option_stops: dict[str, str] | None
    """The body options that give some of `stop`, each with the field that holds them
    (`{"gemini": "generationConfig.stopSequences"}`)."""

    def _describe(self) -> str:
        if self.finish_reason == FinishReason.STOP:
            sequences = ", ".join(json.dumps(each) for each in self.stop or ())
            return self._at_stop(f" ({sequences})" if sequences else "")
        mode = _mode(self.mode)
        if self.finish_reason == "pause_turn":
            return (
                f"{self.provider_name}: the provider paused the turn (a server tool's long "
                f"run) before the structured output (`{mode.value}` mode): send the "
                "conversation back, with the paused turn, to continue it"
            )
        if self.finish_reason == FinishReason.CONTEXT_WINDOW:
            text = (
                f"{self.provider_name}: the model filled its context window before finishing "
                f"the structured output (`{mode.value}` mode)"
            )
            written, given = self.output_tokens, self.input_tokens
            thought = self.reasoning_tokens or 0
            if written is not None and given is not None and thought > given:
                # The reasoning took the window: its level, not the type, is what to lower.
                return (
                    f"{text}: the model's reasoning took most of it ({thought} of "
                    f"{written} output tokens, {given} input): lower the reasoning effort, "
                    "or give the model a larger window"
                )
            if written is not None and given is not None and written - thought > given:
                # The output took most of the window: a shorter input gains little, and the
                # model wrote on past any value of the type's (a number or a text no bound
                # ends).
                answer = written - thought
                return (
                    f"{text}: its output took most of it ({answer} output tokens, {given} "
                    "input), so the model wrote on: bound the type (a string's `max_length`, "
                    "a number's digits), or give the model a larger window"
                )
            return f"{text}: shorten the input, a higher output token limit does not help"
        text = (
            f"{self.provider_name}: the model stopped at the output token limit before "
            f"finishing the structured output (`{mode.value}` mode)"
        )
        if self.output_tokens is not None and self.reasoning_tokens:
            text += (
                f"; {self.reasoning_tokens} of {self.output_tokens} output tokens went to "
                "reasoning: raise max_output_tokens or lower the reasoning effort"
            )
        return text

    def _at_stop(self, sequences: str) -> str:
        return (
            f"{self.provider_name}: the output ended at a stop sequence the request sets"
            f"{sequences}, before the structured output was complete "
            f"(`{_mode(self.mode).value}` mode): leave {self._stop_places()} out of an "
            "extraction"
        )

    def _stop_places(self) -> str:
        """Where the request gives the stop sequences, as a decision's refusal names them:
        `stop`, the field of a body option (`stop` of the body option `openai_compat`)."""
        places = [] if self.request_stop is False else ["`stop`"]
        places += [
            f"`{field}` of the body option `{namespace}`"
            for namespace, field in (self.option_stops or {}).items()
        ]
        *first, last = places or ["`stop`"]
        return f"{', '.join(first)} and {last}" if first else last

    def _log_message(self) -> str | None:
        # The stop sequences are the caller's text, which the log view leaves out.
        if self.finish_reason == FinishReason.STOP:
            return self._at_stop("")
        return super()._log_message()

    @classmethod
    def _restore(cls, message: str, fields: dict[str, Any]) -> Self:
        fields.setdefault("finish_reason", FinishReason.LENGTH)
        if fields["finish_reason"] is not None:
            fields["finish_reason"] = FinishReason(fields["finish_reason"])
        return super()._restore(message, fields)


class RefusalSource:
    """Where a refusal's text came from: the model, the provider's explanation, or nowhere."""

    MODEL = "model"
    PROVIDER = "provider"
    NONE = "none"


def _refused_without_text(provider: str, finish_reason: str | None) -> str:
    if finish_reason is not None:
        return (
            f"{provider}: the model refused to produce the structured output "
            f"(finish reason `{finish_reason}`)"
        )
    return f"{provider}: the model refused to produce the structured output"


class RefusedError(_Failure):
    """The model or the provider declined to produce the output. Never retried.

    `text` is the model's refusal or the provider's explanation (`source` says which).
    """

    kind = "extraction_refused"
    _field_names = ("mode", "finish_reason", "text", "source")
    _withheld_fields = ("text",)
    mode: ExtractionMode
    finish_reason: FinishReason | None
    text: str | None
    source: str

    def _describe(self) -> str:
        if self.text is not None and self.text.strip():
            return f"{self.provider_name}: the model refused: {self.text}"
        if self.text is not None:
            return _refused_without_text(self.provider_name, self.finish_reason) + (
                ", with an empty refusal"
            )
        return _refused_without_text(self.provider_name, self.finish_reason)

    def _log_message(self) -> str | None:
        return _refused_without_text(self.provider_name, self.finish_reason)

    @classmethod
    def _restore(cls, message: str, fields: dict[str, Any]) -> Self:
        if fields.get("finish_reason") is not None:
            fields["finish_reason"] = FinishReason(fields["finish_reason"])
        fields.setdefault("source", RefusalSource.NONE)
        return super()._restore(message, fields)


class EnforcementBelowError(_Failure):
    """The schema enforcement is below the floor the extractor requires. Never retried.

    Raised before sending when the provider's validation is a dry run of the call; after a
    pass otherwise, with its (paid) response attached.
    """

    kind = "extraction_enforcement_below"
    _field_names = ("required", "achieved", "reason")
    required: SchemaEnforcement
    achieved: SchemaEnforcement
    reason: str

    def _describe(self) -> str:
        achieved = SchemaEnforcement(self.achieved).value
        required = SchemaEnforcement(self.required).value
        return f"schema enforcement `{achieved}` is below the required `{required}`: {self.reason}"


class ParseError(_Failure):
    """The output was not valid JSON, did not match the type, or had an undeclared key.

    `raw` is the text the model sent (before repair or null normalisation); `path` names the
    value that does not fit (`items[2].price`), `None` for invalid JSON or the root.
    """

    kind = "extraction_parse"
    _field_names = ("mode", "raw", "detail", "path")
    _withheld_fields = ("raw", "detail", "path")
    mode: ExtractionMode
    raw: str
    detail: str
    path: str | None

    def _describe(self) -> str:
        mode = _mode(self.mode).value
        text = f"{self.provider_name}: failed to parse the output in `{mode}` mode: "
        if self.path is not None:
            text += f"at `{self.path}`: "
        return text + self.detail

    def _log_message(self) -> str | None:
        mode = _mode(self.mode).value
        return f"{self.provider_name}: failed to parse the output in `{mode}` mode"

    @property
    def raw_output(self) -> str:
        return self.raw
