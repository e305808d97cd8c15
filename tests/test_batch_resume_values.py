"""A resumed run hands back the value the run that finished the input gave, whatever the
type does between its JSON and its values: validators that change what they read, aliases
that are other fields' names, unions, serializers of its own, iterables."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from enum import Enum, IntEnum
from pathlib import Path
from typing import Annotated, Any, Literal
from uuid import UUID, uuid4

import pytest
from pydantic import (
    AfterValidator,
    AliasChoices,
    AliasPath,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PlainSerializer,
    PlainValidator,
    PrivateAttr,
    Secret,
    SecretStr,
    StringConstraints,
    Tag,
    TypeAdapter,
    create_model,
    field_serializer,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.dataclasses import dataclass as pydantic_dataclass
from typing_extensions import TypedDict

import allama
import allama.mock
from allama import CapabilitySupport, ChatCapability, ChatRequest
from allama.batch import BatchFailure, Ledger, LedgerError
from allama.batch._run import stored_value
from allama.cli import main
from allama.extract._output import dump_reads_back

TEMPLATE = ChatRequest("mock-model").system("Read the document.")
ANY_ROOT = ChatCapability.RESPONSE_SCHEMA_ANY_ROOT


def _runs(tp: Any, answer: Any, ledger: Path, count: int = 2) -> list[Any]:
    """The result of one input's first run, then of each run that resumes it."""
    results = []
    for _ in range(count):
        provider = allama.mock.MockProvider.with_text(json.dumps(answer))
        (result,) = allama.batch(provider, tp, ["doc"], request=TEMPLATE, ledger=ledger)
        assert result.failure is None, result.failure
        results.append(result)
    assert not results[0].resumed and all(r.resumed for r in results[1:])
    return results


def _row(ledger: Path) -> Any:
    (row,) = Ledger(ledger, settings={}).rows()
    return row


class Price(BaseModel):
    """Dollars in the document, cents in the value: read twice, a hundred times too many."""

    cents: Annotated[int, BeforeValidator(lambda v: round(float(v) * 100))]


class Shout(BaseModel):
    text: Annotated[str, AfterValidator(lambda s: s + "!")]


class Ordered(BaseModel):
    low: int
    high: int

    @model_validator(mode="after")
    def in_order(self) -> Ordered:
        if self.low > self.high:
            self.low, self.high = self.high, self.low
        return self


@dataclass
class Counted:
    n: int

    def __post_init__(self) -> None:
        self.n += 1


class Crossed(BaseModel):
    """Each field's alias is the other field's name."""

    name: str = Field(alias="title")
    title: str = Field(alias="heading")


class Amount(BaseModel):
    value: str | Decimal


class One(IntEnum):
    ONE = 1


class Level(BaseModel):
    level: One | int


class LevelUnshown(BaseModel):
    """The same union, where `repr` does not show the field."""

    level: One | int = Field(repr=False)


class Uncompared(BaseModel):
    """A model of its own `==`, which leaves out a field that a validator changes."""

    number: str
    cents: Annotated[int, BeforeValidator(lambda v: round(float(v) * 100))] = Field(repr=False)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Uncompared) and self.number == other.number

    __hash__ = None  # type: ignore[assignment]


@dataclass
class Bill:
    """A dataclass field left out of `==` and `repr`, which a validator changes."""

    number: str
    cents: Annotated[int, BeforeValidator(lambda v: round(float(v) * 100))] = field(
        compare=False, repr=False
    )


class Remembering(BaseModel):
    """Keeps the keys it does not read in a private attribute: `==` compares it too."""

    n: int
    _ignored: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def keep(cls, data: Any, handler: Any) -> Any:
        made = handler(data)
        if isinstance(data, dict):
            made._ignored = {k: v for k, v in data.items() if k not in cls.model_fields}
        return made


@pydantic_dataclass
class Weighed:
    """A dataclass that keeps an attribute beyond its fields, set from a key it does not
    read."""

    n: int

    @model_validator(mode="wrap")
    @classmethod
    def keep(cls, data: Any, handler: Any) -> Any:
        made = handler(data)
        made.unit = data.get("unit") if isinstance(data, dict) else None
        return made


class LevelPairs(BaseModel):
    """The enum-or-number union inside a set: a set's elements are equal either way."""

    s: frozenset[tuple[One | int, ...]]


class FrozenLevel(BaseModel):
    model_config = ConfigDict(frozen=True)
    level: One | int


class LevelSet(BaseModel):
    s: frozenset[FrozenLevel]


class Recent(BaseModel):
    """A deque its factory limits: a JSON array reads back as a deque of no limit."""

    n: int
    last: deque[int] = Field(default_factory=lambda: deque(maxlen=2))


class Encoded(BaseModel):
    model_config = ConfigDict(ser_json_bytes="base64")
    data: bytes


class Rounded(BaseModel):
    score: Annotated[float, PlainSerializer(lambda v: round(v, 1), return_type=float)]


class Dated(BaseModel):
    day: date

    @field_serializer("day")
    def european(self, day: date) -> str:
        return day.strftime("%d/%m/%Y")


class Hidden(BaseModel):
    shown: int
    note: str = Field(default="", exclude=True)


class Person(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="allow")
    first_name: str


class Point(BaseModel):
    x: int = 0
    y: int = 0


class Line(BaseModel):
    y: int


def _shape_of(value: Any) -> str:
    fields = value if isinstance(value, dict) else vars(value)
    return "line" if "y" in fields else "point"


class Shape(BaseModel):
    s: Annotated[
        Annotated[Point, Tag("point")] | Annotated[Line, Tag("line")], Discriminator(_shape_of)
    ]


class Base(BaseModel):
    x: int = 1


class Sub(Base):
    y: int = 2


class Defaults(BaseModel):
    f: float = 0
    t: tuple[str, ...] = []  # type: ignore[assignment]
    b: Base = Sub()
    at: datetime = datetime(2026, 1, 1, tzinfo=UTC)


class Cent(Enum):
    HALF = Decimal("1.5")


class Coin(BaseModel):
    coin: Cent


class Code(BaseModel):
    code: Annotated[str, StringConstraints(to_upper=True, pattern="^[a-z]+$")]


class Upper(BaseModel):
    """The model's setting, not the field's: applied after the pattern is checked."""

    model_config = ConfigDict(str_to_upper=True)
    code: str = Field(pattern="^[a-z]{3}$")


