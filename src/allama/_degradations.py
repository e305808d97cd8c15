"""The warnings an adapter collects for one request, and the policy that turns them into errors.

Below the adapters and the schema toolkit, which both report through it, and above the
vocabulary and errors it is made of.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

import allama.types as vocabulary
from allama.errors import InvalidRequestError, UnsupportedError
from allama.types import RequestField, UnsupportedPolicy, UnsupportedStage, WarningKind

if TYPE_CHECKING:
    from allama.types import ChatRequest, Warning

__all__ = ["Degradations"]


class Degradations:
    """Collects an adapter's warnings for one request and applies its `UnsupportedPolicy`.

    `refuse` is the one call for a field the provider cannot honour: under `WARN` it records
    an unsupported warning and the adapter sends without it; under `ERROR` it raises, before
    anything is sent. `approximate` records a widening, which never fails.

    >>> d = Degradations("demo", UnsupportedPolicy.ERROR)
    >>> d.unsupported(RequestField.SEED, "the endpoint has no seed").message
    'cannot send `seed`: the endpoint has no seed'
    """

    def __init__(self, provider: str, policy: UnsupportedPolicy) -> None:
        self.provider = provider
        self.policy = policy
        self.warnings: list[Warning] = []

    @classmethod
    def for_request(cls, provider: str, request: ChatRequest) -> Degradations:
        return cls(provider, request.unsupported_policy)

    def warn(self, warning: Warning) -> None:
        warning = warning if warning.provider else warning.with_provider(self.provider)
        if warning not in self.warnings:
            self.warnings.append(warning)

    def approximate(self, field: RequestField, message: str, *, code: str | None = None) -> None:
        self.warn(_field_warning(WarningKind.APPROXIMATED, field, message, code, self.provider))

    def unsupported(self, field: RequestField, why: str) -> UnsupportedError:
        """The error for refusing `field` before sending (not raised here)."""
        return (
            UnsupportedError(
                f"cannot send `{field}`: {why}",
                field=field,
                stage=UnsupportedStage.BEFORE_SENDING,
            )
            .mark_authored()
            .with_provider(self.provider)
        )

    def choice_without_tools(self, request: ChatRequest, namespace: str) -> bool:
        """Whether `request` chooses among tools it does not give (`gives_tools`): the
        choice is not sent (providers refuse one without tools), refused where it asked for
        a call."""
        choice = request.tool_choice
        if choice is None:
            return False
        if gives_tools(request, namespace):
            if choice.mode == "tool" and not option_tools(request, namespace):
                self.offered(request, choice.name or "")
            return False
        if choice.mode in ("required", "tool"):
            self.refuse(
                RequestField.TOOL_CHOICE,
                "the request gives no tools to call",
                instead="`tool_choice` was not sent",
            )
        return True

    def offered(self, request: ChatRequest, name: str) -> None:
        """Refuse a named tool choice for a tool the request does not offer, which providers
        answer 400 (the body option's own tools are not known here, and may hold it)."""
        if any(tool.name == name for tool in request.tools):
            return
        raise (
            InvalidRequestError(
                f"`tool_choice` names the tool `{name}`, which is not among the request's tools"
            )
            .mark_authored()
            .with_provider(self.provider)
        )

    def temperature_within(
        self, temperature: float | None, most: float | None, display: str
    ) -> float | None:
        """`temperature`, or `None` (with a warning, refused under `ERROR`) above `most`,
        what `display` takes: sent, the whole request would be refused. One wording for every
        endpoint that has such a limit (OpenAI's family, Gemini)."""
        if temperature is None or most is None or temperature <= most:
            return temperature
        self.refuse(
            RequestField.TEMPERATURE,
            f"{display} takes `temperature` from 0 to {most:g}",
            instead=f"{temperature:g} was left out",
        )
        return None

    def seed_within_32_bits(self, seed: int | None, display: str) -> int | None:
        """`seed`, or `None` (with a warning, refused under `ERROR`) where `display` (a
        llama.cpp server, Ollama's runners) would not keep it: it reads a seed as 32 bits
        without a sign, their largest (which -1 becomes) as a random one, so another would
        be cut, or not be a seed at all."""
        if seed is None or 0 <= seed < 2**32 - 1:
            return seed
        self.refuse(
            RequestField.SEED,
            f"{display} reads a seed as 32 bits without a sign, and {2**32 - 1} (which -1 "
            f"becomes) as a random seed: it takes 0 to {2**32 - 2}",
            instead=f"{seed} was left out",
        )
        return None

    def refuse(
        self,
        field: RequestField,
        why: str,
        *,
        code: str | None = None,
        instead: str | None = None,
    ) -> None:
        """Drop `field` with a warning, or raise under `UnsupportedPolicy.ERROR`. `instead`
        says what was sent in its place: the warning's words alone, since a refusal sends
        nothing."""
        if self.policy is UnsupportedPolicy.ERROR:
            raise self.unsupported(field, why)
        message = why if instead is None else f"{why}; {instead}"
        self.warn(_field_warning(WarningKind.UNSUPPORTED, field, message, code, self.provider))


NOT_ON_STREAMS = "not_on_streams"
"""The code of a refusal of the response format that holds for streams alone (an endpoint
that streams no JSON Schema output): auto extraction streams a forced tool instead."""


FORMAT_NOT_SENT = "format_not_sent"
"""The code of a refusal of the response format that sends nothing of it, not even in words
(Claude before 4.5, Gemini without JSON output, Ollama's cloud): the model was asked for no
shape, so an extraction reads its answer as the type itself, never as the object a plan
wrapped the type in."""


FIRST_CHOICE_ONLY = "first_choice_only"
"""The code of the warning on an answer of more than one choice (`n` above 1, given through
the body option): only the first is read, the others kept in the response's provider data
alone."""


STOPS_BLANK = "stop_sequences_blank"
"""The code of a refusal of the stop sequences of nothing but whitespace alone (Anthropic
answers them 400): the others were sent."""

_STOPS_FIRST = "stop_sequences_first:"


def stops_first(count: int) -> str:
    """The code of a refusal of the stop sequences past the first `count`, which were sent."""
    return f"{_STOPS_FIRST}{count}"


def sent_stops(stop: tuple[str, ...], warnings: tuple[Warning, ...]) -> tuple[str, ...]:
    """The sequences of `stop` the provider was sent, as the adapter's refusals of the field
    say (the warnings are the one record of the request as sent that reaches its answer):
    past the first few it takes, or but those of nothing but whitespace; none where a
    refusal does not say which it kept."""
    sent = stop
    for warning in warnings:
        if warning.kind is not WarningKind.UNSUPPORTED or not warning.is_about(RequestField.STOP):
            continue
        code = warning.code or ""
        if code.startswith(_STOPS_FIRST):
            sent = sent[: int(code[len(_STOPS_FIRST) :])]
        elif code == STOPS_BLANK:
            sent = tuple(sequence for sequence in sent if sequence.strip())
        else:
            return ()
    return sent


def gives_tools(request: ChatRequest, namespace: str) -> bool:
    """Whether `request` gives tools: as `tools`, or in the body fields of option
    `namespace` (a provider's own server tools)."""
    return bool(request.tools) or option_tools(request, namespace)


def option_tools(request: ChatRequest, namespace: str) -> bool:
    """Whether the body fields of option `namespace` give tools of their own."""
    extra = request.option_json(namespace)
    return isinstance(extra, dict) and bool(extra.get("tools"))


@lru_cache(maxsize=1024)
def _field_warning(
    kind: WarningKind, field: RequestField, message: str, code: str | None, provider: str
) -> Warning:
    """Warnings are immutable values and adapters repeat the same few call after call."""
    # `vocabulary.Warning`: a provider being built loads no pydantic model.
    warning = vocabulary.Warning
    make = warning.approximated if kind is WarningKind.APPROXIMATED else warning.unsupported
    return make(field, message, code=code).with_provider(provider)
