"""A local fake of the batch job APIs of OpenAI, Anthropic and Gemini, and of their live
endpoints, for tests of a client that submits extractions as provider batch jobs, polls
them, downloads the results and retries the failed rows (in a new job or live).

The wire shapes follow the real APIs, quirks included (Gemini's int64 counts as strings
and its zero or false fields left out, OpenAI's `finish_reason: "stop"` for a named forced
tool, results out of submission order), so that a client which reads them wrongly fails
here rather than against the provider.

Documents are `doc <n>` anywhere in a request body; the answer is the JSON text
`{"n": <n>}`. By `n`, counted per (family, n) over every answer, batch or live:
`n % 50 == 7` answers text that is no JSON the first time, `n % 50 == 13` is always an
invalid request (400), `n % 50 == 23` is a server error the first time (Anthropic live:
529 overloaded). Families: "openai-chat", "openai-responses", "anthropic", "gemini".

Jobs advance one state per GET of the job and end after `polls_to_finish` GETs; their rows
are answered when they end. Knobs: `fail_all_rows` (every batch row a 500 while the job
still succeeds), `expire_next` (the next k jobs end expired, the first half of their rows
answered), `hold` (jobs never end, except by cancelling). Run as a script, it serves until
killed and prints its URL. Loaded as a plugin by `conftest.py`, it gives each test that
asks for `server` (and defines no `server` of its own) a fresh one.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import Message
from email.parser import HeaderParser
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from _replay_server import ReplyHandler

_DOC = re.compile(r"doc (\d+)")
_ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_OPENAI_ENDPOINTS = {"/v1/chat/completions": "openai-chat", "/v1/responses": "openai-responses"}
_GEMINI_BATCH = "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch"
_GEMINI_OUTPUT = f"{_GEMINI_BATCH}Output"
_DAY = 24 * 3600
_USAGE_OPENAI = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
_OPENAI_UNRUN = {
    "expired": {
        "code": "batch_expired",
        "message": "This request could not be executed before the completion window expired.",
    },
    "canceled": {
        "code": "batch_cancelled",
        "message": "This request was cancelled before it could be executed.",
    },
}

Json = dict[str, Any]
Key = tuple[str, int]
"""(family, n): what the counters count."""


@dataclass(frozen=True)
class Outcome:
    """What the "model" made of one request: `ok` with the provider's response body, or the
    kind of its failure (`invalid` 400, `overloaded` the first-time server error, `server`
    the 500 of `fail_all_rows`)."""

    kind: str
    payload: Json | None = None
    message: str = ""


@dataclass
class Row:
    """One row of a finished job: `succeeded`, `errored`, `expired` or `canceled`."""

    key: str
    status: str
    outcome: Outcome | None = None


@dataclass
class StoredFile:
    """An uploaded or produced file. OpenAI ids are `file-…`; Gemini names `files/…`."""

    id: str
    data: bytes
    filename: str
    purpose: str
    created: float
    mime_type: str = "application/jsonl"
    job_id: str | None = None
    """The job whose results this file holds (its downloads count in `result_downloads`)."""


@dataclass
class Job:
    """A created batch job. `requests` are the lines or entries as received (parsed JSON);
    `keys` and `bodies` are the rows' custom ids (Gemini: keys) and request bodies."""

    provider: str
    """One of "openai", "anthropic" and "gemini"; `family` is what the counters say."""
    family: str
    id: str
    requests: list[Any]
    keys: list[str]
    bodies: list[Any]
    polls_to_finish: int
    expire: bool
    created: float
    polls: int = 0
    cancel_requested: bool = False
    end: str | None = None
    """None while running, else "completed", "expired", "cancelled" or "failed"."""
    rows: list[Row] = field(default_factory=list)
    times: dict[str, float] = field(default_factory=dict)
    # OpenAI
    endpoint: str = ""
    input_file_id: str = ""
    completion_window: str = "24h"
    metadata: Any = None
    validation_errors: list[Json] = field(default_factory=list)
    output_file_id: str | None = None
    error_file_id: str | None = None
    # Gemini
    model: str = ""
    display_name: str | None = None
    input_file: str | None = None
    inline_metadata: list[Any] = field(default_factory=list)
    responses_file: str | None = None


@dataclass
class _Upload:
    display_name: str | None
    length: int
    mime_type: str


