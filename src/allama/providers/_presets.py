"""Where each OpenAI-compatible endpoint lives, how it authenticates, and how it speaks.

A preset names a base URL, an auth header, the environment variable for the key, the
capability table of its models and the wire profile (schema dialect and quirks). The facts
behind each are in the provider reference; the comments say which ones matter here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from allama.adapters.anthropic._profile import AnthropicProfile
from allama.adapters.gemini._profile import GeminiProfile
from allama.adapters.ollama._profile import OllamaProfile
from allama.adapters.openai_compat._profile import SchemaDialect, WireProfile
from allama.types import CapabilitySupport

__all__ = ["API_NAMES", "PRESETS", "PlaceForm", "Preset"]


@dataclass(frozen=True, slots=True)
class PlaceForm:
    """What a value filled into a preset's URL template (`Preset.account_url`) can be: a
    value that could be more (`evil.example#`, `acct/../x`) would send the calls, and the
    credential they carry, to another host or path."""

    pattern: str
    """A regular expression the whole value matches."""
    says: str
    """What the value is, for the error that names the argument or environment variable it
    came from (`location must be ...`); never the value, which may be a secret pasted in the
    wrong place."""


@dataclass(frozen=True, slots=True)
class Preset:
    """An endpoint: where it lives, how it authenticates, and which dialect it speaks.

    Everything that sets one endpoint apart from another of its dialect is data here, read
    by the one HTTP provider class: no provider decides anything by a preset's name.
    """

    name: str
    profile: Any
    """The dialect's profile: how this endpoint speaks it (a `WireProfile` for Chat
    Completions and the Responses API, an `AnthropicProfile` for Messages)."""
    base_url: str | None
    api_key_env: str | None
    key_required: bool = True
    auth: Literal["bearer", "api-key", "x-api-key", "x-goog-api-key"] = "bearer"
    """The header that carries the key: `authorization: Bearer`, or a header of that name."""
    more_key_envs: tuple[str, ...] = ()
    """Further environment variables for the key, read in order after `api_key_env`."""

    @property
    def key_envs(self) -> tuple[str | None, ...]:
        return (self.api_key_env, *self.more_key_envs)

    base_url_env: str | None = None
    host_env_port: int | None = None
    """`base_url_env` holds a server address as Ollama reads `OLLAMA_HOST` (`host:port`,
    `0.0.0.0:port`, a URL): without a scheme it is `http://` with this port."""
    headers: dict[str, str] = field(default_factory=dict)
    description: str = ""
    api_version: str | None = None
    """The `api-version` query parameter the endpoint needs (Azure); `api_version=` overrides."""
    api_version_env: str | None = None
    """The environment variable that overrides `api_version` when the argument is not given."""
    dialect: str = "openai_compat"
    """The adapter package under `allama.adapters` that speaks to this endpoint."""
    path_prefix: str = ""
    """Added to a base URL that does not already end with it (Anthropic's `/v1`: gateways are
    configured without it, as the vendor SDK does)."""
    deployment_path: str | None = None
    """A path with `{model}` used instead of the dialect's, for a resource endpoint that
    routes by deployment (Azure OpenAI)."""
    direct_suffix: str | None = None
    """A base URL ending with this is the dialect's own API, not a resource endpoint."""
    versioned_urls: str | None = None
    """Where `api-version` goes (Azure OpenAI's deployment URLs), as the refusal of a dated
    one on the direct API says: where set, none goes on the direct API (a base URL ending
    with `direct_suffix`: Azure's v1 API takes none)."""
    before_versions: tuple[tuple[str, Mapping[str, Any], Mapping[str, Any]], ...] = ()
    """What the endpoint cannot do on a dated `api-version` (`YYYY-MM-DD[-preview]`) sent
    before a given one: (the first version that can, changes to the profile, changes to
    every model family of the capability table, whatever the model)."""
    version_profiles: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    """Profile changes for one `api-version` exactly, where a later-dated version lacks what
    an earlier preview has (Azure's GA 2024-10-21 has no `max_completion_tokens`)."""
    account_url: str | None = None
    """The base URL built from an account id (`{account}`, from `account_id=` or
    `account_env`), or from a project and location (`{project}`, `{location}`)."""
    location_urls: Mapping[str, str] = field(default_factory=dict)
    """`account_url` for the locations served from a host of their own (Vertex AI's
    `global`, and its multi-regions `us` and `eu`), by location."""
    place_forms: Mapping[str, PlaceForm] = field(default_factory=dict)
    """What each value `account_url` and `location_urls` are filled with (`account`,
    `project`, `location`) can be, checked when the provider is built. Whatever the form,
    the URL filled must keep the template's host and path (the one place cannot add a
    host, a path segment, a query or a fragment)."""
    key_url: str | None = None
    """The base URL when `api_key=` is given instead of a bearer token (Vertex AI's express
    mode: one global host, no project or location, which are then refused)."""
    account_env: str | None = None
    project_envs: tuple[str, ...] = ()
    """Environment variables for `project=`, read in order."""
    location_envs: tuple[str, ...] = ()
    """Environment variables for `location=`, read in order."""
    default_location: str | None = None
    application_credentials: bool = False
    """Without a key or `access_token=`, a bearer token from Google's Application Default
    Credentials (the optional `google-auth` package), refreshed as it expires."""
    resource_host: str | None = None
    """A base URL on a host ending with this and with no path is a resource's bare URL..."""
    resource_path: str = ""
    """...whose API lives under this path."""
    refused_suffixes: tuple[tuple[str, str], ...] = ()
    """Base URLs ending with these belong to another preset: (suffix, what to do instead)."""
    refused_hosts: tuple[tuple[str, str], ...] = ()
    """Base URLs on these hosts (the host alone, in any case, whatever the path) belong to
    another preset: (host, whose it is and what to do instead), which the error says after
    `the base URL is on <host>, `."""
    refused_paths: tuple[tuple[str, str], ...] = ()
    """Base URLs whose path (with a `/` after it) matches one of these regular expressions
    name more than the resource (Azure's `/openai/deployments/<name>`, the portal's target
    URIs), which the path each call adds would double: (pattern, what to give instead)."""
    cut_suffixes: tuple[str, ...] = ()
    """Ends of a base URL that are the start of the path each call adds (Azure's
    `/openai`), written in by the caller: cut off rather than sent twice."""
    env_url_version: str | None = None
    """Added to a base URL from `base_url_env` whose path does not end with an API version
    (`/v1`, `/v1beta`): google-genai adds its version to `GOOGLE_GEMINI_BASE_URL`, so the
    variable names a host or a gateway's path without one."""
    url_profiles: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    """Profile changes for a base URL ending with a suffix (DeepSeek's `/beta`)."""
    missing_url_hint: str = "pass base_url="
    """What the error says when no base URL is known."""
    provider_class: str | None = None
    """`module:Class` of a provider that adds to `HttpProvider` what is not HTTP (starting
    the local engine); `None` for the HTTP provider itself."""
    batch_jobs: str | None = None
    """The provider's batch API (`allama.adapters._jobs._<name>`), where it has one that
    takes the requests of this preset's dialect: jobs at about half the price."""
    apis: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """The endpoint's other APIs, by the name `allama.provider(..., api=name)` gives them:
    the changes to this preset that speak that API instead (its `dialect`, and where its
    URL differs). The preset's own API is `api`."""

    @property
    def api(self) -> str:
        """The name `api=` gives the API this preset speaks: `chat` for Chat Completions,
        `responses` for the Responses API, else the dialect's own name."""
        return API_NAMES.get(self.dialect, self.dialect)


