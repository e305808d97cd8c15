"""A wrapper's lifetime: closing it closes the providers it sends through.

A wrapper holds no connection of its own; those of the providers it wraps are what a
caller holding only the wrapper needs to close. They are found through the wrappers
inside it, so that a provider met twice (twice in a failover's list, or behind two
wrappers) is closed once, and a provider without `close` (a caller's own, a mock) is
left as it is: the `ChatProvider` protocol asks none of it. Each wrapper met on the way
is told first (`_end_calls`): a retry waiting in a call made before the close makes no
further attempt, which would open new connections to what was closed. It is told where
the close is made, for the calls it ends are those whose connections are closed: a sync
`close()` closes the sync calls' and those of loops not running, `aclose()` the running
loop's too; a call on another loop, running in another thread, goes on with its own.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    import asyncio

    from allama.provider import ChatProvider

__all__ = ["Wrapper", "aclose_each", "close_each", "sent_through"]


class Wrapper:
    """`close`, `aclose`, `with` and `async with` for a provider made of others."""

    def _wrapped(self) -> tuple[ChatProvider, ...]:
        """The providers this one sends requests to."""
        raise NotImplementedError

    def _end_calls(self, closing: asyncio.AbstractEventLoop | None) -> None:
        """The calls made through this wrapper so far whose connections a close on
        `closing` (`None`: a sync `close()`) closes try nothing further. Wrappers that make
        no attempt of their own have nothing to end."""

    def close(self) -> None:
        """Close the connections of the providers wrapped (each once, through the wrappers
        inside): those it can close from a sync call (`aclose` closes an event loop's)."""
        wrappers, providers = _walk(self)
        _end_calls_of(wrappers, None)
        close_each(providers)

    async def aclose(self) -> None:
        """Close the connections of the providers wrapped, the running loop's too: with
        each one's `aclose`, or its `close` where it has no `aclose`."""
        import asyncio  # loaded: this runs on a loop

        wrappers, providers = _walk(self)
        _end_calls_of(wrappers, asyncio.get_running_loop())
        await aclose_each(providers)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def sent_through(provider: object) -> list[object]:
    """The distinct providers `provider` sends through, in order: itself, or, through the
    wrappers around them, each provider a wrapper holds (met twice, given once)."""
    return _walk(provider)[1]


def _walk(provider: object) -> tuple[list[Wrapper], list[object]]:
    """The distinct wrappers met from `provider` down (itself first, if one), and the
    distinct providers they send through (`sent_through`)."""
    seen: set[int] = set()
    wrappers: list[Wrapper] = []
    found: list[object] = []

    def walk(each: object) -> None:
        if id(each) in seen:  # (a wrapper met again sends through what it did before)
            return
        seen.add(id(each))
        if isinstance(each, Wrapper):
            wrappers.append(each)
            for inner in each._wrapped():
                walk(inner)
        else:
            found.append(each)

    walk(provider)
    return wrappers, found


def _end_calls_of(wrappers: list[Wrapper], closing: asyncio.AbstractEventLoop | None) -> None:
    """Tell each wrapper its calls so far whose connections the close on `closing` closes
    try nothing further, before any provider is closed: a retry woken by the close of its
    provider would open new connections."""
    for wrapper in wrappers:
        wrapper._end_calls(closing)


def close_each(providers: list[object]) -> None:
    """`close()` each provider that has one. One that fails leaves the others to be
    closed all the same; the first error is raised after."""
    failed: Exception | None = None
    for provider in providers:
        closer = getattr(provider, "close", None)
        if not callable(closer):
            continue
        try:
            closer()
        except Exception as error:
            failed = failed or error
    if failed is not None:
        raise failed


async def aclose_each(providers: list[object]) -> None:
    """`aclose()` each provider, or `close()` where it has no `aclose`; as `close_each`,
    one that fails leaves the others, and the first error is raised after."""
    failed: Exception | None = None
    for provider in providers:
        closer = getattr(provider, "aclose", None)
        if not callable(closer):
            closer = getattr(provider, "close", None)
        if not callable(closer):
            continue
        try:
            closing = closer()
            if inspect.isawaitable(closing):
                await closing
        except Exception as error:
            failed = failed or error
    if failed is not None:
        raise failed
