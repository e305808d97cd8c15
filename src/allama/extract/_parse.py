"""Reading the value out of a response, and writing the retry turn when it cannot be used."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic_core import from_json

from allama._degradations import FORMAT_NOT_SENT, sent_stops
from allama.extract._errors import (
    EXTRACTION_TOOL,
    MissingStructuredTextError,
    MissingToolCallError,
    ParseError,
    RefusalSource,
    RefusedError,
    TruncatedError,
    UnexpectedToolCallCountError,
    _Failure,
)
from allama.extract._metadata import ExtractionMetadata
from allama.extract._mode import ExtractionMode
from allama.extract._root import ROOT_KEY
from allama.extract._stops import SentStop
from allama.extract._target import Target
from allama.extract._validation import Failure, check, check_answer
from allama.types import (
    ChatRequest,
    ChatResponse,
    FinishReason,
    RequestField,
    ToolMessage,
    UserMessage,
)
from allama.types._content import TextPart


@dataclass(slots=True)
class Rejection:
    """Output that could not be used, and whether it was JSON at all."""

    error: _Failure
    invalid_json: bool = False
    undeclared: bool = False
    output_path: str | None = None
    """Where the output failed, as the model wrote it (`value[1].price` when the type was
    sent wrapped); the error's `path` is in the caller's terms."""

    def worth_asking_again(self) -> bool:
        return isinstance(
            self.error,
            MissingStructuredTextError
            | MissingToolCallError
            | UnexpectedToolCallCountError
            | ParseError,
        )


def refusal(response: ChatResponse, mode: ExtractionMode, provider: str) -> RefusedError | None:
    written = response.first_refusal()
    declined = response.finish_reason in (FinishReason.REFUSAL, FinishReason.CONTENT_FILTER)
    if written is None and not declined:
        return None
    explanation = response.decline_explanation()
    if written is not None:
        text, source = written, RefusalSource.MODEL
    elif explanation is not None:
        text, source = explanation, RefusalSource.PROVIDER
    else:
        text, source = None, RefusalSource.NONE
    return RefusedError(
        provider=provider,
        metadata=ExtractionMetadata.new(mode),
        mode=mode,
        finish_reason=response.finish_reason,
        text=text,
        source=source,
    )


_PAUSED = FinishReason("pause_turn")
"""Anthropic's turn paused in a long server tool's run: what it holds is not the answer,
which comes when the conversation is sent back to continue."""
_CUT = (FinishReason.LENGTH, FinishReason.CONTEXT_WINDOW, _PAUSED)


def declined_or_cut(
    response: ChatResponse, mode: ExtractionMode, provider: str
) -> RefusedError | TruncatedError | None:
    """The failure of a response that was refused or cut off, whatever it holds."""
    refused = refusal(response, mode, provider)
    if refused is not None:
        return refused
    if response.finish_reason in _CUT:
        return _truncated(response, mode, provider, response.finish_reason)
    return None


def _truncated(
    response: ChatResponse,
    mode: ExtractionMode,
    provider: str,
    finish_reason: FinishReason,
    stop: tuple[str, ...] = (),
    given: tuple[SentStop, ...] = (),
) -> TruncatedError:
    """The failure of `response` cut off (at `stop`, one of the request's stop sequences,
    where given), with the token counts its message weighs, and where the request gives
    `stop` (`given`: its own `stop`, a body option's field), which its advice names."""
    usage = response.usage
    places = {each.text: each for each in given}
    options: dict[str, str] = {}
    own = False
    for text in stop:
        place = places.get(text)
        if place is None or place.namespace is None or place.field is None:
            own = True  # (one a provider named that was not sent reads as the request's)
        else:
            options.setdefault(place.namespace, place.field)
    return TruncatedError(
        provider=provider,
        metadata=ExtractionMetadata.new(mode),
        mode=mode,
        finish_reason=finish_reason,
        output_tokens=None if usage is None else usage.output_tokens,
        reasoning_tokens=None if usage is None else usage.reasoning_tokens,
        input_tokens=None if usage is None else usage.input_tokens,
        stop=list(stop) if stop else None,
        request_stop=own if options else None,  # (told only beside a body option's)
        option_stops=options or None,
    )


def _named_stop_sequence(response: ChatResponse) -> str | None:
    """The stop sequence the provider says ended `response` (Anthropic's `stop_sequence`)."""
    from allama.adapters.anthropic._decode import NAMESPACE, STOP_SEQUENCE_KEY

    told = response.provider_data.get(NAMESPACE)
    named = told.get(STOP_SEQUENCE_KEY) if isinstance(told, dict) else None
    return named if isinstance(named, str) and named else None


def _told_no_stop_sequence(response: ChatResponse) -> bool:
    """Whether the provider says no stop sequence ended `response`: Anthropic's own API
    (its verified profile: Anthropic, a gateway in front of it) names the one that did, so
    an answer it ended otherwise (`end_turn`) was not cut by one. Other hosts of the dialect
    (vLLM, SGLang) may answer a matched stop as `end_turn` with no sequence named: their
    word is not taken."""
    from allama.providers._presets import PRESETS

    preset = PRESETS.get(response.provider or "")
    if preset is None or preset.dialect != "anthropic":
        return False
    return bool(getattr(preset.profile, "verified", False))


def _stopped_inside(
    response: ChatResponse,
    mode: ExtractionMode,
    provider: str,
    stop: tuple[SentStop, ...],
    raw: str,
) -> TruncatedError | None:
    """The failure of an output that ended at one of the request's stop sequences before its
    value did: the response stopped (`stop`, as a stop sequence ends it) with at least one
    of the sequences sent (not every one dropped by the provider), and the text ended inside
    the JSON value, not broken before its end. Asked again with the same `stop`, it would be
    cut again. The error names the sequences sent, and where the request gives them."""
    if not stop or response.finish_reason != FinishReason.STOP or not _cut_short(raw):
        return None
    sent = sent_stops(tuple(each.text for each in stop), response.warnings)
    named = _named_stop_sequence(response)
    if named is not None:
        # The provider says which sequence ended it: cut, whatever the warnings say.
        cut = sent if named in sent else (named,)
        return _truncated(response, mode, provider, FinishReason.STOP, cut, stop)
    if not sent or _told_no_stop_sequence(response):
        return None
    return _truncated(response, mode, provider, FinishReason.STOP, sent, stop)


_ENDED_INSIDE = "EOF while parsing"
"""How pydantic-core's JSON reader begins the error of a text that ended inside its value
(`EOF while parsing a list at line 1 column 14`): an object, a list, a string or a number
left open. Every other error names a character that breaks the text before its end."""


def _cut_short(raw: str) -> bool:
    """Whether `raw` is a JSON value the text ended inside: what is there reads as JSON, up
    to an end that came too soon (`{"a": [1,`), not text that breaks before (`{"a" 1`),
    nor a whole value with more after it."""
    if not raw.strip():
        return False
    try:
        from_json(raw, allow_inf_nan=False)
    except ValueError as error:
        if str(error).startswith(_ENDED_INSIDE):
            return True
    except TypeError:  # a lone surrogate: not JSON to any reader
        return False
    else:
        return False
    # Prose or a fence before the value (`Here it is: {"a": 1,`, a ```json fence): the
    # value from its first bracket on, as repair would find it.
    starts = [at for at in (raw.find("{"), raw.find("[")) if at > 0]
    if not starts:
        return False
    try:
        from_json(raw[min(starts) :], allow_inf_nan=False)
    except ValueError as error:
        return str(error).startswith(_ENDED_INSIDE)
    except TypeError:
        return False
    return False


def repair_candidate(raw: str) -> str | None:
    """The JSON value inside `raw` without a markdown fence or prose around it.

    `None` when there is nothing to strip.

    >>> repair_candidate('Sure! Here it is: {"a": 1}. Anything else?')
    '{"a": 1}'
    """
    trimmed = raw.strip()
    if trimmed.startswith("```"):
        fenced = trimmed[3:]
        newline = fenced.find("\n")
        if newline >= 0:
            body = fenced[newline + 1 :]
            end = body.find("```")
            body = (body if end < 0 else body[:end]).strip()
            if body:
                return body
    starts = [i for i in (trimmed.find("{"), trimmed.find("[")) if i >= 0]
    ends = [i for i in (trimmed.rfind("}"), trimmed.rfind("]")) if i >= 0]
    if not starts or not ends:
        return None
    start, end = min(starts), max(ends)
    if end < start:
        return None
    candidate = trimmed[start : end + 1]
    return candidate if len(candidate) < len(trimmed) else None


def raw_output(response: ChatResponse, mode: ExtractionMode, provider: str) -> str | Rejection:
    if mode is ExtractionMode.FORCED_TOOL:
        calls = [call for call in response.tool_calls() if call.name == EXTRACTION_TOOL]
        if not calls:
            return Rejection(
                MissingToolCallError(
                    provider=provider,
                    metadata=ExtractionMetadata.new(mode),
                    finish_reason=response.finish_reason,
                )
            )
        if len(calls) > 1:
            return Rejection(
                UnexpectedToolCallCountError(
                    provider=provider, metadata=ExtractionMetadata.new(mode), count=len(calls)
                )
            )
        return calls[0].arguments
    text = response.text()
    if text is None or not text.strip():
        return Rejection(
            MissingStructuredTextError(
                provider=provider,
                metadata=ExtractionMetadata.new(mode),
                finish_reason=response.finish_reason,
            )
        )
    return text


@dataclass(frozen=True, slots=True)
class Checked:
    """An output text and the value `check` found in it, rejecting undeclared keys or not.
    A value found with undeclared keys rejected is the value found without (there were
    none), so it stands for both. `halves`: the text held half of a character, read as
    U+FFFD (`check_answer`)."""

    raw: str
    reject_undeclared: bool
    value: Any
    halves: bool = False

    def matches(self, raw: str, reject_undeclared: bool) -> bool:
        return (self.reject_undeclared or not reject_undeclared) and raw == self.raw


def parse_value(
    response: ChatResponse,
    mode: ExtractionMode,
    target: Target,
    repair: bool,
    reject_undeclared: bool,
    checked: Checked | None = None,
    stop: tuple[SentStop, ...] = (),
) -> tuple[Any, bool, str, bool] | Rejection:
    """The value, whether repair was needed, the text it was read from and whether that
    held half of a character (read as U+FFFD: the answer is told `lone_surrogates`), or
    why the output cannot be used.

    `checked` is an output already validated (a stream's, when its value ended): when the
    output is that text, checked the same way, its value is taken as it is. `stop` is the
    stop sequences of the request as sent, and where each was given: an output that ended
    at one inside its value is a `TruncatedError`, not a `ParseError` (asking again would
    cut it again)."""
    provider = target.provider
    stopped = declined_or_cut(response, mode, provider)
    if stopped is not None:
        return Rejection(stopped)
    raw = raw_output(response, mode, provider)
    if isinstance(raw, Rejection):
        return raw
    adapter, schema = target.type.adapter, target.schema
    if checked is not None and checked.matches(raw, reject_undeclared):
        result, halves = checked.value, checked.halves
    else:
        result, halves = check_answer(raw, adapter, schema, reject_undeclared)
    if not isinstance(result, Failure):
        return target.unwrap(result), False, raw, halves
    failure = result
    if failure.invalid_json:
        # (Repair takes a value out of text around it: it cannot end one cut short.)
        cut = _stopped_inside(response, mode, provider, stop, raw)
        if cut is not None:
            return Rejection(cut)
    if repair:
        candidate = repair_candidate(raw)
        if candidate is not None:
            repaired, halves = check_answer(candidate, adapter, schema, reject_undeclared)
            if not isinstance(repaired, Failure):
                return target.unwrap(repaired), True, candidate, halves
            if not repaired.invalid_json:
                failure = repaired
    detail, path = failure.message, target.caller_path(failure.path)
    if _beside_the_value(target, failure):
        # A key beside the wrapped value is in no place of the caller's type.
        detail, path = f"{detail} (the key the value is wrapped in)", None
    reason = response.finish_reason
    if reason is not None and not reason.finished_normally():
        detail += f" (finish reason `{reason}`)"
    return Rejection(
        ParseError(
            provider=provider,
            metadata=ExtractionMetadata.new(mode),
            mode=mode,
            raw=raw,
            detail=detail,
            path=path,
        ),
        invalid_json=failure.invalid_json,
        undeclared=failure.undeclared,
        output_path=failure.path,
    )


def _beside_the_value(target: Target, failure: Failure) -> bool:
    """Whether `failure` is an undeclared key of the object the type was sent wrapped in."""
    path = failure.path
    if not (target.wrapped and failure.undeclared) or path is None:
        return False
    return path != ROOT_KEY and not path.startswith((f"{ROOT_KEY}.", f"{ROOT_KEY}["))


def read_again(tp: Any, source: str, root_wrapped: bool = False) -> Any:
    """The value an extraction read from `source` (`Extracted.source`), read again as it
    was then: the same normalisation, the same strict validation against the same schema
    (wrapped in `{"value": ...}` when the record says `root_wrapped`). A type whose
    validators change what they read gives the value it gave then, not one changed twice.
    `ReadAgainError` when the type no longer accepts it."""
    target = Target.of(tp, "", "")
    if root_wrapped:
        target = target.wrapping(tp)
    result = check(source, target.type.adapter, target.schema, False)
    if isinstance(result, Failure):
        raise ReadAgainError(result.message, target.caller_path(result.path), result.kind)
    return target.unwrap(result)


class ReadAgainError(ValueError):
    """A stored output the type no longer accepts. `kind` (pydantic's kind of error, or
    `None` for text that is no JSON) and `path` say what and where without the output's
    text; the message may quote it."""

    def __init__(self, message: str, path: str | None, kind: str | None) -> None:
        super().__init__(message)
        self.path = path
        self.kind = kind


def _problem(rejection: Rejection) -> str:
    error = rejection.error
    if isinstance(error, ParseError):
        if rejection.invalid_json:
            return f"it was not valid JSON: {error.detail}"
        if rejection.output_path is not None:
            return f"it did not match the schema at `{rejection.output_path}`: {error.detail}"
        return f"it did not match the schema: {error.detail}"
    if isinstance(error, MissingStructuredTextError):
        return "it contained no text"
    if isinstance(error, MissingToolCallError):
        return f"it did not call the `{EXTRACTION_TOOL}` tool"
    if isinstance(error, UnexpectedToolCallCountError):
        return f"it called the `{EXTRACTION_TOOL}` tool {error.count} times instead of once"
    return str(error)


def ask_again(
    request: ChatRequest, response: ChatResponse, mode: ExtractionMode, rejection: Rejection
) -> ChatRequest:
    """`request` with the failed reply and the feedback, for a retry.

    Every replayed tool call is answered with an ordinary tool result (not a failed one),
    so the retry turn is sendable on every endpoint, including one with no tool error flag
    under the strict policy.
    """
    problem = _problem(rejection)
    forced = mode is ExtractionMode.FORCED_TOOL
    final = _final(forced, problem, _unsent_schema(request, response, mode))
    calls = response.tool_calls()
    if not response.content:
        return request.push(UserMessage(content=(TextPart(text=final),)))
    request = request.push(response.to_assistant_message())
    for call in calls:
        if forced:
            feedback = (
                f"The previous call could not be used: {problem}. Call `{EXTRACTION_TOOL}` once "
                "with arguments that match its schema."
            )
        else:
            feedback = "This tool call was not run: a structured reply is required."
        request = request.push(ToolMessage(tool_call_id=call.id, content=feedback))
    if forced and calls:
        return request
    return request.push(UserMessage(content=(TextPart(text=final),)))


def _unsent_schema(
    request: ChatRequest, response: ChatResponse, mode: ExtractionMode
) -> dict[str, Any] | None:
    """The schema of a native pass whose provider sent nothing of it (`FORMAT_NOT_SENT`:
    Claude before 4.5, Gemini without JSON output, Ollama's cloud), which the retry turn
    must then write out: the model was never shown it. `None` where it was sent."""
    if mode is not ExtractionMode.NATIVE:
        return None
    fmt = request.response_format
    if fmt is None or fmt.type != "json_schema" or fmt.json_schema is None:
        return None
    dropped = any(
        warning.code == FORMAT_NOT_SENT and warning.is_about(RequestField.RESPONSE_FORMAT)
        for warning in response.warnings
    )
    return fmt.json_schema if dropped else None


def _final(forced: bool, problem: str, unsent: dict[str, Any] | None = None) -> str:
    """The closing turn of a retry; `unsent` is a schema the request could not carry, written
    out as the schema is where only the instructions can carry it (`json_object_note`)."""
    if forced:
        return (
            f"The previous reply could not be used: {problem}. Call `{EXTRACTION_TOOL}` once "
            "with the extracted data."
        )
    if unsent is not None:
        schema = json.dumps(unsent, ensure_ascii=False, separators=(",", ":"))
        return (
            f"The previous reply could not be used: {problem}. Reply again with only the JSON "
            f"value, matching this JSON Schema exactly:\n{schema}"
        )
    return (
        f"The previous reply could not be used: {problem}. Reply again with only the JSON "
        "value, matching the schema exactly."
    )
