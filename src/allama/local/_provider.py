"""llama.cpp's server as an OpenAI-compatible provider: `local` (started here) and `llama-cpp`.

What differs from the rest of the family, as measured against the real server:

- Output cut off under a schema or tools can come back as HTTP 500 ("The model produced
  output that does not match the expected ... format"), or as that error object in the
  middle of a stream. The server threw the partial output away; what the caller can act on
  is the truncation, so it becomes a response with finish reason `length` (the extraction
  engine then raises `TruncatedError`) instead of a server error to retry.
- An object-form `tool_choice` is ignored (read as `auto`). A named tool is forced by
  sending that tool alone with `required`, which the server enforces with a grammar.
- What a model can do with tools depends on its chat template, and whether it reads images
  on its vision projector (`mmproj`); the running server says, so `local` answers those
  capabilities from it once started, and encodes by the same answers: tools for a template
  without them, or images for a model without vision, are left out with a warning (refused
  under `UnsupportedPolicy.ERROR`), rather than dropped without a word (tools) or answered
  500 (images; that 500 from a server you run is an `UnsupportedError`, not retried).
  Before it starts, those answers are unknown, and a dry run of a request with tools or
  images covers the capability table alone: a plan promises no figures (a forced tool is
  `approximate`, never `exact`, as on `llama-cpp` without an answer), and a floor is
  checked after the call (`start()` first for one checked before).
- An extraction's forced tool (`submit_structured_output`, named in `tool_choice`) for a
  template without tool calls is refused before sending whatever the policy: left out, the
  tool could never be called, and each pass would be paid for an answer that cannot hold
  the value. Native mode is the one that works there. The caller's own tools are left out
  with a warning, as above.
- `llama-cpp` asks the server you run the same of its template (`GET /props`, once, by the
  first dry run or call with tools; a read that failed on the way or with a 5xx, as while
  the model loads, is tried again by the next call),
  and encodes tools by its answer as `local` does. Where the server does not say (`/props`
  unreadable, or without `chat_template_caps`), the tools are sent with a warning that
  they may be dropped without a word: a forced tool is then `approximate`, never `exact`.
- A generation that fills its slot's context before its token limit ends `length` as one
  cut at the limit does; `local` knows the slot's size and reports `context_window`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Unpack

from allama._degradations import Degradations
from allama._not_a_request import not_a_request
from allama.adapters import openai_compat as wire
from allama.adapters._http import HttpRequest, HttpResponse
from allama.adapters.openai_compat._adapter import ChatCompletionsAdapter
from allama.adapters.openai_compat._capabilities import ModelFamily
from allama.adapters.openai_compat._sse import ChatStreamDecoder, SseEvent
from allama.errors import Error, InvalidRequestError, NetworkError, ServerError, UnsupportedError
from allama.local._engine import LocalEngine, engine_missing, template_capabilities
from allama.provider import NOT_INSTALLED
from allama.providers._http import HttpOptions, HttpProvider
from allama.providers._presets import Preset
from allama.stream import AsyncChatStream, ChatStream
from allama.transport import Transport, _closed_error, _request_of
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    ChatValidation,
    FieldSubject,
    Finish,
    FinishReason,
    ProviderDataEvent,
    RequestField,
    StreamEvent,
    ToolChoice,
    UnsupportedStage,
    Usage,
    UsageEvent,
    UserMessage,
    ValidationCoverage,
    Warning,
    WarningKind,
)

if TYPE_CHECKING:
    from allama._tracing import CallSpan

__all__ = ["CUT_OFF_KEY", "LlamaCppProvider", "is_cut_off_message"]

_CUT_OFF = re.compile(r"does not match the expected [\w-]+ format", re.IGNORECASE)
CUT_OFF_KEY = "output_discarded"
"""`provider_data[<provider>][CUT_OFF_KEY]` is true when the server discarded cut-off output."""

_NO_VISION = re.compile(r"image input is not supported", re.IGNORECASE)
"""llama.cpp's 500 for an image sent to a model loaded without a vision projector."""

_TOOL_CALLS = "supports_tool_calls"
_PARALLEL_TOOL_CALLS = "supports_parallel_tool_calls"
"""Keys of the running server's `chat_template_caps`."""

_CALL: ContextVar[tuple[LlamaCppProvider, int] | None] = ContextVar(
    "allama_local_call", default=None
)
"""The `local` provider a call runs on, and its count of closes when the call began."""

_CLOSED = "the provider's connections were closed (close() or aclose())"

