"""A Responses API response object to a `ChatResponse`, or to the `allama.Error` it stands for.

The body is read once by pydantic-core's JSON parser into plain data, so that output items
allama has no type for (web search, file search, MCP, code interpreter, image generation,
items added later) are kept verbatim, in order, under `provider_data["openai_responses"]
["items"]`, never in the text (the billed tool calls among them count in its cost:
`allama.types._response.billed_extras`). The items allama reads:

- `message`: each `output_text` part a text block, each `refusal` part a refusal block.
  A message whose `phase` is `commentary` (gpt-5.3-codex and later: what the model says on
  the way, before its `final_answer`) is not the answer: it is kept verbatim, its `phase`
  with it, with the items allama has no type for, and its text is in no block, so
  `ChatResponse.text()` and extraction read the final answer alone.
- `function_call`: a tool call whose id is the item's `call_id` (what a
  `function_call_output` answers) and whose arguments are the string as sent.
- `custom_tool_call` (the call of a `custom` tool given through the body option): a tool
  call as a function's is, its arguments the item's `input`, free text as given.
- `reasoning`: one reasoning block. Its text is the item's summaries, joined by a blank
  line; an item without a summary but with reasoning text (`content`, which open-weight
  models behind some servers return) gives that text instead. Its `encrypted_content` is
  kept verbatim, and the item's id (`rs_...`) is kept as the block's `signature`: with
  `store: false` the next turn sends the item back by id and encrypted content. An item the
  encoder would not rebuild as received from the block's text alone (several summary parts,
  reasoning text in `content`) keeps its `summary` and `content` lists verbatim under
  `provider_data["openai_responses"]["resume"]["reasoning_parts"]`, one entry per block
  (`None` for the others), so that it goes back in its own shape: a backend that checks
  the item against its encrypted content (xAI) refuses one rewritten.

Items that wait for the caller (`WAITING_ITEMS`): a call the caller must carry out and
answer (`computer_call`, `shell_call`, `local_shell_call`, `apply_patch_call`, a
`tool_search_call` run by the client) and an `mcp_approval_request` are kept verbatim with
the other items allama has no type for, and answered by none of its messages. A completed
response with one its output does not answer (a hosted shell's `shell_call` comes with its
`shell_call_output`) finishes with `tool_calls`, not a plain stop, and carries a warning
naming their types (`waiting_warning`). A next turn built from the response
(`to_assistant_message()`) goes without them, and without the generated images and
compactions that would carry state into it (`LEFT_OUT_ITEMS`): their types are kept under
`provider_data["openai_responses"]["resume"]["left_out"]`, so that the encoder says so.

Item ids: a response that says it was stored (`store: true`) and has a reasoning item
keeps the id of the output item each content block came from (`msg_...`, `fc_...`, the
reasoning item's own; `None` for a block of an item without one) under
`provider_data["openai_responses"]["resume"]["item_ids"]`, one per block, in order.
`to_assistant_message()` carries it, so that a turn sent back under `store: true` names
the items after its reasoning by their ids, as the API requires of the items a reasoning
item sent by its id alone precedes (only a stored item can be named). A reasoning item
goes back only directly before the item that followed it, which may be one allama has no
block for (`rs, web_search_call, rs, web_search_call, message`): where a block comes after
it, that item's type and (stored) id are kept under `provider_data["openai_responses"]
["resume"]["following"]` (`following_resume`), so that the next turn sends it back by
reference (a server tool call, under `store: true`) or leaves the reasoning out, rather
than send it before the next block, which the API refuses.

Annotations: an `output_text` part may carry `annotations` (`url_citation` with its
`start_index`, `end_index`, `url` and `title`; `file_citation`, `container_file_citation`,
`file_path`, kinds added later). They are kept verbatim, in order, under
`provider_data["openai_responses"]["annotations"]`: one `{"index": i, "annotations": [...]}`
for each text part with at least one, where `i` is the position in `content` of the text
block that part became. Each `output_text` part is a text block of its own (parts are never
merged, in one message or across messages), so `content[i].text` is exactly the text the
part's character indexes count in; they do not count in `ChatResponse.text()`, which joins
every text block. A response without annotations has no such key.

Log-probabilities: each `output_text` part carries those of its own tokens (`logprobs`, in
OpenAI's shape, when `include` asked for them); the response's are those of its text parts
in order, joined. A part with text but none, or with a list of another shape, leaves the
response with none (`None`): tokens of part of the text would not spell it.

The finish reason comes from `status`: `completed` is a stop, or tool calls when the
output has any (a call allama reads, or one that waits for the caller); `incomplete` is a
length or a content filter as `incomplete_details` says; `failed` raises the error the
response holds (with the usage it reports in the error's context,
`allama.errors.REPORTED_USAGE_KEY`; a stream yields it before the error); an `error` object
beside a response is read alike in a body and a stream (`response_error`): one with neither
a code nor a message is none, and one beside `completed` leaves the answer; `cancelled` and
reasons nobody knows are kept as the provider's own words. A response still `queued` or
`in_progress` (a background one, `background: true`, answered before its output) is not an
answer: it raises `InvalidRequestError` naming its id, whatever it holds so far (allama does
not wait for it). Token counts follow allama's meaning, which is the API's: cached input
inside `input_tokens`, reasoning inside `output_tokens`. What the usage says the call cost
(OpenRouter's `cost`, `cost_details` and `is_byok`, xAI's `cost_in_usd_ticks`) is kept
verbatim under `provider_data["openai_responses"]["usage_cost"]`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import JsonValue

from allama.adapters._json_text import Numbers, arguments_text, json_text
from allama.adapters._logprobs import openai_logprobs
from allama.adapters._not_a_response import not_a_response
from allama.adapters._surrogates import lone_surrogates, read_storable_json
from allama.adapters.openai_responses._errors import (
    error_from_failed,
    error_from_payload,
    error_from_response,
    named_by,
)
from allama.errors import Error, InvalidRequestError, with_reported_usage
from allama.types import (
    SERVICE_TIER_KEY,
    ChatResponse,
    ContentBlock,
    FinishReason,
    Reasoning,
    Refusal,
    RequestField,
    TextPart,
    TokenLogprob,
    ToolCall,
    Usage,
    Warning,
)
from allama.types._response import (
    RESUME_KEY,
    USAGE_COST_KEY,
    WEB_SEARCH_PREVIEW_KEY,
    billed_extras,
    money_fields,
    service_tier_of,
)

__all__ = [
    "ANNOTATIONS_KEY",
    "CALL_ITEMS",
    "COMMENTARY",
    "ITEMS_KEY",
    "FOLLOWING_KEY",
    "ITEM_IDS_KEY",
    "LEFT_OUT_ITEMS",
    "LEFT_OUT_KEY",
    "NAMESPACE",
    "REASONING_PARTS_KEY",
    "SURFACED_ITEMS",
    "WAITING_ITEMS",
    "arguments_of",
    "decode_body",
    "decode_object",
    "decode_response",
    "failed_error",
    "finish_reason_of",
    "following_resume",
    "is_commentary",
    "item_ids_resume",
    "json_text",
    "kept_annotations",
    "kept_reasoning",
    "left_out_kinds",
    "reasoning_parts",
    "reasoning_text",
    "response_error",
    "turn_resume",
    "unfinished_error",
    "usage_of",
    "uses_search_preview",
    "waiting_kinds",
    "waiting_warning",
]

NAMESPACE = "openai_responses"
"""The `provider_data` namespace of what only the Responses API has."""
ITEMS_KEY = "items"
"""Output items allama has no type for (web search, file search, MCP...), and messages in the
`commentary` phase, verbatim, in order."""
ANNOTATIONS_KEY = "annotations"
"""The annotations of text parts, verbatim: `{"index": i, "annotations": [...]}` for each text
block `content[i]` whose part had any, in order."""
ITEM_IDS_KEY = "item_ids"
"""Under `resume`: the id of the output item each content block came from, in block order."""
REASONING_PARTS_KEY = "reasoning_parts"
"""Under `resume`: for each content block in order, the `{"summary": [...], "content": [...]}`
lists of the reasoning item it came from, as received, when the encoder would not rebuild
them from the block's text alone (`kept_reasoning`); `None` for the other blocks."""
FOLLOWING_KEY = "following"
"""Under `resume`: for each content block in order, the output item directly after it when
the block is a reasoning item's, that item is no block (a web search call, a commentary
message...) and a block comes after it: `{"type": ..., "id": ...}`, the id only from a
stored response (only a stored item can be named); `None` for the other blocks."""
CALL_ITEMS = frozenset({"function_call", "custom_tool_call"})
"""The output item types that are tool calls: a function's, and a `custom` tool's."""
SURFACED_ITEMS = frozenset({"message", "reasoning", *CALL_ITEMS})
"""The output item types allama reads into content blocks (a commentary message aside)."""
COMMENTARY = "commentary"
"""The `phase` of a message that is the model's words on the way, not its answer."""
WAITING_ITEMS: Mapping[str, str | None] = {
    "computer_call": "computer_call_output",
    "shell_call": "shell_call_output",
    "local_shell_call": "local_shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "tool_search_call": "tool_search_output",
    "mcp_approval_request": None,
}
"""The output item types that wait for the caller's answer, which allama does not read, each
with the type of the item that answers it by its `call_id` (the server's own, in the same
output, where it ran the call: a hosted shell), `None` where only the caller answers."""
LEFT_OUT_ITEMS = frozenset({"image_generation_call", "compaction"})
"""Output item types beside `WAITING_ITEMS` that a next turn goes without, though they carry
state into it (a generated image to edit, a compacted conversation)."""
LEFT_OUT_KEY = "left_out"
"""Under `resume`: the types of the output items a next turn built from the response goes
without (`left_out_kinds`), in order, each once."""

