"""How each batch API's result rows are read, beyond what the fake server sends: the shapes
the providers document, and the shapes a row can take on the wire."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from allama.adapters._http import HttpResponse
from allama.adapters._jobs import JobState, JobTarget, Row, RowKind, Steps, job_line
from allama.adapters._jobs._anthropic import DIALECT as ANTHROPIC
from allama.adapters._jobs._gemini import DIALECT as GEMINI
from allama.adapters._jobs._openai import DIALECT as OPENAI

TARGET = JobTarget("https://example.test/v1beta", {"x-goog-api-key": "k"}, "m", "/x")


def _drive(steps: Steps, answers: list[bytes]) -> Any:
    """Run a dialect's steps, answering its requests in turn."""
    try:
        next(steps)
        for body in answers:
            steps.send(HttpResponse(200, {}, body))
    except StopIteration as done:
        return done.value
    raise AssertionError("the steps asked for more than was answered")


def test_a_gemini_responses_file_of_bare_responses_is_read_by_key_alone() -> None:
    # A line may be the response (or its error) itself: beside its key it answers that
    # request; without one it answers none, whatever its place.
    lines = [
        {"candidates": [{"content": {"parts": [{"text": "{}"}]}}]},
        {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"},
    ]
    state = JobState(
        "batches/1",
        "BATCH_STATE_SUCCEEDED",
        True,
        "completed",
        results={"responsesFile": "files/out"},
    )
    data = b"\n".join(json.dumps(line).encode() for line in lines)
    rows = _drive(GEMINI.results(TARGET, state, ["a", "b"], in_order=True), [data])
    assert [rows[key].kind for key in "ab"] == [RowKind.MISSING] * 2
    assert rows["a"].note == (
        "the job ended completed without a response for this request (2 responses came "
        "without the key of a request, and a response is matched by its key alone)"
    )
    keyed = b"\n".join(
        json.dumps({"key": k, **line}).encode() for k, line in zip("ab", lines, strict=True)
    )
    rows = _drive(GEMINI.results(TARGET, state, ["a", "b"], in_order=True), [keyed])
    assert rows["a"].kind == RowKind.RESPONSE
    assert json.loads(rows["a"].body)["candidates"] == lines[0]["candidates"]
    assert (rows["b"].kind, rows["b"].status) == (RowKind.ERROR, 400)
    assert json.loads(rows["b"].body)["error"]["message"] == "bad"


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("INTERNAL", 500),
        ("UNAVAILABLE", 503),
        ("DEADLINE_EXCEEDED", 504),
        ("RESOURCE_EXHAUSTED", 429),
        ("13", 500),
        ("INVALID_ARGUMENT", None),
        ("CANCELLED", None),
        ("FAILED", None),  # no code of Google's APIs: nothing says it was the provider's side
        ("17", None),
        ("600", None),
        ("error", None),  # no code at all
    ],
)
def test_a_gemini_job_failed_on_the_providers_side_gives_server_errors(
    code: str, status: int | None
) -> None:
    state = JobState("batches/1", "BATCH_STATE_FAILED", True, "failed", error=code, results={})
    row = _drive(GEMINI.results(TARGET, state, ["a"]), [])["a"]  # (no request needed)
    if status is None:
        assert (row.kind, row.note) == (RowKind.JOB_FAILED, f"the job failed: {code}")
    else:
        assert (row.kind, row.status) == (RowKind.ERROR, status)


@pytest.mark.parametrize("dialect", [OPENAI, GEMINI], ids=["openai", "gemini"])
def test_a_job_failed_with_no_error_says_the_provider_named_no_reason(dialect: Any) -> None:
    # OpenAI's `errors` may be absent or empty; Gemini's operation may end with no `error`.
    state = JobState("batch_1", "failed", True, "failed", results=())
    row = _drive(dialect.results(TARGET, state, ["a"]), [])["a"]
    assert (row.kind, row.note) == (
        RowKind.JOB_FAILED,
        "the job failed: the provider named no reason",
    )


