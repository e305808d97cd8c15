"""A chat request: the model, the conversation and every setting, as one immutable value."""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from functools import cache
from typing import Annotated, Any, Literal, NoReturn, TypedDict, TypeVar, Unpack

from pydantic import (
    BaseModel,
    Field,
    JsonValue,
    StrictBool,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from allama.types._base import Data, check_finite, kinds_listed
from allama.types._content import (
    ContentBlock,
    DocumentPart,
    ImagePart,
    Reasoning,
    Refusal,
    TextPart,
    ToolCall,
    UserPart,
)
from allama.types._fields import ReasoningEffort, UnsupportedPolicy
from allama.types._messages import (
    AssistantMessage,
    DeveloperMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from allama.types._openai import (
    _MISSING,
    _shown,
    _wrong_type,
    _wrong_value,
    built,
    messages_from_openai,
    messages_to_openai,
)
from allama.types._options import dump_option, load_option, namespace_of
from allama.types._tools import ResponseFormat, ToolChoice, ToolDefinition, is_openai_envelope

T = TypeVar("T")

# A setting given as its enum or as the enum's value, in the constructor and its `with_`.
_Effort = ReasoningEffort | Literal["none", "minimal", "low", "medium", "high"]
_Policy = UnsupportedPolicy | Literal["warn", "error"]


class _Sampling(TypedDict, total=False):
    """The settings `ChatRequest` and `from_openai` take alike."""

    temperature: float | None
    top_p: float | None
    max_output_tokens: int | None
    seed: int | None
    reasoning_effort: _Effort | None
    parallel_tool_calls: bool | None
    logprobs: int | None
    unsupported_policy: _Policy
    options: Mapping[str, JsonValue]


class _Settings(_Sampling, total=False):
    """`ChatRequest`'s settings as keywords, typed as its constructor takes them (a name it
    has not is a type error, not only a failure at run time)."""

    stop: Sequence[str]
    tools: Sequence[ToolDefinition]
    tool_choice: ToolChoice | None
    response_format: ResponseFormat | None


class _OpenAISettings(_Sampling, total=False):
    """`from_openai`'s settings: `ChatRequest`'s, whose tools, tool choice and response
    format may be given in OpenAI's Chat Completions form as well, and its `stop` (a string,
    or null) and log-probabilities (`logprobs=True` with `top_logprobs`) too."""

    stop: str | Sequence[str] | None
    top_logprobs: int | None
    tools: Sequence[ToolDefinition | Mapping[str, Any]]
    tool_choice: ToolChoice | Literal["auto", "none", "required"] | Mapping[str, Any] | None
    response_format: ResponseFormat | Mapping[str, Any] | None


class _Fields(_Settings, total=False):
    model: str
    messages: Sequence[Message]


class ChatRequest(Data):
    """What to ask which model. Every `with_…` and message method returns an updated copy.

    >>> request = ChatRequest("gpt-5-mini").system("Be brief.").user("Hi").with_temperature(0.2)
    >>> [m.role for m in request.messages], request.temperature
    (['system', 'user'], 0.2)
    """

    model: str
    messages: tuple[Message, ...] = ()
    tools: tuple[ToolDefinition, ...] = ()
    tool_choice: ToolChoice | None = None
    response_format: ResponseFormat | None = None
    # Finite: `NaN` is no JSON a provider reads (and would key a batch input as none given).
    temperature: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    top_p: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    max_output_tokens: int | None = Field(default=None, ge=1)
    stop: tuple[str, ...] = ()
    seed: int | None = None
    reasoning_effort: ReasoningEffort | None = None
    parallel_tool_calls: StrictBool | None = None
    logprobs: int | None = Field(default=None, ge=0, le=20)
    """Report the log-probability of each output token, with this many of the likeliest
    alternatives at each position (0: the tokens alone); `None` asks for none."""
    unsupported_policy: UnsupportedPolicy = UnsupportedPolicy.WARN
    options: dict[str, JsonValue] = Field(default_factory=dict)
    """Options by namespace, read-only: `with_option` and `with_option_json` change them."""

    def __init__(self, model: str | None = None, /, **data: Unpack[_Fields]) -> None:
        # Checked before pydantic's own checks, so that the error names the argument plainly.
        # Pydantic runs this `__init__` for `model_validate` and `from_json` too, where a
        # `ValueError` becomes a `ValidationError` but a `TypeError` would escape: only the
        # positional argument, which validation never passes, gets a `TypeError`.
        if model is not None:
            if not isinstance(model, str):
                _bad_model(model, argument=True)
            if "model" in data:
                raise TypeError("ChatRequest() got the model twice: as its argument and `model=`")
            data["model"] = model
        named = data.get("model")
        if named is None or (isinstance(named, str) and not named.strip()):
            _bad_model(named)
        for name in data.keys() & _NUMBERS.keys():
            _check_number(name, data[name])  # type: ignore[literal-required]
        if "parallel_tool_calls" in data:
            _check_flag("parallel_tool_calls", data["parallel_tool_calls"])
        _check_not_openai(data.get("messages"))
        fields: dict[str, Any] = dict(data)  # the checks above are pydantic's from here
        super().__init__(**fields)

    @field_validator("options")
    @classmethod
    def _read_only(cls, options: dict[str, JsonValue]) -> dict[str, JsonValue]:
        # Pydantic has copied them from the caller's; a `ValueError`, as pydantic runs this
        # for `model_validate` and `from_json` too, where a `TypeError` would escape.
        for namespace, value in options.items():
            _check_option(namespace, value, ValueError)
        return _Options(options)

    @classmethod
    def from_openai(
        cls,
        model: str,
        messages: Iterable[Mapping[str, Any] | BaseModel],
        **settings: Unpack[_OpenAISettings],
    ) -> ChatRequest:
        """A request from a conversation held in OpenAI's Chat Completions form.

        Reads the `system`, `developer`, `user` (text, `image_url` and `file` parts, data
        URLs decoded to bytes), `assistant` (content, `refusal`, `tool_calls`, the deprecated
        `function_call`), `tool` and deprecated `function` roles; keys allama has no use
        for, such as `name`, are left out. A message may be the OpenAI SDK's object (a
        `ChatCompletionMessage` a response gave): a pydantic model, read as its
        `model_dump(exclude_none=True)`, the dict it stands for. `settings` are
        `ChatRequest`'s own fields; `tools`, `tool_choice` and `response_format` may be in
        OpenAI's form too (`{"type": "function", "function": {...}}`, `"required"`,
        `{"type": "json_schema", "json_schema": {"name": ..., "strict": ..., "schema":
        ...}}`, `{"type": "json_object"}`), read as allama's; so may `stop` (a string is one
        sequence, `None` none) and the log-probabilities (`logprobs=True, top_logprobs=3`
        is allama's `logprobs=3`). A malformed message, tool or part raises `TypeError` or
        `ValueError` naming its place (`messages[3].tool_calls[0].function.arguments`,
        `tools[0].function.name`).

        >>> request = ChatRequest.from_openai(
        ...     "gpt-5-mini",
        ...     [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        ...     temperature=0.2,
        ... )
        >>> [m.role for m in request.messages], request.temperature
        (['system', 'user'], 0.2)
        """
        unknown = settings.keys() - _SETTINGS - {"top_logprobs"}
        if unknown:
            name = min(unknown)
            hint = _RENAMED.get(name)
            also = f"; ChatRequest calls it `{hint}`" if hint else ""
            raise TypeError(
                f"from_openai() got an unknown setting `{name}`{also} "
                f"(settings are ChatRequest's fields: {', '.join(sorted(_SETTINGS))})"
            )
        if not isinstance(model, str) or not model.strip():
            _bad_model(model, argument=True)
        fields: dict[str, Any] = dict(settings)
        if "stop" in fields:
            fields["stop"] = _openai_stop(fields["stop"])
        if "logprobs" in fields or "top_logprobs" in fields:
            _openai_logprobs(fields)
        if "tools" in fields:
            fields["tools"] = _openai_tools(fields["tools"])
        if "tool_choice" in fields:
            fields["tool_choice"] = _openai_tool_choice(fields["tool_choice"])
        if "response_format" in fields:
            fields["response_format"] = _openai_response_format(fields["response_format"])
        return cls(model, messages=messages_from_openai(_as_dicts(messages)), **fields)

    def to_openai_messages(self) -> list[dict[str, Any]]:
        """The conversation as OpenAI Chat Completions message dicts.

        The inverse of `from_openai` for what that form can hold: images as URLs or base64
        data URLs (a data URL reads back as the image's bytes); an assistant turn's text and
        refusals before its tool calls. What the form has no place for is left out or
        changed, and `from_openai` reads back another conversation there:

        - reasoning blocks, and a tool result's `is_error` flag, are left out;
        - an assistant turn's `provider_data` is left out;
        - an assistant turn with no text, refusal or tool call (none, or reasoning alone)
          is written with empty text, and reads back as one `TextPart("")`;
        - a plain-text document is written as a text part: it reads back as a `TextPart`,
          its title lost;
        - a PDF with no title is named `document.pdf`, and reads back with that title.

        A document the form cannot hold (one by URL, a media type other than PDF or plain
        text) is a `ValueError` naming its message and part, where the OpenAI adapter
        leaves it out with a warning.

        >>> ChatRequest("m").system("Be brief.").user("Hi").to_openai_messages()
        [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'Hi'}]
        """
        return messages_to_openai(self.messages)

    def __repr__(self) -> str:
        roles = kinds_listed([message.role for message in self.messages])
        extras = [f"tools={len(self.tools)}"] if self.tools else []
        if self.response_format is not None:
            extras.append(f"response_format={self.response_format.type}")
        tail = "".join(f", {extra}" for extra in extras)
        return f"ChatRequest(model={self.model!r}, messages=[{roles}]{tail})"

    def _with(self, **update: Any) -> ChatRequest:
        # Settings are checked here, field by field, as the constructor would check them
        # (`1` becomes `1.0`; `"0.5"` or `True` fails), and the copy takes them as they are:
        # `model_copy` would read the whole conversation again at each turn added.
        for name in update.keys() & _CHECKED:
            update[name] = _checked(name, update[name])
        if "options" in update:  # checked by the `with_option…` methods
            update["options"] = _Options(update["options"])
        return self._replaced(update)

    # Messages

    def push(self, *messages: Message) -> ChatRequest:
        """Append messages as they are."""
        for index, message in enumerate(messages):
            if not isinstance(message, _MESSAGE_TYPES):
                hint = (
                    "; for OpenAI-style dicts use ChatRequest.from_openai"
                    if isinstance(message, Mapping)
                    else ""
                )
                _wrong(
                    "push()", f"message {index}", "a message (SystemMessage, ...)", message, hint
                )
        return self._with(messages=(*self.messages, *messages))

    def extend_messages(self, messages: Iterable[Message]) -> ChatRequest:
        if _not_many(messages):
            _wrong("extend_messages()", "`messages`", "an iterable of messages", messages)
        return self.push(*messages)

    def system(self, text: str) -> ChatRequest:
        if not isinstance(text, str):
            _wrong("system()", "`text`", "a str", text)
        return self.push(SystemMessage(content=text))

    def developer(self, text: str) -> ChatRequest:
        if not isinstance(text, str):
            _wrong("developer()", "`text`", "a str", text)
        return self.push(DeveloperMessage(content=text))

    def user(self, text: str | None = None, *attached: ImagePart | DocumentPart) -> ChatRequest:
        """A user turn: its text, then any images and documents."""
        if text is not None and not isinstance(text, str):
            _wrong("user()", "`text`", "a str or None", text)
        parts: list[UserPart] = [TextPart(text=text)] if text is not None else []
        for index, part in enumerate(attached):
            if not isinstance(part, ImagePart | DocumentPart):
                _wrong(
                    "user()",
                    f"attachment {index}",
                    "an ImagePart or a DocumentPart (text goes first)",
                    part,
                )
            parts.append(part)
        if not parts:
            raise ValueError("a user message needs text or at least one image or document")
        return self.push(UserMessage(content=tuple(parts)))

    def assistant(self, content: str | Iterable[ContentBlock]) -> ChatRequest:
        """An assistant turn: its text, or the blocks of an earlier response."""
        if isinstance(content, str):
            blocks: tuple[ContentBlock, ...] = (TextPart(text=content),)
        else:
            if _not_many(content):
                _wrong("assistant()", "`content`", "a str or an iterable of blocks", content)
            blocks = tuple(content)
            for index, block in enumerate(blocks):
                if not isinstance(block, _BLOCK_TYPES):
                    expected = "a TextPart, ToolCall, Refusal or Reasoning"
                    _wrong("assistant()", f"block {index}", expected, block)
        return self.push(AssistantMessage(content=blocks))

    def tool_result(
        self, call: ToolCall | str, content: str, *, is_error: bool = False
    ) -> ChatRequest:
        """The result of a tool call (the call itself or its id)."""
        if isinstance(call, ToolCall):
            call_id = call.id
        elif isinstance(call, str):
            call_id = call
        else:
            _wrong("tool_result()", "`call`", "a ToolCall or its id (a str)", call)
        if not isinstance(content, str):
            hint = "; write a value as JSON text first" if content is not None else ""
            _wrong("tool_result()", "`content`", "a str", content, hint)
        if not isinstance(is_error, bool):
            _wrong("tool_result()", "`is_error`", "a bool", is_error)
        return self.push(ToolMessage(tool_call_id=call_id, content=content, is_error=is_error))

    # Settings

    def with_tools(self, tools: Iterable[ToolDefinition]) -> ChatRequest:
        if _not_many(tools):
            hint = "; for one tool use add_tool()" if isinstance(tools, ToolDefinition) else ""
            _wrong("with_tools()", "`tools`", "an iterable of ToolDefinition", tools, hint)
        listed = tuple(tools)
        for index, tool in enumerate(listed):
            if not isinstance(tool, ToolDefinition):
                _wrong("with_tools()", f"tool {index}", "a ToolDefinition", tool)
        return self._with(tools=listed)

    def add_tool(self, tool: ToolDefinition) -> ChatRequest:
        if not isinstance(tool, ToolDefinition):
            _wrong("add_tool()", "`tool`", "a ToolDefinition", tool)
        return self._with(tools=(*self.tools, tool))

    def without_tools(self) -> ChatRequest:
        """The same request with neither tools nor a tool choice."""
        return self._with(tools=(), tool_choice=None)

    def with_tool_choice(self, choice: ToolChoice | None) -> ChatRequest:
        return self._with(tool_choice=choice)

    def with_response_format(self, response_format: ResponseFormat | None) -> ChatRequest:
        return self._with(response_format=response_format)

    def with_temperature(self, temperature: float | None) -> ChatRequest:
        return self._with(temperature=temperature)

    def with_top_p(self, top_p: float | None) -> ChatRequest:
        return self._with(top_p=top_p)

    def with_max_output_tokens(self, tokens: int | None) -> ChatRequest:
        # As the constructor reads it (`5.0` is 5, `"5"` fails; its floor of 1 included).
        return self._with(max_output_tokens=tokens)

    def with_stop(self, *stop: str) -> ChatRequest:
        """Stop sequences, each its own argument: `with_stop("END", "STOP")`."""
        if len(stop) == 1 and isinstance(stop[0], list | tuple):
            raise TypeError(
                "with_stop(): pass each stop sequence as its own argument, "
                "`with_stop(*sequences)`, not one list"
            )
        return self._with(stop=stop)

    def with_seed(self, seed: int | None) -> ChatRequest:
        return self._with(seed=seed)

    def with_reasoning_effort(self, effort: _Effort | None) -> ChatRequest:
        return self._with(reasoning_effort=effort)

    def with_parallel_tool_calls(self, parallel: bool | None) -> ChatRequest:
        return self._with(parallel_tool_calls=parallel)

    def with_logprobs(self, top: int | None = 0) -> ChatRequest:
        """Ask for the output tokens' log-probabilities and `top` alternatives at each
        position (0 to 20); `None` asks for none. Read them in `ChatResponse.logprobs`.
        Checked as the constructor's `logprobs=` is (`5.0` is 5)."""
        return self._with(logprobs=top)

    def with_unsupported_policy(self, policy: _Policy) -> ChatRequest:
        return self._with(unsupported_policy=policy)

    # Typed options by namespace

    def with_option(self, value: Any, *, namespace: str | None = None) -> ChatRequest:
        """Attach a typed option, stored under its type's `__option_namespace__`.

        >>> from allama import ExtractionMode
        >>> ChatRequest("m").with_option(ExtractionMode.NATIVE).option(ExtractionMode)
        <ExtractionMode.NATIVE: 'native'>
        """
        if namespace is not None:
            _check_namespace("with_option()", namespace)
        key = namespace or namespace_of(type(value))
        dumped = dump_option(value)
        _check_option(key, dumped, TypeError)
        return self._with(options={**self.options, key: dumped})

    def with_option_json(self, namespace: str, value: JsonValue) -> ChatRequest:
        """Attach an option as raw JSON, for a provider feature allama has no type for.

        A copy is kept: changing `value` afterwards changes no request. The body option of
        a provider (`anthropic`, `gemini`, `ollama`, `openai_compat`, `openai_responses`)
        is a JSON object, whose fields go in the request's body."""
        _check_namespace("with_option_json()", namespace)
        if not _is_json(value):
            expected = "JSON data (dicts with str keys, lists, str, int, float, bool, None)"
            _wrong("with_option_json()", "`value`", expected, value)
        _check_option(namespace, value, TypeError)
        return self._with(options={**self.options, namespace: _json_copy(value)})

    def option(self, cls: type[T], *, namespace: str | None = None) -> T | None:
        """The option of type `cls`, or `None`; raises `ValueError` when it is malformed."""
        raw = self.options.get(namespace or namespace_of(cls))
        return None if raw is None else load_option(cls, raw)

    def option_json(self, namespace: str) -> JsonValue | None:
        return self.options.get(namespace)

    def without_option(self, cls_or_namespace: type[Any] | str) -> ChatRequest:
        key = (
            cls_or_namespace
            if isinstance(cls_or_namespace, str)
            else namespace_of(cls_or_namespace)
        )
        if key not in self.options:
            return self
        return self._with(options={k: v for k, v in self.options.items() if k != key})


_CHECKED = frozenset(
    {
        "tool_choice",
        "response_format",
        "temperature",
        "top_p",
        "max_output_tokens",
        "stop",
        "seed",
        "reasoning_effort",
        "parallel_tool_calls",
        "logprobs",
        "unsupported_policy",
    }
)
"""The settings the `with_…` methods take from the caller. Messages and tools are built by
the request's own methods from validated parts, and are not checked again."""


_SETTINGS = frozenset(ChatRequest.model_fields) - {"model", "messages"}
_RENAMED = {
    "max_tokens": "max_output_tokens",
    "max_completion_tokens": "max_output_tokens",
    "stop_sequences": "stop",
}
"""OpenAI's (or another SDK's) names for settings that `ChatRequest` names otherwise."""

_MESSAGE_TYPES = (SystemMessage, DeveloperMessage, UserMessage, AssistantMessage, ToolMessage)
_BLOCK_TYPES = (TextPart, ToolCall, Refusal, Reasoning)
_JSON_SCALARS = (str, int, float, bool, type(None))


class _Options(dict[str, JsonValue]):
    """A request's options: a dict no one changes in place, since requests copied from one
    another share it (`request.options[...] = ...` would change them all). Pickled and
    copied as a dict is, read-only again when read back."""

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(
            "a request's options are read-only: use with_option_json(namespace, value), "
            "with_option(value) or without_option(namespace), which return an updated copy"
        )

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self) -> tuple[type[_Options], tuple[dict[str, JsonValue]]]:
        return (_Options, (dict(self),))


_BODY_OPTIONS = frozenset({"anthropic", "gemini", "ollama", "openai_compat", "openai_responses"})
"""The namespaces whose option the adapters merge into the request's body (each adapter's
`BODY_OPTION`): a JSON object of body fields, anything else being nothing they can send."""


def _check_option(namespace: str, value: Any, error: type[Exception]) -> None:
    """Refuse a body option that is no JSON object (`error`: `TypeError` for a method's
    argument, `ValueError` inside validation), and NaN or infinity anywhere in an option."""
    if namespace in _BODY_OPTIONS and not isinstance(value, dict):
        hint = (
            "; give the dict itself, not its JSON text"
            if isinstance(value, str)
            else f"; to remove it, without_option({namespace!r})"
            if value is None
            else ""
        )
        raise error(
            f"the option `{namespace}` holds fields for the request's body, so it must be a "
            f"JSON object (a dict), not {_type_name(value)}{hint}"
        )
    check_finite(value, f"options[{namespace!r}]")


def _json_copy(value: JsonValue) -> JsonValue:
    """A copy of the JSON data `value`, sharing nothing the caller may change."""
    if isinstance(value, dict):
        return {key: _json_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_copy(item) for item in value]
    return value


def _is_json(value: Any) -> bool:
    """Whether `value` is JSON data as `JsonValue` takes it (a walk, cheaper than pydantic's)."""
    if isinstance(value, _JSON_SCALARS):
        return True
    if isinstance(value, list):
        return all(_is_json(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return False


def _wrong(call: str, argument: str, expected: str, value: Any, hint: str = "") -> NoReturn:
    """A wrong argument, named, with what was expected (never the value itself)."""
    raise TypeError(f"{call}: {argument} must be {expected}, not {type(value).__name__}{hint}")


def _not_many(value: Any) -> bool:
    """Whether `value` cannot be the iterable of items an argument takes. Strings, dicts and
    pydantic models are iterable too, but never what the caller meant."""
    return isinstance(value, str | bytes | Mapping | BaseModel) or not isinstance(value, Iterable)


def _bad_model(model: Any, *, argument: bool = False) -> NoReturn:
    """The error for a model that is not a model id (`argument`: given as an argument)."""
    if not isinstance(model, str) and (argument or model is not None):
        raise TypeError(
            f"ChatRequest: `model` must be a str (the model's id), not {type(model).__name__}"
        )
    if model is None:
        raise ValueError("ChatRequest needs a model, as in ChatRequest('gpt-5-mini')")
    raise ValueError("ChatRequest: `model` must name a model, not be empty or blank")


_NUMBERS = {
    "temperature": "a number",
    "top_p": "a number",
    "max_output_tokens": "a whole number",
    "seed": "a whole number",
    "logprobs": "a whole number",
}
"""The numeric settings, and what each takes. Pydantic reads `True` as 1 and `"0.2"` as 0.2;
a flag or a text given for a number is a mistake, refused as `Extractor` refuses one."""


def _check_number(name: str, value: Any) -> None:
    """Refuse anything but a number for the numeric setting `name` (a `ValueError`, as
    pydantic's own checks of the constructor's keywords are, since pydantic runs `__init__`
    when it validates a dict or JSON too, and lets a `TypeError` through there).

    A number is a `numbers.Real` (numpy's, a `Fraction`) or a `Decimal`, and no bool, which
    pydantic reads as 1: numpy's bool is no `numbers.Real`, as `RetryPolicy` reads it. Text,
    bytes as well, is refused, which pydantic would parse."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real | Decimal):
        text = isinstance(value, str | bytes | bytearray)
        hint = "; write the number itself, not its text" if text else ""
        raise ValueError(
            f"ChatRequest: `{name}` must be {_NUMBERS[name]} or None, not {_type_name(value)}{hint}"
        )


def _check_flag(name: str, value: Any) -> None:
    """Refuse anything but a bool for the flag `name`, as `_check_number` refuses a flag or
    text for a number: pydantic would read `"no"` as false, and `0.0` or `"false"`."""
    if value is not None and not isinstance(value, bool):
        text = isinstance(value, str | bytes | bytearray)
        hint = "; write True or False, not its text" if text else ""
        raise ValueError(
            f"ChatRequest: `{name}` must be a bool or None, not {_type_name(value)}{hint}"
        )


def _type_name(value: Any) -> str:
    """`value`'s type by its name, with its module where it is not a builtin (numpy's
    `numpy.bool`, not a `bool`)."""
    kind = type(value)
    if kind.__module__ == "builtins":
        return kind.__name__
    return f"{kind.__module__.partition('.')[0]}.{kind.__name__}"


_OPENAI_ONLY = frozenset({"tool_calls", "function_call", "name", "refusal"})
"""Keys of OpenAI's Chat Completions messages that allama's own messages do not have."""


def _check_not_openai(messages: Any) -> None:
    """Refuse messages in OpenAI's Chat Completions form, which `messages=` does not read
    (its user and assistant turns are tuples of parts), pointing to `from_openai`; the
    OpenAI SDK's message objects (read by `from_openai` too), and the Responses API's
    form, which neither reads.

    allama's JSON form of a system, developer or tool message is OpenAI's too, and is taken:
    its content is a str, where OpenAI's may be a list of text parts.
    """
    if not isinstance(messages, list | tuple):  # an iterator is not read twice
        return
    for index, message in enumerate(messages):
        if isinstance(message, BaseModel) and not isinstance(message, _MESSAGE_TYPES):
            if hasattr(message, "role"):
                raise ValueError(
                    f"ChatRequest: messages[{index}] is a {type(message).__name__}, not one of "
                    "allama's messages: for the OpenAI SDK's, use "
                    "ChatRequest.from_openai(model, messages)"
                )
            continue
        if not isinstance(message, Mapping):
            continue
        role, content = message.get("role"), message.get("content")
        parts = content if isinstance(content, list | tuple) else ()
        if message.get("type") in _RESPONSES_ITEMS or any(map(_responses_part, parts)):
            raise ValueError(
                f"ChatRequest: messages[{index}] is in OpenAI's Responses form, which neither "
                "`messages=` nor ChatRequest.from_openai (Chat Completions messages) reads: "
                "build the request with .system(), .user() and .assistant()"
            )
        chat_only = (
            role == "function"
            or (role in ("user", "assistant") and (content is None or isinstance(content, str)))
            or (role in ("system", "developer", "tool") and any(map(_text_part, parts)))
            or any(map(_openai_part, parts))
            or not _OPENAI_ONLY.isdisjoint(message)
        )
        if chat_only:
            raise ValueError(
                f"ChatRequest: messages[{index}] is in OpenAI's Chat Completions form, which "
                "`messages=` does not read: use ChatRequest.from_openai(model, messages), or "
                "build the request with .system(), .user() and .assistant()"
            )


_RESPONSES_ITEMS = frozenset({"message", "function_call", "function_call_output", "reasoning"})
"""The `type` of the Responses API's input items that carry a conversation (allama's
messages have no `type`)."""


def _openai_part(part: Any) -> bool:
    """Whether `part` is a content part only OpenAI's form has (allama's is `image`, and its
    refusal's words are its `text`)."""
    if not isinstance(part, Mapping):
        return False
    kind = part.get("type")
    return kind in ("image_url", "file", "input_audio") or (kind == "refusal" and "refusal" in part)


def _text_part(part: Any) -> bool:
    """Whether `part` is a text part, which OpenAI's system, developer and tool messages
    may hold (allama's hold a str)."""
    return isinstance(part, Mapping) and part.get("type") == "text"


def _responses_part(part: Any) -> bool:
    """Whether `part` is a content part of the Responses API's form."""
    kinds = ("input_text", "input_image", "input_file", "output_text")
    return isinstance(part, Mapping) and part.get("type") in kinds


def _as_dicts(messages: Any) -> Any:
    """`messages` with each pydantic model but allama's own (the OpenAI SDK's message
    objects) as the dict it stands for, its unset (`None`) fields left out as the SDK
    leaves them out of a request. Anything else is left to `messages_from_openai` to judge."""
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        return messages
    return [
        message.model_dump(exclude_none=True)
        if isinstance(message, BaseModel) and not isinstance(message, Data)
        else message
        for message in messages
    ]


def _openai_stop(stop: Any) -> Any:
    """`from_openai`'s stop sequences as OpenAI takes them: a string is one sequence, null
    none; anything else left to the constructor to judge."""
    if stop is None:
        return ()
    if isinstance(stop, str):
        return (stop,)
    return stop


def _openai_logprobs(fields: dict[str, Any]) -> None:
    """OpenAI's pair, `logprobs=True` with `top_logprobs=n` alternatives at each position,
    in `fields` as allama's one setting, `logprobs=n` (`True` alone: 0, the tokens alone;
    `False`: none). allama's own `logprobs=n` is read as it is, and `top_logprobs` with it
    or without `logprobs=True` is refused, as OpenAI refuses it."""
    top = fields.pop("top_logprobs", None)
    flag = fields.get("logprobs")
    if top is not None:
        if isinstance(top, bool) or not isinstance(top, numbers.Integral):
            raise TypeError(
                "from_openai(): `top_logprobs` must be a whole number or None, "
                f"not {_type_name(top)}"
            )
        try:  # allama's bounds for its `logprobs` (OpenAI's for `top_logprobs`: 0 to 20)
            _field_adapter("logprobs").validate_python(top)
        except ValidationError as error:
            reason = error.errors(include_url=False)[0]["msg"]
            raise ValueError(f"from_openai(): invalid `top_logprobs`: {reason}") from None
    if flag is True:
        fields["logprobs"] = 0 if top is None else top
    elif top is not None:
        also = (
            "; allama's `logprobs` is the count itself: give `logprobs=True, "
            "top_logprobs=n`, as OpenAI does, or `logprobs=n` alone"
            if flag is not None and flag is not False
            else ""
        )
        raise ValueError(f"from_openai(): `top_logprobs` needs `logprobs=True`{also}")
    elif flag is False:
        fields["logprobs"] = None


def _openai_tools(tools: Any) -> Any:
    """`from_openai`'s tools, each in OpenAI's form (`{"type": "function", "function":
    {...}}`) read as a `ToolDefinition`; anything else left to the constructor to judge."""
    if _not_many(tools):
        return tools
    return tuple(
        _openai_tool(tool, f"tools[{index}]")
        if isinstance(tool, Mapping) and ("function" in tool or "type" in tool)
        else tool
        for index, tool in enumerate(tools)
    )


def _openai_tool(tool: Mapping[str, Any], place: str) -> ToolDefinition:
    kind = tool.get("type", "function")
    if kind != "function":
        _wrong_value(f"{place}.type", f"expected `function`, got {_shown(kind)}")
    function = tool.get("function", _MISSING)
    place = f"{place}.function"
    if not isinstance(function, Mapping):
        _wrong_type(place, "a dict with `name` and `parameters`", function)
    name = function.get("name", _MISSING)
    if not isinstance(name, str):
        _wrong_type(f"{place}.name", "a string", name)
    fields: dict[str, Any] = {"name": name}
    for key, expected, kinds in (
        ("parameters", "a JSON Schema (a dict)", dict),
        ("description", "a string", str),
        ("strict", "a bool or null", bool),
    ):
        value = function.get(key)
        if value is not None:
            if not isinstance(value, kinds):
                _wrong_type(f"{place}.{key}", expected, value)
            fields[key] = value
    return built(place, lambda: ToolDefinition(**fields))


def _openai_tool_choice(choice: Any) -> Any:
    """`from_openai`'s tool choice in OpenAI's form (`"auto"`, `"none"`, `"required"`, or
    `{"type": "function", "function": {"name": ...}}`) read as a `ToolChoice`; anything
    else left to the constructor to judge."""
    if isinstance(choice, str):
        if choice not in ("auto", "none", "required"):
            _wrong_value(
                "tool_choice",
                f"expected `auto`, `none`, `required` or a function, got {_shown(choice)}",
            )
        return ToolChoice.model_validate({"mode": choice})
    if not isinstance(choice, Mapping) or "type" not in choice:
        return choice
    kind = choice.get("type")
    if kind != "function":
        _wrong_value("tool_choice.type", f"expected `function`, got {_shown(kind)}")
    function = choice.get("function", _MISSING)
    if not isinstance(function, Mapping):
        _wrong_type("tool_choice.function", "a dict with `name`", function)
    name = function.get("name", _MISSING)
    if not isinstance(name, str):
        _wrong_type("tool_choice.function.name", "a string", name)
    return ToolChoice.tool(name)


def _openai_response_format(response_format: Any) -> Any:
    """`from_openai`'s response format in OpenAI's form read as a `ResponseFormat`:
    `{"type": "json_schema", "json_schema": {"name": ..., "strict": ..., "schema": ...}}`
    as `ResponseFormat.for_schema` with that name and strictness (OpenAI's `strict` left
    out is left out here too), `{"type": "json_object"}` as `json_object()`; anything else
    (allama's own form) left to the constructor to judge."""
    if not isinstance(response_format, Mapping):
        return response_format
    kind = response_format.get("type")
    if kind == "json_object":
        return ResponseFormat.json_object()
    envelope = response_format.get("json_schema")
    if kind != "json_schema" or not isinstance(envelope, Mapping):
        return response_format
    if not is_openai_envelope(envelope, named=True):
        return response_format  # allama's: the schema itself
    place = "response_format.json_schema"
    schema = envelope.get("schema", _MISSING)
    if not isinstance(schema, dict):
        _wrong_type(f"{place}.schema", "a JSON Schema (a dict)", schema)
    for key, expected, kinds in (
        ("name", "a string", str),
        ("description", "a string or null", str),
        ("strict", "a bool or null", bool),
    ):
        value = envelope.get(key)
        if value is not None and not isinstance(value, kinds):
            _wrong_type(f"{place}.{key}", expected, value)
    return ResponseFormat.for_schema(
        schema,
        name=envelope.get("name"),
        strict=envelope.get("strict"),
        description=envelope.get("description"),
    )


def _check_namespace(call: str, namespace: Any) -> None:
    if not isinstance(namespace, str):
        _wrong(call, "`namespace`", "a str", namespace)
    if not namespace:
        raise ValueError(f"{call}: `namespace` must not be empty")


@cache
def _field_adapter(name: str) -> TypeAdapter[Any]:
    field = ChatRequest.model_fields[name]
    annotation: Any = field.annotation
    if field.metadata:
        annotation = Annotated[annotation, *field.metadata]
    return TypeAdapter(annotation)


def _checked(name: str, value: Any) -> Any:
    if name in _NUMBERS:
        _check_number(name, value)
    if name == "parallel_tool_calls":
        _check_flag(name, value)
    try:
        return _field_adapter(name).validate_python(value)
    except ValidationError as error:
        reason = error.errors(include_url=False)[0]["msg"]
        raise ValueError(f"invalid `{name}`: {reason}") from None
