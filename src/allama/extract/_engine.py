"""The decisions of an extraction, written once as generators and driven by sync and async loops.

Each generator yields the I/O it needs (send this request; open this stream; read its first
event) and receives the outcome: a response, a stream, an event, or a provider error. The
drivers at the bottom perform that I/O with `chat`/`chat_stream` or their async twins, so
sync and async extraction cannot drift apart.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from pydantic_core import from_json

from allama._degradations import FORMAT_NOT_SENT, NOT_ON_STREAMS
from allama.adapters._surrogates import with_lone_surrogates
from allama.errors import (
    Error,
    RejectedOutputError,
    paid_before_foreign,
    paid_for,
    take_paid_before,
)
from allama.extract._errors import (
    EnforcementBelowError,
    ModeUnsupportedError,
    ParseError,
    ToolConflictError,
    _Failure,
)
from allama.extract._metadata import (
    AutoFallback,
    ExtractionMetadata,
    counted_field,
    file_warnings,
    noted_field,
)
from allama.extract._mode import ExtractionMode, SchemaEnforcement
from allama.extract._parse import Checked, Rejection, ask_again, parse_value
from allama.extract._root import object_rooted
from allama.extract._stops import SentStop, stops_sent
from allama.extract._target import Target, requested_mode
from allama.provider import NOT_INSTALLED, PASSED_BEFORE_SENDING, ChatProvider
from allama.stream import StreamCollector, with_paid
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    ChatValidation,
    ContentBlock,
    ProviderDataEvent,
    Reasoning,
    RequestField,
    ResponseFormat,
    ResponseStart,
    TextPart,
    ToolCall,
    Usage,
    UsageEvent,
    ValidationCoverage,
    Warning,
    WarningEvent,
    WarningKind,
)

T_co = TypeVar("T_co", covariant=True)
"""The value's type: covariant, as an `Extracted` is read-only (an `Extracted[Invoice]` is
an `Extracted[BaseModel]`)."""
F = TypeVar("F", bound=_Failure)


@dataclass(frozen=True, slots=True)
class Extracted(Generic[T_co]):
    """A typed value, the response it came from (the last one), and how it was obtained.

    `source` is the output text the value was read from (after repair, when it was
    repaired). Read again the same way, it gives the same value, which the value's own JSON
    does not always (validators that change what they read, unions, serializers of the
    type's own): a batch run's ledger keeps it for such types."""

    value: T_co
    response: ChatResponse
    metadata: ExtractionMetadata
    source: str | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class ExtractionPlan:
    """What an extraction would do, found without sending anything.

    `mode` is the mode after any automatic fallback; `enforcement` and `degradations` are
    what its first pass would report; `coverage` says how much of the call the provider's
    validation checked (`ENCODING`: a dry run of the call, so the figures are the ones the
    call would report; `CAPABILITIES`: only the capability table). The dry run is of the
    request given, messages and all: what the call would refuse before sending (no messages,
    too) raises from the plan, the same error, and what it would drop under
    `UnsupportedPolicy.WARN` is in `request_warnings`. Through a `FailoverProvider`, they
    are the first provider's: one failed over to may report less. Where the first refuses
    the call before sending and the failover moves on past that (`failover_on_unsupported`),
    they are those of the provider the call would go to, and a note says so.
    """

    mode: ExtractionMode
    enforcement: SchemaEnforcement
    degradations: tuple[Warning, ...]
    coverage: ValidationCoverage
    auto_fallback: AutoFallback | None
    root_wrapped: bool = False
    """Whether the type's schema would be sent wrapped in `{"value": ...}`: the provider
    takes only an object at the root, and the answer is unwrapped before validation."""
    stream: bool = False
    """Whether this is the plan of a streamed call (some endpoints drop the schema there)."""
    notes: tuple[Warning, ...] = ()
    """What the record's `notes` would say: the warnings on the other field the mode relies
    on, which leave the enforcement alone (a tool offered where it cannot be forced). Then
    the plan's own: a provider a failover would move on from (see above), or what the call
    needs that is not installed (`local`'s engine: the call fails before sending)."""
    request_warnings: tuple[Warning, ...] = ()
    """The dry run's warnings on the request's other fields, as the call's response would
    carry them (`response.warnings`): what the call would drop or change of the caller's
    request under `UnsupportedPolicy.WARN` (a temperature, thinking under a forced tool).
    They leave the mode, the enforcement and the notes alone."""


@dataclass(frozen=True, slots=True)
class Settings:
    repair: bool = False
    retries: int = 0
    allow_undeclared_keys: bool = False
    min_enforcement: SchemaEnforcement | None = None

    def rejects_undeclared(self, metadata: ExtractionMetadata) -> bool:
        return (
            not self.allow_undeclared_keys and metadata.enforcement is not SchemaEnforcement.EXACT
        )

    def below_floor(
        self, metadata: ExtractionMetadata, provider: str
    ) -> EnforcementBelowError | None:
        """The floor failure of a pass whose enforcement is below `min_enforcement`."""
        floor = self.min_enforcement
        if floor is None or metadata.enforcement.satisfies(floor):
            return None
        return EnforcementBelowError(
            provider=provider,
            metadata=metadata,
            required=floor,
            achieved=metadata.enforcement,
            reason=_reason(metadata.degradations),
        )


def _reason(degradations: list[Warning] | tuple[Warning, ...]) -> str:
    if not degradations:
        return "no pass reported the schema enforced"
    return "; ".join(warning.message for warning in degradations)


def select_mode(
    provider: ChatProvider, request: ChatRequest, requested: ExtractionMode
) -> tuple[ExtractionMode, bool]:
    """Resolve `AUTO` from the capability answers; the flag says native is only a guess.

    1. NATIVE when structured output is supported; 2. FORCED_TOOL when tool calls and forced
    tool choice are both supported; 3. NATIVE when structured output is unknown (a guess);
    4. FORCED_TOOL when neither tool answer is unsupported; 5. otherwise no mode (AUTO).
    """
    if requested is not ExtractionMode.AUTO:
        return requested, False
    supported, unknown = CapabilitySupport.SUPPORTED, CapabilitySupport.UNKNOWN
    native = provider.chat_capability(request.model, ChatCapability.STRUCTURED_OUTPUT)
    tools = provider.chat_capability(request.model, ChatCapability.TOOL_CALLS)
    forced = provider.chat_capability(request.model, ChatCapability.FORCED_TOOL_CHOICE)
    if native is supported:
        return ExtractionMode.NATIVE, False
    if tools is supported and forced is supported:
        return ExtractionMode.FORCED_TOOL, False
    if native is unknown:
        return ExtractionMode.NATIVE, True
    if _may_force_a_tool(provider, request.model):
        return ExtractionMode.FORCED_TOOL, False
    return ExtractionMode.AUTO, False


def _may_force_a_tool(provider: ChatProvider, model: str) -> bool:
    """Whether auto mode may use a forced tool: neither tool answer is `UNSUPPORTED` (a
    model that calls no tools, or cannot be forced to, would only be offered it)."""
    return all(
        provider.chat_capability(model, capability) is not CapabilitySupport.UNSUPPORTED
        for capability in (ChatCapability.TOOL_CALLS, ChatCapability.FORCED_TOOL_CHOICE)
    )


def _unsupported(target: Target, mode: ExtractionMode) -> ModeUnsupportedError:
    return ModeUnsupportedError(
        provider=target.provider, metadata=ExtractionMetadata.new(mode), mode=mode
    )


def _plan_request(request: ChatRequest) -> ChatRequest:
    """A schema-only copy: the model, the policy, the options and the caller's tools."""
    return ChatRequest(
        request.model,
        tools=request.tools,
        unsupported_policy=request.unsupported_policy,
        options=request.options,
        parallel_tool_calls=request.parallel_tool_calls,
    ).user("plan")


def _planned_request(request: ChatRequest, *, template: bool) -> ChatRequest:
    """The request a plan dry-runs: the caller's own, as the call sends it (a temperature,
    a stop sequence, a prefill or no messages at all the model refuses is refused in the
    plan too). A template each call adds its input to as a user message (a batch's, a Ray
    actor's) is given a placeholder one, as its calls will be: a template of system
    instructions alone is no request without messages."""
    return request.user("plan") if template else request


def _sends_no_schema(provider: ChatProvider, model: str) -> bool:
    """Whether a native pass sends nothing of the schema: the model has no structured output
    (its capability answer), and the provider's dry run refuses JSON mode too (Claude before
    4.5: the format is dropped, not told in words). JSON mode (`json_object`, the schema
    written into the instructions) takes only an object: the type is wrapped there. A
    provider whose dry run does not encode cannot tell: wrapped, as before."""
    if (
        provider.chat_capability(model, ChatCapability.STRUCTURED_OUTPUT)
        is not CapabilitySupport.UNSUPPORTED
    ):
        return False
    probe = ChatRequest(model, response_format=ResponseFormat.json_object()).user("JSON")
    try:
        validation = provider.validate_chat_request(probe)
    except Exception:  # a provider of the caller's own that fails to say: wrapped, as before
        return False
    if validation.coverage is not ValidationCoverage.ENCODING:
        return False
    return any(
        warning.kind is WarningKind.UNSUPPORTED and warning.is_about(RequestField.RESPONSE_FORMAT)
        for warning in validation.warnings
    )


_ROOT_QUESTION = {
    ExtractionMode.NATIVE: ChatCapability.RESPONSE_SCHEMA_ANY_ROOT,
    ExtractionMode.FORCED_TOOL: ChatCapability.TOOL_SCHEMA_ANY_ROOT,
}


@dataclass(slots=True)
class _Start:
    """An extraction about to send: its type, the mode asked for and chosen, its record."""

    tp: Any
    base: Target
    provider: ChatProvider
    requested: ExtractionMode
    guessed: bool
    metadata: ExtractionMetadata
    _targets: dict[ExtractionMode, Target] = field(default_factory=dict)

    @classmethod
    def of(
        cls, provider: ChatProvider, tp: Any, request: ChatRequest, name: str | None = None
    ) -> _Start:
        """Raises before anything is sent: tools of the request's own, or no mode to pick.
        `name` names the type in messages in place of its label (`Target.name`).

        The tools are refused here, before the root's capability is asked for
        (`target()`): those of `request.tools` and the function tools of a body option,
        named where they are (`ToolConflictError.of`, the rule `Target.derive` keeps)."""
        base = Target.of(tp, provider.name, request.model, name)
        requested = requested_mode(request, provider.name)
        mode, guessed = select_mode(provider, request, requested)
        if mode is ExtractionMode.AUTO:  # no mode to pick: clearing the tools would not help
            raise _unsupported(base, mode)
        conflict = ToolConflictError.of(base.provider, request, mode)
        if conflict is not None:  # in every mode
            raise conflict
        return cls(tp, base, provider, requested, guessed, ExtractionMetadata.new(mode))

    def target(self) -> Target:
        """The target of the mode in use: the type wrapped in an object where the mode's
        schema must have an object root and the type's has not. Recorded in the record."""
        mode = self.metadata.mode
        target = self._targets.get(mode)
        if target is None:
            target = self.base
            if not object_rooted(target.schema) and self._needs_object_root(mode):
                target = target.wrapping(self.tp)
            self._targets[mode] = target
        self.metadata.root_wrapped = target.wrapped
        return target

    def _needs_object_root(self, mode: ExtractionMode) -> bool:
        """Whether the mode's schema goes where only an object root is taken. Not a native
        pass that sends nothing of the schema (`_sends_no_schema`): nothing would ask the
        model for the wrapping object, and its answer, the type itself, would be refused."""
        model = self.base.model
        support = self.provider.chat_capability(model, _ROOT_QUESTION[mode])
        if support is CapabilitySupport.SUPPORTED:
            return False
        return mode is not ExtractionMode.NATIVE or not _sends_no_schema(self.provider, model)

    def fallback_for(self, error: Error) -> AutoFallback | None:
        fallback = self.metadata.auto_fallback_for(self.requested, self.guessed, error)
        if fallback is None or not fallback.message:
            return fallback
        # The native target's schema was refused: its places are named in the caller's terms.
        native = self._targets.get(ExtractionMode.NATIVE, self.base)
        return fallback.model_copy(update={"message": native.in_caller_terms(fallback.message)})

    def fall_back_or_raise(self, error: Error) -> None:
        """Switch to forced-tool mode after `error`, or raise it with the record attached."""
        fallback = self.fallback_for(error)
        if fallback is None:
            raised = self.target().pre_send_error(error, self.metadata)
            if raised is error:
                raise error  # with its own cause (the transport's exception, say)
            raise raised from None
        self.metadata.fall_back(fallback)


def plan(
    provider: ChatProvider,
    tp: Any,
    request: ChatRequest,
    *,
    stream: bool = False,
    name: str | None = None,
    template: bool = False,
) -> ExtractionPlan:
    """A dry run of the call `extract` would send for `request` (its messages and every
    field): what the call would refuse before sending (a field the model does not take,
    under `UnsupportedPolicy.ERROR`; no messages) raises here, the same error. `name` names
    the type in what it says (`Target.name`); `template=True` plans a template each call
    adds its input to, which may have no messages yet (`_planned_request`)."""
    start = _Start.of(provider, tp, request, name)
    metadata = start.metadata
    planned = _planned_request(request, template=template)
    while True:
        target = start.target()
        derived = target.derive(planned, metadata.mode)
        try:
            validation = _dry_run(provider, derived, stream=stream)
        except Error as error:
            start.fall_back_or_raise(error)
            continue
        if stream and _falls_back_on_streams(start, validation.warnings):
            continue
        counted: list[Warning] = []
        noted: list[Warning] = []
        # A provider a wrapper went past (a failover's, before sending), or what the call
        # needs that is not installed: a note, never a degradation of the provider the plan
        # is of.
        passed = [each for each in validation.warnings if each.code in _PLAN_NOTES]
        own = [each for each in validation.warnings if each.code not in _PLAN_NOTES]
        file_warnings(metadata.mode, own, target.reword, counted, noted)
        noted += passed
        others = _other_warnings(metadata.mode, own)
        return ExtractionPlan(
            mode=metadata.mode,
            enforcement=SchemaEnforcement.from_degradations(counted),
            degradations=tuple(counted),
            coverage=validation.coverage,
            auto_fallback=metadata.auto_fallback,
            root_wrapped=target.wrapped,
            stream=stream,
            notes=tuple(noted),
            request_warnings=others,
        )


_PLAN_NOTES = frozenset({PASSED_BEFORE_SENDING, NOT_INSTALLED})
"""The codes of a dry run's warnings a plan notes, about the call rather than its fields."""


def _other_warnings(mode: ExtractionMode, warnings: Sequence[Warning]) -> tuple[Warning, ...]:
    """The warnings `file_warnings` leaves out (on fields the mode does not rely on), once
    each and as the provider words them: the call's response carries them so, not the
    record, and a caller planning the call is told what of the request would be dropped."""
    fields = [each for each in (counted_field(mode), noted_field(mode)) if each is not None]
    others: list[Warning] = []
    for warning in warnings:
        if not any(warning.is_about(each) for each in fields) and warning not in others:
            others.append(warning)
    return tuple(others)


def _dry_run(provider: ChatProvider, request: ChatRequest, *, stream: bool) -> ChatValidation:
    """The provider's dry run of the call. One of the caller's own written before `stream=`
    is asked of the call unstreamed, and said to have consulted its capabilities alone: it
    did not dry-run the stream, so nothing is promised (nor a floor checked) of it."""
    if not stream:
        return provider.validate_chat_request(request)
    if _takes_stream(provider.validate_chat_request):
        return provider.validate_chat_request(request, stream=True)
    validation = provider.validate_chat_request(request)
    return validation.model_copy(update={"coverage": ValidationCoverage.CAPABILITIES})


def _takes_stream(method: Any) -> bool:
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):  # no signature to read: asked as the protocol says
        return True
    return "stream" in parameters or any(
        each.kind is inspect.Parameter.VAR_KEYWORD for each in parameters.values()
    )


def _falls_back_on_streams(start: _Start, warnings: Sequence[Warning]) -> bool:
    """Switch auto mode to a forced tool where the provider streams no response format
    (Groq streams no JSON Schema output): a native pass without it cannot hold the schema,
    where a tool's arguments are its own. Not where the capability answers rule a forced
    tool out, as they do for `select_mode`: the native pass goes on, the schema in words."""
    if not start.metadata.may_fall_back(start.requested):
        return False
    if not _may_force_a_tool(start.provider, start.base.model):
        return False
    for warning in warnings:
        if warning.code == NOT_ON_STREAMS and warning.is_about(RequestField.RESPONSE_FORMAT):
            start.metadata.fall_back(
                AutoFallback(field=RequestField.RESPONSE_FORMAT, message=warning.message)
            )
            return True
    return False


def check_floor_before_sending(
    settings: Settings,
    provider: ChatProvider,
    tp: Any,
    request: ChatRequest,
    *,
    stream: bool,
    name: str | None = None,
    template: bool = True,
) -> None:
    """Fail before paying when a dry run of the call (streamed or not, as it will be sent)
    shows the enforcement below the floor. A floor of `NOT_ENFORCED` holds for any call.
    `request` is a template each call adds its input to (a batch's, a Ray actor's), unless
    `template=False`: a call's own, dry-run as it is (`_planned_request`)."""
    floor = settings.min_enforcement
    if floor is None or floor is SchemaEnforcement.NOT_ENFORCED:
        return
    planned = plan(provider, tp, request, stream=stream, name=name, template=template)
    if planned.coverage is not ValidationCoverage.ENCODING or planned.enforcement.satisfies(floor):
        return
    metadata = ExtractionMetadata.new(planned.mode)
    metadata.auto_fallback = planned.auto_fallback
    metadata.root_wrapped = planned.root_wrapped
    # The record says what the call would have had, as the error does: nothing was sent.
    metadata.degradations = list(planned.degradations)
    metadata.enforcement = planned.enforcement
    raise EnforcementBelowError(
        provider=provider.name,
        metadata=metadata,
        required=floor,
        achieved=planned.enforcement,
        reason=_reason(planned.degradations),
    )


def finish(
    response: ChatResponse,
    metadata: ExtractionMetadata,
    target: Target,
    settings: Settings,
    checked: Checked | None = None,
    stop: tuple[SentStop, ...] = (),
) -> Extracted[Any]:
    """Parse a response the extraction is done with (one that will not be retried); `stop`
    is the stop sequences of the request it answered, as sent, and where each was given
    (`parse_value`)."""
    named = _answered_by(target, response.provider, response.model)
    parsed = _parse(response, metadata, named, settings, checked, stop)
    if isinstance(parsed, Rejection):
        raise _failed(parsed, metadata, response, named)
    return _extracted(parsed, response, metadata)


def _extracted(
    parsed: tuple[Any, bool, str, bool], response: ChatResponse, metadata: ExtractionMetadata
) -> Extracted[Any]:
    """The extraction of `response`'s value (`parse_value`'s reading). An output that held
    half of a character, read as U+FFFD, is told so on the response, as a body that held
    one is (`lone_surrogates`)."""
    value, repaired, source, halves = parsed
    metadata.repaired = repaired
    if halves:
        response = with_lone_surrogates(response)
    return Extracted(value=value, response=response, metadata=metadata, source=source)


def _parse(
    response: ChatResponse,
    metadata: ExtractionMetadata,
    named: Target,
    settings: Settings,
    checked: Checked | None = None,
    stop: tuple[SentStop, ...] = (),
) -> tuple[Any, bool, str, bool] | Rejection:
    """`parse_value` of an answer; one the wrapped type does not take is read as the type
    itself where the answering provider sent nothing of the schema (a failover's Claude
    before 4.5, planned for another provider: the model was never asked for the wrapping
    object). The record then says the root was not wrapped."""
    mode, rejects = metadata.mode, settings.rejects_undeclared(metadata)
    parsed = parse_value(response, mode, named, settings.repair, rejects, checked, stop)
    bare = named.bare
    if isinstance(parsed, Rejection) and bare is not None and _format_dropped(response, mode):
        unwrapped = parse_value(response, mode, bare, settings.repair, rejects, None, stop)
        if not isinstance(unwrapped, Rejection):
            metadata.root_wrapped = False
            return unwrapped
    return parsed


def _format_dropped(response: ChatResponse, mode: ExtractionMode) -> bool:
    """Whether a native answer came from a request whose format was not sent at all."""
    return mode is ExtractionMode.NATIVE and any(
        warning.code == FORMAT_NOT_SENT for warning in response.warnings
    )


def _answered_by(target: Target, provider: str | None, model: str | None) -> Target:
    """`target` naming the provider that answered and the model it answered with (where
    known): through a failover, the one of its providers that answered, not the failover.
    The failures of that answer name them; one before any answer names the provider the
    extraction was given (`target` as it is)."""
    named = replace(target, provider=provider or target.provider, model=model or target.model)
    return target if named == target else named


def _answered(error: F, named: Target) -> F:
    """`error`, a failure of an answer, with the model that answered (`_answered_by`) in its
    context beside the provider it already names."""
    error.context.model = named.model
    return error


def _failed(
    rejection: Rejection,
    metadata: ExtractionMetadata,
    response: ChatResponse | None,
    named: Target,
) -> _Failure:
    """The failure of an answer (`response`, or an output the provider refused), with the
    record; `named` is the target naming who answered (`_answered_by`)."""
    if rejection.undeclared:
        metadata.undeclared_key_rejections += 1
    error = _answered(rejection.error, named)
    error.metadata = metadata
    return error if response is None else error.with_response(response)


def _refused_output(outcome: Error) -> str | None:
    """The output the provider refused itself (`RejectedOutputError`): the pass's answer,
    which came back in the provider's error rather than in a response. In native mode the
    text the schema check refused (Groq's `json_validate_failed`); with a forced tool, the
    call the tool check refused (Groq's `tool_use_failed`), read as `_refused_answer` says."""
    if isinstance(outcome, RejectedOutputError):
        return outcome.failed_output
    return None


_REFUSED_CALL_ID = "call_0"
"""The id of a refused call read back (the provider gives it none): allama's stand-in, as
for a provider that gives no ids (`allama.adapters._tool_ids`)."""


def _refused_answer(output: str, outcome: Error, mode: ExtractionMode) -> ChatResponse:
    """The answer holding a refused output, as a response would have held it: its text,
    or with a forced tool the call where the output is one (`{"name": ..., "arguments":
    ...}`, as Groq gives a call back), else the text the model wrote in its place (a call
    in words the provider could not read); nothing where it wrote nothing (no call where
    one was required)."""
    call = _refused_call(output) if mode is ExtractionMode.FORCED_TOOL else None
    content: tuple[TextPart | ToolCall, ...] = (
        (call,) if call is not None else (TextPart(text=output),) if output else ()
    )
    return ChatResponse(content, provider=outcome.provider, model=outcome.model)


def _refused_call(output: str) -> ToolCall | None:
    """The tool call a refused output gives back, or `None` where it is not one. Arguments
    given as an object are its JSON text; as text, that text (the call's own JSON, as the
    wire gives arguments)."""
    try:
        given = from_json(output, allow_inf_nan=False)
    except (ValueError, TypeError):  # (TypeError: a lone surrogate)
        return None
    if not isinstance(given, dict) or "arguments" not in given:
        return None
    name, arguments = given.get("name"), given["arguments"]
    if not isinstance(name, str):
        return None
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    return ToolCall(id=_REFUSED_CALL_ID, name=name, arguments=arguments)


_PROVIDER_REFUSED = "the provider's own check of the output refused it"
"""Why a refused output cannot be used where the type's own check takes it: the provider
checked it (against the schema as it was sent, or as the tool call it could not read, or
text where a call was required), and no response holds the value."""


def _read_refused(
    output: str, outcome: Error, metadata: ExtractionMetadata, target: Target, settings: Settings
) -> tuple[ChatResponse, Rejection, Target]:
    """An output the provider refused, read as an answer holding it would be: why it cannot
    be used (what the type's check finds, else the provider's refusal), that answer, which
    the turn that asks again quotes, and the target naming the provider that refused it (a
    failover's, not the failover). No response came: the answer is only that."""
    mode = metadata.mode
    answer = _refused_answer(output, outcome, mode)
    named = _answered_by(target, outcome.provider, outcome.model)
    try:
        parsed = parse_value(
            answer, mode, named, settings.repair, settings.rejects_undeclared(metadata)
        )
    except Exception as raised:  # the type's own code (a validator's KeyError)
        metadata.keep_on(raised)  # what the calls cost goes with it
        raise
    if isinstance(parsed, Rejection):
        return answer, parsed, named
    calls = answer.tool_calls()
    refused = ParseError(
        provider=named.provider,
        metadata=ExtractionMetadata.new(mode),
        mode=mode,
        raw=calls[0].arguments if calls else output,  # what a response's would be
        detail=_PROVIDER_REFUSED,
    )
    return answer, Rejection(refused), named


def refused_midway(error: Error, opened: Opened, settings: Settings) -> _Failure | None:
    """The failure of a stream whose provider refused the output after a piece of it came
    (Groq's `json_validate_failed` as an error event after content): the `ParseError`
    holding it, as at the stream's opening (`open_steps`), with the stream's record so far:
    its usage, the call counted made (its usage unknown where none came), not a pass.
    `None` for any other error. A stream is not asked again; the caller raises it from
    `error`."""
    refused = _refused_output(error)
    if refused is None:
        return None
    metadata = opened.metadata.model_copy(deep=True)
    record_cut(metadata, opened.stream, opened.target, made=True)
    _, rejection, named = _read_refused(refused, error, metadata, opened.target, settings)
    return _failed(rejection, metadata, None, named)


Send = ChatRequest
Outcome = ChatResponse | Error


def extract_steps(
    settings: Settings,
    provider: ChatProvider,
    tp: Any,
    request: ChatRequest,
    *,
    name: str | None = None,
) -> Generator[Send, Outcome, Extracted[Any]]:
    """One extraction with its retries: yields each request, receives each outcome. `name`
    names the type in warnings and errors in place of its label (`Target.name`)."""
    check_floor_before_sending(
        settings, provider, tp, request, stream=False, name=name, template=False
    )
    start = _Start.of(provider, tp, request, name)
    metadata = start.metadata
    target = start.target()
    derived = target.derive(request, metadata.mode)
    retries_left = settings.retries
    while True:
        try:
            outcome = yield derived
        except BaseException as raised:  # the provider's own, none of allama's (`drive`)
            metadata.keep_on(raised)  # what the passes before it paid goes with it
            raise
        if isinstance(outcome, Error):
            # A failed call that reported usage (and each the chain holds) was paid for:
            # counted, though not a pass, as in a stream that failed.
            metadata.record_paid(paid_for(outcome))
            refused = _refused_output(outcome)
            if refused is not None:
                # The model answered, and the provider refused the answer: it fails as an
                # answer would, and is asked again as one would be.
                answer, rejection, named = _read_refused(
                    refused, outcome, metadata, target, settings
                )
                if retries_left > 0 and rejection.worth_asking_again():
                    retries_left -= 1
                    if rejection.undeclared:
                        metadata.undeclared_key_rejections += 1
                    derived = ask_again(derived, answer, metadata.mode, rejection)
                    continue
                raise _failed(rejection, metadata, None, named) from outcome
            start.fall_back_or_raise(outcome)
            target = start.target()
            derived = target.derive(request, metadata.mode)
            continue
        response = outcome
        metadata.record_pass(response, target.reword)
        # Logged for the provider that answered (a failover's, not the failover), with the
        # model asked for, as a stream's opening names it (`Opened.target`): each provider
        # a failover falls to warns of its own degradation once.
        _answered_by(target, response.provider, None).report_enforcement(metadata)
        named = _answered_by(target, response.provider, response.model)
        below = settings.below_floor(metadata, named.provider)
        if below is not None:
            raise _answered(below, named).with_response(response)
        try:
            parsed = _parse(response, metadata, named, settings, stop=stops_sent(provider, derived))
        except Exception as raised:  # the type's own code (a validator's KeyError)
            metadata.keep_on(raised)  # the passes it paid for go with it
            raise
        if not isinstance(parsed, Rejection):
            return _extracted(parsed, response, metadata)
        if retries_left > 0 and parsed.worth_asking_again():
            retries_left -= 1
            if parsed.undeclared:
                metadata.undeclared_key_rejections += 1
            derived = ask_again(derived, response, metadata.mode, parsed)
            continue
        raise _failed(parsed, metadata, response, named)


@dataclass(frozen=True, slots=True)
class OpenStream:
    request: ChatRequest


@dataclass(frozen=True, slots=True)
class ReadFirst:
    stream: Any


_FRAMING = (WarningEvent, ResponseStart, UsageEvent, ProviderDataEvent)
"""Stream events that say nothing of the answer's content."""

END = object()
"""The outcome of `ReadFirst` on a stream that ended without an item."""


@dataclass(slots=True)
class Opened:
    stream: Any
    ahead: list[Any]
    """The items read to check for a refusal, in order, to be given before the stream's
    next: warning events (which a provider gives before the wire's first event), then an
    event, an `Error` or `END`; empty when nothing was read."""
    metadata: ExtractionMetadata
    target: Target
    stop: tuple[SentStop, ...] = ()
    """The stop sequences of the request the stream was opened with, as sent, and where
    each was given."""
    received: bool = False
    """Whether the provider's response began: an event of the wire's was read (read ahead
    here, or given to the caller since). A stream stopped after that (closed, Ctrl-C) was a
    call made, and maybe billed, as one the network cut then is (`record_cut`)."""


def from_the_wire(item: Any) -> bool:
    """Whether `item`, read from a stream, is an event of the provider's response: not a
    warning (which a provider gives before the wire's first event), an `Error` or `END`."""
    return item is not END and not isinstance(item, WarningEvent | Error)


def cut_after_sending(raised: BaseException) -> bool:
    """Whether the transport kept on `raised` a call it cut after sending its request whole
    (`allama.transport._cut`: an entry that names no provider), taken off it; what wrappers
    kept on it stays."""
    paid = take_paid_before(raised)
    paid_before_foreign(raised, [entry for entry in paid if "provider" in entry])
    return any("provider" not in entry for entry in paid)


def _name_cut(raised: BaseException, provider: ChatProvider, model: str) -> None:
    """Name the call the transport kept on `raised` as cut after sending it whole: by the
    provider and the model called, which its price is looked up by (the transport knows
    neither)."""
    paid = take_paid_before(raised)
    if any("provider" not in entry for entry in paid):
        named = {"provider": provider.name, "model": model}
        paid = [entry if "provider" in entry else {**named, **entry} for entry in paid]
    paid_before_foreign(raised, paid)


def record_cut(
    metadata: ExtractionMetadata, stream: Any, target: Target, made: bool = False
) -> None:
    """Count on `metadata` a stream not (or not yet) finished: its usage so far, not a pass.

    Where no usage came yet (OpenAI's comes last) and the call was made (the model had
    begun its answer, or `made`: the transport cut it after its status, or its response
    had begun, `Opened.received`), it was made, and maybe billed, for what nothing says:
    its cost unknown, not nothing, as for a stream the network cut
    (`StreamCollector.mark_made`)."""
    collector = stream.collector
    so_far = collector.reported_metadata()
    if so_far.usage is None and (made or _answer_begun(collector)):
        so_far = so_far._replaced({"usage": Usage()})
    metadata.record_usage_and_degradations(so_far, target.reword)


def _answer_begun(collector: StreamCollector) -> bool:
    """Whether the stream brought any of the model's answer (text, a tool call's arguments,
    reasoning, a refusal): the test `StreamCollector.mark_made` makes of a failed stream."""
    return any(_has_content(block) for block in collector.partial_response().content)


def _has_content(block: ContentBlock) -> bool:
    if isinstance(block, ToolCall):
        return bool(block.arguments)
    if isinstance(block, Reasoning):
        return bool(block.text or block.encrypted_content or block.signature)
    return bool(block.text)


def open_steps(
    settings: Settings, provider: ChatProvider, tp: Any, request: ChatRequest
) -> Generator[OpenStream | ReadFirst, Any, Opened]:
    """Open the stream of an extraction, falling back on a refusal at setup or as item one."""
    check_floor_before_sending(settings, provider, tp, request, stream=True, template=False)
    start = _Start.of(provider, tp, request)
    metadata = start.metadata
    reading: tuple[Any, Target] | None = None
    """The stream opened whose first items are being read, and its target."""
    try:
        while True:
            reading = None
            target = start.target()
            if metadata.may_fall_back(start.requested):
                # Asked of the schema alone: a stream's refusal of the format depends on
                # nothing else (a plan's dry run of the whole request finds the same).
                shape = target.derive(_plan_request(request), metadata.mode)
                try:
                    warnings = provider.validate_chat_request(shape, stream=True).warnings
                except Exception:  # (a provider of the caller's own without `stream=`)
                    warnings = ()  # the send itself raises what matters, and falls back on it
                if _falls_back_on_streams(start, warnings):
                    continue
            derived = target.derive(request, metadata.mode)
            outcome = yield OpenStream(derived)
            if isinstance(outcome, Error):
                # What a wrapper's failed attempts before it paid (a retry that gave up): counted
                # with the record the error carries, as a call's are.
                metadata.record_paid(paid_for(outcome))
                refused = _refused_output(outcome)
                if refused is not None:
                    # An answer the provider refused as the stream opened: it fails as a
                    # streamed answer would at `finish()` (a stream is not asked again).
                    _, rejection, named = _read_refused(
                        refused, outcome, metadata, target, settings
                    )
                    raise _failed(rejection, metadata, None, named) from outcome
                start.fall_back_or_raise(outcome)
                continue
            stream = outcome
            ahead: list[Any] = []
            falls_back = metadata.may_fall_back(start.requested)
            if falls_back or metadata.mode is ExtractionMode.NATIVE:
                reading = (stream, target)
                # A refusal of the format comes before any content: after the provider's own
                # warnings (what it found in the request), the response's start, and the usage
                # an error event may report with it. So does a native answer the provider
                # refused whole (Groq's `json_validate_failed` as an error event): until a
                # piece of the answer comes, nothing was given to the caller, and the error
                # is the opening's, as the wrappers take it (`allama.wrappers._opening`). One
                # that comes after a piece of the answer is the stream's to raise as it reads
                # (`_stream`): the caller may hold that piece by then.
                item = yield ReadFirst(stream)
                ahead.append(item)
                while isinstance(item, _FRAMING):
                    item = yield ReadFirst(stream)
                    ahead.append(item)
                if isinstance(item, Error):
                    refused = _refused_output(item)
                    if refused is not None:
                        # Read as one refused as the stream opened (above). The call was
                        # made: the usage the stream reported before it, else unknown.
                        reading = None  # (what it paid is counted here, not as a cut)
                        metadata.record_paid(paid_for(with_paid(item, stream)))
                        _, rejection, named = _read_refused(
                            refused, item, metadata, target, settings
                        )
                        raise _failed(rejection, metadata, None, named) from item
                    fallback = start.fallback_for(item)
                    if fallback is not None:
                        # The refused stream's tokens were paid for, as a refused call's are.
                        metadata.record_paid(paid_for(with_paid(item, stream)))
                        metadata.fall_back(fallback)
                        continue
            # The provider the stream is of (a failover's, not the failover) names what
            # fails of its answer; `finish` names the model too, from the response.
            opened_by = _answered_by(target, stream.collector.provider, None)
            return Opened(
                stream=stream,
                ahead=ahead,
                metadata=metadata,
                target=opened_by,
                stop=stops_sent(provider, derived),
                received=any(from_the_wire(item) for item in ahead),
            )
    except BaseException as raised:  # the provider's own, none of allama's (`drive_open`)
        if reading is not None:  # cut as its first items were read: what it cost so far
            # Made where the transport cut it after its status, or its response had begun.
            made = cut_after_sending(raised)  # (what it kept taken off either way)
            made = made or any(from_the_wire(item) for item in ahead)
            record_cut(metadata, reading[0], reading[1], made)
        metadata.keep_on(raised)  # what a refused stream paid goes with it
        raise


R = TypeVar("R")


def drive(steps: Generator[Send, Outcome, R], provider: ChatProvider) -> R:
    try:
        request = next(steps)
        while True:
            try:
                outcome: Outcome = provider.chat(request)
            except Error as error:
                outcome = error
            except BaseException as raised:
                # Thrown in, for the steps to keep their record on it, and raised again.
                _name_cut(raised, provider, request.model)
                request = steps.throw(raised)
                continue
            request = steps.send(outcome)
    except StopIteration as done:
        result: R = done.value
        return result


async def adrive(steps: Generator[Send, Outcome, R], provider: ChatProvider) -> R:
    try:
        request = next(steps)
        while True:
            try:
                outcome: Outcome = await provider.achat(request)
            except Error as error:
                outcome = error
            except BaseException as raised:
                _name_cut(raised, provider, request.model)
                request = steps.throw(raised)
                continue
            request = steps.send(outcome)
    except StopIteration as done:
        result: R = done.value
        return result


def drive_open(
    steps: Generator[OpenStream | ReadFirst, Any, Opened], provider: ChatProvider
) -> Opened:
    try:
        step = next(steps)
        while True:
            outcome: Any
            if isinstance(step, OpenStream):
                try:
                    outcome = provider.chat_stream(step.request)
                except Error as error:
                    outcome = error
                except BaseException as raised:
                    _name_cut(raised, provider, step.request.model)
                    step = steps.throw(raised)
                    continue
            else:
                try:
                    outcome = next(step.stream)
                except StopIteration:
                    outcome = END
                except Error as error:
                    outcome = error
                except BaseException as raised:
                    step = steps.throw(raised)
                    continue
            step = steps.send(outcome)
    except StopIteration as done:
        opened: Opened = done.value
        return opened


async def adrive_open(
    steps: Generator[OpenStream | ReadFirst, Any, Opened], provider: ChatProvider
) -> Opened:
    try:
        step = next(steps)
        while True:
            outcome: Any
            if isinstance(step, OpenStream):
                try:
                    outcome = await provider.achat_stream(step.request)
                except Error as error:
                    outcome = error
                except BaseException as raised:
                    _name_cut(raised, provider, step.request.model)
                    step = steps.throw(raised)
                    continue
            else:
                try:
                    outcome = await anext(step.stream)
                except StopAsyncIteration:
                    outcome = END
                except Error as error:
                    outcome = error
                except BaseException as raised:
                    step = steps.throw(raised)
                    continue
            step = steps.send(outcome)
    except StopIteration as done:
        opened: Opened = done.value
        return opened