def test_a_gemini_job_expired_leaves_its_unanswered_rows_expired() -> None:
    state = JobState("batches/1", "BATCH_STATE_EXPIRED", True, "expired", results={})
    rows = _drive(GEMINI.results(TARGET, state, ["a"]), [])  # (no request needed)
    assert rows == {"a": Row("a", RowKind.EXPIRED, note=rows["a"].note)}


def test_openai_rows_refused_by_the_endpoint_are_errors_not_successes() -> None:
    # The error file holds a refused row as a response with an error status.
    state = JobState("batch_1", "completed", True, "completed", results=("file-err",))
    line = {
        "id": "batch_req_1",
        "custom_id": "a",
        "response": {
            "status_code": 400,
            "request_id": "req_1",
            "body": {"error": {"message": "bad", "type": "invalid_request_error"}},
        },
        "error": None,
    }
    rows = _drive(OPENAI.results(TARGET, state, ["a", "b"]), [json.dumps(line).encode()])
    assert (rows["a"].kind, rows["a"].status) == (RowKind.ERROR, 400)
    assert rows["b"].kind == RowKind.MISSING


def test_anthropic_errors_keep_their_type_and_status() -> None:
    state = JobState("msgbatch_1", "ended", True, "completed", results="https://x/results")
    lines = [
        {
            "custom_id": "a",
            "result": {
                "type": "errored",
                "error": {
                    "type": "error",
                    "error": {"type": "overloaded_error", "message": "busy"},
                },
            },
        },
        {"custom_id": "b", "result": {"type": "expired"}},
        {"custom_id": "c", "result": {"type": "canceled"}},
    ]
    data = b"\n".join(json.dumps(line).encode() for line in lines)
    rows = _drive(ANTHROPIC.results(TARGET, state, ["a", "b", "c", "d"]), [data])
    assert (rows["a"].kind, rows["a"].status) == (RowKind.ERROR, 529)
    assert json.loads(rows["a"].body) == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "busy"},
    }
    assert [rows[k].kind for k in "bcd"] == [RowKind.EXPIRED, RowKind.CANCELED, RowKind.MISSING]


@pytest.mark.parametrize(("kind", "status"), [("billing_error", 402), ("timeout_error", 504)])
def test_an_anthropic_error_row_keeps_its_request_id_and_its_status(kind: str, status: int) -> None:
    # The result's error is a whole error response: its request id is the failed request's.
    state = JobState("msgbatch_1", "ended", True, "completed", results="https://x/results")
    line = {
        "custom_id": "a",
        "result": {
            "type": "errored",
            "error": {
                "type": "error",
                "error": {"type": kind, "message": "no"},
                "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
            },
        },
    }
    rows = _drive(ANTHROPIC.results(TARGET, state, ["a"]), [json.dumps(line).encode()])
    assert (rows["a"].kind, rows["a"].status) == (RowKind.ERROR, status)
    assert json.loads(rows["a"].body) == {
        "type": "error",
        "error": {"type": kind, "message": "no"},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    }


_ROW_KINDS = st.sampled_from(["succeeded", "errored", "expired", "canceled"])


@given(
    st.lists(
        st.tuples(st.text(alphabet="abcdef0123456789", min_size=1, max_size=8), _ROW_KINDS),
        unique_by=lambda t: t[0],
        max_size=20,
    ),
    st.randoms(),
)
def test_every_key_gets_exactly_one_row_whatever_the_order(
    rows: list[tuple[str, str]], rnd: Any
) -> None:
    lines = []
    for key, kind in rows:
        result: dict[str, Any] = {"type": kind}
        if kind == "succeeded":
            result["message"] = {"id": key, "content": []}
        if kind == "errored":
            result["error"] = {"type": "error", "error": {"type": "api_error", "message": "x"}}
        lines.append({"custom_id": key, "result": result})
    rnd.shuffle(lines)
    state = JobState("msgbatch_1", "ended", True, "completed", results="https://x/results")
    keys = [key for key, _ in rows] + ["never-sent-back"]
    data = b"\n".join(json.dumps(line).encode() for line in lines)
    got = _drive(ANTHROPIC.results(TARGET, state, keys), [data])
    assert sorted(got) == sorted(keys)
    kinds = {
        "succeeded": RowKind.RESPONSE,
        "errored": RowKind.ERROR,
        "expired": RowKind.EXPIRED,
        "canceled": RowKind.CANCELED,
    }
    for key, kind in rows:
        assert got[key].kind == kinds[kind]
    assert got["never-sent-back"].kind == RowKind.MISSING


