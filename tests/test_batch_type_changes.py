"""A batch's type whose schema cannot be written as JSON, or differs from an earlier run's.

An input's key holds the type's schema: a schema that differs in each process (a default
computed when the module is imported) matches no earlier run's keys, and the run says
where the schemas differ rather than send every input again without a word. The ledger
keeps each schema once, by its digest (the runs' `types`), not in every run's settings.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, create_model

import allama
from allama import ChatRequest
from allama.batch import BatchResult, BatchSummary, Ledger, input_key
from allama.batch._ledger import runs_settings
from allama.batch._run import schema_change
from allama.errors import InvalidRequestError
from allama.mock import MockProvider
from allama.schema import SchemaError, type_schema

TEMPLATE = ChatRequest("m").system("Read the ticket.")

DEFAULT_ADVICE = (
    "; a default computed when the module is imported (`uuid4()`, `datetime.now()`) differs "
    "in each process: `Field(default_factory=...)` keeps it out of the schema"
)


def _changed(path: str) -> str:
    return (
        "the type `Ticket` has another schema than in an earlier run of the ledger with this "
        f"provider and model (at `{path}`), so an input of that run given to this one is not "
        "taken from the ledger: it is sent, and paid for, again"
    )


class Stamped(BaseModel):
    # Pydantic writes a model's own `json_schema_extra` as it is: a datetime stays one.
    model_config = ConfigDict(json_schema_extra={"examples": [{"when": datetime(2024, 1, 1)}]})
    when: datetime


def test_a_type_whose_schema_holds_no_json_is_a_schema_error_naming_its_place() -> None:
    provider = MockProvider.with_text('{"when": "2024-01-01T00:00:00Z"}')
    said = (
        "the type `Stamped` has a schema allama cannot read: the value at `/examples/0/when` "
        "is not JSON"
    )
    # Requests a function builds: nothing is planned before the keys are made.
    with pytest.raises(SchemaError) as raised:
        allama.batch(provider, Stamped, ["doc"], request=TEMPLATE.user, ledger=None)
    assert (str(raised.value), raised.value.pointer) == (said, "/examples/0/when")
    with pytest.raises(SchemaError) as raised:
        input_key(provider, Stamped, TEMPLATE.user("doc"))
    assert str(raised.value) == said
    # A template's run plans its call first, which the provider refuses as production does.
    with pytest.raises(InvalidRequestError) as refused:
        allama.batch(provider, Stamped, ["doc"], request=TEMPLATE, ledger=None)
    assert str(refused.value) == (
        "the response format `stamped` has a schema allama cannot read: the value at "
        "`/examples/0/when` is not JSON"
    )
    assert provider.call_count == 0


def _ticket(**defaults: Any) -> type[BaseModel]:
    """A type named `Ticket` with fields of these defaults, as a module imported again in
    another process defines it."""
    fields: dict[str, Any] = {name: (type(value), value) for name, value in defaults.items()}
    return create_model("Ticket", title=(str, ...), **fields)


def _run(
    tp: Any,
    ledger: Path,
    model: str = "m",
    inputs: tuple[str, ...] = ("first", "second"),
    request: Any = None,
) -> tuple[list[BatchResult[Any]], BatchSummary, list[str]]:
    provider = MockProvider([json.dumps({"title": "t"})] * len(inputs))
    run = allama.batch(
        provider,
        tp,
        list(inputs),
        request=ChatRequest(model).system("s") if request is None else request,
        ledger=ledger,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = list(run)
    said = [str(w.message) for w in caught if w.category is RuntimeWarning]
    return results, run.summary, said


def test_a_default_that_differs_in_each_process_is_named_once_an_input_is_sent(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "l.db"
    first = _ticket(seen=datetime(2024, 1, 1, tzinfo=UTC))
    results, summary, said = _run(first, ledger)
    assert [r.resumed for r in results] == [False, False] and said == []
    assert summary.schema_changed is None
    # The same type of the next process: its default, computed at import, is another.
    second = _ticket(seen=datetime(2024, 1, 2, tzinfo=UTC))
    results, summary, said = _run(second, ledger)
    expected = _changed("/properties/seen/default") + DEFAULT_ADVICE
    assert [r.resumed for r in results] == [False, False]  # sent again, as the key says
    assert said == [expected]
    assert summary.schema_changed == expected
    assert expected in summary.lines()
    # A run of the schema a run of the ledger has: its inputs are given, and nothing said.
    results, summary, said = _run(second, ledger)
    assert [r.resumed for r in results] == [True, True]
    assert (said, summary.schema_changed) == ([], None)
    # What is kept is the schema as keys hash it, once for the two runs that had it, by
    # the digest the runs' settings hold.
    book = Ledger(ledger, read_only=True)
    digests = [run["settings"]["types"] for run in book.runs()]
    assert [book.schema(digest) for digest in digests] == [
        json.dumps(type_schema(tp).schema, sort_keys=True) for tp in (first, second, second)
    ]
    assert ["schema" in run["settings"] for run in book.runs()] == [False] * 3
    book.close()
    with sqlite3.connect(ledger) as db:
        assert db.execute("SELECT digest FROM schemas ORDER BY rowid").fetchall() == [
            (digests[0],),
            (digests[1],),
        ]


def test_another_change_of_the_schema_is_named_without_the_advice_on_defaults(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "l.db"
    _run(_ticket(), ledger)
    # A field added: `properties` comes before `required`, which changes too.
    _, summary, said = _run(_ticket(note=""), ledger)
    assert said == [_changed("/properties/note")]
    assert summary.schema_changed == _changed("/properties/note")
    # The default of a field named `default` is a default; the field's type is not.
    _run(_ticket(default="a"), ledger)
    _, _, said = _run(_ticket(default="b"), ledger)
    assert said == [_changed("/properties/default/default") + DEFAULT_ADVICE]
    # A run of a version that kept the schema in its settings, and one kept by digest.
    mine = {"type": "Ticket", "provider": "mock", "model": "m", "types": "mine"}
    string = json.dumps({"properties": {"default": {"type": "string"}}})
    now = json.dumps({"properties": {"default": {"type": "integer"}}})
    theirs = [{**mine, "types": "theirs", "schema": string}]
    assert schema_change(theirs, mine, now) == _changed("/properties/default/type")
    by_digest = {"theirs": string}.get
    assert schema_change([{**mine, "types": "theirs"}], mine, now, by_digest) == _changed(
        "/properties/default/type"
    )
    # One of its digest: the same schema, its inputs given (the text is not read).
    assert schema_change([*theirs, mine], mine, now, by_digest) is None


def test_a_run_of_another_model_or_type_name_is_not_compared(tmp_path: Path) -> None:
    ledger = tmp_path / "l.db"
    _run(_ticket(seen=datetime(2024, 1, 1, tzinfo=UTC)), ledger, model="m")
    _, summary, said = _run(_ticket(seen=datetime(2024, 1, 2, tzinfo=UTC)), ledger, model="n")
    assert (said, summary.schema_changed) == ([], None)

    class Other(BaseModel):
        title: str
        seen: datetime = datetime(2024, 1, 3, tzinfo=UTC)

    _, summary, said = _run(Other, ledger, model="m")
    assert (said, summary.schema_changed) == ([], None)


def test_what_a_later_process_reads_of_the_ledger_names_the_change(tmp_path: Path) -> None:
    """The report's case: `ref: UUID = uuid4()` in a module, the run made twice in two
    processes. `schema_change` of the ledger's runs' settings is what the CLI can say before
    the run."""
    (tmp_path / "tickets.py").write_text(
        textwrap.dedent(
            """
            from uuid import UUID, uuid4
            from pydantic import BaseModel

            class Ticket(BaseModel):
                title: str
                ref: UUID = uuid4()
            """
        )
    )
    script = tmp_path / "run.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, warnings
            import allama
            from allama import ChatRequest
            from allama.mock import MockProvider
            from tickets import Ticket

            warnings.simplefilter("always")
            provider = MockProvider(['{"title": "t"}'])
            run = allama.batch(
                provider, Ticket, ["doc"], request=ChatRequest("m").system("s"),
                ledger=sys.argv[1],
            )
            (result,) = run
            print(result.resumed, provider.call_count)
            """
        )
    )
    ledger = tmp_path / "l.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    outcomes = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, str(script), str(ledger)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        outcomes.append((done.stdout, done.stderr))
    expected = _changed("/properties/ref/default") + DEFAULT_ADVICE
    assert outcomes[0] == ("False 1\n", "")
    assert outcomes[1][0] == "False 1\n"
    assert f"RuntimeWarning: {expected}\n" in outcomes[1][1]
    # Before a third run: the settings it would have are a run's of another schema again.
    (*earlier, last) = runs_settings(ledger)
    book = Ledger(ledger, read_only=True)
    schema = book.schema(last["types"])
    assert schema is not None
    assert schema_change(earlier, last, schema, book.schema) == expected
    book.close()


