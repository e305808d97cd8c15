"""Decisions: a choice question answered with the most native constraint the provider has,
and the probability of each option where the provider reports token log-probabilities.

The constraint, best first: a plain-text choice (`ResponseFormat.choice`: Gemini's
`text/x.enum`, llama.cpp's grammar; through a failover, only where each of its providers
has one); else the extraction engine with the options as a JSON
Schema enum (native or forced tool, wrapped where the dialect needs an object root); else
the options in the prompt alone, recorded as not enforced. Where the caller insists on
log-probabilities (`probabilities=True`) and none can be had, the decision is refused
before sending: the model reports none (or none at the request's reasoning effort), or the
answer would come as a forced tool's arguments, which have none; so is a stop sequence (the
request's, or a body option's) that could end the answer within an option, which would then
be read as another, or within the `{"value": ...}` a JSON answer is wrapped in. In every case
the answer is checked against the options: a value outside them is never returned.

Written once as a generator, like extraction, and driven by the same sync and async loops.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    BeforeValidator,
    JsonValue,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic_core import PydanticCustomError

from allama.errors import (
    PAID_BEFORE,
    UNNAMED_PARAMETERS_KEY,
    Error,
    InvalidRequestError,
    UnsupportedError,
    errors_in_chain,
    paid_ahead,
    paid_before_foreign,
    paid_for,
)
from allama.extract._choices import Option, Options, listed_label, options_of
from allama.extract._engine import (
    Extracted,
    Outcome,
    Send,
    Settings,
    _reason,
    _Start,
    extract_steps,
    select_mode,
)
from allama.extract._errors import (
    MissingStructuredTextError,
    ParseError,
    ToolConflictError,
    _Failure,
)
from allama.extract._metadata import ExtractionMetadata
from allama.extract._mode import ExtractionMode, SchemaEnforcement
from allama.extract._parse import declined_or_cut
from allama.extract._probabilities import Measured, Spelling, json_string_span, measure
from allama.extract._root import ROOT_KEY
from allama.extract._stops import SentStop, every_level, stops_sent
from allama.extract._target import requested_mode
from allama.provider import ChatProvider
from allama.types import (
    ALLAMA_NAMESPACE,
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    DeveloperMessage,
    FinishReason,
    RequestField,
    ResponseFormat,
    SystemMessage,
    TextPart,
    UnsupportedPolicy,
    UnsupportedStage,
    UserMessage,
    Warning,
)

__all__ = ["PROMPT_OPTION", "Decision", "decide_steps", "options_of"]

C = TypeVar("C")
F = TypeVar("F", bound=_Failure)

PROMPT_OPTION = "allama.decision.options"
"""Request option set on a decision sent as a plain prompt (no format, no tool): its JSON
value is the options' labels, the answer a plain label. Scripted providers read it to
answer with the label their value stands for; nothing sends it."""

TOP_LOGPROBS = 20
"""Alternatives asked for at each token: the most every provider takes, so that little of
the probability is left unlisted."""


@dataclass(frozen=True, slots=True)
class Decision(Generic[C]):
    """The option chosen, how sure the model was of it, and how it was obtained.

    `probabilities` maps every option to the probability the model gave it, measured from
    the token log-probabilities the provider reported (the sum over the branches that lead
    to that option alone); `None` when the provider reported none, with the reason in
    `probabilities_missing`. They sum to at most 1: the rest went to text that is no
    option, or is `unresolved` (not listed by the provider, shared by several options, a
    token whose text cannot be told, or a branch that may yet become an option or none:
    nothing holds to the options an answer in the prompt alone, or one whose constraint is
    not exact), which is the most any option's true probability can exceed its figure by.
    Probabilities are conditional on the text written before the answer.

    `confidence` is the chosen option's share of the options' probability: its figure over
    the sum of every option's, each the probability of the whole option as the model wrote
    its tokens. That is not what a grammar holding the model to the options samples from:
    a grammar renormalises at every token, so options that share a first token (`New
    York`, `New Jersey`) are sampled in other shares. It is given only when every option
    had a branch among the listed tokens (`None` otherwise: an option below the provider's
    list could have had any share of what was left; those are `unlisted`);
    `confidence_bounds()` gives the least and the most it can be in every case.
    """

    value: C
    abstained: bool
    """Whether the model chose the "none of these" option (`allow_abstain=True`); `value`
    is then `None`."""
    response: ChatResponse
    metadata: ExtractionMetadata
    probabilities: Mapping[C, float] | None = None
    unresolved: float | None = None
    probabilities_missing: str | None = None
    unlisted: frozenset[C] | None = None
    """The options no listed token led to alone (their figure is 0, their probability
    unknown up to `unresolved`); `None` with `probabilities`."""

    @property
    def probability(self) -> float | None:
        """The probability of the option chosen, as measured."""
        if self.probabilities is None:
            return None
        return self.probabilities.get(self.value)

    @property
    def confidence(self) -> float | None:
        """The chosen option's share of the options' measured probability, when every option
        was measured."""
        probabilities = self.probabilities
        if probabilities is None or self.unlisted:
            return None
        total = sum(probabilities.values())
        return probabilities[self.value] / total if total > 0.0 else None

    def confidence_bounds(self) -> tuple[float, float] | None:
        """The least and the most `confidence` can be, given what was left unresolved."""
        chosen, total, unresolved = self.probability, self._total(), self.unresolved
        if chosen is None or total is None or unresolved is None or total + unresolved <= 0.0:
            return None
        whole = total + unresolved
        return chosen / whole, min(1.0, (chosen + unresolved) / whole)

    def _total(self) -> float | None:
        if self.probabilities is None:
            return None
        return sum(self.probabilities.values())

    def __repr__(self) -> str:
        confidence = self.confidence
        shown = "None" if confidence is None else f"{confidence:.3f}"
        return (
            f"Decision(value={self.value!r}, confidence={shown}, "
            f"mode={self.metadata.mode.value!r}, enforcement={self.metadata.enforcement.value!r}, "
            f"passes={self.metadata.passes})"
        )


class _Strategy:
    CHOICE = "choice"
    """A plain-text choice format: the provider holds the answer to the options."""
    EXTRACT = "extract"
    """The extraction engine, with the options as a JSON Schema enum."""
    PROMPT = "prompt"
    """The options in the prompt alone."""


@dataclass(slots=True)
class _Logprobs:
    """Whether log-probabilities are asked for, and why not when they are not."""

    ask: bool
    missing: str | None = None
    may_drop: bool = False
    """Asked without the caller insisting: a provider refusal is answered by asking again
    without them (a refused request is not billed)."""
    dropped: bool = False


def decide_steps(
    settings: Settings,
    provider: ChatProvider,
    options: Options,
    request: ChatRequest,
    *,
    probabilities: bool | None,
) -> Generator[Send, Outcome, Decision[Any]]:
    """One decision with its retries: yields each request, receives each outcome."""
    requested = requested_mode(request, provider.name)
    strategy, mode = _strategy(provider, request, requested)
    # The caller's own tools (`tools`, a body option's function tools) are refused before
    # sending, as extraction refuses them, in every strategy: the plain ones would send them.
    conflict = ToolConflictError.of(provider.name, request, mode)
    if conflict is not None:
        raise conflict
    _check_stops(provider, request, options, in_json=strategy == _Strategy.EXTRACT)
    logprobs = _logprobs_plan(provider, request, mode, strategy, probabilities)
    asked = _instructed(request, options, plain=strategy != _Strategy.EXTRACT)
    if logprobs.ask:
        asked = asked.with_logprobs(max(request.logprobs or 0, TOP_LOGPROBS))
    if strategy == _Strategy.EXTRACT:
        steps = _json_steps(settings, provider, options, asked)
    else:
        steps = _plain_steps(settings, provider, options, asked, strategy)
    response, metadata, label, spelling = yield from _relay(steps, logprobs)
    option = options.option(label)
    assert option is not None  # checked against the options by both paths
    return _decision(options, option, response, metadata, spelling, logprobs)


_Read = tuple[ChatResponse, ExtractionMetadata, str, Spelling | str]
"""The response a decision was read from, its record, the option's label, and where the
label is written (or why its probabilities cannot be measured)."""


def _json_steps(
    settings: Settings, provider: ChatProvider, options: Options, request: ChatRequest
) -> Generator[Send, Outcome, _Read]:
    """A decision answered through the extraction engine, the options a JSON Schema enum.

    Under repair, a label written loosely in the JSON (`yes` for `Yes`) is read as its
    option, and so is an answer the JSON read refuses that names one as a plain answer
    would (`Yes`, or `"Yes"` where an object was asked for): both recorded as repaired.

    What the engine says names the caller's type (`options.name`), not the `Literal` of
    the labels sent, and lists the options briefly where they are many (`_briefly`)."""
    scalars = _scalars(options) if settings.repair else None
    target_type = _answer_type(options.labels, options.name, scalars)
    inner = extract_steps(settings, provider, target_type, request, name=options.name)
    if settings.repair:
        read = yield from _plain_where_json_fails(inner, options, provider.name)
        if not isinstance(read, Extracted):
            return read
        extracted = read
    else:
        extracted = yield from inner
    label = extracted.value
    response, metadata = extracted.response, extracted.metadata
    written = _written(extracted.source, metadata) if settings.repair else None
    if written is not None and written != label:
        metadata.repaired = True
        return response, metadata, label, _REPAIRED
    return response, metadata, label, _json_spelling(response, label, metadata)


class _ReadAsPlain(Exception):
    """Thrown into the extraction's steps where they would ask again, to end them there:
    they keep their record on it, as on any exception none of allama's."""