@given(st.text(), st.text(alphabet="abcdef0123456789", min_size=1, max_size=64))
def test_an_openai_line_is_one_line_holding_the_live_body(text: str, key: str) -> None:
    from allama.adapters._http import HttpRequest
    from allama.adapters._jobs import Entry

    body = {"model": "m", "messages": [{"role": "user", "content": text}]}
    entry = Entry(key, HttpRequest("POST", "https://x/v1/chat/completions", {}, body))
    target = JobTarget("https://x/v1", {}, "m", "/chat/completions")
    line = OPENAI.line(target, entry)
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and b"\r" not in line
    assert len(line) <= OPENAI.size(entry)  # what a job is split by holds the line
    # One line to a reader splitting on every Unicode line end too (U+2028 from a PDF).
    assert len(line.decode().splitlines()) == 1
    assert json.loads(line) == {
        "custom_id": key,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": body,
    }


def test_a_job_is_read_less_and_less_often_up_to_ten_minutes() -> None:
    from allama.batch._jobs import next_wait

    waits = [30.0]
    for _ in range(9):
        waits.append(next_wait(waits[-1], 600.0))
    assert waits == [
        30.0,
        45.0,
        67.5,
        101.25,
        151.875,
        227.8125,
        341.71875,
        512.578125,
        600.0,
        600.0,
    ]


def test_an_answer_of_the_job_api_allama_cannot_read_is_a_clear_server_error() -> None:
    import asyncio

    import pytest

    import allama
    from allama.adapters._http import HttpRequest
    from allama.errors import ServerError
    from allama.providers._jobs import provider_jobs
    from allama.transport import Transport

    class Garbled(Transport):
        async def asend(self, request: HttpRequest) -> HttpResponse:
            return HttpResponse(200, {}, b'{"object": "batch"}')  # no id, no status

    provider = allama.provider("openai", api_key="sk-secret-key", transport=Garbled())
    jobs = provider_jobs(provider)
    steps = jobs.dialect.state(jobs.target("gpt-4o-mini"), "batch_1")
    with pytest.raises(ServerError) as raised:
        asyncio.run(jobs.run(steps, "gpt-4o-mini"))
    message = str(raised.value)
    assert message.startswith(
        "the OpenAI Batch API answered GET /v1/batches/batch_1 with a body allama cannot read"
    )
    assert "KeyError" in message and "sk-secret-key" not in message
    assert raised.value.retryable


_OPENAI_ANSWER = {"status_code": 200, "request_id": "r", "body": {"id": "chatcmpl-1"}}
_OPENAI_FAILED = {"status_code": 500, "request_id": "r", "body": {"error": {"message": "x"}}}
_ANTHROPIC_ANSWER = {"type": "succeeded", "message": {"id": "msg_1"}}
_ANTHROPIC_FAILED = {"type": "errored", "error": {"type": "api_error", "message": "x"}}


def _results(dialect: str, lines: list[bytes], keys: list[str]) -> dict[str, Row]:
    data = b"\n".join(lines)
    if dialect == "openai":
        state = JobState("batch_1", "completed", True, "completed", results=("file-out",))
        rows: dict[str, Row] = _drive(OPENAI.results(TARGET, state, keys), [data])
    else:
        state = JobState("msgbatch_1", "ended", True, "completed", results="https://x/results")
        rows = _drive(ANTHROPIC.results(TARGET, state, keys), [data])
    return rows