_EXTRACTION_TOOL = "submit_structured_output"
"""The tool a forced-tool extraction names in `tool_choice` (`allama.extract.EXTRACTION_TOOL`,
a layer above this one: a test holds the two equal)."""

_ENGINE_ANSWERS = frozenset(
    {
        ChatCapability.IMAGE_INPUT,
        ChatCapability.TOOL_CALLS,
        ChatCapability.FORCED_TOOL_CHOICE,
        ChatCapability.PARALLEL_TOOL_CALLS,
    }
)


def is_cut_off_message(message: str) -> bool:
    """Whether llama.cpp's error says the output did not parse: cut off under a grammar."""
    return _CUT_OFF.search(message) is not None


def _asks_the_engine(request: ChatRequest) -> bool:
    """Whether `request` holds what `local` encodes by the running engine's answers: tools
    (its model's chat template) or images (its vision projector)."""
    if request.tools:
        return True
    return any(isinstance(message, UserMessage) and message.images for message in request.messages)


def _forces_extraction_tool(request: ChatRequest) -> bool:
    """Whether `request` is an extraction's forced tool: its tool named in `tool_choice`."""
    choice = request.tool_choice
    return (
        choice is not None
        and choice.mode == "tool"
        and choice.name == _EXTRACTION_TOOL
        and any(tool.name == _EXTRACTION_TOOL for tool in request.tools)
    )


def _constrained(request: ChatRequest) -> bool:
    fmt = request.response_format
    return bool(request.tools) or (fmt is not None and fmt.type in ("json_schema", "choice"))


def _filled_context(usage: Usage | None, limit: int | None, slot: int | None) -> bool:
    """Whether an answer cut off (`length`) below its token limit filled its slot's context:
    prompt and answer take all of it, so a higher limit would not have helped."""
    if usage is None or slot is None:
        return False
    given, written = usage.input_tokens, usage.output_tokens
    if given is None or written is None or (limit is not None and written >= limit):
        return False
    return given + written >= slot


def _refused_images(error: Error) -> Error:
    """llama.cpp's 500 for an image to a model without vision: a refusal of the images,
    which no retry changes, not a server failure."""
    if not isinstance(error, ServerError) or _NO_VISION.search(error.message) is None:
        return error
    return UnsupportedError(
        error.message,
        field=RequestField.IMAGES,
        stage=UnsupportedStage.PROVIDER,
        context=error.context,
        origin=error.origin,
    )


