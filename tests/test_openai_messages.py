"""`ChatRequest.from_openai` and `to_openai_messages`: conversations in OpenAI's message form."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests._recording import provider

from allama import (
    AssistantMessage,
    ChatRequest,
    DeveloperMessage,
    DocumentPart,
    ImagePart,
    Message,
    Reasoning,
    ReasoningEffort,
    Refusal,
    ResponseFormat,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolChoice,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)

PNG = b"\x89PNG\r\n\x1a\n\x00\xff"
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()

CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {
        "role": "developer",
        "content": [{"type": "text", "text": "Answer "}, {"type": "text", "text": "in JSON."}],
    },
    {
        "role": "user",
        "name": "ada",
        "content": [
            {"type": "text", "text": "What is on these?"},
            {
                "type": "image_url",
                "image_url": {"url": "https://example.com/a.png", "detail": "low"},
            },
            {"type": "image_url", "image_url": {"url": PNG_URL}},
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"q": "a" }'},
            },
            {"id": "call_2", "type": "function", "function": {"name": "zoom", "arguments": ""}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "found"},
    {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "zoomed"}]},
    {"role": "assistant", "content": "A cat.", "audio": None, "refusal": None},
    {"role": "user", "content": "Describe the people."},
    {"role": "assistant", "content": None, "refusal": "I can't help with that."},
]


def test_a_whole_conversation_is_read_role_by_role() -> None:
    request = ChatRequest.from_openai("gpt-5-mini", CONVERSATION, temperature=0.2, seed=7)
    assert (request.model, request.temperature, request.seed) == ("gpt-5-mini", 0.2, 7)
    assert request.messages == (
        SystemMessage(content="Be brief."),
        DeveloperMessage(content="Answer in JSON."),
        UserMessage(
            content=(
                TextPart(text="What is on these?"),
                ImagePart(url="https://example.com/a.png"),
                ImagePart(data=PNG, media_type="image/png"),
            )
        ),
        AssistantMessage(
            content=(
                ToolCall(id="call_1", name="lookup", arguments='{"q": "a" }'),
                ToolCall(id="call_2", name="zoom", arguments=""),
            )
        ),
        ToolMessage(tool_call_id="call_1", content="found"),
        ToolMessage(tool_call_id="call_2", content="zoomed"),
        AssistantMessage(content=(TextPart(text="A cat."),)),
        UserMessage(content=(TextPart(text="Describe the people."),)),
        AssistantMessage(content=(Refusal(text="I can't help with that."),)),
    )


def test_assistant_content_parts_and_text_before_refusal_before_calls() -> None:
    request = ChatRequest.from_openai(
        "m",
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "one"},
                    {"type": "refusal", "refusal": "no"},
                    {"type": "text", "text": "two"},
                ],
                "refusal": "never",
                "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}],
            }
        ],
    )
    assert request.messages == (
        AssistantMessage(
            content=(
                TextPart(text="one"),
                Refusal(text="no"),
                TextPart(text="two"),
                Refusal(text="never"),
                ToolCall(id="c", name="f", arguments="{}"),
            )
        ),
    )


def test_deprecated_function_calls_pair_with_their_function_messages() -> None:
    request = ChatRequest.from_openai(
        "m",
        [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "weather", "arguments": '{"city":"Oslo"}'},
            },
            {"role": "function", "name": "weather", "content": "cold"},
            {"role": "assistant", "function_call": {"name": "weather", "arguments": "{}"}},
            {"role": "function", "name": "weather", "content": None},
        ],
    )
    first, second = request.messages[1], request.messages[3]
    assert first == AssistantMessage(
        content=(ToolCall(id="function_call_1", name="weather", arguments='{"city":"Oslo"}'),)
    )
    assert request.messages[2] == ToolMessage(tool_call_id="function_call_1", content="cold")
    assert second == AssistantMessage(
        content=(ToolCall(id="function_call_3", name="weather", arguments="{}"),)
    )
    assert request.messages[4] == ToolMessage(tool_call_id="function_call_3", content="")
    # Written back in today's form: tool calls and tool results with matching ids.
    assert request.to_openai_messages()[1:3] == [
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "function_call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "function_call_1", "content": "cold"},
    ]


def test_data_urls_decode_base64_and_percent_encoding() -> None:
    def image(url: str) -> Message:
        part = {"type": "image_url", "image_url": url}  # the bare-string form some clients send
        return ChatRequest.from_openai("m", [{"role": "user", "content": [part]}]).messages[0]

    assert image(PNG_URL) == UserMessage(content=(ImagePart(data=PNG, media_type="image/png"),))
    wrapped = "data:image/gif;base64," + "\n".join(["R0lG", "ODlh"])  # line-wrapped base64
    assert image(wrapped) == UserMessage(
        content=(ImagePart(data=b"GIF89a", media_type="image/gif"),)
    )
    assert image("data:image/svg+xml;charset=utf-8,%3Csvg%2F%3E") == UserMessage(
        content=(ImagePart(data=b"<svg/>", media_type="image/svg+xml"),)
    )
    # A scheme, a media type and the `base64` mark have no case.
    shouted = "DATA:IMAGE/PNG;BASE64," + base64.b64encode(PNG).decode()
    assert image(shouted) == UserMessage(content=(ImagePart(data=PNG, media_type="image/png"),))


def test_settings_are_the_requests_own_and_openai_names_get_a_hint() -> None:
    request = ChatRequest.from_openai(
        "m", [], max_output_tokens=50, reasoning_effort="low", stop=("END",)
    )
    assert request.max_output_tokens == 50
    assert request.reasoning_effort is ReasoningEffort.LOW
    assert request.stop == ("END",)
    with pytest.raises(
        TypeError, match="unknown setting `max_tokens`; ChatRequest calls it `max_output_tokens`"
    ):
        ChatRequest.from_openai("m", [], max_tokens=50)
    with pytest.raises(TypeError, match="unknown setting `frequency_penalty`"):
        ChatRequest.from_openai("m", [], frequency_penalty=0.5)
    with pytest.raises(ValueError, match="`model` must name a model"):
        ChatRequest.from_openai("", [{"role": "user", "content": "hi"}])
    with pytest.raises(TypeError, match="`model` must be a str"):
        ChatRequest.from_openai(None, [])  # type: ignore[arg-type]


def test_openais_stop_and_log_probabilities_are_read_as_allamas() -> None:
    """OpenAI takes `stop` as a string or null, and log-probabilities as a flag with a
    count (`logprobs: true, top_logprobs: n`): they were refused as no tuple, no whole
    number and an unknown setting."""

    def read(**settings: Any) -> ChatRequest:
        return ChatRequest.from_openai("m", HI, **settings)

    assert read(stop="END").stop == ("END",)
    assert read(stop=None).stop == ()
    assert read(stop=["END", "STOP"]).stop == ("END", "STOP")
    assert read(logprobs=True, top_logprobs=3).logprobs == 3
    assert read(logprobs=True).logprobs == 0  # the tokens alone
    assert read(logprobs=True, top_logprobs=None).logprobs == 0
    assert read(logprobs=False).logprobs is None
    assert read(logprobs=2).logprobs == 2  # allama's own count
    for settings, error, message in (
        ({"top_logprobs": 3}, ValueError, "from_openai(): `top_logprobs` needs `logprobs=True`"),
        (
            {"logprobs": False, "top_logprobs": 3},
            ValueError,
            "from_openai(): `top_logprobs` needs `logprobs=True`",
        ),
        (
            {"logprobs": 2, "top_logprobs": 3},
            ValueError,
            "from_openai(): `top_logprobs` needs `logprobs=True`; allama's `logprobs` is the "
            "count itself: give `logprobs=True, top_logprobs=n`, as OpenAI does, or "
            "`logprobs=n` alone",
        ),
        (
            {"logprobs": True, "top_logprobs": "3"},
            TypeError,
            "from_openai(): `top_logprobs` must be a whole number or None, not str",
        ),
        (
            {"logprobs": True, "top_logprobs": 21},
            ValueError,
            "from_openai(): invalid `top_logprobs`: Input should be less than or equal to 20",
        ),
    ):
        with pytest.raises(error) as caught:
            read(**settings)
        assert str(caught.value) == message


# Settings in OpenAI's form

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
    "additionalProperties": False,
}
ENVELOPE = {"name": "person", "strict": True, "schema": PERSON}
HI = [{"role": "user", "content": "hi"}]


def test_openais_response_format_is_read_as_allamas() -> None:
    """OpenAI's `json_schema` envelope is read for its schema, name and strictness, where
    the envelope itself was taken for the schema (sent to OpenAI as a loose schema of the
    envelope, to Gemini as any JSON)."""

    def read(response_format: Any) -> Any:
        return ChatRequest.from_openai("m", HI, response_format=response_format).response_format

    schema_format = {"type": "json_schema", "json_schema": ENVELOPE}
    assert read(schema_format) == ResponseFormat.for_schema(PERSON, name="person", strict=True)
    described = {"name": "p", "schema": PERSON, "description": "A person."}
    assert read({"type": "json_schema", "json_schema": described}) == ResponseFormat(
        type="json_schema", json_schema=PERSON, name="p", description="A person."
    )  # OpenAI's `strict` left out is left out here (OpenAI reads it as false)
    assert read({"type": "json_object"}) == ResponseFormat.json_object()
    assert read({"type": "text"}) == ResponseFormat.text()
    assert read(ResponseFormat.for_schema(PERSON)) == ResponseFormat.for_schema(PERSON)
    # allama's own form is still read as it is.
    assert read({"type": "json_schema", "json_schema": PERSON, "name": "n"}) == (
        ResponseFormat.for_schema(PERSON, name="n", strict=None)
    )
    with pytest.raises(TypeError) as caught:
        read({"type": "json_schema", "json_schema": {"name": "person", "strict": True}})
    assert str(caught.value) == (
        "response_format.json_schema.schema: missing; expected a JSON Schema (a dict)"
    )
    with pytest.raises(TypeError) as caught:
        read({"type": "json_schema", "json_schema": {"name": "p", "schema": {}, "strict": "yes"}})
    assert (
        str(caught.value) == "response_format.json_schema.strict: expected a bool or null, got str"
    )


OPENAI_ANSWER = {
    "id": "x",
    "object": "chat.completion",
    "model": "gpt-4o",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "{}"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
GEMINI_ANSWER = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "{}"}]}, "finishReason": "STOP"}
    ],
    "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1},
}


def test_openais_json_schema_goes_out_as_the_schema_it_holds() -> None:
    rf = {"type": "json_schema", "json_schema": ENVELOPE}
    openai, sent = provider("openai", (200, OPENAI_ANSWER))
    openai.chat(ChatRequest.from_openai("gpt-4o", HI, response_format=rf))
    assert sent.bodies[-1]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "person", "schema": PERSON, "strict": True},
    }
    gemini, sent = provider("gemini", (200, GEMINI_ANSWER))
    gemini.chat(ChatRequest.from_openai("gemini-2.5-flash", HI, response_format=rf))
    assert sent.bodies[-1]["generationConfig"]["responseJsonSchema"] == PERSON


def test_openais_tools_and_tool_choice_are_read_as_allamas() -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look it up.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            "strict": True,
        },
    }
    bare = {"type": "function", "function": {"name": "now"}}
    mine = ToolDefinition(name="mine")
    request = ChatRequest.from_openai("m", HI, tools=[tool, bare, mine], tool_choice="required")
    assert request.tools == (
        ToolDefinition(
            name="lookup",
            description="Look it up.",
            parameters={"type": "object", "properties": {"q": {"type": "string"}}},
            strict=True,
        ),
        ToolDefinition(name="now"),
        mine,
    )
    assert request.tool_choice == ToolChoice.required()
    for openai_choice, choice in [
        ("auto", ToolChoice.auto()),
        ("none", ToolChoice.none()),
        ({"type": "function", "function": {"name": "lookup"}}, ToolChoice.tool("lookup")),
        (ToolChoice.tool("now"), ToolChoice.tool("now")),
        (None, None),
    ]:
        read = ChatRequest.from_openai("m", HI, tool_choice=openai_choice).tool_choice
        assert read == choice


@pytest.mark.parametrize(
    ("settings", "error", "message"),
    [
        (
            {"tools": [{"type": "custom", "custom": {"name": "f"}}]},
            ValueError,
            "tools[0].type: expected `function`, got `custom`",
        ),
        (
            {"tools": [{"type": "function", "function": {"parameters": {}}}]},
            TypeError,
            "tools[0].function.name: missing; expected a string",
        ),
        (
            {"tools": [{"type": "function", "function": {"name": "f", "parameters": [1]}}]},
            TypeError,
            "tools[0].function.parameters: expected a JSON Schema (a dict), got list",
        ),
        (
            {"tools": [{"type": "function", "function": {"name": ""}}]},
            ValueError,
            "tools[0].function.name: a tool needs a name: every provider refuses an empty one",
        ),
        (
            {
                "tools": [
                    {"type": "function", "function": {"name": "f"}},
                    {"function": {"name": "g", "parameters": {"maximum": float("inf")}}},
                ]
            },
            ValueError,
            "tools[1].function.parameters: `parameters` holds infinity at `/maximum`, which JSON "
            "has no form for (a provider answers 400): give a finite number there, or leave it out",
        ),
        (
            {"tool_choice": "any"},
            ValueError,
            "tool_choice: expected `auto`, `none`, `required` or a function, got `any`",
        ),
        (
            {"tool_choice": {"type": "allowed_tools", "allowed_tools": {}}},
            ValueError,
            "tool_choice.type: expected `function`, got `allowed_tools`",
        ),
        (
            {"tool_choice": {"type": "function", "function": {}}},
            TypeError,
            "tool_choice.function.name: missing; expected a string",
        ),
    ],
)
def test_malformed_openai_settings_are_refused_naming_the_place(
    settings: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        ChatRequest.from_openai("m", HI, **settings)
    assert str(caught.value) == message


def test_a_pdf_in_an_image_url_part_points_to_a_file_part() -> None:
    pdf = "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.4").decode()
    with pytest.raises(ValueError) as caught:
        ChatRequest.from_openai("m", image({"url": pdf}))
    assert str(caught.value) == (
        "messages[0].content[0].image_url.url: the data URL holds no image (its media type "
        "is not image/...): send a PDF as a `file` part, {'type': 'file', 'file': "
        "{'file_data': ..., 'filename': ...}}"
    )
    with pytest.raises(ValueError) as caught:
        ChatRequest.from_openai("m", image("data:text/plain,hello"))
    assert str(caught.value) == (
        "messages[0].content[0].image_url: the data URL holds no image (its media type is "
        "not image/...)"
    )
    with pytest.raises(ValueError) as caught:
        ChatRequest.from_openai("m", image({"url": "data:image/png;base64,"}))
    assert str(caught.value) == ("messages[0].content[0].image_url.url: the data URL holds no data")
    # The PDF as a file part is read as a document.
    file = {"type": "file", "file": {"file_data": pdf, "filename": "a.pdf"}}
    read = ChatRequest.from_openai("m", user([file])).messages[0]
    assert read == UserMessage(
        content=(DocumentPart(data=b"%PDF-1.4", media_type="application/pdf", title="a.pdf"),)
    )


SECRET = "SECRET-CONVERSATION-TEXT"
ROLES = "`system`, `developer`, `user`, `assistant`, `tool`, `function`"


def user(content: Any) -> list[Any]:
    return [{"role": "user", "content": content}]


def image(value: Any) -> list[Any]:
    return user([{"type": "image_url", "image_url": value}])


def assistant(**fields: Any) -> list[Any]:
    return [{"role": "assistant", **fields}]


def call(**fields: Any) -> list[Any]:
    return assistant(tool_calls=[fields])


MALFORMED: list[tuple[Any, type[Exception], str]] = [
    (
        [
            *user("a"),
            *assistant(content="b"),
            *user("c"),
            *call(id="c", type="function", function={"name": "f", "arguments": {"q": SECRET}}),
        ],
        TypeError,
        "messages[3].tool_calls[0].function.arguments: expected a string of JSON text "
        "(as the model wrote it), got dict",
    ),
    (user(SECRET)[0], TypeError, "messages: expected a list of message dicts, got dict"),
    (SECRET, TypeError, "messages: expected a list of message dicts, got str"),
    (None, TypeError, "messages: expected a list of message dicts, got null"),
    (
        [("user", SECRET)],
        TypeError,
        "messages[0]: expected a message dict with a `role`, got tuple",
    ),
    ([{"content": SECRET}], ValueError, f"messages[0].role: missing; expected one of {ROLES}"),
    (
        [{"role": "assistent", "content": SECRET}],
        ValueError,
        f"messages[0].role: expected one of {ROLES}, got `assistent`",
    ),
    (
        [{"role": SECRET + " x", "content": "a"}],
        ValueError,
        f"messages[0].role: expected one of {ROLES}, got a str",
    ),
    (
        [{"role": "system"}],
        TypeError,
        "messages[0].content: missing; expected a string or a list of `text` parts",
    ),
    (
        [{"role": "system", "content": None}],
        TypeError,
        "messages[0].content: expected a string or a list of `text` parts, got null",
    ),
    (
        [{"role": "developer", "content": [{"type": "image_url", "image_url": "x"}]}],
        ValueError,
        "messages[0].content[0].type: expected `text` here, got `image_url`",
    ),
    (
        user(3),
        TypeError,
        "messages[0].content: expected a string or a list of `text`, `image_url` and `file` "
        "parts, got int",
    ),
    (user([]), ValueError, "messages[0].content: a user message needs at least one part"),
    (
        user([SECRET]),
        TypeError,
        "messages[0].content[0]: expected a content part (a dict with a `type`), got str",
    ),
    (
        user([{"type": "input_audio", "input_audio": {}}]),
        ValueError,
        "messages[0].content[0].type: expected `text`, `image_url` or `file`, got `input_audio`",
    ),
    (
        user([{"text": SECRET}]),
        ValueError,
        "messages[0].content[0].type: expected `text`, `image_url` or `file`, got nothing",
    ),
    (
        user([{"type": "text", "text": None}]),
        TypeError,
        "messages[0].content[0].text: expected a string, got null",
    ),
    (
        user([{"type": "image_url"}]),
        TypeError,
        "messages[0].content[0].image_url: missing; expected a dict with a `url`, or a URL string",
    ),
    (
        image({"detail": "low"}),
        TypeError,
        "messages[0].content[0].image_url.url: missing; expected a string (an http(s) or data URL)",
    ),
    (
        image({"url": "data:;base64,AAAA"}),
        ValueError,
        "messages[0].content[0].image_url.url: a data URL needs its media type",
    ),
    (
        image({"url": "data:image/png;base64,%%%"}),
        ValueError,
        "messages[0].content[0].image_url.url: the data URL is marked base64 but its data is "
        "not valid base64",
    ),
    # A part the part itself refuses names its place too.
    (
        image({"url": "/tmp/" + SECRET + ".png"}),
        ValueError,
        "messages[0].content[0].image_url.url: an image's `url` is a local path, which no "
        "provider can fetch",
    ),
    (
        image("file:///tmp/a.png"),
        ValueError,
        "messages[0].content[0].image_url: an image's `url` is a `file:` URL, which no "
        "provider can fetch",
    ),
    (
        [*user("a"), *image({"url": ""})],
        ValueError,
        "messages[1].content[0].image_url.url: an image's `url` is empty, which no provider "
        "can fetch",
    ),
    (
        user(
            [
                {"type": "text", "text": SECRET},
                {"type": "file", "file": {"file_data": "data:application/pdf;base64,"}},
            ]
        ),
        ValueError,
        "messages[0].content[1].file.file_data: the data URL holds no data",
    ),
    (
        assistant(content=7),
        TypeError,
        "messages[0].content: expected a string, null, or a list of `text` and `refusal` parts, "
        "got int",
    ),
    (
        assistant(content=[{"type": "image_url"}]),
        ValueError,
        "messages[0].content[0].type: expected `text` or `refusal`, got `image_url`",
    ),
    (assistant(refusal=1), TypeError, "messages[0].refusal: expected a string or null, got int"),
    (
        assistant(tool_calls={"id": "c"}),
        TypeError,
        "messages[0].tool_calls: expected a list of tool calls, or null, got dict",
    ),
    (
        call(type="custom", id="c"),
        ValueError,
        "messages[0].tool_calls[0].type: expected `function`, got `custom`",
    ),
    (
        call(function={"name": "f", "arguments": "{}"}),
        TypeError,
        "messages[0].tool_calls[0].id: missing; expected a string",
    ),
    (
        call(id="c"),
        TypeError,
        "messages[0].tool_calls[0].function: missing; expected a dict with `name` and `arguments`",
    ),
    (
        call(id="c", function={"arguments": "{}"}),
        TypeError,
        "messages[0].tool_calls[0].function.name: missing; expected a string",
    ),
    (
        assistant(function_call={"name": "f"}),
        TypeError,
        "messages[0].function_call.arguments: missing; expected a string of JSON text",
    ),
    (
        [{"role": "tool", "content": "x"}],
        TypeError,
        "messages[0].tool_call_id: missing; expected a string (the id of the call)",
    ),
    (
        [{"role": "tool", "tool_call_id": "c", "content": {"ok": True}}],
        TypeError,
        "messages[0].content: expected a string or a list of `text` parts, got dict",
    ),
    (
        [{"role": "function", "content": "x"}],
        TypeError,
        "messages[0].name: missing; expected a string (the function's name)",
    ),
    (
        [{"role": "function", "name": "f", "content": "x"}],
        ValueError,
        "messages[0]: a `function` message answers an earlier assistant `function_call` by the "
        "same name, and there is none still open",
    ),
    (
        [{"role": "function", "name": "f", "content": 1}],
        TypeError,
        "messages[0].content: expected a string or null, got int",
    ),
]


@pytest.mark.parametrize(("messages", "error", "message"), MALFORMED)
def test_malformed_messages_are_refused_naming_the_place(
    messages: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        ChatRequest.from_openai("m", messages)
    assert str(caught.value).startswith(message), str(caught.value)
    assert SECRET not in str(caught.value)


def test_to_openai_messages_writes_the_wire_form_leaving_absent_fields_out() -> None:
    request = (
        ChatRequest("m")
        .system("s")
        .developer("d")
        .user("look", ImagePart(url="https://x/a.png"), ImagePart(data=PNG, media_type="image/png"))
        .user(None, ImagePart(url="https://x/b.png"))
        .assistant([TextPart(text="calling"), ToolCall(id="c1", name="f", arguments='{"a":1}')])
        .assistant([ToolCall(id="c2", name="g")])
        .assistant([Refusal(text="no")])
        .assistant([TextPart(text="a"), Refusal(text="b")])
        .assistant([])
        .tool_result("c1", "out", is_error=True)
    )
    assert request.to_openai_messages() == [
        {"role": "system", "content": "s"},
        {"role": "developer", "content": "d"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
                {"type": "image_url", "image_url": {"url": PNG_URL}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "https://x/b.png"}}],
        },
        {
            "role": "assistant",
            "content": "calling",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
            ],
        },
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}
            ],
        },
        {"role": "assistant", "refusal": "no"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "a"}, {"type": "refusal", "refusal": "b"}],
        },
        {"role": "assistant", "content": ""},
        {"role": "tool", "tool_call_id": "c1", "content": "out"},
    ]


# Round trips

_text = st.text(max_size=12)
_ids = st.text(alphabet="abc_0123456789", min_size=1, max_size=8)
_images = st.one_of(
    st.builds(lambda path: ImagePart(url=f"https://example.com/{path}"), _ids),
    st.builds(
        lambda data, kind: ImagePart(data=data, media_type=kind),
        st.binary(min_size=1, max_size=16),
        st.sampled_from(["image/png", "image/jpeg", "image/svg+xml"]),
    ),
)
_calls = st.builds(lambda i, n, a: ToolCall(id=i, name=n, arguments=a), _ids, _ids, _text)


@st.composite
def _assistant(draw: st.DrawFn) -> AssistantMessage:
    """An assistant turn in the order OpenAI's form writes it: text and refusals, then calls."""
    written = draw(
        st.lists(
            st.one_of(st.builds(TextPart, text=_text), st.builds(Refusal, text=_text)), max_size=3
        )
    )
    calls = draw(st.lists(_calls, max_size=3))
    if not written and not calls:
        written = [TextPart(text=draw(_text))]
    return AssistantMessage(content=(*written, *calls))


