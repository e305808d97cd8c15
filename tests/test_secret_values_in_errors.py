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