_INCOMPLETE: dict[str, FinishReason] = {
    "max_output_tokens": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
}
_UNFINISHED = frozenset({"queued", "in_progress"})


def _count(value: Any) -> int | None:
    """A token count: an integer, or a whole-number float (`20.0`, as a proxy may write one,
    and as Chat Completions reads it) as its integer; a flag, a fraction, a negative float
    or anything else is none (not reported)."""
    if isinstance(value, float):
        return int(value) if value.is_integer() and value >= 0 else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_of(usage: Mapping[str, Any]) -> Usage:
    """Token counts by allama's names; a count not reported stays `None`."""
    inputs = usage.get("input_tokens_details")
    outputs = usage.get("output_tokens_details")
    inputs = inputs if isinstance(inputs, dict) else {}
    outputs = outputs if isinstance(outputs, dict) else {}
    return Usage(
        input_tokens=_count(usage.get("input_tokens")),
        output_tokens=_count(usage.get("output_tokens")),
        reasoning_tokens=_count(outputs.get("reasoning_tokens")),
        cache_read_tokens=_count(inputs.get("cached_tokens")),
        cache_write_tokens=_count(inputs.get("cache_write_tokens")),
    )


def uses_search_preview(response: Mapping[str, Any]) -> bool:
    """Whether a response's tools (as it gives them back) include `web_search_preview`,
    whose searches cost by the model's kind, not at the `web_search` tool's price."""
    tools = response.get("tools")
    return any(
        isinstance(tool, dict)
        and isinstance(tool.get("type"), str)
        and tool["type"].startswith("web_search_preview")
        for tool in (tools if isinstance(tools, list) else ())
    )


