"""The public API's types as a user's code under `mypy --strict` sees them.

This file is in the project's mypy run (`[tool.mypy] files`), which checks every
`assert_type` below; at runtime the same code runs against mock providers, so the types
checked are those of the values the calls give."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Literal, Union, assert_type

import pytest
from pydantic import BaseModel, Field

import allama
import allama.schema
from allama import (
    AsyncBatchRun,
    BatchResult,
    BatchRun,
    ChatRequest,
    Decision,
    Extracted,
    Extractor,
    HttpProvider,
    LlamaCppProvider,
)
from allama.mock import MockProvider, TestProvider

if TYPE_CHECKING:
    import ray.data

    import allama.ray


class Invoice(BaseModel):
    number: str


class Program(BaseModel):
    author: str
    year: int


class Route(enum.Enum):
    BILLING = "billing"
    TECHNICAL = "technical"


DOCUMENTS = ["Invoice INV-1", "Invoice INV-2"]
REQUEST = ChatRequest("m").system("Extract the invoice.")


def _described(result: BatchResult[BaseModel]) -> str:
    """A helper for any model's results (a result is read-only: covariant)."""
    return f"{result.label}: {type(result.value).__name__}"


# --- batch / abatch: the run and its results are typed by the type asked for


def test_a_batch_run_and_its_results_are_typed_by_the_model() -> None:
    run = allama.batch(
        MockProvider(['{"number": "INV-1"}'] * 2),
        Invoice,
        DOCUMENTS,
        request=REQUEST,
        extractor=Extractor(retries=1),
        label=lambda document: document[:11],
    )
    assert_type(run, BatchRun[Invoice])
    numbers: list[str] = []
    seen: list[str] = []
    with run:
        for result in run:
            assert_type(result, BatchResult[Invoice])
            assert_type(result.value, Invoice | None)
            assert result.value is not None
            numbers.append(result.value.number)
            seen.append(_described(result))
    assert numbers == ["INV-1", "INV-1"]
    assert sorted(seen) == ["Invoice INV: Invoice", "Invoice INV: Invoice"]


def test_an_async_batch_run_and_its_results_are_typed_by_the_model() -> None:
    async def main() -> list[str]:
        run = allama.abatch(
            MockProvider(['{"number": "INV-2"}'] * 2), Invoice, DOCUMENTS, request=REQUEST
        )
        assert_type(run, AsyncBatchRun[Invoice])
        numbers: list[str] = []
        async with run:
            async for result in run:
                assert_type(result, BatchResult[Invoice])
                assert_type(result.value, Invoice | None)
                assert result.value is not None
                numbers.append(result.value.number)
        return numbers

    assert asyncio.run(main()) == ["INV-2", "INV-2"]


# --- providers: `with` keeps the provider's class; every llama.cpp spelling is typed


def test_a_provider_entered_with_with_keeps_its_class() -> None:
    with allama.provider("local") as local:
        assert_type(local, LlamaCppProvider)
        assert type(local) is LlamaCppProvider
        engine = local.engine  # the engine it starts on its first request: none is sent
        assert engine is not None and engine.running is False
    with allama.provider("groq", api_key="k") as groq:
        assert_type(groq, HttpProvider)
        assert groq.name == "groq"


def test_a_provider_entered_with_async_with_keeps_its_class() -> None:
    async def main() -> type:
        async with allama.provider("llama-cpp", base_url="http://127.0.0.1:1") as server:
            assert_type(server, LlamaCppProvider)
            return type(server)

    assert asyncio.run(main()) is LlamaCppProvider