class ProviderBatchServer(ThreadingHTTPServer):
    """The fake. Everything it keeps is read and changed under `lock`."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, *, polls_to_finish: int = 2) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.polls_to_finish = polls_to_finish
        """GETs of a job until it shows its end state (read when the job is created)."""
        self.fail_all_rows = False
        self.expire_next = 0
        self.hold = False
        self.answered: Counter[Key] = Counter()
        self.live: Counter[Key] = Counter()
        self.submitted: Counter[Key] = Counter()
        self.result_downloads: Counter[str] = Counter()
        """Downloads of a job's results, by job id."""
        self.jobs: list[Job] = []
        self.files: dict[str, StoredFile] = {}
        self.deleted: list[str] = []
        """The ids of the files deleted (`DELETE` of a file), in order."""
        self.uploads: dict[str, _Upload] = {}
        self._seq = 0

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_base(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_base(self) -> str:
        return self.url

    @property
    def gemini_base(self) -> str:
        return f"{self.url}/v1beta"

    def start(self) -> ProviderBatchServer:
        # A short poll: `stop` waits for it, once per test.
        threading.Thread(target=self.serve_forever, args=(0.01,), daemon=True).start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up mid-answer are not the fake's failure.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)

    def job(self, job_id: str) -> Job | None:
        """The job of this id (Gemini: `batches/…`)."""
        return next((job for job in self.jobs if job.id == job_id), None)

    def jobs_of(self, provider: str) -> list[Job]:
        return [job for job in self.jobs if job.provider == provider]

    # Under `lock` from here on.

    def new_id(self, prefix: str, size: int = 24) -> str:
        """Ids that look like the provider's and are the same from run to run."""
        self._seq += 1
        return prefix + hashlib.sha256(f"{prefix}{self._seq}".encode()).hexdigest()[:size]

    def answer(self, family: str, body: Any, *, batch: bool, model: str = "") -> Outcome:
        """Answer one request as the model would, and count it."""
        if not isinstance(body, dict):
            return Outcome("invalid", message="The request body must be a JSON object.")
        found = _DOC.search(json.dumps(body))
        if found is None:
            return Outcome("invalid", message="No `doc <n>` in the request.")
        key = (family, int(found.group(1)))
        if not batch:
            self.live[key] += 1
        problem = _shape_problem(family, body)
        if problem:
            return Outcome("invalid", message=problem)
        n = key[1]
        first = self.answered[key] == 0
        self.answered[key] += 1
        if batch and self.fail_all_rows:
            return Outcome("server", message="The server had an error processing the request.")
        if n % 50 == 13:
            return Outcome("invalid", message=f"doc {n} is an invalid request.")
        if n % 50 == 23 and first:
            return Outcome("overloaded", message="The server is overloaded; try again.")
        good = not (n % 50 == 7 and first)
        build = {
            "openai-chat": self._chat_completion,
            "openai-responses": self._response,
            "anthropic": self._message,
            "gemini": self._generate_content,
        }[family]
        return Outcome("ok", build(body, n, good, model))

    def count_submitted(self, family: str, bodies: list[Any]) -> None:
        for body in bodies:
            found = _DOC.search(json.dumps(body))
            if found is not None:
                self.submitted[(family, int(found.group(1)))] += 1

    def add_job(self, job: Job) -> Job:
        if self.expire_next > 0:
            self.expire_next -= 1
            job.expire = True
        self.jobs.append(job)
        self.count_submitted(job.family, job.bodies)
        if job.polls_to_finish <= 0:
            self.step(job)
        return job

    def step(self, job: Job) -> None:
        """One GET of the job: the next state, the end after `polls_to_finish` of them."""
        if job.end is not None:
            return
        now = time.time()
        if job.cancel_requested:
            self.finish(job, "cancelled")
            return
        if job.validation_errors:
            self.finish(job, "failed")
            return
        if self.hold:
            job.polls = max(job.polls, 1)
            job.times.setdefault("in_progress", now)
            return
        job.polls += 1
        job.times.setdefault("in_progress", now)
        if job.polls >= 2 and job.polls == job.polls_to_finish - 1:
            job.times.setdefault("finalizing", now)
        if job.polls >= job.polls_to_finish:
            job.times.setdefault("finalizing", now)
            self.finish(job, "expired" if job.expire else "completed")

    def finish(self, job: Job, end: str) -> None:
        """End the job; answer its rows (the first half of them when it expires)."""
        job.end = end
        job.times[end] = time.time()
        if end == "failed":
            return
        answered = len(job.bodies) // 2 if end == "expired" else len(job.bodies)
        if end == "cancelled":
            answered = 0
        for index, (key, body) in enumerate(zip(job.keys, job.bodies, strict=True)):
            if index >= answered:
                job.rows.append(Row(key, "canceled" if end == "cancelled" else "expired"))
                continue
            outcome = self.answer(job.family, body, batch=True, model=job.model)
            job.rows.append(Row(key, "succeeded" if outcome.kind == "ok" else "errored", outcome))
        if job.provider == "openai":
            self._openai_files(job)
        elif job.provider == "gemini" and job.input_file is not None:
            self._gemini_file(job)

    def store(self, stored: StoredFile) -> StoredFile:
        self.files[stored.id] = stored
        return stored

    def _openai_files(self, job: Job) -> None:
        output: list[Json] = []
        errors: list[Json] = []
        for row in shuffled(job.rows, job.id):
            line: Json = {"id": self.new_id("batch_req_"), "custom_id": row.key}
            if row.status in _OPENAI_UNRUN:
                errors.append({**line, "response": None, "error": _OPENAI_UNRUN[row.status]})
                continue
            assert row.outcome is not None
            status, body = (
                (200, row.outcome.payload)
                if row.outcome.payload is not None
                else openai_error(row.outcome)
            )
            response = {"status_code": status, "request_id": self.new_id("req_"), "body": body}
            (output if status == 200 else errors).append(
                {**line, "response": response, "error": None}
            )
        for lines, kind in ((output, "output"), (errors, "error")):
            if not lines:
                continue
            stored = self.store(
                StoredFile(
                    id=self.new_id("file-", 22),
                    data=jsonl(lines),
                    filename=f"{job.id}_{kind}.jsonl",
                    purpose="batch_output",
                    created=time.time(),
                    job_id=job.id,
                )
            )
            if kind == "output":
                job.output_file_id = stored.id
            else:
                job.error_file_id = stored.id

    def _gemini_file(self, job: Job) -> None:
        lines: list[Json] = []
        for row in shuffled(job.rows, job.id):
            if row.outcome is None:
                continue
            if row.outcome.payload is not None:
                lines.append({"key": row.key, "response": row.outcome.payload})
            else:
                lines.append({"key": row.key, "error": gemini_status(row.outcome)})
        name = f"files/batch-{job.id.removeprefix('batches/')}"
        self.store(StoredFile(name, jsonl(lines), name, "batch", time.time(), job_id=job.id))
        job.responses_file = name

    # The answers.

    def _chat_completion(self, body: Json, n: int, good: bool, model: str) -> Json:
        text = json.dumps({"n": n}) if good else "this is not JSON"
        message: Json = {"role": "assistant", "content": text, "refusal": None, "annotations": []}
        finish = "stop"
        forced = _chat_forced(body)
        if forced is not None:
            name, named = forced
            arguments = json.dumps({"n": n} if good else {"wrong": True})
            call = {"name": name, "arguments": arguments}
            call_id = self.new_id("call_")
            message = {
                **message,
                "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": call}],
            }
            # A named tool_choice ends with "stop" on the real API; "required" with "tool_calls".
            finish = "stop" if named else "tool_calls"
        return {
            "id": self.new_id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model"),
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            ],
            "usage": dict(_USAGE_OPENAI),
            "service_tier": "default",
            "system_fingerprint": None,
        }

    def _response(self, body: Json, n: int, good: bool, model: str) -> Json:
        text = json.dumps({"n": n}) if good else "this is not JSON"
        forced = _responses_forced(body)
        item: Json
        if forced is None:
            content = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            item = {
                "type": "message",
                "id": self.new_id("msg_"),
                "role": "assistant",
                "status": "completed",
                "content": [content],
            }
        else:
            item = {
                "type": "function_call",
                "id": self.new_id("fc_"),
                "call_id": self.new_id("call_"),
                "name": forced,
                "arguments": json.dumps({"n": n} if good else {"wrong": True}),
                "status": "completed",
            }
        return {
            "id": self.new_id("resp_"),
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "error": None,
            "incomplete_details": None,
            "model": body.get("model"),
            "output": [item],
            "parallel_tool_calls": True,
            "usage": {
                "input_tokens": 10,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 5,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 15,
            },
        }

    def _message(self, body: Json, n: int, good: bool, model: str) -> Json:
        forced = _anthropic_forced(body)
        content: list[Json]
        if forced is None:
            text = json.dumps({"n": n}) if good else "this is not JSON"
            content, stop = [{"type": "text", "text": text}], "end_turn"
        else:
            tool_input = {"n": n} if good else {"wrong": True}
            use = {"type": "tool_use", "id": self.new_id("toolu_"), "name": forced}
            content, stop = [{**use, "input": tool_input}], "tool_use"
        return {
            "id": self.new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }

    def _generate_content(self, body: Json, n: int, good: bool, model: str) -> Json:
        forced = _gemini_forced(body)
        part: Json
        if forced is None:
            part = {"text": json.dumps({"n": n}) if good else "this is not JSON"}
        else:
            part = {"functionCall": {"name": forced, "args": {"n": n} if good else {"wrong": True}}}
        return {
            "candidates": [
                {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": 10,
                "candidatesTokenCount": 5,
                "totalTokenCount": 15,
            },
            "modelVersion": model.removeprefix("models/"),
            "responseId": self.new_id("", 22),
        }

    # The views of a job, as each provider shows it.

    def openai_batch(self, job: Job) -> Json:
        t = job.times
        if job.end is not None:
            status = job.end
        elif job.cancel_requested:
            status = "cancelling"
        elif job.polls == 0:
            status = "validating"
        elif job.polls >= 2 and job.polls == job.polls_to_finish - 1 and not self.hold:
            status = "finalizing"
        else:
            status = "in_progress"
        counts = {"total": 0, "completed": 0, "failed": 0}
        if job.polls > 0 or (job.end is not None and job.end != "failed"):
            counts["total"] = len(job.bodies)
        if job.end is not None and job.end != "failed":
            counts["completed"] = sum(row.status == "succeeded" for row in job.rows)
            counts["failed"] = len(job.rows) - counts["completed"]
        errors = None
        if job.end == "failed":
            errors = {"object": "list", "data": job.validation_errors}

        def at(event: str) -> int | None:
            return int(t[event]) if event in t else None

        return {
            "id": job.id,
            "object": "batch",
            "endpoint": job.endpoint,
            "errors": errors,
            "input_file_id": job.input_file_id,
            "completion_window": job.completion_window,
            "status": status,
            "output_file_id": job.output_file_id,
            "error_file_id": job.error_file_id,
            "created_at": int(job.created),
            "in_progress_at": None if job.end == "failed" else at("in_progress"),
            "expires_at": int(job.created) + _DAY,
            "finalizing_at": at("finalizing") if job.end in (None, "completed") else None,
            "completed_at": at("completed"),
            "failed_at": at("failed"),
            "expired_at": at("expired"),
            "cancelling_at": at("cancelling"),
            "cancelled_at": at("cancelled"),
            "request_counts": counts,
            "metadata": job.metadata,
        }

    def anthropic_batch(self, job: Job) -> Json:
        ended = job.end is not None
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        if ended:
            for row in job.rows:
                counts[row.status] += 1
        else:
            counts["processing"] = len(job.bodies)
        status = "ended" if ended else "canceling" if job.cancel_requested else "in_progress"
        return {
            "id": job.id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": counts,
            "ended_at": rfc3339(job.times[job.end]) if job.end is not None else None,
            "created_at": rfc3339(job.created),
            "expires_at": rfc3339(job.created + _DAY),
            "cancel_initiated_at": (
                rfc3339(job.times["cancelling"]) if "cancelling" in job.times else None
            ),
            "results_url": (f"{self.url}/v1/messages/batches/{job.id}/results" if ended else None),
            "archived_at": None,
        }

    def gemini_operation(self, job: Job) -> Json:
        """An Operation in proto3 JSON: int64 counts as strings, zeros and false left out."""
        states = {
            "completed": "BATCH_STATE_SUCCEEDED",
            "expired": "BATCH_STATE_EXPIRED",
            "cancelled": "BATCH_STATE_CANCELLED",
            "failed": "BATCH_STATE_FAILED",
        }
        if job.end is not None:
            state = states[job.end]
        else:
            state = "BATCH_STATE_PENDING" if job.polls == 0 else "BATCH_STATE_RUNNING"
        stats = {"requestCount": len(job.bodies)}
        if job.end is None:
            stats["pendingRequestCount"] = len(job.bodies)
        else:
            stats["successfulRequestCount"] = sum(r.status == "succeeded" for r in job.rows)
            stats["failedRequestCount"] = sum(r.status == "errored" for r in job.rows)
        metadata: Json = {"@type": _GEMINI_BATCH, "model": job.model}
        if job.display_name:
            metadata["displayName"] = job.display_name
        if job.input_file is not None:
            metadata["inputConfig"] = {"fileName": job.input_file}
        output = self._gemini_output(job)
        if output is not None:
            metadata["output"] = output
        updated = max([job.created, *job.times.values()])
        metadata["createTime"] = rfc3339(job.created)
        if job.end is not None:
            metadata["endTime"] = rfc3339(job.times[job.end])
        metadata["updateTime"] = rfc3339(updated)
        metadata["batchStats"] = {key: str(value) for key, value in stats.items() if value}
        metadata["state"] = state
        metadata["name"] = job.id
        operation: Json = {"name": job.id, "metadata": metadata}
        if job.end is not None:
            operation["done"] = True
        if output is not None:
            operation["response"] = {"@type": _GEMINI_OUTPUT, **output}
        return operation

    def _gemini_output(self, job: Job) -> Json | None:
        if job.end not in ("completed", "expired"):
            return None
        if job.responses_file is not None:
            return {"responsesFile": job.responses_file}
        responses: list[Json] = []
        for index, row in enumerate(job.rows):
            if row.outcome is None:
                continue
            entry: Json = (
                {"response": row.outcome.payload}
                if row.outcome.payload is not None
                else {"error": gemini_status(row.outcome)}
            )
            metadata = job.inline_metadata[index]
            if metadata is not None:
                entry["metadata"] = metadata
            responses.append(entry)
        return {"inlinedResponses": {"inlinedResponses": responses}}

    def anthropic_results(self, job: Job) -> bytes:
        lines: list[Json] = []
        for row in shuffled(job.rows, job.id):
            result: Json = {"type": row.status}
            if row.outcome is not None and row.outcome.payload is not None:
                result["message"] = row.outcome.payload
            elif row.outcome is not None:
                kind = {
                    "invalid": "invalid_request_error",
                    "overloaded": "overloaded_error",
                    "server": "api_error",
                }[row.outcome.kind]
                error = {"type": kind, "message": row.outcome.message}
                result["error"] = {"type": "error", "error": error}
            lines.append({"custom_id": row.key, "result": result})
        return jsonl(lines)


# The request bodies.


def _shape_problem(family: str, body: Json) -> str | None:
    """What the real endpoint would refuse in the body's shape (the fake does not stream)."""
    required = {
        "openai-chat": ("model", "messages"),
        "openai-responses": ("model", "input"),
        "anthropic": ("model", "max_tokens", "messages"),
        "gemini": ("contents",),
    }[family]
    for name in required:
        if name not in body:
            return f"Missing required parameter: '{name}'."
    if body.get("stream"):
        return "Streaming is not supported here."
    return None


def _chat_forced(body: Json) -> tuple[str, bool] | None:
    """The function a Chat Completions body forces, and whether it names it."""
    tools = [tool for tool in body.get("tools") or [] if tool.get("type") == "function"]
    choice = body.get("tool_choice")
    if not tools:
        return None
    if isinstance(choice, dict) and choice.get("type") == "function":
        return str(choice["function"]["name"]), True
    if choice == "required":
        return str(tools[0]["function"]["name"]), False
    return None


def _responses_forced(body: Json) -> str | None:
    tools = [tool for tool in body.get("tools") or [] if tool.get("type") == "function"]
    choice = body.get("tool_choice")
    if not tools:
        return None
    if isinstance(choice, dict) and choice.get("type") == "function":
        return str(choice["name"])
    if choice == "required":
        return str(tools[0]["name"])
    return None


def _anthropic_forced(body: Json) -> str | None:
    choice = body.get("tool_choice")
    if not isinstance(choice, dict):
        return None
    if choice.get("type") == "tool":
        return str(choice["name"])
    tools = body.get("tools") or []
    if choice.get("type") == "any" and tools:
        return str(tools[0]["name"])
    return None


def _camel(data: Any, name: str) -> Any:
    """A field of a Google request, which may be spelt camelCase or snake_case."""
    if not isinstance(data, dict):
        return None
    snake = re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)
    return data.get(name, data.get(snake))