def _plain_where_json_fails(
    inner: Generator[Send, Outcome, Extracted[Any]], options: Options, provider: str
) -> Generator[Send, Outcome, Extracted[Any] | _Read]:
    """Drive the extraction's steps; an answer in text the engine could not read (it asks
    again, or fails with a `ParseError`) that names an option as a plain answer is read
    (exactly, trimmed or loosely) is taken as that option, matched after repair: the
    answer was paid for."""
    try:
        request = next(inner)
        while True:
            try:
                outcome = yield request
            except BaseException as raised:  # passed in, for the steps to keep their record
                request = inner.throw(raised)
                continue
            try:
                following = inner.send(outcome)
            except ParseError as failed:
                option = _named_plainly(request, outcome, options, provider)
                if option is None or not isinstance(outcome, ChatResponse):
                    raise
                failed.metadata.repaired = True
                return outcome, failed.metadata, option.label, _REPAIRED
            option = _named_plainly(request, outcome, options, provider)
            if option is not None and isinstance(outcome, ChatResponse):
                # The engine asks again after a response only when it could not read it.
                metadata = _record_of(inner)
                metadata.repaired = True
                return outcome, metadata, option.label, _REPAIRED
            request = following
    except StopIteration as done:
        extracted: Extracted[Any] = done.value
        return extracted


