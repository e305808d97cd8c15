"""The stop sequences a request will send through a provider: its own `stop`, and those a
body option gives in the place its dialect's body holds them (`option_stops`), for each
provider it may go to (a failover's members, through their wrappers).

A decision refuses, before sending, one that could cut its answer; what reads an answer
needs them all to tell a cut one (`TruncatedError`) from one written wrong, and where each
was given, for the error to say what to leave out."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from allama.adapters._option_stops import option_stops
from allama.provider import ChatProvider
from allama.types import ChatRequest

__all__ = ["SentStop", "every_level", "stops_sent"]


@dataclass(frozen=True, slots=True)
class SentStop:
    """A stop sequence to be sent, and where it was given: `None` for the request's own
    `stop`, else the body option's field (`generationConfig.stopSequences`) and
    namespace."""

    text: str
    field: str | None = None
    namespace: str | None = None


def stops_sent(provider: ChatProvider, request: ChatRequest) -> tuple[SentStop, ...]:
    """The stop sequences `request` may send through `provider`, each once, the request's
    first: its `stop`, then those of the body option of each dialect the call may be
    spoken in (a provider that speaks none sends no body option). A body option's replace
    the request's where both are given: either may cut the answer, so both are kept."""
    found = [SentStop(stop) for stop in request.stop if stop]
    if not request.options:
        return tuple(found)  # (no body option: nothing of a provider's to read)
    seen = {stop.text for stop in found}
    for namespace in _body_namespaces(provider):
        given = option_stops(request, namespace)
        if given is None:
            continue
        for stop in given.stops:
            if stop not in seen:
                seen.add(stop)
                found.append(SentStop(stop, given.field, namespace))
    return tuple(found)


def _body_namespaces(provider: ChatProvider) -> list[str]:
    """The body options `provider` may send, one per dialect it speaks, in order: an HTTP
    provider's dialect names its body option (`openai_compat`, `gemini`, ...)."""
    from allama.providers._http import HttpProvider

    found: list[str] = []
    for each in every_level(provider, set()):
        if isinstance(each, HttpProvider) and each.preset.dialect not in found:
            found.append(each.preset.dialect)
    return found


def every_level(provider: object, seen: set[int]) -> Iterator[object]:
    """`provider` and every provider it sends through, wrappers included (a capability
    override on a failover's member answers for it): a wrapper says what it holds with
    `_wrapped()` (the wrappers sit in a layer below this one); each met once."""
    if id(provider) in seen:
        return
    seen.add(id(provider))
    yield provider
    wrapped = getattr(provider, "_wrapped", None)
    inner = wrapped() if callable(wrapped) else ()
    for each in inner if isinstance(inner, tuple | list) else (inner,):
        yield from every_level(each, seen)
