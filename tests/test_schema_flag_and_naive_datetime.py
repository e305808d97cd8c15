"""A flag (`enum.Flag`, `IntFlag`) is sent as the integers it reads, its members combined,
where pydantic lists the members alone; a `NaiveDatetime`'s pattern, which checks the shape
of a date only, is reported as such by every provider instead of `exact`."""

from __future__ import annotations

import datetime
import enum
import json
import re
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, NaiveDatetime, TypeAdapter, ValidationError

from _native_wire import MODELS, extract_through
from allama import SchemaEnforcement
from allama.schema import gemini_json_schema, openai_strict, type_schema
from allama.schema._dialects._anthropic import anthropic
from allama.schema._dialects._llama_cpp import llama_cpp
from allama.schema._types import NAIVE_DATETIME_PATTERN
from allama.types import WarningKind

INT64 = 2**63


# ----- flags


class Perm(enum.IntFlag):  # an `IntFlag` keeps bits no member names (`KEEP`)
    R = 4
    W = 2
    X = 1


class Access(enum.Flag):  # a `Flag` reads only its members' bits (`STRICT`)
    READ = 1
    WRITE = 2
    ADMIN = 8


class Conformed(enum.Flag, boundary=enum.CONFORM):  # other bits are dropped
    A = 1
    B = 4


class Ejected(enum.IntFlag, boundary=enum.EJECT):  # other numbers are plain integers
    A = 1
    B = 4


class Seven(enum.Flag):  # seven bits from the lowest: every integer up to 127
    A = 1
    B = 2
    C = 4
    D = 8
    E = 16
    F = 32
    G = 64


class Scattered(enum.Flag):  # seven bits with gaps: 2 is no combination
    A = 1
    B = 4
    C = 16
    D = 64
    E = 256
    F = 1024
    G = 4096


def _described(flag: type[enum.Flag]) -> str:
    named = ", ".join(f"{name} = {member.value}" for name, member in flag.__members__.items())
    return f"Flags combined by adding their values: {named}"


FLAG_SCHEMAS: list[tuple[type[enum.Flag], dict[str, Any]]] = [
    (Perm, {"type": "integer", "minimum": 0, "maximum": INT64 - 1}),
    (Access, {"type": "integer", "enum": [0, 1, 2, 3, 8, 9, 10, 11]}),
    (Conformed, {"type": "integer", "enum": [0, 1, 4, 5]}),
    (Ejected, {"type": "integer", "minimum": -INT64, "maximum": INT64 - 1}),
    (Seven, {"type": "integer", "minimum": 0, "maximum": 127}),
    (Scattered, {"type": "integer", "minimum": 0, "maximum": 5461, "format": "flags"}),
]


@pytest.mark.parametrize(("flag", "values"), FLAG_SCHEMAS)
def test_a_flag_is_written_as_the_integers_it_reads(
    flag: type[enum.Flag], values: dict[str, Any]
) -> None:
    # Pydantic wrote the members alone (`enum: [4, 2, 1]`), though `R | W` (6) is a value.
    assert type_schema(flag).schema == {
        "title": flag.__name__,
        "description": _described(flag),
        **values,
    }


def _candidates(flag: type[enum.Flag]) -> list[int]:
    ends = [INT64 - 1, INT64, -INT64, -INT64 - 1, 2**62, 2**62 + 6]
    return [*range(-300, 5600), *ends]


@pytest.mark.parametrize(("flag", "values"), FLAG_SCHEMAS)
def test_every_value_of_a_flag_passes_its_schema_and_nothing_else_does(
    flag: type[enum.Flag], values: dict[str, Any]
) -> None:
    schema = type_schema(flag).schema
    adapter: TypeAdapter[Any] = TypeAdapter(flag)
    checker = jsonschema.Draft202012Validator(schema)
    widened: list[int] = []
    for number in _candidates(flag):
        try:
            value = adapter.validate_json(str(number))
        except ValidationError:
            value = None
        written = None if value is None else adapter.dump_python(value, mode="json", warnings=False)
        if written == number:  # a value of the type, as its JSON is written
            assert checker.is_valid(number), (flag, number)
        if checker.is_valid(number) and value is None:
            widened.append(number)
    # Only a range marked `format: flags` (which each provider reports) holds refused ones.
    if "format" in values:
        assert widened[:3] == [2, 3, 6]
    else:
        assert widened == []