def _gemini_forced(body: Json) -> str | None:
    config = _camel(_camel(body, "toolConfig"), "functionCallingConfig")
    if _camel(config, "mode") != "ANY":
        return None
    allowed = _camel(config, "allowedFunctionNames") or []
    if allowed:
        return str(allowed[0])
    for tool in body.get("tools") or []:
        for declaration in _camel(tool, "functionDeclarations") or []:
            return str(declaration["name"])
    return None


# Errors and small helpers.


def openai_error(outcome: Outcome) -> tuple[int, Json]:
    status = 400 if outcome.kind == "invalid" else 500
    kind = "invalid_request_error" if status == 400 else "server_error"
    return status, openai_error_body(outcome.message, kind)


def openai_error_body(message: str, kind: str = "invalid_request_error") -> Json:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def anthropic_error_body(message: str, kind: str = "invalid_request_error") -> Json:
    return {"type": "error", "error": {"type": kind, "message": message}}


def gemini_status(outcome: Outcome) -> Json:
    if outcome.kind == "invalid":
        return {"code": 400, "message": outcome.message, "status": "INVALID_ARGUMENT"}
    return {"code": 500, "message": outcome.message, "status": "INTERNAL"}


def gemini_error_body(code: int, message: str, status: str) -> Json:
    return {"error": {"code": code, "message": message, "status": status}}


