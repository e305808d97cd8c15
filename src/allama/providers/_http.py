"""One HTTP provider for every dialect: a preset, its dialect's adapter and a transport.

Every decision (encoding, warnings, refusals, decoding, error mapping, secret scrubbing)
lives in plain methods that both flavours call, so `chat` and `achat` cannot drift; only
the lines that touch the network differ. What sets one endpoint apart (its URL rules, auth
header, query parameters, profile changes) is data on its preset; what sets one dialect
apart is its adapter (`allama.adapters._adapter.Adapter`).
"""

from __future__ import annotations

import collections
import functools
import importlib
import inspect
import itertools
import json
import os
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn, Self, TypedDict, cast, overload

import allama.types as vocabulary
from allama._degradations import Degradations
from allama._lazy import deferred_module
from allama._not_a_request import not_a_request
from allama._tokens import guessed_input_tokens
from allama.adapters._adapter import Adapter, StreamDecoder, load_adapter
from allama.adapters._http import (
    SECRET_HEADERS,
    HttpRequest,
    HttpResponse,
    is_secret_header,
    read_json,
    says_status_alone,
)
from allama.errors import (
    QUOTA_TOKENS_PER_MINUTE_KEY,
    SCHEMAS_TOGETHER_KEY,
    UNNAMED_PARAMETERS_KEY,
    AuthenticationError,
    Error,
    ErrorContext,
    IncompleteStreamError,
    InvalidRequestError,
    NotFoundError,
    RateLimitedError,
    UnsupportedError,
)
from allama.providers._credentials import RefreshingToken
from allama.providers._hosts import host_url
from allama.providers._options import (
    check_headers,
    check_key,
    check_text,
    check_url,
    key_fault,
)
from allama.providers._presets import PRESETS, Preset
from allama.transport import Transport, check_deadline, check_timeout, mask_query_in_log
from allama.types import CapabilitySupport, ChatCapability, RequestField

# Building a provider loads no pydantic model: what a call needs (the vocabulary's models,
# the dialect's encoder and decoders through `wire`, the stream classes) is loaded by the
# first call, and then read as module attributes.
if TYPE_CHECKING:
    import httpx2

    from allama import _tracing
    from allama import stream as streams
    from allama.stream import AsyncChatStream, ChatStream
    from allama.types import ChatRequest, ChatResponse, ChatValidation, StreamEvent, Warning
else:
    streams = deferred_module("allama.stream", globals(), "streams")
    # Spans load with the first call (`opentelemetry` itself only if a tracer is set).
    _tracing = deferred_module("allama._tracing", globals(), "_tracing")
    # httpx2 loads with the first request (`allama.transport`), or to read a URL given here.
    httpx2 = deferred_module("httpx2", globals(), "httpx2")

__all__ = ["HttpOptions", "HttpProvider", "OpenAICompatibleProvider"]

_REDACTED = "<redacted>"
_STANDS_IN_FOR_KEY = SECRET_HEADERS | {"ocp-apim-subscription-key"}
"""The caller's headers that stand in for the provider's key (`_brings_own_auth`): those a
provider's key goes in, and Azure API Management's subscription key, which a gateway in
front of Azure OpenAI takes instead (it holds the backend's credential itself). Not every
gateway's header (`cf-aig-authorization`, `Helicone-Auth`, `x-portkey-api-key`): those
gateways pass the provider's key on, and are sent it beside their own."""
_PLAIN_PARAMS = frozenset(
    {"api-version", "api_version", "apiversion", "version", "v", "alt", "format", "region"}
    | {"location", "project", "deployment", "stream", "beta"}
)
"""Query parameters written into a base URL whose values are no credential, and are words
an error may well say: every other one's value is taken for one (`?key=`, `?code=`, a
signature), and cut out of what a provider echoes."""


def _url_forms(value: str) -> set[str]:
    """`value` as it is and as a URL may write it (escaped either way, its hex in either
    case), each also with its `/` escaped as JSON may: a provider or a gateway echoing the
    URL it was asked for, or a key it took from one."""
    from urllib.parse import quote, quote_plus

    forms = {value, quote_plus(value), quote(value), quote(value, safe="")}
    forms |= {quote(value, safe="!~*'()"), quote_plus(value).replace("~", "%7E")}  # JS, Java
    forms |= {re.sub(r"%[0-9A-F]{2}", lambda hit: hit[0].lower(), form) for form in forms}
    return forms | {form.replace("/", "\\/") for form in forms}


def _written(name: str, value: str) -> set[str]:
    """A credential of the base URL's query as a provider may echo it: in a URL (escaped
    either way, its hex in either case), as JSON writes it, or as it is; alone where it is
    long enough to be told from ordinary words."""
    forms = _url_forms(value)
    found = {f"{name}={form}" for form in forms}
    found |= {form for form in forms if len(form) >= _SHORTEST_REDACTED}
    return found


def _json_written(secret: str) -> set[str]:
    """`secret` as a JSON string may write it (quotes left out): with `/` escaped or not,
    non-ASCII escaped or not (Python's `json.dumps` escapes the one, Lua's cjson the
    other)."""
    ascii_ = json.dumps(secret)[1:-1]
    raw = json.dumps(secret, ensure_ascii=False)[1:-1]
    return {form for text in (ascii_, raw) for form in (text, text.replace("/", "\\/"))}


@overload
def redacted(text: str, secrets: Sequence[str]) -> str: ...
@overload
def redacted(text: None, secrets: Sequence[str]) -> None: ...
@overload
def redacted(text: str | None, secrets: Sequence[str]) -> str | None: ...
def redacted(text: str | None, secrets: Sequence[str]) -> str | None:
    """`text` the provider wrote with each of `secrets` (`HttpProvider._secrets`, longest
    first) replaced by `<redacted>`."""
    if text is None:
        return None
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, _REDACTED)
    return text


_SHORTEST_REDACTED = 6
"""An API key, a base URL's password or a credential header's value (`Authorization`,
`api-key`, or one taken for a credential by a word of its name alone) shorter than this is
not looked for in what a provider echoes: it cannot be told from ordinary words (`e` is in
every message; a dummy key for a local server, `test` or `k`, would cut `llama3:latest` and
`tokens` apart), and the Basic header a password makes, which a provider would echo, is
redacted whole. A real key is far longer."""
_TOKENS_KEPT = 16
"""How many of the latest tokens `access_token=`'s function or Application Default
Credentials gave a provider looks for in what it scrubs with no call in hand (a batch job's
answers, `llama-cpp`'s `/props`). A call's own error looks for the token the call sent
(`_bearer`) whatever others were sent since; a token provider (Microsoft Entra ID's,
google-auth's) gives the same token for an hour or so, so a few cover the tokens a run of
calls sends together."""
_CAPABILITY_ANSWERS = 4096
"""How many (model, capability) answers a provider keeps before starting over."""


def _bare_host(url: str, host_suffix: str) -> bool:
    """Whether `url` is a bare resource URL (no path) on a host ending with `host_suffix`."""
    try:
        parsed = httpx2.URL(url)
    except httpx2.InvalidURL:
        return False
    return parsed.host.endswith(host_suffix) and parsed.path in ("", "/")


_FULL_STOPS = str.maketrans(dict.fromkeys("\u3002\uff0e\uff61", "."))
"""The full stops IDNA (UTS #46) reads as a dot between labels (`api.deepseek.com。`)."""


def _host_of(url: str) -> str | None:
    """The host of `url` as it resolves (no port, user or path), so that another spelling
    of a host is the same host: percent escapes decoded, compatibility forms folded
    (NFKC), IDNA's full stops read as dots, in lower case, without the root's trailing dot
    (`api.deepseek.com.`); `None` where it has none."""
    import unicodedata
    from urllib.parse import unquote

    try:
        host = httpx2.URL(url).host
    except httpx2.InvalidURL:
        return None
    host = unicodedata.normalize("NFKC", unquote(host)).translate(_FULL_STOPS)
    return host.lower().rstrip(".") or None


def _lower_origin(url: str) -> str:
    """`url` with its scheme and host in lower case, as they are read (`https://Ollama.com`
    is Ollama's cloud); the path keeps its case, which the server may read."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        return url
    host, slash, path = rest.partition("/")
    return f"{scheme.lower()}://{host.lower()}{slash}{path}"


def _env(name: str | None) -> str | None:
    """The environment variable `name` without the whitespace around it (a value pasted or
    read from a file often ends with a newline, which would go out in a header or a URL
    and fail there, as a network error), `None` when it is unset or blank. google-genai
    strips its key the same way."""
    value = os.environ.get(name) if name else None
    return (value.strip() or None) if value else None


def _first_env_named(names: tuple[str | None, ...]) -> tuple[str, str] | None:
    """The first of these environment variables that is set and not blank, with its name."""
    for name in names:
        if name and (value := _env(name)):
            return name, value
    return None


def _env_key(names: tuple[str | None, ...]) -> str | None:
    """The key from the first of these environment variables that holds one: one a header
    cannot carry (a line break inside, a character outside ASCII) is refused here, naming
    the variable, rather than failing every call as a network error."""
    found = _first_env_named(names)
    if found is None:
        return None
    name, value = found
    check_key(value, name=f"the {name} environment variable")
    return value


_TOO_OLD = re.compile(r"enabled only for api versions? (\S+?),? and later", re.IGNORECASE)
"""Azure's words for a model the `api-version` sent is too old for, and the version it
names."""

_VERSION_SEGMENT = re.compile(r"v\d+(?:(?:alpha|beta)\d*)?")
"""The last segment of a path that names an API version (`v1`, `v1beta`, `v1beta1`)."""

_OPENAI_DIALECTS = frozenset({"openai_compat", "openai_responses"})
_OPENAI_OPERATIONS = re.compile(r"(?i)(?:/(?:chat/)?completions|/responses)$")
_OPERATIONS = {
    "openai_compat": _OPENAI_OPERATIONS,
    "openai_responses": _OPENAI_OPERATIONS,
    "anthropic": re.compile(r"(?i)/messages$"),
    # A model's own path, with an operation (`:generateContent`, `:countTokens`) or not.
    "gemini": re.compile(r"(?i)/(?:tuned)?models(?P<model>/[^/]+)?$"),
}
"""The end of a base URL's path (in any case) that is an operation's path a call adds to the
base URL, by dialect: a URL pasted whole from the API's reference (`.../v1/chat/completions`,
`.../v1/messages`, `.../models/<model>:generateContent`, `.../models/<model>`) would be sent
with it twice, and answered `404 Not Found`. Ollama's cuts its own (`Preset.cut_suffixes`),
Azure's refuses its portal's (`Preset.refused_paths`)."""


def _url_path(url: str) -> str:
    """The path of `url` (without its query), `""` for a bare host."""
    rest = url.partition("://")[2]
    return f"/{rest.partition('/')[2]}" if "/" in rest else ""


def _without_suffix(url: str, suffix: str) -> str | None:
    """`url` without `suffix` at the end of its path, matched in any case (Azure's resource
    paths know none: `/OpenAI/V1` is `/openai/v1`), or `None` where its path does not end
    with it. The caller puts the suffix back as the preset writes it, if at all."""
    if _url_path(url).lower().endswith(suffix.lower()):
        return url[: -len(suffix)]
    return None


class _Placed(NamedTuple):
    """A value for a URL template's place (`{account}`, `{project}`, `{location}`)."""

    value: str
    where: str
    """The argument or environment variable it came from, as an error names it."""


