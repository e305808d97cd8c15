"""llama.cpp's server as an OpenAI-compatible provider: `local` (started here) and `llama-cpp`.

What differs from the rest of the family, as measured against the real server:

- Output cut off under a schema or tools can come back as HTTP 500 ("The model produced
  output that does not match the expected ... format"), or as that error object in the
  middle of a stream. The server threw the partial output away; what the caller can act on
  is the truncation, so it becomes a response with finish reason `length` (the extraction
  engine then raises `TruncatedError`) instead of a server error to retry.
- An object-form `tool_choice` is ignored (read as `auto`). A named tool is forced by
  sending that tool alone with `required`, which the server enforces with a grammar.
- What a model can do with tools depends on its chat template; the running server says,
  so `local` answers tool capabilities from it once started.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

from allama._degradations import Degradations
from allama.adapters._http import HttpRequest, HttpResponse
from allama.adapters.openai_compat._sse import ChatStreamDecoder, SseEvent
from allama.errors import ServerError
from allama.local._engine import LocalEngine
from allama.providers._http import HttpProvider
from allama.providers._presets import Preset
from allama.stream import AsyncChatStream
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    Finish,
    FinishReason,
    ProviderDataEvent,
    StreamEvent,
    ToolChoice,
    Warning,
)

__all__ = ["CUT_OFF_KEY", "LlamaCppProvider", "is_cut_off_message"]

_CUT_OFF = re.compile(r"does not match the expected [\w-]+ format", re.IGNORECASE)
CUT_OFF_KEY = "output_discarded"
"""`provider_data[<provider>][CUT_OFF_KEY]` is true when the server discarded cut-off output."""

_TEMPLATE_CAPABILITIES = {
    ChatCapability.TOOL_CALLS: "supports_tool_calls",
    ChatCapability.FORCED_TOOL_CHOICE: "supports_tool_calls",
    ChatCapability.PARALLEL_TOOL_CALLS: "supports_parallel_tool_calls",
}


def is_cut_off_message(message: str) -> bool:
    """Whether llama.cpp's error says the output did not parse: cut off under a grammar."""
    return _CUT_OFF.search(message) is not None


def _constrained(request: ChatRequest) -> bool:
    fmt = request.response_format
    return bool(request.tools) or (fmt is not None and fmt.type in ("json_schema", "choice"))


class _CutOffDecoder(ChatStreamDecoder):
    """A stream decoder that ends a constrained stream cut off by the server as `length`."""

    def __init__(self, *, constrained: bool, **options: Any) -> None:
        super().__init__(**options)
        self._constrained = constrained
        self._namespace = options.get("provider") or "llama-cpp"

    def _event(self, event: SseEvent, *, at_end: bool) -> Iterator[StreamEvent]:
        try:
            yield from super()._event(event, at_end=at_end)
        except ServerError as error:
            if not (self._constrained and is_cut_off_message(error.message)):
                raise
            self.done = True
            self.finished = True
            yield ProviderDataEvent(namespace=self._namespace, key=CUT_OFF_KEY, value=True)
            yield Finish(finish_reason=FinishReason.LENGTH)


def _check_engine_options(
    *,
    model: object,
    threads: object,
    context: object,
    parallel: object,
    chat_template: object,
    engine: object,
) -> None:
    """Fail at `allama.provider("local", ...)`, naming the argument, not when the engine starts."""
    for name, value in (("threads", threads), ("context", context), ("parallel", parallel)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"{name} must be a whole number, got {type(value).__name__}")
    if model is not None and not isinstance(model, str | os.PathLike):
        raise TypeError(f"model must be a path to a GGUF file, got {type(model).__name__}")
    if chat_template is not None and not isinstance(chat_template, str):
        raise TypeError(
            "chat_template must be a Jinja template as a string, "
            f"got {type(chat_template).__name__}"
        )
    if engine is not None and not isinstance(engine, LocalEngine):
        raise TypeError(f"engine must be a LocalEngine, got {type(engine).__name__}")