def finish_reason_of(response: Mapping[str, Any], *, has_tool_calls: bool) -> FinishReason | None:
    """The finish reason of a response that did not fail, from its `status` (`has_tool_calls`:
    its output has a call, one allama reads or one that waits for the caller's answer)."""
    status = response.get("status")
    if not isinstance(status, str) or not status or status in _UNFINISHED:
        return None
    if status == "completed":
        return FinishReason.TOOL_CALLS if has_tool_calls else FinishReason.STOP
    if status == "incomplete":
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        if isinstance(reason, str) and reason:
            return _INCOMPLETE.get(reason) or FinishReason(reason)
        return FinishReason("incomplete")
    return FinishReason(status)


def waiting_kinds(items: Sequence[Any]) -> list[str]:
    """The types of the output items among `items` that wait for the caller's answer
    (`WAITING_ITEMS`), in order, each once: a call the output does not answer by its
    `call_id` itself, a tool search the client runs, an approval request."""
    answered = {
        (item["type"], item["call_id"])
        for item in items
        if isinstance(item, dict)
        and isinstance(item.get("type"), str)
        and isinstance(item.get("call_id"), str)
    }
    kinds: list[str] = []
    for item in items:
        kind = item.get("type") if isinstance(item, dict) else None
        if not isinstance(kind, str) or kind not in WAITING_ITEMS or kind in kinds:
            continue
        if kind == "tool_search_call" and item.get("execution") != "client":
            continue  # the server searched: its output is the answer
        if (WAITING_ITEMS[kind], item.get("call_id")) in answered:
            continue
        kinds.append(kind)
    return kinds