def _placed(
    given: str | None, argument: str, envs: tuple[str | None, ...], default: str | None = None
) -> _Placed | None:
    """The argument, else the first of these environment variables set, else the preset's
    default, each with where it came from; `None` when none is."""
    if given:
        return _Placed(given, argument)
    found = _first_env_named(envs)
    if found is not None:
        return _Placed(found[1], f"the {found[0]} environment variable")
    return None if default is None else _Placed(default, argument)


_IN_A_LABEL = "[a-z0-9-]+"
"""What a place may put in a template's host: part of one label, never a `.`, `:`, `@`,
`/` or anything else that would name another host, port or user."""
_IN_A_SEGMENT = "[A-Za-z0-9._:~-]+"
"""What a place may put in a template's path: part of one segment, never a `/`, `?`, `#`,
`%`, whitespace or a control character."""


def _fill(preset: Preset, template: str, place: Mapping[str, _Placed | None]) -> str | None:
    """`template` with its `{account}`, `{project}` and `{location}` filled in; `None` when
    one it names is unknown. A value is refused, naming where it came from, unless it has
    its form (`Preset.place_forms`) and the URL filled keeps the template's host and path:
    `location='evil.example#'` would send the calls, and their credential, elsewhere."""
    import string
    from urllib.parse import urlsplit

    names = [name for _, name, _, _ in string.Formatter().parse(template) if name]
    values: dict[str, str] = {}
    wheres: dict[str, None] = {}  # (in order, once each)
    for name in names:
        found = place.get(name)
        if found is None:
            return None
        form = preset.place_forms.get(name)
        if form is not None and not re.fullmatch(form.pattern, found.value):
            raise ValueError(f"{found.where} must be {form.says}")
        values[name] = found.value
        wheres[found.where] = None
    filled = template.format_map(values)
    # The second guard, whatever the forms let through: the host and path as they are
    # read are the template's, with each place filled within one label or segment.
    scheme, _, rest = template.partition("://")
    netloc, slash, path = rest.partition("/")
    parts = urlsplit(filled)
    if (
        parts.scheme != scheme
        or not re.fullmatch(_place_pattern(netloc, _IN_A_LABEL), parts.netloc.lower())
        or not re.fullmatch(_place_pattern(f"{slash}{path}", _IN_A_SEGMENT), parts.path)
        or any(segment in (".", "..") for segment in parts.path.split("/"))
        or filled != f"{parts.scheme}://{parts.netloc}{parts.path}"
    ):
        shown = template.replace("{", "<").replace("}", ">")
        raise ValueError(
            f"{' and '.join(wheres)} cannot be filled into {preset.name}'s URL ({shown}): "
            "it would change the host or the path the calls, and their key, go to"
        )
    return filled


def _place_pattern(template: str, place: str) -> str:
    """A regular expression of `template` (part of a URL template, in lower case where it
    is a host) with each place standing for `place`."""
    import string

    return "".join(
        re.escape(literal) + (place if name is not None else "")
        for literal, name, _, _ in string.Formatter().parse(template)
    )


def _check_options(
    *,
    api_key: object,
    base_url: object,
    timeout: object,
    headers: object,
    transport: object,
    endpoint: object,
    deadline: object = None,
    api_version: object,
    account_id: object,
    project: object,
    location: object,
    access_token: object,
) -> None:
    """Fail at `allama.provider(...)`, naming the argument, rather than at the first call."""
    check_key(api_key)
    if not callable(access_token):  # (a function's token is checked as each call gets it)
        check_key(access_token, name="access_token")
    if endpoint is not None and base_url is not None:
        # Both name the address every call goes to: one would be dropped without a word.
        raise ValueError("pass endpoint= or base_url=, not both: both name the API's address")
    check_text("project", project)
    check_text("location", location)
    check_url("base_url", base_url)
    check_url("endpoint", endpoint)
    check_headers(headers)
    check_text("api_version", api_version)
    check_text("account_id", account_id)
    if transport is not None:
        if not isinstance(transport, Transport):
            raise TypeError(
                f"transport must be an allama Transport, got {type(transport).__name__}"
            )
        for name, value in (("timeout", timeout), ("deadline", deadline)):
            if value is not None:
                raise ValueError(
                    f"{name}= has no effect with transport=: pass it to the Transport instead"
                )
    else:
        check_timeout(timeout)
        check_deadline(deadline)


def _places(preset: Preset) -> frozenset[str]:
    """The places (`account`, `project`, `location`) of the preset's URL templates."""
    import string

    templates = (preset.account_url or "", *preset.location_urls.values())
    return frozenset(
        name
        for template in templates
        for _, name, _, _ in string.Formatter().parse(template)
        if name
    )


_READ_BY: Mapping[str, Callable[[Preset], bool]] = {
    # (Azure OpenAI's v1 API, api='responses', sends none by default, and still takes one.)
    "api_version": lambda preset: bool(
        preset.api_version or preset.api_version_env or preset.versioned_urls
    ),
    "account_id": lambda preset: "account" in _places(preset),
    "project": lambda preset: "project" in _places(preset),
    "location": lambda preset: "location" in _places(preset),
    "credentials": lambda preset: preset.application_credentials,
}
"""Which presets read each option of some presets alone, by their data; any other preset
refuses it, rather than drop it (`project=` on openai) or send it where no API asks for it
(`api_version=` as `?api-version=` on every call)."""

_INSTEAD: Mapping[tuple[str, str], str] = {
    ("credentials", ""): "; pass api_key=",
    ("api_version", ""): (
        "; an endpoint that needs one takes it written into base_url= (...?api-version=...)"
    ),
    ("project", "openai"): (
        "; an OpenAI project goes as a header: headers={'OpenAI-Project': ...}"
    ),
}
"""What to do instead, by option and preset (`""`: any preset)."""


def _refuse_unread(preset: Preset, given: Mapping[str, object]) -> None:
    """Refuse an option `preset` does not read (`_READ_BY`), naming the presets that do."""
    for option, reads in _READ_BY.items():
        if given.get(option) is None or reads(preset):
            continue
        having = [other.name for other in PRESETS.values() if reads(other)]
        owners = (
            f"{', '.join(having[:-1])} and {having[-1]} take"
            if len(having) > 1
            else f"{having[0]} takes"
        )
        instead = _INSTEAD.get((option, preset.name)) or _INSTEAD.get((option, ""), "")
        raise TypeError(f"{preset.name} takes no {option}= ({owners} it){instead}")


class HttpOptions(TypedDict, total=False):
    """`HttpProvider`'s keyword options, for code that gathers them before building one
    (a misspelt name is then a type error, not a failure at run time)."""

    api_key: str | None
    base_url: str | None
    timeout: float | httpx2.Timeout | None
    deadline: float | None
    headers: Mapping[str, str] | None
    transport: Transport | None
    capabilities: object | None
    endpoint: str | None
    api_version: str | None
    account_id: str | None
    project: str | None
    location: str | None
    access_token: str | Callable[[], str] | Callable[[], Awaitable[str]] | None
    credentials: object | None
    tracer_provider: object | None
    capture_content: bool | None


