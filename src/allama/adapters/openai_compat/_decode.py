"""An HTTP response to a `ChatResponse`, or to the `allama.Error` it stands for.

Tool calls are read from the message, never inferred from `finish_reason` (OpenAI answers a
named `tool_choice` with `stop`, which is read as `tool_calls` where the message holds calls,
as the other dialects' stops are); the deprecated `function_call` counts as one, and so does a
call of a tool of another type (OpenAI's `custom` tools, given through the body option), its
`input` the arguments, free text as given. A refusal (`message.refusal`, or a `refusal`
part of a `content` list) becomes a refusal block; reasoning text (`reasoning` or
`reasoning_content`) a reasoning block; reasoning and cached token counts go into `Usage`.
A choice that Azure's content filter stopped may have no message at all: it is a response
with no content and finish reason `content_filter`, its usage kept. A choice that carries an
`error` (OpenRouter's upstream failing after the answer began) raises that error, and so
does an `error` beside the choices; a choice DeepSeek stopped for lack of capacity
(`insufficient_system_resource`) raises a retryable overloaded error. Where the profile
says so (`think_tags`), a `<think>…</think>` block opening the content is reasoning, not
answer.

What allama has no type for is kept verbatim in `provider_data[provider or "openai"]`:
`message.annotations` (web-search citations) under `ANNOTATIONS_KEY`, the answer's audio
(`message.audio` of OpenAI's audio models, asked for with `modalities` and `audio` through
the body option: its transcript is no text block) under `AUDIO_KEY`, OpenRouter's
`message.reasoning_details` under `REASONING_DETAILS_KEY` (an assistant turn made from the
response carries them, and the encoder sends them back unmodified to the same provider), and
the cost the usage reports (OpenRouter's `cost`, `cost_details`, `is_byok`; xAI's
`cost_in_usd_ticks`) under `USAGE_COST_KEY`, a service tier other than the standard one
(`priority`, `flex`: billed at other prices) under `SERVICE_TIER_KEY`, and the usage's audio
tokens (`prompt_tokens_details.audio_tokens`, `completion_tokens_details.audio_tokens` of
OpenAI's audio models, billed at audio prices) under `AUDIO_TOKENS_KEY`, by genai-prices'
names (`input_audio_tokens`, `output_audio_tokens`), each a part of the count `Usage` has for
its direction; Azure's content-filter verdicts on an answer it let through, and on its
prompt, where one notes something or is the filter's error, where it did not run
(`CONTENT_FILTER_RESULTS_KEY`, `PROMPT_FILTER_RESULTS_KEY`: with a warning,
`filter_not_run`, since nothing was checked); Azure OpenAI On Your Data's
`message.context` (the citations the answer's `[doc1]` markers point to) under
`CONTEXT_KEY`; Groq's compound systems' `message.executed_tools` (the
searches and code runs the server made, with their results) under `EXECUTED_TOOLS_KEY`, and
the `usage_breakdown` beside the usage (each model's tokens) under `USAGE_BREAKDOWN_KEY`;
the parts of a `content` list that no text was read from (`message_parts`: a part's string
`text` is read whatever its type is called, a bare string too) under `CONTENT_PARTS_KEY`,
with a warning (`UNREAD_PARTS`). An empty or absent list, or a usage without those fields
(or with no audio tokens), leaves no key; a plain answer costs a few lookups in
`model_extra` (OpenAI sends `"annotations": []` on every message).

Log-probabilities (`choices[].logprobs.content`) are read whole or not at all, with a warning
saying why: of a shape allama does not read, or merging the tokens of a character written in
several into one (llama.cpp's server, `MERGED_LOGPROBS`), whose figures are not the model's.

Metadata allama does not read is of any type (a fractional `created`, a number as the `id`,
kept as text, a `null` role; `allama.adapters.openai_compat._wire`), a choice's `null` index
is its place in the list, and `logprobs` that are no object are left out with the warning
above: an answer that was read is never thrown away for them, as a usage of another shape is
not (`refit`).

Only the first choice is the answer. An answer of more than one (`n` above 1, which
`ChatRequest` has no field for, given through the body option) says so in a warning
(`FIRST_CHOICE_ONLY`), the others' text, refusals, tool calls, audio and finish reasons kept
under `OTHER_CHOICES_KEY`: their tokens are in the usage, paid for, and are not to vanish
without a word.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple, TypeVar

from pydantic import BaseModel, ValidationError

from allama._degradations import FIRST_CHOICE_ONLY
from allama.adapters._http import wire_json
from allama.adapters._logprobs import merged_characters, openai_logprobs
from allama.adapters._not_a_response import not_a_response
from allama.adapters._surrogates import LONE_SURROGATES
from allama.adapters._surrogates import holds_lone_surrogate as _holds_lone_surrogate
from allama.adapters._surrogates import lone_surrogates as _lone_surrogates
from allama.adapters._surrogates import storable_json as _storable_json
from allama.adapters.openai_compat._errors import (
    error_from_payload,
    error_from_response,
    filter_explanation,
)
from allama.adapters.openai_compat._wire import (
    WireChoice,
    WireChunkChoice,
    WireMessage,
    WireResponse,
    WireUsage,
)
from allama.errors import (
    Error,
    with_reported_usage,
)
from allama.types import (
    DECLINE_EXPLANATION_KEY,
    SERVICE_TIER_KEY,
    ChatResponse,
    ContentBlock,
    FinishReason,
    Reasoning,
    Refusal,
    RequestField,
    TextPart,
    ToolCall,
    Usage,
    Warning,
)
from allama.types._response import (
    AUDIO_KEY,
    AUDIO_TOKENS_KEY,
    REASONING_DETAILS_KEY,
    USAGE_COST_KEY,
    money_fields,
    service_tier_of,
)

__all__ = [
    "ANNOTATIONS_KEY",
    "AUDIO_KEY",
    "AUDIO_TOKENS_KEY",
    "CONTENT_FILTER_RESULTS_KEY",
    "CONTENT_PARTS_KEY",
    "CONTEXT_KEY",
    "EXECUTED_TOOLS_KEY",
    "INTERRUPTED",
    "LONE_SURROGATES",
    "MERGED_LOGPROBS",
    "OTHER_CHOICES_KEY",
    "PROMPT_FILTER_RESULTS_KEY",
    "REASONING_DETAILS_KEY",
    "UNREAD_PARTS",
    "USAGE_BREAKDOWN_KEY",
    "USAGE_COST_KEY",
    "audio_tokens_of",
    "choice_error",
    "filter_not_run",
    "finish_error",
    "message_parts",
    "filter_explanation",
    "decode_body",
    "decode_response",
    "finish_reason_of",
    "kept_list",
    "kept_object",
    "leading_think",
    "other_choice",
    "prompt_verdicts",
    "reasoning_text",
    "unchecked_verdicts",
    "unread_choices",
    "unread_parts",
    "usage_breakdown",
    "usage_cost",
    "usage_of",
]

ANNOTATIONS_KEY = "annotations"
"""`message.annotations`, verbatim: a list, in order. OpenAI's web search (and OpenRouter's
web plugin) send `{"type": "url_citation", "url_citation": {"start_index", "end_index",
"url", "title"}}`, the indexes into the response's text; a stream's are appended in order."""


CONTENT_FILTER_RESULTS_KEY = "content_filter_results"
"""Azure's content-filter verdicts on an answer it did not filter, verbatim (a dict by
category), kept where one notes something: a category `detected` (protected material, with
its citation where Azure gives one) or `filtered` without the finish saying so. A filtered
answer says what the filter flagged under `DECLINE_EXPLANATION_KEY` instead. Where the
filter did not run, the error Azure gives in their place (`{"error": {"code":
"content_filter_error", "message": "The contents are not filtered"}}`), with a warning
(`filter_not_run`): a stream keeps the first it sends (Azure may send it on every chunk)."""

PROMPT_FILTER_RESULTS_KEY = "prompt_filter_results"
"""Azure's content-filter verdicts on the prompt, verbatim (a list by `prompt_index`), kept
where one notes something (a jailbreak attempt `detected` and let through) or is the
filter's error, where it did not run on the prompt (with a warning, `filter_not_run`)."""

