"""The record of an extraction: its mode, its paid calls, their usage, and the enforcement."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from allama._lazy import deferred_module
from allama.errors import (
    EXTRACTION_METADATA_KEY,
    Error,
    MessageOrigin,
    UnsupportedError,
    errors_in_chain,
    paid_in_record,
    take_paid_before,
)
from allama.extract._mode import ExtractionMode, SchemaEnforcement
from allama.types import (
    ChatResponse,
    RequestField,
    UnsupportedStage,
    Usage,
    Warning,
)
from allama.types._base import DEFER_BUILD
from allama.types._response import billed_extras, reported_money, served_tier

if TYPE_CHECKING:
    from allama import _prices
    from allama._prices import Charge, Cost
else:
    # Loaded when a cost is first read: an extraction whose cost nobody reads never is.
    _prices = deferred_module("allama._prices", globals(), "_prices")


_KEPT_ON = "_allama_extraction_record"
"""The attribute an exception of the type's own code keeps its extraction's record in."""


class AutoFallback(BaseModel):
    """Why an `AUTO` extraction switched from native output to forced-tool mode.

    The refused attempt sent nothing billable and is not counted as a pass. `message` is
    empty when the refusal's text was not written by allama (it reaches the log view).
    """

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=DEFER_BUILD)

    field: RequestField
    message: str
    stage: UnsupportedStage = UnsupportedStage.BEFORE_SENDING


def _only(data: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    fields = model.model_fields
    return {key: value for key, value in data.items() if key in fields}


def counted_field(mode: ExtractionMode) -> RequestField | None:
    """The request field whose warnings count for `mode`: the one that carries the schema."""
    if mode is ExtractionMode.NATIVE:
        return RequestField.RESPONSE_FORMAT
    if mode is ExtractionMode.FORCED_TOOL:
        return RequestField.TOOLS
    return None


def noted_field(mode: ExtractionMode) -> RequestField | None:
    """The other request field `mode` relies on, whose warnings are noted but do not count:
    the tool choice that forces the call. A model offered the tool, not forced, may answer
    without calling it; the arguments of a strict tool it calls are constrained all the same."""
    return RequestField.TOOL_CHOICE if mode is ExtractionMode.FORCED_TOOL else None


def file_warnings(
    mode: ExtractionMode,
    warnings: Iterable[Warning],
    reword: Callable[[Warning], Warning] | None,
    counted: list[Warning],
    noted: list[Warning],
) -> None:
    """File each warning on a field `mode` relies on, `reword`ed, once: on the counted field
    into `counted` (which decide the enforcement), on the noted one into `noted`; the others
    are not the extraction's."""
    field, other = counted_field(mode), noted_field(mode)
    for warning in warnings:
        if field is not None and warning.is_about(field):
            kept = counted
        elif other is not None and warning.is_about(other):
            kept = noted
        else:
            continue
        reworded = warning if reword is None else reword(warning)
        if reworded not in kept:
            kept.append(reworded)