class HttpProvider:
    """A provider over HTTP: any preset, spoken through its dialect's adapter.

    Build one with `allama.provider(name, ...)`. The key comes from `api_key` or from the
    preset's environment variable, and never appears in a repr, an error or a log view.

    Options beyond the common ones: `endpoint` and `api_version` (Azure OpenAI, Azure AI
    Foundry), `account_id` (Workers AI, Claude in Foundry), `project` and `location`
    (Vertex AI), `access_token` (a bearer token instead of the key, or a function returning
    one, called for every request: a Microsoft Entra ID token expires within the hour, and
    a token provider hands out a fresh one), `credentials`
    (google-auth credentials for Vertex AI, refreshed as they expire), `headers` (extra
    request headers), `timeout` (the longest wait for the next bytes), `deadline` (seconds
    a whole call may take, from its start to the answer's last byte), `transport`,
    `capabilities` (a capability table of the
    preset's dialect, replacing its own), `tracer_provider` (an OpenTelemetry tracer
    provider for this provider's call spans instead of the global one) and
    `capture_content` (record prompts and outputs on those spans; by default as
    `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` says).
    """

    def __init__(
        self,
        preset: Preset,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | httpx2.Timeout | None = None,
        headers: Mapping[str, str] | None = None,
        transport: Transport | None = None,
        capabilities: object | None = None,
        deadline: float | None = None,
        endpoint: str | None = None,
        api_version: str | None = None,
        account_id: str | None = None,
        project: str | None = None,
        location: str | None = None,
        access_token: str | Callable[[], str] | Callable[[], Awaitable[str]] | None = None,
        credentials: object | None = None,
        tracer_provider: object | None = None,
        capture_content: bool | None = None,
    ) -> None:
        if isinstance(api_key, str) and not api_key.strip() and not preset.key_required:
            # A server that needs no key (`api_key=os.getenv("VLLM_API_KEY", "")` for a
            # local one): an empty key is none, as it was, not one to set.
            api_key = None
        _check_options(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            headers=headers,
            transport=transport,
            endpoint=endpoint,
            deadline=deadline,
            api_version=api_version,
            account_id=account_id,
            project=project,
            location=location,
            access_token=access_token,
        )
        _refuse_unread(
            preset,
            {
                "api_version": api_version,
                "account_id": account_id,
                "project": project,
                "location": location,
                "credentials": credentials,
            },
        )
        self._preset = preset
        if preset.key_url is not None and api_key is not None:
            # One key for the whole service (Vertex AI's express mode), as google-genai
            # refuses the two together.
            given = [
                name
                for name, value in (
                    ("project", project),
                    ("location", location),
                    ("access_token", access_token),
                    ("credentials", credentials),
                )
                if value is not None
            ]
            if given:
                raise ValueError(
                    f"{preset.name} takes api_key= (an express mode key, which names no "
                    f"project or location) or {'= and '.join(given)}=, not both"
                )
        if api_key is not None and access_token is not None:
            # Both would go as the call's credential, and one be dropped without a word.
            raise ValueError(
                "pass api_key= or access_token=, not both: each is the credential every call "
                "sends (access_token= a bearer token, such as Microsoft Entra ID's, instead of "
                "the key)"
            )
        self._access_token = access_token
        self._tokens_sent: collections.deque[str] = collections.deque(maxlen=_TOKENS_KEPT)
        """The latest tokens `access_token=`'s function or Application Default Credentials
        gave (`_TOKENS_KEPT`), cut out of what a provider echoes; read and written under
        `_tokens_lock`, as calls in several threads give and scrub at once."""
        self._tokens_lock = threading.Lock()
        place = {
            "account": _placed(account_id, "account_id", (preset.account_env,)),
            "project": _placed(project, "project", preset.project_envs),
            "location": _placed(
                location, "location", preset.location_envs, preset.default_location
            ),
        }
        self._base_url, self._deployments, url_query = self._resolve_base_url(
            preset, base_url, endpoint, place, keyed=api_key is not None
        )
        self._url_query = url_query
        # A user and password in the URL (`https://user:pw@gateway/v1`) are Basic auth, as
        # httpx2's client makes them: a header of the caller's, sent with every call.
        self._base_url, self._url_user, basic = _split_user(self._base_url)
        # The caller's `api_version=`, then one written into the base URL's query (which
        # goes with every call, as the rest of it does), the environment's, the preset's.
        version = (
            api_version
            or url_query.get("api-version")
            or _env(preset.api_version_env)
            or preset.api_version
        )
        direct = (
            self._base_url is not None
            and preset.direct_suffix is not None
            and _without_suffix(self._base_url, preset.direct_suffix) is not None
        )
        if preset.versioned_urls is not None and (self._base_url is None or direct):
            # Azure's v1 API takes no dated api-version: one the caller gave, as api_version=
            # or in the endpoint's query, is refused rather than dropped or sent to be refused
            # there; an undated one (`preview`, which the v1 API's preview took) goes as
            # given. The environment's and the preset's are for the other URLs alone (Azure
            # OpenAI's deployment URLs, Azure AI Foundry's model-inference API).
            asked = api_version or url_query.get("api-version")
            if asked is not None and self._base_url is not None and _DATED.fullmatch(asked):
                where = "api_version=" if api_version else "the api-version in the endpoint"
                responses = ", or api='responses'" if "responses" in preset.apis else ""
                raise ValueError(
                    f"{preset.name}'s v1 API (an endpoint ending in {preset.direct_suffix}"
                    f"{responses}) takes no dated api-version: leave out {where} (one goes "
                    f"only on {preset.versioned_urls})"
                )
            version = asked if self._base_url is not None else None
        self._profile = preset.profile
        matched = _lower_origin(self._base_url or "")
        for suffix, changes in preset.url_profiles:
            if matched.endswith(suffix):
                self._profile = replace(self._profile, **changes)
        families: dict[str, Any] = {}
        for first, changes, limits in preset.before_versions:
            if version is not None and _earlier(version, first):
                self._profile = replace(self._profile, **changes)
                families.update(limits)
        for exactly, changes in preset.version_profiles:
            if version == exactly:
                self._profile = replace(self._profile, **changes)
        make = load_adapter(preset.dialect)
        self._adapter: Adapter = make(preset.name, self._profile, capabilities)
        if families:
            # What the version cannot do, whatever the model: the table (the caller's, else
            # the preset's) answers and encodes by it.
            table: Any = capabilities
            if table is None:
                table = cast(Any, self._adapter).table
            self._adapter = make(preset.name, self._profile, table.limited(**families))
        # The adapter's answers depend on the model and the question alone; every extraction
        # asks several, so each is worked out once.
        self._capabilities: dict[tuple[str, ChatCapability], CapabilitySupport] = {}
        # A query written into the base URL (a gateway's `?key=`) goes with every call's
        # own parameters, not before the path each call adds.
        self._query = {**url_query, **({"api-version": version} if version else {})}
        self._extra_headers = {**preset.headers, **(headers or {})}
        self._url_auth = False
        """Whether `Authorization` is the base URL's user and password: the gateway's, sent
        to no other host a provider's answer names (`JobTarget.own_host_headers`)."""
        if basic is not None and not any(k.lower() == "authorization" for k in self._extra_headers):
            self._extra_headers["Authorization"] = basic
            self._url_auth = True
        # Credentials in the caller's own headers (an Entra ID bearer token for Azure, a
        # gateway's key, `_STANDS_IN_FOR_KEY`) or in the base URL's query (`?key=`, any
        # parameter but a plain one, as `_secrets` takes them) stand in for the API key: a
        # key from the environment is not sent beside them (Azure refuses both; a gateway
        # would get the provider's own key), nor said to be missing. A key given as
        # `api_key=` is the caller's word, and goes.
        self._brings_own_auth = any(
            key.lower() in _STANDS_IN_FOR_KEY for key in self._extra_headers
        ) or any(name.lower() not in _PLAIN_PARAMS for name in url_query)
        self._api_key = (
            api_key
            if api_key is not None
            else None
            if self._brings_own_auth or access_token
            else _env_key(preset.key_envs)
        )
        self._tokens: RefreshingToken | None = None
        if credentials is not None or (
            preset.application_credentials and not self._api_key and not access_token
        ):
            self._tokens = RefreshingToken(preset.name, credentials)
        if self._url_query and self._base_url is not None:
            mask_query_in_log(self._base_url)
        self._transport = transport or Transport(timeout=timeout, deadline=deadline)
        self._owns_transport = transport is None
        self._tracing = (
            None
            if tracer_provider is None and capture_content is None
            else _tracing.Tracing(tracer_provider, capture_content)
        )

    @staticmethod
    def _resolve_base_url(
        preset: Preset,
        base_url: str | None,
        endpoint: str | None,
        place: Mapping[str, _Placed | None],
        *,
        keyed: bool = False,
    ) -> tuple[str | None, bool, dict[str, str]]:
        url = base_url or endpoint
        from_env = False
        if url is None and preset.base_url_env and (url := _env(preset.base_url_env)):
            from_env = True
            if preset.host_env_port is not None:
                url = host_url(url, preset.host_env_port)
            check_url(f"the {preset.base_url_env} environment variable", url)
        if not url and keyed and preset.key_url is not None:
            url = preset.key_url
        if not url and preset.account_url is not None:
            located = place.get("location")
            template = preset.location_urls.get(located.value if located else "")
            url = _fill(preset, template or preset.account_url, place)
        url = url or preset.base_url
        if url is None:
            return None, False, {}
        url, query = _split_query(url)
        url = url.rstrip("/")
        version = _url_path(url).rpartition("/")[2]
        if from_env and preset.env_url_version and not _VERSION_SEGMENT.fullmatch(version):
            url = f"{url}{preset.env_url_version}"
        for part, instead in preset.refused_paths:
            if re.search(part, f"{_url_path(url)}/"):
                raise ValueError(instead)
        for suffix, instead in preset.refused_suffixes:
            if _without_suffix(url, suffix) is not None:  # (`/Models` is `/models`)
                raise ValueError(instead)
        if preset.refused_hosts:
            host = _host_of(url)
            for refused, instead in preset.refused_hosts:
                if host == refused:
                    source = f" (from {preset.base_url_env})" if from_env else ""
                    raise ValueError(f"the base URL{source} is on {refused}, {instead}")
        for suffix in preset.cut_suffixes:
            url = _without_suffix(url, suffix) or url
        _refuse_operation(preset, url, f"from {preset.base_url_env}" if from_env else None)
        if preset.resource_host is not None and _bare_host(url, preset.resource_host):
            url = f"{url}{preset.resource_path}"
        if preset.path_prefix:
            url = f"{_without_suffix(url, preset.path_prefix) or url}{preset.path_prefix}"
        # A resource endpoint gets deployment URLs; a base URL ending with the direct suffix
        # (Azure's `/openai/v1`) is the dialect's own API.
        direct = preset.direct_suffix and _without_suffix(url, preset.direct_suffix)
        if direct and preset.direct_suffix:
            url = f"{direct}{preset.direct_suffix}"
        deployments = preset.deployment_path is not None and not direct
        return url, deployments, query

    # Identity

    @property
    def name(self) -> str:
        return self._preset.name

    @property
    def issuer(self) -> str:
        """The endpoint this provider's signed or encrypted reasoning is marked with
        (`Reasoning.issuer`), and the only one it is sent back to: the preset's name on its
        own host (`anthropic`), with the host on any other (`azure-openai@east.openai.azure.com`,
        `openai-compatible@127.0.0.1:8000`), since a resource, account or host checks only
        what it issued. The host alone: no key, path or query, which may hold a secret."""
        return _issuer(self.name, self._base_url, self._preset.base_url)

    @property
    def preset(self) -> Preset:
        return self._preset

    @property
    def base_url(self) -> str | None:
        return self._base_url

    @property
    def base_url_as_given(self) -> str | None:
        """The base URL with the query written into it (a gateway's `?key=`), which
        `base_url` leaves out: what makes the same provider again (a ledger's job record,
        read by `allama batch status` and `cancel`). It may hold a credential."""
        if self._base_url is None or not (self._url_query or self._url_user):
            return self._base_url
        from urllib.parse import urlencode

        url = self._base_url
        if self._url_user:
            scheme, _, rest = url.partition("://")
            url = f"{scheme}://{self._url_user}@{rest}"
        return f"{url}?{urlencode(self._url_query)}" if self._url_query else url

    def missing_url(self) -> str | None:
        """Why no call can be sent (no base URL, and how to give one), or `None`: said once
        by a run of many calls, rather than as each call's failure."""
        if self._base_url is not None:
            return None
        return f"{self.name} has no base URL: {self._preset.missing_url_hint}"

    @property
    def adapter(self) -> Adapter:
        """The dialect's adapter: encoding, decoding and capability answers, sans I/O."""
        return self._adapter

    def __repr__(self) -> str:
        key = "<set>" if self._api_key or self._access_token else "<missing>"
        if key == "<missing>" and self._tokens is not None:
            key = "<application default credentials>"
        given = self.base_url_as_given  # its own query (`?key=`) shown as there, masked
        shown = None if given is None else _without_credentials(given)
        return f"{type(self).__name__}(name={self.name!r}, base_url={shown!r}, api_key={key})"

    # Capabilities and validation

    def chat_capability(self, model: str, capability: ChatCapability) -> CapabilitySupport:
        known = self._capabilities
        support = known.get((model, capability))
        if support is None:
            support = self._adapter.capability(model, capability)
            if len(known) >= _CAPABILITY_ANSWERS:
                known.clear()
            known[model, capability] = support
        return support

    def validate_chat_request(
        self, request: ChatRequest, *, stream: bool = False
    ) -> ChatValidation:
        """A dry run of the encoding (of a streamed call with `stream=True`): the warnings
        the call would report, nothing sent.

        Under `UnsupportedPolicy.ERROR` it raises the `UnsupportedError` the call would.
        """
        if not isinstance(request, vocabulary.ChatRequest):
            raise not_a_request(request)
        degradations = Degradations.for_request(self.name, request)
        request = _named_for_encoding(request, self.name, self.issuer)
        self._encode(request, degradations, stream=stream, url="", headers={}, params={})
        return vocabulary.ChatValidation(
            coverage=vocabulary.ValidationCoverage.ENCODING, warnings=tuple(degradations.warnings)
        )

    # Shared decisions

    def _encode(
        self,
        request: ChatRequest,
        degradations: Degradations,
        *,
        stream: bool,
        url: str,
        headers: Mapping[str, str],
        params: Mapping[str, str],
    ) -> HttpRequest:
        return self._adapter.encode(
            request, degradations, stream=stream, url=url, headers=headers, params=params
        )

    def _endpoint(self, model: str, *, stream: bool = False) -> tuple[str, Mapping[str, str]]:
        missing = self.missing_url()
        if missing is not None:
            raise (InvalidRequestError(missing).mark_authored().with_provider(self.name))
        if self._deployments and self._preset.deployment_path is not None:
            segment = _deployment_segment(model, self.name)
            return f"{self._base_url}{self._preset.deployment_path.format(model=segment)}", (
                self._query
            )
        path, params = self._adapter.path(model, stream=stream)
        if params:
            return f"{self._base_url}{path}", {**self._query, **params}
        return f"{self._base_url}{path}", self._query

    def _headers(self, *, stream: bool, token: str | None = None) -> dict[str, str]:
        """The request's headers; `token`: the one `access_token=`'s function gave this call
        (an async call gets it in a worker thread), else it is asked here."""
        headers = {
            "content-type": "application/json",
            "accept": self._adapter.stream_accept if stream else "application/json",
        }
        if self._access_token:
            headers["authorization"] = f"Bearer {token or self._token()}"
        elif self._api_key:
            auth = self._preset.auth
            if auth == "bearer":
                headers["authorization"] = f"Bearer {self._api_key}"
            else:
                headers[auth] = self._api_key
        elif self._tokens is not None and not self._brings_own_auth:
            token = self._tokens.current() or self._tokens.refresh()
            self._remember(token)
            headers["authorization"] = f"Bearer {token}"
        else:
            missing = self.missing_key()
            if missing is not None:
                raise AuthenticationError(missing).mark_authored().with_provider(self.name)
        for name, value in self._extra_headers.items():
            # The caller's header replaces the one of the same name made here (HTTP's names
            # know no case): one `Authorization` is sent, the caller's, never two.
            headers.pop(name.lower(), None)
            headers[name] = value
        return headers

    def _token(self) -> str:
        """The bearer token of `access_token=`: as given, or what its function gives now
        (checked as a header must carry it, and remembered to be cut out of errors)."""
        given = self._access_token
        if not callable(given):
            return given or ""
        token = self._token_called()
        if inspect.isawaitable(token):
            if inspect.iscoroutine(token):
                token.close()  # (never awaited: said here, not as a RuntimeWarning)
            raise TypeError(
                "access_token='s function is async: it serves async calls alone (achat, "
                "achat_stream); give a sync function for sync calls"
            )
        return self._checked_token(token)

    def _token_called(self) -> object:
        """What `access_token=`'s function returns, its failure said as `_token_failed`."""
        given = cast("Callable[[], object]", self._access_token)
        try:
            return given()
        except Error:
            raise
        except Exception as failure:
            raise self._token_failed(failure) from failure

    def _token_failed(self, failure: Exception) -> Error:
        # Its words may hold a credential: named by its type alone.
        return (
            AuthenticationError(
                f"{self.name}'s access_token= function failed ({type(failure).__name__}); "
                "nothing was sent"
            )
            .mark_authored()
            .with_provider(self.name)
        )

    def _checked_token(self, token: object) -> str:
        """The token `access_token=`'s function gave, as a header must carry it (one that
        cannot go is its function failing: `_token_refused`), remembered to be cut out of
        errors."""
        if not isinstance(token, str) or not token:
            got = "an empty string" if token == "" else type(token).__name__
            raise self._token_refused(f"must return the token (a string), got {got}")
        fault = _token_fault(token)
        if fault is not None:
            raise self._token_refused(f"returned a token {fault}")
        self._remember(token)
        return token

    def _token_refused(self, why: str) -> Error:
        # As a function that raises is said (`_token_failed`): the token is not quoted.
        return (
            AuthenticationError(f"{self.name}'s access_token= function {why}; nothing was sent")
            .mark_authored()
            .with_provider(self.name)
        )

    def _remember(self, token: str) -> None:
        """Keep `token` among the latest sent (`_tokens_sent`), once."""
        with self._tokens_lock:
            if token not in self._tokens_sent:
                self._tokens_sent.append(token)

    async def _atoken(self) -> str | None:
        """`_token` for an async call: a function's token asked in a worker thread (a token
        provider may go to the network to refresh it), or awaited where the function is
        async (`azure.identity.aio.get_bearer_token_provider`'s) or returns an awaitable
        (`lambda: refresh()`, `refresh` async); `None` where there is none."""
        given = self._access_token
        if not callable(given):
            return None
        if inspect.iscoroutinefunction(given) or inspect.iscoroutinefunction(type(given).__call__):
            token = self._token_called()
        else:
            import asyncio  # here: a sync program never loads it

            token = await asyncio.to_thread(self._token_called)
        if inspect.isawaitable(token):
            try:
                token = await token
            except Error:
                raise
            except Exception as failure:
                raise self._token_failed(failure) from failure
        return self._checked_token(token)

    def missing_key(self) -> str | None:
        """Why no call can be sent (no API key where the provider needs one, and how to
        give one), or `None`: said once by a run of many calls, before anything is sent."""
        if self._access_token or self._api_key or self._tokens is not None:
            return None
        if not self._preset.key_required or self._brings_own_auth:
            return None
        envs = " or ".join(name for name in self._preset.key_envs if name)
        said = f"{self.name} needs an API key: pass api_key= or set {envs}"
        if self._preset.auth == "api-key":
            # Azure's `api-key` header: its endpoints take a Microsoft Entra ID token instead.
            said += (
                "; for Microsoft Entra ID, pass access_token= (a token, or a function "
                "returning one) or headers={'Authorization': 'Bearer ...'}"
            )
        return said

    async def _refresh_token(self) -> None:
        """Refresh an expiring token off the event loop, after the request's checks
        (`_target`) and before the shared `_prepare`."""
        tokens = self._tokens
        uses_tokens = not (self._access_token or self._api_key or self._brings_own_auth)
        if tokens is not None and uses_tokens and tokens.current() is None:
            import asyncio  # here: a sync program never loads it

            await asyncio.to_thread(tokens.refresh)

    def _target(self, request: ChatRequest, *, stream: bool) -> tuple[str, Mapping[str, str]]:
        """The URL and query `request` goes to, its model name checked: a call's own checks,
        made before any token is asked for (sync or async, one error, no function called)."""
        if not request.model.isascii():
            _check_utf8(request.model)  # the URL names it (Gemini, Azure's deployments)
        return self._endpoint(request.model, stream=stream)

    def _prepare(
        self,
        request: ChatRequest,
        *,
        stream: bool,
        token: str | None = None,
        target: tuple[str, Mapping[str, str]] | None = None,
    ) -> tuple[HttpRequest, list[Warning]]:
        """The request to send; `target`: `_target`'s, where an async call checked it before
        awaiting its token."""
        url, params = target or self._target(request, stream=stream)
        degradations = Degradations.for_request(self.name, request)
        request = _named_for_encoding(request, self.name, self.issuer)
        http = self._encode(
            request,
            degradations,
            stream=stream,
            url=url,
            headers=self._headers(stream=stream, token=token),
            params=params,
        )
        return http, degradations.warnings

    def _secrets(self, sent: HttpRequest | None = None) -> list[str]:
        """The key, the tokens and any credential in the caller's headers, longest first;
        with the bearer token `sent` (a call's request) went with, which a token function
        may have given that call alone."""
        given: tuple[str | None, ...] = (
            self._api_key,
            None if callable(self._access_token) else self._access_token,
            self._tokens.current() if self._tokens is not None else None,
            _bearer(sent),
        )
        with self._tokens_lock:
            given += tuple(self._tokens_sent)
        found = {secret for secret in given if secret and len(secret) >= _SHORTEST_REDACTED}
        found.update(_body_credentials(sent))
        if password := self._url_user.partition(":")[2]:
            from urllib.parse import unquote

            # As the provider would echo it, decoded (`%65%65` is `ee`), or as written.
            found.update(
                shown
                for shown in (password, unquote(password))
                if len(unquote(shown)) >= _SHORTEST_REDACTED
            )
        as_sent: set[str] = set()
        for name, value in self._extra_headers.items():
            if not value or not is_secret_header(name):
                continue
            scheme, _, credential = value.partition(" ")
            credential = credential if scheme.lower() in ("bearer", "basic") else ""
            # A short value (a dummy `Bearer test` for a local server, or a header named only
            # by a word of its name, `x-session-id: 42`) cannot be told from ordinary words,
            # as a short `api_key=` cannot: `test` would cut `llama3:latest` apart.
            shown = {text for text in (value, credential) if len(text) >= _SHORTEST_REDACTED}
            if scheme.lower() == "basic" and credential:
                # A user and password in base64, no word of a message however short (`u:e`
                # is `dTpl`).
                shown.add(credential)
            # The Basic header made of the base URL's user is looked for as sent: its
            # password, as a URL writes it, is looked for above.
            url_auth = self._url_auth and name == "Authorization"
            (as_sent if url_auth else found).update(shown)
        # As a URL may write them (a key echoed in the URL it was taken from), and as JSON
        # may: a gateway echoing one escapes each `/` (PHP, Lua's cjson) or its non-ASCII
        # characters.
        found = {form for secret in found for form in _url_forms(secret)} | as_sent
        found |= {form for secret in found for form in _json_written(secret)} - {""}
        for name, value in self._url_query.items():
            if name.lower() not in _PLAIN_PARAMS:  # a gateway's `?key=...`, `?code=...`
                found.update(_written(name, value))
        return sorted(found, key=len, reverse=True)

    def _scrub(self, error: Error, sent: HttpRequest | None = None) -> Error:
        """Remove credentials from anything the provider echoed back, in place; `sent`: the
        call's request, whose token is looked for whatever other calls sent since.

        Callers re-raise the same error (bare `raise`), so the httpx2 exception behind a
        network error or a timeout stays chained as its `__cause__`.
        """
        secrets = self._secrets(sent)
        message = redacted(error.message, secrets)
        if message != error.message:
            error.message = message
            error.args = (message,)
        context = error.context
        context.body = redacted(context.body, secrets)
        context.request_id = redacted(context.request_id, secrets)
        return error

    def _response(
        self,
        request: ChatRequest,
        response: HttpResponse,
        warnings: list[Warning],
        *,
        url: str | None = None,
    ) -> ChatResponse:
        """The response decoded, or the error it holds raised; `url`: where it came from
        (`_not_found_at`)."""
        if response.content.startswith(_BOM):
            response = HttpResponse(response.status, response.headers, response.content[3:])
        try:
            if not 200 <= response.status < 300:
                _check_answered(response.status, response.headers)
            decoded = self._adapter.decode(
                response, provider=self.name, model=request.model, warnings=warnings
            )
        except Error as error:
            found = self._not_found_at(error, url)
            self._scrub(found.with_model(request.model).with_provider(self.name))
            self._version_advice(_in_its_terms(error, request, self._preset.dialect))
            raise
        wait = _exhausted_wait(self._preset.dialect, response.headers)
        if wait is not None:
            decoded = _noting_reset(decoded, wait)
        return _issued_response(decoded, self.issuer)

    def _stream_error(
        self,
        request: ChatRequest,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        *,
        url: str | None = None,
    ) -> Error:
        body = body.removeprefix(_BOM)
        error = self._adapter.error(status, headers, body, provider=self.name, model=request.model)
        error = self._scrub(self._not_found_at(error, url))
        return self._version_advice(_in_its_terms(error, request, self._preset.dialect))

    def _not_found_at(self, error: Error, url: str | None) -> Error:
        """A 404 that says nothing but "Not Found" (`says_status_alone`: the server serves
        nothing at the path, not the API's word on a model), or a 405 that says nothing but
        "Method Not Allowed" (`says_status_alone`: the path takes no POST, another app is at
        the base URL), with the path it was sent to
        (not the query, which may hold a key) and what to check: the base URL, which an
        OpenAI-compatible server's usually ends with `/v1` (not added, as some serve at
        their root), or, for an API chosen with `api=` (`responses`), whether the server
        serves it at all (many that serve Chat Completions do not)."""
        if url is None:
            return error
        status = error.context.status
        if status is None or not says_status_alone(error.message or "", status):
            return error
        if status == 404 and not isinstance(error, NotFoundError):
            return error
        said = error.message or ("Not Found" if status == 404 else "Method Not Allowed")
        path = _url_path(url).partition("?")[0] or "/"
        advice = "check the base URL"
        base = _url_path(self._base_url or "").rpartition("/")[2]
        if self._preset.dialect in _OPENAI_DIALECTS and not _VERSION_SEGMENT.fullmatch(base):
            advice += "; an OpenAI-compatible server's usually ends in /v1"
        if self._preset.api in self._preset.apis:  # one chosen with `api=`, not the preset's
            advice += f"; or the server does not serve api={self._preset.api!r}"
        message = f"{said} (POST {path}: {advice})"
        error.message = message
        error.args = (message,)
        return error

    def _version_advice(self, error: Error) -> Error:
        """Azure's refusal of a model the `api-version` sent is too old for ("enabled only
        for api versions 2024-12-01-preview and later": reasoning models under the GA
        default) names the first version that serves it: say how to send that one."""
        sent = self._query.get("api-version")
        found = _TOO_OLD.search(error.message or "") if sent is not None else None
        if found is None or not isinstance(error, InvalidRequestError):
            return error
        env = self._preset.api_version_env
        where = f", or set {env}" if env else ""
        message = (
            f"{error.message} (allama sent api-version {sent}: pass "
            f"api_version={found[1]!r} or a later one to allama.provider(...){where})"
        )
        error.message = message
        error.args = (message,)
        return error

    def _json_answer(self, headers: Mapping[str, str]) -> bool:
        """Whether a streamed call was answered with JSON where the dialect streams another
        type: a gateway or a compatible host that ignores `stream: true` may send the whole
        response, or an error object under a 200, as to a plain call."""
        media = _media_type(headers)
        is_json = media == "application/json" or media.endswith("+json")
        return is_json and media != self._adapter.stream_accept

    def _sniffs(self, headers: Mapping[str, str]) -> bool:
        """Whether a streamed call's body is looked at before it is decoded as server-sent
        events: one that begins as a JSON object cannot be events (such a line is a field
        nobody knows, and the stream would end with nothing), so it is a whole answer or an
        error object labelled `text/event-stream` (or not labelled), read as
        `_json_answer`'s are, once it has all come."""
        return self._adapter.stream_accept == "text/event-stream" and not self._json_answer(headers)

    def _events_after(self, read: bytes) -> bool:
        """Whether a body labelled JSON (`_json_answer`) and read whole, which is no whole
        answer, is a JSON object followed by server-sent events, to be decoded as
        `_after_object` does; a stream the dialect frames in JSON (Ollama's lines) streams
        as it is."""
        return self._adapter.stream_accept == "text/event-stream" and _object_start(read)

    def _whole(
        self,
        request: ChatRequest,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        warnings: list[Warning],
    ) -> ChatResponse | None:
        """A streamed call's JSON answer (`_json_answer`) read as a plain call's: the whole
        response (paid for, so given as the stream's events rather than retried), or the
        error it holds raised, as `chat` would; `None` for a body that is not one JSON
        object (a stream labelled JSON, left to the stream decoder). The object may be
        followed by the framing of server-sent events (`_one_object`), which a gateway that
        answers whole may still write."""
        one = _one_object(body.removeprefix(_BOM))
        if one is None:
            return None
        return self._response(request, HttpResponse(status, headers, one), warnings)

    def _after_object(self, decoder: StreamDecoder, body: bytes) -> Iterator[StreamEvent]:
        """The events of a whole body that begins as a JSON object and is no whole answer
        (more than framing follows the object), as the dialect's decoder reads them. Where
        they finish with nothing said (the end marker after the object: a `Finish` with no
        reason, no content before it), the body is refused as incomplete: an empty finished
        answer would stand for the one paid for, which no retry would then fetch."""

        def decoded() -> Iterator[StreamEvent]:
            yield from decoder.feed(body)
            if not decoder.done:
                yield from decoder.close()

        said = False
        issuer = self.issuer
        for event in decoded():
            if isinstance(event, vocabulary.Finish) and event.finish_reason is None and not said:
                raise IncompleteStreamError(
                    "the stream began with a JSON object that is no whole answer, and ended "
                    "with no response"
                ).mark_authored()
            said = said or event.type not in _UNSAID
            yield _issued(event, issuer)

    def _decoder(self, request: ChatRequest) -> StreamDecoder:
        return self._adapter.stream_decoder(provider=self.name, model=request.model)

    def _scrubbed(
        self, events: Iterator[StreamEvent], headers: Mapping[str, str], sent: HttpRequest
    ) -> Iterator[StreamEvent]:
        try:
            yield from events
        except Error as error:
            self._scrub(_with_request_id(error, headers), sent)
            raise

    # Sync

    # A call is spanned once it is encoded: one refused before sending has no span. Each
    # public call checks its request once, first: a string or a dict where the `ChatRequest`
    # goes is refused naming the argument (`not_a_request`), not met as an `AttributeError`
    # on its first field read.

    def chat(self, request: ChatRequest) -> ChatResponse:
        if not isinstance(request, vocabulary.ChatRequest):
            raise not_a_request(request)
        http, warnings = self._prepare(request, stream=False)
        span = _tracing.start_call(self._tracing, self, request, False, warnings, http.as_sent)
        if span is None:
            return self._send(request, http, warnings)
        token = span.attach()
        try:
            response = self._send(request, http, warnings)
        except BaseException as error:
            span.fail(error)
            raise
        finally:
            span.detach(token)
        span.succeed(response)
        return response

    def _send(
        self, request: ChatRequest, http: HttpRequest, warnings: list[Warning]
    ) -> ChatResponse:
        try:
            response = self._transport.send(http)
        except Error as error:
            self._scrub(error.with_provider(self.name).with_model(request.model), http)
            raise
        try:
            return self._response(request, response, warnings, url=http.url)
        except Error as error:
            self._scrub(error, http)  # (the token this call sent)
            raise

    def chat_stream(self, request: ChatRequest) -> ChatStream:
        if not isinstance(request, vocabulary.ChatRequest):
            raise not_a_request(request)
        http, warnings = self._prepare(request, stream=True)
        span = _tracing.start_call(self._tracing, self, request, True, warnings, http.as_sent)
        if span is None:
            return self._open(request, http, warnings, None)
        token = span.attach()
        try:
            stream = self._open(request, http, warnings, span)
        except BaseException as error:
            span.fail(error)
            raise
        finally:
            span.detach(token)
        span.watch(stream, stream.collector)
        return stream

    def _open(
        self,
        request: ChatRequest,
        http: HttpRequest,
        warnings: list[Warning],
        span: _tracing.CallSpan | None,
    ) -> ChatStream:
        try:
            handle = self._transport.open_stream(http)
            if handle.status >= 400:
                try:
                    body = handle.read()
                finally:
                    handle.close()
                raise self._stream_error(request, handle.status, handle.headers, body, url=http.url)
            if not 200 <= handle.status < 300:
                handle.close()
                _check_answered(handle.status, handle.headers)
        except Error as error:
            self._scrub(error.with_provider(self.name).with_model(request.model), http)
            raise
        chunks = handle.iter_bytes() if span is None else span.timed(handle.iter_bytes())
        if _html_answer(handle.headers):
            try:
                read = _head(chunks, _page_told)
                if _a_page(read):
                    raise _no_stream(read + b"".join(chunks))
            except BaseException as failure:
                handle.close()
                if isinstance(failure, Error):
                    self._scrub(failure.with_provider(self.name).with_model(request.model), http)
                raise
            chunks = itertools.chain((read,), chunks)
        after: bytes | None = None  # (a JSON object that is no whole answer, `_after_object`)
        if self._json_answer(handle.headers):
            try:
                read = _head(chunks)
                if _object_start(read):
                    read += b"".join(chunks)
                    handle.close()
                    whole = self._whole(request, handle.status, handle.headers, read, warnings)
                    if whole is not None:
                        return streams.ChatStream(
                            streams.response_events(whole),
                            provider=self.name,
                            on_close=None if span is None else span.stream_ended,
                        )
            except BaseException as failure:
                handle.close()
                if isinstance(failure, Error):
                    self._scrub(failure.with_provider(self.name).with_model(request.model), http)
                raise
            if self._events_after(read):
                after = read
            else:
                chunks = itertools.chain((read,), chunks)
        decoder = self._decoder(request)
        sniff = self._sniffs(handle.headers)
        reading = _Body(chunks) if hasattr(decoder, "broken") else None
        if reading is not None:
            chunks = reading

        issuer = self.issuer  # the endpoint does not change while it streams
        dialect = self._preset.dialect

        def events() -> Iterator[StreamEvent]:
            for warning in warnings:
                yield vocabulary.WarningEvent(warning=warning)
            yield from _reset_event(dialect, handle.headers)
            if after is not None:
                yield from self._after_object(decoder, after)
                return
            head: bytes | None = b"" if sniff else None
            try:
                for chunk in chunks:
                    if head is not None:
                        head += chunk
                        if not _begun(head):
                            continue
                        chunk, head = head, None
                        if _object_start(chunk):
                            chunk += b"".join(chunks)
                            whole = self._whole(request, handle.status, handle.headers, chunk, [])
                            if whole is not None:
                                yield from streams.response_events(whole)
                            else:
                                yield from self._after_object(decoder, chunk)
                            return
                    for event in decoder.feed(chunk):
                        yield _issued(event, issuer)
                    if decoder.done:
                        handle.drain(chunks)  # (for the connection to be reused)
                        return
            except Error as error:
                if reading is None or error is not reading.broken:
                    raise
                for event in _broken(decoder, error):
                    yield _issued(event, issuer)
                raise
            for event in decoder.feed(head) if head else ():  # (blank bytes alone)
                yield _issued(event, issuer)
            for event in decoder.close():
                yield _issued(event, issuer)

        return streams.ChatStream(
            self._scrubbed(events(), handle.headers, http),
            close=handle.close,
            provider=self.name,
            on_close=None if span is None else span.stream_ended,
        )

    # Async

    async def achat(self, request: ChatRequest) -> ChatResponse:
        if not isinstance(request, vocabulary.ChatRequest):
            raise not_a_request(request)
        target = self._target(request, stream=False)  # as `chat` checks, before the token
        await self._refresh_token()
        bearer = await self._atoken()
        http, warnings = self._prepare(request, stream=False, token=bearer, target=target)
        span = _tracing.start_call(self._tracing, self, request, False, warnings, http.as_sent)
        if span is None:
            return await self._asend(request, http, warnings)
        token = span.attach()
        try:
            response = await self._asend(request, http, warnings)
        except BaseException as error:
            span.fail(error)
            raise
        finally:
            span.detach(token)
        span.succeed(response)
        return response

    async def _asend(
        self, request: ChatRequest, http: HttpRequest, warnings: list[Warning]
    ) -> ChatResponse:
        try:
            response = await self._transport.asend(http)
        except Error as error:
            self._scrub(error.with_provider(self.name).with_model(request.model), http)
            raise
        try:
            return self._response(request, response, warnings, url=http.url)
        except Error as error:
            self._scrub(error, http)  # (the token this call sent)
            raise

    async def achat_stream(self, request: ChatRequest) -> AsyncChatStream:
        if not isinstance(request, vocabulary.ChatRequest):
            raise not_a_request(request)
        target = self._target(request, stream=True)  # as `chat` checks, before the token
        await self._refresh_token()
        bearer = await self._atoken()
        http, warnings = self._prepare(request, stream=True, token=bearer, target=target)
        span = _tracing.start_call(self._tracing, self, request, True, warnings, http.as_sent)
        if span is None:
            return await self._aopen(request, http, warnings, None)
        token = span.attach()
        try:
            stream = await self._aopen(request, http, warnings, span)
        except BaseException as error:
            span.fail(error)
            raise
        finally:
            span.detach(token)
        span.watch(stream, stream.collector)
        return stream

    async def _aopen(
        self,
        request: ChatRequest,
        http: HttpRequest,
        warnings: list[Warning],
        span: _tracing.CallSpan | None,
    ) -> AsyncChatStream:
        try:
            handle = await self._transport.aopen_stream(http)
            if handle.status >= 400:
                try:
                    body = await handle.aread()
                finally:
                    await handle.aclose()
                raise self._stream_error(request, handle.status, handle.headers, body, url=http.url)
            if not 200 <= handle.status < 300:
                await handle.aclose()
                _check_answered(handle.status, handle.headers)
        except Error as error:
            self._scrub(error.with_provider(self.name).with_model(request.model), http)
            raise
        chunks = handle.aiter_bytes() if span is None else span.atimed(handle.aiter_bytes())
        if _html_answer(handle.headers):
            try:
                read = await _ahead(chunks, _page_told)
                if _a_page(read):
                    raise _no_stream(read + b"".join([chunk async for chunk in chunks]))
            except BaseException as failure:
                await handle.aclose()
                if isinstance(failure, Error):
                    self._scrub(failure.with_provider(self.name).with_model(request.model), http)
                raise
            chunks = _aprefixed(read, chunks)
        after: bytes | None = None  # (a JSON object that is no whole answer, `_after_object`)
        if self._json_answer(handle.headers):
            try:
                read = await _ahead(chunks)
                if _object_start(read):
                    read += b"".join([chunk async for chunk in chunks])
                    await handle.aclose()
                    whole = self._whole(request, handle.status, handle.headers, read, warnings)
                    if whole is not None:
                        return streams.AsyncChatStream(
                            streams.aiter_events(streams.response_events(whole)),
                            provider=self.name,
                            on_close=None if span is None else span.stream_ended,
                        )
            except BaseException as failure:
                await handle.aclose()
                if isinstance(failure, Error):
                    self._scrub(failure.with_provider(self.name).with_model(request.model), http)
                raise
            if self._events_after(read):
                after = read
            else:
                chunks = _aprefixed(read, chunks)
        decoder = self._decoder(request)
        sniff = self._sniffs(handle.headers)
        abody = _AsyncBody(chunks) if hasattr(decoder, "broken") else None
        if abody is not None:
            chunks = abody

        issuer = self.issuer  # the endpoint does not change while it streams
        dialect = self._preset.dialect

        async def events() -> AsyncIterator[StreamEvent]:
            try:
                for warning in warnings:
                    yield vocabulary.WarningEvent(warning=warning)
                for event in _reset_event(dialect, handle.headers):
                    yield event
                if after is not None:
                    for event in self._after_object(decoder, after):
                        yield event
                    return
                head: bytes | None = b"" if sniff else None
                try:
                    async for chunk in chunks:
                        if head is not None:
                            head += chunk
                            if not _begun(head):
                                continue
                            chunk, head = head, None
                            if _object_start(chunk):
                                chunk += b"".join([rest async for rest in chunks])
                                whole = self._whole(
                                    request, handle.status, handle.headers, chunk, []
                                )
                                late = (
                                    streams.response_events(whole)
                                    if whole is not None
                                    else self._after_object(decoder, chunk)
                                )
                                for event in late:
                                    yield event
                                return
                        for event in decoder.feed(chunk):
                            yield _issued(event, issuer)
                        if decoder.done:
                            await handle.adrain(chunks)  # (for the connection to be reused)
                            return
                except Error as error:
                    if abody is None or error is not abody.broken:
                        raise
                    for event in _broken(decoder, error):
                        yield _issued(event, issuer)
                    raise
                for event in decoder.feed(head) if head else ():  # (blank bytes alone)
                    yield _issued(event, issuer)
                for event in decoder.close():
                    yield _issued(event, issuer)
            except Error as error:
                self._scrub(_with_request_id(error, handle.headers), http)
                raise

        return streams.AsyncChatStream(
            events(),
            close=handle.aclose,
            provider=self.name,
            on_close=None if span is None else span.stream_ended,
        )

    # Lifetime

    def close(self) -> None:
        if self._owns_transport:
            self._transport.close()

    async def aclose(self) -> None:
        if self._owns_transport:
            await self._transport.aclose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    # Copies: refused by name. Python's own words name only a lock deep inside, and a
    # shallow copy would share the connections, which the copy's `close` would end.

    def _not_copied(self, doing: str, advice: str) -> TypeError:
        """Names the provider by its type and preset, never by its key or URL."""
        return TypeError(
            f"{type(self).__name__} {self.name!r} cannot be {doing}: a provider holds open "
            "connections and credentials, and must be built in the process or copy that "
            f"uses it ({advice})"
        )

    def __reduce__(self) -> NoReturn:
        raise self._not_copied(
            "pickled",
            "build it in the worker with allama.provider(...), from settings that pickle",
        )

    def __copy__(self) -> NoReturn:
        raise self._not_copied(
            "copied",
            "a copy would share its connections, and closing it would close them: build "
            "another with allama.provider(...)",
        )

    def __deepcopy__(self, memo: dict[int, Any]) -> NoReturn:
        raise self._not_copied("deep-copied", "build another with allama.provider(...)")