API_NAMES: dict[str, str] = {"openai_compat": "chat", "openai_responses": "responses"}
"""The `api=` name of a dialect, where it is not the dialect's own name."""

# The Responses API (`POST {base}/responses`), where the endpoint serves it beside Chat
# Completions. Azure serves it on the v1 API only: `{endpoint}/openai/v1/responses`, with
# no deployment path and no `api-version`.
_RESPONSES: dict[str, Any] = {"dialect": "openai_responses"}
_AZURE_RESPONSES: dict[str, Any] = {
    **_RESPONSES,
    "deployment_path": None,
    "path_prefix": "/openai/v1",
    "api_version": None,
    "api_version_env": None,
}


_PRESETS: tuple[Preset, ...] = (
    Preset(
        "openai",
        WireProfile(
            "openai",
            "OpenAI",
            max_stop_sequences=4,
            max_tool_call_id=40,
            max_temperature=2.0,
            json_mode_word=True,
            serial_strict_tools=True,
            file_parts=True,
            response_schema_any_root=CapabilitySupport.UNSUPPORTED,
            needs_call_results=True,
        ),
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
        base_url_env="OPENAI_BASE_URL",
        description="OpenAI Chat Completions",
        batch_jobs="openai",
        apis={"responses": _RESPONSES},
    ),
    Preset(
        # Deployment URLs with `api-version`, or the v1 API when base_url ends in /openai/v1.
        # Azure documents the 2024 strict subset and needs serial calls for strict tools.
        "azure-openai",
        WireProfile(
            "azure-openai",
            "Azure OpenAI",
            max_stop_sequences=4,
            max_tool_call_id=40,
            max_temperature=2.0,
            json_mode_word=True,
            strict_profile="azure_legacy",
            file_parts=True,
            response_schema_any_root=CapabilitySupport.UNSUPPORTED,
            serial_strict_tools=True,
            needs_call_results=True,
        ),
        None,
        "AZURE_OPENAI_API_KEY",
        auth="api-key",
        base_url_env="AZURE_OPENAI_ENDPOINT",
        description="Azure OpenAI deployments",
        # The GA version with structured outputs; reasoning models (o-series, GPT-5) need a
        # later one, which Azure's 400 names (the error says to pass it), or the v1 API.
        api_version="2024-10-21",
        api_version_env="OPENAI_API_VERSION",
        deployment_path="/openai/deployments/{model}/chat/completions",
        direct_suffix="/openai/v1",
        versioned_urls="deployment URLs: Chat Completions with the resource URL alone as the "
        "endpoint",
        # JSON Schema output and strict tools came with 2024-08-01-preview: an earlier
        # version answers 400 to `json_schema` ("enabled only for api versions
        # 2024-08-01-preview and later") whatever the model, so only `json_object` goes, and
        # nothing says it enforces `strict` on tools, so tools go without it.
        before_versions=(
            # `parallel_tool_calls` came with 2024-09-01-preview: the request schemas of the GA
            # 2024-06-01 and of the 2024-07-01 and 2024-08-01 previews have none, and an
            # earlier version answers 400 "Unrecognized request argument supplied:
            # parallel_tool_calls" (Azure/azure-rest-api-specs#29545, on 2024-05-01-preview),
            # so none is sent, `false` for strict tools included: a strict tool is then
            # approximate (parallel calls stay on, beside which Azure does not enforce
            # `strict`). First here, so that the earlier versions' name below is the one said.
            (
                "2024-09-01-preview",
                {
                    "display_name": "Azure OpenAI before api-version 2024-09-01-preview",
                    "parallel_tool_calls_from": "2024-09-01-preview",
                },
                {"parallel_tools": "unsupported"},
            ),
            # Their `top_logprobs` is 0 to 5 up to 2024-07-01-preview (20 from 2024-08-01-
            # preview on, the GA 2024-10-21 included): more are asked as 5.
            (
                "2024-08-01-preview",
                {
                    "display_name": "Azure OpenAI before api-version 2024-08-01-preview",
                    "tool_dialect": SchemaDialect.NOT_HONOURED,
                    "max_top_logprobs": 5,
                },
                {"structured": "json_object"},
            ),
            # `max_completion_tokens` and `stream_options` came with 2024-09-01-preview: an
            # earlier version answers 400 ("Unrecognized request argument supplied"), so the
            # limit goes as `max_tokens`, and a stream comes without its usage.
            # A reasoning model refuses `max_tokens` whatever the version: it is sent the
            # field it takes, which such a version may refuse in turn (a later one takes it).
            (
                "2024-09-01-preview",
                {
                    "token_field": "max_tokens",
                    "reasoning_token_field": "max_completion_tokens",
                    "stream_usage": False,
                },
                {},
            ),
            # The `developer` role came with 2024-12-01-preview: Azure's reasoning-model guide
            # (how-to/reasoning, January 2025) gives developer messages for o1 2024-12-17 on
            # that version, and none on 2024-09-01-preview or 2024-10-01-preview; an earlier
            # version (the GA 2024-10-21 included, whose spec's roles are system, user,
            # assistant, tool and function) answers 400 "Invalid value: 'developer'.
            # Supported values are: 'system', 'assistant', 'user', 'function', and 'tool'"
            # (run-llama/llama_index#17748), so a developer message goes as `system`. The GA
            # spec's user content parts are `text` and `image_url` alone (a `file` part is
            # answered 400 the same way): a PDF is left out, with a warning, on every version
            # before that one too (when `file` parts came later is not known here; from it
            # they go, as on OpenAI).
            (
                "2024-12-01-preview",
                {
                    "developer_role": False,
                    "file_parts": False,
                    "file_parts_from": "2024-12-01-preview",
                },
                {},
            ),
        ),
        # The GA version's request schema has `max_tokens` alone (its `stream_options` it
        # has): the previews after 2024-09-01 have both.
        version_profiles=(
            (
                "2024-10-21",
                {"token_field": "max_tokens", "reasoning_token_field": "max_completion_tokens"},
            ),
        ),
        refused_suffixes=(
            (
                "/models",
                "an endpoint ending in /models is Azure AI Foundry's model-inference API, "
                "which serves models of many families: use allama.provider('azure-foundry', "
                "endpoint=...)",
            ),
        ),
        refused_paths=(
            (
                # Past `/openai`, only the v1 API's `/v1`: the portal's target URIs name a
                # deployment or an operation (`/openai/responses`, `/openai/v1/chat/...`).
                r"(?i)/openai/(?!(?:v1/)?$)",
                "an Azure OpenAI endpoint that names a deployment or an operation (.../openai/"
                "deployments/<name>, .../openai/responses, .../openai/v1/chat/completions, as "
                "the portal's target URIs do) would have each call's path added to it twice: "
                "give the resource URL alone (https://<resource>.openai.azure.com), or it with "
                "/openai/v1 for the v1 API, and the deployment's name as the request's model "
                "(an api-version written in it goes as api_version=)",
            ),
        ),
        cut_suffixes=("/openai",),
        missing_url_hint="pass endpoint= or set AZURE_OPENAI_ENDPOINT",
        apis={"responses": _AZURE_RESPONSES},
    ),
    Preset(
        # Azure AI Foundry's model-inference endpoint, https://<resource>.services.ai.azure.com
        # /models: one URL for every model deployed in the resource, picked by `model` in the
        # body, `api-version=2024-05-01-preview` (the Azure AI Inference SDK's), the key in an
        # `api-key` header (or an Entra ID bearer token in `headers=`). It serves many model
        # families (OpenAI, Grok, Llama, Mistral, DeepSeek, Phi), whose schema support Azure
        # does not publish per model, so schemas pass through unchecked. The resource's v1 API
        # (https://<resource>.services.ai.azure.com/openai/v1) serves them too, but is OpenAI's
        # API, as Azure OpenAI's v1 is (no dated api-version; stream usage, reasoning efforts
        # and log-probabilities taken): `azure-openai` speaks it. The model-inference API
        # rejects parameters outside its request schema (ChatCompletionsOptions: no
        # `stream_options`, `reasoning_effort`, `parallel_tool_calls`, `logprobs` or
        # `top_logprobs`; the last three its capability table refuses), so none is sent.
        "azure-foundry",
        WireProfile(
            "azure-foundry",
            "Azure AI Foundry",
            response_dialect=SchemaDialect.PASSTHROUGH,
            tool_dialect=SchemaDialect.PASSTHROUGH,
            token_field="max_tokens",
            json_mode_word=True,
            developer_role=False,
            stream_usage=False,
            reasoning_effort=False,
        ),
        None,
        "AZURE_INFERENCE_CREDENTIAL",
        auth="api-key",
        base_url_env="AZURE_INFERENCE_ENDPOINT",
        description="Azure AI Foundry models (the model-inference endpoint, .../models)",
        api_version="2024-05-01-preview",
        resource_host=".services.ai.azure.com",
        resource_path="/models",
        refused_suffixes=(
            (
                "/openai/v1",
                "an endpoint ending in /openai/v1 is the resource's OpenAI v1 API, which takes "
                "what the model-inference API refuses (stream usage, reasoning efforts, "
                "log-probabilities): use allama.provider('azure-openai', endpoint=...)",
            ),
        ),
        missing_url_hint="pass endpoint= or set AZURE_INFERENCE_ENDPOINT",
    ),
    Preset(
        "groq",
        # Structured outputs do not stream on Groq. Its `reasoning_format` is `raw` by
        # default where neither JSON mode nor tools are on: Qwen3's `<think>` block then
        # opens `content`.
        WireProfile(
            "groq",
            "Groq",
            strict_profile="groq",
            max_stop_sequences=4,
            max_temperature=2.0,
            json_mode_word=True,
            schema_streams=False,
            response_schema_any_root=CapabilitySupport.UNSUPPORTED,
            think_tags=True,
        ),
        "https://api.groq.com/openai/v1",
        "GROQ_API_KEY",
        description="Groq",
    ),
    Preset(
        # Reasoning tokens are counted outside `completion_tokens` (inside `total_tokens`).
        "xai",
        WireProfile(
            "xai",
            "xAI",
            strict_profile="xai",
            token_field="max_tokens",
            reasoning_outside_completion=True,
            response_schema_any_root=CapabilitySupport.UNSUPPORTED,
        ),
        "https://api.x.ai/v1",
        "XAI_API_KEY",
        description="xAI Grok",
        apis={"responses": _RESPONSES},
    ),
    Preset(
        # `random_seed`, `any` for a required tool, no developer role, 422 on unknown fields;
        # the conversation is checked as mistral_common checks it.
        "mistral",
        WireProfile(
            "mistral",
            "Mistral",
            response_dialect=SchemaDialect.PASSTHROUGH,
            tool_dialect=SchemaDialect.PASSTHROUGH,
            token_field="max_tokens",
            json_mode_word=True,
            mistral_turns=True,
            needs_call_results=True,
            developer_role=False,
            seed_field="random_seed",
            required_tool_choice="any",
            stream_usage=False,
        ),
        "https://api.mistral.ai/v1",
        "MISTRAL_API_KEY",
        description="Mistral La Plateforme",
    ),
    Preset(
        # Routes to many upstreams; `provider.require_parameters` keeps a schema from being
        # dropped silently by an upstream without structured outputs. Usage always arrives.
        "openrouter",
        WireProfile(
            "openrouter",
            "OpenRouter",
            response_dialect=SchemaDialect.PASSTHROUGH,
            tool_dialect=SchemaDialect.PASSTHROUGH,
            token_field="max_tokens",
            json_mode_word=True,
            stream_usage=False,
            require_parameters=True,
            file_parts=True,
        ),
        "https://openrouter.ai/api/v1",
        "OPENROUTER_API_KEY",
        description="OpenRouter",
        apis={"responses": _RESPONSES},
    ),
    Preset(
        # Chat has json_object only; strict tools need the beta base URL. In thinking mode
        # a tool-calling turn goes back with its `reasoning_content`, or is refused.
        "deepseek",
        WireProfile(
            "deepseek",
            "DeepSeek",
            tool_dialect=SchemaDialect.NOT_HONOURED,
            token_field="max_tokens",
            json_mode_word=True,
            developer_role=False,
            reasoning_back="reasoning_content",
            response_schema_any_root=CapabilitySupport.UNSUPPORTED,
            needs_call_results=True,
        ),
        "https://api.deepseek.com",
        "DEEPSEEK_API_KEY",
        description="DeepSeek",
        # Strict tools are enforced only on the beta base URL, over a subset without string
        # formats, patterns or bounds (the one Azure's 2024 subset keeps, under its own name).
        url_profiles=(
            (
                "/beta",
                {"tool_dialect": SchemaDialect.OPENAI_STRICT, "strict_profile": "deepseek"},
            ),
        ),
    ),
    Preset(
        "together",
        WireProfile(
            "together",
            "Together",
            response_dialect=SchemaDialect.NOT_HONOURED,
            tool_dialect=SchemaDialect.NOT_HONOURED,
            token_field="max_tokens",
            developer_role=False,
            think_tags=True,
        ),
        "https://api.together.xyz/v1",
        "TOGETHER_API_KEY",
        description="Together AI",
    ),
    Preset(
        "fireworks",
        WireProfile(
            "fireworks",
            "Fireworks",
            response_dialect=SchemaDialect.FIREWORKS,
            tool_dialect=SchemaDialect.NOT_HONOURED,
            token_field="max_tokens",
            developer_role=False,
            think_tags=True,
        ),
        "https://api.fireworks.ai/inference/v1",
        "FIREWORKS_API_KEY",
        description="Fireworks AI",
    ),
    Preset(
        "deepinfra",
        WireProfile(
            "deepinfra",
            "DeepInfra",
            response_dialect=SchemaDialect.NOT_HONOURED,
            tool_dialect=SchemaDialect.NOT_HONOURED,
            token_field="max_tokens",
            developer_role=False,
            stream_usage=False,
        ),
        "https://api.deepinfra.com/v1/openai",
        "DEEPINFRA_API_KEY",
        description="DeepInfra",
    ),
    Preset(
        # `strict` is accepted and ignored; constrained decoding compiles the schema to a
        # grammar, as far as the backend's keyword support goes. vLLM hands roles to the
        # model's chat template, and common ones (Qwen's) refuse `developer` with a 400.
        "vllm",
        WireProfile(
            "vllm",
            "vLLM",
            response_dialect=SchemaDialect.GRAMMAR,
            tool_dialect=SchemaDialect.GRAMMAR,
            developer_role=False,
            think_tags=True,
            response_schema_any_root=CapabilitySupport.SUPPORTED,
        ),
        "http://localhost:8000/v1",
        "VLLM_API_KEY",
        key_required=False,
        base_url_env="VLLM_BASE_URL",
        description="a vLLM server",
    ),
    Preset(
        # The schema sits directly under `json_schema`; JSON mode does not stream. Tools and
        # a named `tool_choice` go as OpenAI's: unconfirmed on this endpoint, so its table
        # answers them unknown, not unsupported.
        "workers-ai",
        WireProfile(
            "workers-ai",
            "Cloudflare Workers AI",
            response_dialect=SchemaDialect.NOT_HONOURED,
            tool_dialect=SchemaDialect.NOT_HONOURED,
            token_field="max_tokens",
            developer_role=False,
            json_schema_shape="raw",
            json_mode_streams=False,
            stream_usage=False,
        ),
        None,
        "CLOUDFLARE_API_TOKEN",
        description="Cloudflare Workers AI (OpenAI-compatible endpoint)",
        account_url="https://api.cloudflare.com/client/v4/accounts/{account}/ai/v1",
        account_env="CLOUDFLARE_ACCOUNT_ID",
        place_forms={
            "account": PlaceForm(
                r"[A-Za-z0-9-]+",
                "a Cloudflare account id: letters, digits and hyphens (32 hex digits, "
                "shown in the Cloudflare dashboard)",
            )
        },
        missing_url_hint="pass account_id= or set CLOUDFLARE_ACCOUNT_ID",
    ),
    Preset(
        # Ollama's /v1 drops tool_choice, parallel_tool_calls and max_completion_tokens
        # without a word; the schema becomes its native `format`, compiled by the build of
        # llama.cpp's converter Ollama carries, as on its own API (`name` and `strict`
        # ignored). An assistant message's `reasoning` is its thinking (Ollama's /v1
        # `Message.Reasoning`), which earlier turns' reasoning goes back in. An image goes
        # as a data URL alone: to an http(s) one its `decodeImageURL` answers 400 "image
        # URLs are not currently supported, please use base64 encoded data instead".
        "ollama-openai",
        WireProfile(
            "ollama-openai",
            "Ollama's OpenAI-compatible endpoint",
            response_dialect=SchemaDialect.LLAMA_CPP,
            converter_measured=False,
            tool_dialect=SchemaDialect.NOT_HONOURED,
            token_field="max_tokens",
            tool_choice=False,
            named_tool_choice=False,
            parallel_tool_calls=False,
            reasoning_back="reasoning",
            response_schema_any_root=CapabilitySupport.SUPPORTED,
            image_urls=False,
            image_data_types=frozenset({"image/jpeg", "image/jpg", "image/png", "image/webp"}),
        ),
        "http://localhost:11434/v1",
        "OLLAMA_API_KEY",
        key_required=False,
        description="Ollama's OpenAI-compatible endpoint",
        # Ollama's cloud called directly: its models are named without `-cloud`, and none
        # applies `format`, so the schema is sent and not enforced, nor JSON mode relied on.
        url_profiles=tuple(
            (
                f"{host}/v1",
                {"response_dialect": SchemaDialect.NOT_HONOURED, "applies_format": False},
            )
            for host in ("://ollama.com", ".ollama.com", "://ollama.com:443", ".ollama.com:443")
        ),
    ),
    Preset(
        # Any other endpoint: what its models can do is unknown, the schema goes unchecked.
        "openai-compatible",
        WireProfile(
            "openai-compatible",
            "the OpenAI-compatible endpoint",
            response_dialect=SchemaDialect.PASSTHROUGH,
            tool_dialect=SchemaDialect.PASSTHROUGH,
            token_field="max_tokens",
            developer_role=False,
            stream_usage=False,
        ),
        None,
        "OPENAI_COMPATIBLE_API_KEY",
        key_required=False,
        description="any OpenAI-compatible endpoint, given base_url",
        apis={"responses": _RESPONSES},
    ),
)


