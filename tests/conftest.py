"""Test settings shared by the whole suite.

Property tests are derandomized by default, so that a run on a clean machine explores the
same examples as the last one and passes or fails the same way. Set
`ALLAMA_HYPOTHESIS_PROFILE=explore` to search with fresh random examples instead.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["_seed_support", "_provider_batch_server"]
"""The seed ports' `run` fixture (sync and async forms of each test), and the fake batch
APIs' `server`."""

settings.register_profile(
    "deterministic",
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "explore",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("ALLAMA_HYPOTHESIS_PROFILE", "deterministic"))


@pytest.fixture(autouse=True, scope="session")
def ctrl_c_handled() -> Iterator[None]:
    """Ctrl-C raising KeyboardInterrupt, for a suite started ignoring it (`nohup pytest &`
    from a script starts it so): `allama batch run` keeps a signal it was started ignoring,
    so the tests that Ctrl-C it in this process would find it lost, and a run whose
    provider job is held would wait forever."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
