"""Failover across providers, keeping the chain of errors it fell back from."""

from __future__ import annotations

import itertools
import math
import numbers
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

from pydantic import JsonValue

from allama._lazy import deferred_module
from allama._not_a_request import not_a_request
from allama.errors import (
    ACCOUNT_REFUSALS,
    INNER_RECORD,
    AuthenticationError,
    Error,
    NotFoundError,
    QuotaExceededError,
    RateLimitedError,
    ServerError,
    UnsupportedError,
    asked_wait,
    errors_in_chain,
    paid_before_foreign,
    paid_for,
)
from allama.provider import PASSED_BEFORE_SENDING, ChatProvider
from allama.stream import AsyncChatStream, ChatStream, StreamCollector
from allama.types import (
    ALLAMA_NAMESPACE,
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    ChatValidation,
    FieldSubject,
    ProviderDataEvent,
    RequestField,
    ResponseStart,
    StreamEvent,
    UnsupportedStage,
    UsageEvent,
    Warning,
    WarningEvent,
    WarningKind,
)
from allama.types._response import RATE_LIMIT_RESET_KEY, rate_limit_reset
from allama.wrappers._gate import Holding, gate_closed, holding
from allama.wrappers._lifetime import Wrapper
from allama.wrappers._opening import aopened, opened
from allama.wrappers._record import (
    PAID_BEFORE,
    record_async_stream,
    record_response,
    record_stream,
)

if TYPE_CHECKING:
    from allama import _tracing
else:
    # Spans load with the first call (`opentelemetry` itself only if a tracer is set).
    _tracing = deferred_module("allama._tracing", globals(), "_tracing")

__all__ = ["FAILOVER_METADATA_KEY", "FailoverProvider"]

_FAILOVER_DATA_KEY = "failover"

FAILOVER_METADATA_KEY = "allama.failover"
"""The error-context metadata key of what a failover that raised passed over: `{"skipped":
[...]}`, as its record on a response says (`FailoverProvider`)."""

_SKIPPED = "skipped"

_PROVIDER_FAILURES = (NotFoundError, ServerError)
"""Failures of the provider, not of the request: another provider need not meet them."""

_ACCOUNT_LIMITS = (RateLimitedError,)
"""A rate limit, whether or not a wait lets the request through (a request larger than a
limit per minute, a 429 the provider says not to retry): the limit is the account's or its
tier's, like a quota, and another provider's may be higher."""

_REFUSED_ACCOUNTS = (AuthenticationError, QuotaExceededError)
"""Refusals of the provider's key or account that meet every request to it, though asking
no wait (`FailoverProvider`'s `refused_account_wait`): not `PermissionDeniedError`, which
may be about one model the account lacks while others work. A quota's wait is kept for the
request's model only: Gemini's lasting quotas are each model's (`...PerProjectPerModel`, a
429 saying `limit: 0, model: ...`), and the model beside it may still serve."""

R = TypeVar("R")


def chain_onto(error: Error, previous: Error | None) -> Error:
    """Put `previous` at the end of `error`'s chain (after any chain `error` already has)."""
    if previous is None:
        return error
    chain = errors_in_chain(error)
    if any(link is previous for link in chain):
        return error
    chain[-1].with_fallback_from(previous)
    return error


