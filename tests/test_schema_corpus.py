"""Every real-world schema of the corpus through every dialect, and the never-narrower
property on instances generated from a fixed sample of them.

The corpus (3,650 schemas from JSONSchemaBench) lives outside the repository; set
`ALLAMA_SCHEMA_CORPUS` to its directory, or the tests skip with the reason.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument, Unsatisfiable
from jsonschema.exceptions import SchemaError as JsonSchemaError

from _schema_support import (
    DIALECTS,
    STRICT_NULLS,
    UNCHANGED,
    corpus_dir,
    corpus_files,
    fill_nulls,
    instances,
    original_reading,
    original_validator,
    rewritten_reading,
    strip_nulls,
    whole_floats_as_ints,
)
from allama.schema import normalize_strict_nulls
from allama.schema._errors import SchemaError
from allama.types import WarningKind

FILES = corpus_files()
pytestmark = pytest.mark.skipif(
    not FILES, reason=f"no schema corpus at {corpus_dir()} (set ALLAMA_SCHEMA_CORPUS)"
)
SAMPLE_EVERY = 25
"""Every 25th file of the sorted corpus (146 schemas) is the never-narrower sample."""


@pytest.fixture(scope="module")
def corpus() -> list[tuple[str, Any]]:
    return [(f"{p.parent.name}/{p.name}", json.loads(p.read_text())) for p in FILES]


def test_every_schema_goes_through_every_dialect(corpus: list[tuple[str, Any]]) -> None:
    refused: Counter[str] = Counter()
    for name, dialect in DIALECTS.items():
        for path, schema in corpus:
            try:
                rewrite = dialect(schema)
            except SchemaError as error:
                refused[name] += 1
                assert f"`{error.pointer}`" in str(error), (path, str(error))
                continue
            assert isinstance(rewrite.schema, dict), (name, path)
            for note in rewrite.notes:
                assert note.pointer.startswith("/"), (name, path, note)
                assert f"`{note.pointer}`" in note.message, (name, path, note)
    # the corpus is valid JSON Schema but for one file; every dialect refuses the same ones
    assert len(set(refused.values())) <= 1, refused
    assert all(count <= 5 for count in refused.values()), refused


def test_the_corpus_outcomes_are_what_they_were(corpus: list[tuple[str, Any]]) -> None:
    """A few fixed counts: a change in a dialect's rules shows here first."""
    outcomes: dict[str, Counter[str]] = {}
    for name in ("passthrough", "json_object_fallback", "grammar_engine"):
        counts: Counter[str] = Counter()
        for _, schema in corpus:
            try:
                notes = DIALECTS[name](schema).notes
            except SchemaError:
                counts["refused"] += 1
                continue
            kinds = {note.kind for note in notes}
            counts[
                "not_enforced"
                if WarningKind.UNSUPPORTED in kinds
                else "approximate"
                if kinds
                else "exact"
            ] += 1
        outcomes[name] = counts
    total = len(corpus)
    assert outcomes["passthrough"] == Counter(approximate=total)
    assert outcomes["json_object_fallback"] == Counter(not_enforced=total)
    assert outcomes["grammar_engine"]["not_enforced"] == 0


def _checkable(schema: Any) -> bool:
    """Schemas the test's validator and generator can read: local refs, Python regexes."""
    if not isinstance(schema, Mapping):
        return False
    text = json.dumps(schema)
    if re.search(r'"\$ref": "(?!#)', text):
        return False
    try:
        original_validator(schema).check_schema(schema)
    except JsonSchemaError:
        return False
    for pattern in re.findall(r'"pattern": ("(?:[^"\\]|\\.)*")', text):
        try:
            re.compile(json.loads(pattern))
        except re.error:
            return False
    return True


def _sample() -> list[tuple[str, Any]]:
    chosen = []
    for path in FILES[::SAMPLE_EVERY]:
        schema = json.loads(path.read_text())
        if _checkable(schema):
            chosen.append((f"{path.parent.name}/{path.name}", schema))
    return chosen


SAMPLE = _sample() if FILES else []


def test_the_sample_is_large_enough() -> None:
    assert len(SAMPLE) >= 120, len(SAMPLE)


def _check_schema(schema: Mapping[str, Any]) -> bool:
    """Never narrower on a few generated instances; `False` when none can be generated."""
    rewrites = {}
    for name, dialect in DIALECTS.items():
        try:
            rewrites[name] = dialect(schema)
        except SchemaError:
            return False

    @settings(
        max_examples=3,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(instance=instances(schema))
    def check(instance: Any) -> None:
        for name, rewrite in rewrites.items():
            reading = rewritten_reading(name, schema, rewrite.schema)
            sent = fill_nulls(schema, instance) if name in STRICT_NULLS else [instance]
            assert any(reading.is_valid(s) for s in sent), (name, rewrite.schema, sent)

    try:
        check()
    except (Unsatisfiable, InvalidArgument):
        return False
    return True


def test_no_rewrite_of_a_sample_schema_is_narrower() -> None:
    checked = [path for path, schema in SAMPLE if _check_schema(schema)]
    assert len(checked) >= 100, len(checked)


def _check_exact(schema: Mapping[str, Any]) -> bool:
    """Exact rewrites accept nothing more, on a few instances of each; `False` when none
    of them could be generated."""
    exact = {name: d(schema) for name, d in DIALECTS.items() if name not in UNCHANGED}
    checks = [
        (name, rewritten_reading(name, schema, rewrite.schema))
        for name, rewrite in exact.items()
        if rewrite.exact
    ]
    if not checks:
        return False
    original = original_reading(schema)
    draft_4 = any(d in str(schema.get("$schema", "")) for d in ("draft-03", "draft-04"))
    strategies = [instances(reading.schema, reading) for _, reading in checks]

    @settings(
        max_examples=3,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        for (name, _), strategy in zip(checks, strategies, strict=True):
            instance = data.draw(strategy)
            received = strip_nulls(schema, instance) if name in STRICT_NULLS else instance
            if draft_4:
                received = whole_floats_as_ints(received)
            errors = original.errors(received)
            assert not errors, (name, exact[name].schema, received, errors)
            if name in STRICT_NULLS:  # the library's normalisation finds the same stand-ins
                ours = normalize_strict_nulls(instance, dict(schema))
                ours = whole_floats_as_ints(ours) if draft_4 else ours
                assert not original.errors(ours), (name, exact[name].schema, instance, ours)

    try:
        check()
    except (Unsatisfiable, InvalidArgument):
        return False
    return True


def test_an_exact_rewrite_of_a_sample_schema_accepts_nothing_more() -> None:
    checked = [path for path, schema in SAMPLE if _check_exact(schema)]
    assert len(checked) >= 80, len(checked)