def test_the_spellings_of_the_llama_cpp_presets_are_typed_as_their_class() -> None:
    made = [
        assert_type(allama.provider("local"), LlamaCppProvider),
        assert_type(allama.provider("Local"), LlamaCppProvider),
        assert_type(allama.provider("LOCAL"), LlamaCppProvider),
        assert_type(allama.provider("llama-cpp"), LlamaCppProvider),
        assert_type(allama.provider("llama_cpp"), LlamaCppProvider),
        assert_type(allama.provider("Llama-cpp"), LlamaCppProvider),
        assert_type(allama.provider("Llama_cpp"), LlamaCppProvider),
        assert_type(allama.provider("LLAMA-CPP"), LlamaCppProvider),
        assert_type(allama.provider("LLAMA_CPP"), LlamaCppProvider),
    ]
    assert [type(provider) for provider in made] == [LlamaCppProvider] * 9
    assert [provider.name for provider in made] == ["local"] * 3 + ["llama-cpp"] * 6
    name: str = "groq"  # a name from settings: only a str to the type checker
    other = allama.provider(name, api_key="k")
    assert_type(other, HttpProvider)
    for provider in [*made, other]:
        provider.close()


# --- Extracted and BatchResult are read-only, so covariant in their type


def _passes(extracted: Extracted[BaseModel]) -> int:
    return extracted.metadata.passes


def test_an_extraction_of_a_model_is_an_extraction_of_base_model() -> None:
    extracted = allama.extract(TestProvider(), Program, ChatRequest("m").user("x"))
    assert_type(extracted, Extracted[Program])
    general: Extracted[BaseModel] = extracted
    anything: Extracted[object] = extracted
    assert _passes(extracted) == 1
    assert general.value is anything.value is extracted.value


def test_a_batch_result_of_a_model_is_a_batch_result_of_base_model() -> None:
    with allama.batch(TestProvider(), Program, ["x"], request=ChatRequest("m")) as run:
        results: list[BatchResult[Program]] = list(run)
    general: Sequence[BatchResult[BaseModel]] = results
    # `#0`: the label of an input given none.
    assert [_described(result) for result in results] == ["#0: Program"]
    assert general[0].value is results[0].value


# --- decide with `allow_abstain` passed on as a bool


def _route(ticket: str, may_abstain: bool, provider: MockProvider) -> Route | None:
    decision = allama.decide(
        provider, Route, ChatRequest("m").user(ticket), allow_abstain=may_abstain
    )
    assert_type(decision, Decision[Route | None])
    return decision.value


def test_decide_with_a_bool_flag_is_typed_by_the_options_or_none() -> None:
    assert (
        _route("charged twice", False, MockProvider.with_structured(Route.BILLING)) is Route.BILLING
    )
    assert _route("nothing of it", True, MockProvider.with_structured(None)) is None


def test_every_decide_with_a_bool_flag_is_typed_by_the_options_or_none() -> None:
    flag: bool = True
    request = ChatRequest("m").user("x")
    extractor = Extractor(retries=1)
    chosen = extractor.decide(
        MockProvider.with_structured(None), Route, request, allow_abstain=flag
    )
    assert_type(chosen, Decision[Route | None])
    assert chosen.abstained is True

    async def main() -> tuple[Route | None, Route | None]:
        first = await allama.adecide(
            MockProvider.with_structured(None), Route, request, allow_abstain=flag
        )
        assert_type(first, Decision[Route | None])
        second = await extractor.adecide(
            MockProvider.with_structured(Route.TECHNICAL), Route, request, allow_abstain=flag
        )
        assert_type(second, Decision[Route | None])
        return first.value, second.value

    assert asyncio.run(main()) == (None, Route.TECHNICAL)
    # The literals keep their own types.
    plain = allama.decide(MockProvider.with_structured(Route.BILLING), Route, request)
    assert_type(plain, Decision[Route])
    abstaining = allama.decide(
        MockProvider.with_structured(None), Route, request, allow_abstain=True
    )
    assert_type(abstaining, Decision[Route | None])
    assert (plain.value, abstaining.value) == (Route.BILLING, None)


# --- a special form (`A | B`, `Union`, `Optional`, `Literal`, `Annotated`) is typed by
# what it stands for, as a class is (it is no `type`, which once typed the value as Any)


