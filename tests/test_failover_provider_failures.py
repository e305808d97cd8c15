"""A failover moves on when the provider itself cannot serve (a model it does not have, a
server that failed for good, a local engine that cannot start), as for a refused account;
a refusal of the request itself is raised at once."""

from __future__ import annotations

import asyncio

import pytest

import allama
from allama import FailoverProvider
from allama.errors import InvalidRequestError, NotFoundError, ServerError
from allama.mock import MockProvider

REQUEST = allama.ChatRequest("m").user("hi")


@pytest.mark.parametrize(
    "failure",
    [NotFoundError("no such model"), ServerError("broken for good", retryable=False)],
)
def test_a_failure_of_the_provider_moves_on(failure: allama.Error) -> None:
    both = FailoverProvider([MockProvider([failure], name="a"), MockProvider(["ok"], name="b")])
    response = both.chat(REQUEST)
    assert (response.provider, response.text()) == ("b", "ok")
    again = FailoverProvider([MockProvider([failure], name="a"), MockProvider(["ok"], name="b")])
    assert asyncio.run(again.achat(REQUEST)).provider == "b"


def test_a_refused_request_is_still_raised_at_once() -> None:
    second = MockProvider(["never"], name="b")
    both = FailoverProvider([MockProvider([InvalidRequestError("bad")], name="a"), second])
    with pytest.raises(InvalidRequestError):
        both.chat(REQUEST)
    assert second.requests == []


def test_a_local_model_that_is_not_there_falls_over_to_the_next_provider() -> None:
    local = allama.provider("local", model="/nonexistent/model.gguf")
    both = FailoverProvider([local, MockProvider(["from the cloud"], name="cloud")])
    response = both.chat(REQUEST)
    assert (response.provider, response.text()) == ("cloud", "from the cloud")
    assert "failover" in response.provider_data["allama"]