OpenAICompatibleProvider = HttpProvider
"""The former name of `HttpProvider`, from when it spoke Chat Completions alone."""


_DATED = re.compile(r"(\d{4}-\d{2}-\d{2})(-preview)?")


def _refuse_operation(preset: Preset, url: str, source: str | None) -> None:
    """Refuse a base URL ending in the path of the operation each call adds to it
    (`_OPERATIONS`), saying the URL to give instead, as a repr shows it (a password in it
    masked), and where it came from (`source`: an environment variable's)."""
    operation = _OPERATIONS.get(preset.dialect)
    path = _url_path(url)
    found = None if operation is None else operation.search(path)
    if found is None:
        return
    ending = path[found.start() :]
    before = _without_credentials(url[: len(url) - len(ending)])
    model = ", and the model as the request's model" if found.groupdict().get("model") else ""
    raise ValueError(
        f"the base URL{'' if source is None else f' ({source})'} ends in {ending}, part of an "
        "API call's path, which each call to "
        f"{preset.name} adds after the base URL itself: give the URL before it ({before}){model}"
    )


def _earlier(version: str, than: str) -> bool:
    """Whether the dated `api-version` `version` comes before `than` (a date's preview before
    its release); an undated one (`preview`, `v1`) is not known to."""
    ours, theirs = _DATED.fullmatch(version), _DATED.fullmatch(than)
    if ours is None or theirs is None:
        return False
    return (ours[1], ours[2] is None) < (theirs[1], theirs[2] is None)