class ExtractionMetadata(BaseModel):
    """How an extraction ran. Returned on success and carried by every failure.

    `passes` counts provider calls that returned a response (each one billed); `usage` sums
    the usage of every pass, including failed ones and a stream that failed mid-way (which
    is not a pass, so `passes` can be 0 while `usage` is not); a part of a total (reasoning,
    cache) some paid call did not report is `None` for the sum (`Usage.of_calls`).
    `enforcement` is the least enforced pass; `degradations` are the warnings that decided
    it, in the caller's terms.
    `notes` are the warnings on the other field the mode relies on, which leave the
    enforcement alone: in forced-tool mode, `tool_choice` (a model that cannot be forced to
    call a tool is offered it, and may answer without calling it: `MissingToolCallError`),
    and a decision's whole option taken though the output stopped at its token limit.
    `root_wrapped` says the type's schema was sent wrapped in a one-property object
    (`{"value": ...}`), because the provider takes only an object at the root; the value
    returned is the unwrapped one.

    `cost` is what the responses in `usage` cost in money, summed (`Cost`: input, output
    and total as `Decimal`, with the source of the prices), from the optional
    `genai-prices` package (`pip install 'allama[prices]'`); when it is `None`,
    `cost_missing` says why (a model run locally, a model genai-prices does not know, no
    usage reported, the package not installed), and it is `None` whenever `cost` is not.
    The cost is worked out the first time either is read, and kept: an extraction whose
    caller never reads it does no pricing. `priced(batch=True)` is the same usage at the
    provider's batch prices.

    The JSON form (`to_json_dict`) carries the cost (`"cost"`) or its reason
    (`"cost_missing"`), worked out then, and `from_json_dict` reads it back. A record
    written by a newer version reads back: fields this version does not know are left
    out. Two records are equal when their fields are: the cost, which follows from them,
    is left out of the comparison, so a record read back equals the one written.
    """

    model_config = ConfigDict(extra="ignore", validate_assignment=False, defer_build=DEFER_BUILD)

    mode: ExtractionMode
    passes: int = 0
    repaired: bool = False
    enforcement: SchemaEnforcement = SchemaEnforcement.NOT_ENFORCED
    degradations: list[Warning] = Field(default_factory=list)
    notes: list[Warning] = Field(default_factory=list)
    usage: Usage | None = None
    auto_fallback: AutoFallback | None = None
    undeclared_key_rejections: int = 0
    root_wrapped: bool = False
    batch_passes: int = 0
    """How many of the passes a provider batch job answered (at batch prices)."""

    # What the cost is worked out from lives in the instance's `__dict__` beside the
    # fields, under `_CHARGES` (a tuple: a charge per response, or the cost or reason read
    # back from JSON) and `_PRICED` (the results, by `batch`). Not pydantic private
    # attributes: those cost every record at construction, and this costs a record that
    # is never priced one tuple per response. Pydantic leaves such keys out of dumps and
    # equality, and `model_copy` carries them (both immutable or rebound, never mutated,
    # so a shallow copy cannot see the other's later responses).

    @classmethod
    def new(cls, mode: ExtractionMode) -> ExtractionMetadata:
        """The record of an extraction in `mode` that has made no provider call yet."""
        return cls(mode=mode)

    # Cost in money, worked out when first read.

    @property
    def cost(self) -> Cost | None:
        """What the responses cost, summed; `None` when unknown (`cost_missing` says why)."""
        priced = self.priced()
        return priced if isinstance(priced, _prices.Cost) else None

    @property
    def cost_missing(self) -> str | None:
        """Why `cost` is `None` (such as `"no price for a model run locally (llama-cpp)"`);
        `None` when there is a cost."""
        priced = self.priced()
        return None if isinstance(priced, _prices.Cost) else priced

    def priced(self, *, batch: bool = False) -> Cost | str:
        """The cost of the responses, or the reason there is none, worked out once.

        `batch=True` prices the same usage at the provider's batch prices (its batch API),
        where genai-prices has them, and says why not otherwise.

        >>> ExtractionMetadata.new(ExtractionMode.NATIVE).priced()
        'no usage was reported'
        """
        state = self.__dict__
        cached: dict[bool, Cost | str] | None = state.get(_PRICED)
        if cached is not None and batch in cached:
            return cached[batch]
        priced = _prices.price(state.get(_CHARGES, ()), batch=batch)
        state[_PRICED] = {**(cached or {}), batch: priced}
        return priced

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON form, leaving out what is unset (as the error context stores it), with
        the cost or the reason there is none, once a response was recorded."""
        data = self.model_dump(mode="json")
        if self.usage is not None:
            # An unreported count stays out, rather than reaching a log line as `null`.
            data["usage"] = self.usage.model_dump(mode="json", exclude_none=True)
        for key, empty in (
            ("degradations", []),
            ("notes", []),
            ("usage", None),
            ("auto_fallback", None),
            ("undeclared_key_rejections", 0),
            ("root_wrapped", False),
            ("batch_passes", 0),
        ):
            if data.get(key) == empty:
                del data[key]
        if _CHARGES in self.__dict__:
            priced = self.priced()
            if isinstance(priced, _prices.Cost):
                data["cost"] = priced.to_json_dict()
            else:
                data["cost_missing"] = priced
        return data

    @classmethod
    def from_error(cls, error: BaseException) -> ExtractionMetadata | None:
        """The record of the extraction `error` ended, whatever kind it is; else `None`.

        An extraction failure (`ExtractionError`: a parse error, a refusal, a truncation, a
        floor not met) holds its record as `error.metadata`. Extraction raises provider
        errors as themselves (so their kind, `retryable` and `retry_after` stay what the
        provider reported) and attaches the record of the passes made before them to the
        error's context.
        """
        own = getattr(error, "metadata", None)
        if isinstance(own, ExtractionMetadata):
            return own
        kept = getattr(error, _KEPT_ON, None)
        if isinstance(kept, ExtractionMetadata):
            return kept
        if not isinstance(error, Error):
            # `asyncio.timeout` raises `TimeoutError` from the cancellation the extraction
            # kept its record on (anyio's `fail_after` raises it in its handling).
            cause = error.__cause__
            running = sys.modules.get("asyncio")  # (no cancellation without it)
            if cause is None and running and isinstance(error.__context__, running.CancelledError):
                cause = error.__context__
            if isinstance(cause, BaseException) and not isinstance(cause, Error):
                kept = getattr(cause, _KEPT_ON, None)
                return kept if isinstance(kept, ExtractionMetadata) else None
            return None
        record = error.context.metadata.get(EXTRACTION_METADATA_KEY)
        if not isinstance(record, dict):
            return None
        try:
            return cls.from_json_dict(record)
        except ValueError:
            return None

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> ExtractionMetadata:
        """Read a record's JSON form, leaving out fields this version does not know (in the
        record, its usage and its warnings), so records from a newer version read back."""
        known = dict(data)
        priced = _read_cost(known.pop("cost", None), known.pop("cost_missing", None))
        usage = known.get("usage")
        if isinstance(usage, dict):
            known["usage"] = _only(usage, Usage)
        for key in ("degradations", "notes"):
            warnings = known.get(key)
            if isinstance(warnings, list):
                known[key] = [_only(w, Warning) if isinstance(w, dict) else w for w in warnings]
        record = cls.model_validate(known)
        if priced is None and record.usage is not None:
            priced = UNRECORDED_COST
        if priced is not None:
            record.__dict__[_CHARGES] = (priced,)
        return record

    def keep_on(self, error: BaseException) -> None:
        """Keep the record on an exception that is none of allama's (raised by the type's
        own code as a value is read, or by a provider of the caller's own), for `from_error`
        to find: what was paid for (and what the wrappers' attempts before it paid, which
        they kept on it), or a fallback taken. Nothing yet: it has no record, and one an
        earlier extraction kept on the same exception object is taken off."""
        if isinstance(error, Error):
            return
        self.record_paid(take_paid_before(error))
        kept = self if self.passes or self.usage is not None or self.auto_fallback else None
        with contextlib.suppress(Exception):  # its own `__setattr__` may refuse anything
            setattr(error, _KEPT_ON, kept)

    def attach_to(self, error: Error) -> Error:
        error.context.metadata[EXTRACTION_METADATA_KEY] = self.to_json_dict()
        return error

    # Decisions the engine takes on the record.

    def may_fall_back(self, requested: ExtractionMode) -> bool:
        return (
            requested is ExtractionMode.AUTO
            and self.mode is ExtractionMode.NATIVE
            and self.passes == 0
            and self.auto_fallback is None
        )

    def auto_fallback_for(
        self, requested: ExtractionMode, guessed: bool, error: Error
    ) -> AutoFallback | None:
        """The fallback `error` calls for: a refused response format, while one is allowed.

        Refused by the adapter before sending; or by the provider itself when native output
        was only a guess from an `UNKNOWN` answer (a 4xx refusal bills nothing). A failover's
        error is its last provider's: a refusal by one tried before it counts as well (with
        `failover_on_unsupported`, a backup that then failed would hide it).
        """
        if not self.may_fall_back(requested):
            return None
        for link in errors_in_chain(error):
            if (
                not isinstance(link, UnsupportedError)
                or link.field is not RequestField.RESPONSE_FORMAT
            ):
                continue
            if link.stage is UnsupportedStage.BEFORE_SENDING or (
                guessed and link.stage is UnsupportedStage.PROVIDER
            ):
                message = link.message if link.origin is MessageOrigin.AUTHORED else ""
                return AutoFallback(
                    field=RequestField.RESPONSE_FORMAT, message=message, stage=link.stage
                )
        return None

    def fall_back(self, fallback: AutoFallback) -> None:
        self.mode = ExtractionMode.FORCED_TOOL
        self.auto_fallback = fallback

    def record_pass(
        self, response: ChatResponse, reword: Callable[[Warning], Warning] | None = None
    ) -> None:
        """Count one paid call: its usage and the warnings on the fields the mode relies on
        (`reword`ed where a wrapping of the type changes what they name; else as said)."""
        self.passes += 1
        if response.batch_job is not None:
            self.batch_passes += 1
        self.record_usage_and_degradations(response, reword)
        self.enforcement = SchemaEnforcement.from_degradations(self.degradations)

    def record_paid(self, paid: Sequence[Mapping[str, Any]]) -> None:
        """Count what failed attempts reported paying (`allama.errors.paid_for`): their
        usage and cost, not passes."""
        for entry in paid:
            usage = entry.get("usage")
            if not isinstance(usage, dict):
                continue
            try:
                # Counts it does not know (a newer version's, a provider's total) leave
                # the ones it does counted.
                counted = Usage.model_validate(_only(usage, Usage))
            except ValueError:
                continue
            provider, model, tier, extras, money = (
                entry.get("provider"),
                entry.get("model"),
                entry.get("service_tier"),
                entry.get("billed_extras"),
                entry.get("usage_cost"),
            )
            charge = _charge(
                provider if isinstance(provider, str) else None,
                model if isinstance(model, str) else None,
                counted,
                batch=entry.get("batch") is True,  # a provider batch job's row: batch prices
                extras=_counts(extras),  # one-hour cache writes, searches, audio
                tier=tier if isinstance(tier, str) else None,  # another tier: at its prices
                money=money if isinstance(money, dict) else None,  # what the provider said
            )
            self._count(counted, charge)

    def _count(self, usage: Usage | None, charge: Charge) -> None:
        """Add `usage` (a paid call's, `None` where it reported none) to the record and keep
        its charge (an `allama._prices.Charge`), priced only when the cost is read."""
        state = self.__dict__
        charges: tuple[Charge | Cost | str, ...] | None = state.get(_CHARGES)
        if charges is None or (usage is None and self.usage is None):
            self.usage = usage  # still none reported by any call
        else:  # a part of a total some paid call did not report is unknown for them all
            self.usage = (self.usage or Usage()).of_calls(usage or Usage())
        state[_CHARGES] = (charge,) if charges is None else (*charges, charge)
        state.pop(_PRICED, None)

    def record_usage_and_degradations(
        self, response: ChatResponse, reword: Callable[[Warning], Warning] | None = None
    ) -> None:
        usage = response.usage
        extras = tier = money = None
        if response.provider_data:
            self.record_paid(_paid_before(response.provider_data))
            extras = billed_extras(response.provider_data)
            tier = served_tier(response.provider_data)
            money = reported_money(response.provider_data)
        batch = response.batch_job is not None
        charge = _charge(
            response.provider,
            response.model,
            usage,
            batch=batch,
            extras=extras,
            tier=tier,
            money=money,
        )
        self._count(usage, charge)
        file_warnings(self.mode, response.warnings, reword, self.degradations, self.notes)

    def __repr__(self) -> str:
        shown = [f"mode={self.mode.value!r}", f"passes={self.passes}"]
        shown.append(f"enforcement={self.enforcement.value!r}")
        if self.repaired:
            shown.append("repaired=True")
        if self.degradations:
            shown.append(f"degradations={len(self.degradations)}")
        if self.notes:
            shown.append(f"notes={len(self.notes)}")
        if self.usage is not None:
            shown.append(f"usage={self.usage!r}")
        if self.auto_fallback is not None:
            shown.append(f"auto_fallback={self.auto_fallback.field.value!r}")
        if self.undeclared_key_rejections:
            shown.append(f"undeclared_key_rejections={self.undeclared_key_rejections}")
        if self.root_wrapped:
            shown.append("root_wrapped=True")
        if self.batch_passes:
            shown.append(f"batch_passes={self.batch_passes}")
        return f"ExtractionMetadata({', '.join(shown)})"

    __str__ = __repr__


_CHARGES = "_charges"
_PRICED = "_priced"


def _counts(extras: object) -> dict[str, int] | None:
    """A paid entry's `billed_extras`, as the counts its price takes."""
    if not isinstance(extras, dict):
        return None
    return {
        name: count
        for name, count in extras.items()
        if isinstance(name, str) and type(count) is int and count > 0
    } or None


def _paid_before(provider_data: Mapping[str, Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """What the wrappers that made the call (retries, failovers) report their failed attempts
    paid (`provider_data["allama"][wrapper]["paid_before"]`, and in the records of the same
    kind inside each)."""
    wrappers = provider_data.get("allama")
    if not wrappers:
        return []
    return [entry for record in wrappers.values() for entry in paid_in_record(record)]


def _charge(
    provider: str | None,
    model: str | None,
    usage: Usage | None,
    *,
    batch: bool = False,
    extras: Mapping[str, int] | None = None,
    tier: str | None = None,
    money: Mapping[str, Any] | None = None,
) -> Charge:
    """What one response (or failed call) is priced by, arriving now: as short as its
    pricing allows (`allama._prices.Charge`)."""
    at = time.time()
    if money:
        return (provider, model, usage, at, batch, extras or {}, tier, money)
    if tier is not None:
        return (provider, model, usage, at, batch, extras or {}, tier)
    if extras:
        return (provider, model, usage, at, batch, extras)
    return (provider, model, usage, at, True) if batch else (provider, model, usage, at)


UNRECORDED_COST = "the record was written without its cost"
"""The reason a record read back has no cost: written before costs were recorded."""


def _read_cost(cost: Any, missing: Any) -> Cost | str | None:
    """A record's stored cost or reason; a reason when it is there but unreadable."""
    if isinstance(cost, dict):
        try:
            return _prices.Cost.from_json_dict(cost)
        except ValueError:
            return "the record's cost could not be read"
    if isinstance(missing, str):
        return missing
    return None
