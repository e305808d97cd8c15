"""The undeclared-key walk and pydantic's own `extra` settings agree."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict

import allama
from allama import ChatRequest, ExtractionMode, Extractor, ParseError, RequestField, Warning
from allama.mock import ChatResponseBuilder, MockProvider

OUTPUT = '{"name": "Ada", "contact": {"email": "ada@example.com", "e_mail": "x"}}'


def approximated(text: str) -> MockProvider:
    warning = Warning.approximated(RequestField.RESPONSE_FORMAT, "`pattern` was removed at `/`")
    return MockProvider([ChatResponseBuilder().text(text).warning(warning).build()])


REQUEST = ChatRequest("m").user("Ada").with_option(ExtractionMode.NATIVE)


class ForbidContact(BaseModel):
    model_config = ConfigDict(extra="forbid")
    email: str | None = None


class ForbidCustomer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    contact: ForbidContact | None = None


class IgnoreContact(BaseModel):
    email: str | None = None


class IgnoreCustomer(BaseModel):
    name: str
    contact: IgnoreContact | None = None


class AllowContact(BaseModel):
    model_config = ConfigDict(extra="allow")
    email: str | None = None


class AllowCustomer(BaseModel):
    name: str
    contact: AllowContact | None = None


def parse_error(provider: MockProvider, tp: type[BaseModel], extractor: Extractor) -> ParseError:
    with pytest.raises(ParseError) as caught:
        extractor.extract(provider, tp, REQUEST)
    return caught.value


@pytest.mark.parametrize("tp", [ForbidCustomer, IgnoreCustomer])
def test_the_walk_rejects_the_key_at_its_path(tp: type[BaseModel]) -> None:
    failure = parse_error(approximated(OUTPUT), tp, Extractor())
    assert failure.path == "contact.e_mail"
    assert failure.detail == "unknown field `e_mail`, expected `email`"
    assert failure.metadata.undeclared_key_rejections == 1


def test_forbid_rejects_the_same_key_when_the_walk_is_off() -> None:
    failure = parse_error(
        approximated(OUTPUT), ForbidCustomer, Extractor(allow_undeclared_keys=True)
    )
    assert failure.path == "contact.e_mail"
    assert failure.detail == "unknown field `e_mail`"
    assert failure.metadata.undeclared_key_rejections == 0


def test_ignore_accepts_the_key_when_the_walk_is_off() -> None:
    extracted = Extractor(allow_undeclared_keys=True).extract(
        approximated(OUTPUT), IgnoreCustomer, REQUEST
    )
    assert extracted.value == IgnoreCustomer(
        name="Ada", contact=IgnoreContact(email="ada@example.com")
    )


def test_allow_is_an_open_object_for_both() -> None:
    extracted = allama.extract(approximated(OUTPUT), AllowCustomer, REQUEST)
    assert extracted.value.contact is not None
    assert extracted.value.contact.model_extra == {"e_mail": "x"}
    assert extracted.metadata.undeclared_key_rejections == 0