def _split_query(url: str) -> tuple[str, dict[str, str]]:
    """`url` without its query, and the query's parameters (the last of a repeated one)."""
    from urllib.parse import parse_qsl, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return url, {}
    if not parts.query:
        return url, {}
    bare = urlunsplit((parts.scheme, parts.netloc, parts.path, "", parts.fragment))
    return bare, dict(parse_qsl(parts.query, keep_blank_values=True))


def _split_user(url: str | None) -> tuple[str | None, str, str | None]:
    """`url` without the user and password in it, those as written, and the Basic
    `Authorization` header they make (httpx2's: percent-escapes decoded, UTF-8)."""
    import base64
    from urllib.parse import unquote, urlsplit, urlunsplit

    if url is None:
        return None, "", None
    try:
        parts = urlsplit(url)
    except ValueError:
        return url, "", None
    user, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, "", None
    bare = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    name, _, password = user.partition(":")
    if not name and not password:  # `http://@host`, `http://:@host`: none, as httpx2 reads it
        return bare, "", None
    token = base64.b64encode(f"{unquote(name)}:{unquote(password)}".encode()).decode("ascii")
    return bare, user, f"Basic {token}"


def _without_credentials(url: str) -> str:
    """`url` as a repr may show it: a password in it (`user:pw@`) and its query (where a
    gateway's key may ride, `?key=`) are masked."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unreadable url>"
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}:***@{host}" if ":" in user else f"***@{host}"
    query = "***" if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


_FRAMING = re.compile(r"(?::.*|(?:event|id|retry):.*|data: ?\[DONE\])?")
"""A line of server-sent events that carries no data (stripped): blank, a comment, an event's
name, id or retry time, or the end marker."""

_UNSAID = frozenset({"response_start", "warning", "provider_data"})
"""The types of events that say nothing of an answer: a stream of only these before its
`Finish` has none. (Named by their tags: the event classes load only when a call is made.)"""

_BOM = b"\xef\xbb\xbf"
"""UTF-8's byte-order mark, which a gateway may put before a JSON body and which JSON's
readers may ignore (RFC 8259), as `chat` and the stream decoders do."""


def _begun(head: bytes) -> bool:
    """Whether a body's first bytes hold more than blanks and a byte-order mark (or the
    first bytes of one, which may arrive alone)."""
    if _BOM.startswith(head):
        return False
    return bool(head.removeprefix(_BOM).strip())


def _one_object(body: bytes) -> bytes | None:
    """`body` as one JSON object, without the framing of server-sent events that may follow
    it (`_FRAMING`: blank lines, comments, `event:`, `id:` and `retry:` lines, `data: [DONE]`
    once or more); `None` for a body that is no JSON object, or has more after it."""
    try:
        if isinstance(read_json(body), dict):
            return body
    except ValueError:
        pass
    try:
        text = body.decode()
        start = len(text) - len(text.lstrip(" \t\r\n"))
        found, end = json.JSONDecoder().raw_decode(text, start)
    except (ValueError, RecursionError):  # (not UTF-8, not JSON, nested too deeply)
        return None
    lines = re.split(r"\r\n|\r|\n", text[end:])
    if not isinstance(found, dict) or not all(_FRAMING.fullmatch(line.strip()) for line in lines):
        return None
    return text[start:end].encode()


def _object_start(head: bytes) -> bool:
    """Whether a body begins as a JSON object (a stream of JSON, such as Gemini's array
    without `alt=sse`, begins otherwise, and is decoded as it arrives)."""
    return head.removeprefix(_BOM).lstrip()[:1] == b"{"


def _head(chunks: Iterator[bytes], told: Callable[[bytes], bool] = _begun) -> bytes:
    """The chunks up to what `told` says is enough to tell what the body is (by default the
    first that is not blank); the rest is left to read."""
    head = b""
    for chunk in chunks:
        head += chunk
        if told(head):
            break
    return head


async def _ahead(chunks: AsyncIterator[bytes], told: Callable[[bytes], bool] = _begun) -> bytes:
    head = b""
    async for chunk in chunks:
        head += chunk
        if told(head):
            break
    return head


async def _aprefixed(head: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield head
    async for chunk in rest:
        yield chunk


def _body_credentials(http: HttpRequest | None) -> set[str]:
    """The credentials a call's body carries, as a body option gives them (Azure On Your
    Data's search key, `data_sources[].parameters.authentication.key`): each string under
    a key that names one (`is_secret_header`'s reading of a name), which a provider's
    error may echo. Not in the conversation, its tools or its schemas (`_SAID`): a tool
    call's `{"key": "max_tokens"}` is the model's words, which an error may quote. Read on
    an error's way out only."""
    if http is None or not http.content:
        return set()
    try:
        body = read_json(http.content)
    except ValueError:
        return set()
    if not isinstance(body, dict):
        return set()
    found: set[str] = set()
    pending: list[Any] = [value for name, value in body.items() if name not in _SAID]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            for name, value in node.items():
                if isinstance(value, str):
                    if len(value) >= _SHORTEST_REDACTED and is_secret_header(name):
                        found.add(value)
                elif isinstance(value, dict | list):
                    pending.append(value)
        elif isinstance(node, list):
            pending.extend(node)
    return found


_SAID = frozenset(
    {
        "messages",
        "input",
        "contents",
        "system",
        "systemInstruction",
        "system_instruction",
        "instructions",
        "tools",
        "tool_choice",
        "toolConfig",
        "response_format",
        "text",
        "generationConfig",
        "output_config",
        "format",
        "prompt",
    }
)
"""A body's fields that hold the conversation, its tools and its schemas, in every dialect:
words of the caller's or the model's, no credential of the call's."""


def _bearer(http: HttpRequest | None) -> str | None:
    """The bearer token `http` went with (`access_token=`'s, Application Default
    Credentials', or the caller's `Authorization`), `None` without one."""
    for name, value in http.headers.items() if http is not None else ():
        if name.lower() == "authorization":
            scheme, _, credential = value.partition(" ")
            return credential if scheme.lower() == "bearer" else None
    return None


def _token_fault(token: str) -> str | None:
    """What keeps `token` (`access_token=`'s function's) out of a header, as `check_key`
    finds it in a key given, worded for a token; `None` when it can go."""
    fault = key_fault(token)
    return None if fault is None else _TOKEN_FAULTS[fault]


_TOKEN_FAULTS = {
    "around": (
        "with a line break or whitespace around it; return the token alone (a token read "
        "from a file often ends with a newline)"
    ),
    "nul": "with a NUL character (U+0000) in it; return the token alone",
    "break": "with a line break in it; return the token alone",
    "ascii": "with a character outside ASCII, which an HTTP header cannot carry",
}
"""`_token_fault`'s words for each of `key_fault`'s findings."""


_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


def _media_type(headers: Mapping[str, str]) -> str:
    """An answer's media type, without its parameters (`; charset=utf-8`), in lower case."""
    return headers.get("content-type", "").partition(";")[0].strip().lower()


def _html_answer(headers: Mapping[str, str]) -> bool:
    """Whether a streamed call's 2xx answer is labelled an HTML page: no dialect streams
    one (a proxy's sign-in page, a web server's where the API is not), but a server that
    labels whatever it sends so (Flask's `Response`, Django's, a home-grown proxy) may
    stream events under it, so its first bytes decide (`_a_page`)."""
    media = _media_type(headers)
    return media in _HTML_TYPES


def _page_told(head: bytes) -> bool:
    """Whether a body's first bytes are enough to tell whether it is an HTML page: a `<`
    first, or two bytes (a UTF-16 body's NUL may be the second, `_utf16`)."""
    if not _begun(head):
        return False
    return len(head) >= 2 or head.removeprefix(_BOM).lstrip()[:1] == b"<"


def _a_page(head: bytes) -> bool:
    """Whether a body labelled HTML is a page rather than the events streamed under that
    label: one whose first byte other than blanks is `<` (a page however it opens: a
    comment, `<?xml`, `<meta>`, `<title>`), which server-sent events (a field's name or
    `:` first) and NDJSON (`{` or `[`) never are, or one in UTF-16, which neither is."""
    return head.removeprefix(_BOM).lstrip()[:1] == b"<" or _utf16(head) is not None


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _utf16(body: bytes) -> str | None:
    """The codec of a body in UTF-16: by its byte-order mark, else by the NUL beside its
    first (ASCII) character; `None` for a body that is not."""
    if body[:2] in _UTF16_BOMS:
        return "utf-16"
    if len(body) < 2 or (body[0] == 0) == (body[1] == 0):
        return None
    return "utf-16-be" if body[0] == 0 else "utf-16-le"


def _no_stream(body: bytes) -> Error:
    """The error of a streamed call answered with an HTML page (`_a_page`), read whole:
    a server error whose cost is unknown, as a call not streamed raises for it
    (`not_a_stream`). A UTF-16 page is read as such, so that its title is said."""
    from allama.adapters._not_a_response import not_a_stream

    codec = _utf16(body)
    if codec is None:
        return not_a_stream(body.removeprefix(_BOM))
    return not_a_stream(body.decode(codec, "replace"))


def _check_answered(status: int, headers: Mapping[str, str]) -> None:
    """Refuse a status below 400 that is no answer: a redirect (3xx), which the transport
    does not follow (the request and its key would go on to another address). It answers
    every try alike, so it is not tried again; it names where it points, by scheme and host
    only (a `Location`'s path or query may hold a key)."""
    if 200 <= status < 300 or status >= 400:
        return
    if status < 300:
        raise InvalidRequestError(
            f"the provider answered {status}, which is no answer to a request: check the base URL",
            context=ErrorContext(status=status),
        ).mark_authored()
    location = headers.get("location", "").strip()
    where = ""
    if location:
        try:
            target = httpx2.URL(location)
        except httpx2.InvalidURL:
            target = None
        if target is not None and target.host:
            host = f"[{target.host}]" if ":" in target.host else target.host
            port = f":{target.port}" if target.port is not None else ""
            scheme = f"{target.scheme}://" if target.scheme else ""
            where = f" to {scheme}{host}{port}"
        elif target is not None:
            where = " to another path of the same host"
    raise InvalidRequestError(
        f"the provider answered {status}, a redirect{where}, which allama does not follow "
        "(the request and its key would go on to another address): check the base URL, "
        "and pass the address the API answers at as base_url= to allama.provider(...)",
        context=ErrorContext(status=status),
    ).mark_authored()


def _in_its_terms(error: Error, request: ChatRequest, dialect: str) -> Error:
    """`error` read with what only the request it answers, sent in `dialect`, says
    (`_refused_field`, `_past_quota`)."""
    return _past_quota(_refused_field(error, request, dialect), request)


def _refused_field(error: Error, request: ChatRequest, dialect: str) -> Error:
    """A provider's refusal that names no field, put on the field that carries what the
    request's answer hangs on, so that an extraction whose native output was a guess falls
    back to a forced tool: "the requested parameters" (OpenRouter's 404 when, under the
    `require_parameters` sent with a response format, a schema or JSON mode, and with tools
    but under `tool_choice: none`, no endpoint serves them all), put on the one of those
    the body carried, the request's own or its body option's in `dialect` (`_routing`; on
    none where it carried both: either may be the one), whose message then says what it
    went with and names the other optional parameters sent, since any of them may be the
    one refused; or a limit on all its schemas together (`SCHEMAS_TOGETHER_KEY`), whose
    words may speak of tools the request did not send."""
    if not isinstance(error, UnsupportedError) or error.field is not None:
        return error
    together = error.context.metadata.get(SCHEMAS_TOGETHER_KEY)
    if together in ("strict", "all"):
        error.field = _carrying_schemas(request, strict_only=together == "strict")
    elif error.context.metadata.get(UNNAMED_PARAMETERS_KEY) is True:
        namespace, format_key = _ROUTED_OPTIONS.get(dialect, _ROUTED_OPTIONS["openai_compat"])
        given = request.options.get(namespace)
        option: Mapping[str, Any] = given if isinstance(given, dict) else {}
        routing = _routing(request, option, format_key)
        # What the routing went with: (its field, what it is, the field as the message
        # names it), and the body option's fields among them, named so and not as others.
        routed: list[tuple[RequestField, str, str]] = []
        carried: set[str] = set()
        if routing.format is not None:
            what = routing.format
            named = f"`{RequestField.RESPONSE_FORMAT}`"
            if what != _ANY_FORMAT:
                named = f"{what}'s {named}"
            routed.append((RequestField.RESPONSE_FORMAT, what, named))
            if routing.format_option:
                carried.add(format_key)
        if routing.tools:
            routed.append((RequestField.TOOLS, "the tools", f"`{RequestField.TOOLS}`"))
            carried.update((str(RequestField.TOOLS), str(RequestField.TOOL_CHOICE)))
        if len(routed) == 1:
            error.field = routed[0][0]
        others = _optional_parameters(request, option, carried)
        if routing.tools_sent and not routing.tools and str(RequestField.TOOLS) not in others:
            # Sent under `tool_choice: none`: no answer hangs on them, yet the routing
            # requires them of an endpoint as well.
            others.insert(0, str(RequestField.TOOLS))
        if routed and (others or len(routed) > 1):
            # The routing requires every parameter sent, not what it went with alone: any
            # of them may be the one no endpoint takes.
            went = " and ".join(what for _, what, _ in routed)
            carriers = " and ".join(named for _, _, named in routed)
            besides = ", ".join(f"`{name}`" for name in others)
            rest = (
                f", and besides {'it' if len(routed) == 1 else 'them'} {besides}; any of them"
                if others
                else "; either"
            )
            error.message = (
                f"{error.message} (under the `require_parameters` sent with {went}, no "
                f"endpoint takes all of the parameters sent: {carriers}{rest} may be the one "
                "none takes)"
            )
            error.args = (error.message,)
    return error


_ROUTED_OPTIONS = {
    "openai_compat": ("openai_compat", "response_format"),
    "openai_responses": ("openai_responses", "text"),
}
"""The body option of each dialect a router's refusal of "the requested parameters" comes
in, and its field that carries the response format (the Responses API's `text`, by its
`format`)."""

_ROUTED_FORMATS = {"json_schema": "the schema", "json_object": "JSON mode"}
"""How a routing refusal names the response format it went with, by its type as sent."""

_ANY_FORMAT = "the response format"
"""How it names one of another type."""

_SENT_FORMATS = {"json_schema": "json_schema", "json": "json_object"}
"""The type each of allama's response formats the routing goes with is sent as."""


class _Routing(NamedTuple):
    """What a router's `require_parameters` went with (`_routing`)."""

    format: str | None
    """The response format, as a refusal names it; `None` where none went (or `text`)."""
    format_option: bool
    """Whether that was the body option's, sent in place of the request's."""
    tools: bool
    """Whether tools went: some were sent, and not under `tool_choice: none`."""
    tools_sent: bool
    """Whether any were sent."""


def _routing(request: ChatRequest, option: Mapping[str, Any], format_key: str) -> _Routing:
    """What the routing of `request` went with, as its encoder reads the body it sent
    (`_routed_parameters`, the body option's fields in it): the request's response format
    (a schema, or JSON mode) and tools, with the body `option`'s fields written over them
    as the encoder writes them (`option_fields`): its `format_key` in place of the
    request's format (within the `text` allama sends, for the Responses API), its tools
    after the request's, its `tool_choice` in place of the request's."""
    fmt = request.response_format
    kind = None if fmt is None else _SENT_FORMATS.get(fmt.type)
    sent: Any = None if kind is None else {"type": kind}
    from_option = False
    if format_key in option:
        theirs = option[format_key]
        if format_key == "text" and isinstance(theirs, dict):
            from_option = "format" in theirs  # (its other keys are added to allama's)
            sent = theirs.get("format", sent)
        else:
            from_option, sent = True, theirs
    tools: Any = list(request.tools)
    if "tools" in option:
        theirs = option["tools"]
        if isinstance(theirs, list):
            tools = [*tools, *theirs]
        elif not tools:  # (beside allama's, one that is no list is refused, not sent)
            tools = theirs
    if "tool_choice" in option:
        none = option["tool_choice"] == "none"
    else:
        none = request.tool_choice is not None and request.tool_choice.mode == "none"
    named = None
    if sent is not None:
        kind = sent.get("type") if isinstance(sent, dict) else None
        if kind != "text":
            named = _ROUTED_FORMATS.get(kind, _ANY_FORMAT) if isinstance(kind, str) else _ANY_FORMAT
    return _Routing(named, from_option and named is not None, bool(tools) and not none, bool(tools))


def _carrying_schemas(request: ChatRequest, *, strict_only: bool) -> RequestField | None:
    """The one field that carries the schemas `request` has constrained: the response
    format's, or its tools' (`strict_only`: those sent `strict`, or, when none is, the
    tools, the only schemas sent); `None` when both do, as the limit is on them together."""
    fmt = request.response_format
    schema = fmt is not None and fmt.type == "json_schema"
    compiled = any(tool.strict or not strict_only for tool in request.tools)
    if schema and not compiled:
        return RequestField.RESPONSE_FORMAT
    if not schema and request.tools:
        return RequestField.TOOLS
    return None


def _optional_parameters(
    request: ChatRequest, option: Mapping[str, Any], carried: set[str]
) -> list[str]:
    """The optional parameters a request sets besides what a router's `require_parameters`
    went with (`carried`, by their names in the body), which it requires of an endpoint as
    well: by allama's names, and the names of what its body `option` adds to the body."""
    named = [
        (RequestField.TEMPERATURE, request.temperature is not None),
        (RequestField.TOP_P, request.top_p is not None),
        (RequestField.MAX_OUTPUT_TOKENS, request.max_output_tokens is not None),
        (RequestField.STOP, bool(request.stop)),
        (RequestField.SEED, request.seed is not None),
        (RequestField.REASONING_EFFORT, request.reasoning_effort is not None),
        (RequestField.LOGPROBS, request.logprobs is not None),
        (RequestField.PARALLEL_TOOL_CALLS, request.parallel_tool_calls is not None),
        (RequestField.TOOL_CHOICE, request.tool_choice is not None),
    ]
    found = [str(field) for field, sent in named if sent]
    found.extend(str(key) for key in option if key != "provider")
    return [name for name in dict.fromkeys(found) if name not in carried]


def _past_quota(error: Error, request: ChatRequest) -> Error:
    """A rate limit on input tokens per minute that the request alone is over, by the
    guess of its tokens from its text (which errs low): no wait lets it through, so it is
    not worth retrying, and the wait the answer gives is none to make (a batch run fails
    the input at once, and slows nothing)."""
    quota = error.context.metadata.get(QUOTA_TOKENS_PER_MINUTE_KEY)
    if (
        isinstance(error, RateLimitedError)
        and isinstance(quota, int)
        and guessed_input_tokens(request, media=False) >= quota  # (its text: errs low)
    ):
        error.with_retryable(False).with_retry_after(None)
    return error


_REQUEST_ID_HEADERS = ("request-id", "x-request-id", "apim-request-id")
"""Where a response names its request (Anthropic's, OpenAI's and its kin's, Azure's): an
error a stream carries names none, and support asks for it."""


def _with_request_id(error: Error, headers: Mapping[str, str]) -> Error:
    """`error`, raised by a stream, with the request id of the response that carried it."""
    if error.request_id is None:
        lower = {name.lower(): value for name, value in headers.items()}
        for name in _REQUEST_ID_HEADERS:
            if lower.get(name):
                return error.with_request_id(lower[name])
    return error


def _host(url: str | None) -> str | None:
    """The host of `url` and its port (none for the scheme's own), in lower case as they
    are read, without the user and password a URL may carry; `None` without one."""
    from urllib.parse import urlsplit

    if not url:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    host = parts.netloc.rpartition("@")[2].lower()
    own_port = {"https": ":443", "http": ":80"}.get(parts.scheme.lower())
    if own_port and host.endswith(own_port):
        host = host[: -len(own_port)]
    return host or None


@functools.lru_cache(maxsize=_CAPABILITY_ANSWERS)
def _issuer(name: str, base_url: str | None, preset_url: str | None) -> str:
    """`HttpProvider.issuer`: `name` on the preset's own host (the bare name every version
    marked reasoning with before hosts were named), `name@host` on any other."""
    host = _host(base_url)
    if host is None or host == _host(preset_url):
        return name
    return f"{name}@{host}"


def _named_for_encoding(request: ChatRequest, name: str, issuer: str) -> ChatRequest:
    """`request` with its reasoning's issuers as the encoders compare them: with the
    provider's name (`Degradations.provider`, which their warnings carry). On another host
    than the preset's own, what this endpoint issued is named `name`, and a bare `name`
    (issued on the preset's own host, or marked by an older version, wherever it was) is
    named as another endpoint's, so that it is left out with the warning for reasoning the
    provider did not issue, rather than refused."""
    if issuer == name:
        return request  # the preset's own host: the names say whose is whose as they are
    renamed = {issuer: name, name: f"{name} (another host)"}

    def named(block: object) -> object:
        if isinstance(block, vocabulary.Reasoning) and block.issuer in renamed:
            return block._replaced({"issuer": renamed[block.issuer]})
        return block

    def concerned(message: object) -> bool:
        return isinstance(message, vocabulary.AssistantMessage) and any(
            isinstance(block, vocabulary.Reasoning) and block.issuer in renamed
            for block in message.content
        )

    if not any(concerned(message) for message in request.messages):
        return request
    messages = tuple(
        message._replaced({"content": tuple(named(block) for block in message.content)})
        if concerned(message)
        else message
        for message in request.messages
    )
    return request._replaced({"messages": messages})


_EXHAUSTED_READERS = {
    "openai_compat": "allama.adapters.openai_compat._errors",
    "openai_responses": "allama.adapters.openai_compat._errors",
    "anthropic": "allama.adapters.anthropic._errors",
}
"""The module whose `exhausted_wait` reads a dialect's rate-limit headers on a successful
answer, as its 429s' are read (Gemini and Ollama send none)."""
_READERS: dict[str, Callable[[Mapping[str, str]], float | None] | None] = {}


def _exhausted_wait(dialect: str, headers: Mapping[str, str]) -> float | None:
    """The seconds until the rate limits an answer's headers say are used up reset (more
    than 0), if any are: a batch run pauses for them (`RATE_LIMIT_RESET_KEY`)."""
    try:
        read = _READERS[dialect]
    except KeyError:
        module = _EXHAUSTED_READERS.get(dialect)
        read = _READERS[dialect] = (
            None if module is None else importlib.import_module(module).exhausted_wait
        )
    if read is None:
        return None
    wait = read(headers)
    return wait if wait is not None and wait > 0 else None


def _noting_reset(response: ChatResponse, wait: float) -> ChatResponse:
    from allama.types._response import ALLAMA_NAMESPACE, RATE_LIMIT_RESET_KEY

    return response.with_provider_data(ALLAMA_NAMESPACE, RATE_LIMIT_RESET_KEY, wait)


def _reset_event(dialect: str, headers: Mapping[str, str]) -> Iterator[StreamEvent]:
    """A stream's note of `_exhausted_wait`, read when it opened, as a provider-data event."""
    wait = _exhausted_wait(dialect, headers)
    if wait is not None:
        from allama.types._response import ALLAMA_NAMESPACE, RATE_LIMIT_RESET_KEY

        yield vocabulary.ProviderDataEvent(
            namespace=ALLAMA_NAMESPACE, key=RATE_LIMIT_RESET_KEY, value=wait
        )


def _issued_response(response: ChatResponse, provider: str) -> ChatResponse:
    """`response` with its signed or encrypted reasoning marked as `provider`'s
    (`Reasoning.issuer`: `HttpProvider.issuer`, its endpoint), so that it goes back there
    alone."""
    if not any(_unmarked(block) for block in response.content):
        return response
    content = tuple(
        block._replaced({"issuer": provider}) if _unmarked(block) else block
        for block in response.content
    )
    return response._replaced({"content": content})


def _unmarked(block: object) -> bool:
    return (
        isinstance(block, vocabulary.Reasoning)
        and block.issuer is None
        and bool(block.signature or block.encrypted_content)
    )


class _Body:
    """A streamed body's chunks, knowing the failure that broke them (told from one the
    decoder raised), for a decoder that says what a break is (`broken`)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self.broken: Error | None = None

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        try:
            return next(self._chunks)
        except Error as error:
            self.broken = error
            raise


class _AsyncBody:
    """The async twin of `_Body`."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks
        self.broken: Error | None = None

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await anext(self._chunks)
        except Error as error:
            self.broken = error
            raise


def _broken(decoder: StreamDecoder, error: Error) -> Iterator[StreamEvent]:
    """The events a decoder gives for its stream broken by `error` after what it was fed
    (`broken`: Gemini's `Finish`, held for the stream's close, once the answer came whole);
    it raises the failure the break is where that is another (the Responses decoder's
    provider error, held while it read on for a terminal event's usage)."""
    said: Callable[[Error], Iterator[StreamEvent]] = getattr(decoder, "broken")  # noqa: B009
    return said(error)


def _issued(event: StreamEvent, provider: str) -> StreamEvent:
    """`event` with the signature or encrypted content it seals reasoning with marked as
    `provider`'s, as `_issued_response` marks a whole response's."""
    if (
        isinstance(event, vocabulary.ReasoningDelta)
        and event.issuer is None
        and (event.signature or event.encrypted_content)
    ):
        return event._replaced({"issuer": provider})
    return event


def _check_utf8(model: str) -> None:
    """Refuse a model name UTF-8 cannot carry (half of a surrogate pair), before sending."""
    try:
        model.encode()
    except UnicodeEncodeError:
        raise InvalidRequestError(
            "the model's name holds a lone surrogate, which UTF-8 cannot carry (text cut "
            "between the halves of a character?)"
        ).mark_authored() from None


# What cannot stand in one URL path segment: a `/` starts another, `?` the query, `#` the
# fragment, `%` an escape, and a control character breaks the request line.
_NOT_IN_A_SEGMENT = re.compile(r"[/?#%\x00-\x1f\x7f]")


def _deployment_segment(model: str, provider: str) -> str:
    """`model`, a deployment's name, as the one path segment of its URL (a space as `%20`);
    refused before sending where it would name another path (`a/../../v1`), cut the path
    (`dep?x=1`, `dep#1`) or is a step of its own (`.`, `..`)."""
    if not model.isascii():
        _check_utf8(model)
    if model in (".", ".."):
        wrong = f"`{model}` alone is a step to this folder or its parent, not a name"
    elif found := _NOT_IN_A_SEGMENT.search(model):
        wrong = f"it holds {found.group()!r}, which a URL path segment cannot carry"
    else:
        from urllib.parse import quote  # here: only a deployment URL needs it

        # A path segment's own characters stay as written; the rest is escaped.
        return quote(model, safe="!$&'()*+,;=:@")
    raise (
        InvalidRequestError(
            f"the model {model!r} cannot be a deployment's name in the URL: {wrong} (a "
            "deployment's name has letters, digits, `-`, `_` and `.`)"
        )
        .mark_authored()
        .with_provider(provider)
        .with_model(model)
    )