class _Waits:
    """When each provider of a failover that asked to wait (a 429's `retry-after`, or an
    answer's rate-limit headers saying a limit is used up), or refused its key or account
    (`_REFUSED_ACCOUNTS`), may be sent to again, shared by every call of the failover from
    any thread or task: the lock is held to read or write it, never over a call. A copy
    (pickled, deep-copied) begins with none. A wait is the provider's, for every model, or
    one model's (a spent quota: `_refused_wait`)."""

    __slots__ = ("_lock", "_until")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._until: dict[tuple[int, str | None], tuple[float, float, str]] = {}
        """By `id` of the provider and the model waited for (`None`: every model): until
        when, since when, and why: the kind of the error that asked, or
        `RATE_LIMIT_RESET_KEY` for an answer's used-up limit."""

    def __reduce__(self) -> tuple[type[_Waits], tuple[()]]:
        return (_Waits, ())

    def now_waiting(self, now: float, model: str) -> dict[int, tuple[float, str]]:
        """The providers waiting at `now` for a call to `model`: until when (the later end,
        where one waits both for every model and for this one), and why (the errors'
        kind); those whose waits passed are forgotten."""
        with self._lock:
            for key in [key for key, (until, _, _) in self._until.items() if until <= now]:
                del self._until[key]
            waiting: dict[int, tuple[float, str]] = {}
            for (which, only), (until, _, why) in self._until.items():
                known = waiting.get(which)
                if only in (None, model) and (known is None or known[0] < until):
                    waiting[which] = (until, why)
            return waiting

    def asked(
        self,
        provider: ChatProvider,
        now: float,
        seconds: float,
        why: str,
        model: str | None = None,
    ) -> None:
        """`provider` is to wait `seconds` from `now`: for `model` only, or every model."""
        key = (id(provider), model)
        with self._lock:
            known = self._until.get(key)
            if known is None or known[0] < now + seconds:
                self._until[key] = (now + seconds, now, why)

    def served(self, provider: ChatProvider, sent: float, model: str) -> None:
        """`provider` answered a call to `model` sent at `sent`: a wait it asked before then,
        for every model or this one, is over (one asked since, by a call that answered
        later, stays; so does another model's)."""
        with self._lock:
            for key in ((id(provider), None), (id(provider), model)):
                known = self._until.get(key)
                if known is not None and known[1] <= sent:
                    del self._until[key]


class _Tries:
    """The state of one failover call; the sync and async loops both ask it what to do."""

    __slots__ = (
        "_held",
        "_model",
        "_owner",
        "_sent",
        "names",
        "noted",
        "order",
        "passed_on",
        "previous",
        "skipped",
    )

    def __init__(self, owner: FailoverProvider, held: Holding, model: str) -> None:
        self._owner = owner
        self._held = held
        self._model = model
        """The model of the call: a provider waiting for another model's quota may serve it."""
        self.previous: Error | None = None
        self.names: list[str] = []
        self.skipped: list[dict[str, JsonValue]] = []
        self._sent = 0.0
        self.noted = False
        """Whether the answer noted a used-up rate limit (`RATE_LIMIT_RESET_KEY`), taken as
        its provider's wait: the note goes on as `passed_on` says."""
        self.passed_on: float | None = None
        """The note the caller is given in its place: the shortest wait, where every
        provider waits; `None` (no note) where one can serve."""
        self.order = self._ordered()

    def _ordered(self) -> list[ChatProvider]:
        """The providers to try, in order: those waiting (for every model, or the call's)
        left out, as `skipped` says, but where every one is waiting, the one whose wait ends
        first."""
        owner = self._owner
        now = owner._clock()
        waiting = owner._waits.now_waiting(now, self._model)
        if not waiting:
            return list(owner.providers)
        order = [each for each in owner.providers if id(each) not in waiting]
        if not order:
            order = [min(owner.providers, key=lambda each: waiting[id(each)][0])]
        tried = {id(each) for each in order}
        for each in owner.providers:
            if id(each) not in tried:
                until, why = waiting[id(each)]
                left = round(until - now, 3)
                self.skipped.append({"provider": _named(each), "why": why, "seconds_left": left})
        return order

    def begin(self, provider: ChatProvider) -> None:
        self.names.append(_named(provider))
        self._sent = self._owner._clock()

    def succeeded(self, provider: ChatProvider, reset: float | None) -> None:
        """`provider` answered: a wait it asked before is over. Where its answer said a
        rate limit of its is used up (`reset`, the seconds until it resets), that is its
        wait now, as a 429's would be; a batch run is told (`passed_on`) only where every
        provider waits, and pauses until the first of them may be sent to."""
        owner = self._owner
        owner._waits.served(provider, self._sent, self._model)
        if reset is None:
            return
        now = owner._clock()
        owner._waits.asked(provider, now, reset, RATE_LIMIT_RESET_KEY)
        waiting = owner._waits.now_waiting(now, self._model)
        self.noted = True
        if all(id(each) in waiting for each in owner.providers):
            left = round(min(until for until, _ in waiting.values()) - now, 3)
            self.passed_on = left if left > 0 else None

    def after_failure(self, provider: ChatProvider, error: Error, *, last: bool) -> bool:
        """Whether to try the next provider; chains `error` onto the earlier failures, and
        keeps the wait it asks of `provider` (its `retry_after`, retryable), or, for a
        refusal of its key or account, `refused_account_wait` (`_refused_wait`), for the calls
        that follow.
        Not when the caller closed meanwhile (a batch run: `allama.wrappers._gate`), which
        reads no answer."""
        # Asked before it is chained: the earlier providers' waits are not this one's.
        owner = self._owner
        wait = asked_wait(error) if error.retryable else None
        if wait is not None and wait > 0:
            owner._waits.asked(provider, owner._clock(), wait, error.kind)
        refused = _refused_wait(provider, error, self._model, owner.refused_account_wait)
        if refused is not None:
            seconds, model = refused
            owner._waits.asked(provider, owner._clock(), seconds, error.kind, model)
        chain_onto(error, self.previous)
        self.previous = error
        if last or not self._owner.fails_over_on(error) or gate_closed():
            self.raising(error)
            return False
        # Told the caller (`allama.wrappers._gate`), which counts it if it cuts the call
        # while the next provider answers.
        self._held.holds(paid_for(error))
        return True

    def raising(self, error: Error) -> None:
        """The providers passed over, on the error raised (`FAILOVER_METADATA_KEY`), around
        the record a failover inside put there."""
        if not self.skipped:
            return
        record: dict[str, JsonValue] = {_SKIPPED: list(self.skipped)}
        inner = error.context.metadata.get(FAILOVER_METADATA_KEY)
        if inner is not None:
            record[INNER_RECORD] = inner
        error.with_metadata(FAILOVER_METADATA_KEY, record)

    def record(self) -> JsonValue | None:
        """What a success reports about the providers tried, when there was more than one
        or some were passed over: and what those that failed reported paying
        (`paid_before`)."""
        if len(self.names) == 1 and not self.skipped:
            return None
        record: dict[str, JsonValue] = {"attempts": len(self.names), "providers": list(self.names)}
        if self.skipped:
            record[_SKIPPED] = list(self.skipped)
        paid = paid_for(self.previous) if self.previous is not None else []
        if paid:
            record[PAID_BEFORE] = list(paid)
        return record


