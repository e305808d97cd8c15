"""A process forked while allama is at work: the child neither hangs on a lock a thread of
the parent's held at the fork, nor ends the parent's `local` engine on its way out.

Left to xllamacpp: a child that leaves through C's `exit()` after its parent's engine ran
still dies there, in a C++ static destructor of xllamacpp's joining a thread of the
parent's; the real-engine test leaves through `os._exit` after the exit handlers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from allama.local import _engine
from allama.local._engine import EngineStartError, LocalEngine
from allama.providers._credentials import RefreshingToken

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")

TESTS = Path(__file__).resolve().parent


def _wait_child(pid: int, timeout: float = 20.0) -> int:
    """The child's exit status; a child still running after `timeout` is killed, failing."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.WIFEXITED(status), f"child killed by signal {os.WTERMSIG(status)}"
            return os.WEXITSTATUS(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"the child still ran after {timeout:g} s (hung)")
        time.sleep(0.02)


class HeldCredentials:
    """google-auth-like credentials whose first refresh waits for `release`."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.refreshes = 0
        self.token: str | None = None
        self.valid = False

    def refresh(self, request: Any) -> None:
        self.refreshes += 1
        if self.refreshes == 1:
            self.entered.set()
            self.release.wait(30)
        self.token, self.valid = f"tok-{self.refreshes}", True


def test_a_child_forked_during_a_token_refresh_refreshes_its_own() -> None:
    credentials = HeldCredentials()
    token = RefreshingToken("vertex-gemini", credentials)
    parent = threading.Thread(target=token.refresh)
    parent.start()
    try:
        assert credentials.entered.wait(10)  # the thread holds the token's lock
        pid = os.fork()
        if pid == 0:  # the child: exits with 0 when its refresh gave its own token
            code = 1
            try:
                signal.alarm(15)
                code = 0 if token.refresh() == "tok-2" else 2
            finally:
                os._exit(code)
        assert _wait_child(pid) == 0
    finally:
        credentials.release.set()
        parent.join(10)
    assert token.refresh() == "tok-1"  # the parent's own refresh ended as before


class StandInServer:
    """In place of xllamacpp's server: says (by a file) in which process it was freed."""

    def __init__(self, record: Path) -> None:
        self.record = record

    def __del__(self) -> None:
        with self.record.open("a") as out:
            out.write(f"{os.getpid()}\n")


def _running_stand_in(record: Path) -> LocalEngine:
    engine = LocalEngine("model.gguf")
    engine._server = StandInServer(record)
    engine._address = "http://127.0.0.1:9"
    _engine._RUNNING.add(engine)
    return engine


def test_in_a_forked_child_the_parents_engine_is_kept_and_not_running(tmp_path: Path) -> None:
    record = tmp_path / "freed"
    engine = _running_stand_in(record)
    server = engine._server
    engine._lock.acquire()  # as a thread of the parent's starting or stopping it would
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            signal.alarm(15)
            kept = any(found is server for found in _engine._PARENTS_SERVERS)
            checks = [len(_engine._RUNNING) == 0, not engine.running, kept]
            try:
                engine.start()
            except EngineStartError as error:
                checks.append(f"started by the parent process (pid {os.getppid()})" in str(error))
            else:
                checks.append(False)
            engine.stop()  # a no-op: the server is the parent's
            checks.append(not record.exists())
            code = 0 if all(checks) else 10 + [bool(c) for c in checks].index(False)
        finally:
            os._exit(code)
    engine._lock.release()
    assert _wait_child(pid) == 0
    assert engine.running and engine in _engine._RUNNING  # the parent's is untouched
    del server
    engine._address = None  # nothing to hang up on
    engine.stop()
    assert record.read_text() == f"{os.getpid()}\n"


def test_a_child_that_ends_normally_never_frees_the_parents_server(tmp_path: Path) -> None:
    # A process of its own: the child runs atexit and interpreter finalization for real.
    record = tmp_path / "freed"
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(TESTS)!r})
        from pathlib import Path
        from test_fork_safety import _running_stand_in
        record = Path({str(record)!r})
        engine = _running_stand_in(record)
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # atexit runs, then the interpreter's finalization
        _, status = os.waitpid(pid, 0)
        print("child", status, record.exists(), flush=True)
        engine._address = None
        engine.stop()
        print("parent", record.read_text() == f"{{os.getpid()}}\\n", flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["child 0 False", "parent True"]


def test_the_real_engine_outlives_a_child_that_ends(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp", reason="the llama.cpp engine is not installed")
    pytest.importorskip("gguf", reason="the tiny test models need the gguf package")
    script = textwrap.dedent(
        f"""
        import atexit, os, signal, sys, time
        sys.path.insert(0, {str(TESTS)!r})
        from pathlib import Path
        import allama
        from _tiny_gguf import write_tiny_model
        model = write_tiny_model(Path({str(tmp_path / "tiny.gguf")!r})).path
        request = allama.ChatRequest("tiny", max_output_tokens=4, temperature=0).user("hi")
        provider = allama.provider("local", model=model)
        provider.chat(request)
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)
            try:
                provider.chat(request)
            except allama.Error as error:
                print("child:", "started by the parent process" in str(error), flush=True)
            # The exit handlers, then out: xllamacpp's own C++ exit handlers join a thread
            # the child does not have (see the module's docstring).
            atexit._run_exitfuncs()
            os._exit(0)
        deadline = time.monotonic() + 30
        while not (done := os.waitpid(pid, os.WNOHANG))[0]:
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                done = (pid, -1)
                break
            time.sleep(0.05)
        print("child status:", done[1], flush=True)
        print("parent:", provider.chat(request).provider, flush=True)
        provider.close()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["child: True", "child status: 0", "parent: local"]
