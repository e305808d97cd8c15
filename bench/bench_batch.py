"""Throughput of `allama.abatch` against a hand-written `asyncio.gather` over `aextract`
(the floor), at 1, 16 and 128 inputs in flight, with and without the ledger. Run by hand:
`./run bench`, or this script alone.

The server runs in another process and answers every chat completion after `LATENCY`
seconds, as a provider would. The floor is what a user writes by hand: a semaphore of the
same size and one `aextract` per input, no ledger, no retries, no rate limits. The figures
are wall time (best of `ROUNDS`, the runs in turn so that drift hits all alike, each round
begun by another of the three), beside the ratio of the best times the median of the
ratios of each round's runs (which a slow phase of the machine lasting seconds spoils
less), the client's CPU time per input (best of the same runs: at 128 in flight the client
is CPU-bound), and the ledger's own cost per input, measured apart: a claim and a finish
with a record through the run's ledger writer, at the same number in flight (the
difference of two whole runs' CPU is smaller than their noise here).

Two kinds of document: `line`, a one-line invoice answered with three fields (the least work
an extraction can be, where the batch's own work weighs most), and `page`, an invoice of
about 2.7 KB with 24 line items answered with all of them (3.5 KB of JSON), the size of
what a pipeline sends. Both at 128 in flight; `line` also at 1 and 16.

`--instructions` counts instead what the client executes at 128 in flight, which no phase
of the machine moves: each of the three runs under valgrind's callgrind, at two sizes, the
instructions per input being the difference over the difference in inputs (the process's
start, imports and warm-up cancel out). `--instructions page` counts the page-sized
documents. Needs `valgrind`; takes about ten minutes (`page`: about twenty).
`--ledger-parts` (after `--instructions line|page`) counts `abatch` and the ledger with parts
of its work left out instead (see `LEDGER_PARTS`).

`--latency MS,MS,... [line|page]` runs the three at 128 in flight with the server answering
after each of those latencies instead (1,280 documents, 4 rounds; `page` by default): how
much of the batch's and the ledger's cost shows in wall time as the client goes from
CPU-bound, at the 20 ms above, to waiting on the server, as it does at a model's latencies.

`--gc-threshold N` sets the garbage collector's first threshold (700 by default) for all
three runs alike: at 128 in flight a large part of each run's CPU time is the collector's,
and the ledger's share of it is the larger (its writes wait a turn of the loop for their
commit, and the values they hold are walked by the collections in that turn).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import json
import multiprocessing
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
from pydantic import BaseModel

import allama

LATENCY = 0.02
ROUNDS = 6
RUNS = ((1, 100, "line"), (16, 800, "line"), (128, 3000, "line"), (128, 3000, "page"))
"""(inputs in flight, inputs, kind of document)."""


class Invoice(BaseModel):
    number: str
    total: float
    paid: bool


class Party(BaseModel):
    name: str
    street: str
    city: str
    vat_id: str | None


class LineItem(BaseModel):
    sku: str
    description: str
    quantity: int
    unit_price: float
    amount: float


class PageInvoice(BaseModel):
    number: str
    issued: str
    due: str
    currency: str
    seller: Party
    buyer: Party
    items: list[LineItem]
    subtotal: float
    tax: float
    total: float
    paid: bool


ITEMS = 24
"""Line items on a page-sized invoice."""


def _item(n: int) -> LineItem:
    return LineItem(
        sku=f"SKU-{4100 + n * 7}",
        description=f"Replacement filter cartridge, series {n % 5}, pack of {n % 4 + 2}",
        quantity=n % 9 + 1,
        unit_price=12.5 + n,
        amount=(n % 9 + 1) * (12.5 + n),
    )


def _page_answer() -> PageInvoice:
    items = [_item(n) for n in range(ITEMS)]
    subtotal = sum(item.amount for item in items)
    return PageInvoice(
        number="INV-2026-0412",
        issued="2026-04-12",
        due="2026-05-12",
        currency="EUR",
        seller=Party(
            name="Nordwerk Filtration GmbH",
            street="Hafenstrasse 12",
            city="Bremen",
            vat_id="DE811907654",
        ),
        buyer=Party(
            name="Clearwater Facilities Ltd", street="4 Mill Lane", city="Leeds", vat_id=None
        ),
        items=items,
        subtotal=subtotal,
        tax=round(subtotal * 0.19, 2),
        total=round(subtotal * 1.19, 2),
        paid=False,
    )


def _answer(content: str, prompt_tokens: int, completion_tokens: int) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "model": "gpt-4o-mini",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    ).encode()


VALUES = {
    "line": json.dumps({"number": "INV-1", "total": 12.5, "paid": True}),
    "page": _page_answer().model_dump_json(),
}
"""The value's JSON the server answers with, by kind of document."""
ANSWER = _answer(VALUES["line"], 120, 20)
PAGE_ANSWER = _answer(VALUES["page"], 1050, 720)
PAGE_PATH = b"/page/"
"""Requests under this path are answered with `PAGE_ANSWER`."""