def _refused_wait(
    provider: ChatProvider, error: Error, model: str, seconds: float
) -> tuple[float, str | None] | None:
    """How long `provider` is passed over for `error`, and for which model (`None`: every
    model), where it refused its key or account: each link of the error's chain did (a
    failover within, every provider of its it tried refused; one only overloaded may serve
    the next call). A key refused is the account's, for every model; a spent quota may be
    one model's (`_REFUSED_ACCOUNTS`). A failover within (or a wrapper of several) that
    passed some of its providers over first is waited for no longer than the first of them
    (it keeps its own waits, and that one may serve then), and for this model only (what
    it passed over may be one model's wait)."""
    chain = errors_in_chain(error)
    if seconds <= 0 or not all(isinstance(link, _REFUSED_ACCOUNTS) for link in chain):
        return None
    every_model = all(isinstance(link, AuthenticationError) for link in chain)
    if isinstance(_sole_inner(provider), Wrapper):
        passed = _passed_over(chain)
        if passed:
            seconds = min(seconds, *passed)
            every_model = False
    if seconds <= 0:
        return None
    return seconds, None if every_model else model


def _passed_over(chain: list[Error]) -> list[float]:
    """The seconds left of each wait a failover within passed a provider over for, as the
    records on the errors of `chain` say (`FAILOVER_METADATA_KEY`, those of the failovers
    inside it under `INNER_RECORD`)."""
    left: list[float] = []
    for link in chain:
        record = link.context.metadata.get(FAILOVER_METADATA_KEY)
        while isinstance(record, dict):
            skipped = record.get(_SKIPPED)
            for entry in skipped if isinstance(skipped, list) else []:
                seconds = entry.get("seconds_left") if isinstance(entry, dict) else None
                if isinstance(seconds, int | float) and not isinstance(seconds, bool):
                    left.append(float(seconds))
            record = record.get(INNER_RECORD)
    return left


def _wait_checked(seconds: object) -> float:
    """`refused_account_wait` as a float: a finite number of seconds, 0 or more (NaN passes
    every comparison, and an endless wait would pass a provider over for good)."""
    try:
        value = float(seconds) if isinstance(seconds, numbers.Real) else math.nan
    except OverflowError:  # an int past a float's range
        value = math.inf
    if isinstance(seconds, bool) or not math.isfinite(value) or value < 0:
        raise ValueError(
            "refused_account_wait must be a finite number of seconds, 0 or more "
            f"(0 keeps no wait), not {seconds!r}"
        )
    return value