def left_out_kinds(items: Sequence[Any]) -> list[str]:
    """The types of the output items among `items` (those allama has no type for) that a
    next turn goes without and would miss: those that wait for the caller's answer, and the
    generated images and compactions (`LEFT_OUT_ITEMS`), in order, each once."""
    waiting = waiting_kinds(items)
    kinds: list[str] = []
    for item in items:
        kind = item.get("type") if isinstance(item, dict) else None
        if (
            isinstance(kind, str)
            and kind not in kinds
            and (kind in waiting or kind in LEFT_OUT_ITEMS)
        ):
            kinds.append(kind)
    return kinds


def waiting_warning(kinds: Sequence[str], provider: str | None) -> Warning:
    """The warning on a response whose output holds items of `kinds` that wait for the
    caller's answer (`waiting_kinds`)."""
    names = ", ".join(f"`{kind}`" for kind in kinds)
    warning = Warning.unsupported(
        RequestField.OPTIONS,
        f"the response holds output items that wait for the caller's answer, which allama "
        f"does not read ({names}): they are kept verbatim in `provider_data`, under "
        f"`{ITEMS_KEY}`, and a next turn built from the response leaves them out",
    )
    return warning if provider is None else warning.with_provider(provider)


def unfinished_error(
    response: Mapping[str, Any], *, provider: str | None = None, model: str | None = None
) -> Error | None:
    """The error of a response not finished yet (`queued`, `in_progress`: a background one,
    answered before its output), naming its id; `None` for any other."""
    status = response.get("status")
    if not isinstance(status, str) or status not in _UNFINISHED:
        return None
    response_id = _string(response.get("id"))
    named = f" `{response_id}`" if response_id else ""
    error = InvalidRequestError(
        f"the response{named} is not finished yet (status `{status}`): a background "
        "response (`background: true`) is answered before its output, which allama "
        "does not wait for; fetch it by its id once it is done"
    )
    return named_by(error.mark_authored().with_body(json.dumps(response)), provider, model)


def arguments_of(item: Mapping[str, Any], numbers: Numbers | None = None) -> str:
    """A call's arguments as sent: a function's string (or a server's object, as JSON
    text, its numbers as `numbers`, the text it was read from, wrote them), or a custom
    tool's `input`, free text."""
    raw = item.get("input" if item.get("type") == "custom_tool_call" else "arguments")
    return "" if raw is None else arguments_text(raw, numbers)


def _texts(parts: Any, kind: str) -> list[str]:
    if not isinstance(parts, list):
        return []
    return [
        part["text"]
        for part in parts
        if isinstance(part, dict)
        and part.get("type", kind) == kind
        and isinstance(part.get("text"), str)
        and part["text"]
    ]


