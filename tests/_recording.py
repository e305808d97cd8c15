"""A recording endpoint that answers each request with the next scripted answer, for tests
of what a provider preset sends."""

from __future__ import annotations

import json
from typing import Any

import httpx2

import allama
from allama.transport import Transport


class Recorder:
    """A mock endpoint answering each request with the next answer (the last one again)."""

    def __init__(self, *answers: tuple[int, Any]) -> None:
        self.answers = list(answers)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, http: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(http.read()))
        status, body = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        kind = "text/event-stream" if isinstance(body, bytes) else "application/json"
        return httpx2.Response(status, content=content, headers={"content-type": kind})

    def transport(self) -> Transport:
        return Transport(
            client=httpx2.Client(transport=httpx2.MockTransport(self)),
            async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self)),
        )


def provider(preset: str, *answers: tuple[int, Any], **options: Any) -> tuple[Any, Recorder]:
    recorder = Recorder(*answers)
    made = allama.provider(preset, api_key="k", transport=recorder.transport(), **options)
    return made, recorder


def prompt_only_over(target: Any) -> Any:
    """`target` as a model with neither structured output nor tools (the options go in the
    prompt alone, read as plain text), its log-probabilities as the table says."""
    from allama import CapabilitySupport, ChatCapability
    from allama.wrappers import CapabilityOverrideProvider

    unsupported = CapabilitySupport.UNSUPPORTED
    return CapabilityOverrideProvider(
        target,
        {
            ChatCapability.STRUCTURED_OUTPUT: unsupported,
            ChatCapability.TOOL_CALLS: unsupported,
            ChatCapability.FORCED_TOOL_CHOICE: unsupported,
            ChatCapability.CHOICE_OUTPUT: unsupported,
        },
    )
