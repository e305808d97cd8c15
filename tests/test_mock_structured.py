"""`Structured`: a scripted value that answers in whichever form the extraction asks for.

Seed 000: "To test code that extracts, script the value the model returns with
`MockResponse::structured`: it answers in the form the extraction asks for, whichever mode
it picks."
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from typing import Annotated, Any, Literal

import pytest
from pydantic import (
    Base64Bytes,
    Base64Str,
    Base64UrlBytes,
    Base64UrlStr,
    BaseModel,
    Field,
    Json,
    JsonValue,
    Secret,
    SecretBytes,
    SecretStr,
)
from typing_extensions import TypedDict

import allama
from _seed_support import Run, alice, request
from allama import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ExtractionMode,
    Extractor,
    FinishReason,
    ResponseFormat,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolChoice,
    ToolDefinition,
    Usage,
)
from allama.extract import EXTRACTION_TOOL
from allama.extract._root import ROOT_KEY, ROOT_OPTION
from allama.mock import (
    MockProvider,
    MockScriptError,
    MockScriptExhausted,
    MockStreamingProvider,
    Structured,
)

ALICE_JSON = '{"name":"Alice","age":31}'
MODES = [ExtractionMode.AUTO, ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL]
USAGE = Usage(input_tokens=12, output_tokens=7)


def in_mode(mode: ExtractionMode) -> ChatRequest:
    return request().with_option(mode)


def chosen(mode: ExtractionMode) -> ExtractionMode:
    """The mode a scripted provider ends up in: auto guesses native (capabilities unknown)."""
    return ExtractionMode.NATIVE if mode is ExtractionMode.AUTO else mode


# Through the extraction, in every mode, sync and async


@pytest.mark.parametrize("mode", MODES)
def test_extract_gets_the_scripted_value_in_every_mode(run: Run, mode: ExtractionMode) -> None:
    provider = MockProvider.with_structured(alice(), usage=USAGE)
    extracted = run.extract(provider, type(alice()), in_mode(mode))
    assert extracted.value == alice()
    assert extracted.metadata.mode is chosen(mode)
    assert (extracted.metadata.passes, extracted.metadata.usage) == (1, USAGE)
    if chosen(mode) is ExtractionMode.FORCED_TOOL:
        assert extracted.response.content == (
            ToolCall(id="call_mock_1", name=EXTRACTION_TOOL, arguments=ALICE_JSON),
        )
        assert extracted.response.finish_reason == FinishReason.TOOL_CALLS
    else:
        assert extracted.response.content == (TextPart(text=ALICE_JSON),)
        assert extracted.response.finish_reason == FinishReason.STOP
    assert extracted.response.provider == "mock"
    assert provider.call_count == 1


@pytest.mark.parametrize("mode", MODES)
def test_a_streamed_extraction_gets_the_scripted_value_in_pieces(
    run: Run, mode: ExtractionMode
) -> None:
    provider = MockStreamingProvider.with_structured(alice(), usage=USAGE)
    stream = run.stream(provider, type(alice()), in_mode(mode))
    events = stream.read_all()
    extracted = stream.finish()
    assert extracted.value == alice()
    assert extracted.metadata.mode is chosen(mode)
    assert extracted.metadata.usage == USAGE
    delta = ToolCallDelta if chosen(mode) is ExtractionMode.FORCED_TOOL else TextDelta
    pieces = [event for event in events if isinstance(event, delta)]
    assert len(pieces) == 4  # 25 characters, 8 to a delta
    assert "".join(p.arguments if isinstance(p, ToolCallDelta) else p.text for p in pieces) == (
        ALICE_JSON
    )


def test_a_streaming_mock_answers_whole_calls_too(run: Run) -> None:
    provider = MockStreamingProvider([Structured(alice())]).then_structured(alice())
    for mode in (ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL):
        assert run.extract(provider, type(alice()), in_mode(mode)).value == alice()
    with pytest.raises(MockScriptExhausted):
        run.extract(provider, type(alice()), in_mode(ExtractionMode.NATIVE))


def test_structured_answers_take_their_place_in_a_script(run: Run) -> None:
    # The first answer is not JSON; the retry gets the scripted value, in the retry's form.
    provider = MockProvider(["not json"]).then(Structured(alice()))
    extractor = Extractor(retries=1)
    extracted = run.extract(provider, type(alice()), in_mode(ExtractionMode.FORCED_TOOL), extractor)
    assert extracted.value == alice()
    assert extracted.metadata.passes == 2
    assert extracted.response.content == (
        ToolCall(id="call_mock_2", name=EXTRACTION_TOOL, arguments=ALICE_JSON),
    )


# Any value pydantic can write


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


@dataclasses.dataclass
class Box:
    colour: Colour
    sizes: list[int]


class Row(TypedDict):
    id: int
    label: str


class Aliased(BaseModel):
    first_name: Annotated[str, Field(alias="firstName")]


VALUES: list[tuple[Any, Any]] = [
    (Box, Box(Colour.GREEN, [1, 2])),
    (Row, Row(id=1, label="x")),
    (dict[str, int], {"a": 1, "b": 2}),
    (list[Box], [Box(Colour.RED, []), Box(Colour.GREEN, [3])]),
    (int, 42),
    (Colour, Colour.RED),
    (Literal["yes", "no"], "no"),
    (str, "plain text, quoted as JSON"),
    (Aliased, Aliased.model_validate({"firstName": "Ada"})),
    (int | None, None),
]


@pytest.mark.parametrize(("tp", "value"), VALUES, ids=lambda x: repr(x)[:30])
@pytest.mark.parametrize("mode", [ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL])
def test_any_value_comes_back_as_itself(
    run: Run, tp: Any, value: Any, mode: ExtractionMode
) -> None:
    provider = MockProvider.with_structured(value)
    assert run.extract(provider, tp, in_mode(mode)).value == value


def test_values_are_written_by_alias_as_compact_json() -> None:
    assert (
        Structured(Aliased.model_validate({"firstName": "Ada"})).json_text == '{"firstName":"Ada"}'
    )
    assert Structured(Box(Colour.RED, [1])).json_text == '{"colour":"red","sizes":[1]}'
    assert Structured({"é": None}).json_text == '{"é":null}'


def test_values_are_written_as_validation_reads_them_or_refused() -> None:
    from datetime import date

    from pydantic import field_serializer

    class Totalled(BaseModel):
        total: int = Field(serialization_alias="Total")  # read as `total`

    class Meta(BaseModel):
        meta: Json[dict[str, int]]  # read as JSON text

    for value in (Totalled(total=1), Meta(meta='{"a": 1}')):  # type: ignore[arg-type]
        provider = MockProvider.with_structured(value)
        assert allama.extract(provider, type(value), request()).value == value
    assert Structured(Totalled(total=1)).json_text == '{"total":1}'
    assert Structured(Meta(meta='{"a": 1}')).json_text == '{"meta":"{\\"a\\":1}"}'  # type: ignore[arg-type]

    class European(BaseModel):
        day: date

        @field_serializer("day")
        def written(self, day: date) -> str:
            return day.strftime("%d/%m/%Y")

    class Hidden(BaseModel):
        shown: int
        note: str = Field(default="", exclude=True)

    causes = {
        "European": "reading it back fails: at `day`: Input should be a valid date in the "
        "format YYYY-MM-DD, invalid character in year",
        # Read back as extraction reads it (strictly): `"1"` is no int there.
        "Counted": "reading it back fails: at `a`: Input should be a valid integer",
        "Hidden": "it reads back as another value (a field excluded from the JSON, or a "
        "serializer of its own format)",
    }

    class Counted(BaseModel):
        a: int

        @field_serializer("a")
        def written(self, a: int) -> str:
            return str(a)

    for value in (European(day=date(2026, 1, 2)), Hidden(shown=1, note="kept"), Counted(a=1)):
        with pytest.raises(TypeError) as refused:
            Structured(value)
        name = type(value).__name__
        assert str(refused.value) == (
            f"Structured: a {name} written as JSON does not read back as itself: "
            f"{causes[name]}; script the model's JSON text instead, with "
            "`MockProvider.with_text`"
        )


def test_a_value_that_is_not_json_fails_at_once() -> None:
    with pytest.raises(TypeError, match=r"^Structured: a object cannot be written as JSON"):
        Structured(object())
    with pytest.raises(TypeError, match="`usage` must be a Usage, not tuple"):
        Structured(1, usage=(1, 2))  # type: ignore[arg-type]


# Secrets, `Json` and base64 outside a model: written as the type reads them


class Login(BaseModel):
    user: str
    password: SecretStr
    pin: Secret[int]


SECRETS: list[tuple[Any, Any]] = [
    (SecretStr, SecretStr("hunter2")),
    (list[SecretStr], [SecretStr("hunter2")]),
    (dict[str, SecretStr], {"k": SecretStr("hunter2")}),
    (SecretBytes, SecretBytes(b"hunter2")),
    (Login, Login(user="ada", password=SecretStr("hunter2"), pin=Secret[int](1234))),
    (list[Login], [Login(user="ada", password=SecretStr("hunter2"), pin=Secret[int](1234))]),
]


def _secret(value: Any) -> Any:
    """The scripted secret, wherever the value holds it."""
    if isinstance(value, list):
        return _secret(value[0])
    if isinstance(value, dict):
        return _secret(value["k"])
    if isinstance(value, Login):
        return (value.password.get_secret_value(), value.pin.get_secret_value())
    return value.get_secret_value()


@pytest.mark.parametrize(("tp", "value"), SECRETS, ids=lambda x: repr(x)[:30])
@pytest.mark.parametrize("mode", [ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL])
def test_a_secret_is_written_as_its_value(
    run: Run, tp: Any, value: Any, mode: ExtractionMode
) -> None:
    """pydantic writes a secret as `**********`, which reads back as that mask: the
    extraction would give the code under test a secret that is not the scripted one."""
    extracted = run.extract(MockProvider.with_structured(value), tp, in_mode(mode)).value
    assert extracted == value
    assert _secret(extracted) in ("hunter2", b"hunter2", ("hunter2", 1234))
    stream = run.stream(MockStreamingProvider.with_structured(value), tp, in_mode(mode))
    stream.read_all()
    assert _secret(stream.finish().value) == _secret(value)


ROOTS: list[tuple[Any, Any, str]] = [
    (Json[list[int]], [1, 2], '"[1,2]"'),
    (Json[Aliased], Aliased.model_validate({"firstName": "Ada"}), '"{\\"firstName\\":\\"Ada\\"}"'),
    (Json[list[int]] | None, [1], '"[1]"'),
    (Json[list[int]] | None, None, "null"),
    (list[Json[int]], [1, 2], '["1","2"]'),
    (Base64Bytes, b"\x00\xff", '"AP8="'),
    (Base64UrlBytes, b"\xfb\xff", '"-_8="'),
    (dict[str, Base64Bytes], {"a": b"\xff"}, '{"a":"/w=="}'),
    (tuple[Json[int], Base64Bytes, bytes], (1, b"\xff", b"ok"), '["1","/w==","ok"]'),
    (Base64Str, "hello", '"aGVsbG8="'),
    (Base64UrlStr, "hi?", '"aGk_"'),
    (list[Base64Str], ["hello", "ok"], '["aGVsbG8=","b2s="]'),
    (dict[str, Base64Str], {"a": "hello"}, '{"a":"aGVsbG8="}'),
    (Base64Str | int, "hello", '"aGVsbG8="'),
    (tuple[Base64Str, str], ("hello", "hello"), '["aGVsbG8=","hello"]'),
]


@pytest.mark.parametrize(("tp", "value", "written"), ROOTS, ids=lambda x: repr(x)[:30])
@pytest.mark.parametrize("mode", [ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL])
def test_a_value_outside_a_model_is_written_as_its_schema_reads_it(
    run: Run, tp: Any, value: Any, written: str, mode: ExtractionMode
) -> None:
    """As a model writes its fields: `Json` as text, base64 bytes and text encoded (a
    `Base64Str` reads the base64 of the text it holds)."""
    provider = MockProvider.with_structured(value)
    extracted = run.extract(provider, tp, in_mode(mode))
    assert extracted.value == value
    block = extracted.response.content[0]
    text = block.arguments if isinstance(block, ToolCall) else block.text  # type: ignore[union-attr]
    sent = provider.last_request
    assert sent is not None
    wrapped = sent.option_json(ROOT_OPTION) is not None  # as the mode needs
    assert text == (f'{{"{ROOT_KEY}":{written}}}' if wrapped else written)
    stream = run.stream(MockStreamingProvider.with_structured(value), tp, in_mode(mode))
    stream.read_all()
    assert stream.finish().value == value


def test_bytes_json_holds_only_as_base64_are_refused_where_the_schema_reads_text() -> None:
    scripted = Structured(b"\xff")  # a `Base64Bytes` reads it: see above
    assert repr(scripted) == "Structured(json=<withheld>)"
    with pytest.raises(MockScriptError) as refused:
        allama.extract(MockProvider([scripted]), bytes, request())
    assert str(refused.value) == (
        "the scripted value holds bytes that are not UTF-8 text, and the schema reads those "
        "bytes as text (format 'binary'), not as base64: script text, or extract a type "
        "that reads base64 (`Base64Bytes`)"
    )
    with pytest.raises(TypeError, match="only where the schema reads them as base64"):
        scripted.json_text  # noqa: B018
    assert Structured(b"ok").json_text == '"ok"'


class _Shade(enum.Enum):
    DARK = (0, 0, 0)  # written as `[0,0,0]`, which no strict reading takes for the tuple


def test_a_value_outside_a_model_that_does_not_read_back_is_refused() -> None:
    with pytest.raises(TypeError) as refused:
        Structured({"shades": [_Shade.DARK]})
    assert str(refused.value) == (
        "Structured: a _Shade written as JSON does not read back as itself: reading it back "
        "fails (at `shades[0]`): Input should be (0, 0, 0); script its JSON text instead, "
        "with `MockProvider.with_text`"
    )


# The form, read from the request

SCHEMA: dict[str, JsonValue] = {"type": "object"}


def answer(req: ChatRequest, value: Any = None) -> Any:
    return MockProvider.with_structured([1, 2] if value is None else value).chat(req)


def test_a_json_schema_format_gets_json_text() -> None:
    req = request().with_response_format(ResponseFormat.for_schema(SCHEMA))
    assert answer(req).content == (TextPart(text="[1,2]"),)


def test_no_format_or_a_json_object_format_gets_plain_json_text() -> None:
    assert answer(request()).content == (TextPart(text="[1,2]"),)
    assert answer(request().with_response_format(ResponseFormat.json_object())).text() == "[1,2]"
    tools = request().with_tools([ToolDefinition(name="a")])
    assert answer(tools.with_tool_choice(ToolChoice.auto())).text() == "[1,2]"
    assert answer(tools.with_tool_choice(ToolChoice.none())).text() == "[1,2]"


def test_a_forced_tool_gets_one_call() -> None:
    tools = request().with_tools([ToolDefinition(name="a"), ToolDefinition(name="b")])
    named = answer(tools.with_tool_choice(ToolChoice.tool("b")))
    assert named.content == (ToolCall(id="call_mock_1", name="b", arguments="[1,2]"),)
    assert named.finish_reason == FinishReason.TOOL_CALLS
    only = request().add_tool(ToolDefinition(name="only"))
    required = answer(only.with_tool_choice(ToolChoice.required()))
    assert required.content == (ToolCall(id="call_mock_1", name="only", arguments="[1,2]"),)
    with pytest.raises(MockScriptError, match="under tool choice `required` with 2 tools"):
        answer(tools.with_tool_choice(ToolChoice.required()))


def test_a_wrapped_root_gets_the_value_under_its_key() -> None:
    wrapped = request().with_option_json(ROOT_OPTION, ROOT_KEY)
    native = wrapped.with_response_format(ResponseFormat.for_schema(SCHEMA))
    assert answer(native).content == (TextPart(text='{"value":[1,2]}'),)
    forced = wrapped.add_tool(ToolDefinition(name=EXTRACTION_TOOL)).with_tool_choice(
        ToolChoice.tool(EXTRACTION_TOOL)
    )
    assert answer(forced).content == (
        ToolCall(id="call_mock_1", name=EXTRACTION_TOOL, arguments='{"value":[1,2]}'),
    )
    other_key = request().with_option_json(ROOT_OPTION, 'it"em')
    assert answer(other_key, "x").text() == '{"it\\"em":"x"}'
    with pytest.raises(MockScriptError, match="must be the key the value is wrapped in"):
        answer(request().with_option_json(ROOT_OPTION, True))


def test_a_wrapped_root_streams_wrapped(run: Run) -> None:
    wrapped = request().with_option_json(ROOT_OPTION, ROOT_KEY)
    provider = MockStreamingProvider.with_structured(["a"])
    if run.is_async:
        stream = run.wait(provider.achat_stream(wrapped))
        response = run.wait(stream.response())
    else:
        response = provider.chat_stream(wrapped).response()
    assert response.text() == '{"value":["a"]}'


@pytest.mark.parametrize("mode", [ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL])
def test_a_mock_that_needs_object_roots_still_answers_a_list(
    run: Run, mode: ExtractionMode
) -> None:
    # Where the engine wraps non-object roots for such a provider, it marks the request and
    # the answer is wrapped to match; where it does not, the list is answered as it is.
    provider = (
        MockProvider.with_structured(["red", "green"])
        .with_chat_capability(
            ChatCapability.RESPONSE_SCHEMA_ANY_ROOT, CapabilitySupport.UNSUPPORTED
        )
        .with_chat_capability(ChatCapability.TOOL_SCHEMA_ANY_ROOT, CapabilitySupport.UNSUPPORTED)
    )
    extracted = run.extract(provider, list[Literal["red", "green"]], in_mode(mode))
    assert extracted.value == ["red", "green"]
    sent = provider.last_request
    assert sent is not None
    key = sent.option_json(ROOT_OPTION)
    written = '["red","green"]' if key is None else f'{{"{key}":["red","green"]}}'
    block = extracted.response.content[0]
    assert (block.arguments if isinstance(block, ToolCall) else block.text) == written


def test_the_repr_withholds_the_value() -> None:
    assert repr(Structured({"secret": "SECRET"})) == "Structured(json=<withheld 19 chars>)"


def test_the_readme_example() -> None:
    class Program(BaseModel):
        author: str
        year: int

    provider = MockProvider.with_structured(Program(author="Ada", year=1843))
    req = ChatRequest("gpt-5-mini").user("Ada published the first program in 1843.")
    extracted = allama.extract(provider, Program, req.with_option(ExtractionMode.FORCED_TOOL))
    assert extracted.value == Program(author="Ada", year=1843)
    assert extracted.metadata.mode is ExtractionMode.FORCED_TOOL


# A decision that abstains, scripted by its value


class _Route(enum.Enum):
    BILLING = "billing"
    TECHNICAL = "technical"


def _abstaining() -> list[Any]:
    choosing = MockProvider.with_structured(None).with_supported_chat_capabilities(
        [ChatCapability.CHOICE_OUTPUT]
    )
    return [
        MockProvider.with_structured(None),
        MockStreamingProvider.with_structured(None),
        choosing,
    ]


@pytest.mark.parametrize("index", [0, 1, 2])
def test_none_scripts_a_decision_that_abstains(index: int) -> None:
    """`None` is what an abstaining decision gives: scripted, it is written as the
    abstention's label (`none of these`), in the options' enum or as a choice's text."""
    request = ChatRequest("m").user("x")
    chosen = allama.decide(_abstaining()[index], _Route, request, allow_abstain=True)
    assert (chosen.value, chosen.abstained) == (None, True)
    chosen = asyncio.run(allama.adecide(_abstaining()[index], _Route, request, allow_abstain=True))
    assert (chosen.value, chosen.abstained) == (None, True)


def test_none_where_the_options_hold_no_abstention_is_an_answer_outside_them() -> None:
    with pytest.raises(allama.ParseError):
        allama.decide(MockProvider.with_structured(None), _Route, ChatRequest("m").user("x"))


def test_a_streamed_script_refuses_log_probabilities_no_stream_carries() -> None:
    from allama import TokenLogprob
    from allama.mock import ChatResponseBuilder

    response = (
        ChatResponseBuilder()
        .text("a")
        .build()
        .model_copy(update={"logprobs": (TokenLogprob(token="a", logprob=-0.1),)})
    )
    said = (
        "a scripted response with log-probabilities cannot be streamed (no stream event "
        "carries them, as no provider's stream does here): script it on MockProvider "
        "and call `chat`"
    )
    with pytest.raises(MockScriptError) as caught:
        MockStreamingProvider.from_responses([response])
    assert str(caught.value) == said
    with pytest.raises(MockScriptError):
        MockStreamingProvider().then_response(response)
    assert MockProvider.with_response(response).chat(ChatRequest("m").user("x")).logprobs