def _named_plainly(
    request: ChatRequest, outcome: Outcome, options: Options, provider: str
) -> Option | None:
    """The option a text answer names read as a plain answer under repair, or as a JSON
    number or boolean that is its option's value; `None` for an error, a tool call's answer
    (`request.tools` are the engine's forced tool: a decision refuses the caller's own), and
    text that names none."""
    if not isinstance(outcome, ChatResponse) or request.tools:
        return None
    read = _read_plain(outcome, options, ExtractionMode.NATIVE, provider, repair=True)
    if not isinstance(read, _Failure):
        return read[0]
    # A JSON number or boolean alone (`true` where an object was asked for): its option.
    try:
        data = json.loads(outcome.text() or "")
    except (ValueError, RecursionError):
        return None
    label = _scalar_label(data, _scalars(options))
    return None if label is None else options.option(label)


def _record_of(inner: Generator[Send, Outcome, Extracted[Any]]) -> ExtractionMetadata:
    """The record of extraction steps that would ask again, which this ends."""
    ended = _ReadAsPlain()
    with contextlib.suppress(_ReadAsPlain):
        inner.throw(ended)
    inner.close()
    record = ExtractionMetadata.from_error(ended)
    assert record is not None  # a pass was recorded: the steps keep their record on it
    return record


def _strategy(
    provider: ChatProvider, request: ChatRequest, requested: ExtractionMode
) -> tuple[str, ExtractionMode]:
    if requested is not ExtractionMode.FORCED_TOOL and _choice_everywhere(provider, request.model):
        return _Strategy.CHOICE, ExtractionMode.NATIVE
    mode, _ = select_mode(provider, request, requested)
    if mode is ExtractionMode.AUTO:
        return _Strategy.PROMPT, ExtractionMode.NATIVE
    return _Strategy.EXTRACT, mode


def _choice_everywhere(provider: ChatProvider, model: str) -> bool:
    """Whether the provider holds a plain-text answer to the options, and so does each
    provider it sends through. A failover answers capability questions as its first
    provider, but a choice failed over to one without it (OpenAI's Chat Completions) would
    go unconstrained: the options go as a JSON Schema enum instead, which the providers
    with structured output hold."""
    return all(
        each.chat_capability(model, ChatCapability.CHOICE_OUTPUT) is CapabilitySupport.SUPPORTED
        for each in every_level(provider, set())
        if isinstance(each, ChatProvider)
    )


def _check_stops(
    provider: ChatProvider, request: ChatRequest, options: Options, *, in_json: bool
) -> None:
    """Refuse, before sending, a stop sequence that could end the answer within an option:
    servers leave the stop sequence out of the text, so what was written before it would be
    read as another option (`New` of `New York` at `" York"`), or as none, after paying. One
    is within an option where it occurs in it, or begins with its tail (`"York, NY"`), in
    any case (the model may write an option in another). A JSON answer writes the option as
    a JSON string, quotes and escapes and all (`in_json`), and where the engine wraps it
    (`root_wrapped`), inside `{"value": ...}`: a stop within that object would leave the
    answer unread after paying. The object's text is the schema's, not the model's choice,
    and servers match a stop as it is written: it is compared in its case (`Value` cuts no
    `"value"`). Strict output is written compact by some providers (OpenAI's, xAI's, Groq's
    `{"value":"Yes"}`) and spaced by others (Mistral's, vLLM's, at times Anthropic's
    `{"value": "Yes"}`); which a provider writes is not known here, so both are checked.

    The stops checked are those the call sends: the request's `stop`, and a body option's
    (`stops_sent`), which would otherwise go unchecked."""
    sent = stops_sent(provider, request)
    if not sent:
        return
    wrapped = in_json and _wrapped(provider, request, options)
    for stop in sent:
        for option in options.options:
            # Compared without case: an answer written loosely (`new york`) is read loosely.
            if _cuts(stop.text.casefold(), _written_as(option.label, in_json).casefold()):
                within = f"the option {_shown(option.label)} of {options.name}"
                raise _stop_refused(provider, request, stop, within)
    if not wrapped:
        return
    for stop in sent:
        for option in options.options:
            written = _written_as(option.label, in_json)
            # Compact, or spaced as `json.dumps` writes it: providers write either.
            objects = (f'{{"{ROOT_KEY}":{written}}}', f'{{"{ROOT_KEY}": {written}}}')
            if any(_cuts(stop.text, each) for each in objects):
                within = (
                    f'the JSON object `{{"{ROOT_KEY}": ...}}` the option '
                    f"{_shown(option.label)} of {options.name} is written in"
                )
                raise _stop_refused(provider, request, stop, within, read_as="none")


