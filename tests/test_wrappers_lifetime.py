"""A wrapper's lifetime: `close`, `aclose`, `with` and `async with` close the providers it
wraps, each once, as an `HttpProvider`'s close its own connections. Without them the
connections of a provider behind a retry or a failover could be closed only by reaching
into the wrapper."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import allama
from _replay_server import ReplayServer, ReplyHandler
from allama import CapabilitySupport, ChatCapability, ChatRequest
from allama.mock import MockProvider
from allama.wrappers import (
    CapabilityOverrideProvider,
    FailoverProvider,
    RetryingProvider,
    RetryPolicy,
)

REQUEST = ChatRequest("m").user("hi")

AnyWrapper = RetryingProvider | FailoverProvider | CapabilityOverrideProvider


class Counted(MockProvider):
    """A provider with connections of its own to close: counts each close."""

    def __init__(self, name: str = "counted") -> None:
        super().__init__(["ok"], name=name)
        self.closes = 0
        self.acloses = 0

    def close(self) -> None:
        self.closes += 1

    async def aclose(self) -> None:
        self.acloses += 1


class CloseOnly(MockProvider):
    """A provider of the caller's own with a sync `close` and no `aclose`."""

    def __init__(self) -> None:
        super().__init__(name="close-only")
        self.closes = 0

    def close(self) -> None:
        self.closes += 1


class FailsToClose(MockProvider):
    def close(self) -> None:
        raise RuntimeError("close failed")

    async def aclose(self) -> None:
        raise RuntimeError("aclose failed")


def _override(provider: Any) -> CapabilityOverrideProvider:
    return CapabilityOverrideProvider(
        provider, {ChatCapability.STRUCTURED_OUTPUT: CapabilitySupport.SUPPORTED}
    )


WRAPPERS: dict[str, Callable[[Any], AnyWrapper]] = {
    "retry": RetryingProvider,
    "failover": lambda provider: FailoverProvider([provider]),
    "override": _override,
}

SYNC_WAYS = ("close", "with")
ASYNC_WAYS = ("aclose", "async with")


def close_by(way: str, wrapper: AnyWrapper) -> None:
    """Close `wrapper` the way a caller would: each of the four."""
    if way == "close":
        wrapper.close()
    elif way == "with":
        with wrapper as entered:
            assert entered is wrapper
    elif way == "aclose":
        asyncio.run(wrapper.aclose())
    else:

        async def leave() -> None:
            async with wrapper as entered:
                assert entered is wrapper

        asyncio.run(leave())


def closed(provider: Counted) -> tuple[int, int]:
    return (provider.closes, provider.acloses)


def once(way: str) -> tuple[int, int]:
    """What closing by `way` does to each provider inside: one `close` (the sync ways) or
    one `aclose` (the async ones), never both."""
    return (1, 0) if way in SYNC_WAYS else (0, 1)


@pytest.mark.parametrize("way", SYNC_WAYS + ASYNC_WAYS)
@pytest.mark.parametrize("kind", sorted(WRAPPERS))
def test_a_wrapper_closes_the_provider_it_wraps_once(kind: str, way: str) -> None:
    inner = Counted()
    close_by(way, WRAPPERS[kind](inner))
    assert closed(inner) == once(way)


@pytest.mark.parametrize("way", SYNC_WAYS + ASYNC_WAYS)
def test_nested_wrappers_close_each_distinct_provider_once(way: str) -> None:
    """`a` is listed three times, behind an override and a retry too; `b` behind a retry
    held twice and on its own; a mock without `close` among them is left as it is."""
    a, b = Counted("a"), Counted("b")
    b_retried = RetryingProvider(b)
    failover = FailoverProvider(
        [_override(a), RetryingProvider(a), a, b_retried, MockProvider(name="plain"), b_retried, b]
    )
    close_by(way, RetryingProvider(_override(failover)))
    assert closed(a) == once(way)
    assert closed(b) == once(way)


@pytest.mark.parametrize("way", SYNC_WAYS + ASYNC_WAYS)
def test_a_wrapper_of_providers_without_close_closes_nothing_and_raises_nothing(
    way: str,
) -> None:
    mock = MockProvider(["ok"])
    target = FailoverProvider([RetryingProvider(mock), mock])
    close_by(way, target)
    assert target.chat(REQUEST).text() == "ok"  # still there to use