def _named(provider: ChatProvider) -> str:
    """A provider as a failover's record names it: by its endpoint where it has one
    (`azure-openai@east.openai.azure.com`), so that two of one preset, as a failover across
    regions holds, are told apart. Behind a retry or an override the endpoint is still the
    provider's own (`HttpProvider.issuer`)."""
    issuer = getattr(_sole_inner(provider), "issuer", None)
    return issuer if isinstance(issuer, str) else provider.name


class FailoverProvider(Wrapper):
    """Tries providers in order, moving on when one fails with a retryable error.

    The error finally raised keeps the chain: its `fallback_from` is the error of the
    provider tried before, and so on (`allama.errors.errors_in_chain`). A non-retryable error
    is raised at once, since another provider would refuse the same request, but for a
    refusal of the account (a key refused, a permission or a quota it has not) or a rate
    limit of its (every `RateLimitedError`, one no wait gets through too: a request larger
    than a limit per minute), which another provider's account need not meet or may have
    higher, and a failure of the provider itself: a model or endpoint it does not have
    (`NotFoundError`: a retired model, a local model file that is not there), a server that
    failed for good (`ServerError`: a local engine that cannot load its model). With
    `failover_on_unsupported`, an `UnsupportedError` refused before sending (nothing paid)
    also moves on. A response after a failover records the providers tried in
    `provider_data["allama"]["failover"]`. A stream fails over on an error met before the
    first piece of its answer (raised by the open, or sent as its first event: an overloaded
    server's); once the answer has begun, an error comes out of the iteration as it is.

    A provider that failed with a retryable error asking for a wait (a 429's or a 503's
    `retry-after`: its `retry_after`) is passed over until the wait has passed, by every
    call of the failover, sync or async, from any thread: the calls go straight to the
    next, rather than each paying a round trip to a provider that asked them to wait, and
    holding it back further. Where every provider is waiting, the one whose wait ends first
    is tried (and, answering, is waited for no longer). A provider whose successful answer
    said a rate limit of its is used up (`provider_data["allama"]["rate_limit_reset"]`,
    from its rate-limit headers) is passed over alike until that limit resets, and the note
    is not handed on, which would pause a batch run while another provider can serve: only
    where every provider then waits does the answer carry it, as the shortest of their
    waits. A provider that refused its key or account (`AuthenticationError`, or
    `QuotaExceededError`: its credit or quota spent), which asks no wait but meets every
    request, is passed over alike for `refused_account_wait` seconds (60; 0 keeps no
    wait), rather than each call paying a round trip to it again (in a batch run, one per
    input); not for a `PermissionDeniedError`, which may be about one model the account
    lacks. A spent quota is passed over for calls to the same model only (Gemini's lasting
    quotas are each model's); a key refused, for every model. A failover within is passed
    over alike only where each provider it tried refused so, and for no longer than the
    first of those it passed over still waits (it keeps its own waits). The providers passed
    over are listed in the record, under `"skipped"`, each with why (its error's kind, or
    `"rate_limit_reset"`) and the seconds its wait had left:
    `{"provider": "openai", "why": "rate_limited", "seconds_left": 4.5}`; so is the error a
    failover raises, in its context metadata (`"allama.failover"`). `clock` (seconds,
    `time.monotonic`) times the waits.

    Capability questions and dry runs are answered by the first provider, the one a request
    goes to first (a wait it asked for passes: the dry run does not follow it). `close()`,
    `aclose()`, `with` and `async with` close each of its providers, once however often it
    is listed.

    >>> from allama.mock import MockProvider
    >>> from allama.errors import OverloadedError
    >>> first = MockProvider([OverloadedError("busy")], name="a")
    >>> both = FailoverProvider([first, MockProvider(["ok"], name="b")])
    >>> both.chat(ChatRequest("m").user("hi")).provider
    'b'
    """

    def __init__(
        self,
        providers: Sequence[ChatProvider],
        *,
        failover_on_unsupported: bool = False,
        name: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        refused_account_wait: float = 60.0,
    ) -> None:
        if not providers:
            raise ValueError("a failover needs at least one provider")
        self.providers = tuple(providers)
        self.failover_on_unsupported = failover_on_unsupported
        self.refused_account_wait = _wait_checked(refused_account_wait)
        self._name = name or "failover(" + ", ".join(p.name for p in self.providers) + ")"
        self._clock = clock
        self._waits = _Waits()

    @property
    def name(self) -> str:
        return self._name

    def _wrapped(self) -> tuple[ChatProvider, ...]:
        return self.providers

    def fails_over_on(self, error: Error) -> bool:
        """Whether `error` sends the request on to the next provider."""
        moves_on = ACCOUNT_REFUSALS + _ACCOUNT_LIMITS + _PROVIDER_FAILURES
        if error.retryable or isinstance(error, moves_on):
            return True
        return (
            self.failover_on_unsupported
            and isinstance(error, UnsupportedError)
            and error.stage is UnsupportedStage.BEFORE_SENDING
        )

    def _run(
        self,
        call: Callable[[ChatProvider], R],
        request: ChatRequest,
        reset: Callable[[R], float | None],
    ) -> tuple[R, _Tries]:
        """`call` made on each provider in turn until one answers or the failover stops:
        outside an extraction, one span holds the attempts' spans
        (`allama._tracing.WrapperSpan`). `reset` reads an answer's note of a used-up rate
        limit (`_Tries.succeeded`)."""
        if not isinstance(request, ChatRequest):  # (once per call: the calls all come here)
            raise not_a_request(request)
        traced = _tracing.start_wrapper(_FAILOVER_DATA_KEY, self, request)
        if traced is None:
            return self._trying(call, request.model, reset, None)
        with traced:
            return self._trying(call, request.model, reset, traced)

    def _trying(
        self,
        call: Callable[[ChatProvider], R],
        model: str,
        reset: Callable[[R], float | None],
        traced: _tracing.WrapperSpan | None,
    ) -> tuple[R, _Tries]:
        with holding() as held:
            tries = _Tries(self, held, model)
            if traced is not None and tries.skipped:
                traced.passed_over(tries.skipped)
            for index, provider in enumerate(tries.order):
                tries.begin(provider)
                try:
                    with _tracing.attempt(traced, index + 1):
                        answer = call(provider)
                except Error as error:
                    if not tries.after_failure(provider, error, last=index == len(tries.order) - 1):
                        raise
                except BaseException as raised:  # the provider's own: those before it paid
                    if tries.previous is not None:
                        paid_before_foreign(raised, paid_for(tries.previous))
                    raise
                else:
                    tries.succeeded(provider, reset(answer))
                    return answer, tries
        raise AssertionError("unreachable: the last provider's error is raised")

    async def _arun(
        self,
        call: Callable[[ChatProvider], Awaitable[R]],
        request: ChatRequest,
        reset: Callable[[R], float | None],
    ) -> tuple[R, _Tries]:
        if not isinstance(request, ChatRequest):
            raise not_a_request(request)
        traced = _tracing.start_wrapper(_FAILOVER_DATA_KEY, self, request)
        if traced is None:
            return await self._atrying(call, request.model, reset, None)
        with traced:
            return await self._atrying(call, request.model, reset, traced)

    async def _atrying(
        self,
        call: Callable[[ChatProvider], Awaitable[R]],
        model: str,
        reset: Callable[[R], float | None],
        traced: _tracing.WrapperSpan | None,
    ) -> tuple[R, _Tries]:
        with holding() as held:
            tries = _Tries(self, held, model)
            if traced is not None and tries.skipped:
                traced.passed_over(tries.skipped)
            for index, provider in enumerate(tries.order):
                tries.begin(provider)
                try:
                    with _tracing.attempt(traced, index + 1):
                        answer = await call(provider)
                except Error as error:
                    if not tries.after_failure(provider, error, last=index == len(tries.order) - 1):
                        raise
                except BaseException as raised:  # the provider's own: those before it paid
                    if tries.previous is not None:
                        paid_before_foreign(raised, paid_for(tries.previous))
                    raise
                else:
                    tries.succeeded(provider, reset(answer))
                    return answer, tries
        raise AssertionError("unreachable: the last provider's error is raised")

    def chat(self, request: ChatRequest) -> ChatResponse:
        response, tries = self._run(lambda provider: provider.chat(request), request, _noted)
        if tries.noted:
            response = _renoted(response, tries.passed_on)
        return record_response(response, _FAILOVER_DATA_KEY, tries.record())

    async def achat(self, request: ChatRequest) -> ChatResponse:
        response, tries = await self._arun(
            lambda provider: provider.achat(request), request, _noted
        )
        if tries.noted:
            response = _renoted(response, tries.passed_on)
        return record_response(response, _FAILOVER_DATA_KEY, tries.record())

    def chat_stream(self, request: ChatRequest) -> ChatStream:
        stream, tries = self._run(
            lambda provider: opened(provider.chat_stream(request)), request, _stream_noted
        )
        if tries.noted:
            stream = _renoted_stream(stream, tries.passed_on)
        return record_stream(stream, _FAILOVER_DATA_KEY, tries.record())

    async def achat_stream(self, request: ChatRequest) -> AsyncChatStream:
        async def open_on(provider: ChatProvider) -> AsyncChatStream:
            return await aopened(await provider.achat_stream(request))

        stream, tries = await self._arun(open_on, request, _stream_noted)
        if tries.noted:
            stream = _arenoted_stream(stream, tries.passed_on)
        return record_async_stream(stream, _FAILOVER_DATA_KEY, tries.record())

    def chat_capability(self, model: str, capability: ChatCapability) -> CapabilitySupport:
        return self.providers[0].chat_capability(model, capability)

    def validate_chat_request(
        self, request: ChatRequest, *, stream: bool = False
    ) -> ChatValidation:
        """The dry run of the provider the call goes to: the first, or, where the failover
        goes on past a refusal before sending (a missing key; an unsupported field under
        `failover_on_unsupported`), the first that does not refuse it, with a warning for
        each that does (`PASSED_BEFORE_SENDING`)."""
        if not isinstance(request, ChatRequest):
            raise not_a_request(request)
        passed: list[Warning] = []
        for each, after in itertools.pairwise(self.providers):
            try:
                keyless = _missing_key(each)
                if keyless is not None:
                    raise keyless
                validation = each.validate_chat_request(request, stream=stream)
            except Error as error:
                # A dry run sends nothing: what it raises, the call raises before sending.
                if not self.fails_over_on(error):
                    raise
                note = (
                    f"`{each.name}` refuses the call before sending ({error}); the failover "
                    f"goes on to `{after.name}`, as the call would, and the dry run is of it"
                )
                field = (
                    error.field if isinstance(error, UnsupportedError) else None
                ) or RequestField.MODEL
                passed.append(
                    Warning(
                        kind=WarningKind.UNSUPPORTED,
                        subject=FieldSubject(field=field),
                        message=note,
                        code=PASSED_BEFORE_SENDING,
                        provider=each.name,
                    )
                )
                continue
            return _after(passed, validation)
        return _after(passed, self.providers[-1].validate_chat_request(request, stream=stream))

    def __repr__(self) -> str:
        return f"FailoverProvider({list(self.providers)!r})"