_ANTHROPIC_VERSION = {"anthropic-version": "2023-06-01"}
"""The API version every Messages request names (later versions refuse `temperature`)."""

_OWN_MODEL_HOSTS = (
    # Hosts that serve their own models in the Messages dialect, each documented as the
    # `ANTHROPIC_BASE_URL` to export for Claude Code: DeepSeek's
    # https://api.deepseek.com/anthropic, Moonshot's https://api.moonshot.ai/anthropic
    # (https://api.moonshot.cn/anthropic in China), Z.ai's https://api.z.ai/api/anthropic
    # (Zhipu's https://open.bigmodel.cn/api/anthropic), MiniMax's
    # https://api.minimax.io/anthropic (https://api.minimaxi.com/anthropic). Their models
    # are not Claude, and they do not apply all Anthropic enforces (DeepSeek: "output_config:
    # Only effort is supported"), so `anthropic`'s verified profile, Claude's capability table
    # and Anthropic's prices would all be wrong there.
    ("api.deepseek.com", "DeepSeek"),
    ("api.moonshot.ai", "Moonshot"),
    ("api.moonshot.cn", "Moonshot"),
    ("api.z.ai", "Z.ai"),
    ("open.bigmodel.cn", "Zhipu"),
    ("api.minimax.io", "MiniMax"),
    ("api.minimaxi.com", "MiniMax"),
)

