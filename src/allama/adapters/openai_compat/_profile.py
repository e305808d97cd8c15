"""How one endpoint speaks the Chat Completions dialect: the quirks an encoder must know.

Kept apart from where the endpoint lives (the preset) and from what its models can do (the
capability table), so a new OpenAI-compatible server is a new profile, not new code.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from allama.types import CapabilitySupport

__all__ = ["SchemaDialect", "WireProfile"]


class SchemaDialect(StrEnum):
    """How a strict schema is spoken to the endpoint.

    `OPENAI_STRICT`: OpenAI's strict subset (rewritten, exact where the rewrite is).
    `PASSTHROUGH`: sent as given to an engine that does not say what it enforces.
    `GRAMMAR`: compiled to a grammar by the server (vLLM, Ollama), approximately.
    `NOT_HONOURED`: the endpoint accepts the schema but does not enforce `strict`.
    `LLAMA_CPP`: llama.cpp's own converter, whose keyword support was measured (`local`).
    `FIREWORKS`: Fireworks' grammar, without the keywords it documents as not supported.
    """

    OPENAI_STRICT = "openai_strict"
    PASSTHROUGH = "passthrough"
    GRAMMAR = "grammar"
    NOT_HONOURED = "not_honoured"
    LLAMA_CPP = "llama_cpp"
    FIREWORKS = "fireworks"


@dataclass(frozen=True, slots=True)
class WireProfile:
    """The encoding and decoding quirks of one endpoint."""

    name: str
    display_name: str
    response_dialect: SchemaDialect = SchemaDialect.OPENAI_STRICT
    tool_dialect: SchemaDialect = SchemaDialect.OPENAI_STRICT
    strict_profile: Literal["current", "azure_legacy", "fine_tuned", "xai", "deepseek", "groq"] = (
        "current"
    )
    token_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens"
    reasoning_token_field: Literal["max_completion_tokens"] | None = None
    """The output limit's field for a model that reasons, where it is not `token_field`:
    OpenAI's reasoning models refuse `max_tokens` ("Use 'max_completion_tokens' instead")
    on an Azure api-version whose request schema has `max_tokens` alone."""
    developer_role: bool = True
    seed_field: str = "seed"
    seed_32_bits: bool = False
    """Whether the server reads `seed` as 32 bits without a sign, its largest meaning a random
    seed (llama.cpp's `LLAMA_DEFAULT_SEED`, which -1 becomes): a seed it would cut to 32
    bits, or read as random, is left out with a warning rather than sent."""
    required_tool_choice: str = "required"
    tool_choice: bool = True
    named_tool_choice: bool = True
    parallel_tool_calls: bool = True
    serial_strict_tools: bool = False
    parallel_tool_calls_from: str | None = None
    """The `api-version` from which `parallel_tool_calls` goes, where an earlier one is why
    it does not (Azure OpenAI's before 2024-09-01-preview answer 400 to it): parallel calls
    stay on there, beside which `strict` is not enforced (`serial_strict_tools`), so a strict
    tool is said approximate, naming the version that turns them off."""
    stream_usage: bool = True
    json_schema_shape: Literal["openai", "raw"] = "openai"
    json_mode_streams: bool = True
    json_mode_word: bool = False
    """Whether the endpoint takes JSON mode only when the messages ask for JSON (OpenAI,
    Azure OpenAI, Groq and DeepSeek answer 400 to `json_object` without the word "JSON"
    in a message, and OpenRouter and Azure AI Foundry pass their models' refusal on;
    Mistral asks for it): a request whose messages do not gets a note that does, with a
    warning."""
    schema_streams: bool = True
    reasoning_effort: bool = True
    max_top_logprobs: int | None = None
    """The most alternatives per token the endpoint takes (`top_logprobs`), `None`: no limit
    known (OpenAI's 20); more are asked as that many, with a warning (Azure OpenAI's request
    schema caps them at 5 before api-version 2024-08-01-preview)."""
    applies_format: bool = True
    """Whether the endpoint applies a response format at all: Ollama's cloud (ollama.com)
    applies none, JSON mode included, which is sent and not relied on, with a warning."""
    max_stop_sequences: int | None = None
    """The most stop sequences the endpoint takes (OpenAI's and Groq's 4), `None`: no limit
    known; more are cut to the first ones, with a warning."""
    max_temperature: float | None = None
    """The highest `temperature` the endpoint takes (OpenAI's and Groq's 2: their APIs
    refuse a higher one), `None`: no limit known; a higher one is left out, with a warning."""
    max_tool_call_id: int | None = None
    """The longest tool-call id the endpoint takes (OpenAI's and Azure OpenAI's 40: a longer
    one, another provider's, is answered 400 `string_above_max_length`), `None`: no limit
    known; a longer id is sent as one made from it (`limited_ids`), its results with it."""
    needs_call_results: bool = False
    """Whether the endpoint refuses a tool call that gets no result in the tool messages right
    after its turn (on the Responses API, none anywhere in the input): OpenAI and Azure OpenAI
    answer 400 "An assistant message with 'tool_calls' must be followed by tool messages
    responding to each 'tool_call_id'" ("No tool output found for function call" on the
    Responses API), DeepSeek "insufficient tool messages following tool_calls message",
    Mistral "Not the same number of function calls and responses". Such a request is
    refused before sending, naming the calls; elsewhere (local servers, hosts of open
    models, routers) it goes as it is."""
    mistral_turns: bool = False
    """Whether the endpoint checks the conversation as Mistral's does (mistral_common's
    validator): an assistant turn has text or tool calls, a tool result is followed by
    another or by an assistant turn, and a last assistant turn is continued only with
    `prefix: true`; each is answered 400 otherwise."""
    reasoning_outside_completion: bool = False
    reasoning_back: str | None = None
    """The assistant-message field a turn's reasoning goes back in, `None`: not sent back.
    DeepSeek's thinking mode answers 400 to a tool-calling turn sent without its
    `reasoning_content` (and ignores it on other turns)."""
    think_tags: bool = False
    """Whether a reasoning model's `<think>…</think>` may open `content` (Fireworks'
    reasoning JSON mode, Together, vLLM without a reasoning parser): read as reasoning, so
    that the answer after it parses."""
    require_parameters: bool = False
    image_urls: bool = True
    """Whether an image may go by its URL (not a data URL): Ollama's `/v1` answers 400 "image
    URLs are not currently supported, please use base64 encoded data instead", so there one
    is left out, with a warning (refused under the error policy), as on Ollama's own API."""
    image_data_types: frozenset[str] | None = None
    """The image types an image's data URL may name there, `None`: any. Ollama's `/v1` reads
    a data URL by its exact start (`data:image/{jpeg,jpg,png,webp};base64,` or
    `data:;base64,`, else "invalid image input"), so another type goes as the latter, its
    bytes alone, for the server to tell from them."""
    file_parts: bool = False
    """Whether PDF documents go as `file` content parts (OpenAI, Azure OpenAI, OpenRouter)."""
    file_parts_from: str | None = None
    """The `api-version` from which they go, where an earlier one is why they do not (the
    refusal names it, so that the caller knows how to send them)."""
    choice_grammar: bool = False
    """Whether a `choice` response format goes as a grammar of its options (llama.cpp's
    `grammar` field); elsewhere Chat Completions has no plain-text choice output."""
    converter_measured: bool = True
    """Under the `LLAMA_CPP` dialect: whether the server's converter is llama.cpp's own, as
    measured (`local`, a llama.cpp server), so that its notes are the whole story; not where
    another server carries a build of it (Ollama), which says nothing of what it enforces."""
    response_schema_any_root: CapabilitySupport = CapabilitySupport.UNKNOWN
    """Whether a response format's schema may have a root that is not an object (grammar
    engines: yes; OpenAI's strict mode and JSON mode: no)."""


def pdfs_from(profile: WireProfile) -> str:
    """What a refusal of PDFs adds: the `api-version` that takes them, where one does."""
    version = profile.file_parts_from
    return "" if version is None else f" (they go from api-version {version} on)"