def _serve(port_queue: Any, latency: float = LATENCY) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                answer = PAGE_ANSWER if PAGE_PATH in head[: head.index(b"\r\n")] else ANSWER
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                if length:
                    await reader.readexactly(length)
                await asyncio.sleep(latency)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(answer)}\r\n\r\n".encode()
                    + answer
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
        port_queue.put(server.sockets[0].getsockname()[1])
        async with server:
            await server.serve_forever()

    asyncio.run(main())


REQUEST = allama.ChatRequest("gpt-4o-mini").system("Extract the invoice.")


def make_provider(base: str, timeout: float | None = None) -> Any:
    """A provider whose connection pool keeps as many connections as are in flight (the
    default keeps 100 alive, and 128 in flight would open and close connections all run
    long, for the floor and the batch alike). `timeout` replaces the default limits."""
    limits = httpx2.Limits(max_connections=1000, max_keepalive_connections=256)
    transport = allama.Transport(limits=limits, timeout=timeout)
    return allama.provider("openai", api_key="sk-bench", base_url=base, transport=transport)


def documents(count: int, round_: int, kind: str = "line") -> list[str]:
    # Each round its own documents, so that a ledger never finds them finished.
    if kind == "page":
        return [_page(f"INV-{round_}-{n}", n) for n in range(count)]
    return [f"Invoice INV-{round_}-{n}: 12.50 EUR, paid." for n in range(count)]


def _page(number: str, n: int) -> str:
    """An invoice as the text of a scanned page: about 2.7 KB, different for each `n`."""
    lines = [
        "Nordwerk Filtration GmbH · Hafenstrasse 12 · 28217 Bremen · VAT DE811907654",
        "",
        "Clearwater Facilities Ltd",
        "4 Mill Lane",
        "Leeds LS1 4AB",
        "",
        f"INVOICE {number}        Date: 2026-04-{n % 28 + 1:02d}        Due: 30 days net",
        "",
        "SKU        Description                                        Qty   Unit      Amount",
    ]
    for i in range(ITEMS):
        item = _item(i + n % 3)
        lines.append(
            f"{item.sku:<10} {item.description:<50} {item.quantity:>3} "
            f"{item.unit_price:>8.2f} {item.amount:>10.2f}"
        )
    lines += [
        "",
        "Subtotal                                                              4,812.00",
        "VAT 19 %                                                                914.28",
        "TOTAL EUR                                                             5,726.28",
        "",
        "Please pay by bank transfer to IBAN DE89 3704 0044 0532 0130 00 quoting the invoice",
        "number. Late payments are charged interest at 9 percentage points over base rate.",
    ]
    return "\n".join(lines)


def model_for(kind: str) -> type[BaseModel]:
    return PageInvoice if kind == "page" else Invoice