@pytest.mark.parametrize("way", SYNC_WAYS + ASYNC_WAYS)
def test_a_provider_without_aclose_is_closed_with_its_close(way: str) -> None:
    inner = CloseOnly()
    close_by(way, RetryingProvider(FailoverProvider([inner, inner])))
    assert inner.closes == 1


def test_a_close_that_fails_leaves_the_others_closed_and_is_raised() -> None:
    before, after = Counted("before"), Counted("after")
    target = FailoverProvider([before, FailsToClose(name="fails"), after])
    with pytest.raises(RuntimeError, match=r"^close failed$"):
        target.close()
    assert (before.closes, after.closes) == (1, 1)
    with pytest.raises(RuntimeError, match=r"^aclose failed$"):
        asyncio.run(target.aclose())
    assert (before.acloses, after.acloses) == (1, 1)


def test_the_bodys_error_comes_out_of_a_with_and_the_provider_is_closed() -> None:
    inner = Counted()
    with pytest.raises(ValueError, match="body"), RetryingProvider(inner):
        raise ValueError("body")
    assert closed(inner) == (1, 0)

    async def leave() -> None:
        async with FailoverProvider([inner]):
            raise ValueError("async body")

    with pytest.raises(ValueError, match="async body"):
        asyncio.run(leave())
    assert closed(inner) == (1, 1)


def test_the_wrappers_reprs_are_unchanged() -> None:
    a, b = MockProvider(name="a"), MockProvider(name="b")
    assert repr(RetryingProvider(a, RetryPolicy(max_attempts=2))) == (
        f"RetryingProvider({a!r}, {RetryPolicy(max_attempts=2)!r})"
    )
    assert repr(FailoverProvider([a, b])) == f"FailoverProvider([{a!r}, {b!r}])"
    assert repr(_override(a)) == (
        f"CapabilityOverrideProvider({a!r}, {{'structured_output': 'supported'}})"
    )


# End to end: an HttpProvider's connections to a server on 127.0.0.1, closed through the
# wrappers around it.


class _Server(ReplayServer):
    """Counts the connections open on it, so a test sees the client hang up."""

    opened: int
    changed: threading.Condition

    def wait_open(self, count: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: self.opened == count, timeout=10), (
                f"{self.opened} connections open, not {count}"
            )


class _Handler(ReplyHandler):
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.changed:
            self.server.opened += 1
            self.server.changed.notify_all()

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.server.changed:
                self.server.opened -= 1
                self.server.changed.notify_all()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        message = {"role": "assistant", "content": "ok"}
        self.send_json(
            200,
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": "m",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            },
        )


@pytest.fixture
def server() -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.seen, httpd.lock = [], threading.Lock()
    httpd.opened, httpd.changed = 0, threading.Condition()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


def _http(server: _Server) -> Any:
    host, port = server.server_address[:2]
    return allama.provider(
        "openai-compatible", base_url=f"http://{host!s}:{port}/v1", api_key="sk-test"
    )


def test_an_http_provider_behind_wrappers_is_closed_by_with(server: _Server) -> None:
    inner = _http(server)
    with RetryingProvider(FailoverProvider([inner, inner])) as target:
        assert target.chat(REQUEST).text() == "ok"
        client = inner._transport._client
        assert client is not None and not client.is_closed
        server.wait_open(1)
    assert client.is_closed
    server.wait_open(0)  # the server saw the connection go
    # As an HttpProvider closed: a call after opens a new connection.
    assert target.chat(REQUEST).text() == "ok"
    target.close()
    server.wait_open(0)


def test_an_http_provider_behind_wrappers_is_closed_by_async_with(server: _Server) -> None:
    inner = _http(server)

    async def call() -> Any:
        async with FailoverProvider([RetryingProvider(inner), _override(inner)]) as target:
            assert (await target.achat(REQUEST)).text() == "ok"
            client = inner._transport._async_client
            assert client is not None and not client.is_closed
            await asyncio.to_thread(server.wait_open, 1)
        return client

    client = asyncio.run(call())
    assert client.is_closed
    server.wait_open(0)