def _line(dialect: str, key: str, answered: bool) -> bytes:
    if dialect == "openai":
        response = _OPENAI_ANSWER if answered else _OPENAI_FAILED
        return json.dumps({"custom_id": key, "response": response}).encode()
    result = _ANTHROPIC_ANSWER if answered else _ANTHROPIC_FAILED
    return json.dumps({"custom_id": key, "result": result}).encode()


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
@pytest.mark.parametrize("bad", [b'{"custom_id": "trunc', b"not json", b"[1, 2]"])
def test_a_line_that_cannot_be_read_leaves_the_others_read(dialect: str, bad: bytes) -> None:
    lines = [_line(dialect, "a", True), bad, _line(dialect, "b", True)]
    rows = _results(dialect, lines, ["a", "b", "c"])
    assert (rows["a"].kind, rows["b"].kind, rows["c"].kind) == (
        RowKind.RESPONSE,
        RowKind.RESPONSE,
        RowKind.MISSING,
    )
    assert rows["c"].note is not None and rows["c"].note.endswith(
        " (1 line of its results could not be read)"
    )


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_a_key_named_twice_keeps_its_answer(dialect: str) -> None:
    answered, failed = _line(dialect, "a", True), _line(dialect, "a", False)
    for lines in ([answered, failed], [failed, answered]):
        assert _results(dialect, lines, ["a"])["a"].kind == RowKind.RESPONSE


def test_gemini_lines_without_keys_beside_one_that_cannot_be_read_answer_no_request() -> None:
    # Not read by place: neither the unreadable line nor those without a key answer one.
    answer = {"candidates": [{"content": {"parts": [{"text": "{}"}]}}]}
    state = JobState(
        "batches/1",
        "BATCH_STATE_SUCCEEDED",
        True,
        "completed",
        results={"responsesFile": "files/f"},
    )
    data = b"\n".join([json.dumps(answer).encode(), b"{cut short", json.dumps(answer).encode()])
    rows = _drive(GEMINI.results(TARGET, state, ["a", "b", "c"], in_order=True), [data])
    assert [rows[key].kind for key in "abc"] == [RowKind.MISSING] * 3
    assert rows["b"].note == (
        "the job ended completed without a response for this request (1 line of its results "
        "could not be read) (2 responses came without the key of a request, and a response is "
        "matched by its key alone)"
    )