_messages = st.one_of(
    st.builds(SystemMessage, content=_text),
    st.builds(DeveloperMessage, content=_text),
    st.builds(
        lambda parts: UserMessage(content=tuple(parts)),
        st.lists(st.one_of(st.builds(TextPart, text=_text), _images), min_size=1, max_size=4),
    ),
    _assistant(),
    st.builds(ToolMessage, tool_call_id=_ids, content=_text),
)


@given(st.lists(_messages, max_size=6))
def test_every_conversation_the_form_can_hold_survives_a_round_trip(
    messages: list[Message],
) -> None:
    request = ChatRequest("m").push(*messages)
    written = request.to_openai_messages()
    assert ChatRequest.from_openai("m", written) == request


@given(st.lists(_messages, max_size=6))
def test_reading_what_was_written_writes_it_again_unchanged(messages: list[Message]) -> None:
    written = ChatRequest("m").push(*messages).to_openai_messages()
    assert ChatRequest.from_openai("m", written).to_openai_messages() == written


_KEYS = ["content", "type", "text", "tool_calls", "id", "function", "name", "arguments"]
_KEYS += ["refusal", "image_url", "url", "tool_call_id", "function_call"]
_junk = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.text(max_size=5),
        st.sampled_from(["text", "image_url", "refusal", "function", PNG_URL, "data:x,"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4)
    ),
    max_leaves=12,
)
_junk_messages = st.one_of(
    _junk,
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "developer", "user", "assistant", "tool", "function"])},
        optional=dict.fromkeys(_KEYS, _junk),
    ),
)


