"""A value the model wrote into a field the caller typed secret (`SecretStr`, `SecretBytes`,
`Secret[...]`) is never quoted by the message of the extraction's error (`str()`,
`detail`): a caller logging the exception with `%s` does not leak it. Other values are
quoted as before, and `raw` keeps the whole output for the caller."""

from __future__ import annotations

import asyncio
import logging
from datetime import date
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field, Secret, SecretBytes, SecretStr

import allama
from allama.extract import ParseError
from allama.mock import MockProvider

REQUEST = allama.ChatRequest("gpt-4.1-mini").user("the login")
PREFIX = "mock: failed to parse the output in `native` mode: "


class Login(BaseModel):
    user: str
    pin: Secret[int]
    password: Annotated[SecretStr, Field(max_length=8)]


class Account(BaseModel):
    name: str
    token: SecretStr
    born: Secret[date] | None = None


class Vault(BaseModel):
    owner: str
    accounts: list[Account]
    count: int = 0


def _failure(tp: Any, output: str) -> ParseError:
    with pytest.raises(ParseError) as caught:
        allama.extract(MockProvider([output]), tp, REQUEST)
    return caught.value


async def _afailure(tp: Any, output: str) -> ParseError:
    with pytest.raises(ParseError) as caught:
        await allama.aextract(MockProvider([output]), tp, REQUEST)
    return caught.value


def _streamed_failure(tp: Any, output: str) -> ParseError:
    with allama.extract_stream(MockProvider([output]), tp, REQUEST) as opened:
        for _ in opened:
            pass
        with pytest.raises(ParseError) as caught:
            opened.finish()
    return caught.value


CASES = [
    # A `SecretStr` over its length: the value by its JSON type only.
    (
        Login,
        '{"user": "ada", "pin": 1234, "password": "SECRETSECRETSECRET"}',
        "at `password`: invalid value: a secret string, "
        "expected at most 8 items after validation, not 18",
    ),
    # A `Secret[int]` given a string.
    (
        Login,
        '{"user": "ada", "pin": "SECRETPIN", "password": "x"}',
        "at `pin`: invalid type: a secret string, expected an integer",
    ),
    # A secret in a model in a list.
    (
        Vault,
        '{"owner": "ada", "accounts": [{"name": "a", "token": "t"}, '
        '{"name": "b", "token": 424242}]}',
        "at `accounts[1].token`: invalid type: a secret integer, expected a string",
    ),
    (
        Vault,
        '{"owner": "ada", "accounts": [{"name": "b", "token": "t", "born": "SECRETDAY"}]}',
        "at `accounts[0].born`: invalid type: a secret string, "
        "expected a valid date in the format yyyy-mm-dd",
    ),
    # The fields beside them are quoted as before.
    (
        Login,
        '{"user": 42, "pin": 1234, "password": "x"}',
        "at `user`: invalid type: integer `42`, expected a string",
    ),
    (
        Vault,
        '{"owner": "ada", "accounts": [{"name": 7, "token": "SECRET"}]}',
        "at `accounts[0].name`: invalid type: integer `7`, expected a string",
    ),
    (
        Vault,
        '{"owner": "ada", "accounts": [], "count": "SEVEN"}',
        'at `count`: invalid type: string "SEVEN", expected an integer',
    ),
]


@pytest.mark.parametrize(("tp", "output", "detail"), CASES)
def test_a_secret_value_is_not_quoted_by_str_of_the_error(
    tp: Any, output: str, detail: str
) -> None:
    for error in (_failure(tp, output), asyncio.run(_afailure(tp, output))):
        assert str(error) == PREFIX + detail
        assert error.detail == detail.partition(": ")[2]
        assert error.raw == output  # the caller's own copy of the output, as before


def test_a_streamed_extraction_withholds_it_too() -> None:
    output = '{"user": "ada", "pin": "SECRETPIN", "password": "x"}'
    error = _streamed_failure(Login, output)
    assert str(error) == PREFIX + "at `pin`: invalid type: a secret string, expected an integer"


def test_logging_the_error_with_percent_s_leaks_no_secret(
    caplog: pytest.LogCaptureFixture,
) -> None:
    error = _failure(Login, '{"user": "ada", "pin": 1, "password": "SECRETSECRETSECRET"}')
    with caplog.at_level(logging.ERROR):
        logging.getLogger("app").error("extraction failed: %s", error)
    assert "SECRET" not in caplog.text
    assert "at `password`: invalid value: a secret string" in caplog.text