def _written_as(label: str, in_json: bool) -> str:
    """An option as the answer writes it: a JSON string in a JSON answer, else as it is."""
    return json.dumps(label, ensure_ascii=False) if in_json else label


def _wrapped(provider: ChatProvider, request: ChatRequest, options: Options) -> bool:
    """Whether the JSON answer comes wrapped in `{"value": ...}`, as the engine's target
    for the mode it picks wraps it (`root_wrapped`): a provider that takes only an object
    at the root, or a forced tool."""
    tp = _answer_type(options.labels, options.name, None)
    return _Start.of(provider, tp, request, options.name).target().wrapped


def _stop_refused(
    provider: ChatProvider,
    request: ChatRequest,
    stop: SentStop,
    within: str,
    *,
    read_as: str = "another option, or as none",
) -> InvalidRequestError:
    """The refusal of `stop`, which could end the answer `within` a part of it (which
    names the option and its type), naming the body option that gives it, where one does,
    as the place to leave it out of."""
    given, leave = "", "`stop`"
    if stop.namespace is not None:
        given = f" in `{stop.field}` of the body option `{stop.namespace}`"
        leave = f"the body option's `{stop.field}`"
    return (
        InvalidRequestError(
            f"the stop sequence {_shown(stop.text, quoted=True)}{given} could end the answer "
            f"within {within}, which would then be read as {read_as}: leave it out of "
            f"{leave} for a decision"
        )
        .mark_authored()
        .with_provider(provider.name)
        .with_model(request.model)
    )


def _cuts(stop: str, written: str) -> bool:
    """Whether `stop` occurs in `written`, or begins with a tail of it (past its first
    character): a stop sequence the answer's end holds the start of, which a server may
    hold back as it would be cut."""
    if stop in written:
        return True
    last = written[-1]
    longest = min(len(stop), len(written) - 1)
    return any(
        stop[size - 1] == last and written.endswith(stop[:size]) for size in range(1, longest + 1)
    )


_SHOWN_CHARACTERS = 60
"""The most of an option or a stop sequence a message quotes (a label may run for pages)."""


def _shown(text: str, *, quoted: bool = False) -> str:
    """`text` as a message quotes it: as JSON (a stop sequence, as an extraction's
    `TruncatedError` quotes it) or in backticks, the start alone of a long one."""
    start = text[:_SHOWN_CHARACTERS]
    shown = json.dumps(start) if quoted else f"`{start}`"
    return shown if start == text else f"{shown}… ({len(text)} characters)"


def _logprobs_plan(
    provider: ChatProvider,
    request: ChatRequest,
    mode: ExtractionMode,
    strategy: str,
    wanted: bool | None,
) -> _Logprobs:
    if wanted is False:
        return _Logprobs(False, "not asked for (probabilities=False)")
    # The model's own answer first: where it reports none, that is the reason, whatever
    # the mode (Anthropic's forced tool, Groq's).
    support = provider.chat_capability(request.model, ChatCapability.LOGPROBS)
    reason: str | None = None
    if support is CapabilitySupport.UNSUPPORTED:
        reason = f"`{request.model}` on {provider.name} reports no log-probabilities"
    elif support is CapabilitySupport.UNKNOWN:
        reason = _refused_as_sent(provider, request)
    if reason is not None:
        if wanted:
            raise _refused(provider, request, reason)
        return _Logprobs(False, reason)
    if strategy == _Strategy.EXTRACT and mode is ExtractionMode.FORCED_TOOL:
        if wanted:
            # Nor would a plain-text answer's measure anything: the models that fall to a
            # forced tool (OpenAI's `gpt-4`, `gpt-3.5-turbo`) list no end of the output,
            # so no branch of one is known to end in an option. Said before sending.
            raise _refused(
                provider,
                request,
                "the answer would come as a tool call, whose arguments have no "
                "log-probabilities, and in plain text its tokens, which stop before the end "
                "of the answer, would measure no option",
            )
        return _Logprobs(
            False, "the answer came as a tool call, whose arguments have no log-probabilities"
        )
    return _Logprobs(True, may_drop=wanted is None)


