"""Test settings shared by the whole suite.

Property tests are derandomized by default, so that a run on a clean machine explores the
same examples as the last one and passes or fails the same way. Set
`ALLAMA_HYPOTHESIS_PROFILE=explore` to search with fresh random examples instead.
"""

from __future__ import annotations

import os

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