def jsonl(lines: list[Json]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def rfc3339(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def shuffled(rows: list[Row], seed: str) -> list[Row]:
    """The rows in an order of their own, the same for the same job, never submission's."""
    order = list(rows)
    random.Random(seed).shuffle(order)
    if len(order) > 1 and order == rows:
        order = order[1:] + order[:1]
    return order


def parse_multipart(content_type: str, data: bytes) -> dict[str, tuple[str | None, bytes]]:
    """The fields of a multipart/form-data body: name -> (filename, bytes)."""
    header = Message()
    header["content-type"] = content_type
    boundary = header.get_param("boundary")
    if header.get_content_type() != "multipart/form-data" or not isinstance(boundary, str):
        raise ValueError("not multipart/form-data with a boundary")
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in data.split(b"--" + boundary.encode())[1:]:
        if part.startswith(b"--"):
            break
        head, sep, content = part.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        if not sep:
            raise ValueError("a part without headers")
        headers = HeaderParser().parsestr(head.decode("utf-8", "replace"))
        name = headers.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            raise ValueError("a part without a name")
        fields[name] = (headers.get_filename(), content.removesuffix(b"\r\n"))
    return fields


def _jsonl_objects(data: bytes) -> list[tuple[int, Any]]:
    """(line number from 1, parsed value or None when the line is no JSON)."""
    parsed: list[tuple[int, Any]] = []
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            parsed.append((number, json.loads(line)))
        except ValueError:
            parsed.append((number, None))
    return parsed


class _Reply(Exception):
    """Ends a request with this answer."""

    def __init__(self, status: int, payload: Json) -> None:
        super().__init__(status)
        self.status = status
        self.payload = payload


Route = tuple[str, re.Pattern[str], str]
_ROUTES: list[Route] = [
    (method, re.compile(f"^{pattern}$"), name)
    for method, pattern, name in [
        ("POST", r"/v1/chat/completions", "live_openai_chat"),
        ("POST", r"/v1/responses", "live_openai_responses"),
        ("POST", r"/v1/messages", "live_anthropic"),
        ("POST", r"/v1beta/models/([^/:]+):generateContent", "live_gemini"),
        ("POST", r"/v1/files", "openai_upload"),
        ("GET", r"/v1/files", "openai_files"),
        ("GET", r"/v1/files/([^/]+)", "openai_file"),
        ("GET", r"/v1/files/([^/]+)/content", "openai_file_content"),
        ("DELETE", r"/v1/files/([^/]+)", "openai_file_delete"),
        ("POST", r"/v1/batches", "openai_create"),
        ("GET", r"/v1/batches", "openai_list"),
        ("GET", r"/v1/batches/([^/]+)", "openai_get"),
        ("POST", r"/v1/batches/([^/]+)/cancel", "openai_cancel"),
        ("POST", r"/v1/messages/batches", "anthropic_create"),
        ("GET", r"/v1/messages/batches", "anthropic_list"),
        ("GET", r"/v1/messages/batches/([^/]+)", "anthropic_get"),
        ("POST", r"/v1/messages/batches/([^/]+)/cancel", "anthropic_cancel"),
        ("GET", r"/v1/messages/batches/([^/]+)/results", "anthropic_results"),
        ("POST", r"/v1beta/models/([^/:]+):batchGenerateContent", "gemini_create"),
        ("GET", r"/v1beta/batches", "gemini_list"),
        ("GET", r"/v1beta/batches/([^/:]+)", "gemini_get"),
        ("POST", r"/v1beta/batches/([^/:]+):cancel", "gemini_cancel"),
        ("POST", r"/upload/v1beta/files", "gemini_upload"),
        ("GET", r"/v1beta/files", "gemini_files"),
        ("GET", r"/v1beta/files/([^/:]+)", "gemini_file"),
        ("DELETE", r"/v1beta/files/([^/:]+)", "gemini_file_delete"),
        ("GET", r"/download/v1beta/files/([^/:]+):download", "gemini_download"),
    ]
]


class _Handler(ReplyHandler):
    server: ProviderBatchServer
    query: dict[str, str]
    """The query string's parameters (the last value of each)."""
    provider: str
    """Whose route this is: "openai", "anthropic" or "gemini" (the form of its errors)."""

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # Plumbing.

    def _dispatch(self, method: str) -> None:
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        self.query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        self.provider = (
            "anthropic"
            if path.startswith("/v1/messages")
            else "openai"
            if path.startswith("/v1/")
            else "gemini"
        )
        data = self._read()
        for verb, pattern, name in _ROUTES:
            found = pattern.match(path)
            if found is None or verb != method:
                continue
            handler: Callable[..., None] = getattr(self, name)
            try:
                self._authorize(name)
                handler(data, *found.groups())
            except _Reply as reply:
                self.send_json(reply.status, reply.payload)
            return
        self.send_json(404, {"error": {"message": f"No route for {method} {path}."}})

    def _read(self) -> bytes:
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def _fail(self, status: int, message: str, code: str = "") -> _Reply:
        """The provider's error body for this status."""
        if self.provider == "openai":
            kind = "server_error" if status >= 500 else "invalid_request_error"
            return _Reply(status, openai_error_body(message, kind))
        if self.provider == "anthropic":
            kinds = {401: "authentication_error", 404: "not_found_error", 429: "rate_limit_error"}
            kinds[529] = "overloaded_error"
            default = "api_error" if status >= 500 else "invalid_request_error"
            return _Reply(status, anthropic_error_body(message, kinds.get(status, default)))
        statuses = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND"}
        return _Reply(
            status, gemini_error_body(status, message, code or statuses.get(status, "INTERNAL"))
        )

    def _authorize(self, route: str) -> None:
        if self.provider == "openai":
            if not (self.headers.get("authorization") or "").startswith("Bearer "):
                raise self._fail(401, "You didn't provide an API key (Authorization: Bearer).")
        elif self.provider == "anthropic":
            if not self.headers.get("x-api-key"):
                raise self._fail(401, "x-api-key header is required")
            if not self.headers.get("anthropic-version"):
                raise self._fail(400, "anthropic-version: header is required")
        elif route == "gemini_upload" and "upload_id" in self.query:
            return  # the upload URL is its own credential
        elif not (self.headers.get("x-goog-api-key") or self.query.get("key")):
            raise self._fail(403, "Method doesn't allow unregistered callers (no API key).")

    def _json(self, data: bytes) -> Any:
        try:
            return json.loads(data or b"null")
        except ValueError:
            raise self._fail(400, "The request body is not valid JSON.") from None

    def _object(self, data: bytes) -> Json:
        body = self._json(data)
        if not isinstance(body, dict):
            raise self._fail(400, "The request body must be a JSON object.")
        return body

    def _live(self, family: str, data: bytes, model: str = "") -> None:
        body = self._json(data)
        with self.server.lock:
            outcome = self.server.answer(family, body, batch=False, model=model)
        if outcome.payload is not None:
            self.send_json(200, outcome.payload)
        elif self.provider == "anthropic" and outcome.kind == "overloaded":
            raise self._fail(529, outcome.message)
        else:
            raise self._fail(400 if outcome.kind == "invalid" else 500, outcome.message)

    def _page(self, items: list[Any], default: int = 20) -> tuple[list[Any], bool, int]:
        limit = int(self.query.get("limit") or self.query.get("pageSize") or default)
        return items[:limit], len(items) > limit, limit

    # Live endpoints.

    def live_openai_chat(self, data: bytes) -> None:
        self._live("openai-chat", data)

    def live_openai_responses(self, data: bytes) -> None:
        self._live("openai-responses", data)

    def live_anthropic(self, data: bytes) -> None:
        self._live("anthropic", data)

    def live_gemini(self, data: bytes, model: str) -> None:
        self._live("gemini", data, model)

    # OpenAI: files and batches.

    def openai_upload(self, data: bytes) -> None:
        try:
            fields = parse_multipart(self.headers.get("content-type") or "", data)
        except ValueError as error:
            raise self._fail(400, f"Expected multipart/form-data: {error}.") from None
        purpose = fields.get("purpose", (None, b""))[1].decode()
        if purpose != "batch":
            raise self._fail(400, f"Invalid value for 'purpose': {purpose!r}; use 'batch'.")
        if "file" not in fields:
            raise self._fail(400, "Missing required parameter: 'file'.")
        filename, content = fields["file"]
        with self.server.lock:
            stored = self.server.store(
                StoredFile(
                    self.server.new_id("file-", 22),
                    content,
                    filename or "upload.jsonl",
                    "batch",
                    time.time(),
                )
            )
        self.send_json(200, _openai_file(stored))

    def _openai_stored(self, file_id: str) -> StoredFile:
        stored = self.server.files.get(file_id)
        if stored is None or not file_id.startswith("file-"):
            raise self._fail(404, f"No such File object: {file_id}")
        return stored

    def openai_files(self, data: bytes) -> None:
        """The files, newest first (`order=asc`: oldest first), of one `purpose` if asked;
        paged by `limit` (default 10,000) and `after` (a file's id)."""
        with self.server.lock:
            stored = [
                each
                for each in self.server.files.values()
                if each.id.startswith("file-") and self.query.get("purpose") in (None, each.purpose)
            ]
            stored.sort(key=lambda each: each.created, reverse=self.query.get("order") != "asc")
            after = self.query.get("after")
            if after is not None:
                ids = [each.id for each in stored]
                stored = stored[ids.index(after) + 1 :] if after in ids else []
            page, more, _ = self._page(stored, default=10_000)
            views = [_openai_file(each) for each in page]
        first, last = (views[0]["id"], views[-1]["id"]) if views else (None, None)
        payload = {"object": "list", "data": views, "first_id": first, "last_id": last}
        self.send_json(200, {**payload, "has_more": more})

    def openai_file(self, data: bytes, file_id: str) -> None:
        with self.server.lock:
            stored = self._openai_stored(file_id)
        self.send_json(200, _openai_file(stored))

    def openai_file_content(self, data: bytes, file_id: str) -> None:
        with self.server.lock:
            stored = self._openai_stored(file_id)
            if stored.job_id is not None:
                self.server.result_downloads[stored.job_id] += 1
        self.send_body(200, {"content-type": "application/octet-stream"}, stored.data)

    def openai_file_delete(self, data: bytes, file_id: str) -> None:
        with self.server.lock:
            stored = self._openai_stored(file_id)
            del self.server.files[stored.id]
            self.server.deleted.append(stored.id)
        self.send_json(200, {"id": stored.id, "object": "file", "deleted": True})

    def openai_create(self, data: bytes) -> None:
        body = self._object(data)
        endpoint = body.get("endpoint")
        if endpoint not in _OPENAI_ENDPOINTS:
            raise self._fail(400, f"Invalid 'endpoint': {endpoint!r} is not supported here.")
        if body.get("completion_window") != "24h":
            raise self._fail(400, "Invalid 'completion_window': only '24h' is supported.")
        with self.server.lock:
            stored = self.server.files.get(str(body.get("input_file_id")))
            if stored is None or stored.purpose != "batch":
                raise self._fail(400, f"Invalid 'input_file_id': {body.get('input_file_id')!r}.")
            lines = _jsonl_objects(stored.data)
            requests: list[Any] = []
            keys: list[str] = []
            bodies: list[Any] = []
            problems: list[Json] = []
            seen: set[str] = set()
            for number, line in lines:
                problem = _openai_line_problem(line, endpoint, seen)
                if problem is not None:
                    problems.append({**problem, "line": number})
                if not isinstance(line, dict):
                    continue
                requests.append(line)
                if problem is None:
                    seen.add(line["custom_id"])
                    keys.append(line["custom_id"])
                    bodies.append(line["body"])
            if not lines:
                problems.append({"code": "empty_file", "message": "The file has no requests."})
            job = self.server.add_job(
                Job(
                    provider="openai",
                    family=_OPENAI_ENDPOINTS[endpoint],
                    id=self.server.new_id("batch_"),
                    requests=requests,
                    keys=[] if problems else keys,
                    bodies=[] if problems else bodies,
                    polls_to_finish=self.server.polls_to_finish,
                    expire=False,
                    created=time.time(),
                    endpoint=endpoint,
                    input_file_id=stored.id,
                    metadata=body.get("metadata"),
                    validation_errors=[{"param": None, **p} for p in problems],
                )
            )
            view = self.server.openai_batch(job)
        self.send_json(200, view)

    def _openai_job(self, batch_id: str) -> Job:
        job = self.server.job(batch_id)
        if job is None or job.provider != "openai":
            raise self._fail(404, f"No batch found with id '{batch_id}'.")
        return job

    def openai_get(self, data: bytes, batch_id: str) -> None:
        with self.server.lock:
            job = self._openai_job(batch_id)
            self.server.step(job)
            view = self.server.openai_batch(job)
        self.send_json(200, view)

    def openai_cancel(self, data: bytes, batch_id: str) -> None:
        with self.server.lock:
            job = self._openai_job(batch_id)
            if job.end is not None:
                raise self._fail(400, f"Cannot cancel a batch with status '{job.end}'.")
            if not job.cancel_requested:
                job.cancel_requested = True
                job.times["cancelling"] = time.time()
            view = self.server.openai_batch(job)
        self.send_json(200, view)

    def openai_list(self, data: bytes) -> None:
        with self.server.lock:
            jobs = self.server.jobs_of("openai")[::-1]
            after = self.query.get("after")
            if after is not None:
                ids = [job.id for job in jobs]
                jobs = jobs[ids.index(after) + 1 :] if after in ids else []
            page, more, _ = self._page(jobs)
            views = [self.server.openai_batch(job) for job in page]
        first, last = (views[0]["id"], views[-1]["id"]) if views else (None, None)
        payload = {"object": "list", "data": views, "first_id": first, "last_id": last}
        self.send_json(200, {**payload, "has_more": more})

    # Anthropic: message batches.

    def anthropic_create(self, data: bytes) -> None:
        body = self._object(data)
        entries = body.get("requests")
        if not isinstance(entries, list) or not entries:
            raise self._fail(400, "requests: Field required (a non-empty list).")
        seen: set[str] = set()
        for index, entry in enumerate(entries):
            custom_id = entry.get("custom_id") if isinstance(entry, dict) else None
            if not isinstance(custom_id, str) or not _ANTHROPIC_ID.match(custom_id):
                raise self._fail(
                    400, f"requests.{index}.custom_id: String should match ^[a-zA-Z0-9_-]{{1,64}}$"
                )
            if custom_id in seen:
                raise self._fail(400, f"Duplicate custom_id found in requests: {custom_id}")
            seen.add(custom_id)
            params = entry.get("params")
            if not isinstance(params, dict):
                raise self._fail(400, f"requests.{index}.params: Field required")
            if params.get("stream"):
                raise self._fail(400, f"requests.{index}.params.stream: batches do not stream")
        with self.server.lock:
            job = self.server.add_job(
                Job(
                    provider="anthropic",
                    family="anthropic",
                    id=self.server.new_id("msgbatch_"),
                    requests=entries,
                    keys=[entry["custom_id"] for entry in entries],
                    bodies=[entry["params"] for entry in entries],
                    polls_to_finish=self.server.polls_to_finish,
                    expire=False,
                    created=time.time(),
                )
            )
            view = self.server.anthropic_batch(job)
        self.send_json(200, view)

    def _anthropic_job(self, batch_id: str) -> Job:
        job = self.server.job(batch_id)
        if job is None or job.provider != "anthropic":
            raise self._fail(404, f"No message batch with id {batch_id}")
        return job

    def anthropic_get(self, data: bytes, batch_id: str) -> None:
        with self.server.lock:
            job = self._anthropic_job(batch_id)
            self.server.step(job)
            view = self.server.anthropic_batch(job)
        self.send_json(200, view)

    def anthropic_cancel(self, data: bytes, batch_id: str) -> None:
        with self.server.lock:
            job = self._anthropic_job(batch_id)
            if job.end is not None:
                raise self._fail(400, f"Batch {batch_id} has ended and cannot be canceled.")
            if not job.cancel_requested:
                job.cancel_requested = True
                job.times["cancelling"] = time.time()
            view = self.server.anthropic_batch(job)
        self.send_json(200, view)

    def anthropic_results(self, data: bytes, batch_id: str) -> None:
        with self.server.lock:
            job = self._anthropic_job(batch_id)
            if job.end is None:
                raise self._fail(400, f"Batch {batch_id} has not ended; no results yet.")
            self.server.result_downloads[job.id] += 1
            content = self.server.anthropic_results(job)
        self.send_body(200, {"content-type": "application/binary"}, content)

    def anthropic_list(self, data: bytes) -> None:
        with self.server.lock:
            jobs = self.server.jobs_of("anthropic")[::-1]
            after = self.query.get("after_id")
            if after is not None:
                ids = [job.id for job in jobs]
                jobs = jobs[ids.index(after) + 1 :] if after in ids else []
            page, more, _ = self._page(jobs)
            views = [self.server.anthropic_batch(job) for job in page]
        first, last = (views[0]["id"], views[-1]["id"]) if views else (None, None)
        self.send_json(200, {"data": views, "has_more": more, "first_id": first, "last_id": last})

    # Gemini: batches and files.

    def gemini_create(self, data: bytes, model: str) -> None:
        batch = _camel(self._object(data), "batch")
        if not isinstance(batch, dict):
            raise self._fail(400, "batch: required field missing.")
        config = _camel(batch, "inputConfig")
        inline = _camel(_camel(config, "requests"), "requests")
        file_name = _camel(config, "fileName")
        with self.server.lock:
            if isinstance(inline, list):
                if not all(
                    isinstance(e, dict) and isinstance(e.get("request"), dict) for e in inline
                ):
                    raise self._fail(400, "Every inlined request needs a `request` object.")
                requests = inline
                keys = [str(_camel(e.get("metadata"), "key") or i) for i, e in enumerate(inline)]
                bodies = [e["request"] for e in inline]
                inline_metadata = [e.get("metadata") for e in inline]
            elif isinstance(file_name, str):
                stored = self.server.files.get(file_name)
                if stored is None:
                    raise self._fail(400, f"File {file_name} not found.")
                requests = [line for _, line in _jsonl_objects(stored.data)]
                if not requests or not all(
                    isinstance(line, dict)
                    and isinstance(line.get("key"), str)
                    and isinstance(line.get("request"), dict)
                    for line in requests
                ):
                    raise self._fail(400, 'Each input line must be {"key", "request"}.')
                keys = [line["key"] for line in requests]
                bodies = [line["request"] for line in requests]
                inline_metadata = []
            else:
                raise self._fail(400, "batch.input_config: requests or file_name is required.")
            job = self.server.add_job(
                Job(
                    provider="gemini",
                    family="gemini",
                    id=self.server.new_id("batches/", 36),
                    requests=requests,
                    keys=keys,
                    bodies=bodies,
                    polls_to_finish=self.server.polls_to_finish,
                    expire=False,
                    created=time.time(),
                    model=f"models/{model}",
                    display_name=_camel(batch, "displayName"),
                    input_file=file_name if not isinstance(inline, list) else None,
                    inline_metadata=inline_metadata,
                )
            )
            view = self.server.gemini_operation(job)
        self.send_json(200, view)

    def _gemini_job(self, batch_id: str) -> Job:
        job = self.server.job(f"batches/{batch_id}")
        if job is None:
            raise self._fail(404, f"Batch batches/{batch_id} not found.")
        return job

    def gemini_get(self, data: bytes, batch_id: str) -> None:
        with self.server.lock:
            job = self._gemini_job(batch_id)
            self.server.step(job)
            view = self.server.gemini_operation(job)
        self.send_json(200, view)

    def gemini_cancel(self, data: bytes, batch_id: str) -> None:
        with self.server.lock:
            job = self._gemini_job(batch_id)
            if job.end is not None:
                raise self._fail(400, "The batch has already finished.", "FAILED_PRECONDITION")
            if not job.cancel_requested:
                job.cancel_requested = True
                job.times["cancelling"] = time.time()
        self.send_json(200, {})

    def gemini_list(self, data: bytes) -> None:
        with self.server.lock:
            jobs = self.server.jobs_of("gemini")[::-1]
            token = self.query.get("pageToken") or ""
            start = int(token.removeprefix("page-")) if token.startswith("page-") else 0
            page, more, limit = self._page(jobs[start:], default=10)
            views = [self.server.gemini_operation(job) for job in page]
        payload: Json = {"operations": views}
        if more:
            payload["nextPageToken"] = f"page-{start + limit}"
        self.send_json(200, payload)

    def gemini_upload(self, data: bytes) -> None:
        command = (self.headers.get("x-goog-upload-command") or "").replace(" ", "").split(",")
        upload_id = self.query.get("upload_id")
        if upload_id is None:
            if (self.headers.get("x-goog-upload-protocol") or "").lower() != "resumable":
                raise self._fail(400, "Only X-Goog-Upload-Protocol: resumable is supported.")
            if command != ["start"]:
                raise self._fail(400, "The first request must be X-Goog-Upload-Command: start.")
            length = self.headers.get("x-goog-upload-header-content-length")
            if length is None or not length.isdigit():
                raise self._fail(400, "X-Goog-Upload-Header-Content-Length is required.")
            body = self._json(data) if data else {}
            display = _camel(_camel(body, "file"), "displayName")
            mime = self.headers.get("x-goog-upload-header-content-type") or "application/jsonl"
            with self.server.lock:
                token = self.server.new_id("AU", 40)
                self.server.uploads[token] = _Upload(display, int(length), mime)
            url = (
                f"{self.server.url}/upload/v1beta/files?upload_id={token}&upload_protocol=resumable"
            )
            headers = {"x-goog-upload-url": url, "x-goog-upload-status": "active"}
            self.send_body(200, {**headers, "content-type": "text/plain"}, b"")
            return
        if command != ["upload", "finalize"]:
            raise self._fail(400, "Expected X-Goog-Upload-Command: upload, finalize.")
        if self.headers.get("x-goog-upload-offset") != "0":
            raise self._fail(400, "X-Goog-Upload-Offset must be 0 for a single upload.")
        with self.server.lock:
            upload = self.server.uploads.pop(upload_id, None)
            if upload is None:
                raise self._fail(404, "No such upload session.")
            if len(data) != upload.length:
                raise self._fail(
                    400, f"Uploaded {len(data)} bytes; the session declared {upload.length}."
                )
            name = self.server.new_id("files/", 12)
            stored = self.server.store(
                StoredFile(
                    name, data, upload.display_name or "", "batch", time.time(), upload.mime_type
                )
            )
            view = self._gemini_file_view(stored)
        self.send_json(200, {"file": view}, {"x-goog-upload-status": "final"})

    def _gemini_file_view(self, stored: StoredFile) -> Json:
        view: Json = {"name": stored.id}
        if stored.filename:
            view["displayName"] = stored.filename
        return {
            **view,
            "mimeType": stored.mime_type,
            "sizeBytes": str(len(stored.data)),
            "createTime": rfc3339(stored.created),
            "updateTime": rfc3339(stored.created),
            "expirationTime": rfc3339(stored.created + 2 * _DAY),
            "sha256Hash": hashlib.sha256(stored.data).hexdigest(),
            "uri": f"{self.server.url}/v1beta/{stored.id}",
            "state": "ACTIVE",
            "source": "UPLOADED",
        }

    def gemini_files(self, data: bytes) -> None:
        """The files in the order they were stored (the API promises none), paged by
        `pageSize` (default 10, at most 100) and `pageToken`."""
        if int(self.query.get("pageSize") or 10) > 100:
            raise self._fail(400, "pageSize must be at most 100.")
        with self.server.lock:
            stored = [each for each in self.server.files.values() if each.id.startswith("files/")]
            token = self.query.get("pageToken") or ""
            start = int(token.removeprefix("page-")) if token.startswith("page-") else 0
            page, more, limit = self._page(stored[start:], default=10)
            views = [self._gemini_file_view(each) for each in page]
        payload: Json = {"files": views} if views else {}  # an empty list left out
        if more:
            payload["nextPageToken"] = f"page-{start + limit}"
        self.send_json(200, payload)

    def _gemini_stored(self, file_id: str) -> StoredFile:
        stored = self.server.files.get(f"files/{file_id}")
        if stored is None:
            raise self._fail(404, f"File files/{file_id} not found.")
        return stored

    def gemini_file(self, data: bytes, file_id: str) -> None:
        with self.server.lock:
            view = self._gemini_file_view(self._gemini_stored(file_id))
        self.send_json(200, view)

    def gemini_file_delete(self, data: bytes, file_id: str) -> None:
        with self.server.lock:
            stored = self._gemini_stored(file_id)
            del self.server.files[stored.id]
            self.server.deleted.append(stored.id)
        self.send_json(200, {})

    def gemini_download(self, data: bytes, file_id: str) -> None:
        if self.query.get("alt") != "media":
            raise self._fail(400, "Downloads need ?alt=media.")
        with self.server.lock:
            stored = self._gemini_stored(file_id)
            if stored.job_id is not None:
                self.server.result_downloads[stored.job_id] += 1
        self.send_body(200, {"content-type": stored.mime_type}, stored.data)


def _openai_line_problem(line: Any, endpoint: str, seen: set[str]) -> Json | None:
    """Why the batch's validation rejects this input line, as an `errors.data` entry."""
    if not isinstance(line, dict):
        return {"code": "invalid_json", "message": "This line is not a valid JSON object."}
    custom_id = line.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return {"code": "missing_required_parameter", "message": "custom_id is required."}
    if custom_id in seen:
        return {
            "code": "duplicate_custom_id",
            "message": "The custom_id for this request is a duplicate of another request. "
            "The custom_id parameter must be unique for each request in a batch.",
            "param": "custom_id",
        }
    if line.get("method") != "POST":
        return {"code": "invalid_method", "message": "Only POST is supported.", "param": "method"}
    if line.get("url") != endpoint:
        return {
            "code": "mismatched_url",
            "message": f"The url {line.get('url')!r} does not match the batch's endpoint "
            f"{endpoint!r}.",
            "param": "url",
        }
    if not isinstance(line.get("body"), dict):
        return {"code": "invalid_request", "message": "body must be an object.", "param": "body"}
    return None


def _openai_file(stored: StoredFile) -> Json:
    return {
        "id": stored.id,
        "object": "file",
        "bytes": len(stored.data),
        "created_at": int(stored.created),
        "expires_at": None,
        "filename": stored.filename,
        "purpose": stored.purpose,
        "status": "processed",
        "status_details": None,
    }


@pytest.fixture
def server() -> Iterator[ProviderBatchServer]:
    running = ProviderBatchServer().start()
    try:
        yield running
    finally:
        running.stop()


if __name__ == "__main__":
    server = ProviderBatchServer()
    print(server.url, flush=True)
    server.serve_forever()