class Permissions(BaseModel):
    perms: Perm
    access: Access


def test_combined_flags_are_sent_and_the_record_says_what_each_provider_enforces() -> None:
    reply = '{"perms": 6, "access": 9}'
    records: dict[str, tuple[SchemaEnforcement, list[str]]] = {}
    for name in MODELS:
        extracted, sent = extract_through(name, Permissions, reply)
        assert extracted.value == Permissions(
            perms=Perm.R | Perm.W, access=Access.READ | Access.ADMIN
        )
        defs = sent["$defs"]
        assert defs["Access"] == {
            "title": "Access",
            "description": _described(Access),
            "type": "integer",
            "enum": [0, 1, 2, 3, 8, 9, 10, 11],
        }
        bounds = {"minimum": 0, "maximum": INT64 - 1}
        if name == "anthropic":
            bounds = {}  # it takes no bounds: removed, and said so below
        elif name == "llama-cpp":
            # The widest its converter reads: 2**63 - 1 (its int64 end is no bound) is lost.
            bounds = {"minimum": 0, "maximum": INT64 - 2}
        assert defs["Perm"] == {
            "title": "Perm",
            "description": _described(Perm),
            "type": "integer",
            **bounds,
        }
        metadata = extracted.metadata
        records[name] = (metadata.enforcement, [w.message for w in metadata.degradations])
    exact = (SchemaEnforcement.EXACT, [])
    assert records == {
        "openai": exact,
        "gemini": exact,
        "llama-cpp": (
            SchemaEnforcement.APPROXIMATE,
            [
                "the schema of `Permissions` was approximated: `integer` was narrowed at "
                "`Perm`: llama.cpp's grammar writes integers only from -9223372036854775806 to "
                "9223372036854775806 (64 bits; bounds within them keep it exact)"
            ],
        ),
        # Any integer past the members' bits is an `IntFlag`'s value, but not past 64 bits.
        "anthropic": (
            SchemaEnforcement.APPROXIMATE,
            [
                "the schema of `Permissions` was approximated: `maximum` was removed at `Perm`",
                "the schema of `Permissions` was approximated: `minimum` was removed at `Perm`",
            ],
        ),
    }


class Scattering(BaseModel):
    bits: Scattered


@pytest.mark.parametrize(
    ("name", "notes"),
    [
        (
            "openai",
            ["`format` was removed at `Scattered`: OpenAI strict mode does not enforce `flags`"],
        ),
        (
            "anthropic",
            [
                "`format` was removed at `Scattered`: Anthropic strict mode does not enforce "
                "`flags`",
                "`maximum` was removed at `Scattered`",
                "`minimum` was removed at `Scattered`",
            ],
        ),
        (
            "gemini",
            [
                "`format` was removed at `Scattered`: Gemini responseJsonSchema does not "
                "enforce `flags`"
            ],
        ),
        ("llama-cpp", ["`format` `flags` is not enforced by the grammar at `Scattered`"]),
    ],
)
def test_a_flag_too_large_to_list_is_a_range_every_provider_calls_approximate(
    name: str, notes: list[str]
) -> None:
    # 128 combinations with gaps between them: the range holds integers the type refuses.
    extracted, sent = extract_through(name, Scattering, '{"bits": 4097}')
    assert extracted.value == Scattering(bits=Scattered.A | Scattered.G)
    assert extracted.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    assert [w.message for w in extracted.metadata.degradations] == [
        f"the schema of `Scattering` was approximated: {note}" for note in notes
    ]
    kept = {"format": "flags"} if name == "llama-cpp" else {}
    bounds = {} if name == "anthropic" else {"minimum": 0, "maximum": 5461}
    assert sent["$defs"]["Scattered"] == {
        "title": "Scattered",
        "description": _described(Scattered),
        "type": "integer",
        **bounds,
        **kept,
    }