class Kinds(BaseModel):
    flag: Secret[bool] | None = None
    ratio: Secret[float] | None = None
    blob: SecretBytes | None = None
    choice: Secret[Literal["low", "high"]] | None = None
    either: int | SecretStr = 0
    key: Secret[str]


@pytest.mark.parametrize(
    ("output", "detail"),
    [
        (
            '{"key": "", "flag": "SECRET"}',
            "at `flag`: invalid type: a secret string, expected a boolean",
        ),
        (
            '{"key": "", "ratio": "SECRET"}',
            "at `ratio`: invalid type: a secret string, expected a number",
        ),
        (
            '{"key": "", "ratio": true}',
            "at `ratio`: invalid type: a secret boolean, expected a number",
        ),
        (
            '{"key": "", "blob": 12345}',
            "at `blob`: invalid type: a secret integer, expected a valid bytes",
        ),
        (
            '{"key": "", "choice": "SECRET"}',
            "at `choice`: unknown variant a secret string, expected 'low' or 'high'",
        ),
        # A union with a secret member: the value every member refused may be the secret.
        (
            '{"key": "", "either": 12.5}',
            "at `either`: invalid type: a secret floating point number, expected an integer",
        ),
        ('{"key": null}', "at `key`: invalid type: null, expected a string"),
        ('{"key": ["SECRET"]}', "at `key`: invalid type: a sequence, expected a string"),
    ],
)
def test_each_json_type_is_said_without_its_value(output: str, detail: str) -> None:
    error = _failure(Kinds, output)
    assert str(error) == PREFIX + detail
    assert "SECRET" not in str(error) and "12.5" not in str(error)


def test_a_parser_message_that_quotes_the_secret_is_cut() -> None:
    from uuid import UUID

    class Keyed(BaseModel):
        plain: UUID | None = None
        hidden: Secret[UUID] | None = None

    hidden = _failure(Keyed, '{"hidden": "zSECRET"}')
    assert (
        str(hidden) == PREFIX + "at `hidden`: invalid type: a secret string, expected a valid uuid"
    )
    plain = _failure(Keyed, '{"plain": "zSECRET"}')
    assert str(plain) == (
        PREFIX + 'at `plain`: invalid type: string "zSECRET", '
        "expected a valid uuid, invalid character: found `z` at 0"
    )


def test_a_bound_is_worded_without_pydantics_subject() -> None:
    class Bounded(BaseModel):
        tags: Annotated[list[int], Field(max_length=1)] = []
        code: Annotated[str, Field(max_length=2, pattern="^[a-z]*$")] = ""
        level: Annotated[int, Field(gt=3)] = 4

    cases = {
        '{"tags": [1, 2]}': "at `tags`: invalid value: a sequence, "
        "expected at most 1 item after validation, not 2",
        '{"code": "abc"}': 'at `code`: invalid value: string "abc", expected at most 2 characters',
        '{"code": "A"}': 'at `code`: invalid value: string "A", expected to match pattern '
        "'^[a-z]*$'",
        '{"level": 1}': "at `level`: invalid value: integer `1`, expected greater than 3",
    }
    for output, detail in cases.items():
        assert str(_failure(Bounded, output)) == PREFIX + detail


# ----- a key of a map typed secret: the path says `<secret key>`, no message quotes it


class Usage(BaseModel):
    by_key: dict[SecretStr, int]


class Pins(BaseModel):
    by_pin: dict[Secret[int], str]


class Rates(BaseModel):
    by_key: dict[SecretStr, float]


class Nested(BaseModel):
    by_key: dict[SecretStr, dict[int, str]]


class Sealed(BaseModel):
    inner: Secret[dict[str, int]]
    ratio: Secret[float] | None = None


class Plain(BaseModel):
    by_name: dict[str, int]