def test_a_run_that_sends_no_input_of_another_schema_says_nothing(tmp_path: Path) -> None:
    # The warning said at the start that inputs were "sent, and paid for, again", whatever
    # the inputs: it is said once an input the ledger does not hold is claimed.
    ledger = tmp_path / "l.db"
    old, new = _ticket(note=""), _ticket()
    # Requests a function builds (no model in the settings): their keys are a template's.
    _, summary, said = _run(new, ledger, request=ChatRequest("m").system("s").user)
    assert (said, summary.schema_changed) == ([], None)
    _run(old, ledger)
    results, summary, said = _run(new, ledger)
    assert [r.resumed for r in results] == [True, True]  # (the function's run's)
    assert (said, summary.schema_changed) == ([], None)
    results, summary, said = _run(_ticket(count=1), ledger, inputs=())
    assert (results, said, summary.schema_changed) == ([], [], None)
    # An input the ledger does not hold: said once, however many are sent.
    results, summary, said = _run(_ticket(count=2), ledger, inputs=("first", "third", "x"))
    assert [r.resumed for r in results] == [False, False, False]
    assert said == [_changed("/properties/count/default") + DEFAULT_ADVICE]
    assert summary.schema_changed == said[0]


def test_the_schema_is_kept_once_and_read_only_for_the_run_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each run kept its type's schema whole in its settings (660 KB for 20,000 choices),
    # which every run's start read back: 40 MB and a start three times as long at 60 runs.
    ledger = tmp_path / "l.db"
    read: list[str] = []
    schema_of = Ledger.schema

    def reading(self: Ledger, digest: str) -> str | None:
        read.append(digest)
        return schema_of(self, digest)

    monkeypatch.setattr(Ledger, "schema", reading)
    big = _ticket(code="c" * 10_000)
    for _ in range(3):
        _run(big, ledger)
    _run(_ticket(code="d" * 10_000), ledger)
    with sqlite3.connect(ledger) as db:
        settings = [len(text) for (text,) in db.execute("SELECT settings FROM runs")]
        kept = [len(text) for (text,) in db.execute("SELECT text FROM schemas")]
    assert len(settings) == 4 and max(settings) < 2_000
    assert len(kept) == 2 and min(kept) > 10_000
    assert len(read) == 1  # the last run's: one of the three before it, read once
    _, _, said = _run(big, ledger)  # a run of its digest: no text read
    assert len(read) == 1 and said == []


def test_a_ledger_whose_runs_kept_their_schema_in_their_settings_is_read(
    tmp_path: Path,
) -> None:
    # A ledger a version made that kept the schema in each run's settings, and none apart.
    ledger = tmp_path / "l.db"
    first = _ticket(seen=datetime(2024, 1, 1, tzinfo=UTC))
    _run(first, ledger)
    with sqlite3.connect(ledger) as db:
        (text,) = db.execute("SELECT settings FROM runs").fetchone()
        settings = {**json.loads(text), "schema": json.dumps(type_schema(first).schema)}
        db.execute("UPDATE runs SET settings = ?", (json.dumps(settings),))
        db.execute("DROP TABLE schemas")
    _, _, said = _run(_ticket(seen=datetime(2024, 1, 2, tzinfo=UTC)), ledger)
    assert said == [_changed("/properties/seen/default") + DEFAULT_ADVICE]