def is_commentary(item: Mapping[str, Any]) -> bool:
    """Whether an output item is a message in the `commentary` phase (kept, not surfaced)."""
    return item.get("type") == "message" and item.get("phase") == COMMENTARY


def reasoning_parts(item: Mapping[str, Any]) -> tuple[str, str]:
    """A reasoning item's summaries and its reasoning text, each joined by a blank line
    (empty parts left out)."""
    summary = _texts(item.get("summary"), "summary_text")
    content = _texts(item.get("content"), "reasoning_text")
    return "\n\n".join(summary), "\n\n".join(content)


def reasoning_text(item: Mapping[str, Any]) -> str:
    """A reasoning item's text: its summaries, or else its reasoning text."""
    summary, content = reasoning_parts(item)
    return summary or content


def kept_annotations(part: Mapping[str, Any]) -> list[JsonValue] | None:
    """An `output_text` part's annotations as sent, when it has a list of them (even empty);
    `None` when it has none or something else."""
    annotations = part.get("annotations")
    return annotations if isinstance(annotations, list) else None


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def item_ids_resume(blocks: Sequence[tuple[bool, str | None]], *, stored: bool) -> JsonValue | None:
    """What `to_assistant_message()` carries of a response's item ids: each block's (as
    `(is_reasoning, item_id)`, in block order), where they can be named on the next turn (a
    response the server `stored`) and are needed there (a reasoning item, which goes back
    by id, and another item with an id)."""
    if not stored:
        return None
    if not any(reasoning and item_id for reasoning, item_id in blocks):
        return None
    if not any(item_id and not reasoning for reasoning, item_id in blocks):
        return None
    ids: list[JsonValue] = [item_id for _, item_id in blocks]
    return {ITEM_IDS_KEY: ids}


def following_resume(
    blocks: Sequence[tuple[bool, int]],
    others: Sequence[tuple[int, Any]],
    *,
    stored: bool,
) -> JsonValue | None:
    """The item directly after each reasoning block when it is no block (`FOLLOWING_KEY`):
    `blocks` as `(is_reasoning, output index)`, `others` (the items that are no block) as
    `(output index, item)`. Kept only where a block comes after it, before which the
    reasoning would go back otherwise; `None` when there is none."""
    by_place = dict(others)
    last = max((place for _, place in blocks), default=-1)
    entries: list[JsonValue] = []
    for reasoning, place in blocks:
        item = by_place.get(place + 1) if reasoning and place + 1 < last else None
        if not isinstance(item, dict):
            entries.append(None)
            continue
        item_id = _string(item.get("id")) if stored else None
        entries.append({"type": _string(item.get("type")), "id": item_id})
    return entries if any(entry is not None for entry in entries) else None


def kept_reasoning(item: Mapping[str, Any]) -> JsonValue | None:
    """A reasoning item's `summary` and `content` lists as received, when sending the block
    back would not rebuild them (one `summary_text` part of its text, no `content`): several
    summary parts, or reasoning text. `None` for an item that the rebuild gives back as is,
    so the common case keeps nothing."""
    summary = item.get("summary")
    content = item.get("content")
    summary = summary if isinstance(summary, list) else []
    content = content if isinstance(content, list) else []
    text = reasoning_text(item)
    rebuilt: list[JsonValue] = [{"type": "summary_text", "text": text}] if text else []
    if summary == rebuilt and not content:
        return None
    return {"summary": summary, "content": content}