def _missing_key(provider: ChatProvider) -> Error | None:
    """The error an HTTP provider without its key (through wrappers of that one provider)
    raises as the call makes its headers, before sending; its own dry run does not (a plan
    holds without a key), but the failover's follows the call past it."""
    from allama.providers._http import HttpProvider

    provider = _sole_inner(provider)
    if isinstance(provider, FailoverProvider):
        # A failover within: it gets past a keyless provider to the next, and fails before
        # sending only where every one of its own is keyless (with the last one's error).
        refusals = [_missing_key(each) for each in provider.providers]
        return None if any(each is None for each in refusals) else refusals[-1]
    if not isinstance(provider, HttpProvider):
        return None
    missing = provider.missing_key()
    if missing is None:
        return None
    return AuthenticationError(missing).mark_authored().with_provider(provider.name)


def _sole_inner(provider: ChatProvider) -> ChatProvider:
    """The provider `provider` sends through, past the wrappers of one provider each (a
    retry, a capability override): those send where it sends. A failover, or a wrapper of
    several, is where it stops."""
    while isinstance(provider, Wrapper) and not isinstance(provider, FailoverProvider):
        inner = provider._wrapped()
        if len(inner) != 1:
            return provider
        provider = inner[0]
    return provider


def _after(passed: list[Warning], validation: ChatValidation) -> ChatValidation:
    if not passed:
        return validation
    return validation.model_copy(update={"warnings": (*passed, *validation.warnings)})