class LlamaCppProvider(HttpProvider):
    """llama.cpp's server: `allama.provider("local")` or `allama.provider("llama-cpp", ...)`.

    `local` starts llama.cpp in this process on the first request (or on `start()`; an
    async request loads the model in a worker thread, off the event loop), on
    127.0.0.1 with a port the OS picks, and stops it on `close()` or at exit. Options:
    `model` (a GGUF path; else `ALLAMA_LOCAL_MODEL`, else the packaged SmolLM2),
    `threads` (1), `context` (4096 tokens, shared by `parallel` slots), `parallel` (1),
    `chat_template` (a Jinja template replacing the model's own), or `engine` (a
    `LocalEngine` to share). The model name in a request is not used to pick a model.

    `llama-cpp` talks to a server you run (`base_url`, else `LLAMA_CPP_BASE_URL`, else
    `http://127.0.0.1:8080/v1`; key from `LLAMA_API_KEY` when the server wants one).
    """

    def __init__(
        self,
        preset: Preset,
        *,
        model: str | os.PathLike[str] | None = None,
        threads: int | None = None,
        context: int | None = None,
        parallel: int | None = None,
        chat_template: str | None = None,
        engine: LocalEngine | None = None,
        **options: Any,
    ) -> None:
        local = preset.name == "local"
        _check_engine_options(
            model=model,
            threads=threads,
            context=context,
            parallel=parallel,
            chat_template=chat_template,
            engine=engine,
        )
        if not local:
            given = (threads, context, parallel, chat_template, model, engine)
            if any(value is not None for value in given):
                raise TypeError(
                    f"{preset.name} talks to a running server; model, engine and engine "
                    "options belong to provider('local')"
                )
        elif options.get("base_url") is not None:
            raise TypeError(
                "provider('local') starts its own server; "
                "for a server you run use provider('llama-cpp', base_url=...)"
            )
        super().__init__(preset, **options)
        self._engine: LocalEngine | None = None
        self._owns_engine = False
        if local:
            if engine is None:
                engine = LocalEngine(
                    model,
                    threads=threads or 1,
                    context=context or 4096,
                    parallel=parallel or 1,
                    chat_template=chat_template,
                )
                self._owns_engine = True
            self._engine = engine
            if engine.running:
                self._base_url = engine.base_url

    @property
    def engine(self) -> LocalEngine | None:
        """The in-process engine of `local`; `None` for `llama-cpp`."""
        return self._engine

    def start(self) -> LlamaCppProvider:
        """Start the local engine now rather than on the first request (a no-op if running)."""
        if self._engine is not None:
            self._base_url = self._engine.start()
        return self

    # Capabilities: the running server knows what the model's template can do.

    def chat_capability(self, model: str, capability: ChatCapability) -> CapabilitySupport:
        engine = self._engine
        if engine is not None and engine.running:
            if capability is ChatCapability.IMAGE_INPUT:
                modalities = engine.properties.get("modalities")
                vision = isinstance(modalities, dict) and modalities.get("vision") is True
                return CapabilitySupport.SUPPORTED if vision else CapabilitySupport.UNSUPPORTED
            key = _TEMPLATE_CAPABILITIES.get(capability)
            caps = engine.template_capabilities
            if key is not None and key in caps:
                return CapabilitySupport.SUPPORTED if caps[key] else CapabilitySupport.UNSUPPORTED
        return super().chat_capability(model, capability)

    # Encoding: a named tool is forced as `required` with that tool alone.

    def _encode(
        self,
        request: ChatRequest,
        degradations: Degradations,
        *,
        stream: bool,
        url: str,
        headers: Mapping[str, str],
        params: Mapping[str, str],
    ) -> HttpRequest:
        choice = request.tool_choice
        if choice is not None and choice.mode == "tool":
            named = [tool for tool in request.tools if tool.name == choice.name]
            if named:
                request = request.with_tools(named).with_tool_choice(ToolChoice.required())
        return super()._encode(
            request, degradations, stream=stream, url=url, headers=headers, params=params
        )

    async def achat(self, request: ChatRequest) -> ChatResponse:
        await self._astart()
        return await super().achat(request)

    async def achat_stream(self, request: ChatRequest) -> AsyncChatStream:
        await self._astart()
        return await super().achat_stream(request)

    async def _astart(self) -> None:
        """Load the model off the event loop: it takes seconds for a real model."""
        if self._engine is not None and not self._engine.running:
            await asyncio.to_thread(self.start)

    def _endpoint(self, model: str, *, stream: bool = False) -> tuple[str, Mapping[str, str]]:
        if self._engine is not None:
            self.start()
        return super()._endpoint(model, stream=stream)

    def missing_url(self) -> str | None:
        return None if self._engine is not None else super().missing_url()  # given on start

    # Decoding: output cut off under a grammar is a truncation, not a server failure.

    def _response(
        self, request: ChatRequest, response: HttpResponse, warnings: list[Warning]
    ) -> ChatResponse:
        if response.status == 500 and _constrained(request):
            text = response.content.decode("utf-8", "replace")
            if is_cut_off_message(text):
                return ChatResponse(
                    finish_reason=FinishReason.LENGTH,
                    warnings=tuple(warnings),
                    provider_data={self.name: {CUT_OFF_KEY: True}},
                    model=request.model,
                    provider=self.name,
                )
        return super()._response(request, response, warnings)

    def _decoder(self, request: ChatRequest) -> ChatStreamDecoder:
        return _CutOffDecoder(
            constrained=_constrained(request),
            provider=self.name,
            model=request.model,
            reasoning_outside_completion=self._profile.reasoning_outside_completion,
        )

    # Lifetime: closing `local` stops the engine it started.

    def close(self) -> None:
        # The engine first: stopping it shuts down the connections calls wait on, which
        # the client closing its sockets would not end.
        if self._owns_engine and self._engine is not None:
            self._engine.stop()
        super().close()

    async def aclose(self) -> None:
        if self._owns_engine and self._engine is not None:
            self._engine.stop()
        await super().aclose()

    def __repr__(self) -> str:
        if self._engine is None:
            return super().__repr__()
        return f"LlamaCppProvider(name={self.name!r}, engine={self._engine!r})"
