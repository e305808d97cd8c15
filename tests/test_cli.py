"""`allama plan`: every preset and both modes, offline, as text and as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from allama.cli import main
from allama.cli._load import TypeNotFound, load_type
from allama.providers import PRESET_NAMES

ROOT = Path(__file__).resolve().parent.parent
INVOICE = f"{ROOT / 'examples' / 'invoice.py'}:Invoice"


def test_plan_json_covers_every_preset_and_both_modes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", INVOICE, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["type"] == "Invoice"
    seen = {(row["provider"], row["mode"]) for row in document["plans"]}
    assert seen == {(name, mode) for name in PRESET_NAMES for mode in ("native", "forced_tool")}
    by_key = {(row["provider"], row["mode"]): row for row in document["plans"]}
    # Endpoints that take a schema without saying what they enforce are approximate at best.
    assert by_key[("openai-compatible", "native")]["enforcement"] == "approximate"
    # Together does not honour strict mode: the plan says so, in the caller's terms.
    together = by_key[("together", "forced_tool")]
    assert together["enforcement"] == "not_enforced"
    assert any("`Invoice`" in note for note in together["notes"])
    assert all(
        row["enforcement"] in ("exact", "approximate", "not_enforced", "refused")
        for row in document["plans"]
    )


def test_plan_table_names_the_type_and_sends_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", INVOICE, "--provider", "groq"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Invoice: what each provider would enforce (nothing was sent)\n")
    lines = [line for line in out.splitlines() if line.startswith("groq ")]
    assert [line.split()[2] for line in lines] == ["native", "forced_tool"]


def test_plan_loads_a_type_from_a_module_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "allama.types:Usage", "--provider", "openai", "--json"]) == 0
    plans = json.loads(capsys.readouterr().out)["plans"]
    assert [row["mode"] for row in plans] == ["native", "forced_tool"]


def test_bad_references_get_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "no-colon"]) == 2
    assert "is not a type reference" in capsys.readouterr().err
    assert main(["plan", "missing/file.py:X"]) == 2
    assert "no such file: `missing/file.py`" in capsys.readouterr().err
    assert main(["plan", INVOICE, "--provider", "nope"]) == 2
    assert "unknown provider 'nope'" in capsys.readouterr().err
    with pytest.raises(TypeNotFound, match="has no `Nope`"):
        load_type(f"{ROOT / 'examples' / 'invoice.py'}:Nope")
