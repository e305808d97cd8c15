"""The examples run as the README says, and print what they promise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_quickstart_extracts_every_document_and_reports_the_bookkeeping() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    out = result.stdout
    for name in ("acme.txt", "bakery.txt", "northwind.txt"):
        assert f"{name}:\n  value        Invoice(number='AA-000'" in out
    assert out.count("mode=native passes=1 enforcement=exact") == 3
    assert "mode=native enforcement=exact coverage=encoding" in out
    assert "  finished: AA-000" in out
    assert (
        "mock: the model stopped at the output token limit before finishing the structured "
        "output (`native` mode)"
    ) in out
    assert "passes=1 usage=Usage(input_tokens=812, output_tokens=1000" in out