@given(st.lists(_junk_messages, max_size=4))
def test_any_json_is_read_or_refused_with_a_type_or_value_error(messages: list[Any]) -> None:
    try:
        request = ChatRequest.from_openai("m", messages)
    except (TypeError, ValueError) as error:
        assert str(error).startswith("messages")
    else:
        assert len(request.messages) == len(messages)


@pytest.mark.parametrize(
    ("url", "document"),
    [
        # Percent-encoded, URL-safe and unpadded base64 are read as the adapters read them.
        (
            "data:application/pdf;base64,JVBERi0xLjc%3D",
            DocumentPart(data=b"%PDF-1.7", media_type="application/pdf"),
        ),
        (
            "data:application/pdf;base64," + base64.urlsafe_b64encode(b"\xfb\xff").decode(),
            DocumentPart(data=b"\xfb\xff", media_type="application/pdf"),
        ),
        (
            "data:application/pdf;base64,JVBERi0xLjc",
            DocumentPart(data=b"%PDF-1.7", media_type="application/pdf"),
        ),
        # The URL's charset is kept: the text is read back in it.
        (
            "data:text/plain;charset=ISO-8859-1;base64,"
            + base64.b64encode("café".encode("latin-1")).decode(),
            DocumentPart(data=b"caf\xe9", media_type="text/plain; charset=iso-8859-1"),
        ),
    ],
)
def test_a_file_parts_data_url_is_read_as_the_adapters_read_one(
    url: str, document: DocumentPart
) -> None:
    read = ChatRequest.from_openai("m", user([{"type": "file", "file": {"file_data": url}}]))
    assert read.messages[0] == UserMessage(content=(document,))