# The Messages dialect. Hosts are configured as the vendor SDK does, without `/v1`.
_ANTHROPIC_PRESETS: tuple[Preset, ...] = (
    Preset(
        "anthropic",
        AnthropicProfile("anthropic", "Anthropic"),
        "https://api.anthropic.com",
        "ANTHROPIC_API_KEY",
        auth="x-api-key",
        base_url_env="ANTHROPIC_BASE_URL",
        headers=_ANTHROPIC_VERSION,
        description="Anthropic Messages (also through a gateway in front of it, given base_url)",
        dialect="anthropic",
        batch_jobs="anthropic",
        path_prefix="/v1",
        refused_hosts=tuple(
            (
                host,
                f"{vendor}'s host, which serves {vendor}'s own models in Anthropic's dialect, "
                "not Claude: use allama.provider('anthropic-compatible', base_url=...)",
            )
            for host, vendor in _OWN_MODEL_HOSTS
        ),
    ),
    Preset(
        # Claude deployed in Microsoft Foundry: https://<resource>.services.ai.azure.com
        # /anthropic, the key in `x-api-key` (or an Entra ID bearer token in `headers=`),
        # the deployment name as the model.
        "azure-anthropic",
        AnthropicProfile("azure-anthropic", "Claude in Microsoft Foundry"),
        None,
        "ANTHROPIC_FOUNDRY_API_KEY",
        auth="x-api-key",
        base_url_env="ANTHROPIC_FOUNDRY_BASE_URL",
        headers=_ANTHROPIC_VERSION,
        description="Claude in Microsoft Foundry (https://<resource>.services.ai.azure.com/anthropic)",
        dialect="anthropic",
        path_prefix="/v1",
        account_url="https://{account}.services.ai.azure.com/anthropic",
        account_env="ANTHROPIC_FOUNDRY_RESOURCE",
        place_forms={
            # The resource's subdomain: one label of the host.
            "account": PlaceForm(
                r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?",
                "the Azure resource's name: letters, digits and hyphens, the <resource> of "
                "https://<resource>.services.ai.azure.com (or pass endpoint= with that URL)",
            )
        },
        resource_host=".services.ai.azure.com",
        resource_path="/anthropic",
        missing_url_hint="pass endpoint=, or account_id= with the resource name, or set "
        "ANTHROPIC_FOUNDRY_BASE_URL",
    ),
    Preset(
        # Any other host of the dialect, serving models of its own: what they enforce is
        # not known, so schemas are at best approximate.
        "anthropic-compatible",
        AnthropicProfile(
            "anthropic-compatible", "the Anthropic-compatible endpoint", verified=False
        ),
        None,
        "ANTHROPIC_COMPATIBLE_API_KEY",
        key_required=False,
        auth="x-api-key",
        headers=_ANTHROPIC_VERSION,
        description="any endpoint that speaks Anthropic Messages, given base_url",
        dialect="anthropic",
        path_prefix="/v1",
    ),
)


