"""A batch's type whose schema cannot be written as JSON, or differs from an earlier run's.

An input's key holds the type's schema: a schema that differs in each process (a default
computed when the module is imported) matches no earlier run's keys, and the run says
where the schemas differ rather than send every input again without a word.
"""

from __future__ import annotations

import json
import os
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
        f"provider and model (at `{path}`), so none of that run's inputs is given from it: "
        "they are sent, and paid for, again"
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
    tp: Any, ledger: Path, model: str = "m"
) -> tuple[list[BatchResult[Any]], BatchSummary, list[str]]:
    provider = MockProvider([json.dumps({"title": "t"})] * 2)
    run = allama.batch(
        provider, tp, ["first", "second"], request=ChatRequest(model).system("s"), ledger=ledger
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = list(run)
    said = [str(w.message) for w in caught if w.category is RuntimeWarning]
    return results, run.summary, said


def test_a_default_that_differs_in_each_process_is_named_where_the_run_starts(
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
    # What is kept is the schema as keys hash it.
    runs = Ledger(ledger).runs()
    assert [run["settings"]["schema"] for run in runs] == [
        json.dumps(type_schema(tp).schema, sort_keys=True) for tp in (first, second, second)
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
    mine = {"type": "Ticket", "provider": "mock", "model": "m"}
    theirs = [
        {**mine, "schema": json.dumps({"properties": {"default": {"type": "string"}}})},
    ]
    now = {**mine, "schema": json.dumps({"properties": {"default": {"type": "integer"}}})}
    assert schema_change(theirs, now) == _changed("/properties/default/type")


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
    assert schema_change(earlier, last) == expected