def turn_resume(
    blocks: Sequence[tuple[bool, str | None]],
    parts: Sequence[JsonValue | None],
    *,
    stored: bool,
    left_out: Sequence[str] = (),
    places: Sequence[int] = (),
    others: Sequence[tuple[int, Any]] = (),
) -> JsonValue | None:
    """What `to_assistant_message()` carries for the next turn: the item ids
    (`item_ids_resume`), the items no block stands for that directly followed reasoning
    (`following_resume`: `places`, each block's output index, aligned with `blocks`;
    `others` as `(output index, item)`), each block's kept reasoning parts
    (`kept_reasoning`, aligned with `blocks`) when any block has some, and the types of the
    items it goes without (`left_out`, `left_out_kinds`), so that its encoder says so;
    `None` when there is none of them."""
    resume: dict[str, JsonValue] = {}
    ids = item_ids_resume(blocks, stored=stored)
    if isinstance(ids, dict):
        resume.update(ids)
    kinds = [reasoning for reasoning, _ in blocks]
    following = following_resume(list(zip(kinds, places, strict=True)), others, stored=stored)
    if following is not None:
        resume[FOLLOWING_KEY] = following
    if any(entry is not None for entry in parts):
        resume[REASONING_PARTS_KEY] = list(parts)
    if left_out:
        resume[LEFT_OUT_KEY] = list(left_out)
    return resume or None


class _Unreadable(ValueError):
    """A part of the body does not fit the response shape; says which."""


class _TextLogprobs:
    """The log-probabilities of the output text, gathered part by part."""

    __slots__ = ("readable", "tokens")

    def __init__(self) -> None:
        self.tokens: list[TokenLogprob] = []
        self.readable = True

    def add(self, text: str, raw: Any) -> None:
        """An `output_text` part's text and its `logprobs` field."""
        if not self.readable or (not text and not raw):
            return
        tokens = openai_logprobs(raw)
        if tokens is None:
            self.readable = False
        else:
            self.tokens.extend(tokens)

    def result(self) -> tuple[TokenLogprob, ...] | None:
        return tuple(self.tokens) if self.readable and self.tokens else None


class _Blocks:
    """What the output items become: the content blocks allama has types for, the other
    items verbatim, the text parts' annotations (by block position), the log-probabilities."""

    __slots__ = (
        "annotations",
        "blocks",
        "ids",
        "logprobs",
        "others",
        "others_at",
        "parts",
        "places",
    )

    def __init__(self) -> None:
        self.blocks: list[ContentBlock] = []
        self.ids: list[str | None] = []
        """The id of the output item each block came from."""
        self.parts: list[JsonValue | None] = []
        """The reasoning parts kept for each block (`kept_reasoning`)."""
        self.others: list[JsonValue] = []
        self.places: list[int] = []
        """The output index of the item each block came from."""
        self.others_at: list[int] = []
        """The output index of each of `others`."""
        self.annotations: list[JsonValue] = []
        self.logprobs: tuple[TokenLogprob, ...] | None = None

    def provider_data(self) -> dict[str, dict[str, JsonValue]]:
        kept: dict[str, JsonValue] = {}
        if self.others:
            kept[ITEMS_KEY] = self.others
        if self.annotations:
            kept[ANNOTATIONS_KEY] = self.annotations
        return {NAMESPACE: kept} if kept else {}