def base_for(base: str, kind: str) -> str:
    """The provider's base URL for `kind`: the server answers by the path."""
    if kind != "page":
        return base
    origin, _, path = base.rpartition("/v1")
    return f"{origin}{PAGE_PATH.decode().rstrip('/')}/v1{path}"


async def floor(provider: Any, docs: list[str], concurrency: int, model: type[BaseModel]) -> None:
    slots = asyncio.Semaphore(concurrency)

    async def one(text: str) -> None:
        async with slots:
            await allama.aextract(provider, model, REQUEST.user(text))

    await asyncio.gather(*(one(text) for text in docs))


async def ours(
    provider: Any, docs: list[str], concurrency: int, ledger: str | None, model: type[BaseModel]
) -> None:
    run: allama.AsyncBatchRun[BaseModel] = allama.abatch(
        provider, model, docs, request=REQUEST, concurrency=concurrency, ledger=ledger
    )
    async for result in run:
        assert result.ok and not result.resumed, result  # a ledger of its own each run


RECORD = {
    "mode": "native",
    "passes": 1,
    "enforcement": "exact",
    "usage": {"input_tokens": 120, "output_tokens": 20},
    "cost": {"input": "0.000018", "output": "0.000012", "total": "0.00003", "currency": "USD"},
}


def ledger_cost(
    folder: str, concurrency: int, count: int, document: str = "line"
) -> tuple[float, float]:
    """Wall and CPU microseconds per input of the ledger's writes alone."""
    from allama.batch._ledger import Ledger, LedgerWriter, Status

    async def run() -> None:
        book = Ledger(Path(folder) / f"alone-{concurrency}-{document}.sqlite", settings={})
        writer = LedgerWriter(book)
        slots = asyncio.Semaphore(concurrency)
        value = VALUES[document]

        async def one(n: int) -> None:
            async with slots:
                await writer.claim(f"key-{n}", n, f"#{n}")
                await asyncio.sleep(0)
                await writer.finish(
                    f"key-{n}", status=Status.DONE, seconds=0.02, value=value, record=RECORD
                )

        await asyncio.gather(*(one(n) for n in range(count)))
        writer.close()
        book.close()

    wall, cpu = timed(run)
    return wall / count * 1e6, cpu / count * 1e6


KINDS = ("floor", "batch", "ledger")


async def run_kind(
    kind: str,
    provider: Any,
    docs: list[str],
    concurrency: int,
    ledger: str,
    model: type[BaseModel] = Invoice,
) -> None:
    if kind == "floor":
        await floor(provider, docs, concurrency, model)
    else:
        await ours(provider, docs, concurrency, ledger if kind == "ledger" else None, model)


def timed(fn: Any) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    asyncio.run(fn())
    return time.perf_counter() - wall, time.process_time() - cpu


def start_server(latency: float = LATENCY) -> tuple[Any, str]:
    queue: Any = multiprocessing.Queue()
    server = multiprocessing.Process(target=_serve, args=(queue, latency), daemon=True)
    server.start()
    return server, f"http://127.0.0.1:{queue.get()}/v1"


COUNTED = (300, 1300)
"""The two sizes of a counted run (inputs after the same warm-up of 200)."""
COUNTED_TIMEOUT = 120.0


LEDGER_PARTS = ("batch", "ledger-unwritten-unwaited", "ledger-unwritten", "ledger")
"""`--ledger-parts`: the ledger with its SQLite statements left out (`unwritten`: claims
granted, finishes dropped, no transaction), and with its writes done at once instead of in
the turn's shared commit (`unwaited`), to see what each part of it costs."""


def _leave_out(parts: str) -> None:
    from allama.batch import _ledger

    if "unwritten" in parts:
        _ledger.Ledger._claim = lambda self, key, position, label: _ledger.Claim(True, 1)  # type: ignore[method-assign]
        _ledger.Ledger._finish = lambda self, key, **outcome: None  # type: ignore[method-assign]
        _ledger.Ledger._transaction = lambda self: contextlib.nullcontext()  # type: ignore[method-assign,assignment,return-value]
    if "unwaited" in parts:

        def at_once(self: Any, write: Any) -> asyncio.Future[Any]:
            done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            done.set_result(write())
            return done

        _ledger.LedgerWriter._submit = at_once  # type: ignore[method-assign]