def test_a_document_read_back_in_its_charset_goes_to_chat_completions_as_its_text() -> None:
    url = "data:text/plain;charset=iso-8859-1;base64," + base64.b64encode(b"caf\xe9").decode()
    request = ChatRequest.from_openai("m", user([{"type": "file", "file": {"file_data": url}}]))
    assert request.to_openai_messages() == [
        {"role": "user", "content": [{"type": "text", "text": "café"}]}
    ]


def test_to_openai_messages_says_all_it_leaves_out() -> None:
    """What the form has no place for: its docstring named reasoning and `is_error` alone."""
    request = (
        ChatRequest("m")
        .user(
            "see",
            DocumentPart(data=b"notes", media_type="text/plain", title="notes.txt"),
            DocumentPart(data=b"%PDF-1.4", media_type="application/pdf"),
        )
        .push(AssistantMessage(content=(), provider_data={"anthropic": {"paused": True}}))
        .assistant([Reasoning(text="hm")])
    )
    back = ChatRequest.from_openai("m", request.to_openai_messages()).messages
    assert back == (
        UserMessage(
            content=(
                TextPart(text="see"),
                TextPart(text="notes"),  # a plain-text document: a text part, its title lost
                DocumentPart(data=b"%PDF-1.4", media_type="application/pdf", title="document.pdf"),
            )
        ),
        AssistantMessage(content=(TextPart(text=""),)),  # provider data left out
        AssistantMessage(content=(TextPart(text=""),)),  # reasoning alone: empty text
    )
    said = " ".join((ChatRequest.to_openai_messages.__doc__ or "").split())
    for loss in (
        "reasoning blocks",
        "`is_error`",
        "`provider_data` is left out",
        'reads back as one `TextPart("")`',
        "a plain-text document is written as a text part",
        "its title lost",
        "a PDF with no title is named `document.pdf`",
    ):
        assert loss in said, loss