# --- an answer's note of a used-up rate limit ---------------------------------------------


def _noted(response: ChatResponse) -> float | None:
    return rate_limit_reset(response.provider_data)


def _stream_noted(stream: ChatStream | AsyncChatStream) -> float | None:
    """A stream's note, an event before its answer, which the open read ahead (`opened`)."""
    return rate_limit_reset(stream.collector.provider_data)


def _renoted(response: ChatResponse, wait: float | None) -> ChatResponse:
    """`response` with its note of a used-up rate limit made `wait`, or left out (`None`)."""
    if wait is not None:
        return response.with_provider_data(ALLAMA_NAMESPACE, RATE_LIMIT_RESET_KEY, wait)
    ours = response.provider_data.get(ALLAMA_NAMESPACE, {})
    if RATE_LIMIT_RESET_KEY not in ours:
        return response
    data = {**response.provider_data}
    rest = {key: value for key, value in ours.items() if key != RATE_LIMIT_RESET_KEY}
    if rest:
        data[ALLAMA_NAMESPACE] = rest
    else:
        del data[ALLAMA_NAMESPACE]
    return response.model_copy(update={"provider_data": data})


def _renoted_event(event: StreamEvent, wait: float | None) -> StreamEvent | None:
    """`event`, or where it is the note, the note made `wait` (`None`: left out)."""
    if not (
        isinstance(event, ProviderDataEvent)
        and event.namespace == ALLAMA_NAMESPACE
        and event.key == RATE_LIMIT_RESET_KEY
    ):
        return event
    if wait is None:
        return None
    return ProviderDataEvent(namespace=ALLAMA_NAMESPACE, key=RATE_LIMIT_RESET_KEY, value=wait)