def test_an_extraction_of_a_special_form_is_typed_by_the_form() -> None:
    request = ChatRequest("m").user("x")
    either = allama.extract(MockProvider(['{"number": "INV-1"}']), Invoice | Program, request)
    assert_type(either, Extracted[Invoice | Program])
    spelt = allama.extract(
        MockProvider(['{"author": "Ada", "year": 1843}']),
        Union[Invoice, Program],  # noqa: UP007 - the spelling under test
        request,
    )
    assert_type(spelt, Extracted[Invoice | Program])
    optional = allama.extract(MockProvider(["null"]), Invoice | None, request)
    assert_type(optional, Extracted[Invoice | None])
    word = allama.extract(MockProvider(['"y"']), Literal["x", "y"], request)
    assert_type(word, Extracted[Literal["x", "y"]])
    count = allama.extract(MockProvider(["3"]), Annotated[int, Field(ge=0)], request)
    assert_type(count, Extracted[int])
    assert (either.value, spelt.value, optional.value, word.value, count.value) == (
        Invoice(number="INV-1"),
        Program(author="Ada", year=1843),
        None,
        "y",
        3,
    )
    extractor = Extractor(retries=1)
    own = extractor.extract(MockProvider(['"x"']), Literal["x", "y"], request)
    assert_type(own, Extracted[Literal["x", "y"]])
    assert own.value == "x"

    async def main() -> tuple[Invoice | None, Invoice | Program]:
        first = await allama.aextract(MockProvider(["null"]), Invoice | None, request)
        assert_type(first, Extracted[Invoice | None])
        second = await extractor.aextract(
            MockProvider(['{"number": "INV-2"}']), Invoice | Program, request
        )
        assert_type(second, Extracted[Invoice | Program])
        return first.value, second.value

    assert asyncio.run(main()) == (None, Invoice(number="INV-2"))


def test_a_decision_among_literals_is_typed_by_them() -> None:
    request = ChatRequest("m").user("x")
    Label = Literal["spam", "ham"]
    plain = allama.decide(MockProvider.with_structured("ham"), Label, request)
    assert_type(plain, Decision[Literal["spam", "ham"]])
    abstaining = allama.decide(
        MockProvider.with_structured(None), Label, request, allow_abstain=True
    )
    assert_type(abstaining, Decision[Literal["spam", "ham"] | None])
    flag: bool = False
    flagged = Extractor().decide(
        MockProvider.with_structured("spam"), Label, request, allow_abstain=flag
    )
    assert_type(flagged, Decision[Literal["spam", "ham"] | None])
    yes_no = allama.decide(MockProvider.with_structured(True), bool, request)
    assert_type(yes_no, Decision[bool])
    assert (plain.value, abstaining.value, flagged.value, yes_no.value) == (
        "ham",
        None,
        "spam",
        True,
    )

    async def main() -> str | None:
        decision = await allama.adecide(
            MockProvider.with_structured("spam"), Label, request, allow_abstain=True
        )
        assert_type(decision, Decision[Literal["spam", "ham"] | None])
        return decision.value

    assert asyncio.run(main()) == "spam"


def test_a_batch_of_a_special_form_is_typed_by_the_form() -> None:
    inputs = ["Invoice INV-1", "Program by Ada"]
    answers = ['{"number": "INV-1"}', '{"author": "Ada", "year": 1843}']
    with allama.batch(
        MockProvider(answers), Invoice | Program, inputs, request=REQUEST, concurrency=1
    ) as run:
        assert_type(run, BatchRun[Invoice | Program])
        results = sorted(run, key=lambda result: result.index)
    assert_type(results[0].value, Invoice | Program | None)
    assert [result.value for result in results] == [
        Invoice(number="INV-1"),
        Program(author="Ada", year=1843),
    ]


# --- openai_strict: a profile it does not know