SECRET_KEYS = [
    # A value of the map, not secret itself: quoted, its key not.
    (
        Usage,
        '{"by_key": {"sk-HUNTER2": "many"}}',
        'at `by_key.<secret key>`: invalid type: string "many", expected an integer',
    ),
    # A key written twice: the JSON reader's message, made again with the type known.
    (
        Usage,
        '{"by_key": {"sk-HUNTER2": 1, "sk-HUNTER2": 2}}',
        "at `by_key`: a secret key appears twice in the object at `by_key`",
    ),
    # A key its secret type refuses.
    (
        Pins,
        '{"by_pin": {"HUNTER2": "x"}}',
        "at `by_pin.<secret key>`: invalid type: a secret string, expected an integer",
    ),
    # Two keys the secret key type reads as one.
    (
        Pins,
        '{"by_pin": {"1": "a", "01": "b"}}',
        "at `by_pin`: two keys are the same key to the type in the object at `by_pin`",
    ),
    # Keys of a plain map below a secret key: those are quoted, the secret one is not.
    (
        Nested,
        '{"by_key": {"sk-HUNTER2": {"1": "a", "01": "b"}}}',
        "at `by_key.<secret key>`: the keys `1` and `01` are the same key to the type in "
        "the object at `by_key.<secret key>`",
    ),
    (
        Rates,
        '{"by_key": {"sk-HUNTER2": NaN}}',
        "at `by_key.<secret key>`: `NaN` is not a JSON number at `by_key.<secret key>`",
    ),
    (
        Rates,
        '{"by_key": {"sk-HUNTER2": 1e999}}',
        "at `by_key.<secret key>`: the number `1e999` is too large for a floating point value",
    ),
    # A long integer read as an infinite float under a `SecretStr` key (raised a
    # `TypeError` from the path's spelling).
    (
        Rates,
        '{"by_key": {"sk-HUNTER2": 1' + "0" * 400 + "}}",
        "at `by_key.<secret key>`: a number is too large for a floating point value",
    ),
    # A key inside a secret value, and a number written into one.
    (
        Sealed,
        '{"inner": {"sk-HUNTER2": "x"}}',
        "at `inner.<secret key>`: invalid type: a secret string, expected an integer",
    ),
    (
        Sealed,
        '{"inner": {"sk-HUNTER2": 1, "sk-HUNTER2": 2}}',
        "at `inner`: a secret key appears twice in the object at `inner`",
    ),
    (
        Sealed,
        '{"inner": {}, "ratio": 1e999}',
        "at `ratio`: a secret number is too large for a floating point value",
    ),
    # A map of plain keys: quoted as before.
    (
        Plain,
        '{"by_name": {"sk-HUNTER2": "x"}}',
        'at `by_name.sk-HUNTER2`: invalid type: string "x", expected an integer',
    ),
    (
        Plain,
        '{"by_name": {"sk-HUNTER2": 1, "sk-HUNTER2": 2}}',
        "at `by_name`: the key `sk-HUNTER2` appears twice in the object at `by_name`",
    ),
]


@pytest.mark.parametrize(("tp", "output", "detail"), SECRET_KEYS)
def test_a_key_of_a_map_typed_secret_is_not_quoted(tp: Any, output: str, detail: str) -> None:
    for error in (
        _failure(tp, output),
        asyncio.run(_afailure(tp, output)),
        _streamed_failure(tp, output),
    ):
        assert str(error) == PREFIX + detail
        assert error.detail == detail.partition(": ")[2]
        assert error.path == detail.removeprefix("at `").partition("`")[0]
        assert error.raw == output


def test_a_secret_key_goes_unquoted_to_the_root_and_in_the_log_view() -> None:
    error = _failure(dict[SecretStr, int], '{"sk-HUNTER2": "many"}')
    assert error.path == "<secret key>"
    assert "HUNTER2" not in str(error)
    assert "HUNTER2" not in repr(error) and "HUNTER2" not in str(error.as_log())


class Entry(BaseModel):
    n: int


class Ledger(BaseModel):
    by_key: dict[SecretStr, Entry]


def test_an_undeclared_key_below_a_secret_key_is_placed_without_it() -> None:
    from allama import RequestField, Warning
    from allama.mock import ChatResponseBuilder

    warning = Warning.approximated(RequestField.RESPONSE_FORMAT, "`pattern` was removed at `/`")
    output = '{"by_key": {"sk-HUNTER2": {"n": 1, "extra": 2}}}'
    provider = MockProvider([ChatResponseBuilder().text(output).warning(warning).build()])
    with pytest.raises(ParseError) as caught:
        allama.extract(provider, Ledger, REQUEST)
    assert caught.value.path == "by_key.<secret key>.extra"
    assert caught.value.detail == "unknown field `extra`, expected `n`"
    assert "HUNTER2" not in str(caught.value)


def test_the_model_is_told_the_place_without_the_key_on_a_retry() -> None:
    provider = MockProvider(['{"by_key": {"sk-HUNTER2": "many"}}', '{"by_key": {"k": 1}}'])
    got = allama.Extractor(retries=1).extract(provider, Usage, REQUEST)
    assert got.metadata.passes == 2
    told = provider.requests[1].messages[-1].text() or ""
    assert "it did not match the schema at `by_key.<secret key>`" in told
