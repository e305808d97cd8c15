"""Extraction as a Ray Data step (`allama.ray`), on a local Ray instance this module starts.

The provider is an OpenAI-compatible server in this process (127.0.0.1), which the Ray
workers reach over the loopback: it answers each document by what the document says (valid
JSON, prose, JSON of the wrong shape, a 500, a 400). Every row must come back, the good ones
with their exact values, the bad ones with a log-safe error and their record, and the job
must not fail. Skipped without Ray (`pip install 'allama[ray]'`).
"""

from __future__ import annotations

import asyncio
import doctest
import functools
import gc
import json
import os
import re
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray.data", reason="the Ray integration needs ray[data]: allama[ray]")

import pyarrow as pa
import ray
from pydantic import BaseModel, ConfigDict

import allama
import allama.ray
from _replay_server import ReplayServer, ReplyHandler
from allama import ChatRequest
from allama.mock import MockProvider

TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent / "src"


class Invoice(BaseModel):
    number: str
    total: float


def document(index: int) -> str:
    """Rows 0-14 are good; the rest: prose, a wrong shape, a 500, a 400, and prose again."""
    kinds = {15: "PROSE", 16: "WRONG", 17: "BOOM", 18: "REJECT", 19: "PROSE"}
    kind = kinds.get(index, "GOOD")
    return f"{kind} invoice {index}: confidential customer text #{index}"


def expected(index: int) -> dict[str, Any]:
    return {"number": f"INV-{index:03d}", "total": index * 1.5}


# The server: answers by the document in the last user message.


class _Server(ReplayServer):
    pass


def _answer(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52},
    }


class _Handler(ReplyHandler):
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        with self.server.lock:
            self.server.seen.append((self.path, {}, body))
        text = str(body["messages"][-1]["content"])
        kind, _, rest = text.partition(" invoice ")
        index = int(rest.split(":")[0])
        if kind == "GOOD":
            self.send_json(200, _answer(json.dumps(expected(index))))
        elif kind == "PROSE":
            self.send_json(200, _answer("Sorry, I could not read that invoice."))
        elif kind == "WRONG":
            self.send_json(200, _answer(json.dumps({"number": index})))
        elif kind == "BOOM":
            error = {"message": f"upstream failed on: {text}", "type": "server_error"}
            self.send_json(500, {"error": error})
        else:
            error = {"message": f"rejected: {text}", "type": "invalid_request_error"}
            self.send_json(400, {"error": error})


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.seen, httpd.lock = [], threading.Lock()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def base_url(server: _Server) -> str:
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}/v1"


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """Ray on this machine with 2 CPUs; its workers import this module (for `Invoice`)."""
    if ray.is_initialized():
        pytest.skip("a Ray instance is already running in this process")
    # Workers started by `ray.init` inherit this environment, so they import this module
    # (the target type and the request function are pickled by reference to it).
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), str(SRC), before]))
    try:
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before
    yield
    ray.shutdown()


