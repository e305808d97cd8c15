"""Import time: `import allama` and a ready provider, against the floor of its dependencies.

Run by hand: `python bench/bench_import.py [RUNS]` (or `./run bench`). Each row is a fresh
interpreter, timed from spawn to exit (wall clock, and the CPU time it used, which a busy
machine disturbs less), best of RUNS (default 15), the rows taken in turn so that they
compare on the same machine. The floor is what any allama call needs anyway: `httpx2` and
`pydantic` imported and an `httpx2.Client` made; the row that starts with the floor shows
allama's own share on top of it. The first-use rows show the cost that imports made lazily
moved to the first call that needs them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

EXTRACT = """
import allama
from allama.mock import TestProvider
from pydantic import BaseModel

class Program(BaseModel):
    name: str
    year: int

request = allama.ChatRequest("m").user("Ada published the first program in 1843.")
allama.extract(TestProvider(), Program, request)
"""

OPENAI = """
import json

import httpx2
from pydantic import BaseModel

import allama

class Program(BaseModel):
    name: str
    year: int

ANSWER = json.dumps({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-5-mini",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": '{"name": "Ada Lovelace", "year": 1843}'}}],
    "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30},
}).encode()

def answer(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(200, content=ANSWER, headers={"content-type": "application/json"})

client = httpx2.Client(transport=httpx2.MockTransport(answer))
provider = allama.provider("openai", api_key="k", transport=allama.Transport(client=client))
request = allama.ChatRequest("gpt-5-mini").user("Ada published the first program in 1843.")
allama.extract(provider, Program, request)
"""

ROWS = (
    ("`python -c pass`", "pass"),
    (
        "`import httpx2, pydantic` + `httpx2.Client()` (the floor)",
        "import httpx2, pydantic\nhttpx2.Client()",
    ),
    ("`import allama`", "import allama"),
    (
        "`import allama` + `allama.provider('openai', api_key='k')`",
        "import allama\nallama.provider('openai', api_key='k')",
    ),
    (
        "the floor, then `import allama` + `allama.provider('openai', api_key='k')`",
        "import httpx2, pydantic\nhttpx2.Client()\nimport allama\n"
        "allama.provider('openai', api_key='k')",
    ),
    (
        "`import allama` + first `allama.extract` against `provider('openai')` (a mock transport)",
        OPENAI,
    ),
    ("`import allama` + first `allama.extract` against `allama.mock.TestProvider`", EXTRACT),
)


def _once(code: str, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) milliseconds of one fresh interpreter running `code`."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", code], env=env)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise subprocess.CalledProcessError(child.returncode, code)
    return wall * 1e3, (usage.ru_utime + usage.ru_stime) * 1e3


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for _, code in ROWS:
        _once(code, env)  # writes the bytecode cache
    wall = [float("inf")] * len(ROWS)
    cpu = [float("inf")] * len(ROWS)
    for _ in range(runs):  # round robin, so that a busy spell touches every row alike
        for index, (_, code) in enumerate(ROWS):
            one_wall, one_cpu = _once(code, env)
            wall[index] = min(wall[index], one_wall)
            cpu[index] = min(cpu[index], one_cpu)
    print(f"fresh interpreter, spawn to exit, best of {runs} (ms)")
    print("| run | wall | over the floor | CPU | over the floor |")
    print("|---|---|---|---|---|")
    for index, (label, _) in enumerate(ROWS):
        over = (
            ("", "")
            if index < 2
            else (f"{wall[index] - wall[1]:+.0f}", f"{cpu[index] - cpu[1]:+.0f}")
        )
        print(f"| {label} | {wall[index]:.0f} | {over[0]} | {cpu[index]:.0f} | {over[1]} |")


if __name__ == "__main__":
    main()
