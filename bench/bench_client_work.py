"""What allama does besides HTTP, per call: the extraction against a transport that answers
in process with the same bodies `bench_client_overhead.py`'s server sends, against the
floor's own work on the same body (`json.loads`, the answer's text taken out, one pydantic
validation). Run by hand: `./run bench`, or this script alone (optionally with endpoint
names or answer labels, as `bench_client_overhead.py` takes them).

Without a server and sockets in the measurement this is steadier than the figures over
HTTP on a shared machine, and it is the part of the per-call overhead allama can change:
encoding the request with its schema, decoding the response into allama's types, the
extraction's record and the strict-JSON check. CPU time per call, best of `ROUNDS` short
runs, the floor and allama measured in turn.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

from bench_client_overhead import BODIES, ENDPOINTS, PAYLOADS, Endpoint
from pydantic import BaseModel

import allama
from allama import Transport
from allama.adapters._http import HttpRequest, HttpResponse

ROUNDS = 25


class Canned(Transport):
    """Answers every request with one body, without HTTP."""

    def __init__(self, body: bytes) -> None:
        super().__init__()
        self._body = body

    def send(self, request: HttpRequest) -> HttpResponse:
        return HttpResponse(200, {"content-type": "application/json"}, self._body)


def _best(floor: Callable[[], None], ours: Callable[[], None], calls: int) -> tuple[float, float]:
    """CPU seconds per call, best of `ROUNDS` for each, in turn."""
    floor()
    ours()
    floor_best = ours_best = float("inf")
    for _ in range(ROUNDS):
        began = time.process_time()
        floor()
        floor_best = min(floor_best, time.process_time() - began)
        began = time.process_time()
        ours()
        ours_best = min(ours_best, time.process_time() - began)
    return floor_best / calls, ours_best / calls


def measure(endpoint: Endpoint, index: int, tp: type[BaseModel], calls: int) -> tuple[float, float]:
    body = BODIES[f"/{index}{endpoint.root}{endpoint.path}"]
    provider = allama.provider(
        endpoint.preset,
        base_url=f"http://127.0.0.1:1/{index}{endpoint.root}",
        api_key="k",
        transport=Canned(body),
        **dict(endpoint.options),
    )
    request = allama.ChatRequest(endpoint.model).user("Ada published the first program in 1843.")
    text = endpoint.text
    validate = tp.model_validate_json

    def floor() -> None:
        for _ in range(calls):
            validate(text(json.loads(body)))

    def ours() -> None:
        for _ in range(calls):
            allama.extract(provider, tp, request)

    return _best(floor, ours, calls)


def main() -> None:
    only = set(sys.argv[1:])
    print(f"CPU per call without HTTP, best of {ROUNDS}, Python {sys.version.split()[0]}")
    print("| answer | endpoint | floor | allama | allama over the floor |")
    print("|---|---|---:|---:|---:|")
    # A first measurement thrown away: the process's first seconds run slower here.
    _, (first_tp, _, first_calls) = next(iter(PAYLOADS.items()))
    measure(ENDPOINTS[0], 0, first_tp, first_calls)
    for index, (label, (tp, _, calls)) in enumerate(PAYLOADS.items()):
        for endpoint in ENDPOINTS:
            name = endpoint.label or endpoint.preset
            if only and not only & {endpoint.enforcement, endpoint.preset, name, label}:
                continue
            floor, ours = measure(endpoint, index, tp, max(calls // 2, 50))
            print(
                f"| {label} | `{name}` ({endpoint.enforcement}) | {floor * 1e6:.1f} µs | "
                f"{ours * 1e6:.1f} µs | {(ours - floor) * 1e6:.1f} µs |"
            )


if __name__ == "__main__":
    main()