CONTEXT_KEY = "context"
"""Azure OpenAI On Your Data's `message.context` (`data_sources` given through the body
option), verbatim: `{"citations": [{"content", "title", "url", "filepath", "chunk_id"}],
"intent", ...}`, the retrieved documents the answer's `[doc1]` markers cite, and the search
intent. A stream gives it whole on its first delta (`delta.context`), kept as given; should
later deltas carry more of it, their fields are merged in, one given again taking the place
of the one before."""

EXECUTED_TOOLS_KEY = "executed_tools"
"""Groq's compound systems' `message.executed_tools`, verbatim: a list, in order, of the
server-side tools the system ran for the answer (`{"index", "type", "arguments", "output",
"search_results", "code_results", "browser_results"}`), the only place their results are
given."""

USAGE_BREAKDOWN_KEY = "usage_breakdown"
"""Groq's compound systems' `usage_breakdown`, verbatim (`{"models": [{"model", "usage"}]}`):
the tokens of each model the system ran, beside the usage it reports for the request."""

CONTENT_PARTS_KEY = "content_parts"
"""The parts of `message.content` (a list) that no text was read from (of a type allama does
not know, with no string `text`: an image, a reference), verbatim,
in order; a stream's are appended in order. The answer says so in a warning
(`UNREAD_PARTS`): its text, read from the other parts, may not be all the model said."""

OTHER_CHOICES_KEY = "other_choices"
"""The choices after the first, which allama does not read: a list, by index, of
`{"index", "text", "finish_reason"}`, the text as the content gives it (no `<think>` split
off) and the finish reason the provider's own word (`null` where none came); with
`"refusal"` (its text) where the choice refused, and `"tool_calls"` (a list of `{"id",
"name", "arguments"}`, strings, in order, read as the first choice's calls are) where it
called tools, and `"audio"` (the object `AUDIO_KEY` holds for the first: `message.audio`
verbatim, a stream's pieces joined alike) where it spoke: keys left out where there is none.
A choice's audio is the whole of its answer where the request asked for it (its transcript
is its words, `content` `null`), paid for at audio prices."""