def _refused_as_sent(provider: ChatProvider, request: ChatRequest) -> str | None:
    """Why the provider would leave out log-probabilities asked of this request, where the
    model's capability leaves them unknown: its encoder knows what the request's other
    settings do to them (OpenAI's GPT-5.1 and 5.2 report them at reasoning effort `none`
    alone, and answer 400 at another). A dry run, nothing sent."""
    probe = (
        request.with_logprobs(TOP_LOGPROBS)
        .with_response_format(None)
        .with_unsupported_policy(UnsupportedPolicy.WARN)
    )
    try:
        checked = provider.validate_chat_request(probe)
    except Error:  # the call itself will say what is wrong with the request
        return None
    said = [w.message for w in checked.warnings if w.is_about(RequestField.LOGPROBS)]
    return said[0] if said else None


def _refused(provider: ChatProvider, request: ChatRequest, reason: str) -> UnsupportedError:
    return (
        UnsupportedError(
            f"probabilities=True, but {reason}",
            field=RequestField.LOGPROBS,
            stage=UnsupportedStage.BEFORE_SENDING,
        )
        .mark_authored()
        .with_provider(provider.name)
        .with_model(request.model)
    )


_PLAIN = (
    "Answer with exactly one of the options below, written exactly as it is listed, "
    "and nothing else."
)
_STRUCTURED = "Choose exactly one of the options below."


def _instructed(request: ChatRequest, options: Options, *, plain: bool) -> ChatRequest:
    """The request with the options (and what they mean) in a system message, placed after
    the caller's own leading system messages."""
    lead = _PLAIN if plain else _STRUCTURED
    text = f"{lead}\n\nOptions:\n{options.listing()}"
    messages = list(request.messages)
    at = 0
    while at < len(messages) and isinstance(messages[at], SystemMessage | DeveloperMessage):
        at += 1
    messages.insert(at, SystemMessage(content=text))
    return request._replaced({"messages": tuple(messages)})


def _relay(
    inner: Generator[Send, Outcome, Any], logprobs: _Logprobs
) -> Generator[Send, Outcome, Any]:
    """Pass requests and outcomes through; a provider that refuses log-probabilities
    asked for without the caller insisting gets the same request again without them."""
    refused: list[dict[str, JsonValue]] = []
    """What the refusal and the attempts before it paid (a retry that gave up on it):
    carried on the outcome of the request asked again, whose record counts it."""
    try:
        request = next(inner)
        while True:
            if logprobs.dropped:
                request = request.with_logprobs(None)
            try:
                outcome = yield request
            except BaseException as raised:  # passed in, for the steps to keep their record on
                paid_before_foreign(raised, refused)  # the refused call's, counted with it
                refused = []
                request = inner.throw(raised)
                continue
            refuser = _refuses_logprobs(outcome) if logprobs.may_drop else None
            if refuser is not None and not logprobs.dropped:
                assert isinstance(outcome, Error)
                logprobs.dropped = True
                logprobs.missing = (
                    f"{refuser.provider or 'the provider'} refused log-probabilities for this "
                    "model; the decision was asked again without them"
                )
                refused = paid_for(outcome)
                continue
            if refused:
                outcome = _paid_before_it(outcome, refused)
                refused = []
            request = inner.send(outcome)
    except StopIteration as done:
        return done.value


_LOGPROBS_REFUSED = "logprobs_refused"
"""The key, in `provider_data["allama"]`, of what a call refused for its log-probabilities
paid, on the response of the call asked again without them."""


def _paid_before_it(outcome: Outcome, paid: list[dict[str, JsonValue]]) -> Outcome:
    if isinstance(outcome, Error):
        return paid_ahead(outcome, paid)
    entries: list[JsonValue] = list(paid)
    return outcome.with_provider_data(ALLAMA_NAMESPACE, _LOGPROBS_REFUSED, {PAID_BEFORE: entries})


def _refuses_logprobs(outcome: Outcome) -> Error | None:
    """The error of `outcome` refusing the log-probabilities asked for (`None` when none
    does): by name, or among "the
    requested parameters" a router refused without naming one (they are the decision's
    own to drop; the schema, if that was it, is refused again without them)."""
    if not isinstance(outcome, Error):
        return None
    # A failover's error is its last provider's: one tried before it may have refused them.
    return next((link for link in errors_in_chain(outcome) if _refuses_them(link)), None)


def _refuses_them(error: Error) -> bool:
    if not isinstance(error, InvalidRequestError | UnsupportedError):
        return False
    if isinstance(error, UnsupportedError) and error.field is RequestField.LOGPROBS:
        return True
    if error.context.metadata.get(UNNAMED_PARAMETERS_KEY) is True:
        return True
    return "logprob" in error.message.lower()