_VERTEX_PATH = "/v1/projects/{project}/locations/{location}/publishers/google"
"""The path of Vertex AI's Gemini models in a project and location."""

_GOOGLE_ID = r"[a-z](?:[a-z0-9-]*[a-z0-9])?"
_GOOGLE_FORMS = {
    # Google's locations: `us-central1`, `europe-west4`, `global`, the multi-regions `us`
    # and `eu`; part of the host (`{location}-aiplatform.googleapis.com`) as of the path.
    "location": PlaceForm(
        _GOOGLE_ID,
        "a Google Cloud location: lowercase letters, digits and hyphens, such as "
        "us-central1, europe-west4, us or global",
    ),
    # A project id (lowercase letters, digits and hyphens, starting with a letter and not
    # ending with a hyphen; its 6 to 30 characters are left to Google), a project number,
    # or a legacy domain-scoped id (`example.com:my-project`): in the path alone.
    "project": PlaceForm(
        rf"{_GOOGLE_ID}|[0-9]+|[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?:{_GOOGLE_ID}",
        "a Google Cloud project id or number: lowercase letters, digits and hyphens, such "
        "as my-project or 123456789012 (a domain-scoped id as example.com:my-project)",
    ),
}
"""What Vertex AI's project and location can be."""

# The Gemini dialect, on the Gemini API and on Vertex AI.
_GEMINI_PRESETS: tuple[Preset, ...] = (
    Preset(
        "gemini",
        GeminiProfile("gemini", "Gemini"),
        "https://generativelanguage.googleapis.com/v1beta",
        "GEMINI_API_KEY",
        more_key_envs=("GOOGLE_API_KEY",),
        auth="x-goog-api-key",
        base_url_env="GOOGLE_GEMINI_BASE_URL",
        env_url_version="/v1beta",
        description="the Gemini API (generateContent)",
        dialect="gemini",
        batch_jobs="gemini",
    ),
    Preset(
        # https://{location}-aiplatform.googleapis.com/v1/projects/{project}/locations/
        # {location}/publishers/google (`aiplatform.googleapis.com` for `global`, and
        # `aiplatform.{location}.rep.googleapis.com` for the multi-regions `us` and `eu`); a
        # bearer token from `access_token=` or Application Default Credentials. An express
        # mode key (`api_key=`) goes as `x-goog-api-key` to the global host, naming no
        # project or location, as google-genai sends it.
        "vertex-gemini",
        GeminiProfile("vertex-gemini", "Gemini on Vertex AI"),
        None,
        None,
        auth="x-goog-api-key",
        description="Gemini on Vertex AI (project and location, OAuth bearer token)",
        dialect="gemini",
        account_url=f"https://{{location}}-aiplatform.googleapis.com{_VERTEX_PATH}",
        location_urls={
            "global": f"https://aiplatform.googleapis.com{_VERTEX_PATH}",
            "us": f"https://aiplatform.us.rep.googleapis.com{_VERTEX_PATH}",
            "eu": f"https://aiplatform.eu.rep.googleapis.com{_VERTEX_PATH}",
        },
        key_url="https://aiplatform.googleapis.com/v1/publishers/google",
        project_envs=("GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT"),
        location_envs=("GOOGLE_CLOUD_LOCATION", "GOOGLE_CLOUD_REGION", "CLOUD_ML_REGION"),
        default_location="global",
        place_forms=_GOOGLE_FORMS,
        application_credentials=True,
        missing_url_hint="pass project= (and location=), or set GOOGLE_CLOUD_PROJECT; or "
        "api_key= with an express mode key",
    ),
)