def _by_id(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {int(row["id"]): row for row in rows}


def test_every_row_comes_back_with_its_value_or_its_error_and_record(
    local_ray: None, server: _Server, base_url: str
) -> None:
    ds = ray.data.from_items([{"id": i, "text": document(i)} for i in range(20)])
    began = time.perf_counter()
    out = allama.ray.extract_dataset(
        ds,
        Invoice,
        provider="openai",
        provider_options={"api_key": "sk-test", "base_url": base_url},
        text_column="text",
        model="gpt-4o-mini",
        system="Extract the invoice.",
        concurrency=2,
        batch_size=4,
        max_attempts=2,
        backoff=0,
    )
    rows = _by_id(out.take_all())
    print(f"20 rows through 2 actors in {time.perf_counter() - began:.1f} s")

    assert sorted(rows) == list(range(20))
    for index in range(15):
        row = rows[index]
        assert row["text"] == document(index)  # the input columns are kept
        assert row["error"] is None
        assert json.loads(row["value"]) == expected(index)
        record = json.loads(row["record"])
        assert record["mode"] == "native" and record["passes"] == 1
        assert record["enforcement"] == "exact"
        assert record["usage"] == {"input_tokens": 40, "output_tokens": 12}

    for index in (15, 16, 19):  # output that is not an invoice: an extraction failure
        row = rows[index]
        assert row["value"] is None
        assert row["error"].startswith("extraction_parse: ")
        assert json.loads(row["record"])["passes"] == 1
    assert rows[17]["error"].startswith("server: status=500; message withheld (")
    assert rows[18]["error"].startswith("invalid_request: status=400; message withheld (")
    for index in (17, 18):  # a provider error carries the record of the passes before it
        assert rows[index]["value"] is None
        record = json.loads(rows[index]["record"])
        assert record["mode"] == "native" and record["passes"] == 0

    for row in rows.values():  # errors are log-safe: no document text, no model text
        error = row["error"] or ""
        assert "confidential" not in error and "Sorry" not in error
    with server.lock:
        paths = [path for path, _, _ in server.seen]
        sent = [str(body["messages"][-1]["content"]) for _, _, body in server.seen]
    assert paths.count("/v1/chat/completions") >= 20
    # The server error was tried again (`max_attempts=2`); the 400 and the answers were not.
    assert sent.count(document(17)) == 2 and sent.count(document(18)) == 1
    assert sent.count(document(15)) == 1


def build_request(row: dict[str, Any]) -> ChatRequest:
    """A request function, importable by the workers: it fails on a row without text."""
    return ChatRequest("gpt-4o-mini").user(row["text"].strip()).with_max_output_tokens(100)


def test_a_request_function_and_bad_rows_of_the_callers_own(local_ray: None, base_url: str) -> None:
    items: list[dict[str, Any]] = [{"text": document(1)}, {"text": None}, {"text": document(17)}]
    out = allama.ray.extract_dataset(
        ray.data.from_items(items),
        Invoice,
        provider="openai",
        provider_options={"api_key": "sk-test", "base_url": base_url},
        request=build_request,
        repair=True,
        backoff=0,
    )
    rows = out.take_all()
    assert [row["text"] for row in rows] == [item["text"] for item in items]
    assert json.loads(rows[0]["value"]) == expected(1)
    assert rows[1]["value"] is None and rows[1]["record"] is None
    # `None.strip()` raised: the row says so, without the exception's message.
    assert rows[1]["error"].startswith("invalid_row: the request function raised ")
    assert rows[2]["error"].startswith("server: status=500")
    # A column extraction adds fails the job before it starts, when the schema is known.
    with pytest.raises(ValueError, match=r"already has the column\(s\) \['value'\]"):
        allama.ray.extract_dataset(
            ray.data.from_items([{"text": "a", "value": 1}]),
            Invoice,
            provider="openai",
            provider_options={"api_key": "sk-test", "base_url": base_url},
            request=build_request,
        )
    # So does a text column no row has; the one it was meant to be is among those named.
    with pytest.raises(ValueError, match=r"no column `txt` \(its columns: `text`\)"):
        allama.ray.extract_dataset(
            ray.data.from_items([{"text": "a"}]),
            Invoice,
            provider="openai",
            provider_options={"api_key": "sk-test", "base_url": base_url},
            text_column="txt",
            model="gpt-4o-mini",
        )


def test_blocks_whose_column_types_differ_are_extracted(local_ray: None, base_url: str) -> None:
    # Ray cannot merge these blocks' schemas (an int `id`, then a text one; an int text)
    # without reading them, nor concatenate them into one batch: batches of a row each are
    # checked as they come.
    items: list[dict[str, Any]] = [{"id": 1, "text": document(1)}, {"id": "A-2", "text": 5}]
    out = allama.ray.extract_dataset(
        ray.data.from_items(items),
        Invoice,
        provider="openai",
        provider_options={"api_key": "sk-test", "base_url": base_url},
        text_column="text",
        model="gpt-4o-mini",
        backoff=0,
        batch_size=1,
    )
    rows = sorted(out.take_all(), key=lambda row: str(row["id"]))
    assert json.loads(rows[0]["value"]) == expected(1)
    assert rows[1]["value"] is None and rows[1]["error"].startswith("invalid_row: ")


def test_blocks_that_cannot_be_joined_into_a_batch_are_refused_before_the_job(
    local_ray: None, base_url: str
) -> None:
    # Ray joins blocks into batches before the step sees them: a text in one block and an
    # int in another would fail the job at that batch, after earlier ones were paid for.
    items: list[dict[str, Any]] = [{"text": document(1)}] * 20 + [{"text": 5}] * 20
    options: dict[str, Any] = {
        "provider": "openai",
        "provider_options": {"api_key": "sk-test", "base_url": base_url},
        "text_column": "text",
        "model": "gpt-4o-mini",
    }
    with pytest.raises(ValueError, match="pass batch_size=1 to check each row alone"):
        allama.ray.extract_dataset(ray.data.from_items(items), Invoice, **options)
    # Whole blocks are never joined: taken.
    whole = allama.ray.extract_dataset(
        ray.data.from_items(items), Invoice, batch_size=None, **options
    )
    assert whole is not None


# Without a Ray instance: the callable itself, on a pyarrow table, with a scripted provider.


def test_the_callable_on_one_batch_without_ray() -> None:
    script = ['{"number": "A-1", "total": 2}', "Sorry, no invoice here."]
    extract = allama.ray.ExtractBatch(
        Invoice,
        provider=lambda: MockProvider(script),
        text_column="text",
        model="m",
        row_concurrency=2,
    )
    batch = pa.table({"id": [1, 2, 3, 4], "text": ["first", None, "third", "fourth"]})

    async def run() -> list[Any]:
        return [out async for out in extract(batch)]

    (out,) = asyncio.run(run())
    assert out.column_names == ["id", "text", "value", "error", "record"]
    first, second, third, fourth = out.to_pylist()
    assert first["value"] == '{"number":"A-1","total":2.0}' and first["error"] is None
    assert json.loads(first["record"])["passes"] == 1
    assert second == {
        "id": 2,
        "text": None,
        "value": None,
        "error": "invalid_row: column 'text' holds null, not text",
        "record": None,
    }
    assert third["value"] is None and third["error"].startswith("extraction_parse: ")
    assert "Sorry" not in third["error"]
    assert json.loads(third["record"])["passes"] == 1
    # Not an allama.Error (the script ran out), but allama's words: no record, no raise.
    assert fourth["value"] is None and fourth["record"] is None
    assert fourth["error"] == "MockScriptExhausted: mock: call 3 has no scripted answer"


def _run_batches(extract: allama.ray.ExtractBatch, *batches: pa.Table) -> list[dict[str, Any]]:
    """The rows of `batches` as one actor runs them, one after the other."""

    async def run() -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for batch in batches:
            rows.extend(row for out in [o async for o in extract(batch)] for row in out.to_pylist())
        return rows

    return asyncio.run(run())


def test_rate_limits_and_server_errors_are_tried_again() -> None:
    script: list[Any] = [
        allama.RateLimitedError("slow down").with_retry_after(0.01),
        allama.ServerError("overloaded").with_status(503),
        '{"number": "A-1", "total": 2}',
        allama.ServerError("down").with_status(500),
        allama.ServerError("down").with_status(500),
    ]
    mock = MockProvider(script)
    extract = allama.ray.ExtractBatch(
        Invoice,
        provider=lambda: mock,
        text_column="text",
        model="m",
        row_concurrency=1,
        max_attempts=2,
        backoff=0,
    )
    first, second = _run_batches(extract, pa.table({"text": ["one"]}), pa.table({"text": ["two"]}))
    # The 429 is not counted as a try: the 503 after it is the first, the answer the second.
    assert first["value"] == '{"number":"A-1","total":2.0}' and first["error"] is None
    assert "earlier_attempts" not in json.loads(first["record"])
    # Two server errors use up `max_attempts=2`: the row fails with the last one.
    assert second["value"] is None and second["error"].startswith("server: status=500; ")
    assert [request.messages[-1].text() for request in mock.requests] == ["one"] * 3 + ["two"] * 2
    assert extract._limiter is not None and extract._limiter.slowdowns == 1


def test_an_answer_paid_for_and_then_a_failure_keeps_both_records() -> None:
    failed = allama.ServerError("down").with_status(502)
    mock = MockProvider(["not json at all", failed, '{"number": "B-2", "total": 3}'])
    extract = allama.ray.ExtractBatch(
        Invoice,
        provider=lambda: mock,
        text_column="text",
        model="m",
        retries=1,
        backoff=0,
    )
    (row,) = _run_batches(extract, pa.table({"text": ["doc"]}))
    assert row["value"] == '{"number":"B-2","total":3.0}'
    record = json.loads(row["record"])
    # The first try paid for a pass (prose), then failed on its retry's server error.
    assert record["passes"] == 1
    assert [earlier["passes"] for earlier in record["earlier_attempts"]] == [1]


def test_a_refused_key_stops_the_actor_sending() -> None:
    mock = MockProvider([allama.AuthenticationError("bad key").with_status(401)])
    extract = allama.ray.ExtractBatch(
        Invoice, provider=lambda: mock, text_column="text", model="m", row_concurrency=1
    )
    rows = _run_batches(extract, pa.table({"text": ["a", "b"]}), pa.table({"text": ["c"]}))
    assert rows[0]["error"].startswith("authentication: status=401")
    assert [row["error"] for row in rows[1:]] == [
        "not_started: the provider refused the actor's key or account"
    ] * 2
    assert [row["record"] for row in rows[1:]] == [None, None]
    assert len(mock.requests) == 1


def test_retry_settings_are_checked() -> None:
    for bad, message in (
        ({"max_attempts": 0}, "max_attempts must be"),
        ({"backoff": -1}, "backoff must be"),
        ({"rpm": 0}, "rpm must be"),
        ({"tpm": float("nan")}, "tpm must be"),
    ):
        with pytest.raises(ValueError, match=message):
            allama.ray.ExtractBatch(
                Invoice, provider=lambda: MockProvider(), text_column="t", model="m", **bad
            )
        with pytest.raises(ValueError, match=message):
            allama.ray.extract_dataset(
                object(),  # type: ignore[arg-type]
                Invoice,
                provider="openai",
                text_column="t",
                model="m",
                **bad,
            )


class Blob(BaseModel):
    """Reads bytes as base64 but writes them as UTF-8: a value whose JSON cannot be made."""

    model_config = ConfigDict(val_json_bytes="base64")
    data: bytes


def test_a_batch_without_the_text_column_and_values_that_cannot_be_written() -> None:
    extract = allama.ray.ExtractBatch(
        Blob,
        provider=lambda: MockProvider(['{"data": "/w=="}']),
        text_column="text",
        model="m",
    )

    async def run(batch: pa.Table) -> list[Any]:
        return [out async for out in extract(batch)]

    # A block of rows that lack the column (Ray makes one from such dicts, and a name no
    # row has, when the schema is not known before the job): each row's error, which names
    # the columns the row has.
    (out,) = asyncio.run(run(pa.table({"id": [1, 2], "txt": ["a", "b"]})))
    assert (
        out.column("error").to_pylist()
        == ["invalid_row: no column 'text' (the row's: 'id', 'txt')"] * 2
    )
    assert out.column("record").to_pylist() == [None, None]
    # An empty text is not sent: a call would pay to read nothing.
    (out,) = asyncio.run(run(pa.table({"text": ["", " \n\t"]})))
    assert out.column("error").to_pylist() == ["invalid_row: column 'text' is empty"] * 2
    assert out.column("record").to_pylist() == [None, None]
    # Half a character cannot reach a pyarrow batch, but a row given as Python can hold it.
    assert extract._request("doc \ud800") == (
        "invalid_row: column 'text' holds half of a character (a lone surrogate), not text"
    )
    (out,) = asyncio.run(run(pa.table({"text": ["doc"]})))
    (paid,) = out.to_pylist()
    # Validated and paid for, but no JSON can be made of it: its record stays.
    assert paid["value"] is None and paid["error"].startswith("value_unstorable: ")
    assert json.loads(paid["record"])["passes"] == 1


def test_settings_are_checked_before_any_actor_starts() -> None:
    ds: Any = object()  # never reached
    with pytest.raises(TypeError, match="either text_column="):
        allama.ray.extract_dataset(ds, Invoice, provider="openai")
    with pytest.raises(TypeError, match="needs model="):
        allama.ray.extract_dataset(ds, Invoice, provider="openai", text_column="text")
    with pytest.raises(ValueError, match="unknown provider"):
        allama.ray.extract_dataset(ds, Invoice, provider="nope", text_column="t", model="m")
    with pytest.raises(TypeError, match="retries"):
        allama.ray.extract_dataset(
            ds,
            Invoice,
            provider="openai",
            text_column="t",
            model="m",
            retries="2",  # type: ignore[arg-type]
        )
    for bad, error in (
        ({"max_output_tokens": -1}, ValueError),
        ({"max_output_tokens": "100"}, ValueError),
        ({"temperature": "hot"}, ValueError),
        ({"system": 5}, TypeError),
        ({"prompt": 5}, TypeError),
    ):
        with pytest.raises(error):
            allama.ray.extract_dataset(
                ds, Invoice, provider="openai", text_column="t", model="m", **bad
            )


def test_the_pools_settings_and_the_dataset_are_checked_by_name() -> None:
    class Unread:
        """Stands in for a dataset: nothing of it is read before the settings are checked."""

        def map_batches(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("not reached")

    settings: dict[str, Any] = {"provider": "openai", "text_column": "t", "model": "m"}
    for bad, error, said in (
        ({"concurrency": True}, TypeError, "concurrency must be a number of actors"),
        ({"concurrency": 2.5}, TypeError, "concurrency must be a number of actors"),
        ({"concurrency": (3, 1)}, ValueError, "has its min above its max"),
        ({"batch_size": "16"}, TypeError, "batch_size must be a number of rows"),
        ({"num_cpus": -1}, ValueError, "num_cpus must be a number of CPUs, 0 or more"),
    ):
        with pytest.raises(error, match=re.escape(said)):
            allama.ray.extract_dataset(Unread(), Invoice, **settings, **bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=re.escape("ds must be a ray.data.Dataset, not list")):
        allama.ray.extract_dataset([{"t": "x"}], Invoice, **settings)  # type: ignore[arg-type]
    # What Ray takes is left to it: NumPy's integers, no upper bound, whole blocks, no CPU.
    import numpy as np

    for fine in (
        {"concurrency": np.int64(2), "batch_size": np.int64(4)},
        {"concurrency": (1, None), "batch_size": None, "num_cpus": 0},
    ):
        with pytest.raises(AssertionError, match="not reached"):
            allama.ray.extract_dataset(Unread(), Invoice, **settings, **fine)  # type: ignore[arg-type]


def test_a_key_in_the_providers_options_is_not_in_what_ray_writes_of_the_step(
    local_ray: None,
) -> None:
    from ray.data._internal.metadata_exporter import sanitize_for_struct

    key = "sk-never-written-1234"
    ds = allama.ray.extract_dataset(
        ray.data.from_items([{"text": "x"}]),
        Invoice,
        provider="openai",
        provider_options={"api_key": key, "base_url": "http://user:pw-secret@127.0.0.1:9/v1"},
        text_column="text",
        model="gpt-4o-mini",
    )
    written = str(sanitize_for_struct(ds._logical_plan.dag._get_args()))
    assert "provider_options" in written and "not shown" in written
    assert key not in written and "pw-secret" not in written


def test_import_allama_does_not_load_ray() -> None:
    code = "import sys, allama; print('ray' in sys.modules, 'allama.ray' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["False", "False"]


def test_docstring_examples() -> None:
    result = doctest.testmod(allama.ray, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_after_a_refusal_rows_sent_before_end_with_their_error_and_the_rest_are_not_sent() -> None:
    mock = MockProvider(
        [
            allama.ServerError("busy").with_status(503),  # row 0: waits to try again
            allama.AuthenticationError("bad key").with_status(401),  # row 1
        ]
    )
    extract = allama.ray.ExtractBatch(
        Invoice,
        provider=lambda: mock,
        text_column="text",
        model="m",
        row_concurrency=2,
        backoff=0.4,
    )
    first, second, third = _run_batches(extract, pa.table({"text": ["a", "b", "c"]}))
    # Row 0 was sent: it ends with the error it met, and its record, not as unsent.
    assert first["error"].startswith("server: status=503; ")
    assert json.loads(first["record"])["passes"] == 0
    assert second["error"].startswith("authentication: status=401")
    assert third["error"] == "not_started: the provider refused the actor's key or account"
    assert len(mock.requests) == 2


@pytest.mark.parametrize(
    ("backup", "said"),
    [
        (allama.AuthenticationError("bad key").with_status(401), "authentication: status=401"),
        (allama.NotFoundError("no such model").with_status(404), "not_found: status=404"),
        (allama.NetworkError("refused"), "network: "),
    ],
)
def test_a_failover_whose_backup_failed_for_every_row_goes_on_while_its_primary_may_serve(
    backup: allama.Error, said: str
) -> None:
    # The primary overloaded a moment, the backup refused the key, or has no such model,
    # or cannot be reached: the primary serves later rows, as in a batch run, rather than
    # the actor stopping for what only one provider met.
    from allama.wrappers import FailoverProvider

    primary = MockProvider(
        [allama.OverloadedError("busy").with_status(529), '{"number": "A-1", "total": 2}']
    )
    backup = MockProvider([backup])
    extract = allama.ray.ExtractBatch(
        Invoice,
        provider=lambda: FailoverProvider([primary, backup]),
        text_column="text",
        model="m",
        row_concurrency=1,
        max_attempts=1,
    )
    first, second = _run_batches(extract, pa.table({"text": ["a"]}), pa.table({"text": ["b"]}))
    assert first["error"].startswith(said)
    assert second["error"] is None
    assert json.loads(second["value"]) == {"number": "A-1", "total": 2.0}


def test_a_failover_whose_backup_met_its_rate_limit_sends_the_row_again_to_its_primary() -> None:
    # The failover moves on past a 429 not to be sent again as past a quota: the backup's
    # limit is its account's, and the primary, overloaded a moment, serves the row sent again.
    from allama.wrappers import FailoverProvider

    primary = MockProvider(
        [allama.OverloadedError("busy").with_status(529), '{"number": "A-1", "total": 2}']
    )
    backup = MockProvider([allama.RateLimitedError("limit reached").with_retryable(False)])
    extract = allama.ray.ExtractBatch(
        Invoice,
        provider=lambda: FailoverProvider([primary, backup]),
        text_column="text",
        model="m",
        row_concurrency=1,
        backoff=0.001,
        rpm=60_000,  # (a 429 halves the rate: a guessed one of 60 a minute is 2 s a request)
    )
    (row,) = _run_batches(extract, pa.table({"text": ["a"]}))
    assert row["error"] is None
    assert json.loads(row["value"]) == {"number": "A-1", "total": 2.0}
    assert (len(primary.requests), len(backup.requests)) == (2, 1)


def test_rows_waiting_for_their_turn_when_the_key_is_refused_are_not_sent() -> None:
    mock = MockProvider([allama.AuthenticationError("bad key").with_status(401)])
    extract = allama.ray.ExtractBatch(
        Invoice, provider=lambda: mock, text_column="text", model="m", row_concurrency=3, rpm=600
    )
    rows = _run_batches(extract, pa.table({"text": ["a", "b", "c"]}))
    assert rows[0]["error"].startswith("authentication: status=401")
    assert [row["error"] for row in rows[1:]] == [
        "not_started: the provider refused the actor's key or account"
    ] * 2
    assert len(mock.requests) == 1


def test_a_wait_of_a_day_stops_the_actor_sending_and_says_so() -> None:
    day = allama.RateLimitedError("daily limit").with_retry_after(86_400)
    mock = MockProvider([day])
    extract = allama.ray.ExtractBatch(
        Invoice, provider=lambda: mock, text_column="text", model="m", row_concurrency=1
    )
    first, second = _run_batches(extract, pa.table({"text": ["a", "b"]}))
    why = "the provider asked to wait 86400 s before the next request"
    assert first["error"].startswith("rate_limited: ") and first["error"].endswith(f"({why})")
    assert second["error"] == f"not_started: {why}"
    assert len(mock.requests) == 1


def test_an_error_of_the_callers_own_after_paid_tries_keeps_what_was_paid() -> None:
    mock = MockProvider(["not json", allama.ServerError("down").with_status(502)])
    extract = allama.ray.ExtractBatch(
        Invoice, provider=lambda: mock, text_column="text", model="m", retries=1, backoff=0
    )
    (row,) = _run_batches(extract, pa.table({"text": ["doc"]}))
    # The third call found the script spent (an exception that is no allama error).
    assert row["error"].startswith("MockScriptExhausted: ")
    assert json.loads(row["record"])["passes"] == 1


def test_a_provider_out_of_reach_or_a_model_that_does_not_exist_stops_the_actor() -> None:
    down = allama.NetworkError("connection refused")
    mock = MockProvider([down] * 8)
    extract = allama.ray.ExtractBatch(
        Invoice,
        provider=lambda: mock,
        text_column="text",
        model="m",
        row_concurrency=1,
        max_attempts=2,
        backoff=0,
    )
    rows = _run_batches(
        extract, pa.table({"text": ["a", "b"]}), pa.table({"text": ["c", "d", "e"]})
    )
    # A row waiting to try again leaves its slot to the next: both rows of the first batch
    # were sent when the first ran out of tries; after that, none is.
    assert [row["error"].split(":")[0] for row in rows[:2]] == ["network", "network"]
    assert [row["error"] for row in rows[2:]] == [
        "not_started: the provider could not be reached in 2 tries: network (18 chars "
        "withheld) [provider=mock]"
    ] * 3
    assert len(mock.requests) == 3
    missing = MockProvider([allama.NotFoundError("no such model").with_status(404)])
    extract = allama.ray.ExtractBatch(
        Invoice, provider=lambda: missing, text_column="text", model="m", row_concurrency=1
    )
    rows = _run_batches(extract, pa.table({"text": ["a", "b"]}))
    assert rows[1]["error"].startswith(
        "not_started: the provider has no such endpoint or model (check the base URL and the model)"
    )
    assert len(missing.requests) == 1


class Fussy(BaseModel):
    number: str

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        def check(value: Any) -> Any:
            if value.number == "INV-1":
                raise KeyError("a lookup of the type's own")
            return value

        return core_schema.no_info_after_validator_function(check, handler(source))


def test_a_row_whose_value_the_types_own_code_fails_keeps_what_it_paid() -> None:
    answer = allama.mock.ChatResponseBuilder().text('{"number": "INV-1"}').usage(1000, 100)
    extract = allama.ray.ExtractBatch(
        Fussy,
        provider=lambda: MockProvider([answer.model("gpt-4o-mini").build()], name="openai"),
        text_column="text",
        model="gpt-4o-mini",
    )
    (row,) = _run_batches(extract, pa.table({"text": ["a"]}))
    assert row["value"] is None and row["error"].startswith("KeyError")
    record = json.loads(row["record"])
    assert (record["passes"], record["usage"]["input_tokens"]) == (1, 1000)
    assert record["cost"]["total"] == "0.00021"


class CancelsB(allama.mock.TestProvider):
    async def achat(self, request: ChatRequest) -> allama.ChatResponse:
        if request.messages[-1].text() == "b":
            raise asyncio.CancelledError("a cancel scope of the transport's")
        return self.chat(request)


def test_a_call_that_raises_a_cancelled_error_of_its_own_fails_its_row_alone() -> None:
    extract = allama.ray.ExtractBatch(
        Invoice, provider=CancelsB, text_column="text", model="m", row_concurrency=3
    )
    rows = _run_batches(extract, pa.table({"text": ["a", "b", "c"]}))
    assert [row["error"] is None for row in rows] == [True, False, True]
    assert rows[1]["error"].startswith("CallCancelled")


def test_settings_of_the_text_columns_request_are_refused_with_a_request_function() -> None:
    with pytest.raises(TypeError, match=r"^system=, temperature= make the request of"):
        allama.ray.ExtractBatch(
            Invoice,
            provider="openai",
            request=lambda row: ChatRequest("m").user(row["text"]),
            system="Extract.",
            temperature=0.0,
        )


def test_an_async_request_function_is_refused_before_any_row() -> None:
    async def build(row: dict[str, Any]) -> ChatRequest:
        return ChatRequest("m").user(row["text"])

    with pytest.raises(TypeError, match=r"^the request function is an async function, which"):
        allama.ray.ExtractBatch(Invoice, provider="openai", request=build)
    with pytest.raises(TypeError, match=r"^the request function is an async function, which"):
        ds: Any = object()  # never reached
        allama.ray.extract_dataset(ds, Invoice, provider="openai", request=build)


async def async_provider() -> allama.ChatProvider:
    return MockProvider([])


class AsyncProviderMaker:
    async def __call__(self) -> allama.ChatProvider:
        return MockProvider([])


def test_an_async_provider_function_is_refused_before_any_actor() -> None:
    said = (
        "the provider function is an async function, which the step does not await: "
        "return the provider from a plain one"
    )
    ds: Any = object()  # never reached
    for factory in (
        async_provider,
        AsyncProviderMaker(),
        functools.partial(async_provider),
        functools.partial(AsyncProviderMaker()),
    ):
        with pytest.raises(TypeError) as refused:
            allama.ray.extract_dataset(ds, Invoice, provider=factory, text_column="t", model="m")
        assert str(refused.value) == said
        with pytest.raises(TypeError) as refused:
            allama.ray.ExtractBatch(Invoice, provider=factory, text_column="t", model="m")
        assert str(refused.value) == said
    # A plain function around an async one is known only by what it returns, as it starts.
    said = ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            allama.ray.ExtractBatch(
                Invoice, provider=lambda: async_provider(), text_column="t", model="m"
            )
        except TypeError as error:
            said = str(error)
        gc.collect()  # the coroutine, once its frame is gone
    assert said == (
        "provider's function returned a coroutine: it is an async function, which the step "
        "does not await; return the provider from a plain one"
    )
    # Not "never awaited" (the collection may find others' garbage: a socket left open).
    assert [w for w in caught if issubclass(w.category, RuntimeWarning)] == []


class _Unsendable:
    """Refuses to be pickled in words that quote a secret, as a value's own code may."""

    def __reduce__(self) -> Any:
        raise ValueError("cannot send sk-secret-in-the-words")


def test_a_function_that_cannot_be_pickled_is_refused_by_name_before_the_job() -> None:
    key = "sk-never-in-the-message-1234"
    held = allama.provider("openai", api_key=key, base_url="http://127.0.0.1:9/v1")
    unsendable = _Unsendable()
    ds: Any = object()  # never reached: refused before Ray is asked anything
    advice = (
        "when called, rather than one holding an object made here (a provider, a client, a lock)"
    )
    cases: list[tuple[dict[str, Any], str]] = [
        (
            {"provider": lambda: held, "text_column": "t", "model": "m"},
            "provider= cannot be pickled to send to Ray's workers (HttpProvider 'openai' "
            "cannot be pickled): give a function defined at a module's top level that "
            f"builds the provider {advice}",
        ),
        (
            {"provider": "openai", "request": lambda row: unsendable or build_request(row)},
            "request= cannot be pickled to send to Ray's workers (ValueError: message "
            "withheld): give a function defined at a module's top level that builds each "
            f"ChatRequest {advice}",
        ),
        (
            # allama's own refusal, which says what to do, was withheld too.
            {
                "provider": "openai",
                "provider_options": {"api_key": key, "transport": allama.Transport()},
                "text_column": "t",
                "model": "m",
            },
            "provider_options= cannot be pickled to send to Ray's workers (Transport cannot "
            "be pickled or copied: it holds open connections, and must be built in the "
            "process or copy that uses it (build it in the worker with allama.Transport(...), "
            "or let allama.provider(...) build its own)): give options Ray can send (text, "
            "numbers), or a provider= function that builds the provider",
        ),
    ]
    for settings, said in cases:
        with pytest.raises(TypeError) as refused:
            allama.ray.extract_dataset(ds, Invoice, **settings)
        assert str(refused.value) == said
        assert refused.value.__suppress_context__  # pickling's own words are not chained
        assert key not in str(refused.value) and "sk-secret" not in str(refused.value)
    held.close()


def test_a_request_function_returning_a_coroutine_fails_its_row_by_name() -> None:
    async def build(row: dict[str, Any]) -> ChatRequest:
        return ChatRequest("m").user(row["text"])

    extract = allama.ray.ExtractBatch(
        Invoice, provider=lambda: MockProvider([]), request=lambda row: build(row)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine was never awaited"
        (row,) = _run_batches(extract, pa.table({"text": ["first"]}))
    assert row["error"] == (
        "invalid_row: the request function returned coroutine: it is an async function, "
        "which the step does not await"
    )


def _openai_step(base_url: str) -> allama.ray.ExtractBatch:
    """A step extracting invoices through the test server, as OpenAI."""
    return allama.ray.ExtractBatch(
        Invoice,
        provider="openai",
        provider_options={"api_key": "test-key", "base_url": base_url},
        text_column="text",
        model="gpt-4o-mini",
    )


def test_the_providers_connections_are_closed_as_the_actor_ends(base_url: str) -> None:
    """Ray Data runs an actor's batches on an event loop in a thread of their own, and
    deletes the callable as the actor ends: its provider's connections, left open, were
    dropped unclosed ("unclosed transport" in the worker's log)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        extract = _openai_step(base_url)

        async def run(step: allama.ray.ExtractBatch) -> list[Any]:
            return [out async for out in step(pa.table({"text": [document(1)]}))]

        (out,) = asyncio.run_coroutine_threadsafe(run(extract), loop).result(timeout=30)
        assert out.column("value").to_pylist() == [json.dumps(expected(1), separators=(",", ":"))]
        client = extract.provider._transport._async_client  # type: ignore[attr-defined]
        assert client is not None and not client.is_closed
        del extract
        gc.collect()
        assert client.is_closed
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.close()


def test_providers_behind_a_failover_are_closed_and_a_step_used_on_another_loop_works_again(
    base_url: str,
) -> None:
    from allama.wrappers import FailoverProvider, RetryingProvider

    def made() -> Any:
        first = allama.provider("openai", api_key="test-key", base_url=base_url)
        second = allama.provider("openai", api_key="test-key", base_url=base_url)
        return FailoverProvider([RetryingProvider(first), second])

    extract = allama.ray.ExtractBatch(
        Invoice, provider=made, text_column="text", model="m", row_concurrency=1
    )
    inner = extract.provider.providers[0].inner  # type: ignore[attr-defined]

    async def run() -> Any:
        # More rows than in flight at once: they wait their turn, on this run's loop.
        async for out in extract(pa.table({"text": [document(n) for n in (3, 4, 5)]})):
            assert out.column("error").to_pylist() == [None, None, None]
        return inner._transport._async_client

    for _ in range(2):  # used again after it was closed, its connections open again
        client = asyncio.run(run_then_close(run, extract))
        assert client.is_closed


async def run_then_close(run: Any, extract: allama.ray.ExtractBatch) -> Any:
    client = await run()
    assert not client.is_closed
    await extract.aclose()
    return client


def test_the_callable_closes_its_provider_on_the_loop_it_ran_on_without_ray(
    base_url: str,
) -> None:
    extract = _openai_step(base_url)

    async def run() -> Any:
        async for _ in extract(pa.table({"text": [document(2)]})):
            pass
        client = extract.provider._transport._async_client  # type: ignore[attr-defined]
        await extract.aclose()
        return client

    assert asyncio.run(run()).is_closed


def test_a_provider_function_that_returns_no_provider_fails_the_actor_at_once() -> None:
    with pytest.raises(TypeError, match=r"must return a provider .* not NoneType"):
        allama.ray.ExtractBatch(Invoice, provider=lambda: None, text_column="text", model="m")


def test_a_provider_without_its_base_url_fails_the_actor_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match=r"^openai-compatible has no base URL: pass base_url=$"):
        allama.ray.ExtractBatch(
            Invoice, provider="openai-compatible", text_column="text", model="m"
        )


def test_a_provider_without_its_key_fails_the_actor_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(
        ValueError, match=r"^openai needs an API key: pass api_key= or set OPENAI_API_KEY$"
    ):
        allama.ray.ExtractBatch(Invoice, provider="openai", text_column="text", model="m")


def test_a_floor_no_rows_call_can_meet_fails_the_actor_at_once() -> None:
    class Wide(BaseModel):
        extra: dict[str, int]  # a map: OpenAI's strict mode cannot hold it

    with pytest.raises(allama.EnforcementBelowError, match=r"below the required `exact`"):
        allama.ray.ExtractBatch(
            Wide,
            provider="openai",
            provider_options={"api_key": "sk-test"},
            text_column="text",
            model="gpt-4.1-mini",
            min_enforcement="exact",
        )


_NO_MODE = (
    "deepseek: the provider reports that the model supports neither structured output nor "
    "forced tool calls, so extraction mode `auto` has no mode to pick; set ExtractionMode "
    "explicitly, or override the capability answers with a capability resolver"
)


def test_a_model_no_extraction_mode_can_serve_fails_before_any_row_as_a_batch_run_does() -> None:
    # deepseek-reasoner takes neither a schema nor a forced tool: every row's call would fail
    # `extraction_unsupported`, so the template is refused once, with a batch run's error.
    from allama.extract import ModeUnsupportedError

    options: dict[str, Any] = {"provider_options": {"api_key": "sk-test"}}
    template = {"text_column": "text", "model": "deepseek-reasoner", "system": "Invoices."}
    with pytest.raises(ModeUnsupportedError) as batched:
        allama.batch(
            allama.provider("deepseek", api_key="sk-test"),
            Invoice,
            ["doc"],
            request=ChatRequest("deepseek-reasoner").system("Invoices."),
        )
    assert str(batched.value) == _NO_MODE
    with pytest.raises(ModeUnsupportedError) as refused:
        allama.ray.ExtractBatch(Invoice, provider="deepseek", **options, **template)
    assert str(refused.value) == _NO_MODE
    # A request function's requests cannot be planned without a row: each row's failure,
    # nothing sent.
    extract = allama.ray.ExtractBatch(
        Invoice,
        provider=lambda: allama.provider("deepseek", api_key="sk-test", base_url="http://x:9"),
        request=lambda row: ChatRequest("deepseek-reasoner").user(row["text"]),
    )
    (row,) = _run_batches(extract, pa.table({"text": ["doc"]}))
    assert row["error"] == f"extraction_unsupported: {_NO_MODE}"


def test_a_model_no_extraction_mode_can_serve_fails_before_any_actor_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The preset's provider is built here already: its template is planned with it, the
    # workers' key not needed (nothing is sent).
    from allama.extract import ModeUnsupportedError

    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    ds: Any = object()  # never reached
    template = {"provider": "deepseek", "text_column": "text", "model": "deepseek-reasoner"}
    with pytest.raises(ModeUnsupportedError) as refused:
        allama.ray.extract_dataset(ds, Invoice, **template)
    assert str(refused.value) == _NO_MODE
    # A model that can is not refused (the dataset is what fails, checked after).
    with pytest.raises(TypeError, match=r"^ds must be a ray\.data\.Dataset, not object$"):
        allama.ray.extract_dataset(ds, Invoice, **{**template, "model": "deepseek-chat"})


def test_a_batch_that_is_not_a_pyarrow_table_is_refused_by_name() -> None:
    extract = allama.ray.ExtractBatch(
        Invoice, provider=lambda: MockProvider([]), text_column="text", model="m"
    )

    async def run(batch: Any) -> list[Any]:
        return [out async for out in extract(batch)]

    for batch, kind in (({"text": ["a"]}, "dict"), ([{"text": "a"}], "list")):
        with pytest.raises(TypeError) as refused:
            asyncio.run(run(batch))
        assert str(refused.value) == (
            f"ExtractBatch takes each batch as a pyarrow table, not {kind}: "
            'map_batches(ExtractBatch, batch_format="pyarrow", ...)'
        )


def crashing_provider(base_url: str, mark: str) -> allama.ChatProvider:
    """An OpenAI provider whose process dies once, right after `INVOICE 2` was answered
    (paid for): as an actor lost to memory or to its node dies."""
    provider = allama.provider("openai", api_key="sk-test", base_url=base_url)
    answer = provider.achat

    async def achat(request: ChatRequest) -> allama.ChatResponse:
        response = await answer(request)
        if "invoice 2:" in request.messages[-1].text() and not os.path.exists(mark):
            Path(mark).touch()
            os._exit(1)
        return response

    provider.achat = achat  # type: ignore[method-assign]
    return provider


def test_an_actor_that_dies_has_its_batch_run_again_and_its_rows_paid_again(
    local_ray: None, server: _Server, base_url: str, tmp_path: Path
) -> None:
    mark = str(tmp_path / "died")
    ds = ray.data.from_items([{"id": i, "text": document(i)} for i in range(4)])
    out = allama.ray.extract_dataset(
        ds,
        Invoice,
        provider=functools.partial(crashing_provider, base_url, mark),
        text_column="text",
        model="gpt-4o-mini",
        batch_size=4,
        row_concurrency=1,
    )
    with server.lock:
        server.seen.clear()
    rows = _by_id(out.take_all())
    assert os.path.exists(mark)
    with server.lock:
        sent = [str(body["messages"][-1]["content"]) for _, _, body in server.seen]
    # Ray Data ran the batch again on a new actor: its rows answered before the death were
    # sent, and paid for, twice; their records count only the run that finished.
    assert [sent.count(document(i)) for i in range(4)] == [2, 2, 2, 1]
    assert [json.loads(rows[i]["value"]) for i in range(4)] == [expected(i) for i in range(4)]
    assert all(json.loads(rows[i]["record"])["passes"] == 1 for i in range(4))


def test_the_error_column_keeps_allamas_own_words_and_withholds_the_callers() -> None:
    from allama.batch._run import CallCancelled

    def lookup(name: str) -> None:
        raise LookupError(f"no vendor named {name}")  # the caller's code, quoting a value

    with pytest.raises(LookupError) as raised:
        lookup("Secret Corp")
    assert allama.ray.error_text(raised.value) == "LookupError: message withheld (27 chars)"
    assert allama.ray.error_text(CallCancelled()) == (
        "CallCancelled: the call raised CancelledError, though the run was not cancelled"
    )


def test_a_step_driven_on_one_loop_after_another_keeps_its_rate_limit() -> None:
    """Its limits were made again on each loop, forgetting what was sent: one request a
    second (`rpm=60`) let the next loop's first go at once."""
    from allama.mock import ChatResponseBuilder, FunctionProvider

    sent: list[float] = []

    def answer(request: ChatRequest) -> Any:
        sent.append(time.monotonic())
        return ChatResponseBuilder().text('{"number": "A-1", "total": 2}').build()

    extract = allama.ray.ExtractBatch(
        Invoice, provider=lambda: FunctionProvider(answer), text_column="text", model="m", rpm=60
    )
    for _ in range(2):  # a loop each, as a step driven by hand is
        (row,) = _run_batches(extract, pa.table({"text": ["an invoice"]}))
        assert row["error"] is None
    assert len(sent) == 2 and sent[1] - sent[0] >= 0.9


def test_a_row_concurrency_from_numpy_is_taken_as_a_whole_number() -> None:
    np = pytest.importorskip("numpy")

    def made(count: Any) -> Any:
        return allama.ray.ExtractBatch(
            Invoice,
            provider=lambda: MockProvider(["{}"]),
            text_column="text",
            model="m",
            row_concurrency=count,
        )

    step = made(np.int64(3))
    assert step._row_concurrency == 3 and type(step._row_concurrency) is int
    with pytest.raises(TypeError, match="row_concurrency must be a whole number"):
        made(np.float64(3))


def test_a_requests_warnings_are_kept_in_its_record_as_a_batch_run_keeps_them(
    server: _Server, base_url: str
) -> None:
    """A temperature OpenAI does not take is left out of the request: the record says so,
    as a batch run's `result.warnings` and its ledger's record do; it said nothing."""
    step = allama.ray.ExtractBatch(
        Invoice,
        provider="openai",
        provider_options={"api_key": "test-key", "base_url": base_url},
        text_column="text",
        model="gpt-4o-mini",
        temperature=5,
        max_attempts=1,
    )
    before = len(server.seen)
    good, prose = _run_batches(step, pa.table({"text": [document(1), document(15)]}))
    assert [("temperature" in body) for _, _, body in server.seen[before:]] == [False, False]
    warned = [
        {
            "kind": "unsupported",
            "subject": {"type": "field", "field": "temperature"},
            "message": "OpenAI takes `temperature` from 0 to 2; 5 was left out",
            "provider": "openai",
        }
    ]
    assert good["error"] is None
    assert json.loads(good["record"])["request_warnings"] == warned
    # A failed extraction keeps those of the answer it failed on.
    assert prose["error"].startswith("extraction_parse: ")
    assert json.loads(prose["record"])["request_warnings"] == warned
    provider = allama.provider("openai", api_key="test-key", base_url=base_url)
    request = ChatRequest("gpt-4o-mini").with_temperature(5)
    (result,) = allama.batch(provider, Invoice, [document(1)], request=request)
    assert [w.model_dump(mode="json", exclude_none=True) for w in result.warnings] == warned


def test_a_value_python_cannot_hold_fails_its_row_alone() -> None:
    """A timestamp past the year 9999 failed pyarrow's conversion of the whole batch (an
    `OverflowError`), and with it the job, losing the rows already paid for."""
    mock = MockProvider(['{"number": "A-1", "total": 2}', '{"number": "A-3", "total": 4}'])
    step = allama.ray.ExtractBatch(
        Invoice, provider=lambda: mock, request=build_request, row_concurrency=1
    )
    stamps = pa.array([0, 2**62, 0], pa.timestamp("us"))
    batch = pa.table({"id": [1, 2, 3], "text": ["one", "two", "three"], "ts": stamps})

    async def run(batch: pa.Table) -> list[dict[str, Any]]:
        (out,) = [out async for out in step(batch)]
        assert out.column("ts") == batch.column("ts")  # the row's own columns, as they were
        return out.drop_columns(["ts"]).to_pylist()  # (Python cannot hold the value)

    first, second, third = asyncio.run(run(batch))
    said = "invalid_row: column 'ts' holds a value that cannot be read as Python (OverflowError)"
    assert (second["error"], second["record"], second["value"]) == (said, None, None)
    assert first["value"] == '{"number":"A-1","total":2.0}'
    assert third["value"] == '{"number":"A-3","total":4.0}'
    assert [request.messages[-1].text() for request in mock.requests] == ["one", "three"]
    # The text's column, read as text is.
    step = allama.ray.ExtractBatch(
        Invoice, provider=lambda: MockProvider([]), text_column="ts", model="m"
    )
    (row,) = asyncio.run(run(pa.table({"ts": stamps[1:2]})))
    assert row["error"] == said


def test_an_empty_prompt_is_refused() -> None:
    """It sent a blank line before each row's text."""
    for empty in ("", " \n\t"):
        with pytest.raises(ValueError, match=r"^prompt is empty; give the text to put before"):
            allama.ray.ExtractBatch(
                Invoice, provider=lambda: MockProvider(), text_column="t", model="m", prompt=empty
            )
        with pytest.raises(ValueError, match=r"^prompt is empty; give the text to put before"):
            allama.ray.extract_dataset(
                object(),  # type: ignore[arg-type]
                Invoice,
                provider="openai",
                text_column="t",
                model="m",
                prompt=empty,
            )


def test_a_pool_setting_out_of_range_is_a_value_error_and_one_of_another_type_a_type_error() -> (
    None
):
    class Unread:
        def map_batches(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("not reached")

    settings: dict[str, Any] = {"provider": "openai", "text_column": "t", "model": "m"}
    actors = "concurrency must be a number of actors (1 or more)"
    rows = "batch_size must be a number of rows (1 or more) or None"
    cpus = "num_cpus must be a number of CPUs, 0 or more"
    for bad, error, said in (
        ({"concurrency": 0}, ValueError, actors),
        ({"concurrency": -1}, ValueError, actors),
        ({"concurrency": (0, 2)}, ValueError, actors),
        ({"concurrency": (2,)}, TypeError, actors),
        ({"concurrency": [1, 2]}, TypeError, actors),
        ({"batch_size": 0}, ValueError, rows),
        ({"batch_size": 2.0}, TypeError, rows),
        ({"num_cpus": float("nan")}, ValueError, cpus),
        ({"num_cpus": "1"}, TypeError, cpus),
        ({"num_cpus": True}, TypeError, cpus),
    ):
        with pytest.raises(error, match=re.escape(said)):
            allama.ray.extract_dataset(Unread(), Invoice, **settings, **bad)  # type: ignore[arg-type]