def _plain_steps(
    settings: Settings,
    provider: ChatProvider,
    options: Options,
    request: ChatRequest,
    strategy: str,
) -> Generator[Send, Outcome, _Read]:
    """A decision answered as plain text: held to the options by the provider (a choice
    format) or by the prompt alone."""
    mode = ExtractionMode.NATIVE
    metadata = ExtractionMetadata.new(mode)
    # The caller's response format is replaced, as extraction's mode replaces it: the
    # answer is read as plain text.
    if strategy == _Strategy.CHOICE:
        sent = request.with_response_format(ResponseFormat.choice(options.labels))
        _check_floor(settings, provider, sent, metadata)
    else:
        sent = request.with_response_format(None).with_option_json(
            PROMPT_OPTION, list(options.labels)
        )
        why = (
            f"{provider.name} has neither structured output nor a forced tool for "
            f"`{request.model}`: the options of {options.name} were given in the "
            "prompt only"
        )
        metadata.degradations.append(Warning.unsupported(RequestField.RESPONSE_FORMAT, why))
        metadata.enforcement = SchemaEnforcement.NOT_ENFORCED
        _check_floor(settings, provider, None, metadata)
    retries_left = settings.retries
    while True:
        try:
            outcome = yield sent
        except BaseException as raised:  # the provider's own, none of allama's (`drive`)
            metadata.keep_on(raised)
            raise
        if isinstance(outcome, Error):
            # What the failed call and a wrapper's attempts before it paid, as an
            # extraction's record counts them.
            metadata.record_paid(paid_for(outcome))
            raise metadata.attach_to(outcome)
        response = outcome
        metadata.record_pass(response)
        # A failure of the answer names the provider and model that answered (a failover's,
        # not the failover), as the extraction engine's do.
        answered_by = response.provider or provider.name
        below = settings.below_floor(metadata, answered_by)
        if below is not None:
            raise _answered(below, response, sent).with_response(response)
        held = strategy == _Strategy.CHOICE and metadata.enforcement is SchemaEnforcement.EXACT
        read = _read_plain(response, options, mode, answered_by, settings.repair, held=held)
        if isinstance(read, _Failure):
            retryable = isinstance(read, ParseError | MissingStructuredTextError)
            if retries_left > 0 and retryable:
                retries_left -= 1
                sent = _ask_again(sent, response, options)
                continue
            read.metadata = metadata
            raise _answered(read, response, sent).with_response(response)
        option, spelling = read
        metadata.repaired = spelling == _REPAIRED
        if response.finish_reason == FinishReason.LENGTH:
            metadata.notes.append(_AT_LIMIT)
        if not held and isinstance(spelling, Spelling):
            # Held by the prompt alone (or by a choice not enforced exactly), any answer is
            # read trimmed: so are the alternatives, each an option's only once it has
            # ended (any text may follow it).
            spelling = _TRIMMED
        return response, metadata, option.label, spelling


def _answered(error: F, response: ChatResponse, sent: ChatRequest) -> F:
    """`error`, a failure of `response`, naming the model that answered (the one asked for,
    where the response does not say) beside the provider it names."""
    error.context.model = response.model or sent.model
    return error


def _check_floor(
    settings: Settings,
    provider: ChatProvider,
    sent: ChatRequest | None,
    metadata: ExtractionMetadata,
) -> None:
    """Fail before paying when the call, as it will be sent, is below the floor."""
    floor = settings.min_enforcement
    if floor is None or floor is SchemaEnforcement.NOT_ENFORCED:
        return
    if sent is not None:
        validation = provider.validate_chat_request(sent)
        warnings = [w for w in validation.warnings if w.is_about(RequestField.RESPONSE_FORMAT)]
        achieved = SchemaEnforcement.from_degradations(warnings)
        degradations = warnings
    else:
        achieved, degradations = metadata.enforcement, list(metadata.degradations)
    if achieved.satisfies(floor):
        return
    from allama.extract._errors import EnforcementBelowError

    record = ExtractionMetadata.new(metadata.mode)
    record.degradations = list(degradations)
    record.enforcement = achieved
    raise EnforcementBelowError(
        provider=provider.name,
        metadata=record,
        required=floor,
        achieved=achieved,
        reason=_reason(degradations),
    )


def _read_plain(
    response: ChatResponse,
    options: Options,
    mode: ExtractionMode,
    provider: str,
    repair: bool,
    *,
    held: bool = False,
) -> tuple[Option, Spelling | str] | _Failure:
    """The option a plain answer names, and where it is written (or why it was matched
    only after repair, which leaves no spelling to measure): as it is, trimmed, or as the
    JSON string the prompt lists it as (`listed_label`).

    `held`: a grammar or an enum held the answer to the options exactly. A `length`
    finish then does not cut an answer that is a whole option no other option goes on
    from: nothing else could have followed it (llama.cpp reports the limit before the end
    of generation can be sampled, so a limit of the option's token count always ends so)."""
    stopped = declined_or_cut(response, mode, provider)
    if stopped is not None and not (held and _whole_at_limit(response, options)):
        return stopped
    text = response.text()
    if text is None or not text.strip():
        return MissingStructuredTextError(
            provider=provider,
            metadata=ExtractionMetadata.new(mode),
            finish_reason=response.finish_reason,
        )
    option = options.option(text)  # a label with space at an end, written as it is
    if option is not None:
        return option, Spelling(0, json=False)
    answer = text.strip()
    option = options.trimmed(answer)
    if option is not None:
        return option, Spelling(text.index(answer), json=False)
    option = options.as_listed(answer)  # copied as the prompt lists it, a JSON string
    if option is not None:
        return option, _AS_LISTED
    if repair:
        loose = _loosely(answer, options)
        if loose is not None:
            return loose, _REPAIRED
    return ParseError(
        provider=provider,
        metadata=ExtractionMetadata.new(mode),
        mode=mode,
        raw=text,
        detail=f"the answer is not one of the options of {options.name}",
        path=None,
    )