def _blocks(output: list[Any], numbers: Numbers | None) -> _Blocks:
    """The output items read: blocks, other items, annotations and log-probabilities; a
    call's arguments object with its numbers as `numbers` (the body's text) has them."""
    read = _Blocks()
    blocks = read.blocks
    others = read.others
    logprobs = _TextLogprobs()
    for index, item in enumerate(output):
        if not isinstance(item, dict):
            raise _Unreadable("an output item is not an object")
        kind = item.get("type")
        if kind == "message" and not is_commentary(item):
            content = item.get("content")
            for part in content if isinstance(content, list) else ():
                if not isinstance(part, dict):
                    raise _Unreadable("a message part is not an object")
                if part.get("type") == "output_text":
                    text = part.get("text")
                    text = text if isinstance(text, str) else ""
                    annotations = kept_annotations(part)
                    if annotations:
                        read.annotations.append({"index": len(blocks), "annotations": annotations})
                    blocks.append(TextPart(text=text))
                    logprobs.add(text, part.get("logprobs"))
                elif part.get("type") == "refusal":
                    refusal = part.get("refusal")
                    blocks.append(Refusal(text=refusal if isinstance(refusal, str) else ""))
                else:
                    continue
                read.ids.append(_string(item.get("id")))
                read.places.append(index)
                read.parts.append(None)
        elif isinstance(kind, str) and kind in CALL_ITEMS:
            call_id = _string(item.get("call_id")) or _string(item.get("id"))
            name = item.get("name")
            if call_id is None or not isinstance(name, str):
                raise _Unreadable(f"a `{kind}` item has no `call_id` or no `name`")
            blocks.append(ToolCall(id=call_id, name=name, arguments=arguments_of(item, numbers)))
            read.ids.append(_string(item.get("id")))
            read.places.append(index)
            read.parts.append(None)
        elif kind == "reasoning":
            blocks.append(
                Reasoning(
                    text=reasoning_text(item),
                    signature=_string(item.get("id")),
                    encrypted_content=_string(item.get("encrypted_content")),
                )
            )
            read.ids.append(_string(item.get("id")))
            read.places.append(index)
            read.parts.append(kept_reasoning(item))
        else:
            others.append(item)
            read.others_at.append(index)
    read.logprobs = logprobs.result()
    return read


def _says_something(error: Mapping[str, Any]) -> bool:
    """Whether an error object has a code or a message (`{}`, or both `null`, says none)."""
    code, message = error.get("code"), error.get("message")
    has_code = (isinstance(code, str) and bool(code)) or (
        isinstance(code, int) and not isinstance(code, bool)
    )
    return has_code or (isinstance(message, str) and bool(message))


def response_error(
    response: Mapping[str, Any], *, provider: str | None = None, model: str | None = None
) -> Error | None:
    """The error a response (a body, or a stream's terminal one) stands for; `None` when it
    holds an answer. The body and the stream both ask here, so that they agree.

    A `failed` status is an error, whatever its error object says. An error object with
    neither a code nor a message says nothing. One beside a `completed` status leaves the
    answer: the provider says the response completed. Any other (a gateway's error where a
    response should be, or one beside an unfinished or incomplete response) is the error.
    """
    if response.get("status") == "failed":
        return failed_error(response, provider=provider, model=model)
    error = response.get("error")
    if not isinstance(error, dict) or not _says_something(error):
        return None
    if response.get("status") == "completed":
        return None
    return error_from_payload(dict(response), provider=provider, model=model)


def failed_error(
    response: Mapping[str, Any], *, provider: str | None = None, model: str | None = None
) -> Error:
    """The error of a failed response: its error object's, or (when that says nothing) that
    the provider did not say why."""
    error = response.get("error")
    if isinstance(error, dict) and not _says_something(error):
        response = {**response, "error": None}
    return error_from_failed(response, provider=provider, model=model)