def other_choice(
    index: int,
    blocks: Sequence[ContentBlock],
    finish_reason: str | None,
    audio: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One entry of `OTHER_CHOICES_KEY`: a choice's blocks and audio, read as the first's are
    (from its message in a body, its deltas collected in a stream, so that both give the
    same)."""
    entry: dict[str, Any] = {
        "index": index,
        "text": "".join(block.text for block in blocks if isinstance(block, TextPart)),
        "finish_reason": finish_reason,
    }
    refusal = "".join(block.text for block in blocks if isinstance(block, Refusal))
    if refusal:
        entry["refusal"] = refusal
    calls = [
        {"id": block.id, "name": block.name, "arguments": block.arguments}
        for block in blocks
        if isinstance(block, ToolCall)
    ]
    if calls:
        entry["tool_calls"] = calls
    if audio is not None:
        entry["audio"] = audio
    return entry


def unread_choices(count: int, provider: str | None) -> Warning:
    """The warning on an answer of `count` choices, of which only the first is read."""
    warning = Warning.unsupported(
        RequestField.OPTIONS,
        f"the provider answered {count} choices: only the first is read (the others' text, "
        f"refusals, tool calls, audio and finish reasons are kept in `provider_data`, under "
        f"`{OTHER_CHOICES_KEY}`)",
        code=FIRST_CHOICE_ONLY,
    )
    return warning if provider is None else warning.with_provider(provider)


# `REASONING_DETAILS_KEY` (`allama.types._response`, where `to_assistant_message()` carries
# it): OpenRouter's `message.reasoning_details`, verbatim. A stream's pieces are joined into
# entries (see `allama.adapters.openai_compat._sse`). The reasoning text is a `Reasoning`
# block as well.

_FINISH: dict[str, FinishReason] = {
    "stop": FinishReason.STOP,
    "eos": FinishReason.STOP,
    "end_turn": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "max_tokens": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "content_filter": FinishReason.CONTENT_FILTER,
    "model_length": FinishReason.CONTEXT_WINDOW,
}


def finish_reason_of(raw: str | None, *, has_tool_calls: bool) -> FinishReason | None:
    """The finish reason by its allama name; unknown words are kept as the provider's own.

    Together's `eos` is a normal stop and Mistral's `model_length` a full context window.
    An empty string (xAI, with tool calls) says nothing, so it is read from the content.
    A normal stop whose message holds tool calls (OpenAI says `stop` for a named
    `tool_choice`) is `tool_calls`, as the other dialects' decoders read their stops.
    """
    if raw is None:
        return None
    if raw == "":
        return FinishReason.TOOL_CALLS if has_tool_calls else None
    finish = _FINISH.get(raw) or FinishReason(raw)
    if finish == FinishReason.STOP and has_tool_calls:
        return FinishReason.TOOL_CALLS
    return finish


def usage_of(usage: WireUsage, *, reasoning_outside_completion: bool = False) -> Usage:
    """Token counts by allama's names.

    `reasoning_outside_completion` is for servers (xAI) whose `completion_tokens` leave out
    the reasoning tokens that `total_tokens` includes; allama's `output_tokens` always
    include them. Other servers that count so (Grok on Azure AI Foundry) are told by their
    numbers: a completion smaller than its reasoning, or a total that adds the reasoning to
    the prompt and completion.
    """
    prompt = usage.prompt_tokens_details
    completion = usage.completion_tokens_details
    reasoning = completion.reasoning_tokens if completion is not None else None
    output = usage.completion_tokens
    if output is not None and reasoning:
        outside = reasoning_outside_completion or 0 <= output < reasoning
        if not outside and reasoning > 0 and usage.prompt_tokens is not None:
            outside = usage.total_tokens == usage.prompt_tokens + output + reasoning
        if outside:
            output += reasoning
    cached = prompt.cached_tokens if prompt is not None else None
    if cached is None:
        cached = usage.prompt_cache_hit_tokens
    if cached is None:
        cached = usage.cached_tokens if usage.cached_tokens is not None else usage.num_cached_tokens
    return Usage(
        input_tokens=usage.prompt_tokens,
        output_tokens=output,
        reasoning_tokens=reasoning,
        cache_read_tokens=cached,
        cache_write_tokens=prompt.cache_write_tokens if prompt is not None else None,
    )


def audio_tokens_of(usage: WireUsage) -> dict[str, int] | None:
    """The usage's audio tokens by genai-prices' names (`AUDIO_TOKENS_KEY`); `None` when it
    reports none. The Chat Completions usage does not say how many of its cached tokens are
    audio, so no `cache_audio_read_tokens` is given (`allama._prices` prices no cost where
    that matters)."""
    found: dict[str, int] | None = None
    for details, name in (
        (usage.prompt_tokens_details, "input_audio_tokens"),
        (usage.completion_tokens_details, "output_audio_tokens"),
    ):
        count = details.audio_tokens if details is not None else None
        if count is not None and count > 0:
            found = found or {}
            found[name] = count
    return found


def usage_cost(usage: WireUsage) -> dict[str, Any] | None:
    """The money fields of a usage (`USAGE_COST_KEY`), verbatim, with OpenRouter's
    `server_tool_use` where it counts web searches (billed beyond the tokens: a call that
    made them has no cost by the tokens' list price, `allama._prices`); `None` when it has
    none."""
    money = money_fields(usage.model_extra)
    tools = (usage.model_extra or {}).get("server_tool_use")
    searches = tools.get("web_search_requests") if isinstance(tools, dict) else None
    if type(searches) is int and searches > 0:
        money = {**(money or {}), "server_tool_use": tools}
    return money


def usage_breakdown(extra: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The `usage_breakdown` among `extra` (a body's extra fields; a stream's final chunk
    gives it in its `x_groq`), verbatim (`USAGE_BREAKDOWN_KEY`); `None` where there is none,
    or an empty one."""
    value = extra.get("usage_breakdown") if extra else None
    return value if isinstance(value, dict) and value else None


def kept_list(extra: dict[str, Any] | None, name: str) -> list[Any] | None:
    """The non-empty list a message or delta carries as the extra field `name`, if any."""
    if not extra:
        return None
    value = extra.get(name)
    return value if isinstance(value, list) and value else None


def kept_object(extra: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    """The non-empty object a message or delta carries as the extra field `name`, if any
    (`"audio": null`, which some servers send on every message, is none)."""
    if not extra:
        return None
    value = extra.get(name)
    return value if isinstance(value, dict) and value else None


_REASONING_PARTS = frozenset({"thinking", "reasoning", "reasoning_text"})
"""The types of the content parts whose text is reasoning (Mistral's `thinking`, whose
`thinking` is a string or a list of text pieces; the Responses API's `reasoning_text` where a
gateway passes its parts on)."""


class Parts(NamedTuple):
    """What a `content` field holds (`message_parts`)."""

    text: str
    thinking: str
    refusal: str
    """The text of its refusal parts (`{"type": "refusal", "refusal": ...}`)."""
    unread: list[Any]
    """The parts no text was read from, verbatim (`CONTENT_PARTS_KEY`)."""


def message_parts(content: str | list[Any] | None) -> Parts:
    """The text, the reasoning and the refusal in a `content` field (a string, or a list of
    parts), and the parts no text was read from, verbatim (`CONTENT_PARTS_KEY`). A part's
    string `text` is text whatever its type is called (`text`, the Responses API's
    `output_text`, none), and a bare string part too; reasoning where its type says so
    (`_REASONING_PARTS`); a `refusal` part's string `refusal` (the part OpenAI's assistant
    content holds, and a gateway may answer with) is a refusal, as `message.refusal` is: an
    extraction reports the model's refusal, not an answer it cannot parse."""
    return _parts(content)


def _parts(content: str | list[Any] | None) -> Parts:
    if content is None:
        return Parts("", "", "", [])
    if isinstance(content, str):
        return Parts(content, "", "", [])
    texts: list[str] = []
    thinking: list[str] = []
    refused: list[str] = []
    unread: list[Any] = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict):
            unread.append(part)
            continue
        kind = part.get("type")
        text = part.get("text")
        if kind in _REASONING_PARTS:
            inner = part.get("thinking")
            if inner is None:
                inner = text
            if isinstance(inner, str):
                thinking.append(inner)
            elif isinstance(inner, list):
                thinking.extend(
                    piece["text"]
                    for piece in inner
                    if isinstance(piece, dict) and isinstance(piece.get("text"), str)
                )
            else:
                unread.append(part)
        elif isinstance(text, str):
            texts.append(text)
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            refused.append(part["refusal"])
        else:
            unread.append(part)
    return Parts("".join(texts), "".join(thinking), "".join(refused), unread)


UNREAD_PARTS = (
    "the provider answered with content parts allama reads no text from: they are kept "
    f"verbatim in `provider_data`, under `{CONTENT_PARTS_KEY}`"
)
"""The warning on an answer whose content holds parts of no text (`CONTENT_PARTS_KEY`)."""


def unread_parts(provider: str | None) -> Warning:
    """The warning on an answer whose content holds parts no text was read from."""
    warning = Warning.unsupported(RequestField.OPTIONS, UNREAD_PARTS)
    return warning if provider is None else warning.with_provider(provider)


def reasoning_text(reasoning: str | None, reasoning_content: str | None) -> str:
    """The reasoning a message or delta carries under either name. Some servers (vLLM while
    it renamed `reasoning_content` to `reasoning`) send the same text under both: it is
    the model's reasoning once, not twice."""
    if reasoning and reasoning == reasoning_content:
        return reasoning
    return (reasoning or "") + (reasoning_content or "")


INTERRUPTED = "insufficient_system_resource"
"""DeepSeek's finish reason for an answer its servers stopped for lack of capacity: not the
model's output ending, so not one to read (or repair) as the answer."""


FAILED = "error"
"""The finish reason of an answer the server's generation failed in (Mistral, vLLM: "a
retryable request-level internal error"; OpenRouter's, which sends the error beside it):
what came before it is no answer to trust, however well it reads."""


def finish_error(choice: WireChoice | WireChunkChoice | None) -> dict[str, Any] | None:
    """The error payload, in allama's words, a choice's finish reason alone stands for: a
    choice DeepSeek interrupted for capacity (`INTERRUPTED`) an overloaded server, one that
    ended in an error without one beside it (`FAILED`) a server error; each a retryable
    error naming its finish reason, its usage kept as paid for. `None` for any other."""
    if choice is None:
        return None
    if choice.finish_reason == INTERRUPTED:
        return {
            "error": {
                "message": (
                    "the provider interrupted the answer for lack of capacity (finish "
                    f"reason `{INTERRUPTED}`), not at the output token limit"
                ),
                "code": "overloaded",
                "type": INTERRUPTED,
            }
        }
    if choice.finish_reason == FAILED and not (choice.model_extra or {}).get("error"):
        return {
            "error": {
                "message": (
                    "the provider ended the answer in an error it did not describe (finish "
                    f"reason `{FAILED}`)"
                ),
                "code": "server_error",
                "type": FAILED,
            }
        }
    return None


def choice_error(choice: WireChoice | WireChunkChoice | None) -> dict[str, Any] | None:
    """The error a choice reports in place of its answer (OpenRouter: `"finish_reason":
    "error"` and the upstream's `error` on the choice, in a 200 body or stream), as the
    error payload it stands for, or its finish reason alone does (`finish_error`); `None`
    when it reports none."""
    said = finish_error(choice)
    if said is not None or choice is None:
        return said
    error = choice.model_extra.get("error") if choice.model_extra else None
    return {"error": error} if error else None


THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


def leading_think(text: str) -> tuple[str, str] | None:
    """The reasoning in a `<think>…</think>` block that opens `text` (after whitespace) and
    the answer after it (its leading whitespace left out); `None` when `text` opens with no
    such block. An unclosed block is reasoning to the end: the answer never began."""
    opened = text.lstrip()
    if not opened.startswith(THINK_OPEN):
        return None
    inner = opened[len(THINK_OPEN) :]
    thought, closed, rest = inner.partition(THINK_CLOSE)
    return thought, rest.lstrip() if closed else ""


def _blocks(
    message: WireMessage, *, think_tags: bool = False
) -> tuple[list[ContentBlock], list[Any]]:
    """The blocks of a message, and the parts of its content no text was read from."""
    text, thinking, refused, unread = message_parts(message.content)
    reasoning = reasoning_text(message.reasoning, message.reasoning_content) + thinking
    split = leading_think(text) if think_tags else None
    if split is not None:
        # The model's reasoning written into the answer (no reasoning parser on the server).
        thought, text = split
        reasoning += thought
    blocks: list[ContentBlock] = []
    if reasoning:
        blocks.append(Reasoning(text=reasoning))
    if text:
        blocks.append(TextPart(text=text))
    refusal = message.refusal or ""
    if refused and refused != refusal:  # (one refusal given both ways is said once)
        refusal = refused + refusal
    if refusal:
        blocks.append(Refusal(text=refusal))
    calls = message.tool_calls or ()
    for position, call in enumerate(calls):
        name, arguments = call.named()
        blocks.append(ToolCall(id=call.id or f"call_{position}", name=name, arguments=arguments))
    legacy = message.function_call
    if legacy is not None:
        # The deprecated single call has no id; it takes the place after any tool calls.
        blocks.append(
            ToolCall(id=f"call_{len(calls)}", name=legacy.name, arguments=legacy.arguments)
        )
    return blocks, unread


def _not_run(verdicts: Any) -> bool:
    """Whether Azure's content-filter verdicts are the error it gives in their place where
    the filter did not run (`{"error": {"code": "content_filter_error", ...}}`)."""
    return isinstance(verdicts, dict) and bool(verdicts.get("error"))


def unchecked_verdicts(extra: Mapping[str, Any]) -> dict[str, Any] | None:
    """The verdicts of a choice (its extra fields) that are the content filter's error,
    where it did not run on the answer, verbatim; `None` where it ran. Under
    `content_filter_results`, or `content_filter_result` as Azure's documentation of the
    case spells it and as some of its streams send it (beside an empty
    `content_filter_results`, on every chunk)."""
    for name in ("content_filter_results", "content_filter_result"):
        verdicts = extra.get(name)
        if isinstance(verdicts, dict) and _not_run(verdicts):
            return verdicts
    return None


def prompt_verdicts(extra: Mapping[str, Any]) -> tuple[list[Any] | None, bool]:
    """The `prompt_filter_results` among a body's (or a chunk's) extra fields, where an
    entry's verdicts note something or are the filter's error (`PROMPT_FILTER_RESULTS_KEY`),
    else `None`; and whether the filter did not run on the prompt."""
    value = extra.get("prompt_filter_results")
    if not isinstance(value, list):
        return None, False
    noted = not_run = False
    for entry in value:
        if isinstance(entry, dict):
            noted = noted or _noted(entry.get("content_filter_results"))
            not_run = not_run or unchecked_verdicts(entry) is not None
    return (value if noted or not_run else None), not_run


def filter_not_run(what: Literal["completion", "prompt"], provider: str | None) -> Warning:
    """The warning on an answer whose completion (or prompt) Azure's content filter did not
    run on: its verdicts are an error, so nothing was checked, which the answer alone would
    not say (its finish is a plain `stop`)."""
    key = CONTENT_FILTER_RESULTS_KEY if what == "completion" else PROMPT_FILTER_RESULTS_KEY
    warning = Warning.unsupported(
        RequestField.OPTIONS,
        f"Azure's content filter did not run on the {what}: nothing in it was filtered or "
        f"annotated (the filter's error is kept in `provider_data`, under `{key}`)",
    )
    return warning if provider is None else warning.with_provider(provider)


def _noted(verdicts: Any) -> bool:
    """Whether Azure's content-filter verdicts note anything: a category it `detected`
    (a jailbreak attempt, protected material, in a mode that annotates rather than
    filters) or `filtered`. Those that found everything `safe` are on every answer."""
    if not isinstance(verdicts, dict):
        return False
    return any(
        isinstance(verdict, dict)
        and (verdict.get("detected") is True or verdict.get("filtered") is True)
        for verdict in verdicts.values()
    )


def _not_a_completion(
    body: bytes | str, why: str, provider: str | None, model: str | None
) -> Error:
    return not_a_response(body, why, provider=provider, model=model, what="a chat completion")


def _invalid_body(
    body: bytes | str,
    *,
    provider: str | None,
    model: str | None,
    reasoning_outside_completion: bool = False,
) -> Error:
    """Why a 2xx body is not a completion: not JSON, not an object, or an error object."""
    try:
        payload: Any = json.loads(body)
    except ValueError:
        return _not_a_completion(body, "it is not JSON", provider, model)
    except RecursionError:
        return _not_a_completion(body, "it is JSON nested too deeply to read", provider, model)
    if not isinstance(payload, dict):
        return _not_a_completion(body, "it is not a JSON object", provider, model)
    if payload.get("error") or payload.get("success") is False:
        error = error_from_payload(payload, provider=provider, model=model)
    else:
        error = _not_a_completion(
            body, "its fields do not fit the chat completion shape", provider, model
        )
    # An answer billed, whatever else is wrong with it: its usage, read for its counts.
    usage = loose_usage(payload.get("usage"))
    tier = payload.get("service_tier")
    return _reported(error, usage, payload.get("model"), tier, reasoning_outside_completion)


def loose_usage(usage: object) -> WireUsage | None:
    """A usage object read for what fits of it: each count and detail that reads alone is
    kept, one of another shape left out (`"prompt_tokens_details": []`), so that the cached
    and reasoning counts beside it still count; `None` when it is no object."""
    if not isinstance(usage, dict):
        return None
    try:
        return WireUsage.model_validate(usage)
    except ValidationError:
        pass
    return WireUsage.model_validate(_fitting(WireUsage, usage))


def _fitting(shape: type[BaseModel], given: dict[str, Any]) -> dict[str, Any]:
    """What of `given` reads as `shape` field by field: a details object kept for the
    counts in it that read (`{"cached_tokens": 800, "cache_write_tokens": {...}}`)."""
    fitting: dict[str, Any] = {}
    for name, value in given.items():
        try:
            shape.model_validate({name: value})
        except ValidationError:
            field = shape.model_fields.get(name)
            inner = _details_shape(field.annotation) if field is not None else None
            if inner is not None and isinstance(value, dict):
                fitting[name] = _fitting(inner, value)
            continue
        fitting[name] = value
    return fitting


def _details_shape(annotation: Any) -> type[BaseModel] | None:
    """The model a field's annotation holds (`_Details | None`), if any."""
    for candidate in getattr(annotation, "__args__", (annotation,)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


_Fitted = TypeVar("_Fitted", bound=BaseModel)


def refit(shape: type[_Fitted], data: bytes | str, invalid: ValidationError) -> _Fitted | None:
    """`data` read as `shape` again when only its usage did not fit it (a detail of another
    shape): its usage read for what fits (`loose_usage`), rather than a paid answer thrown
    away; `None` otherwise."""
    if not all(problem["loc"][:1] == ("usage",) for problem in invalid.errors()):
        return None
    try:
        payload = json.loads(data)
        payload["usage"] = loose_usage(payload.get("usage"))
        return shape.model_validate(payload)
    except (ValueError, TypeError, ValidationError, RecursionError):
        return None


def _lone_surrogates_replaced(body: bytes | str, invalid: ValidationError) -> str | None:
    """`body` written again with each lone surrogate in it (a key's or a string's, which
    pydantic-core refuses as JSON) as U+FFFD, as the ledger and a next turn can carry it;
    `None` when pydantic-core did not refuse it as JSON, or it holds none."""
    if not any(problem["type"] == "json_invalid" for problem in invalid.errors()):
        return None
    try:
        payload = wire_json(body)
        if not _holds_lone_surrogate(payload):
            return None
        return json.dumps(_storable_json(payload))
    except (ValueError, RecursionError):
        return None


def _refitted(
    data: bytes | str,
    invalid: ValidationError,
    body: bytes | str,
    provider: str | None,
    model: str | None,
    reasoning_outside_completion: bool,
) -> WireResponse:
    """`data` (the body, or the body read again: `_lone_surrogates_replaced`) read as a
    completion whose usage alone did not fit (`refit`); else the error `body`, as the
    provider sent it, is."""
    refitted = refit(WireResponse, data, invalid)
    if refitted is None:
        raise _invalid_body(
            body,
            provider=provider,
            model=model,
            reasoning_outside_completion=reasoning_outside_completion,
        ) from None
    return refitted


def _with_usage(error: Error, wire: WireResponse, reasoning_outside_completion: bool) -> Error:
    """`error` with the usage its body reported (tokens paid for), for an extraction's record."""
    tier = (wire.model_extra or {}).get("service_tier")
    return _reported(error, wire.usage, wire.model, tier, reasoning_outside_completion)


def _reported(
    error: Error,
    usage: WireUsage | None,
    model: object,
    tier: object,
    reasoning_outside_completion: bool,
) -> Error:
    if usage is None:
        return error
    counted = usage_of(usage, reasoning_outside_completion=reasoning_outside_completion)
    dumped = counted.model_dump(mode="json", exclude_none=True)
    return with_reported_usage(
        error, dumped, model, tier, money=usage_cost(usage), extras=audio_tokens_of(usage)
    )


def decode_body(
    body: bytes | str,
    *,
    provider: str | None = None,
    model: str | None = None,
    reasoning_outside_completion: bool = False,
    warnings: Sequence[Warning] = (),
    think_tags: bool = False,
) -> ChatResponse:
    """A successful (2xx) body as a `ChatResponse`; an error object in it raises that error.
    `think_tags`: a `<think>…</think>` opening the content is reasoning (`leading_think`)."""
    try:
        wire = WireResponse.model_validate_json(body)
    except ValidationError as invalid:
        readable = _lone_surrogates_replaced(body, invalid)
        if readable is None:
            wire = _refitted(body, invalid, body, provider, model, reasoning_outside_completion)
        else:
            # pydantic-core refuses JSON that escapes half of a character (`"\ud83d"`):
            # the paid answer is read with U+FFFD in its place, and the response says so.
            warnings = (*warnings, _lone_surrogates(provider))
            try:
                wire = WireResponse.model_validate_json(readable)
            except ValidationError as again:
                wire = _refitted(
                    readable, again, body, provider, model, reasoning_outside_completion
                )
    extra = wire.model_extra
    if extra and (extra.get("error") or (not wire.choices and extra.get("success") is False)):
        # An error beside the choices too (OpenRouter's upstream failing after the answer
        # began, its choice finished with `error`): raised, as the same stream's is.
        error = error_from_payload(dict(extra), provider=provider, model=model)
        if wire.choices:
            error.with_body(body.decode("utf-8", "replace") if isinstance(body, bytes) else body)
        raise _with_usage(error, wire, reasoning_outside_completion)
    if "choices" not in wire.model_fields_set:
        # No completion at all (a gateway's `{"detail": ...}`, a server's error object of a
        # shape of its own, `{}`): one to try again, not an answer with no output.
        error = _not_a_completion(body, "it has no `choices`", provider, model)
        raise _with_usage(error, wire, reasoning_outside_completion)
    choice = next((c for c in wire.choices if c.index == 0), None)
    if choice is None and wire.choices:
        choice = wire.choices[0]
    failure = choice_error(choice)
    if failure is not None:
        error = error_from_payload(failure, provider=provider, model=model).with_body(
            body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        )
        if finish_error(choice) is not None:
            error.mark_authored()  # (allama's words for its finish reason, not the provider's)
        raise _with_usage(error, wire, reasoning_outside_completion)
    message = choice.message if choice is not None else None
    if choice is not None and message is None and choice.finish_reason != "content_filter":
        # Only a filtered choice may come without its message.
        error = _not_a_completion(body, "its choice has no message", provider, model)
        raise _with_usage(error, wire, reasoning_outside_completion)
    blocks, unread = _blocks(message, think_tags=think_tags) if message is not None else ([], [])
    has_calls = any(isinstance(block, ToolCall) for block in blocks)
    usage = (
        usage_of(wire.usage, reasoning_outside_completion=reasoning_outside_completion)
        if wire.usage is not None
        else None
    )
    finish = finish_reason_of(
        choice.finish_reason if choice is not None else None, has_tool_calls=has_calls
    )
    kept: dict[str, Any] = {}
    if finish == FinishReason.CONTENT_FILTER and choice is not None:
        explanation = filter_explanation((choice.model_extra or {}).get("content_filter_results"))
        if explanation:
            kept[DECLINE_EXPLANATION_KEY] = explanation
    elif choice is not None and choice.model_extra:
        verdicts = choice.model_extra.get("content_filter_results")
        unchecked = unchecked_verdicts(choice.model_extra)
        if unchecked is not None:
            kept[CONTENT_FILTER_RESULTS_KEY] = unchecked
            warnings = (*warnings, filter_not_run("completion", provider))
        elif verdicts and _noted(verdicts):
            kept[CONTENT_FILTER_RESULTS_KEY] = verdicts
    if wire.model_extra:
        on_prompt, prompt_not_run = prompt_verdicts(wire.model_extra)
        if on_prompt is not None:
            kept[PROMPT_FILTER_RESULTS_KEY] = on_prompt
        if prompt_not_run:
            warnings = (*warnings, filter_not_run("prompt", provider))
    message_extra = message.model_extra if message is not None else None
    if message_extra:
        annotations = kept_list(message_extra, "annotations")
        if annotations is not None:
            kept[ANNOTATIONS_KEY] = annotations
        details = kept_list(message_extra, "reasoning_details")
        if details is not None:
            kept[REASONING_DETAILS_KEY] = details
        executed = kept_list(message_extra, "executed_tools")
        if executed is not None:
            kept[EXECUTED_TOOLS_KEY] = executed
        spoken = kept_object(message_extra, "audio")
        if spoken is not None:
            kept[AUDIO_KEY] = spoken
        context = kept_object(message_extra, "context")
        if context is not None:
            kept[CONTEXT_KEY] = context
    if unread:
        kept[CONTENT_PARTS_KEY] = unread
        warnings = (*warnings, unread_parts(provider))
    if wire.usage is not None:
        cost = usage_cost(wire.usage)
        if cost is not None:
            kept[USAGE_COST_KEY] = cost
        audio = audio_tokens_of(wire.usage)
        if audio is not None:
            kept[AUDIO_TOKENS_KEY] = audio
    if wire.model_extra:
        tier = service_tier_of(wire.model_extra.get("service_tier"))
        if tier is not None:
            kept[SERVICE_TIER_KEY] = tier
        breakdown = usage_breakdown(wire.model_extra)
        if breakdown is not None:
            kept[USAGE_BREAKDOWN_KEY] = breakdown
    if len(wire.choices) > 1:
        # `n` above 1: the others are paid for (their tokens are in the usage), not read.
        others = sorted((c for c in wire.choices if c is not choice), key=lambda c: c.index)
        kept[OTHER_CHOICES_KEY] = [
            other_choice(
                other.index,
                _blocks(other.message)[0] if other.message is not None else [],
                other.finish_reason,
                kept_object(other.message.model_extra, "audio")
                if other.message is not None
                else None,
            )
            for other in others
        ]
        warnings = (*warnings, unread_choices(len(wire.choices), provider))
    provider_data = {provider or "openai": kept} if kept else {}
    logprobs = None
    if choice is not None and choice.logprobs:
        sent = choice.logprobs
        if isinstance(sent, dict):
            logprobs = openai_logprobs(sent.get("content"))
        left_out = _unread_logprobs(sent) if logprobs is None else None
        counted = usage.output_tokens if usage is not None else None
        if logprobs is not None and merged_characters(logprobs, counted):
            # Read whole, they would give a probability made up: the merged tokens' missing.
            logprobs = None
            left_out = Warning.unsupported(RequestField.LOGPROBS, MERGED_LOGPROBS)
        if left_out is not None:
            warnings = (*warnings, left_out)
    return ChatResponse(
        tuple(blocks),
        finish_reason=finish,
        provider_data=provider_data,
        usage=usage,
        warnings=tuple(warnings),
        model=wire.model or model,
        provider=provider,
        id=wire.id or None,
        logprobs=logprobs,
    )


MERGED_LOGPROBS = (
    "the provider sent log-probabilities that give a character the model wrote in several "
    "tokens as one, with the last token's log-probability and alternatives alone (as "
    "llama.cpp's server does): they were left out"
)
"""The warning on a response whose log-probabilities merged tokens (`merged_characters`):
a decision names it, where it would say none came."""


_LEGACY_LOGPROBS = ("tokens", "token_logprobs", "top_logprobs")
"""The legacy completions shape of `logprobs` (Fireworks, Together): lists by position,
the alternatives a map from text to log-probability, no token's bytes."""


def _unread_logprobs(sent: object) -> Warning | None:
    """Why log-probabilities that were sent were left out, or `None` where none were (a
    `content` of `null` or `[]`): a decision names it, where it would say none came."""
    content = sent.get("content") if isinstance(sent, Mapping) else None
    if not isinstance(sent, Mapping):
        shape = "a `logprobs` that is no object"
    elif content is not None and content != []:
        shape = "a `content` that is no list of tokens with their log-probabilities"
    elif any(sent.get(key) for key in _LEGACY_LOGPROBS):
        shape = (
            "lists of `tokens` and `token_logprobs`, the legacy completions shape, "
            "with no token's bytes"
        )
    else:
        return None
    return Warning.unsupported(
        RequestField.LOGPROBS,
        f"the provider sent log-probabilities in a shape allama does not read ({shape}): "
        "they were left out",
    )


def decode_response(
    status: int,
    headers: Mapping[str, str],
    body: bytes | str,
    *,
    provider: str | None = None,
    model: str | None = None,
    reasoning_outside_completion: bool = False,
    warnings: Sequence[Warning] = (),
    think_tags: bool = False,
) -> ChatResponse:
    """An HTTP response as a `ChatResponse`; raises the `allama.Error` of an error response."""
    if status >= 400:
        raise error_from_response(status, headers, body, provider=provider, model=model)
    return decode_body(
        body,
        provider=provider,
        model=model,
        reasoning_outside_completion=reasoning_outside_completion,
        warnings=warnings,
        think_tags=think_tags,
    )
