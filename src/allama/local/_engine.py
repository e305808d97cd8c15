"""llama.cpp's HTTP server, run in this process from the `xllamacpp` wheel.

The server listens on 127.0.0.1 only, on a port the OS picks, so nothing outside the
machine can reach it and two engines never collide. It is stopped when the engine is
stopped, when its provider is closed, and at interpreter exit (whatever is still running).
One thread by default: on a small machine more threads compete with the caller's own work
and were measured slower for a 135M model.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import importlib.util
import os
import socket
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx2

from allama.errors import NotFoundError, ServerError
from allama.local._models import resolve_model

__all__ = ["EngineNotInstalledError", "EngineStartError", "LocalEngine"]

_INSTALL = "pip install 'allama[local]'"
_NEEDS = "the local engine needs the llama.cpp server from xllamacpp"


class EngineNotInstalledError(ImportError, NotFoundError):
    """The llama.cpp engine (`xllamacpp`) is not installed.

    An `allama.NotFoundError` too (the provider's endpoint is missing), never retryable.
    """

    def __init__(self, message: str) -> None:
        ImportError.__init__(self, message)
        NotFoundError.__init__(self, message)  # ImportError's own does not pass it on
        self.mark_authored()


class EngineStartError(RuntimeError, ServerError):
    """The server did not start or did not become healthy in time.

    An `allama.ServerError` too, but not retryable: a model llama.cpp cannot load fails
    the same way again, and a retry would load it again first.
    """

    def __init__(self, message: str) -> None:
        ServerError.__init__(self, message, retryable=False)
        self.mark_authored()

    def __reduce__(self) -> tuple[Any, ...]:
        # As itself, not as the plain `ServerError` that `Error.__reduce__` makes.
        return (type(self), self.args, self.__dict__)


_RUNNING: weakref.WeakSet[LocalEngine] = weakref.WeakSet()
_ENGINES: weakref.WeakSet[LocalEngine] = weakref.WeakSet()
"""Every engine, for a child process to make their locks anew."""

_PARENTS_SERVERS: list[Any] = []
"""In a forked child, the parent's servers, never freed: freeing one joins server threads
the child does not have (llama.cpp aborts, or waits for good), and stopping one shuts down
the sockets the child shares with the parent, cutting the parent's calls in flight."""
# One reference more than any holder gives back: clearing this module at interpreter
# exit must not free the list, and the servers with it.
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_PARENTS_SERVERS))


@atexit.register
def _stop_all() -> None:
    for engine in list(_RUNNING):
        engine.stop()


def _after_fork_in_child() -> None:
    for engine in list(_ENGINES):
        engine._forget_after_fork()
    _RUNNING.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _load_xllamacpp() -> Any:
    try:
        import xllamacpp  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError as error:
        raise EngineNotInstalledError(f"{_NEEDS}: {_INSTALL}") from error
    return xllamacpp


def engine_missing() -> str | None:
    """What a dry run says where xllamacpp is not installed, the call's
    `EngineNotInstalledError` before it (`None` where it is): found without importing it,
    so that a plan loads no engine."""
    try:
        found = importlib.util.find_spec("xllamacpp") is not None
    except ValueError:  # imported some other way, with no spec: there all the same
        found = True
    if found:
        return None
    return f"{_NEEDS}, which is not installed (the call fails before sending): {_INSTALL}"


def _hang_up(address: str) -> None:
    """Shut this process's connections to the server at `address` down: a request still
    waiting there (a run stopped, or left, at exit) holds one of the server's threads,
    which its shutdown joins, and would hold it until the client's read timed out (ten
    minutes). Shut down, the client's read ends at once, and the server's thread with it."""
    host, _, port = address.removeprefix("http://").rpartition(":")
    peer = (host, int(port)) if port.isdigit() else None
    if peer is None:
        return
    for found in gc.get_objects():
        if type(found) is not socket.socket or found.fileno() < 0:
            continue
        try:
            if found.getpeername()[:2] == peer:
                found.shutdown(socket.SHUT_RDWR)
        except OSError:  # not connected (a listening socket, one already shut down)
            continue


def template_capabilities(properties: Mapping[str, Any]) -> dict[str, bool]:
    """The `chat_template_caps` of a llama.cpp server's `/props` answer: what the model's
    chat template supports, its flags alone."""
    caps = properties.get("chat_template_caps")
    if not isinstance(caps, dict):
        return {}
    return {key: value for key, value in caps.items() if isinstance(value, bool)}