def counted(kind: str, count: int, base: str, folder: str, document: str) -> None:
    """One run for `--instructions`, in the process callgrind watches. Under valgrind the
    client runs some fifty times slower, and 128 connections opened at once can take longer
    than the default connect timeout (5 s): the counted runs allow two minutes."""
    ledger = str(Path(folder) / f"counted-{kind}-{document}-{count}.sqlite")
    if kind.startswith("ledger-"):
        _leave_out(kind)
        kind = "ledger"
    model = model_for(document)
    for docs in (documents(200, 99, document), documents(count, 0, document)):
        provider = make_provider(base_for(base, document), timeout=COUNTED_TIMEOUT)
        timed(functools.partial(run_kind, kind, provider, docs, 128, ledger, model))


def instructions(document: str, kinds: tuple[str, ...] = KINDS) -> None:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        sys.exit("--instructions needs valgrind (Debian: apt-get install valgrind)")
    server, base = start_server()
    print(
        f"instructions per input at 128 in flight, {document} documents, "
        f"server latency {LATENCY * 1000:.0f} ms"
    )
    found: dict[str, float] = {}
    base_kind = kinds[0]  # what the others are compared with
    with tempfile.TemporaryDirectory() as folder:
        for kind in kinds:
            totals = []
            for count in COUNTED:
                command = [valgrind, "--tool=callgrind", f"--callgrind-out-file={os.devnull}"]
                command += [sys.executable, __file__, "--counted", kind, str(count), base, folder]
                command.append(document)
                done = subprocess.run(command, capture_output=True, text=True)
                match = re.search(r"Collected : (\d+)", done.stderr)
                if done.returncode != 0 or match is None:
                    sys.exit(f"the counted {kind} run failed:\n{done.stderr[-3000:]}")
                totals.append(int(match.group(1)))
            found[kind] = (totals[1] - totals[0]) / (COUNTED[1] - COUNTED[0])
            ratio = found[kind] / found[base_kind]
            print(f"{kind:>7}: {found[kind] / 1e6:.3f} million, {ratio:.3f} times the {base_kind}")
    server.terminate()


HEADER = (
    f"{'floor s':>8} {'batch s':>8} {'+ledger s':>9} | "
    f"{'batch/floor':>11} {'ledger/floor':>12} | {'median batch':>12} {'median ledger':>13} | "
    f"{'CPU ms/input: floor':>19} {'batch':>6} {'+ledger':>7}"
)


def row(
    base: str, folder: str, concurrency: int, count: int, document: str, rounds: int
) -> tuple[str, float]:
    """The three runs, `rounds` times in turn: best wall times, their ratios, the medians of
    each round's ratios, and the best CPU time per input of each (a line under `HEADER`);
    and the share of a core the floor's client used (its CPU time over its wall time, in
    its fastest round: 1.00 is CPU-bound, where the batch's own work shows in full)."""
    model = model_for(document)
    best: dict[str, list[float]] = {"floor": [], "batch": [], "ledger": []}
    cpu: dict[str, list[float]] = {"floor": [], "batch": [], "ledger": []}
    for round_ in range(rounds):
        docs = documents(count, round_, document)
        # Each round starts with another of the three, so that whatever the order
        # favours (the first run after the last one's garbage) favours none.
        kinds = KINDS[round_ % 3 :] + KINDS[: round_ % 3]
        for kind in kinds:
            ledger = str(Path(folder) / f"ledger-{concurrency}-{document}-{count}-{round_}.sqlite")
            provider = make_provider(base_for(base, document))
            wall, used = timed(
                functools.partial(run_kind, kind, provider, docs, concurrency, ledger, model)
            )
            best[kind].append(wall)
            cpu[kind].append(used)
    f, b, led = (min(best[k]) for k in ("floor", "batch", "ledger"))
    paired = [
        statistics.median(x / y for x, y in zip(best[k], best["floor"], strict=True))
        for k in ("batch", "ledger")
    ]
    fc, bc, lc = (min(cpu[k]) / count * 1e3 for k in ("floor", "batch", "ledger"))
    line = (
        f"{f:>8.3f} {b:>8.3f} {led:>9.3f} | "
        f"{b / f:>11.2f} {led / f:>12.2f} | {paired[0]:>12.2f} {paired[1]:>13.2f} | "
        f"{fc:>19.2f} {bc:>6.2f} {lc:>7.2f}"
    )
    return line, cpu["floor"][best["floor"].index(f)] / f