# --- openai_strict: a profile it does not know


def test_an_unknown_openai_strict_profile_is_a_value_error_naming_the_profiles() -> None:
    profile: str = "azure"  # from a settings file; the profile is "azure_legacy"
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    with pytest.raises(ValueError) as raised:
        allama.schema.openai_strict(schema, profile=profile)  # type: ignore[arg-type]
    assert str(raised.value) == (
        "unknown profile 'azure'; known profiles: current, azure_legacy, fine_tuned, xai, "
        "deepseek, groq"
    )
    kept = allama.schema.openai_strict(schema, profile="azure_legacy")
    assert kept.schema["required"] == ["n"]


# --- keyword arguments: a misspelt name is a type error, and still an error at run time
# (each `type: ignore` below is checked: mypy --strict fails on one it does not need)


def test_a_request_s_fields_as_keywords_are_typed() -> None:
    request = ChatRequest(
        "m", temperature=0.2, stop=["END"], reasoning_effort="low", unsupported_policy="error"
    )
    assert (request.temperature, request.stop, request.reasoning_effort) == (0.2, ("END",), "low")
    # Each setting's `with_` takes the same values as the keyword does.
    changed = ChatRequest("m").with_reasoning_effort("low").with_unsupported_policy("error")
    assert (changed.reasoning_effort, changed.unsupported_policy) == ("low", "error")
    assert changed == ChatRequest("m", reasoning_effort="low", unsupported_policy="error")
    with pytest.raises(ValueError) as raised:
        ChatRequest("m").with_reasoning_effort("lowest")  # type: ignore[arg-type]
    assert str(raised.value) == (
        "invalid `reasoning_effort`: Input should be 'none', 'minimal', 'low', 'medium' or 'high'"
    )
    with pytest.raises(ValueError, match="temprature\n  Extra inputs are not permitted"):
        ChatRequest("m", temprature=0.2)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"^ChatRequest: `temperature` must be a number or None"):
        ChatRequest("m", temperature="warm")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown setting `max_tokens`"):
        ChatRequest.from_openai("m", [], max_tokens=5)  # type: ignore[call-arg]


def test_provider_options_are_typed_and_can_be_gathered_first() -> None:
    options: allama.ProviderOptions = {"api_key": "k", "timeout": 5.0}
    groq = allama.provider("groq", **options)
    assert_type(groq, HttpProvider)
    assert groq.name == "groq"
    with pytest.raises(TypeError, match="has no option 'api_kye'; did you mean 'api_key'"):
        allama.provider("groq", api_kye="k")  # type: ignore[call-overload]
    with pytest.raises(TypeError) as raised:
        allama.provider("groq", model="llama-3.3-70b-versatile")
    assert str(raised.value) == (
        "provider('groq') takes no 'model': chat_template, context, engine, model, parallel, "
        "threads are options of provider('local'); the model is named by each request: "
        "ChatRequest(model)"
    )


if TYPE_CHECKING:  # checked by mypy only: Ray takes seconds to import

    def _ray_options(ds: ray.data.Dataset, options: allama.ProviderOptions) -> None:
        """`allama.ray` takes the options `allama.provider` does, typed as they are."""
        allama.ray.extract_dataset(
            ds, Invoice, provider="groq", provider_options=options, text_column="t", model="m"
        )
        allama.ray.extract_dataset(
            ds,
            Invoice,
            provider="groq",
            provider_options={"api_kye": "k"},  # type: ignore[arg-type]
            text_column="t",
            model="m",
        )


def test_an_extractor_s_changed_settings_are_typed() -> None:
    extractor = Extractor().with_options(retries=2, min_enforcement="approximate")
    assert (extractor.retries, extractor.min_enforcement) == (2, "approximate")
    with pytest.raises(TypeError, match="Extractor has no setting 'retry'"):
        Extractor().with_options(retry=2)  # type: ignore[call-arg]
