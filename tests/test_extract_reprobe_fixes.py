"""Extraction, as a second round of probes found it wrong:

- Two distinct numbers too large for a float, in a set of `Decimal`s, were refused: each
  was read a second time as the same largest float, the set of those held one item, and
  the readings did not match. Each now stands in as a float of its own.
- Two keys the map's key type reads as one (`"Apples"` and `"apples"` to a lowered string,
  `"1"` and `"01"` to an int) kept the last value and dropped the other, under an exact
  record too. Refused now as a key written twice is: a parse error, asked again on a retry.
- A plan through a `FailoverProvider` that moves on past a refusal before sending
  (`failover_on_unsupported`) dry-ran the first provider alone and raised its refusal, where
  the call succeeds on the next: the plan is now of the provider the call goes to.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any

import pytest
from pydantic import AliasChoices, AliasPath, BaseModel, Field, StringConstraints
from pydantic.dataclasses import dataclass as pydantic_dataclass
from tests._native_wire import answer, extract_through
from tests._recording import provider
from typing_extensions import TypedDict

import allama
from allama import ChatRequest, ExtractionMode, Extractor, ParseError, SchemaEnforcement
from allama.errors import UnsupportedError
from allama.mock import MockProvider
from allama.types import RequestField, UnsupportedPolicy, ValidationCoverage
from allama.wrappers import FailoverProvider, RetryingProvider

REQUEST = ChatRequest("gpt-4.1-mini").user("the record")


def _extract(tp: Any, output: str) -> Any:
    return allama.extract(MockProvider([output]), tp, REQUEST).value


def _refusal(tp: Any, output: str) -> tuple[str, str | None]:
    with pytest.raises(ParseError) as raised:
        allama.extract(MockProvider([output]), tp, REQUEST)
    return raised.value.detail, raised.value.path


# Numbers too large for a float, two of them in a set of `Decimal`s.


class Amounts(BaseModel):
    s: set[Decimal]


class Frozen(BaseModel):
    s: frozenset[Decimal]


@pytest.mark.parametrize(
    ("tp", "output", "held"),
    [
        (Amounts, '{"s": [1e999, 2e999]}', {Decimal("1e999"), Decimal("2e999")}),
        (
            Frozen,
            '{"s": [1e999, 2e999, -3e999]}',
            {Decimal("1e999"), Decimal("2e999"), Decimal("-3e999")},
        ),
        # The largest float itself beside them: a stand-in is no number the output wrote.
        (
            Amounts,
            '{"s": [1e999, 1.7976931348623157e308, 2e999]}',
            {Decimal("1e999"), Decimal("1.7976931348623157e308"), Decimal("2e999")},
        ),
    ],
)
def test_distinct_numbers_too_large_for_a_float_are_read_as_their_decimals(
    tp: Any, output: str, held: set[Decimal]
) -> None:
    value = _extract(tp, output)
    assert value.s == held


def test_the_same_number_written_twice_too_large_for_a_float_is_one_decimal() -> None:
    # `1e999` and `10e998` are one number, as pydantic reads them; `2e999` another.
    value = _extract(Amounts, '{"s": [1e999, 10e998, 2e999]}')
    assert value.s == {Decimal("1e999"), Decimal("2e999")}
    assert value == Amounts.model_validate_json('{"s": ["1e999", "10e998", "2e999"]}')


# Two keys a map's key type reads as one key.

Lower = Annotated[str, StringConstraints(to_lower=True)]
Stripped = Annotated[str, StringConstraints(strip_whitespace=True)]


class Stock(BaseModel):
    counts: dict[Lower, int]


class Shelf(TypedDict):
    name: str


class Row(BaseModel):
    shelf: Shelf
    counts: dict[Lower, int] = {}


class Rows(BaseModel):
    rows: list[Row]


@pytest.mark.parametrize(
    ("tp", "output", "detail", "path"),
    [
        (
            Stock,
            '{"counts": {"Apples": 3, "apples": 5}}',
            "the keys `Apples` and `apples` are the same key to the type in the object at `counts`",
            "counts",
        ),
        (
            dict[Stripped, int],
            '{"abc": 1, " abc ": 2}',
            "the keys `abc` and ` abc ` are the same key to the type in the object",
            None,
        ),
        (
            dict[int, int],
            '{"1": 1, "2": 2, "01": 3}',
            "the keys `1` and `01` are the same key to the type in the object",
            None,
        ),
        (
            dict[bool, int],
            '{"true": 1, "1": 2}',
            "the keys `true` and `1` are the same key to the type in the object",
            None,
        ),
        (
            Rows,
            '{"rows": [{"shelf": {"name": "a"}, "counts": {"x": 1}},'
            ' {"shelf": {"name": "b"}, "counts": {"X": 1, "x": 2}}]}',
            "the keys `X` and `x` are the same key to the type in the object at `rows[1].counts`",
            "rows[1].counts",
        ),
    ],
)
def test_two_keys_the_type_reads_as_one_are_refused(
    tp: Any, output: str, detail: str, path: str | None
) -> None:
    assert _refusal(tp, output) == (detail, path)


def test_keys_read_as_one_are_refused_under_an_exact_record() -> None:
    with pytest.raises(ParseError) as raised:
        extract_through("gemini", Stock, '{"counts": {"Apples": 3, "apples": 5}}')
    error = raised.value
    assert (error.detail, error.path) == (
        "the keys `Apples` and `apples` are the same key to the type in the object at `counts`",
        "counts",
    )
    assert (error.metadata.mode, error.metadata.enforcement) == (
        ExtractionMode.NATIVE,
        SchemaEnforcement.EXACT,
    )


def test_keys_read_as_one_are_asked_again_as_a_key_written_twice_is() -> None:
    provider_ = MockProvider(
        ['{"counts": {"Apples": 3, "apples": 5}}', '{"counts": {"apples": 8}}']
    )
    got = Extractor(retries=1).extract(provider_, Stock, REQUEST)
    assert got.value == Stock(counts={"apples": 8})
    assert got.metadata.passes == 2
    # The model is told what was wrong, as for a key written twice.
    told = provider_.requests[1].messages[-1].text()
    assert "the keys `Apples` and `apples` are the same key to the type" in told


def test_keys_a_typed_dict_leaves_out_are_not_taken_for_keys_read_as_one() -> None:
    # A `TypedDict` beside the map keeps its declared keys alone (undeclared keys allowed):
    # fewer keys kept than written, none of them two keys read as one.
    allowing = Extractor(allow_undeclared_keys=True)
    output = '{"rows": [{"shelf": {"name": "a", "aisle": 4}, "counts": {"Apples": 3}}]}'
    got = allowing.extract(MockProvider([output]), Rows, REQUEST)
    assert got.value == Rows(rows=[Row(shelf={"name": "a"}, counts={"apples": 3})])
    merged = '{"rows": [{"shelf": {"name": "a", "aisle": 4}, "counts": {"A": 3, "a": 1}}]}'
    with pytest.raises(ParseError) as raised:
        allowing.extract(MockProvider([merged]), Rows, REQUEST)
    assert raised.value.path == "rows[0].counts"


@pydantic_dataclass
class Bin:
    counts: dict[int, int]


def test_keys_read_as_one_in_a_dataclass_are_refused() -> None:
    with pytest.raises(ParseError) as raised:
        allama.extract(MockProvider(['{"counts": {"1": 1, "01": 2}}']), Bin, REQUEST)
    assert raised.value.path == "counts"
    got = allama.extract(MockProvider(['{"counts": {"1": 1, "2": 2}}']), Bin, REQUEST)
    assert got.value == Bin(counts={1: 1, 2: 2})


class ReadByChoice(BaseModel):
    counts: dict[str, int] = Field(validation_alias=AliasChoices(AliasPath("x", 0), "y"))


def test_a_field_read_through_a_path_choice_is_not_taken_for_keys_read_as_one() -> None:
    # pydantic reads `x[0]` (the first choice); `y`, with more keys, is another object.
    output = '{"x": [{"a": 1}], "y": {"a": 1, "b": 2}}'
    allowing = Extractor(allow_undeclared_keys=True)
    got = allowing.extract(MockProvider([output]), ReadByChoice, REQUEST)
    assert got.value == ReadByChoice.model_validate_json(output)
    assert got.value.counts == {"a": 1}


# A plan through a failover that moves on past a refusal before sending.


class Person(BaseModel):
    name: str
    age: int


_REFUSED = (
    ChatRequest("gpt-5-mini")
    .user("Ada, 36.")
    .with_temperature(0.3)
    .with_unsupported_policy(UnsupportedPolicy.ERROR)
)


def _failover(*, on_unsupported: bool) -> tuple[FailoverProvider, Any, Any]:
    first, sent_first = provider("openai", (500, {}))
    second, sent_second = provider(
        "llama-cpp", (200, answer("llama-cpp", '{"name": "Ada", "age": 36}'))
    )
    both = FailoverProvider([first, second], failover_on_unsupported=on_unsupported)
    return both, sent_first, sent_second


@pytest.mark.parametrize("wrapped", [False, True])
def test_a_plan_fails_over_past_a_refusal_before_sending_as_the_call_does(wrapped: bool) -> None:
    both, sent_first, sent_second = _failover(on_unsupported=True)
    through = RetryingProvider(both) if wrapped else both
    planned = Extractor().plan(through, Person, _REFUSED)
    got = Extractor().extract(through, Person, _REFUSED)
    assert got.value == Person(name="Ada", age=36)
    assert (len(sent_first.bodies), len(sent_second.bodies)) == (0, 1)
    # The plan is the dry run of the provider the call went to: the figures it reported.
    assert (planned.mode, planned.enforcement, planned.degradations, planned.coverage) == (
        got.metadata.mode,
        got.metadata.enforcement,
        tuple(got.metadata.degradations),
        ValidationCoverage.ENCODING,
    )
    (note,) = planned.notes
    assert note.provider == "openai"
    assert note.is_about(RequestField.TEMPERATURE)
    assert note.message == (
        "`openai` refuses the call before sending (cannot send `temperature`: `gpt-5-mini` on "
        "OpenAI takes no `temperature` other than 1); the failover goes on to `llama-cpp`, "
        "as the call would, and the dry run is of it"
    )


def test_a_floor_is_checked_against_the_provider_a_failover_goes_to() -> None:
    both, _, sent_second = _failover(on_unsupported=True)
    # (On llama.cpp, `Person.age` is approximate: its grammar writes integers within 64 bits.)
    floor = SchemaEnforcement.APPROXIMATE
    got = Extractor(min_enforcement=floor).extract(both, Person, _REFUSED)
    assert got.value == Person(name="Ada", age=36)
    assert len(sent_second.bodies) == 1
    # A failover that does not move on past the refusal: the plan refuses, as the call does.
    staying, _, _ = _failover(on_unsupported=False)
    with pytest.raises(UnsupportedError) as planned:
        Extractor().plan(staying, Person, _REFUSED)
    with pytest.raises(UnsupportedError) as called:
        Extractor().extract(staying, Person, _REFUSED)
    assert str(planned.value) == str(called.value)