class Unchecked(BaseModel):
    email: str
    name: str = Field(default="", min_length=1)
    score: float = Field(default=-1.0, ge=0)


class Unbounded(BaseModel):
    name: str
    best: float = float("inf")
    limit: Decimal = Decimal("Infinity")


CASES: list[tuple[str, Any, Any, Any]] = [
    (
        "a validator that changes what it reads",
        Price,
        {"cents": 12.34},
        Price.model_construct(cents=1234),
    ),
    ("an after validator", Shout, {"text": "hey"}, Shout.model_construct(text="hey!")),
    ("a model validator", Ordered, {"low": 5, "high": 1}, Ordered(low=1, high=5)),
    ("a dataclass's __post_init__", Counted, {"n": 1}, Counted(n=1)),  # n is 2
    ("aliases that are other fields' names", Crossed, {"title": "T", "heading": "H"}, None),
    ("a union that reads a string first", Amount, {"value": 1.5}, None),
    ("a union of an enum and its values", Level, {"level": 1.0}, None),
    ("that union, not shown by repr", LevelUnshown, {"level": 1.0}, None),
    ("a field its model's == leaves out", Uncompared, {"number": "A1", "cents": 12.34}, None),
    ("a dataclass field left out of == and repr", Bill, {"number": "A1", "cents": 12.34}, None),
    ("a private attribute made from the input", Remembering, {"n": 1, "unit": "kg"}, None),
    ("a dataclass attribute made from the input", Weighed, {"n": 1, "unit": "kg"}, None),
    ("that union in a set's tuples", LevelPairs, {"s": [[1.0]]}, None),
    ("that union in a set's models", LevelSet, {"s": [{"level": 1.0}]}, None),
    ("a deque's length limit", Recent, {"n": 1}, None),
    ("bytes written as base64", Encoded, {"data": "hello"}, None),
    ("a serializer that rounds", Rounded, {"score": 1.26}, None),
    ("a serializer of another format", Dated, {"day": "2026-12-03"}, None),
    ("a field left out of the JSON", Hidden, {"shown": 1, "note": "kept"}, None),
    ("extra keys beside an alias", Person, {"firstName": "Ada", "first_name": "A. L."}, None),
    ("a discriminator function", Shape, {"s": {"x": 1}}, None),
    ("defaults validation does not check", Defaults, {}, None),
    ("an enum of decimals", Coin, {"coin": 1.5}, None),
    ("a string changed after its pattern", Code, {"code": "abc"}, None),
    ("a model's setting that changes its strings", Upper, {"code": "abc"}, None),
    ("defaults their fields' constraints refuse", Unchecked, {"email": "a@b.c"}, None),
    ("defaults that are no JSON number", Unbounded, {"name": "a"}, None),
]