def _whole_at_limit(response: ChatResponse, options: Options) -> bool:
    """Whether `response`, stopped at the output token limit and refusing nothing, wrote
    exactly one option that no other option starts with."""
    if response.finish_reason != FinishReason.LENGTH or response.first_refusal() is not None:
        return False
    text = response.text()
    option = None if text is None else options.option(text)
    if option is None or text is None:
        return False
    return not any(
        other.label != option.label and other.label.startswith(text) for other in options.options
    )


_AT_LIMIT = Warning.approximated(
    RequestField.MAX_OUTPUT_TOKENS,
    "the output token limit was reached on the answer's last token: the answer, held to "
    "the options, is a whole option that no other option goes on from, so it was taken",
)
"""Noted on the record of a choice taken at the output token limit (`_whole_at_limit`)."""

_REPAIRED = "the answer matched its option only after repair"
_AS_LISTED = (
    "the answer was written as the prompt lists its option, a JSON string: measured within "
    "it, the probabilities would be conditional on its opening quote, so none are given"
)
"""Why an answer copied as its option is listed, quoted (`listed_label`), has no
probabilities: the quote is the model's choice, and the options listed plainly go without."""
_TRIMMED = Spelling(0, json=False, trimmed=True)


def _loosely(answer: str, options: Options) -> Option | None:
    """The one option the answer names once case, then quotes and emphasis, then a
    trailing full stop are set aside."""
    label = _loose_label(answer, options.labels)
    return None if label is None else options.option(label)


_WRAPPING = "`*\"'\u201c\u201d\u2018\u2019"
"""What may wrap an answer: code, emphasis, straight and curly quotes."""

_PEELS = 3
"""How many times quotes and a full stop are set aside in turn (`**"Yes."**.`)."""


def _loose_label(answer: str, labels: tuple[str, ...]) -> str | None:
    """`_loosely`, over the labels alone. The least set aside that names any option
    decides (`a.` is `A.` beside `A`); where that names several, none is taken. A full stop
    may be outside the quotes or emphasis (`**Yes**.`) as well as inside."""
    form = answer.strip()
    forms = [form]
    for _ in range(_PEELS):
        unwrapped = form.strip(_WRAPPING).strip()
        stopped = unwrapped.rstrip(".").strip()
        if stopped == form:
            break
        forms += [unwrapped, stopped]
        form = stopped
    for each in dict.fromkeys(forms):
        folded = each.casefold()
        found = [label for label in labels if label.casefold() == folded]
        if found:
            return found[0] if len(found) == 1 else None
    return None


def _scalar_key(value: Any) -> tuple[str, int] | None:
    """What a JSON number or boolean is matched on: `true` is `True` alone, `2` (or `2.0`)
    any integer 2, never a boolean. An Enum member's value stands for it."""
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, bool):
        return "bool", int(value)
    if isinstance(value, int):
        return "int", value
    if isinstance(value, float) and value.is_integer():
        return "int", int(value)
    return None


_Scalars = tuple[tuple[tuple[str, int], str], ...]


def _scalars(options: Options) -> _Scalars:
    """The label of each option a JSON number or boolean names: its value's (`2` of
    `Literal[1, 2, 3]`, `true` of `bool`), where that names one option alone."""
    named: dict[tuple[str, int], str | None] = {}
    for option in options.options:
        key = _scalar_key(option.value)
        if key is not None:
            named[key] = None if key in named else option.label
    return tuple((key, label) for key, label in named.items() if label is not None)


def _scalar_label(value: Any, scalars: _Scalars) -> str | None:
    key = None if isinstance(value, str) else _scalar_key(value)
    return None if key is None else dict(scalars).get(key)