def decode_object(
    response: Mapping[str, Any],
    *,
    provider: str | None = None,
    model: str | None = None,
    warnings: Sequence[Warning] = (),
    numbers: Numbers | None = None,
) -> ChatResponse:
    """A response object, already parsed, as a `ChatResponse`; raises the error it stands
    for (`response_error`), and `ValueError` (with the reason) for one that does not fit the
    shape. `numbers`: the text it was read from, whose numbers a call's arguments object
    keeps as written."""
    error = response_error(response, provider=provider, model=model)
    if error is None:
        error = unfinished_error(response, provider=provider, model=model)
    if error is not None:
        # Tokens paid for: an extraction records them (a stream yields them instead).
        raise _with_usage(error, response)
    output = response.get("output")
    if not isinstance(output, list):
        raise _Unreadable("it has no `output` list")
    read = _blocks(output, numbers)
    waiting = waiting_kinds(read.others)
    if waiting:  # calls allama does not read, which the caller must answer
        warnings = (*warnings, waiting_warning(waiting, provider))
    has_calls = bool(waiting) or any(isinstance(block, ToolCall) for block in read.blocks)
    usage = response.get("usage")
    body_model = _string(response.get("model"))
    provider_data = read.provider_data()
    tier = service_tier_of(response.get("service_tier"))
    if tier is not None:  # billed at other prices
        provider_data.setdefault(NAMESPACE, {})[SERVICE_TIER_KEY] = tier
    money = money_fields(usage) if isinstance(usage, dict) else None
    if money is not None:  # what the provider says it cost (OpenRouter, xAI)
        provider_data.setdefault(NAMESPACE, {})[USAGE_COST_KEY] = money
    if uses_search_preview(response):  # its searches are not at the `web_search` price
        provider_data.setdefault(NAMESPACE, {})[WEB_SEARCH_PREVIEW_KEY] = True
    kinds = [isinstance(block, Reasoning) for block in read.blocks]
    stored = response.get("store") is True  # only a stored item can be named by its id
    owners = list(zip(kinds, read.ids, strict=True))
    left_out = left_out_kinds(read.others)
    others = list(zip(read.others_at, read.others, strict=True))
    resume = turn_resume(
        owners, read.parts, stored=stored, left_out=left_out, places=read.places, others=others
    )
    if resume is not None:  # what the turn goes back with: ids, reasoning parts, items left out
        provider_data.setdefault(NAMESPACE, {})[RESUME_KEY] = resume
    return ChatResponse(
        tuple(read.blocks),
        finish_reason=finish_reason_of(response, has_tool_calls=has_calls),
        usage=usage_of(usage) if isinstance(usage, dict) else None,
        warnings=tuple(warnings),
        provider_data=provider_data,
        model=body_model or model,
        provider=provider,
        id=_string(response.get("id")),
        logprobs=read.logprobs,
    )


def decode_body(
    body: bytes | str,
    *,
    provider: str | None = None,
    model: str | None = None,
    warnings: Sequence[Warning] = (),
) -> ChatResponse:
    """A successful (2xx) body as a `ChatResponse`; an error in it raises that error."""
    try:
        payload, halves = read_storable_json(body)
    except ValueError:
        raise not_a_response(body, "it is not JSON", provider=provider, model=model) from None
    if halves:  # half of a character, escaped: read as U+FFFD, as every API reads it
        warnings = (*warnings, lone_surrogates(provider))
    if not isinstance(payload, dict):
        raise not_a_response(body, "it is not a JSON object", provider=provider, model=model)
    numbers = Numbers(payload, body, halves=halves)
    try:
        return decode_object(
            payload, provider=provider, model=model, warnings=warnings, numbers=numbers
        )
    except _Unreadable as why:
        error = not_a_response(body, str(why), provider=provider, model=model)
        raise _with_usage(error, payload) from None


def _with_usage(error: Error, response: Mapping[str, Any]) -> Error:
    """`error` with the usage the response beside it reported (tokens billed, whatever else
    is wrong with it), at the model and tier it names, what it said they cost, and the tool
    calls among its output billed beyond the tokens (web and file searches)."""
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return error
    counted = usage_of(usage).model_dump(mode="json", exclude_none=True)
    model, tier = response.get("model"), response.get("service_tier")
    kept = {
        ITEMS_KEY: response.get("output"),
        WEB_SEARCH_PREVIEW_KEY: uses_search_preview(response),
    }
    extras = billed_extras({NAMESPACE: kept})
    return with_reported_usage(
        error, counted, model, tier, money=money_fields(usage), extras=extras
    )


def decode_response(
    status: int,
    headers: Mapping[str, str],
    content: bytes,
    *,
    provider: str | None = None,
    model: str | None = None,
    warnings: Sequence[Warning] = (),
) -> ChatResponse:
    """An HTTP response as a `ChatResponse`; raises the `allama.Error` of an error response."""
    if status >= 400:
        raise error_from_response(status, headers, content, provider=provider, model=model)
    return decode_body(content, provider=provider, model=model, warnings=warnings)
