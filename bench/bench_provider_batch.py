"""What a provider-batch run costs the client per input: building and keying the inputs,
the ledger's claims and job records, encoding the job, reading and validating each row.
Run by hand: this script alone (the fake batch server of the tests runs in another
process, so its own work is not counted).

For each size, one run over `doc N` inputs against the fake's OpenAI face, the job read
every 10 ms and finished at its second read: the figures are the client's CPU time per
input (`time.process_time`, the run's threads included) and the wall time, with the
server's answers outside both.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

import allama

SIZES = (1_000, 10_000)
SERVER = Path(__file__).resolve().parent.parent / "tests" / "_provider_batch_server.py"


class Doc(BaseModel):
    n: int


def _serve() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, str(SERVER)], stdout=subprocess.PIPE, text=True, cwd=SERVER.parent
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    found = re.search(r"http://\S+", line)
    assert found is not None, line
    return process, found.group(0)


def _numbers(count: int) -> list[int]:
    return [n for n in range(count * 2) if n % 50 not in (7, 13, 23)][:count]


def main() -> None:
    process, url = _serve()
    try:
        provider = allama.provider("openai", base_url=f"{url}/v1", api_key="sk-bench")
        request = allama.ChatRequest("gpt-4o-mini").system("Read the number.")
        print(f"{'inputs':>8} {'wall s':>8} {'CPU s':>8} {'CPU/input':>11} {'ledger':>10}")
        for size in SIZES:
            with tempfile.TemporaryDirectory() as folder:
                ledger = Path(folder) / "bench.sqlite"
                docs = [f"doc {n}" for n in _numbers(size)]
                began, cpu = time.perf_counter(), time.process_time()
                run = allama.batch(
                    provider,
                    Doc,
                    docs,
                    request=request,
                    ledger=ledger,
                    provider_batch=True,
                    poll_interval=0.01,
                )
                results = list(run)
                wall, used = time.perf_counter() - began, time.process_time() - cpu
                assert sum(r.ok for r in results) == size, run.summary.lines()
                kib = ledger.stat().st_size / 1024
                print(
                    f"{size:>8} {wall:>8.2f} {used:>8.2f} {used / size * 1e6:>9.0f} µs "
                    f"{kib:>7.0f} KiB"
                )
    finally:
        process.terminate()
        process.wait()


if __name__ == "__main__":
    main()