SWEEP = (128, 1280, 4)
"""`--latency`: inputs in flight, inputs (each slot used ten times), rounds."""


def sweep(latencies: list[float], document: list[str]) -> None:
    """The runs at 128 in flight with the server answering after each of `latencies`: the
    batch's and the ledger's cost in wall time as the client goes from CPU-bound (128 calls
    answered sooner than the client does the work of 128 inputs) to waiting on the server,
    as it does at a model's latencies (seconds)."""
    kind = document[0] if document else "page"
    concurrency, count, rounds = SWEEP
    print(
        f"allama.abatch against asyncio.gather over aextract, {concurrency} in flight, "
        f"{count} {kind} documents, {rounds} rounds, by the server's latency"
    )
    print(f"{'latency':>8} | {HEADER} | {'floor busy':>10}")
    for latency in latencies:
        server, base = start_server(latency)
        # A folder for each latency: the same documents in a ledger of the last latency's
        # would be found finished.
        with tempfile.TemporaryDirectory() as folder:
            measured, busy = row(base, folder, concurrency, count, kind, rounds)
        print(f"{latency * 1000:>5.0f} ms | {measured} | {busy:>10.2f}")
        server.terminate()


def main() -> None:
    if sys.argv[1:2] == ["--counted"]:
        kind, size, base, folder, document = sys.argv[2:7]
        return counted(kind, int(size), base, folder, document)
    if sys.argv[1:2] == ["--instructions"]:
        document = sys.argv[2] if len(sys.argv) > 2 else "line"
        if document not in ("line", "page"):
            sys.exit(f"--instructions counts `line` or `page` documents, not {document!r}")
        return instructions(document, LEDGER_PARTS if "--ledger-parts" in sys.argv else KINDS)
    if sys.argv[1:2] == ["--latency"]:
        return sweep([float(ms) / 1000 for ms in sys.argv[2].split(",")], sys.argv[3:4])
    collector = ""
    if sys.argv[1:2] == ["--gc-threshold"]:
        # The collector's first threshold for all three runs alike (default 700): how much
        # of each run's time is the garbage collector's walks over young objects.
        gc.set_threshold(int(sys.argv[2]), *gc.get_threshold()[1:])
        collector = f", garbage collector's first threshold {gc.get_threshold()[0]}"
    server, base = start_server()
    latency = f"{LATENCY * 1000:.0f} ms"
    print(
        f"allama.abatch against asyncio.gather over aextract, server latency {latency}{collector}"
    )
    print(
        f"{'in flight':>9} {'inputs':>6} {'document':>8} | {HEADER} | {'ledger alone µs/input':>21}"
    )
    with tempfile.TemporaryDirectory() as folder:
        for concurrency, count, document in RUNS:
            measured, _ = row(base, folder, concurrency, count, document, ROUNDS)
            alone_wall, alone_cpu = ledger_cost(folder, concurrency, 2000, document)
            print(
                f"{concurrency:>9} {count:>6} {document:>8} | {measured} | "
                f"{alone_wall:>8.0f} wall {alone_cpu:>4.0f} CPU"
            )
    server.terminate()


if __name__ == "__main__":
    main()