class _Renoted(StreamCollector):
    """What the stream `inner` collects reported besides its answer, with its note made
    `wait` or left out: the stream handed on reads from it, and takes it at its close
    (rather than `inner` itself, whose note would come back with the rest)."""

    def __init__(self, inner: StreamCollector, wait: float | None) -> None:
        super().__init__()
        self._inner = inner
        self._wait = wait

    def reported_metadata(self) -> ChatResponse:
        return _renoted(self._inner.reported_metadata(), self._wait)

    def hand_over(self, outer: StreamCollector) -> None:
        """Give `outer`, as the stream is handed on, the records `inner` holds (which the
        events carrying them, at the stream's end, may never bring), the note made over."""
        for key, value in self._inner.provider_data.get(ALLAMA_NAMESPACE, {}).items():
            event = _renoted_event(
                ProviderDataEvent(namespace=ALLAMA_NAMESPACE, key=key, value=value), self._wait
            )
            if event is not None:
                outer.push(event)

    def closed(self, outer: StreamCollector, _: BaseException | None) -> None:
        """The stream handed on ended: it takes what `inner` reported and did not give
        (`StreamCollector.take_reported`), the note made over."""
        reported = self.reported_metadata()
        held = StreamCollector()
        if reported.usage is not None:
            held.push(UsageEvent(usage=reported.usage))
        for warning in reported.warnings:
            held.push(WarningEvent(warning=warning))
        for namespace, entries in reported.provider_data.items():
            for key, value in entries.items():
                held.push(ProviderDataEvent(namespace=namespace, key=key, value=value))
        if reported.id is not None or reported.model is not None:
            held.push(ResponseStart(id=reported.id, model=reported.model))
        outer.take_reported(held)


def _renoted_stream(stream: ChatStream, wait: float | None) -> ChatStream:
    """`stream` with its note of a used-up rate limit made `wait`, or left out (`None`)."""
    renoted = _Renoted(stream.collector, wait)

    def events() -> Iterator[StreamEvent]:
        for event in stream:
            given = _renoted_event(event, wait)
            if given is not None:
                yield given

    given = ChatStream(
        events(), close=stream.close, provider=stream.collector.provider, on_close=renoted.closed
    )
    renoted.hand_over(given.collector)
    given.collector.reads_from(renoted)
    return given


def _arenoted_stream(stream: AsyncChatStream, wait: float | None) -> AsyncChatStream:
    """The async twin of `_renoted_stream`."""
    renoted = _Renoted(stream.collector, wait)

    async def events() -> AsyncIterator[StreamEvent]:
        async for event in stream:
            given = _renoted_event(event, wait)
            if given is not None:
                yield given

    given = AsyncChatStream(
        events(), close=stream.aclose, provider=stream.collector.provider, on_close=renoted.closed
    )
    renoted.hand_over(given.collector)
    given.collector.reads_from(renoted)
    return given
