"""Import time: `import allama` and a ready provider, against the floor of its dependencies.

Run by hand: `python bench/bench_import.py [RUNS]` (or `./run bench`). Each row is a fresh
interpreter, timed from spawn to exit, best of RUNS (default 15), so the rows of one run
compare on the same (possibly busy) machine. The floor is what any allama call needs
anyway: `httpx2` and `pydantic` imported and an `httpx2.Client` made. The first-use rows
show the cost that imports made lazily moved to the first call that needs them.
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
        "`import allama` + first `allama.extract` against `provider('openai')` (a mock transport)",
        OPENAI,
    ),
    ("`import allama` + first `allama.extract` against `allama.mock.TestProvider`", EXTRACT),
)


def _once(code: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for _, code in ROWS:
        _once(code, env)  # writes the bytecode cache
    best = [float("inf")] * len(ROWS)
    for _ in range(runs):  # round robin, so that a busy spell touches every row alike
        for index, (_, code) in enumerate(ROWS):
            best[index] = min(best[index], _once(code, env))
    floor = best[1]
    print(f"fresh interpreter, spawn to exit, best of {runs} (ms)")
    print("| run | ms | over the floor |")
    print("|---|---|---|")
    for index, ((label, _), ms) in enumerate(zip(ROWS, best, strict=True)):
        over = "" if index < 2 else f"{ms - floor:+.0f}"
        print(f"| {label} | {ms:.0f} | {over} |")


if __name__ == "__main__":
    main()