class _CutOffDecoder(ChatStreamDecoder):
    """A stream decoder that ends a constrained stream cut off by the server as `length`,
    and a stream that filled its slot's context (`slot` tokens, when known) below
    `max_output_tokens` as `context_window`: its `Finish` waits for the usage after it."""

    def __init__(
        self,
        *,
        constrained: bool,
        slot: int | None = None,
        max_output_tokens: int | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self._constrained = constrained
        self._namespace = options.get("provider") or "llama-cpp"
        self._slot = slot
        self._limit = max_output_tokens
        self._held_finish: Finish | None = None

    def _event(self, event: SseEvent, *, at_end: bool) -> Iterator[StreamEvent]:
        try:
            for item in super()._event(event, at_end=at_end):
                yield from self._settled(item)
        except ServerError as error:
            if not (self._constrained and is_cut_off_message(error.message)):
                raise
            self.done = True
            self.finished = True
            yield ProviderDataEvent(namespace=self._namespace, key=CUT_OFF_KEY, value=True)
            yield Finish(finish_reason=FinishReason.LENGTH)
        if self.done:
            yield from self._release(None)

    def close(self) -> Iterator[StreamEvent]:
        yield from super().close()
        yield from self._release(None)

    def _settled(self, item: StreamEvent) -> Iterator[StreamEvent]:
        if (
            isinstance(item, Finish)
            and item.finish_reason == FinishReason.LENGTH
            and self._slot is not None
        ):
            self._held_finish = item  # until the usage says whether the context was full
            return
        if isinstance(item, UsageEvent):
            yield from self._release(item.usage)
        yield item

    def _release(self, usage: Usage | None) -> Iterator[StreamEvent]:
        held, self._held_finish = self._held_finish, None
        if held is None:
            return
        if _filled_context(usage, self._limit, self._slot):
            held = Finish(finish_reason=FinishReason.CONTEXT_WINDOW)
        yield held


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
    for name, value, least in (
        ("threads", threads, 1),
        ("context", context, 64),
        ("parallel", parallel, 1),
    ):
        if value is None:
            continue  # the default
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be a whole number, got {type(value).__name__}")
        if value < least:
            # 0 too: not "the default", nor llama.cpp's "the model's own context" (which
            # may be far larger than memory holds).
            raise ValueError(f"{name} must be at least {least}, got {value}")
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

    `local` starts llama.cpp in this process on the first request (or on `start()`), on
    127.0.0.1 with a port the OS picks, and stops it on `close()` or at exit. Loading the
    model holds the interpreter (the GIL) while it lasts, 1.5 s for the packaged model:
    an async request that loads it stalls the event loop all the same, though it loads in
    a worker thread, so call `start()` before latency matters. A call in flight when the
    provider is closed fails as closed, and starts no engine after the close. Options:
    `model` (a GGUF path; else `ALLAMA_LOCAL_MODEL`, else the packaged SmolLM2),
    `threads` (1), `context` (4096 tokens, at least 64, shared by `parallel` slots),
    `parallel` (1),
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
        **options: Unpack[HttpOptions],
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
        self._served: dict[str, Any] | None = None
        """`llama-cpp`: the server's `/props` answer, once read."""
        self._unread: str | None = None
        """`llama-cpp`: why the last read of `/props` failed (`None`: none failed)."""
        self._read_again = False
        """Whether a call reads `/props` again: it failed on the way or on the server (5xx:
        a model still loading), not by a refusal that holds (4xx: no such path, no key)."""
        self._closes = 0
        """How many closes stopped `local`'s engine: a call that began before one fails as
        closed rather than start the engine again (a retry would run it all again)."""
        if local:
            if engine is None:
                engine = LocalEngine(
                    model,
                    threads=1 if threads is None else threads,
                    context=4096 if context is None else context,
                    parallel=1 if parallel is None else parallel,
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
        self._start(None)
        return self

    def _start(self, refuse: Callable[[], None] | None) -> None:
        """`start()`, with `refuse` called first when the engine is to be started."""
        if self._engine is not None:
            try:
                self._base_url = self._engine._start_unless(refuse)
            except Error as error:
                error.with_provider(self.name)
                raise

    # Capabilities: the running server knows what the model's template can do.

    def chat_capability(self, model: str, capability: ChatCapability) -> CapabilitySupport:
        if capability in _ENGINE_ANSWERS:
            family = self._engine_family(model)
            if family is not None:
                return family.support(capability)
            if self._engine is not None:
                # Not known before the engine runs: no table says what its model can do.
                return CapabilitySupport.UNKNOWN
        return super().chat_capability(model, capability)

    def validate_chat_request(
        self, request: ChatRequest, *, stream: bool = False
    ) -> ChatValidation:
        """The dry run of the encoding; before `local`'s engine runs, one of tools or images
        covers the capability table alone: the call encodes them by the engine's answers,
        which a dry run does not start it to get. Without the engine installed it warns
        (`NOT_INSTALLED`): the call would fail as it starts it."""
        if not isinstance(request, ChatRequest):
            raise not_a_request(request)
        cold = self._engine is not None and not self._engine.running
        if self._reads_properties(request, again=False):
            self._read_properties()
        validation = super().validate_chat_request(request, stream=stream)
        missing = engine_missing() if cold else None
        if missing is not None:
            validation = validation.with_warning(
                Warning(
                    kind=WarningKind.UNSUPPORTED,
                    subject=FieldSubject(field=RequestField.MODEL),
                    message=missing,
                    code=NOT_INSTALLED,
                    provider=self.name,
                )
            )
        if cold and _asks_the_engine(request):
            return validation.model_copy(update={"coverage": ValidationCoverage.CAPABILITIES})
        return validation

    def _engine_family(self, model: str) -> ModelFamily | None:
        """`model`'s capability row with the server's word on the model it loaded: tools (its
        chat template) and, on `local`, images (its vision projector); `None` before the
        engine runs, and on `llama-cpp` before its `/props` was read."""
        engine, adapter = self._engine, self._adapter
        if not isinstance(adapter, ChatCompletionsAdapter):
            return None
        family = adapter.table.family(model)
        if engine is None:
            if self._served is None:
                return None
            caps = template_capabilities(self._served)
            images = family.images  # not asked: an image refused is the server's 500
        elif not engine.running:
            return None
        else:
            caps = engine.template_capabilities
            modalities = engine.properties.get("modalities")
            vision = isinstance(modalities, dict) and modalities.get("vision") is True
            images = CapabilitySupport.SUPPORTED if vision else CapabilitySupport.UNSUPPORTED

        def said(key: str, otherwise: CapabilitySupport) -> CapabilitySupport:
            if key not in caps:
                return otherwise
            return CapabilitySupport.SUPPORTED if caps[key] else CapabilitySupport.UNSUPPORTED

        return replace(
            family,
            images=images,
            tools=said(_TOOL_CALLS, family.tools),
            forced_tool=said(_TOOL_CALLS, family.forced_tool),
            parallel_tools=said(_PARALLEL_TOOL_CALLS, family.parallel_tools),
        )

    def _reads_properties(self, request: ChatRequest, *, again: bool) -> bool:
        """Whether `llama-cpp` reads its server's `/props` before encoding `request`: tools,
        and no answer yet; one that failed for now is read `again` (by a call, not a dry
        run)."""
        if self._engine is not None or not request.tools or self._served is not None:
            return False
        return self._unread is None or (again and self._read_again)

    def _read_properties(self) -> None:
        """Read the server's `/props` (what the model's chat template can do) through the
        provider's own transport, headers and query; what stopped the read is kept."""
        root = (self._base_url or "").rstrip("/").removesuffix("/v1")
        http: HttpRequest | None = None  # (its token is cut out of the error, `_scrub`)
        try:
            http = HttpRequest(
                "GET", f"{root}/props", self._headers(stream=False), {}, self._query, raw=b""
            )
            response = self._transport.send(http)
        except Error as error:
            self._unread, self._read_again = self._scrub(error, http).message, True
            return
        except Exception as error:  # whatever stopped it, the answer is not known
            self._unread, self._read_again = str(error) or type(error).__name__, True
            return
        if response.status != 200:
            self._unread = f"it answered HTTP {response.status}"
            self._read_again = response.status >= 500
            return
        try:
            body = json.loads(response.content)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._unread, self._read_again = "its answer is no JSON object", False
            return
        self._served, self._unread = body, None

    def _tools_not_known(self, family: ModelFamily | None) -> str | None:
        """What the warning on tools says where whether the model's chat template has tool
        calls is not known (`None`: it is): `local` before its engine loaded the model (a
        call starts it first, so only a dry run meets this), `llama-cpp` whose server did
        not say (the call sends the tools all the same)."""
        display = self._profile.display_name
        if self._engine is not None:
            if family is not None:
                return None
            return (
                f"{display} has not loaded the model yet, so whether its chat template has "
                "tool calls is not known (start() first for the answer); a template without "
                "them takes no tools"
            )
        unsaid = self._tools_unsaid(family)
        if unsaid is None:
            return None
        return (
            f"{display} did not say whether the model's chat template has tool calls "
            f"({unsaid}); the tools were sent, and a template without them drops them without "
            "a word"
        )

    def _tools_unsaid(self, family: ModelFamily | None) -> str | None:
        """Why `llama-cpp`'s server has not said whether the model's chat template has tool
        calls (`None`: it said, or this is `local`)."""
        if self._engine is not None:
            return None
        # (No backticks around /props: an extraction reads `/...` as a place in its schema.)
        if family is None:
            if self._unread is None:
                return "GET /props was not asked"
            return f"GET /props failed: {self._unread}"
        if family.tools is CapabilitySupport.UNKNOWN:
            return "GET /props has no `chat_template_caps.supports_tool_calls`"
        return None

    def _slot_context(self) -> int | None:
        """The tokens one request may hold, prompt and answer, on the running engine (its
        context shared by its slots); `None` when not known."""
        engine = self._engine
        if engine is None or not engine.running:
            return None
        settings = engine.properties.get("default_generation_settings")
        size = settings.get("n_ctx") if isinstance(settings, dict) else None
        if isinstance(size, int) and not isinstance(size, bool) and size > 0:
            return size
        return engine.context // engine.parallel

    # Encoding: a named tool is forced as `required` with that tool alone; what the running
    # engine says the model cannot take is left out, as the table's answers would be.

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
        extraction = _forces_extraction_tool(request)
        if choice is not None and choice.mode == "tool" and request.tools:
            named = [tool for tool in request.tools if tool.name == choice.name]
            if not named:
                # The server reads the object form as `auto`: the choice would be lost.
                raise (
                    InvalidRequestError(
                        f"tool_choice names `{choice.name}`, which is not among the tools"
                    )
                    .mark_authored()
                    .with_provider(self.name)
                    .with_model(request.model)
                )
            request = request.with_tools(named).with_tool_choice(ToolChoice.required())
        family = self._engine_family(request.model)
        if request.tools and (not_known := self._tools_not_known(family)) is not None:
            # A template without tool calls takes none: not enforced (or refused) then.
            degradations.approximate(RequestField.TOOLS, not_known)
        if family is None:
            return super()._encode(
                request, degradations, stream=stream, url=url, headers=headers, params=params
            )
        if request.tools and family.tools is CapabilitySupport.UNSUPPORTED:
            if extraction:
                raise self._extraction_refused(degradations, request.model)
            request = self._without_tools(request, degradations)
        return wire.encode_request(
            request,
            self._profile,
            family,
            url=url,
            headers=headers,
            params=params,
            stream=stream,
            degradations=degradations,
        )

    def _extraction_refused(self, degradations: Degradations, model: str) -> UnsupportedError:
        """The refusal, whatever the policy, of an extraction's forced tool on a template
        without tool calls: left out, the tool could never be called, and every pass (and
        retry) would be paid for an answer that cannot hold the value."""
        return degradations.unsupported(
            RequestField.TOOLS,
            f"the model's chat template on {self._profile.display_name} has no tool calls, so "
            "extraction mode `forced_tool` cannot be answered (its tool would be left out); "
            "use extraction mode `native` (ExtractionMode.NATIVE) instead",
        ).with_model(model)

    def _without_tools(self, request: ChatRequest, degradations: Degradations) -> ChatRequest:
        """`request` without the tools the model's chat template has no calls for (the
        server would drop them without a word), each refusal said."""
        where = f"the model's chat template on {self._profile.display_name} has no tool calls"
        degradations.refuse(RequestField.TOOLS, where, instead="the tools were left out")
        choice = request.tool_choice
        if choice is not None and choice.mode in ("required", "tool"):
            degradations.refuse(
                RequestField.TOOL_CHOICE,
                f"{where}, so no call can be forced",
                instead="`tool_choice` was left out",
            )
        return request.without_tools()

    def chat(self, request: ChatRequest) -> ChatResponse:
        if not isinstance(request, ChatRequest):  # (before the engine starts for it)
            raise not_a_request(request)
        with self._call():
            if self._reads_properties(request, again=True):
                self._read_properties()
            return super().chat(request)

    def chat_stream(self, request: ChatRequest) -> ChatStream:
        if not isinstance(request, ChatRequest):
            raise not_a_request(request)
        with self._call():
            if self._reads_properties(request, again=True):
                self._read_properties()
            return super().chat_stream(request)

    async def achat(self, request: ChatRequest) -> ChatResponse:
        if not isinstance(request, ChatRequest):
            raise not_a_request(request)
        with self._call():
            await self._astart(request)
            return await super().achat(request)

    async def achat_stream(self, request: ChatRequest) -> AsyncChatStream:
        if not isinstance(request, ChatRequest):
            raise not_a_request(request)
        with self._call():
            await self._astart(request)
            return await super().achat_stream(request)

    async def _astart(self, request: ChatRequest) -> None:
        """Start the engine, or read `llama-cpp`'s `/props`, in a worker thread: waiting for
        the server to answer leaves the loop free (loading the model itself holds the GIL)."""
        if self._engine is not None and not self._engine.running:
            await asyncio.to_thread(self._start_for_call, request.model)
        elif self._reads_properties(request, again=True):
            await asyncio.to_thread(self._read_properties)

    def _endpoint(self, model: str, *, stream: bool = False) -> tuple[str, Mapping[str, str]]:
        if self._engine is not None:
            self._start_for_call(model)
        return super()._endpoint(model, stream=stream)

    # A call in flight through a close: `local`'s engine is stopped under it, and neither the
    # call nor a retry of it starts the engine again.

    @contextmanager
    def _call(self) -> Iterator[None]:
        """Mark what runs inside as one call, begun at the present count of closes."""
        token = _CALL.set((self, self._closes))
        try:
            yield
        finally:
            _CALL.reset(token)

    def _closed_since_call(self) -> bool:
        """Whether the call running here began before a close that stopped the engine."""
        began = _CALL.get()
        return began is not None and began[0] is self and began[1] != self._closes

    def _start_for_call(self, model: str) -> None:
        """Start the engine for the call running here, unless the provider was closed since
        it began: looked at under the engine's lock, which its stop takes too, so that none
        starts after the close."""
        self._start(lambda: self._check_not_closed(model))
        self._check_not_closed(model)  # closed as it loaded: the close stops it

    def _check_not_closed(self, model: str) -> None:
        if self._closed_since_call():
            raise (
                Error(
                    f"{_CLOSED} while the call to the local engine was in flight (starting "
                    "it); a call made after the close starts it again"
                )
                .mark_authored()
                .with_provider(self.name)
                .with_model(model)
            )

    @contextmanager
    def _closed_under_call(self) -> Iterator[None]:
        """A network failure of a call whose engine a close stopped raised as the closed
        error, not one to try again (as it is, where no close came since the call began)."""
        try:
            yield
        except NetworkError as error:
            if not self._closed_since_call():
                raise
            cause = error.__cause__
            if not isinstance(cause, Exception):
                cause = error
            closed = _closed_error(_CLOSED, cause, _request_of(cause, None))
            closed.context = error.context
            raise closed from error

    def _send(
        self, request: ChatRequest, http: HttpRequest, warnings: list[Warning]
    ) -> ChatResponse:
        with self._closed_under_call():
            return super()._send(request, http, warnings)

    def _open(
        self,
        request: ChatRequest,
        http: HttpRequest,
        warnings: list[Warning],
        span: CallSpan | None,
    ) -> ChatStream:
        with self._closed_under_call():
            return super()._open(request, http, warnings, span)

    async def _asend(
        self, request: ChatRequest, http: HttpRequest, warnings: list[Warning]
    ) -> ChatResponse:
        with self._closed_under_call():
            return await super()._asend(request, http, warnings)

    async def _aopen(
        self,
        request: ChatRequest,
        http: HttpRequest,
        warnings: list[Warning],
        span: CallSpan | None,
    ) -> AsyncChatStream:
        with self._closed_under_call():
            return await super()._aopen(request, http, warnings, span)

    def missing_url(self) -> str | None:
        return None if self._engine is not None else super().missing_url()  # given on start

    # Decoding: output cut off under a grammar is a truncation, not a server failure.

    def _response(
        self,
        request: ChatRequest,
        response: HttpResponse,
        warnings: list[Warning],
        *,
        url: str | None = None,
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
        try:
            decoded = super()._response(request, response, warnings, url=url)
        except ServerError as error:
            refused = _refused_images(error)
            if refused is error:
                raise
            raise refused from None
        if decoded.finish_reason == FinishReason.LENGTH and _filled_context(
            decoded.usage, request.max_output_tokens, self._slot_context()
        ):
            return decoded.model_copy(update={"finish_reason": FinishReason.CONTEXT_WINDOW})
        return decoded

    def _stream_error(
        self,
        request: ChatRequest,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        *,
        url: str | None = None,
    ) -> Error:
        return _refused_images(super()._stream_error(request, status, headers, body, url=url))

    def _decoder(self, request: ChatRequest) -> ChatStreamDecoder:
        return _CutOffDecoder(
            constrained=_constrained(request),
            slot=self._slot_context(),
            max_output_tokens=request.max_output_tokens,
            provider=self.name,
            model=request.model,
            reasoning_outside_completion=self._profile.reasoning_outside_completion,
        )

    # Lifetime: closing `local` stops the engine it started.

    def close(self) -> None:
        closing = self._stopping()
        try:
            super().close()
        finally:
            if closing is not None:
                closing._closing = False

    async def aclose(self) -> None:
        closing = self._stopping()
        try:
            await super().aclose()
        finally:
            if closing is not None:
                closing._closing = False

    def _stopping(self) -> Transport | None:
        """Stop the engine this provider started, first: that shuts down the connections
        calls wait on, which the client closing its sockets would not end. The calls it
        wakes fail as closed, not to be tried again (a retry would start the engine and run
        the generation again): the transport of our own is marked closing before (returned,
        to be unmarked once closed), and the calls still starting the engine see the count
        of closes move on."""
        engine = self._engine
        if not self._owns_engine or engine is None:
            return None
        closing = self._transport if self._owns_transport else None
        self._closes += 1
        if closing is not None:
            closing._closing = True
        try:
            engine.stop()  # (after a load in progress: it waits for the engine's lock)
        except BaseException:
            if closing is not None:
                closing._closing = False
            raise
        return closing

    def __repr__(self) -> str:
        if self._engine is None:
            return super().__repr__()
        return f"LlamaCppProvider(name={self.name!r}, engine={self._engine!r})"