# llama.cpp's server (`allama.local`): the schema goes through llama.cpp's own converter,
# whose keyword support was measured against the real server. An object-form `tool_choice`
# is ignored there, so a named tool is forced as `required` with that tool alone
# (`allama.local.LlamaCppProvider`).
def _llama_cpp_profile(name: str, display_name: str) -> WireProfile:
    return WireProfile(
        name,
        display_name,
        response_dialect=SchemaDialect.LLAMA_CPP,
        tool_dialect=SchemaDialect.LLAMA_CPP,
        token_field="max_tokens",
        seed_32_bits=True,
        developer_role=False,
        reasoning_effort=False,
        choice_grammar=True,
        response_schema_any_root=CapabilitySupport.SUPPORTED,
    )


# llama.cpp: its own error shapes and tool-choice handling; `local` starts the engine.
_LLAMA_CPP_PROVIDER = "allama.local._provider:LlamaCppProvider"

_LOCAL_PRESETS: tuple[Preset, ...] = (
    Preset(
        # Started in-process on 127.0.0.1 by `allama.provider("local")`; no key, no base URL.
        "local",
        _llama_cpp_profile("local", "the local llama.cpp engine"),
        None,
        None,
        key_required=False,
        description="llama.cpp started in-process (pip install 'allama[local]')",
        provider_class=_LLAMA_CPP_PROVIDER,
    ),
    Preset(
        "llama-cpp",
        _llama_cpp_profile("llama-cpp", "llama.cpp's server"),
        "http://127.0.0.1:8080/v1",
        "LLAMA_API_KEY",
        key_required=False,
        base_url_env="LLAMA_CPP_BASE_URL",
        description="a llama.cpp server you run (llama-server), given base_url",
        provider_class=_LLAMA_CPP_PROVIDER,
    ),
)