@pytest.mark.parametrize(
    ("tp", "answer", "_"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_a_resumed_value_is_the_value_the_run_gave(
    tp: Any, answer: Any, _: Any, tmp_path: Path
) -> None:
    first, resumed = (r.value for r in _runs(tp, answer, tmp_path / "run.sqlite"))
    assert resumed == first
    assert type(resumed) is type(first)
    assert vars(resumed) == vars(first)  # field by field, whatever the type's `==` says
    private = getattr(first, "__pydantic_private__", None)
    assert private == getattr(resumed, "__pydantic_private__", None)
    assert [type(v) for v in vars(resumed).values()] == [type(v) for v in vars(first).values()]
    assert repr(resumed) == repr(first)  # of the same types within its containers too


def test_the_values_of_those_types_are_what_a_user_expects(tmp_path: Path) -> None:
    for name, tp, answer, expected in CASES:
        if expected is None:
            continue
        (result,) = _runs(tp, answer, tmp_path / f"{tp.__name__}.sqlite", count=1)
        assert result.value == expected, name
    (crossed,) = _runs(Crossed, {"title": "T", "heading": "H"}, tmp_path / "c.sqlite", 1)
    assert (crossed.value.name, crossed.value.title) == ("T", "H")
    (amount,) = _runs(Amount, {"value": 1.5}, tmp_path / "a.sqlite", 1)
    assert amount.value.value == Decimal("1.5")


def test_a_validator_that_counts_on_its_input_is_not_run_on_its_own_output(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "run.sqlite"
    first, resumed, again = _runs(Price, {"cents": 12.34}, ledger, count=3)
    assert first.value == resumed.value == again.value == Price.model_construct(cents=1234)
    # Its JSON would read back a hundred times too large: the ledger keeps the output.
    assert not dump_reads_back(TypeAdapter(Price))
    assert _row(ledger).source == '{"cents": 12.34}'
    # The ledger's value (what `allama batch export` writes) is the run's value too.
    assert json.loads(_row(ledger).value) == {"cents": 1234}


def test_an_iterable_field_reaches_the_caller_whole_and_resumes_whole(tmp_path: Path) -> None:
    ledger = tmp_path / "run.sqlite"
    first, resumed = _runs(Numbers, {"items": [1, 2, 3]}, ledger)
    assert list(first.value.items) == [1, 2, 3]  # not emptied by the ledger's write
    assert list(resumed.value.items) == [1, 2, 3]
    assert json.loads(_row(ledger).value) == {"items": [1, 2, 3]}


class Numbers(BaseModel):
    items: Iterable[int]


class Unhurried(allama.mock.MockProvider):
    """Answers after a while, so that a copy read meanwhile waits for the first's answer."""

    async def achat(self, request: ChatRequest) -> Any:
        await asyncio.sleep(0.05)
        return await super().achat(request)

    def chat(self, request: ChatRequest) -> Any:
        time.sleep(0.05)
        return super().chat(request)


def _copies(ledger: Path | None, run_async: bool) -> list[Any]:
    """Two copies of one input in flight together, in order; the first sent once."""
    provider = Unhurried([json.dumps({"items": [1, 2, 3]})])
    docs = ["doc", "doc"]
    if run_async:

        async def read() -> list[Any]:
            run = allama.abatch(
                provider, Numbers, docs, request=TEMPLATE, ledger=ledger, concurrency=2
            )
            return [result async for result in run]

        results = asyncio.run(read())
    else:
        run = allama.batch(provider, Numbers, docs, request=TEMPLATE, ledger=ledger, concurrency=2)
        results = list(run)
    assert provider.call_count <= 1
    return sorted(results, key=lambda r: r.index)


@pytest.mark.parametrize("run_async", [False, True], ids=["batch", "abatch"])
@pytest.mark.parametrize("with_ledger", [False, True], ids=["no ledger", "ledger"])
def test_each_copy_of_an_input_gets_its_iterable_whole(
    tmp_path: Path, with_ledger: bool, run_async: bool
) -> None:
    ledger = tmp_path / "run.sqlite" if with_ledger else None
    first, copy = _copies(ledger, run_async)
    assert (first.duplicate, copy.duplicate) == (False, True)
    assert first.value is not copy.value
    assert list(first.value.items) == [1, 2, 3]  # read first: the copy's is its own
    assert list(copy.value.items) == [1, 2, 3]
    if ledger is not None:  # copies of an input an earlier run finished, given together
        first, copy = _copies(ledger, run_async)
        assert first.resumed and first.value is not copy.value
        assert list(first.value.items) == list(copy.value.items) == [1, 2, 3]


class Stamped(BaseModel):
    """A plain type (its JSON reads back as itself) with a value made at validation."""

    n: int
    id: UUID = Field(default_factory=uuid4)
    tags: list[str] = []
    parent: Stamped | None = None


def test_a_type_whose_json_reads_back_keeps_its_json_alone(tmp_path: Path) -> None:
    # A field made at validation (an id, a time) keeps the value the run made.
    assert dump_reads_back(TypeAdapter(Stamped))
    ledger = tmp_path / "run.sqlite"
    first, resumed = (r.value for r in _runs(Stamped, {"n": 1, "tags": ["a"]}, ledger))
    assert resumed == first and resumed.id == first.id
    assert _row(ledger).source is None


class Dollars(BaseModel):
    """A type with a validator whose JSON happens to read back: nothing more is kept."""

    amount: Annotated[int, AfterValidator(abs)]
    id: UUID = Field(default_factory=uuid4)


def test_a_value_that_reads_back_from_its_json_keeps_its_json_alone(tmp_path: Path) -> None:
    ledger = tmp_path / "run.sqlite"
    first, resumed = (r.value for r in _runs(Dollars, {"amount": -3}, ledger))
    assert resumed == first == Dollars(amount=3, id=first.id)
    assert _row(ledger).source is None


class Login(BaseModel):
    user: str
    password: SecretStr
    name: Annotated[str, AfterValidator(str.title)]


def test_a_secret_is_never_kept_in_the_clear(tmp_path: Path) -> None:
    ledger = tmp_path / "run.sqlite"
    answer = {"user": "ann", "password": "hunter2", "name": "ann lee"}
    first, resumed = (r.value for r in _runs(Login, answer, ledger))
    assert first.password.get_secret_value() == "hunter2"
    # As its JSON writes it: masked. The output it was read from is not kept either.
    assert resumed.password.get_secret_value() == "**********"
    assert resumed.name == "Ann Lee"
    row = _row(ledger)
    assert row.source is None and "hunter2" not in (row.value or "")


class Token(BaseModel):
    token: SecretStr
    cents: Annotated[int, BeforeValidator(lambda v: round(float(v) * 100))]


def test_a_secret_beside_a_value_that_does_not_read_back_is_told_not_changed(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "run.sqlite"
    (first,) = _runs(Token, {"token": "s3cret", "cents": 12.34}, ledger, count=1)
    assert first.value.cents == 1234
    provider = allama.mock.MockProvider.with_text("{}")
    (resumed,) = allama.batch(provider, Token, ["doc"], request=TEMPLATE, ledger=ledger)
    # Not 123400 handed back as if it were the value: that input's failure, which says why.
    assert resumed.resumed and resumed.value is None and provider.requests == []
    assert resumed.failure is not None and resumed.failure.kind == "stored_value_invalid"
    assert resumed.failure.message == (
        "finished by an earlier run, but its value cannot be read back as it was: Token "
        "holds a secret, so the ledger keeps no output to read again, and its JSON reads "
        "back as another value (a validator that changes what it reads, a serializer of "
        "its own); `allama batch export` writes the value"
    )
    row = _row(ledger)
    assert row.source == "" and "s3cret" not in (row.value or "")
    assert json.loads(row.value or "") == {"token": "**********", "cents": 1234}


class Guarded(BaseModel):
    password: SecretStr
    level: One | int


def test_a_secret_beside_a_union_that_reads_back_another_choice_is_told_not_changed(
    tmp_path: Path,
) -> None:
    # Its JSON reads back as the same JSON, and yet the level as a number, not the enum.
    ledger = tmp_path / "run.sqlite"
    (first,) = _runs(Guarded, {"password": "s3cret", "level": 1.0}, ledger, count=1)
    assert first.value.level is One.ONE
    provider = allama.mock.MockProvider.with_text("{}")
    (resumed,) = allama.batch(provider, Guarded, ["doc"], request=TEMPLATE, ledger=ledger)
    assert provider.requests == []
    assert resumed.resumed and resumed.value is None
    assert resumed.failure is not None and resumed.failure.kind == "stored_value_invalid"
    assert _row(ledger).source == ""


class Minted(BaseModel):
    token: SecretStr
    n: int
    _made: UUID = PrivateAttr(default_factory=uuid4)


class SecretSet(BaseModel):
    tokens: frozenset[SecretStr]


class Badge(BaseModel):
    model_config = ConfigDict(frozen=True)
    token: SecretStr


class Badges(BaseModel):
    s: frozenset[Badge]


@dataclass
class Visit:
    token: SecretStr
    n: int

    def __post_init__(self) -> None:
        self.seen_at = time.monotonic()


@dataclass
class Note:
    token: SecretStr
    n: int
    extra: Annotated[int, Field(exclude=True)] = 0


class Noted(BaseModel):
    note: Note


class Money:
    """A type of the caller's own: equal by value, with no `repr` of its own."""

    def __init__(self, cents: int) -> None:
        self.cents = cents

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and other.cents == self.cents

    def __hash__(self) -> int:
        return hash(self.cents)


class Charge(BaseModel):
    token: SecretStr
    amount: Annotated[
        Money,
        PlainValidator(lambda v: v if isinstance(v, Money) else Money(int(v))),
        PlainSerializer(lambda money: money.cents, return_type=int),
    ]


SECRET_CASES: list[tuple[str, Any, Any]] = [
    ("a private attribute of its own", Minted, {"token": "s3cret", "n": 1}),
    ("a set of secrets", SecretSet, {"tokens": ["s3cret"]}),
    ("a set of models holding a secret", Badges, {"s": [{"token": "s3cret"}]}),
    ("a dataclass's attribute beyond its fields", Visit, {"token": "s3cret", "n": 1}),
    ("a dataclass field left out of the JSON", Note, {"token": "s3cret", "n": 1, "extra": 4}),
    ("that dataclass in a model", Noted, {"note": {"token": "s3cret", "n": 1, "extra": 4}}),
    ("a value of a class with no repr of its own", Charge, {"token": "s3cret", "amount": 150}),
]


@pytest.mark.parametrize(
    ("tp", "answer"), [case[1:] for case in SECRET_CASES], ids=[case[0] for case in SECRET_CASES]
)
def test_a_type_with_a_secret_resumes_where_its_json_holds_the_same(
    tp: Any, answer: Any, tmp_path: Path
) -> None:
    # What its JSON leaves out comes back as the type makes it; what it holds, the same.
    first, resumed = (r.value for r in _runs(tp, answer, tmp_path / "run.sqlite"))
    adapter = TypeAdapter(tp)
    assert type(resumed) is type(first)
    assert stored_value(adapter, resumed) == stored_value(adapter, first)
    assert "s3cret" not in (_row(tmp_path / "run.sqlite").value or "")


class Account(BaseModel):
    """Secrets of any type: their JSON Schema has no `writeOnly`, as `SecretStr`'s has."""

    pin: Secret[int]
    born: Secret[date]


def test_a_secret_of_any_type_is_never_kept_in_the_clear(tmp_path: Path) -> None:
    ledger = tmp_path / "run.sqlite"
    (first,) = _runs(Account, {"pin": 1234, "born": "1990-01-02"}, ledger, count=1)
    assert first.value.pin.get_secret_value() == 1234
    row = _row(ledger)
    assert row.source == "" and "1234" not in (row.value or "")
    assert json.loads(row.value or "") == {"pin": "**********", "born": "**********"}
    provider = allama.mock.MockProvider.with_text("{}")
    (resumed,) = allama.batch(provider, Account, ["doc"], request=TEMPLATE, ledger=ledger)
    # Masked, it reads back as no value of the type: said, not sent again, and not blamed
    # on a validator or serializer of the type's own, which it has none of.
    assert resumed.resumed and resumed.value is None and provider.requests == []
    assert resumed.failure is not None and resumed.failure.kind == "stored_value_invalid"
    assert resumed.failure.message == (
        "finished by an earlier run, but its value cannot be read back as it was: Account "
        "holds a secret, so the ledger keeps no output to read again, and its JSON, which "
        "writes a secret masked (`**********`), does not validate as the type (a secret that "
        "is not text, or one the mask does not fit); `allama batch export` writes the value"
    )


def test_a_root_type_sent_wrapped_reads_back_wrapped(tmp_path: Path) -> None:
    tens = list[Annotated[int, AfterValidator(lambda n: n * 10)]]
    ledger = tmp_path / "run.sqlite"
    runs = []
    for _ in range(2):
        # A provider that takes only an object at the schema's root: `{"value": [...]}`.
        provider = allama.mock.MockProvider.with_text(json.dumps({"value": [1, 2]}))
        provider.with_chat_capability(ANY_ROOT, CapabilitySupport.UNSUPPORTED)
        (result,) = allama.batch(provider, tens, ["doc"], request=TEMPLATE, ledger=ledger)
        assert result.failure is None, result.failure
        runs.append(result)
    assert runs[0].metadata is not None and runs[0].metadata.root_wrapped
    assert runs[0].value == runs[1].value == [10, 20]
    assert runs[1].resumed
    assert _row(ledger).source == '{"value": [1, 2]}'


def test_a_ledger_written_before_outputs_were_kept_reads_values_by_field_name(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "run.sqlite"
    (first,) = _runs(Crossed, {"title": "T", "heading": "H"}, ledger, count=1)
    with sqlite3.connect(ledger) as db:  # as an earlier version wrote it
        db.execute("UPDATE items SET source = NULL")
    provider = allama.mock.MockProvider.with_text("{}")
    (resumed,) = allama.batch(provider, Crossed, ["doc"], request=TEMPLATE, ledger=ledger)
    assert resumed.resumed and resumed.value == first.value
    assert stored_value(TypeAdapter(Crossed), first.value) == '{"name":"T","title":"H"}'


def _cap(cents: int) -> int:
    if cents > 999:
        raise ValueError(f"{cents} is more than the cap")
    return cents


class Capped(BaseModel):
    """Dollars in the document, cents in the value: read twice, a hundred times too many."""

    # `Price` with a cap added after a run filled the ledger: the same schema, the same key.
    model_config = ConfigDict(title="Price")
    cents: Annotated[int, BeforeValidator(lambda v: round(float(v) * 100)), AfterValidator(_cap)]


def test_an_output_the_type_no_longer_accepts_is_that_inputs_failure(tmp_path: Path) -> None:
    ledger = tmp_path / "run.sqlite"
    _runs(Price, {"cents": 12.34}, ledger, count=1)
    provider = allama.mock.MockProvider.with_text("{}")
    (result,) = allama.batch(provider, Capped, ["doc"], request=TEMPLATE, ledger=ledger)
    assert result.resumed and provider.requests == []
    assert result.failure is not None and result.failure.kind == "stored_value_invalid"
    assert result.failure.message == (
        "finished by an earlier run, but its value in the ledger does not validate as "
        "Capped: `value_error` at cents; the value stays in the ledger (`allama batch "
        "export` writes it)"
    )


def _refuse_twelve(cents: int) -> int:
    if cents == 1234:
        raise TypeError(f"{cents} is not a price we take")  # no ValueError: pydantic passes it
    return cents


class Refusing(BaseModel):
    """Dollars in the document, cents in the value: read twice, a hundred times too many."""

    # `Price` with a check added since that raises a `TypeError`: the same schema and key.
    model_config = ConfigDict(title="Price")
    cents: Annotated[
        int, BeforeValidator(lambda v: round(float(v) * 100)), AfterValidator(_refuse_twelve)
    ]


def test_a_validator_that_raises_on_a_stored_value_is_that_inputs_failure(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "run.sqlite"
    _runs(Price, {"cents": 12.34}, ledger, count=1)
    provider = allama.mock.MockProvider.with_text('{"cents": 5}')
    run = allama.batch(provider, Refusing, ["doc", "other"], request=TEMPLATE, ledger=ledger)
    results = sorted(run, key=lambda r: r.index)
    # The run goes on: the other input is sent; the message does not quote the value.
    assert [r.failure.kind if r.failure else r.value.cents for r in results] == [
        "stored_value_invalid",
        500,
    ]
    assert results[0].failure is not None and results[0].failure.message == (
        "finished by an earlier run, but its value in the ledger does not validate as "
        "Refusing: its validation raised TypeError; the value stays in the ledger (`allama "
        "batch export` writes it)"
    )
    assert run.summary.stopped is None


class Stripped(BaseModel):
    model_config = ConfigDict(title="Name")
    name: Annotated[str, AfterValidator(str.strip)]


class Lowered(BaseModel):
    # `Stripped` with its validator changed since: the same schema and key.
    model_config = ConfigDict(title="Name")
    name: Annotated[str, AfterValidator(str.lower)]


class Tagged(BaseModel):
    # A set's JSON is in no set order from one process to the next.
    model_config = ConfigDict(title="Tags")
    tags: Annotated[set[str], AfterValidator(lambda tags: {tag.strip() for tag in tags})]


def test_a_stored_value_a_changed_validator_reads_as_another_is_that_inputs_failure(
    tmp_path: Path,
) -> None:
    # Stored from "  Hello World  " as "Hello World" (its JSON alone: it reads back). The
    # changed type would read that as "hello world", which neither type makes of the output.
    ledger = tmp_path / "run.sqlite"
    (first,) = _runs(Stripped, {"name": "  Hello World  "}, ledger, count=1)
    assert first.value == Stripped(name="Hello World") and _row(ledger).source is None
    provider = allama.mock.MockProvider.with_text("{}")
    (result,) = allama.batch(provider, Lowered, ["doc"], request=TEMPLATE, ledger=ledger)
    assert result.resumed and provider.requests == [] and result.value is None
    assert result.failure == BatchFailure(
        "stored_value_invalid",
        "finished by an earlier run, but Lowered reads and writes its value as other JSON (a "
        "validator that changes what it reads, or a serializer, changed since the value was "
        "stored): it may not be the value that run made; `allama batch export` writes the "
        "value",
    )
    # The type that stored it gives it back; so does a set in another order.
    (same,) = allama.batch(provider, Stripped, ["doc"], request=TEMPLATE, ledger=ledger)
    assert same.resumed and same.value == Stripped(name="Hello World")
    tags = tmp_path / "tags.sqlite"
    _runs(Tagged, {"tags": [f" t{n} " for n in range(20)]}, tags, count=1)
    with sqlite3.connect(tags) as db:
        stored = json.loads(db.execute("SELECT value FROM items").fetchone()[0])
        shuffled = json.dumps({"tags": sorted(stored["tags"], reverse=True)})
        db.execute("UPDATE items SET value = ?", (shuffled,))
    (again,) = allama.batch(
        allama.mock.MockProvider.with_text("{}"), Tagged, ["doc"], request=TEMPLATE, ledger=tags
    )
    assert again.failure is None and again.value == Tagged(tags={f"t{n}" for n in range(20)})


@pytest.mark.parametrize("version", [1, 2])
def test_a_ledger_of_an_earlier_version_is_read_and_resumed(
    version: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "run.sqlite"
    (first,) = _runs(Price, {"cents": 12.34}, ledger, count=1)
    with sqlite3.connect(ledger) as db:  # as that version wrote it: its columns alone
        db.execute("UPDATE items SET value = ?", ('{"cents":12.34}',))
        db.execute("ALTER TABLE items DROP COLUMN source")
        if version == 1:
            db.execute("ALTER TABLE items DROP COLUMN job")
            db.execute("ALTER TABLE items DROP COLUMN log")
            db.execute("DROP TABLE jobs")
        else:
            db.execute("ALTER TABLE jobs DROP COLUMN clock")
        db.execute("UPDATE meta SET value = ? WHERE name = 'schema_version'", (str(version),))
    reader = Ledger(ledger, read_only=True)
    (row,) = reader.rows()
    assert reader.jobs() == []
    reader.close()
    assert (row.status, row.source, row.job, row.log) == ("done", None, None, None)
    assert main(["batch", "export", str(ledger)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["value"] == {"cents": 12.34}
    # Resumed from its value, validated again (what that version kept), and upgraded.
    provider = allama.mock.MockProvider.with_text("{}")
    (resumed,) = allama.batch(provider, Price, ["doc"], request=TEMPLATE, ledger=ledger)
    assert resumed.resumed and resumed.value == first.value and provider.requests == []
    with sqlite3.connect(ledger) as db:
        columns = {found[1] for found in db.execute("PRAGMA table_info(items)")}
        (stored,) = db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
        job_columns = {found[1] for found in db.execute("PRAGMA table_info(jobs)")}
    assert {"job", "log", "source", "reopened"} <= columns and stored == "4"
    assert "clock" in job_columns


def test_a_ledger_of_a_later_version_is_refused_and_left_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "run.sqlite"
    _runs(Price, {"cents": 12.34}, ledger, count=1)
    with sqlite3.connect(ledger) as db:
        db.execute("UPDATE meta SET value = '5' WHERE name = 'schema_version'")
    before = ledger.read_bytes()
    said = "is a ledger of schema 5, made by a later version of allama (this one reads up"
    with pytest.raises(LedgerError, match=re.escape(said)):
        Ledger(ledger, read_only=True)
    provider = allama.mock.MockProvider.with_text("{}")
    with pytest.raises(LedgerError, match=re.escape(said)):
        allama.batch(provider, Price, ["doc"], request=TEMPLATE, ledger=ledger)
    assert provider.requests == []
    (tmp_path / "types.py").write_text(
        "from pydantic import BaseModel\nclass T(BaseModel):\n  a: int\n"
    )
    (tmp_path / "in.jsonl").write_text('{"text": "doc"}\n')
    run = ["batch", "run", str(tmp_path / "in.jsonl"), "--type", f"{tmp_path / 'types.py'}:T"]
    run += ["--out", str(tmp_path / "out.jsonl"), "--ledger", str(ledger)]
    # Reading a ledger that fails is 1; a run's arguments that do not hold are 2.
    commands = [(["batch", "status", str(ledger)], 1), (["batch", "export", str(ledger)], 1)]
    for command, code in [*commands, (run, 2)]:
        assert main(command) == code
        assert f"{said} to schema 4): upgrade allama to use it" in capsys.readouterr().err
    assert ledger.read_bytes() == before
    with sqlite3.connect(ledger) as db:
        (runs,) = db.execute("SELECT count(*) FROM runs").fetchone()
    assert runs == 1


class NoneNotNullable(BaseModel):
    total: int = None  # type: ignore[assignment]  # a default its field refuses


class TooShortList(BaseModel):
    xs: list[int] = Field(default=[], min_length=1)


class TooShortDict(BaseModel):
    d: dict[str, int] = Field(default={}, min_length=1)


class EmptyPair(BaseModel):
    pair: tuple[int, int] = ()  # type: ignore[assignment]


class MadeInt(BaseModel):
    f: float = Field(default_factory=lambda: 0)


class MadeList(BaseModel):
    t: tuple[int, ...] = Field(default_factory=list)  # type: ignore[arg-type]


class MadeEmpty(BaseModel):
    s: str = Field(default_factory=lambda: "", min_length=1)


class MadeNone(BaseModel):
    x: int = Field(default_factory=lambda: None)  # type: ignore[arg-type]


class MadeInfinite(BaseModel):
    f: float = Field(default_factory=lambda: float("inf"))


class ShortByConfig(BaseModel):
    model_config = ConfigDict(str_min_length=1)
    name: str
    nick: str = ""


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (NoneNotNullable, NoneNotNullable.model_construct(total=None)),
        (TooShortList, TooShortList.model_construct(xs=[])),
        (TooShortDict, TooShortDict.model_construct(d={})),
        (EmptyPair, EmptyPair.model_construct(pair=())),
        (MadeInt, MadeInt.model_construct(f=0)),
        (MadeList, MadeList.model_construct(t=[])),
        (MadeEmpty, MadeEmpty.model_construct(s="")),
        (MadeNone, MadeNone.model_construct(x=None)),
        (MadeInfinite, MadeInfinite.model_construct(f=float("inf"))),
        (ShortByConfig, ShortByConfig.model_construct(name="a", nick="")),
    ],
    ids=lambda p: p.__name__ if isinstance(p, type) else "",
)
def test_a_default_its_json_would_not_give_back_resumes_as_it_was(
    tp: type[BaseModel], expected: BaseModel, tmp_path: Path
) -> None:
    """Validation does not check a default: one its field (or its model's settings) would
    refuse, or read as another value, comes back from the output it was read from."""
    assert not dump_reads_back(TypeAdapter(tp))
    answer = {"name": "a"} if tp is ShortByConfig else {}
    first, resumed = _runs(tp, answer, tmp_path / "run.sqlite")
    assert repr(first.value) == repr(resumed.value) == repr(expected)
    assert _row(tmp_path / "run.sqlite").source  # the output it was read from, kept


class Plain(BaseModel):
    """Defaults the standard library's factories make, and defaults their fields take."""

    total: int | None = None
    tags: list[str] = Field(default_factory=list)
    seen: set[int] = Field(default_factory=set)
    rest: tuple[int, ...] = ()
    id: UUID = Field(default_factory=uuid4)
    at: datetime = Field(default_factory=datetime.now)


def test_defaults_that_read_back_keep_the_json_alone(tmp_path: Path) -> None:
    assert dump_reads_back(TypeAdapter(Plain))
    first, resumed = (r.value for r in _runs(Plain, {}, tmp_path / "run.sqlite"))
    assert resumed == first and resumed.id == first.id and resumed.at == first.at
    assert _row(tmp_path / "run.sqlite").source is None


class Hue(Enum):
    RED = "red"
    BLUE = "blue"


class Painted(BaseModel):
    name: str
    # A plain enum's members: `"red"` is none, so an answer's is read by a validator (a
    # field without one is refused before sending), and the dump still does not read back.
    hue: Annotated[
        Literal[Hue.RED, Hue.BLUE], BeforeValidator(lambda v: Hue(v) if isinstance(v, str) else v)
    ] = Hue.RED


def test_a_literal_of_a_plain_enums_members_resumes_from_its_output(tmp_path: Path) -> None:
    assert not dump_reads_back(TypeAdapter(Painted))
    first, resumed = (r.value for r in _runs(Painted, {"name": "a"}, tmp_path / "run.sqlite"))
    assert resumed == first == Painted(name="a", hue=Hue.RED)


class Priced(BaseModel):
    """A secret beside serializers that write less than the value holds."""

    token: SecretStr
    price: float
    name: str

    @field_serializer("price")
    def cents(self, price: float) -> float:
        return round(price, 2)

    @field_serializer("name")
    def lower(self, name: str) -> str:
        return name.lower()


def test_a_secret_beside_a_serializer_that_loses_part_of_a_value_is_told_not_changed(
    tmp_path: Path,
) -> None:
    # Its JSON reads back as the same JSON, and yet as another price and another name.
    ledger = tmp_path / "run.sqlite"
    answer = {"token": "s3cret", "price": 19.987, "name": "ACME Widget"}
    (first,) = _runs(Priced, answer, ledger, count=1)
    assert (first.value.price, first.value.name) == (19.987, "ACME Widget")
    provider = allama.mock.MockProvider.with_text("{}")
    (resumed,) = allama.batch(provider, Priced, ["doc"], request=TEMPLATE, ledger=ledger)
    assert resumed.resumed and resumed.value is None and provider.requests == []
    assert resumed.failure is not None and resumed.failure.kind == "stored_value_invalid"


def _billed(first: str, second: str, validated: bool = False, default: bool = False) -> Any:
    """A model named `Invoice` reading `total` into the field `first` and `tax` into
    `second`: models of other names for one pair of aliases have the same JSON Schema (so
    the same inputs' keys). `validated`: the first field's validator changes what it reads,
    so that the output is kept with the value."""
    kind: Any = Annotated[int, BeforeValidator(lambda v: int(v) * 100)] if validated else int
    total = Field(0, alias="total") if default else Field(alias="total")
    return create_model("Invoice", **{first: (kind, total), second: (int, Field(alias="tax"))})


@pytest.mark.parametrize(
    ("first_type", "then"),
    [
        (_billed("amount", "vat"), _billed("vat", "amount")),  # swapped
        (_billed("amount", "vat", default=True), _billed("net", "vat", default=True)),
    ],
)
def test_a_value_is_not_read_into_fields_renamed_since_behind_the_same_aliases(
    tmp_path: Path, first_type: Any, then: Any
) -> None:
    from allama.schema._types import type_schema

    assert type_schema(first_type).schema == type_schema(then).schema
    ledger = tmp_path / "run.sqlite"
    (first,) = _runs(first_type, {"total": 10, "tax": 2}, ledger, count=1)
    assert (first.value.amount, first.value.vat) == (10, 2)
    provider = allama.mock.MockProvider.with_text("{}")
    (resumed,) = allama.batch(provider, then, ["doc"], request=TEMPLATE, ledger=ledger)
    # Read by field name, {"amount": 10, "vat": 2} put 10 in the tax and 2 in the total (or
    # the total in a field now named `net`, left at 0): the input's failure instead.
    assert resumed.resumed and resumed.value is None and provider.requests == []
    assert resumed.failure is not None and resumed.failure.kind == "stored_value_invalid"
    assert resumed.failure.message == (
        "finished by an earlier run whose type had the same schema but named its fields "
        "otherwise than Invoice does (a field renamed, its alias kept): the ledger keeps the "
        "value by field name, which would put values in other fields; `allama batch "
        "export` writes the value as that run made it"
    )
    assert resumed.failure.value_kept
    # The same type again resumes as before.
    (again,) = allama.batch(provider, first_type, ["doc"], request=TEMPLATE, ledger=ledger)
    assert again.resumed and again.value == first.value and provider.requests == []


def test_a_kept_output_is_read_by_the_fields_renamed_since_as_a_call_would_read_it(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "run.sqlite"
    (first,) = _runs(_billed("amount", "vat", True), {"total": 10, "tax": 2}, ledger, count=1)
    assert (first.value.amount, first.value.vat) == (1000, 2)
    assert _row(ledger).source is not None  # the output is kept
    provider = allama.mock.MockProvider.with_text("{}")
    swapped = _billed("vat", "amount", True)
    (resumed,) = allama.batch(provider, swapped, ["doc"], request=TEMPLATE, ledger=ledger)
    assert resumed.resumed and resumed.failure is None and provider.requests == []
    assert (resumed.value.vat, resumed.value.amount) == (1000, 2)


def test_a_type_named_as_before_resumes_whatever_its_aliases_are(tmp_path: Path) -> None:
    """Aliases from a generator, in models nested in lists: the same names, a value
    resumed by a run of a type defined again."""

    def define() -> type[BaseModel]:
        class Line(BaseModel):
            model_config = ConfigDict(alias_generator=to_camel)
            unit_price: int

        class Sheet(BaseModel):
            model_config = ConfigDict(alias_generator=to_camel)
            line_items: list[Line]

        return Sheet

    ledger = tmp_path / "run.sqlite"
    (first,) = _runs(define(), {"lineItems": [{"unitPrice": 3}]}, ledger, count=1)
    provider = allama.mock.MockProvider.with_text("{}")
    (resumed,) = allama.batch(provider, define(), ["doc"], request=TEMPLATE, ledger=ledger)
    assert resumed.resumed and resumed.failure is None
    assert (
        resumed.value.model_dump()
        == first.value.model_dump()
        == {"line_items": [{"unit_price": 3}]}
    )


_SET_RUN = """
import json, sys
from pydantic import BaseModel, Json, SecretStr
import allama, allama.mock

class Tagged(BaseModel):
    tags: Json[set[str]]

class Account(BaseModel):
    password: SecretStr
    tags: set[str]

tags = [f"tag{n}" for n in range(40)]
kind, ledger = sys.argv[1:3]
tp, answer = {
    "json": (Tagged, {"tags": json.dumps(tags)}),
    "secret": (Account, {"password": "hunter2", "tags": tags}),
}[kind]
provider = allama.mock.MockProvider.with_text(json.dumps(answer))
request = allama.ChatRequest("mock-model").system("Read the document.")
(result,) = allama.batch(provider, tp, ["doc"], request=request, ledger=ledger)
failure = result.failure and result.failure.kind
tags_back = None if result.value is None else sorted(result.value.tags)
print(json.dumps([result.resumed, failure, tags_back == sorted(tags)]))
"""


@pytest.mark.parametrize("kind", ["json", "secret"])
def test_a_set_resumes_in_a_process_that_orders_it_otherwise(tmp_path: Path, kind: str) -> None:
    """A set's order changes from one process to the next (the hash seed): a set in a
    `Json[...]` field's text, or beside a secret, resumed by another process failed as
    "read back as another value" though nothing had changed."""
    ledger = str(tmp_path / "run.sqlite")
    seen = []
    for seed in ("7", "8"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        ran = subprocess.run(
            [sys.executable, "-c", _SET_RUN, kind, ledger],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        seen.append(json.loads(ran.stdout))
    assert seen == [[False, None, True], [True, None, True]]


class WrittenAt(BaseModel):
    """Its serializer writes when it wrote: the same value, other JSON each time."""

    title: str

    @model_serializer(mode="wrap")
    def stamp(self, handler: Any) -> Any:
        data = handler(self)
        data["written_at"] = time.perf_counter_ns()
        return data


def test_a_value_whose_json_changes_each_time_it_is_written_resumes_from_its_output(
    tmp_path: Path,
) -> None:
    """Its JSON, written again by a resumed run, was told apart from the stored one as a
    validator or serializer changed since: the input failed though nothing had changed."""
    ledger = tmp_path / "run.sqlite"
    first, resumed = _runs(WrittenAt, {"title": "t"}, ledger)
    assert resumed.value == first.value == WrittenAt(title="t")
    assert _row(ledger).source == '{"title": "t"}'


def _person(field: Any) -> Any:
    """A model named `Person` whose one field, `name`, is `field`."""
    if field is None:
        return create_model("Person", name=(str, ...))
    if field == "camel":
        return create_model(
            "Person", __config__=ConfigDict(alias_generator=to_camel), name=(str, ...)
        )
    return create_model("Person", name=(str, field))


@pytest.mark.parametrize(
    "then",
    [
        Field(alias="name"),  # an alias that is the field's name
        "camel",  # a generator that leaves a one-word name as it is
        Field(validation_alias=AliasChoices("name", "full_name")),  # another name it reads
    ],
)
def test_a_type_whose_fields_read_the_same_keys_resumes_whatever_aliases_it_gained(
    tmp_path: Path, then: Any
) -> None:
    ledger = tmp_path / "run.sqlite"
    _runs(_person(None), {"name": "Ada"}, ledger, count=1)
    provider = allama.mock.MockProvider.with_text("{}")
    (resumed,) = allama.batch(provider, _person(then), ["doc"], request=TEMPLATE, ledger=ledger)
    assert resumed.resumed and resumed.failure is None and provider.requests == []
    assert resumed.value.name == "Ada"


def _sheet(swapped: bool) -> Any:
    """Two models each reading `a` and `b` into fields named `x` and `y`, one of them the
    other way round: swapping both names the fields of each as the other's were."""
    straight = {"x": (int, Field(alias="a")), "y": (int, Field(alias="b"))}
    crossed = {"y": (int, Field(alias="a")), "x": (int, Field(alias="b"))}
    billing = create_model("Billing", **(crossed if swapped else straight))
    refund = create_model("Refund", **(straight if swapped else crossed))
    return create_model("Sheet", billing=(billing, ...), refund=(refund, ...))


def test_fields_renamed_in_two_models_each_as_the_others_were_are_told(tmp_path: Path) -> None:
    from allama.schema._types import type_schema

    assert type_schema(_sheet(False)).schema == type_schema(_sheet(True)).schema
    ledger = tmp_path / "run.sqlite"
    answer = {"billing": {"a": 1, "b": 2}, "refund": {"a": 3, "b": 4}}
    _runs(_sheet(False), answer, ledger, count=1)
    provider = allama.mock.MockProvider.with_text("{}")
    (resumed,) = allama.batch(provider, _sheet(True), ["doc"], request=TEMPLATE, ledger=ledger)
    assert resumed.resumed and resumed.value is None
    assert resumed.failure is not None and resumed.failure.kind == "stored_value_invalid"


def test_fields_renamed_behind_a_json_schema_of_the_types_own_are_told(tmp_path: Path) -> None:
    """A JSON Schema of the type's own (`WithJsonSchema`) is the same whatever its fields
    are named: which field each key is read into is read from the type itself."""
    from pydantic import WithJsonSchema

    schema = {
        "type": "object",
        "properties": {"total": {"type": "integer"}, "tax": {"type": "integer"}},
        "required": ["total", "tax"],
        "additionalProperties": False,
    }
    before = Annotated[_billed("amount", "vat"), WithJsonSchema(schema)]
    after = Annotated[_billed("vat", "amount"), WithJsonSchema(schema)]
    ledger = tmp_path / "run.sqlite"
    _runs(before, {"total": 10, "tax": 2}, ledger, count=1)
    provider = allama.mock.MockProvider.with_text("{}")
    (resumed,) = allama.batch(provider, after, ["doc"], request=TEMPLATE, ledger=ledger)
    assert resumed.resumed and resumed.value is None
    assert resumed.failure is not None and resumed.failure.kind == "stored_value_invalid"


def _items(swapped: bool) -> Any:
    """Two models both named `Item` (of other modules), each reading `a` and `b` into `x`
    and `y`, one the other way round; `swapped`, the other one is."""
    straight = {"x": (int, Field(alias="a")), "y": (int, Field(alias="b"))}
    crossed = {"y": (int, Field(alias="a")), "x": (int, Field(alias="b"))}
    one = create_model("Item", __module__="first", **(crossed if swapped else straight))
    two = create_model("Item", __module__="second", **(straight if swapped else crossed))
    return create_model("Sheet", billing=(one, ...), refund=(two, ...))


def _choices(swapped: bool) -> Any:
    """Two fields read from their first one-key choice (`k1`, `k2`), after a path."""
    k1 = AliasChoices(AliasPath("p", 0), "k1")
    k2 = AliasChoices(AliasPath("p", 0), "k2")
    a, b = (k2, k1) if swapped else (k1, k2)
    return create_model(
        "Sheet", a=(int, Field(0, validation_alias=a)), b=(int, Field(0, validation_alias=b))
    )


@pytest.mark.parametrize(
    ("make", "answer"),
    [
        (_items, {"billing": {"a": 1, "b": 2}, "refund": {"a": 3, "b": 4}}),
        (_choices, {"k1": 1, "k2": 2}),
    ],
)
def test_fields_swapped_between_models_of_one_name_or_behind_choices_are_told(
    tmp_path: Path, make: Any, answer: Any
) -> None:
    ledger = tmp_path / "run.sqlite"
    _runs(make(False), answer, ledger, count=1)
    provider = allama.mock.MockProvider.with_text("{}")
    (resumed,) = allama.batch(provider, make(True), ["doc"], request=TEMPLATE, ledger=ledger)
    assert resumed.resumed and resumed.value is None
    assert resumed.failure is not None and resumed.failure.kind == "stored_value_invalid"


class BillDict(TypedDict):
    total_due: Annotated[int, Field(alias="total")]


def _bill_dict_in_a_function() -> Any:
    class BillDict(TypedDict):  # the same, moved: another qualified name
        total_due: Annotated[int, Field(alias="total")]

    return BillDict


def _bill(name: str) -> Any:
    """A model of the class name `name` whose JSON Schema is titled `Bill`."""
    config = ConfigDict(title="Bill")
    return create_model(name, __config__=config, total_due=(int, Field(alias="total")))


@pytest.mark.parametrize(
    ("first", "then"),
    [(BillDict, _bill_dict_in_a_function()), (_bill("Bill"), _bill("Invoice"))],
)
def test_a_class_renamed_or_moved_with_its_schema_as_it_was_resumes(
    tmp_path: Path, first: Any, then: Any
) -> None:
    ledger = tmp_path / "run.sqlite"
    _runs(first, {"total": 5}, ledger, count=1)
    provider = allama.mock.MockProvider.with_text("{}")
    (resumed,) = allama.batch(provider, then, ["doc"], request=TEMPLATE, ledger=ledger)
    assert resumed.resumed and resumed.failure is None and provider.requests == []
