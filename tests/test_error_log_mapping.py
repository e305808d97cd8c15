"""An error's log view is a mapping a log call takes as it is: iterated, looked into, made
a dict (it was a view with `[]` alone, which Python iterated by index: `KeyError: 0`)."""

from __future__ import annotations

import json
import logging

import pytest

from allama.errors import RateLimitedError


def test_an_errors_log_view_is_a_read_only_mapping(caplog: pytest.LogCaptureFixture) -> None:
    error = RateLimitedError("slow down", retry_after=3.0).with_provider("openai")
    log = error.as_log()
    assert dict(log) == log.to_dict()
    assert "kind" in log and log["kind"] == "rate_limited"
    assert list(log) == list(log.to_dict()) and len(log) == len(log.to_dict())
    assert json.loads(json.dumps(dict(log))) == log.to_dict()
    with caplog.at_level(logging.ERROR):
        logging.getLogger("app").error("call failed", extra={"error": log})
    assert caplog.records[0].error is log  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        log["kind"] = "other"  # type: ignore[index]