class LocalEngine:
    """One llama.cpp server for one model file, started on demand.

    >>> engine = LocalEngine("model.gguf", threads=1)
    >>> engine.running
    False
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        threads: int = 1,
        context: int = 4096,
        parallel: int = 1,
        chat_template: str | None = None,
        start_timeout: float = 120.0,
        http_threads: int = 32,
    ) -> None:
        if threads < 1 or parallel < 1 or context < 64:
            raise ValueError("threads and parallel must be at least 1, context at least 64")
        self._model = model
        self.threads = threads
        self.context = context
        self.parallel = parallel
        self.chat_template = chat_template
        self.start_timeout = start_timeout
        self.http_threads = http_threads
        self._lock = threading.Lock()
        self._server: Any = None
        self._address: str | None = None
        self.model_path: Path | None = None
        self.startup_seconds: float | None = None
        self.properties: dict[str, Any] = {}
        self._parent_pid: int | None = None
        _ENGINES.add(self)

    def __repr__(self) -> str:
        state = f"running at {self._address}" if self.running else "stopped"
        return f"LocalEngine(model={self.model_path or self._model!r}, {state})"

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def address(self) -> str:
        """`http://127.0.0.1:PORT` of the running server."""
        if self._address is None:
            raise EngineStartError("the local engine is not running")
        return self._address

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL of the running server."""
        return f"{self.address}/v1"

    @property
    def template_capabilities(self) -> dict[str, bool]:
        """What the model's chat template supports (tools, system role...), once running."""
        return template_capabilities(self.properties)

    def start(self) -> str:
        """Start the server (once) and wait until it is healthy; returns the base URL.

        Raises `ModelNotFoundError` without a model, `EngineNotInstalledError` without the
        engine, `EngineStartError` when the server fails to load or to become healthy.
        """
        return self._start_unless(None)

    def _start_unless(self, refuse: Callable[[], None] | None) -> str:
        """`start()`, calling `refuse` first, under the lock a stop takes, when the server is
        to be started: it raises to start none (a call to a provider closed since it began)."""
        with self._lock:
            if self._parent_pid is not None:
                raise EngineStartError(
                    f"the local engine was started by the parent process (pid "
                    f"{self._parent_pid}) before this process forked; it serves that process "
                    "alone: make a new provider (or LocalEngine) in this process"
                )
            if self._server is None:
                if refuse is not None:
                    refuse()
                self._start()
            return self.base_url

    def _start(self) -> None:
        path = resolve_model(self._model)
        xllamacpp = _load_xllamacpp()
        began = time.perf_counter()
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.model_alias = {path.stem}  # a set of names: a string would be its letters
        params.hostnames = ["127.0.0.1"]
        params.port = 0
        params.n_ctx = self.context
        params.n_parallel = self.parallel
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        # HTTP threads, not compute threads: a kept-alive connection holds one, so a few
        # concurrent callers must not wait for another's idle connection to time out.
        params.n_threads_http = max(self.http_threads, self.parallel)
        params.use_jinja = True
        params.offline = True
        params.ui = False
        params.warmup = False
        params.verbosity = -1
        if self.chat_template is not None:
            params.chat_template = self.chat_template
        # Made, and waited for, in a thread of its own: an interrupt (Ctrl-C, SIGTERM) lands
        # on this one, which waits on. A server dropped while its model loads waits for its
        # loading thread in its end, for good, and no signal breaks that wait.
        made: dict[str, Any] = {}
        done = threading.Event()  # (an interrupted join marks the thread ended on 3.11)

        def make() -> None:
            try:
                self._make(xllamacpp, params, path, made)
            finally:
                done.set()

        worker = threading.Thread(target=make, name="allama-llama.cpp")
        interrupted: BaseException | None = None
        while not done.is_set():
            try:
                if worker.ident is None:
                    worker.start()
                done.wait()
            except BaseException as error:  # waited through: the first is raised after
                interrupted = interrupted or error
                if worker.ident is None:
                    break  # never started: nothing to wait for
        server, address = made.get("server"), made.get("address", "")
        failed = interrupted or made.get("error")
        if failed is not None:
            del server, made
            raise failed
        self._server = server
        self._address = address
        self.model_path = path
        self.startup_seconds = time.perf_counter() - began
        _RUNNING.add(self)

    def _why_unloaded(self, path: Path) -> str:
        """What may have stopped llama.cpp loading `path`, which its own words do not say."""
        try:
            with path.open("rb") as file:
                magic = file.read(4)
        except OSError as error:
            return f"the file cannot be read: {error.strerror or error}"
        if magic != b"GGUF":
            return "the file is not a GGUF model: it does not begin with GGUF's magic bytes"
        return (
            "a GGUF file cut short, or of a version this llama.cpp does not read, or too "
            f"little memory for a context of {self.context} tokens in {self.parallel} "
            "slot(s): a smaller context= or parallel= needs less"
        )

    def _make(self, xllamacpp: Any, params: Any, path: Path, made: dict[str, Any]) -> None:
        """The server and its properties into `made`, or the error that stopped them."""
        try:
            server = xllamacpp.Server(params)
        except Exception as error:
            # llama.cpp says the same "check the input params" whatever stopped it.
            made["error"] = EngineStartError(
                f"llama.cpp could not load {path}: {error} ({self._why_unloaded(path)})"
            )
            made["error"].__cause__ = error
            return
        made["server"] = server
        address = made["address"] = str(server.listening_address).rstrip("/")
        try:
            self.properties = self._wait_healthy(address)
        except Exception as error:  # (no signal reaches this thread)
            made["error"] = error

    def _wait_healthy(self, address: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.start_timeout
        with httpx2.Client(timeout=5.0) as client:
            while True:
                try:
                    if client.get(f"{address}/health").status_code == 200:
                        props = client.get(f"{address}/props")
                        body = props.json() if props.status_code == 200 else {}
                        return body if isinstance(body, dict) else {}
                except httpx2.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise EngineStartError(
                        f"llama.cpp did not become healthy within {self.start_timeout:g} s"
                    )
                time.sleep(0.02)

    def stop(self) -> None:
        """Stop the server; a no-op when it is not running."""
        with self._lock:
            server, self._server = self._server, None
            address, self._address = self._address, None
            _RUNNING.discard(self)
            if address is not None:
                _hang_up(address)
            # Dropping the last reference shuts the server down and joins its threads.
            del server

    def _forget_after_fork(self) -> None:
        """In a forked child: the lock may be held by a thread of the parent's, and a
        running server is the parent's, kept (never freed, never stopped) and let go."""
        self._lock = threading.Lock()
        if self._server is not None:
            _PARENTS_SERVERS.append(self._server)
            self._server, self._address = None, None
            self._parent_pid = os.getppid()

    def __enter__(self) -> LocalEngine:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