def test_a_map_keyed_by_a_flag_lists_the_keys_validation_reads() -> None:
    # A key is text, and a flag reads from text only its members' values (no combination):
    # the names listed are exactly those. A `Flag`'s keys are read from no text at all.
    names = type_schema(dict[Perm, int]).schema["propertyNames"]
    assert names == {"enum": ["4", "2", "1"]}
    adapter: TypeAdapter[Any] = TypeAdapter(dict[Perm, int])
    read = []
    for number in range(-8, 17):
        try:
            adapter.validate_json(json.dumps({str(number): 0}))
        except ValidationError:
            continue
        read.append(str(number))
    assert sorted(read) == sorted(names["enum"])
    with pytest.raises(TypeError, match="its map keyed by `Access` reads no key"):
        type_schema(dict[Access, int])


# ----- naive datetimes


class Meeting(BaseModel):
    starts: NaiveDatetime


NAIVE = {"type": "string", "pattern": NAIVE_DATETIME_PATTERN, "format": "naive-date-time"}


def test_a_naive_datetime_pattern_is_marked_as_checking_the_shape_only() -> None:
    assert type_schema(NaiveDatetime).schema == NAIVE
    # The pattern lets a day no month has through; the type refuses it.
    assert re.search(NAIVE_DATETIME_PATTERN, "2024-02-31T00:00:00")
    with pytest.raises(ValidationError, match="day value is outside expected range"):
        TypeAdapter(NaiveDatetime).validate_json('"2024-02-31T00:00:00"')


def test_each_dialect_notes_that_the_naive_datetime_is_not_fully_enforced() -> None:
    schema = type_schema(Meeting).schema
    assert schema["properties"]["starts"] == {**NAIVE, "title": "Starts"}
    at = "`/properties/starts`"
    shape = {"type": "string", "pattern": NAIVE_DATETIME_PATTERN, "title": "Starts"}
    for rewrite, starts, notes in (
        (
            openai_strict(schema),
            shape,
            [
                f"`format` was removed at {at}: OpenAI strict mode does not enforce "
                "`naive-date-time`"
            ],
        ),
        (
            anthropic(schema),
            shape,
            [
                f"`format` was removed at {at}: Anthropic strict mode does not enforce "
                "`naive-date-time`"
            ],
        ),
        (
            gemini_json_schema(schema),
            {"type": "string", "title": "Starts"},
            [
                f"`format` was removed at {at}: Gemini responseJsonSchema does not enforce "
                "`naive-date-time`",
                f"`pattern` was removed at {at}",
            ],
        ),
        (
            llama_cpp(schema),
            {**NAIVE, "title": "Starts"},
            [f"`format` `naive-date-time` is not enforced by the grammar at {at}"],
        ),
    ):
        assert rewrite.schema["properties"]["starts"] == starts
        assert [n.message for n in rewrite.notes] == notes
        assert all(n.kind is WarningKind.APPROXIMATED for n in rewrite.notes)


@pytest.mark.parametrize("name", list(MODELS))
def test_a_naive_datetime_is_recorded_approximate_by_every_provider(name: str) -> None:
    # OpenAI and llama.cpp enforce the pattern, which February 31 passes: they recorded
    # `exact` with no note, where a `datetime`'s `date-time` on llama.cpp said "shape only".
    extracted, sent = extract_through(name, Meeting, '{"starts": "2024-02-29T10:30:00"}')
    assert extracted.value == Meeting(starts=datetime.datetime(2024, 2, 29, 10, 30))
    notes = {
        "openai": [
            "`format` was removed at `Meeting.starts`: OpenAI strict mode does not enforce "
            "`naive-date-time`"
        ],
        "anthropic": [
            "`format` was removed at `Meeting.starts`: Anthropic strict mode does not enforce "
            "`naive-date-time`"
        ],
        "gemini": [
            "`format` was removed at `Meeting.starts`: Gemini responseJsonSchema does not "
            "enforce `naive-date-time`",
            "`pattern` was removed at `Meeting.starts`",
        ],
        "llama-cpp": [
            "`format` `naive-date-time` is not enforced by the grammar at `Meeting.starts`"
        ],
    }[name]
    assert extracted.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    assert [w.message for w in extracted.metadata.degradations] == [
        f"the schema of `Meeting` was approximated: {note}" for note in notes
    ]
    starts = {k: v for k, v in NAIVE.items() if name == "llama-cpp" or k != "format"}
    if name == "gemini":
        starts = {"type": "string"}
    assert sent["properties"]["starts"] == {**starts, "title": "Starts"}
