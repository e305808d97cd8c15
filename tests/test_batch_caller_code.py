"""The caller's code in a batch run: the iterable of inputs, the label and request
functions and the extractor it hands over, used as a plain loop would use them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import allama
from allama import ChatRequest, ChatResponse
from allama.mock import ChatResponseBuilder, FunctionProvider


class Row(BaseModel):
    n: int


def _answer(request: ChatRequest) -> ChatResponse:
    text = request.messages[-1].text() or ""
    return ChatResponseBuilder().text(json.dumps({"n": int(text.split()[1])})).build()


def _one_row_object(count: int) -> Iterator[dict[str, Any]]:
    """A reader that gives one object again for each row, updated in place (as some
    cursors and CSV readers do)."""
    row: dict[str, Any] = {}
    for i in range(count):
        row["id"] = i
        row["text"] = f"doc {i}"
        yield row


async def _one_row_object_async(count: int) -> AsyncIterator[dict[str, Any]]:
    for row in _one_row_object(count):
        await asyncio.sleep(0)
        yield row


def _build(row: dict[str, Any]) -> ChatRequest:
    return ChatRequest("m").system("Extract n.").user(row["text"])


def _label(row: dict[str, Any]) -> str:
    return f"id={row['id']}"


_ROWS = [(i, f"id={i}", i) for i in range(12)]


def test_a_reused_row_object_is_made_into_its_input_as_it_is_read_in_a_sync_run(
    tmp_path: Path,
) -> None:
    """A sync run reads a generator ahead in a thread: each row is labelled, built and
    keyed there before the next is read, so a row updated in place is not sent as a later
    one (rows were sent twice and others never, silently)."""
    for ledger in (None, tmp_path / "ledger.sqlite"):
        run = allama.batch(
            FunctionProvider(_answer),
            Row,
            _one_row_object(12),
            request=_build,
            label=_label,
            concurrency=3,
            ledger=ledger,
        )
        got = sorted((r.index, r.label, r.value.n if r.value else None) for r in run)
        assert got == _ROWS
        assert run.summary.duplicates == 0


@pytest.mark.parametrize("source", ["sync generator", "async generator"])
def test_a_reused_row_object_is_made_into_its_input_as_it_is_read_in_an_async_run(
    source: str,
) -> None:
    async def main() -> list[tuple[int, str, int | None]]:
        rows = _one_row_object(12) if source == "sync generator" else _one_row_object_async(12)
        run = allama.abatch(
            FunctionProvider(_answer), Row, rows, request=_build, label=_label, concurrency=3
        )
        return sorted([(r.index, r.label, r.value.n if r.value else None) async for r in run])

    assert asyncio.run(main()) == _ROWS


def test_an_async_label_function_is_refused_and_one_returning_a_coroutine_fails_its_input(
    recwarn: pytest.WarningsRecorder,
) -> None:
    """A label was the coroutine's `repr`, in the summary and the ledger, with a warning
    that it was never awaited."""
    provider = FunctionProvider(_answer)

    async def named(row: dict[str, Any]) -> str:
        return str(row["id"])

    with pytest.raises(TypeError) as refused:
        allama.batch(provider, Row, [{"id": 1, "text": "doc 1"}], request=_build, label=named)
    assert str(refused.value) == (
        "the label function is an async function, which the run does not await: pass a plain one"
    )
    (result,) = allama.batch(
        provider,
        Row,
        [{"id": 1, "text": "doc 1"}],
        request=_build,
        label=lambda row: named(row),  # type: ignore[arg-type,return-value]
    )
    assert (result.label, result.value) == ("#0", None)
    assert result.failure is not None
    assert (result.failure.kind, result.failure.message) == (
        "TypeError",
        "the label function raised TypeError: the label function returned a coroutine, not "
        "a name: it is an async function, which the run does not await; name inputs with a "
        "plain one",
    )
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


@pytest.mark.parametrize(
    ("extractor", "said"),
    [
        (allama.Extractor, "the class Extractor"),
        ({"retries": 1}, "a dict"),
    ],
)
def test_an_extractor_that_is_not_one_is_refused_when_the_run_is_made(
    extractor: Any, said: str
) -> None:
    """It was an `AttributeError` about allama's internals, and with a request function
    only once the results were read."""
    for request in (ChatRequest("m").system("Extract n."), _build):
        with pytest.raises(TypeError) as refused:
            allama.batch(
                FunctionProvider(_answer), Row, ["doc 1"], request=request, extractor=extractor
            )
        assert str(refused.value) == (
            f"extractor must be an Extractor (`Extractor(retries=1)`, say), or None, not {said}"
        )


def test_a_template_no_input_can_be_extracted_with_is_refused_before_anything_is_claimed(
    tmp_path: Path,
) -> None:
    """Every input was claimed, counted an attempt and finished `failed` in the ledger,
    nothing sent; a run again, the provider fixed as the error said, gave back the old
    failures (the keys were the same)."""
    from allama import CapabilitySupport, ChatCapability
    from allama.errors import ExtractionError

    provider = FunctionProvider(_answer)
    for capability in (ChatCapability.STRUCTURED_OUTPUT, ChatCapability.TOOL_CALLS):
        provider.with_chat_capability(capability, CapabilitySupport.UNSUPPORTED)
    ledger = tmp_path / "ledger.sqlite"
    with pytest.raises(ExtractionError) as refused:
        allama.batch(provider, Row, ["doc 1"], request=ChatRequest("m"), ledger=ledger)
    assert refused.value.kind == "extraction_unsupported"
    assert "has no mode to pick" in refused.value.message
    assert provider.call_count == 0 and not ledger.exists()


def test_an_exit_a_request_function_raises_in_the_reading_thread_is_raised_by_the_run() -> None:
    """Raised in the thread that reads a sync run's generator, it ended the thread with
    nothing handed over, and the run waited for its next input for ever."""

    def rows() -> Iterator[str]:
        yield from (f"doc {n}" for n in range(6))

    def build(document: str) -> ChatRequest:
        if document == "doc 3":
            raise SystemExit(3)
        return ChatRequest("m").system("Extract n.").user(document)

    run = allama.batch(FunctionProvider(_answer), Row, rows(), request=build, concurrency=2)
    with pytest.raises(SystemExit) as raised:
        list(run)
    assert raised.value.code == 3


def test_an_exit_a_request_function_raises_in_an_async_run_is_raised_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """asyncio raises it out of the loop, and logged it again as the run's task went,
    "Task exception was never retrieved", with its traceback."""
    import gc

    def build(document: str) -> ChatRequest:
        if document == "doc 2":
            raise SystemExit(2)
        return ChatRequest("m").system("Extract n.").user(document)

    async def main() -> None:
        run = allama.abatch(
            FunctionProvider(_answer), Row, [f"doc {n}" for n in range(4)], request=build
        )
        async for _ in run:
            pass

    with pytest.raises(SystemExit) as raised:
        asyncio.run(main())
    assert raised.value.code == 2
    del raised  # (its traceback holds the run, and its task)
    gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
