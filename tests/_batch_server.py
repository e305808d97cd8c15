"""A local Chat Completions server for batch runs: it rate-limits, fails some requests,
answers slowly, and counts what it was sent per document.

Documents are `doc <n>`; the answer is `{"n": <n>}`. By `n`: `n % 50 == 7` answers text
that is no JSON (the extraction fails), `n % 50 == 13` answers 400, `n % 10 == 3` answers
503 the first time it is asked. Past `rate` requests per second it answers 429 with a
`retry-after`. With `refusing` set (`key`, `quota`, `day` or `model`), it refuses every
request as a provider refuses a revoked key (401), a spent account (429
`insufficient_quota`), a limit per day (429, retry after a day) or a model it does not have
(404). A document whose text says `too large` is answered 429 as a request larger than the
limit per minute; one whose text says `flaky` is answered with no JSON, then 503, then its
value; one whose text says `cut off` has its connection closed in the middle of
the answer's status line. `times` keeps when each request reached the model.
Run as a script, it serves until killed and prints its port.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections import Counter, deque
from http.server import ThreadingHTTPServer
from typing import Any

from _replay_server import ReplyHandler

_DOC = re.compile(r"doc (\d+)")


class BatchServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512

    def __init__(
        self, *, rate: float | None = None, delay: float = 0.0, model: str = "gpt-4o-mini"
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.rate = rate
        self.delay = delay
        self.model = model
        self.lock = threading.Lock()
        self.sent: Counter[int] = Counter()
        """Requests per document that reached the model (not the ones answered 429)."""
        self.times: list[float] = []
        self.arrivals: list[tuple[float, int]] = []
        """When each request that reached the model came, and for which document."""
        self.limited = 0
        self.recent: deque[float] = deque()
        self.refusing: str | None = None
        self.refused = 0

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that closed its connection (a run closed with calls in flight) is no
        error of the server's: not printed."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> BatchServer:
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def admit(self) -> float | None:
        """`None` when a request fits in the rate (one second's window), else the seconds
        until it would (the `retry-after` a provider sends)."""
        if self.rate is None:
            return None
        now = time.monotonic()
        with self.lock:
            while self.recent and now - self.recent[0] > 1.0:
                self.recent.popleft()
            if len(self.recent) >= self.rate:
                self.limited += 1
                return max(0.001, 1.0 - (now - self.recent[0]))
            self.recent.append(now)
            return None


class _Handler(ReplyHandler):
    server: BatchServer

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.server.refusing is not None:
            with self.server.lock:
                self.server.refused += 1
            status, payload, wait = _REFUSALS[self.server.refusing]
            self._send(status, payload, wait)
            return
        wait = self.server.admit()
        if wait is not None:
            self._send(429, {"error": {"message": "slow down", "type": "rate_limit"}}, wait)
            return
        text = " ".join(
            str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "user"
        )
        found = _DOC.search(text)
        n = int(found.group(1)) if found else -1
        with self.server.lock:
            self.server.sent[n] += 1
            self.server.times.append(time.monotonic())
            self.server.arrivals.append((self.server.times[-1], n))
            count = self.server.sent[n]
        if "flaky" in text and count <= 2:  # no JSON (a paid pass), then a 503
            if count == 1:
                self._send(200, _completion(self.server.model, "no JSON here"))
            else:
                self._send(503, {"error": {"message": "overloaded", "type": "server_error"}})
            return
        if "limited" in text and count <= 2:  # no JSON (a paid pass), then a 429
            if count == 1:
                self._send(200, _completion(self.server.model, "no JSON here"))
            else:
                self._send(429, {"error": {"message": "slow down", "type": "rate_limit"}}, 1.0)
            return
        if "cut off" in text:
            self.wfile.write(b"HTTP/1.1 2")
            self.wfile.flush()
            self.close_connection = True
            return
        if "too large" in text:
            self._send(429, _TOO_LARGE, 1.0)
            return
        if "not again" in text:  # a rate limit the provider says not to retry
            limited = {"error": {"message": "slow down", "type": "rate_limit"}}
            wait = 86_400.0 if "a day" in text else 1.0
            self._send(429, limited, wait, {"x-should-retry": "false"})
            return
        if self.server.delay:
            time.sleep(self.server.delay * (1 + (n % 4)) / 2.5)
        if n % 50 == 13:
            self._send(400, {"error": {"message": "bad document", "type": "invalid_request"}})
        elif n % 10 == 3 and count == 1:
            self._send(503, {"error": {"message": "overloaded", "type": "server_error"}})
        else:
            content = "no JSON here" if n % 50 == 7 else json.dumps({"n": n})
            self._send(200, _completion(self.server.model, content))

    def _send(
        self,
        status: int,
        payload: Any,
        retry_after: float | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        wait = {} if retry_after is None else {"retry-after-ms": str(int(retry_after * 1000))}
        self.send_json(status, payload, {**wait, **(headers or {})})


_TOO_LARGE = {
    "error": {
        "message": "Request too large for gpt-4o-mini in organization org-test on tokens per min "
        "(TPM): Limit 30000, Requested 45000. The input or output tokens must be reduced in "
        "order to run successfully.",
        "type": "tokens",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}
"""OpenAI's 429 for a request larger than the per-minute limit (a document whose text says
`too large`)."""

_REFUSALS: dict[str, tuple[int, Any, float | None]] = {
    "key": (
        401,
        {
            "error": {
                "message": "Incorrect API key provided: sk-test.",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        },
        None,
    ),
    "quota": (
        429,
        {
            "error": {
                "message": "You exceeded your current quota.",
                "type": "insufficient_quota",
                "code": "insufficient_quota",
            }
        },
        None,
    ),
    "day": (
        429,
        {
            "error": {
                "message": "Rate limit reached for requests per day (RPD).",
                "type": "requests",
                "code": "rate_limit_exceeded",
            }
        },
        86_400.0,
    ),
    "model": (
        404,
        {
            "error": {
                "message": "The model `gpt-4o-mini` does not exist or you have no access.",
                "type": "invalid_request_error",
                "code": "model_not_found",
            }
        },
        None,
    ),
}


def _completion(model: str, content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-batch",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


def expected(n: int) -> str:
    """What a run ends with for document `n`: `ok`, or the kind of its failure."""
    if n % 50 == 13:
        return "invalid_request"
    if n % 50 == 7:
        return "extraction_parse"
    return "ok"


if __name__ == "__main__":
    rate = float(sys.argv[1]) if len(sys.argv) > 1 else None
    server = BatchServer(rate=rate)
    print(server.url, flush=True)
    server.serve_forever()