@lru_cache(maxsize=256)
def _answer_type(labels: tuple[str, ...], name: str, scalars: _Scalars | None) -> Any:
    """The labels as the JSON answer's type: the enum sent (validators change no schema),
    whose refusal lists the options briefly where they are many (`_briefly`); under repair
    (`scalars` given), a string that names one label loosely, or a number or boolean that
    is one option's value (`_scalars`), read as it. One type per set of labels and name, so
    that what the engine keeps per type is kept once."""
    answer: Any = Literal[labels]
    if scalars is not None:
        answer = _loose_labels(labels, scalars)
    brief = _briefly(labels, name)
    if brief is None:
        return answer

    def listed_briefly(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError as refused:
            found = refused.errors()
            if len(found) != 1 or found[0]["type"] != "literal_error":
                raise
        # Pydantic's own kind and wording, the list cut short: it goes back to the model on
        # a retry, and into the `ParseError`.
        raise PydanticCustomError(
            "literal_error", "Input should be {expected}", {"expected": brief}
        )

    return Annotated[answer, WrapValidator(listed_briefly)]


def _loose_labels(labels: tuple[str, ...], scalars: _Scalars) -> Any:
    """The enum sent, a validator before it reading an answer written loosely as its
    option (`_answer_type`)."""

    def loose(value: Any) -> Any:
        if isinstance(value, str):
            return value if value in labels else _loose_label(value, labels) or value
        return _scalar_label(value, scalars) or value

    return Annotated[Literal[labels], BeforeValidator(loose)]


_LISTED_CHARACTERS = 120
"""The longest a list of options runs in what a decision says of an answer that is no
option (which goes back to the model on a retry): past it, the first few and how many
more, as a long `Literal` is named (`_choices._literal_name`). The whole list is in the
prompt, and in the schema sent."""


def _first_few(items: list[str]) -> list[str] | None:
    """The first of `items` that fit in `_LISTED_CHARACTERS` with room to say how many
    more; `None` where all of them fit."""
    if len(", ".join(items)) <= _LISTED_CHARACTERS:
        return None
    shown: list[str] = []
    for each in items:
        if len(", ".join([*shown, each])) > _LISTED_CHARACTERS - 30:
            break
        shown.append(each)
    return shown


def _and_more(shown: list[str], count: int) -> str:
    return f" ({', '.join(shown)}, ... and {count - len(shown)} more)" if shown else ""


def _briefly(labels: tuple[str, ...], name: str) -> str | None:
    """What a JSON answer that is no option is told it should have been, where pydantic's
    list of the labels would run long; `None` where it would not."""
    shown = _first_few([repr(label) for label in labels])
    if shown is None:
        return None
    more = _and_more(shown, len(labels))
    return f"one of the {len(labels)} options of {name}, which the schema lists{more}"


def _written(source: str | None, metadata: ExtractionMetadata) -> JsonValue:
    """What the JSON answer wrote for its option (`None` where it cannot be read): another
    than the label (a string written loosely, a number or a boolean), it was matched only
    after repair."""
    if source is None:
        return None
    try:
        data = json.loads(source)
    except (ValueError, RecursionError):
        return None
    if metadata.root_wrapped:
        data = data.get(ROOT_KEY) if isinstance(data, dict) else None
    return data if isinstance(data, str | int | float) else None


def _ask_again(request: ChatRequest, response: ChatResponse, options: Options) -> ChatRequest:
    """The retry turn of a plain answer: the options again, briefly where they are many
    (the prompt lists them all)."""
    labels = [listed_label(label) for label in options.labels]  # as the prompt lists them
    shown = _first_few(labels)
    if shown is None:
        allowed = f"exactly one of: {', '.join(labels)}"
    else:
        allowed = f"exactly one of the {len(labels)} options listed{_and_more(shown, len(labels))}"
    feedback = f"That is not one of the options. Answer with {allowed}. Write the option alone."
    return request.push(response.to_assistant_message()).push(
        UserMessage(content=(TextPart(text=feedback),))
    )


def _json_spelling(
    response: ChatResponse, label: str, metadata: ExtractionMetadata
) -> Spelling | str:
    if metadata.mode is ExtractionMode.FORCED_TOOL:
        return "the answer came as a tool call, whose arguments have no log-probabilities"
    text = response.text() or ""
    span = json_string_span(text, ROOT_KEY if metadata.root_wrapped else None)
    if span is None or span[1] != label:
        return "the answer's JSON string could not be found in the output"
    # Only an exact constraint holds the string to the enum: an approximate one was sent
    # widened, or to an engine that does not say what it enforces.
    return Spelling(span[0], json=True, held=metadata.enforcement is SchemaEnforcement.EXACT)


def _decision(
    options: Options,
    option: Option,
    response: ChatResponse,
    metadata: ExtractionMetadata,
    spelling: Spelling | str,
    logprobs: _Logprobs,
) -> Decision[Any]:
    abstained = options.is_abstain(option)
    measured: Measured | str
    if not logprobs.ask or logprobs.dropped:
        measured = logprobs.missing or "not asked for"
    elif response.logprobs is None:
        # Not asked for by the adapter (a provider failed over to that has none), or not
        # returned: the warning says which.
        dropped = next((w for w in response.warnings if w.is_about(RequestField.LOGPROBS)), None)
        measured = dropped.message if dropped else "the provider returned no log-probabilities"
    elif isinstance(spelling, str):
        measured = spelling
    else:
        measured = measure(
            response.logprobs, response.text() or "", options.labels, option.label, spelling
        )
    if isinstance(measured, str):
        return Decision(
            value=option.value,
            abstained=abstained,
            response=response,
            metadata=metadata,
            probabilities_missing=measured,
        )
    by_value = {opt.value: measured.probabilities[opt.label] for opt in options.options}
    unlisted = frozenset(opt.value for opt in options.options if opt.label in measured.unlisted)
    return Decision(
        value=option.value,
        abstained=abstained,
        response=response,
        metadata=metadata,
        probabilities=by_value,
        unresolved=measured.unresolved,
        unlisted=unlisted,
    )