@pytest.mark.parametrize(
    ("error", "status"),
    [
        ({"code": 13, "message": "Internal error"}, 500),  # a google.rpc.Status: canonical codes
        ({"code": 14, "message": "Unavailable"}, 503),
        ({"code": 8, "message": "Resource exhausted"}, 429),
        ({"code": 3, "message": "Bad request"}, 400),
        ({"code": 16, "message": "No key"}, 401),
        ({"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}, 400),  # as REST writes it
        ({"code": 503, "message": "busy"}, 503),
        ({"status": "UNAVAILABLE", "message": "busy"}, 503),
        ({"code": "14", "message": "a number as text"}, 503),
        ({"message": "no code at all"}, 500),
        ({"code": 0, "message": "OK, and yet an error"}, 500),
        ({"code": 9999, "message": "out of range"}, 500),
    ],
)
def test_a_gemini_row_error_is_read_by_its_canonical_code(
    error: dict[str, Any], status: int
) -> None:
    row = _gemini_inline([{"error": error, "metadata": {"key": "a"}}], ["a"], in_order=False)["a"]
    assert (row.kind, row.status) == (RowKind.ERROR, status)
    assert json.loads(row.body) == {"error": error}


@given(
    error=st.dictionaries(
        st.sampled_from(["code", "status", "message"]),
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    )
)
def test_a_gemini_row_error_of_any_shape_is_read_as_an_http_status(error: dict[str, Any]) -> None:
    from allama.adapters._jobs._gemini import _http_status

    assert 100 <= _http_status(error) <= 599


def test_a_gemini_job_file_is_no_larger_than_the_size_it_was_split_by(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import allama
    from allama.adapters._jobs import _gemini
    from allama.providers._jobs import provider_jobs

    jobs = provider_jobs(allama.provider("gemini", api_key="k", base_url=TARGET.base_url))
    text = "請求書番号は12345です。合計金額は98,000円。" * 200 + "😀" * 500 + "\u2028\u2029\x85"
    request = allama.ChatRequest("gemini-2.5-flash").system("Extract.").user(text)
    entries = [jobs.entry(f"key{n}", request)[0] for n in range(3)]
    monkeypatch.setattr(_gemini, "INLINE_BYTES", 0)  # a file, as a job past 19 MB is sent
    steps = GEMINI.submit(jobs.target("gemini-2.5-flash"), entries, "allama-x")
    next(steps)
    upload = steps.send(HttpResponse(200, {"x-goog-upload-url": "https://example.test/up"}, b"{}"))
    # Non-ASCII text written as UTF-8, not escaped: the file is what `max_bytes` was held to.
    assert len(upload.content) <= sum(GEMINI.size(entry) for entry in entries)
    # The Unicode line ends escaped: a reader splitting on them reads three lines too.
    lines = [json.loads(line) for line in upload.content.decode().splitlines()]
    assert [line["key"] for line in lines] == ["key0", "key1", "key2"]
    assert lines[0]["request"] == entries[0].request.body


@pytest.mark.parametrize("ends", ["\x85", "\u2028", "\u2029", "\x85\u2028\u2029"])
def test_a_document_of_unicode_line_ends_is_counted_at_its_escaped_size(ends: str) -> None:
    # Text decoded as Latin-1 holds U+0085 for every "…": written as a six-byte escape in the
    # job's file, counted at its two bytes of UTF-8 a job could pass the provider's limit.
    import allama
    from allama.providers._jobs import provider_jobs

    request = allama.ChatRequest("m").user("Total" + ends * 10_000)
    for name, dialect in (("openai", OPENAI), ("gemini", GEMINI)):
        jobs = provider_jobs(allama.provider(name, api_key="k", base_url=TARGET.base_url))
        entry = jobs.entry("key0", request)[0]
        written = (
            OPENAI.line(jobs.target("m"), entry)
            if dialect is OPENAI
            else job_line({"key": entry.key, "request": entry.request.body})
        )
        assert len(written) > 60_000
        assert len(written) <= dialect.size(entry)


@pytest.mark.parametrize("model", ["gemini-2.5-flash", "models/gemini-2.5-flash"])
def test_a_gemini_job_names_its_model_as_a_live_call_does(model: str) -> None:
    import allama
    from allama.providers._jobs import provider_jobs

    jobs = provider_jobs(allama.provider("gemini", api_key="k", base_url=TARGET.base_url))
    entries = [jobs.entry("key0", allama.ChatRequest(model).user("doc"))[0]]
    create = next(GEMINI.submit(jobs.target(model), entries, "allama-x"))
    assert create.url == f"{TARGET.base_url}/models/gemini-2.5-flash:batchGenerateContent"


@pytest.mark.parametrize(
    ("outcome", "kind"),
    [
        ("cancelled", RowKind.CANCELED),
        ("expired", RowKind.EXPIRED),
        ("failed", RowKind.JOB_FAILED),
        ("completed", RowKind.MISSING),
    ],
)
def test_an_openai_row_neither_file_holds_is_told_by_how_the_job_ended(
    outcome: str, kind: str
) -> None:
    # A cancelled job may list no error file: the requests it did not run are in neither.
    answered = {"custom_id": "a", "response": {"status_code": 200, "body": {"id": "r"}}}
    state = JobState("batch_1", outcome, True, outcome, results=("file-out",))
    rows = _drive(OPENAI.results(TARGET, state, ["a", "b"]), [json.dumps(answered).encode()])
    assert rows["a"].kind == RowKind.RESPONSE
    assert rows["b"].kind == kind


def test_a_jobs_error_keeps_the_providers_codes_apart_from_its_words() -> None:
    from allama.adapters._jobs._gemini import _state as gemini_state
    from allama.adapters._jobs._openai import _state as openai_state

    # The codes say what went wrong, in allama's messages; the words, which may quote the
    # requests, are kept for the caller who asks.
    failed = openai_state(
        {
            "id": "batch_1",
            "status": "failed",
            "errors": {
                "data": [
                    {"code": "duplicate_custom_id", "message": "quotes doc 1", "line": 2},
                    {"message": "no code", "line": 3},
                ]
            },
        }
    )
    assert failed.error == "duplicate_custom_id (line 2); error (line 3)"
    assert failed.error_words == "quotes doc 1; no code"
    given_as_text = openai_state({"id": "b", "status": "failed", "errors": {"data": ["words"]}})
    assert (given_as_text.error, given_as_text.error_words) == ("error", "words")
    job = {"name": "batches/1", "metadata": {"state": "BATCH_STATE_FAILED"}}
    for error, code, words in (
        (
            {"code": 400, "status": "INVALID_ARGUMENT", "message": "quotes doc 2"},
            "INVALID_ARGUMENT",
            "quotes doc 2",
        ),
        ({"message": "only words"}, "error", "only words"),
        ("words alone", "error", "words alone"),
    ):
        state = gemini_state({**job, "error": error})
        assert (state.error, state.error_words) == (code, words)


def test_an_openai_result_line_whose_status_is_no_number_leaves_its_row_missing() -> None:
    # Read as no line: the row is sent again, the others are read, and nothing of the line
    # (the provider's) goes into an error of allama's.
    odd = json.dumps({"custom_id": "b", "response": {"status_code": "quotes the doc"}}).encode()
    rows = _results("openai", [_line("openai", "a", True), odd], ["a", "b"])
    assert rows["a"].kind == RowKind.RESPONSE
    assert rows["b"].kind == RowKind.MISSING
    spelled = json.dumps({"custom_id": "c", "response": {**_OPENAI_ANSWER, "status_code": "200"}})
    assert _results("openai", [spelled.encode()], ["c"])["c"].kind == RowKind.RESPONSE
    for status in ("\u00b2", "9" * 5_000):  # digits to `str.isdigit`, no number to `int`
        line = json.dumps({"custom_id": "d", "response": {"status_code": status}}).encode()
        rows = _results("openai", [_line("openai", "a", True), line], ["a", "d"])
        assert (rows["a"].kind, rows["d"].kind) == (RowKind.RESPONSE, RowKind.MISSING)


def test_an_openai_status_written_as_a_whole_number_with_a_fraction_is_read() -> None:
    # JSON's `200.0` is the number 200: the row is an answer, not missing (sent again, paid
    # twice); a fraction, or no HTTP status, is no status.
    for status, kind in ((200.0, RowKind.RESPONSE), (400.0, RowKind.ERROR)):
        line = json.dumps({"custom_id": "a", "response": {**_OPENAI_ANSWER, "status_code": status}})
        assert _results("openai", [line.encode()], ["a"])["a"].kind == kind
    for status in (200.5, 2e9, float("inf")):
        line = json.dumps({"custom_id": "a", "response": {**_OPENAI_ANSWER, "status_code": status}})
        assert _results("openai", [line.encode()], ["a"])["a"].kind == RowKind.MISSING


@pytest.mark.parametrize(
    "result",
    [
        {"type": "errored", "error": "overloaded, try later"},
        {"type": "errored", "error": ["overloaded"]},
        "errored",
    ],
)
def test_an_anthropic_error_of_an_odd_shape_leaves_the_other_rows_read(result: Any) -> None:
    odd = json.dumps({"custom_id": "b", "result": result}).encode()
    rows = _results("anthropic", [_line("anthropic", "a", True), odd], ["a", "b"])
    assert (rows["a"].kind, rows["b"].kind, rows["b"].status) == (
        RowKind.RESPONSE,
        RowKind.ERROR,
        500,
    )


def test_a_job_of_many_bad_lines_gives_each_row_as_many_words_as_one_of_few() -> None:
    from allama.adapters._jobs._openai import _state as openai_state

    # 2,000 lines refused, each message quoting its own document: every row that was not
    # run holds the job's codes and words, named for a few lines and counted for the rest,
    # rather than every line's (a ledger growing with the square of the job, and each row
    # quoting every other document).
    data = [
        {"code": "invalid_request", "message": f"line quotes doc {n}", "line": n}
        for n in range(1, 2_001)
    ]
    failed = openai_state({"id": "batch_1", "status": "failed", "errors": {"data": data}})
    assert failed.error == "invalid_request (lines 1, 2, 3 and 1,997 more)"
    assert failed.error_words == (
        "line quotes doc 1; line quotes doc 2; line quotes doc 3; and 1,997 more"
    )
    # The same words of many lines are said once; codes beyond a few are counted.
    same = [{"code": f"c{n % 5}", "message": "duplicate", "line": n} for n in range(1, 11)]
    failed = openai_state({"id": "batch_1", "status": "failed", "errors": {"data": same}})
    assert failed.error == ("c1 (lines 1, 6); c2 (lines 2, 7); c3 (lines 3, 8); 2 more codes")
    assert failed.error_words == "duplicate"
    floats = [{"code": "c", "line": 3.0}, {"code": "c", "line": 4.5}]
    failed = openai_state({"id": "batch_1", "status": "failed", "errors": {"data": floats}})
    assert failed.error == "c (lines 3, 4.5)"


@pytest.mark.parametrize(
    ("errors", "code", "words"),
    [
        ("all broken", "error", "all broken"),
        ({"data": "all broken"}, "error", "all broken"),
        ({"object": "list"}, None, None),
        ([{"code": "c", "message": "m"}], "c", "m"),
    ],
)
def test_an_openai_jobs_errors_of_any_shape_are_read(errors: Any, code: Any, words: Any) -> None:
    from allama.adapters._jobs._openai import _state as openai_state

    failed = openai_state({"id": "batch_1", "status": "failed", "errors": errors})
    assert (failed.error, failed.error_words) == (code, words)


def test_a_gemini_jobs_odd_counts_and_a_row_error_given_as_text_are_read() -> None:
    from allama.adapters._jobs._gemini import _row
    from allama.adapters._jobs._gemini import _state as gemini_state

    stats = {"requestCount": "3", "failedRequestCount": "\u00b2", "pending": True}
    job = {"name": "batches/1", "metadata": {"state": "BATCH_STATE_RUNNING", "batchStats": stats}}
    assert gemini_state(job).counts == {"requestCount": 3}
    row = _row("k", {"error": "quotes the doc"})
    assert row.kind == RowKind.ERROR and row.body is not None
    assert json.loads(row.body) == {"error": {"message": "quotes the doc"}}


def test_a_lone_surrogate_in_a_jobs_state_is_stored(tmp_path: Any) -> None:
    from allama.batch._ledger import Ledger

    ledger = Ledger(tmp_path / "ledger.sqlite")
    try:
        ledger.job_state(
            "tag", state="failed\ud800", outcome="failed", counts=None, error="BAD\ud800"
        )
    finally:
        ledger.close()


def _gemini_inline(
    entries: list[dict[str, Any]], keys: list[str], in_order: bool = True
) -> dict[str, Row]:
    state = JobState(
        "batches/1",
        "BATCH_STATE_SUCCEEDED",
        True,
        "completed",
        results={"inlinedResponses": {"inlinedResponses": entries}},
    )
    rows: dict[str, Row] = _drive(GEMINI.results(TARGET, state, keys, in_order), [])
    return rows  # (inlined responses: no request)


def _answer_of(key: str, keyed: bool) -> dict[str, Any]:
    """A response whose text names the request it answers, with or without its key."""
    entry: dict[str, Any] = {"response": {"candidates": [{"content": {"parts": [{"text": key}]}}]}}
    if keyed:
        entry["metadata"] = {"key": key}
    return entry


def _answered(row: Row) -> str | None:
    if row.kind != RowKind.RESPONSE or row.body is None:
        return None
    text: str = json.loads(row.body)["candidates"][0]["content"]["parts"][0]["text"]
    return text


def test_gemini_responses_without_keys_one_missing_are_matched_to_no_input() -> None:
    # The third response is missing: every place after it would name the wrong request.
    keys = ["a", "b", "c", "d"]
    rows = _gemini_inline([_answer_of(key, False) for key in "abd"], keys)
    assert [rows[key].kind for key in keys] == [RowKind.MISSING] * 4
    assert rows["a"].note == (
        "the job ended completed without a response for this request (3 responses came "
        "without the key of a request, and a response is matched by its key alone)"
    )


def test_a_gemini_response_without_a_key_among_keyed_ones_is_matched_to_no_input() -> None:
    # Out of order, and the first without its key: its place names "a", its answer is "d's".
    keys = ["a", "b", "c", "d"]
    entries = [_answer_of("d", False), *(_answer_of(key, True) for key in "cba")]
    rows = _gemini_inline(entries, keys)
    assert {key: _answered(row) for key, row in rows.items()} == {
        "a": "a",
        "b": "b",
        "c": "c",
        "d": None,
    }
    assert rows["d"].kind == RowKind.MISSING
    assert rows["d"].note is not None and "1 response came without the key" in rows["d"].note


def test_gemini_responses_without_keys_in_the_requests_order_are_matched_to_no_input() -> None:
    # One for each request, in their order, and the order known: still not read by place.
    keys = ["a", "b", "c"]
    rows = _gemini_inline([_answer_of(key, False) for key in keys], keys, in_order=True)
    assert {key: _answered(row) for key, row in rows.items()} == dict.fromkeys(keys)
    assert [rows[key].kind for key in keys] == [RowKind.MISSING] * 3


def test_gemini_responses_without_keys_are_not_read_by_a_place_the_run_does_not_know() -> None:
    # A job another run submitted: its inputs come in this run's order, not the requests'.
    keys = ["a", "b", "c"]
    rows = _gemini_inline([_answer_of(key, False) for key in keys], keys, in_order=False)
    assert [rows[key].kind for key in keys] == [RowKind.MISSING] * 3


@given(
    count=st.integers(1, 8),
    data=st.data(),
)
def test_no_gemini_response_is_given_to_another_request(count: int, data: st.DataObject) -> None:
    # Responses in any order, some missing, some without their keys: a request gets its own
    # answer or none, except where nothing can tell (no keys, one for each, out of order).
    keys = [f"k{n}" for n in range(count)]
    kept = data.draw(st.lists(st.sampled_from(keys), unique=True), label="kept")
    order = data.draw(st.permutations(kept), label="order")
    keyed = data.draw(st.lists(st.booleans(), min_size=len(order), max_size=len(order)))
    in_order = data.draw(st.booleans(), label="in_order")
    entries = [_answer_of(key, k) for key, k in zip(order, keyed, strict=True)]
    rows = _gemini_inline(entries, keys, in_order)
    assert set(rows) == set(keys)
    untold = in_order and not any(keyed) and len(order) == count and list(order) != keys
    for key, row in rows.items():
        answered = _answered(row)
        if not untold:
            assert answered in (key, None)
        if key in order and keyed[order.index(key)]:
            assert answered == key  # its key always finds it
