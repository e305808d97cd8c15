"""Conversations in OpenAI's Chat Completions form: lists of message dicts, read and written.

Users often hold a conversation in that form (from the `openai` SDK, a database, a web
client), so `ChatRequest.from_openai` reads it and `ChatRequest.to_openai_messages` writes
it. Reading is strict about shapes and says where a message is wrong
(`messages[3].tool_calls[0].function.arguments: expected ...`); keys allama has no use for
(`name`, `detail`, `audio`, ...) are tolerated and left out. The error messages name types
and places, never the caller's text.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, NoReturn, TypeVar

from pydantic import ValidationError

from allama.types._content import (
    ContentBlock,
    DocumentPart,
    ImagePart,
    Refusal,
    TextPart,
    ToolCall,
    UserPart,
)
from allama.types._data_urls import (
    UnreadablePart,
    base64_data,
    data_url,
    document_text,
    inline_data,
    inline_document,
    inline_media_type,
    part_media_type,
)
from allama.types._messages import (
    AssistantMessage,
    DeveloperMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)

__all__ = ["messages_from_openai", "messages_to_openai"]

ROLES = ("system", "developer", "user", "assistant", "tool", "function")

_MISSING: Any = object()
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,39}")


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _shown(value: Any) -> str:
    """A role or part type as it may appear in an error: only when it is a short identifier."""
    if isinstance(value, str) and _IDENTIFIER.fullmatch(value):
        return f"`{value}`"
    if value is None or value is _MISSING:
        return "nothing"
    return f"a {_kind(value)}"


def _wrong_type(place: str, expected: str, value: Any) -> NoReturn:
    if value is _MISSING:
        raise TypeError(f"{place}: missing; expected {expected}")
    raise TypeError(f"{place}: expected {expected}, got {_kind(value)}")


def _wrong_value(place: str, problem: str) -> NoReturn:
    raise ValueError(f"{place}: {problem}")


_Built = TypeVar("_Built")


def built(place: str, build: Callable[[], _Built]) -> _Built:
    """What `build` makes of a value read at `place`, its refusal (the part's or the tool's
    own: a local path for an image's URL, a tool's empty name) a `ValueError` naming that
    place, as the errors above do; a `ValidationError` names the field within it, by its
    first error (pydantic's prefix, `Value error, `, left out)."""
    try:
        return build()
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        steps = "".join(
            f"[{step}]" if isinstance(step, int) else f".{step}" for step in first["loc"]
        )
        where, why = f"{place}{steps}", first["msg"].removeprefix("Value error, ")
    except ValueError as error:
        where, why = place, str(error)
    _wrong_value(where, why)


def _str(message: Mapping[str, Any], key: str, place: str, expected: str) -> str:
    value = message.get(key, _MISSING)
    if not isinstance(value, str):
        _wrong_type(f"{place}.{key}", expected, value)
    return value


def _parts(value: Any, place: str, expected: str) -> list[Mapping[str, Any]]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        _wrong_type(place, expected, value)
    parts: list[Mapping[str, Any]] = []
    for index, part in enumerate(value):
        if not isinstance(part, Mapping):
            _wrong_type(f"{place}[{index}]", "a content part (a dict with a `type`)", part)
        parts.append(part)
    return parts


def _text_only(message: Mapping[str, Any], place: str) -> str:
    """The content of a system, developer or tool message: a string, or text parts joined."""
    expected = "a string or a list of `text` parts"
    content = message.get("content", _MISSING)
    if isinstance(content, str):
        return content
    where = f"{place}.content"
    texts: list[str] = []
    for index, part in enumerate(_parts(content, where, expected)):
        kind = part.get("type")
        if kind != "text":
            _wrong_value(
                f"{where}[{index}].type",
                f"expected `text` here, got {_shown(kind)}",
            )
        texts.append(_str(part, "text", f"{where}[{index}]", "a string"))
    return "".join(texts)


def _image(value: Any, place: str) -> ImagePart:
    """An `image_url` part's image: a URL, or a data URL decoded to bytes and media type."""
    if isinstance(value, Mapping):
        url = _str(value, "url", place, "a string (an http(s) or data URL)")
        place = f"{place}.url"
    elif isinstance(value, str):
        url = value
    else:
        _wrong_type(place, "a dict with a `url`, or a URL string", value)
    decoded = _data_url(url, place)
    if decoded is None:
        return built(place, lambda: ImagePart(url=url))
    data, media_type, _ = decoded  # an image's charset (an SVG's) is not the image's type
    if not media_type.startswith("image/"):
        also = (
            ": send a PDF as a `file` part, {'type': 'file', 'file': {'file_data': ..., "
            "'filename': ...}}"
            if media_type == _PDF
            else ""
        )
        _wrong_value(place, f"the data URL holds no image (its media type is not image/...){also}")
    if not data:
        _wrong_value(place, "the data URL holds no data")
    return built(place, lambda: ImagePart(data=data, media_type=media_type))


def _data_url(url: str, place: str) -> tuple[bytes, str, str | None] | None:
    """A data URL's bytes, media type and charset, read as the adapters read one
    (`allama.types._data_urls`: percent-encoded, URL-safe and unpadded base64 too); `None`
    for any other URL."""
    inline = data_url(url)
    if inline is None:
        return None
    if not inline.media_type:
        _wrong_value(place, "a data URL needs its media type, as in `data:image/png;base64,...`")
    decoded = base64_data(inline)
    if decoded is None:
        _wrong_value(place, "the data URL is marked base64 but its data is not valid base64")
    return decoded.raw, inline.media_type, inline.charset


def _document(value: Any, place: str) -> DocumentPart:
    """A `file` part's document: its `file_data` (a data URL) and `filename`."""
    if not isinstance(value, Mapping):
        _wrong_type(place, "a dict with `file_data`", value)
    if "file_data" not in value and "file_id" in value:
        _wrong_value(place, "a file uploaded by id cannot be read back; give its `file_data`")
    url = _str(value, "file_data", place, "a string (a data URL)")
    decoded = _data_url(url, f"{place}.file_data")
    if decoded is None:
        _wrong_value(
            f"{place}.file_data", "expected a data URL, as in `data:application/pdf;base64,...`"
        )
    data, media_type, charset = decoded
    if not data:
        _wrong_value(f"{place}.file_data", "the data URL holds no data")
    if charset is not None:  # text read back in the charset it was written in
        media_type = f"{media_type}; charset={charset}"
    filename = value.get("filename")
    title = filename if isinstance(filename, str) and filename else None
    return built(place, lambda: DocumentPart(data=data, media_type=media_type, title=title))


def _user(message: Mapping[str, Any], place: str) -> UserMessage:
    expected = "a string or a list of `text`, `image_url` and `file` parts"
    content = message.get("content", _MISSING)
    if isinstance(content, str):
        return UserMessage(content=(TextPart(text=content),))
    where = f"{place}.content"
    parts: list[UserPart] = []
    for index, part in enumerate(_parts(content, where, expected)):
        kind = part.get("type")
        at = f"{where}[{index}]"
        if kind == "text":
            parts.append(TextPart(text=_str(part, "text", at, "a string")))
        elif kind == "image_url":
            parts.append(_image(part.get("image_url", _MISSING), f"{at}.image_url"))
        elif kind == "file":
            parts.append(_document(part.get("file", _MISSING), f"{at}.file"))
        else:
            _wrong_value(
                f"{at}.type", f"expected `text`, `image_url` or `file`, got {_shown(kind)}"
            )
    if not parts:
        _wrong_value(where, "a user message needs at least one part")
    return UserMessage(content=tuple(parts))


def _call(value: Any, place: str, call_id: str) -> ToolCall:
    """A `function` object (`name`, `arguments` as JSON text) as a call with this id."""
    if not isinstance(value, Mapping):
        _wrong_type(place, "a dict with `name` and `arguments`", value)
    name = _str(value, "name", place, "a string")
    arguments = value.get("arguments", _MISSING)
    if not isinstance(arguments, str):
        # The wire keeps arguments as the model wrote them; a value would be a guess at that.
        _wrong_type(
            f"{place}.arguments", "a string of JSON text (as the model wrote it)", arguments
        )
    return ToolCall(id=call_id, name=name, arguments=arguments)


class _Reader:
    """Reads one conversation, pairing deprecated `function_call`s with their answers."""

    def __init__(self) -> None:
        self.open_functions: dict[str, list[str]] = {}
        """Per function name, the ids given to its `function_call`s not yet answered."""

    def message(self, message: Any, index: int) -> Message:
        place = f"messages[{index}]"
        if not isinstance(message, Mapping):
            _wrong_type(place, "a message dict with a `role`", message)
        role = message.get("role", _MISSING)
        if role == "user":
            return _user(message, place)
        if role == "assistant":
            return self.assistant(message, place, index)
        if role == "system":
            return SystemMessage(content=_text_only(message, place))
        if role == "developer":
            return DeveloperMessage(content=_text_only(message, place))
        if role == "tool":
            call_id = _str(message, "tool_call_id", place, "a string (the id of the call)")
            return ToolMessage(tool_call_id=call_id, content=_text_only(message, place))
        if role == "function":
            return self.function(message, place)
        expected = ", ".join(f"`{r}`" for r in ROLES)
        if role is _MISSING:
            _wrong_value(f"{place}.role", f"missing; expected one of {expected}")
        _wrong_value(f"{place}.role", f"expected one of {expected}, got {_shown(role)}")

    def assistant(self, message: Mapping[str, Any], place: str, index: int) -> AssistantMessage:
        blocks: list[ContentBlock] = []
        content = message.get("content")
        where = f"{place}.content"
        if isinstance(content, str):
            blocks.append(TextPart(text=content))
        elif content is not None:
            expected = "a string, null, or a list of `text` and `refusal` parts"
            for number, part in enumerate(_parts(content, where, expected)):
                kind = part.get("type")
                at = f"{where}[{number}]"
                if kind == "text":
                    blocks.append(TextPart(text=_str(part, "text", at, "a string")))
                elif kind == "refusal":
                    blocks.append(Refusal(text=_str(part, "refusal", at, "a string")))
                else:
                    _wrong_value(f"{at}.type", f"expected `text` or `refusal`, got {_shown(kind)}")
        refusal = message.get("refusal")
        if refusal is not None:
            if not isinstance(refusal, str):
                _wrong_type(f"{place}.refusal", "a string or null", refusal)
            blocks.append(Refusal(text=refusal))
        calls = message.get("tool_calls")
        if calls is not None:
            expected = "a list of tool calls, or null"
            for number, call in enumerate(_parts(calls, f"{place}.tool_calls", expected)):
                at = f"{place}.tool_calls[{number}]"
                kind = call.get("type", "function")
                if kind != "function":
                    _wrong_value(f"{at}.type", f"expected `function`, got {_shown(kind)}")
                call_id = _str(call, "id", at, "a string")
                blocks.append(_call(call.get("function", _MISSING), f"{at}.function", call_id))
        function_call = message.get("function_call")
        if function_call is not None:
            legacy = _call(function_call, f"{place}.function_call", f"function_call_{index}")
            self.open_functions.setdefault(legacy.name, []).append(legacy.id)
            blocks.append(legacy)
        return AssistantMessage(content=tuple(blocks))

    def function(self, message: Mapping[str, Any], place: str) -> ToolMessage:
        """The deprecated `function` role: the answer to the latest open call by that name."""
        name = _str(message, "name", place, "a string (the function's name)")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            _wrong_type(f"{place}.content", "a string or null", content)
        waiting = self.open_functions.get(name)
        if not waiting:
            _wrong_value(
                place,
                "a `function` message answers an earlier assistant `function_call` "
                "by the same name, and there is none still open",
            )
        return ToolMessage(tool_call_id=waiting.pop(0), content=content or "")


def messages_from_openai(messages: Iterable[Any]) -> tuple[Message, ...]:
    """The messages of a conversation in OpenAI's Chat Completions form."""
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        _wrong_type("messages", "a list of message dicts", messages)
    reader = _Reader()
    return tuple(reader.message(message, index) for index, message in enumerate(messages))


class InlineImage(NamedTuple):
    media_type: str
    """Lower case, without its parameters; empty where neither the data URL nor the part
    names one."""
    text: str
    """Its bytes in standard base64."""
    raw: bytes


def inline_image(part: ImagePart) -> InlineImage | None:
    """An image's bytes and media type, given as bytes or in a data URL read as the other
    encoders read one (`inline_data`: its type, else the part's); `None` for an image by
    URL. An `UnreadablePart` for a data URL that holds no base64 image: sent as given, it
    is answered 400 ("Invalid base64 image_url")."""
    if part.url is None:
        raw = part.data or b""
        text = base64.b64encode(raw).decode("ascii")
        return InlineImage(part_media_type(part.media_type)[0], text, raw)
    inline = data_url(part.url)
    if inline is None:
        return None
    decoded = inline_data(inline, "image")
    if isinstance(decoded, str):
        raise UnreadablePart(decoded)
    return InlineImage(inline_media_type(inline, part.media_type)[0], *decoded)


NO_IMAGE_TYPE = (
    "an image data URL that names no media type needs the part's `media_type`, such as image/png"
)
"""Why an image of no media type is refused, as the Gemini encoder words it."""


def _image_url(part: ImagePart) -> str:
    """The image's URL, or its bytes as a data URL of standard base64 (`inline_image`)."""
    found = inline_image(part)
    if found is None:
        return part.url or ""
    if not found.raw:
        raise UnreadablePart("the image holds no data")
    if not found.media_type:
        raise UnreadablePart(NO_IMAGE_TYPE)
    return f"data:{found.media_type};base64,{found.text}"


def user_part_to_openai(part: UserPart) -> dict[str, Any]:
    """A user part as a Chat Completions content part.

    Chat Completions takes a document only as PDF bytes (a `file` part) or, being text, as
    a text part; its bytes may be given in a data URL, read as the other encoders read one
    (`inline_document`: the URL's type and charset, else the part's). Anything else (a
    document by URL, another media type) is a `ValueError` saying so.
    """
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        return {"type": "image_url", "image_url": {"url": _image_url(part)}}
    media_type, charset = part_media_type(part.media_type)
    data = part.data
    if part.url is not None:
        inline = data_url(part.url)
        if inline is None:
            raise ValueError("Chat Completions takes no document by URL, only its bytes")
        found = inline_document(inline, part.media_type)
        if isinstance(found, str):
            raise UnreadablePart(found)
        data, media_type, charset = found
    if media_type == _PDF:
        encoded = base64.b64encode(data or b"").decode("ascii")
        file = {
            "filename": part.title or "document.pdf",
            "file_data": f"data:{_PDF};base64,{encoded}",
        }
        return {"type": "file", "file": file}
    if media_type == "text/plain":
        return {"type": "text", "text": document_text(data or b"", charset)}
    raise ValueError(
        f"Chat Completions takes PDF and plain-text documents, not "
        f"{media_type or 'one of no media type'}"
    )


_PDF = "application/pdf"


class _PartError(Exception):
    """A user part Chat Completions cannot hold, at `part` of its message; `unreadable`: one
    whose bytes cannot be read (`UnreadablePart`), not one the form has no place for."""

    def __init__(self, part: int, why: str, *, unreadable: bool = False) -> None:
        super().__init__(why)
        self.part, self.why, self.unreadable = part, why, unreadable


def _user_to_openai(message: UserMessage) -> dict[str, Any]:
    parts = message.content
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return {"role": "user", "content": parts[0].text}
    content = []
    for index, part in enumerate(parts):
        try:
            content.append(user_part_to_openai(part))
        except ValueError as error:
            unreadable = isinstance(error, UnreadablePart)
            raise _PartError(index, str(error), unreadable=unreadable) from None
    return {"role": "user", "content": content}


def _assistant_to_openai(message: AssistantMessage) -> dict[str, Any]:
    written = [block for block in message.content if isinstance(block, TextPart | Refusal)]
    calls = [
        {
            "id": block.id,
            "type": "function",
            "function": {"name": block.name, "arguments": block.arguments},
        }
        for block in message.content
        if isinstance(block, ToolCall)
    ]
    wire: dict[str, Any] = {"role": "assistant"}
    if len(written) == 1 and isinstance(written[0], Refusal):
        wire["refusal"] = written[0].text
    elif len(written) == 1:
        wire["content"] = written[0].text
    elif written:
        wire["content"] = [
            {"type": "text", "text": block.text}
            if isinstance(block, TextPart)
            else {"type": "refusal", "refusal": block.text}
            for block in written
        ]
    elif not calls:
        wire["content"] = ""
    if calls:
        wire["tool_calls"] = calls
    return wire


def messages_to_openai(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The messages as OpenAI Chat Completions message dicts (absent fields left out)."""
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if isinstance(message, SystemMessage | DeveloperMessage):
            out.append({"role": message.role, "content": message.content})
        elif isinstance(message, UserMessage):
            try:
                out.append(_user_to_openai(message))
            except _PartError as error:
                why = (
                    error.why if error.unreadable else f"{error.why}; the form has no place for it"
                )
                raise ValueError(f"message {index} (user), part {error.part}: {why}") from None
        elif isinstance(message, AssistantMessage):
            out.append(_assistant_to_openai(message))
        else:
            out.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
            )
    return out
