"""A provider (and a transport) refuses to be pickled or copied in words that name it and
say what to do, rather than Python's words about a lock inside it; what a provider gives
back (requests, responses, errors) and an `Extractor` still pickle."""

from __future__ import annotations

import copy
import multiprocessing
import pickle
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

import allama
from _tool_endpoint import ToolEndpoint
from allama import ChatRequest
from allama.wrappers import FailoverProvider, RetryingProvider

KEY = "sk-never-in-the-words-0123456789"

SHARED = (
    "a provider holds open connections and credentials, and must be built in the process "
    "or copy that uses it"
)
PICKLED = (
    f"cannot be pickled: {SHARED} (build it in the worker with allama.provider(...), from "
    "settings that pickle)"
)
COPIED = (
    f"cannot be copied: {SHARED} (a copy would share its connections, and closing it would "
    "close them: build another with allama.provider(...))"
)
DEEP_COPIED = f"cannot be deep-copied: {SHARED} (build another with allama.provider(...))"
TRANSPORT = (
    "Transport cannot be pickled or copied: it holds open connections, and must be built in "
    "the process or copy that uses it (build it in the worker with allama.Transport(...), "
    "or let allama.provider(...) build its own)"
)


class Out(BaseModel):
    tag: str
    n: int


def refusal(make: Callable[..., object], *given: object) -> str:
    with pytest.raises(TypeError) as refused:
        make(*given)
    said = str(refused.value)
    assert KEY not in said
    return said


def test_a_provider_refuses_pickling_and_copies_by_name() -> None:
    with allama.provider("openai", api_key=KEY, base_url="http://127.0.0.1:9/v1") as provider:
        assert refusal(pickle.dumps, provider) == f"HttpProvider 'openai' {PICKLED}"
        assert refusal(pickle.dumps, provider, 2) == f"HttpProvider 'openai' {PICKLED}"
        assert refusal(copy.copy, provider) == f"HttpProvider 'openai' {COPIED}"
        assert refusal(copy.deepcopy, provider) == f"HttpProvider 'openai' {DEEP_COPIED}"
        # Held by a setting that is deep-copied: the provider is still the one named.
        settings = {"provider": provider, "model": "m"}
        assert refusal(copy.deepcopy, settings) == f"HttpProvider 'openai' {DEEP_COPIED}"


def test_a_provider_given_to_a_spawned_pool_is_refused_by_name() -> None:
    provider = allama.provider("anthropic", api_key=KEY)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert refusal(pool.apply, repr, (provider,)) == (f"HttpProvider 'anthropic' {PICKLED}")
    provider.close()


def test_wrappers_and_the_local_provider_name_the_provider_refused() -> None:
    first = allama.provider("openai", api_key=KEY)
    second = allama.provider("anthropic", api_key=KEY)
    llama = allama.provider("llama-cpp")
    wrapped: list[tuple[object, str]] = [
        (RetryingProvider(second), "HttpProvider 'anthropic'"),
        (FailoverProvider([first, second]), "HttpProvider 'openai'"),
        (llama, "LlamaCppProvider 'llama-cpp'"),
    ]
    for each, named in wrapped:
        assert refusal(pickle.dumps, each) == f"{named} {PICKLED}"
        assert refusal(copy.deepcopy, each) == f"{named} {DEEP_COPIED}"
    assert refusal(copy.copy, llama) == f"LlamaCppProvider 'llama-cpp' {COPIED}"
    for each in (first, second, llama):
        each.close()


def test_a_transport_refuses_pickling_and_copies() -> None:
    with allama.Transport() as transport:
        for make in (copy.copy, copy.deepcopy, pickle.dumps):
            assert refusal(make, transport) == TRANSPORT


def test_what_a_provider_gives_back_and_an_extractor_still_pickle() -> None:
    endpoint = ToolEndpoint("anthropic", args={"tag": "x", "n": 1}, text='{"tag": "x", "n": 1}')
    provider = allama.provider("anthropic", api_key=KEY, transport=endpoint.transport())
    request = ChatRequest("m").user("hi")
    response = provider.chat(request)
    for value in (request, response):
        sent = pickle.dumps(value)
        assert KEY.encode() not in sent
        assert pickle.loads(sent) == value
    extractor: Any = pickle.loads(pickle.dumps(allama.Extractor(retries=2)))
    assert extractor.extract(provider, Out, ChatRequest("m").user("go")).value == Out(tag="x", n=1)
    provider.close()

    unreachable = allama.provider("openai", api_key=KEY, base_url="http://127.0.0.1:9/v1")
    with pytest.raises(allama.Error) as failed:
        unreachable.chat(request)
    sent = pickle.dumps(failed.value)
    assert KEY.encode() not in sent
    again = pickle.loads(sent)
    assert (type(again), str(again)) == (type(failed.value), str(failed.value))
    unreachable.close()