# Ollama's native API. `OLLAMA_HOST` is read as Ollama's own tools read it; a key (Ollama's
# cloud, or a proxy in front of a server) goes as a bearer token when there is one.
_OLLAMA_PRESETS: tuple[Preset, ...] = (
    Preset(
        "ollama",
        OllamaProfile("ollama", "Ollama"),
        "http://localhost:11434",
        "OLLAMA_API_KEY",
        key_required=False,
        base_url_env="OLLAMA_HOST",
        host_env_port=11434,
        description="Ollama's native API (/api/chat)",
        dialect="ollama",
        refused_suffixes=(
            (
                "/v1",
                "a base URL ending in /v1 is Ollama's OpenAI-compatible endpoint: use "
                "allama.provider('ollama-openai', base_url=...), or leave /v1 out",
            ),
        ),
        # Ollama's documentation writes its cloud's base URL `https://ollama.com/api`: the
        # path each call adds starts there.
        cut_suffixes=("/api/chat", "/api"),
        # Ollama's cloud API itself (the host ollama.com or one under it): its models are
        # named without `-cloud`, and none applies `format`.
        url_profiles=(
            ("://ollama.com", {"cloud": True}),
            (".ollama.com", {"cloud": True}),
            ("://ollama.com:443", {"cloud": True}),
            (".ollama.com:443", {"cloud": True}),
        ),
    ),
)

PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        *_PRESETS,
        *_ANTHROPIC_PRESETS,
        *_GEMINI_PRESETS,
        *_OLLAMA_PRESETS,
        *_LOCAL_PRESETS,
    )
}
