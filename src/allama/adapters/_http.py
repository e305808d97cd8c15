"""The HTTP request an adapter builds and the HTTP response it reads: plain data, no I/O."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from allama._lazy import deferred_module

if TYPE_CHECKING:
    import pydantic_core

    from allama._degradations import Degradations
    from allama.types import ChatRequest, RequestField, Warning
else:
    # Loaded by the first request body written, not by building a provider.
    pydantic_core = deferred_module("pydantic_core", globals(), "pydantic_core")

__all__ = [
    "HttpRequest",
    "HttpResponse",
    "SECRET_HEADERS",
    "body_message",
    "detail_text",
    "html_heading",
    "http_date",
    "is_secret_header",
    "option_fields",
    "origin",
    "provider_now",
    "read_json",
    "replaced_by_option",
    "rfc3339_seconds",
    "says_status_alone",
    "settings_as_sent",
    "wait_until",
    "wire_json",
]

SECRET_HEADERS = frozenset({"authorization", "api-key", "x-api-key", "x-goog-api-key"})
"""The header names a provider's own key goes in: a caller's header of one of these names
stands in for the key (`HttpProvider._brings_own_auth`)."""

_SECRET_WORDS = (
    "auth",
    "key",
    "token",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "passcode",
    "pwd",
    "cookie",
    "credential",
    "signature",
    "jwt",
    "assertion",
)
"""Words that make a part of a header's name (between `-`, `_` and `.`) name a credential,
as the part, in the plural, or ending it: a gateway's own header (`cf-aig-authorization`,
`Ocp-Apim-Subscription-Key`, `x-portkey-api-key`, `Proxy-Authorization`, `Helicone-Auth`,
`Cf-Access-Jwt-Assertion`, `CB-ACCESS-PASSPHRASE`) is named by none of `SECRET_HEADERS`, and
one written as one word (`X-AccessToken`, `X-AppKey`, `x-apitoken`, `X-ClientSecret`) ends
with one. Parts, not any letters: `x-portkey-provider` names a provider, `x-tokenizer` a
tokenizer and `x-author` an author. Case plays no part, as in HTTP."""

_SECRET_STARTS = ("auth", "passw", "passphrase", "secret", "credential")
"""Beginnings that name a credential whatever follows (`Authorization`, `x-passwordhash`),
but `author` (`x-author`, `X-Authority`); not `token`, which begins `tokenizer`, nor `key`,
which begins `keyboard`."""

_SECRET_PARTS = frozenset({"pass", "sign", "otp"})
"""Words that name a credential only as a whole part (`X-Pass`, `CB-ACCESS-SIGN`, `X-OTP`):
`pass` ends `bypass` and begins `passthrough`, `sign` ends `design`."""

_SECRET_PAIRS = frozenset({("honeycomb", "team")})
"""Two parts together that name a credential though neither does: Honeycomb's key goes in
`X-Honeycomb-Team`."""

_NOT_SECRET = frozenset(
    {
        # Words that end with `key` and open nothing: a gateway's name (`x-portkey-provider`).
        "portkey",
        "monkey",
        "donkey",
        "hockey",
        "jockey",
        "turkey",
        "whiskey",
        "turnkey",
        "hotkey",
    }
)
"""Parts that `_SECRET_WORDS` would take for a credential and that are none. A part that
ends with `tokens` is none either: a count (`x-max-tokens`, `X-Ratelimit-Remaining-Tokens`)."""

_NOT_SECRET_PAIRS = frozenset(
    {
        ("cache", "key"),
        ("idempotency", "key"),
        ("dedup", "key"),
        ("dedupe", "key"),
        ("deduplication", "key"),
        ("routing", "key"),
        ("partition", "key"),
        ("sort", "key"),
        ("pass", "through"),
        ("pass", "thru"),
    }
)
"""Two parts together that name no credential though one of them would: keys that name a
request or a cached answer rather than open anything (`Idempotency-Key`, `cf-aig-cache-key`),
and a proxy's `X-Pass-Through`."""

_ABOUT_A_CREDENTIAL = frozenset(
    {
        "count",
        "id",
        "ids",
        "version",
        "consent",
        "type",
        "name",
        "limit",
        "remaining",
        "reset",
        "used",
        "usage",
        "expires",
        "expiry",
        "expiration",
        "ttl",
        "length",
        "size",
    }
)
"""Last parts of a name that say it holds something about a credential rather than one: its
id (`X-API-KEY-ID`, `x-key-id`), a count (`x-token-count`), a version, or the consent to
cookies (`x-cookie-consent`)."""


def _names_credential(part: str) -> bool:
    """Whether a part of a header's name (lower case) names a credential by its words, a
    number after them aside (`Set-Cookie2`)."""
    word = part.rstrip("0123456789")
    if word.startswith("author") and not word.startswith(("authoriz", "authoris")):
        return False
    if word in _SECRET_PARTS or word.startswith(_SECRET_STARTS):
        return True
    if word.endswith("s") and not word.endswith("tokens"):  # `x-maxtokens` is a count
        word = word[:-1]
    return word not in _NOT_SECRET and word.endswith(_SECRET_WORDS)


def is_secret_header(name: str) -> bool:
    """Whether the value of a header named `name` is taken for a credential: never shown in
    a repr, and cut out of what a provider echoes.

    A part of the name names one (`_names_credential`) unless the part beside it makes it a
    name of something else (`_NOT_SECRET_PAIRS`), and the name does not end with what it
    says about one (`_ABOUT_A_CREDENTIAL`: `x-token-count`), a number aside
    (`X-Hub-Signature-256` is a signature)."""
    lowered = name.lower()
    if lowered in SECRET_HEADERS:
        return True
    parts = [part for part in re.split(r"[-_.]", lowered) if part]
    named = [part for part in parts if not part.isdigit()]
    if named and named[-1] in _ABOUT_A_CREDENTIAL:
        return False
    if any(pair in _SECRET_PAIRS for pair in itertools.pairwise(parts)):
        return True
    return any(
        _names_credential(part)
        and (index == 0 or (parts[index - 1], part) not in _NOT_SECRET_PAIRS)
        and (index + 1 == len(parts) or (part, parts[index + 1]) not in _NOT_SECRET_PAIRS)
        for index, part in enumerate(parts)
    )


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """Method, URL, headers and JSON body. `content` is the body as compact UTF-8 JSON
    (or `raw`, when the body is not JSON).

    The body is read-only: it holds cached schemas (the dialect rewrite's) by reference.
    """

    method: str
    url: str
    headers: Mapping[str, str]
    body: dict[str, Any]
    params: Mapping[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    """The body as bytes instead of JSON (a file upload, or `b""` for a GET)."""
    as_sent: Mapping[str, Any] = field(default_factory=dict)
    """Request settings the body carries otherwise than the request gives them, by
    `ChatRequest` field name: a limit the adapter filled in where the request set none
    (Anthropic's required `max_tokens`), or one the body option replaced. A call's span
    shows these as sent."""

    @property
    def content(self) -> bytes:
        if self.raw is not None:
            return self.raw
        # The compact UTF-8 JSON `json.dumps(body, separators=(",", ":"), ensure_ascii=False)`
        # writes (a float may be spelled differently: `1e-7` for `1e-07`), four times faster.
        try:
            return pydantic_core.to_json(self.body)
        except pydantic_core.PydanticSerializationError as error:
            from allama.errors import InvalidRequestError

            # Half of a surrogate pair (text cut between the halves of an emoji) is no
            # character: UTF-8 cannot carry it, and nothing was sent.
            reason = "a lone surrogate" if "surrogates not allowed" in str(error) else "a value"
            raise InvalidRequestError(
                f"the request cannot be written as JSON: it holds {reason} that UTF-8 cannot "
                "carry (text cut between the halves of a character?)"
            ).mark_authored() from None

    def __repr__(self) -> str:
        shown = {
            key: ("<redacted>" if is_secret_header(key) else value)
            for key, value in self.headers.items()
        }
        return (
            f"HttpRequest(method={self.method!r}, url={self.url!r}, headers={shown!r}, "
            f"body_keys={sorted(self.body)!r})"
        )


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """A complete response: status, lower-cased headers, body bytes."""

    status: int
    headers: Mapping[str, str]
    content: bytes

    def __repr__(self) -> str:
        return f"HttpResponse(status={self.status}, body=<{len(self.content)} bytes>)"


_HTML_START = ("<!doctype html", "<html", "<head", "<body")

_HTML_SIGN = 20
"""The characters from a body's first other than whitespace that `html_heading` reads its
opening tag within."""
_HTML_TITLE = r"(?is)<title[^>]*>(.*?)</title>|<h1[^>]*>(.*?)</h1>"


def body_message(text: str, status: int) -> str:
    """The message of an error body that is not the provider's JSON: the text as it is, or,
    for an HTML page (a proxy's or a gateway's, such as Cloudflare's 502), what its title
    (or heading, or else its words) says rather than the page's markup, at most 200
    characters of it; `HTTP <status>` for an empty body. A web framework's error
    (FastAPI's, Starlette's `{"detail": "Method Not Allowed"}`: a server that is no such
    API, behind a wrong base URL; FastAPI's 422 `{"detail": [{"loc", "msg"}]}`) is its
    `detail`, where the dialect's own shape is not."""
    stripped = text.strip()
    if not stripped:
        return f"HTTP {status}"
    detail = _framework_detail(stripped)
    if detail is not None:
        return detail
    heading = html_heading(stripped)
    if heading is None:
        return stripped
    page = f"{_HTML_PAGE} HTTP {status} {_WITH_A_PAGE}"
    return f"{page}: {heading}" if heading else page


def _framework_detail(text: str) -> str | None:
    """The `detail` of a web framework's error body (`{"detail": "<words>"}`, or a
    validation's problems as the OpenAI dialect reads them: `body.messages: field
    required`), else `None`."""
    if not text.startswith("{") or '"detail"' not in text:
        return None
    try:
        payload = wire_json(text)
    except ValueError:
        return None
    detail = payload.get("detail") if isinstance(payload, dict) else None
    if isinstance(detail, list) and detail:
        return detail_text(detail)
    return detail.strip() if isinstance(detail, str) and detail.strip() else None


def detail_text(detail: Any) -> str:
    """A `detail` in words: its text, or a validation's problems (FastAPI's and Mistral's
    `[{"loc": ["body", "store"], "msg": ...}]`) as `body.store: msg`, each problem's
    `input` (which echoes the request's values) left out; dumped only when unreadable."""
    if isinstance(detail, str):
        return detail
    said: list[str] = []
    for problem in detail if isinstance(detail, list) else ():
        msg = problem.get("msg") if isinstance(problem, dict) else None
        if not isinstance(msg, str) or not msg:
            return json.dumps(detail)
        loc = problem.get("loc")
        where = ".".join(str(part) for part in loc) if isinstance(loc, list) and loc else ""
        said.append(f"{where}: {msg}" if where else msg)
    return "; ".join(said) if said else json.dumps(detail)


def html_heading(text: str) -> str | None:
    """What an HTML page's title (or heading, or else its words) says, at most 200
    characters of it (`""` for a page that says nothing); `None` for a body that is no HTML
    page."""
    stripped = text.strip()
    if not stripped[:_HTML_SIGN].lower().startswith(_HTML_START):
        return None
    import html
    import re

    found = re.search(_HTML_TITLE, stripped)
    heading = "" if found is None else found.group(1) or found.group(2) or ""
    if not heading.strip():
        # No title: the words on the page, without its scripts and styles.
        heading = re.sub(r"(?is)<(script|style)\b.*?</\1\s*>", " ", stripped)
    return " ".join(html.unescape(re.sub(r"<[^>]*>", " ", heading)).split())[:200]


_HTML_PAGE = "the provider answered"
_WITH_A_PAGE = "with an HTML page (not its API's error)"


def _saying_only(status: int, words: str) -> re.Pattern[str]:
    """A message of status `status` that says nothing but what the status says (`words`):
    `body_message`'s of a bodiless answer or a web server's page, a web framework's
    `{"detail": ...}`, Go's `404 page not found`. Numbers alone name nothing (the status,
    Google front end's `Error 404 (Not Found)!!1`): a word beside one would."""
    return re.compile(
        rf"(?i)(?:{_HTML_PAGE} HTTP {status} {re.escape(_WITH_A_PAGE)})?"
        rf"(?:[\W_]|\d|http|error|detail|message|status|code|page|{words})*"
    )


_STATUS_ALONE = {
    # (IIS's `404 - File or directory not found.`: a path it does not serve.)
    404: _saying_only(404, r"not[\W_]+found|file[\W_]+or[\W_]+directory"),
    405: _saying_only(405, r"method|not[\W_]+allowed"),
}
"""By status, a message that says no more than it: a 404's that nothing was found (the
server's answer to a path it does not serve, a base URL missing its `/v1`, not the API's
word on a model or a resource, which would say which), a 405's that the method is not
allowed (a path that takes no POST, another app at the base URL, not the API's word on the
request: DeepInfra refuses JSON mode with a 405 that says so)."""


def says_status_alone(message: str, status: int) -> bool:
    """Whether `message`, of a 404 or a 405, says no more than its status (`_STATUS_ALONE`)."""
    pattern = _STATUS_ALONE.get(status)
    return pattern is not None and pattern.fullmatch(message) is not None


def rfc3339_seconds(stamp: Any) -> float | None:
    """An RFC 3339 time (`2025-07-07T12:00:00Z`) as seconds since the epoch; `None` for
    anything else. RFC 3339 lets the `T` and `Z` be lowercase, which `fromisoformat` does
    not read; a time without an offset is taken as UTC (what providers mean), not as this
    machine's local time."""
    if not isinstance(stamp, str):
        return None
    from datetime import UTC, datetime

    text = stamp.strip()
    if text[-1:] == "z":
        text = text[:-1] + "Z"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def http_date(text: str) -> float | None:
    """An HTTP date (`Date`, a `Retry-After` moment) as seconds since the epoch; `None`
    for anything else. HTTP dates are GMT in all three forms (RFC 9110 5.6.7): one with no
    zone (the asctime form) or with `-0000` is not this machine's local time."""
    from datetime import UTC
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(text)
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return when.timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def provider_now(headers: Mapping[str, str]) -> float | None:
    """The moment of an answer on the provider's clock, from its `Date` header (to the
    second, seconds since the epoch); `None` without one that reads. A moment it gives to
    wait until is read against this, not this machine's clock, which may be minutes off."""
    said = next((value for key, value in headers.items() if key.lower() == "date"), None)
    return http_date(said) if said else None


def origin(url: object) -> tuple[str, bytes, int | None] | None:
    """Scheme, host and port of `url`, as a browser tells one site from another: the host
    in lower case, as IDNA writes it, without a trailing dot; a scheme's default port as
    none (`https://gw:443` is `https://gw`). `None` for a URL that does not read."""
    import httpx2

    try:
        parsed = url if isinstance(url, httpx2.URL) else httpx2.URL(str(url))
    except (httpx2.InvalidURL, TypeError, ValueError):
        return None
    return parsed.scheme, parsed.raw_host.lower().rstrip(b"."), parsed.port


_CLOCKS_AGREE = 2.0
"""Seconds a `Date` may differ from this machine's clock and the two be taken to agree: it
is to the second, and read a moment after it was written."""


_A_DAY = 86_400.0


def wait_until(moment: float, dated: Mapping[str, str], now: float | None = None) -> float:
    """Seconds from now until `moment` (seconds since the epoch), a moment a provider gave
    to wait until, never below 0. Read on the provider's clock where its answer's `Date`
    (in `dated`) says this machine's is off by more than that `Date`'s precision: a clock
    minutes off would wait minutes more, or stop a run over a wait of seconds. Unless the
    `Date` is the wrong one (a proxy's that says 1970): a wait no provider would ask on its
    clock (more than a day, or long past) is read on this machine's. `now` is for tests."""
    import time

    if now is not None:
        return max(0.0, moment - now)
    local = time.time()
    mine = moment - local
    said = provider_now(dated)
    if said is None or abs(said - local) <= _CLOCKS_AGREE:
        return max(0.0, mine)
    theirs = moment - said
    return max(0.0, theirs if _plausible(theirs) else mine)


def _plausible(wait: float) -> bool:
    """A wait a provider would ask: up to a day, or a moment just past (to the second)."""
    return -60.0 <= wait <= _A_DAY


def wire_json(data: bytes | str) -> Any:
    """JSON by the standard library's reader, which takes what pydantic-core refuses (an
    escaped lone surrogate); `ValueError` for what is not JSON, and for JSON nested past
    the interpreter's recursion limit (a gateway's page of brackets), whose
    `RecursionError` is none of allama's errors."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None


def read_json(data: bytes | str) -> Any:
    """JSON by pydantic-core, or by `wire_json` for what pydantic-core refuses (an escaped
    lone surrogate, nesting past its limit); `ValueError` when neither reads it."""
    try:
        return pydantic_core.from_json(data)
    except ValueError:
        return wire_json(data)


def option_fields(
    body: dict[str, Any],
    given: Mapping[str, Any],
    namespace: str,
    *,
    stream: bool,
    degradations: Degradations,
    no_field: str | None = None,
) -> dict[str, Any]:
    """The body option's fields (`given`) to write over `body`: its `tools` added after
    allama's, in `body` (`_with_option_tools`), and its `stream` taken out (`_take_stream`;
    `no_field` names the provider whose body has none)."""
    fields = _with_option_tools(body, given, namespace, degradations)
    _take_stream(
        fields,
        namespace,
        stream=stream,
        sent=body.get("stream"),
        degradations=degradations,
        no_field=no_field,
    )
    return fields


def _with_option_tools(
    body: dict[str, Any], given: Mapping[str, Any], namespace: str, degradations: Degradations
) -> dict[str, Any]:
    """An option's body fields (`given`) to write over `body`, but its `tools`, which are
    added after allama's own: a provider's server tools (web search, code execution) go
    beside the request's functions and an extraction's tool, which a replacement would drop
    without a word. An option's `tools` that is no list (`null`, one tool as an object)
    cannot be added to allama's, and would drop them while a `tool_choice` still forces one
    of them: it is refused on `RequestField.OPTIONS`, and allama's are sent. Without tools
    of allama's in `body`, the option's `tools` go as given."""
    if "tools" not in given or not isinstance(ours := body.get("tools"), list):
        return dict(given)
    fields = {key: value for key, value in given.items() if key != "tools"}
    tools = given["tools"]
    if isinstance(tools, list):
        body["tools"] = [*ours, *tools]
        return fields
    from allama.types import RequestField

    given_text = json.dumps(tools, ensure_ascii=False, separators=(",", ":"), default=repr)
    if len(given_text) > 120:
        given_text = given_text[:117] + "..."
    degradations.refuse(
        RequestField.OPTIONS,
        f"`tools` of the body option `{namespace}` ({given_text}) was not sent: it is not a "
        "list, so it would replace the request's tools (an extraction's tool, where there is "
        "one) rather than go after them",
        instead="the request's tools were sent",
    )
    return fields


def settings_as_sent(
    request: ChatRequest, given: Mapping[str, Any], keys: Mapping[str, str]
) -> dict[str, Any]:
    """The request settings a body carries otherwise than `request` gives them
    (`HttpRequest.as_sent`), by `ChatRequest` field: of `keys` (a field of `temperature`,
    `top_p`, `max_output_tokens`, `seed` and `stop`, to its key in `given`), each that
    `given` holds with another value than the request's.

    `given` holds what went over allama's own values, as the body carries them (a body
    option's fields, or its object of them, such as Ollama's `options`; a limit the adapter
    filled in): a value allama itself sent otherwise says so in a warning, and the span
    leaves it out. A value no setting of its kind can be (a temperature given as a string,
    `null`) is `None`: the span shows none, rather than the request's, which was not sent."""
    found: dict[str, Any] = {}
    for name, key in keys.items():
        if key not in given:
            continue
        value = given[key]
        if name == "stop":
            value = [value] if isinstance(value, str) else value  # (one stop as a string)
            if not (isinstance(value, list) and all(isinstance(one, str) for one in value)):
                value = None
            if (value or None) != (list(request.stop) or None):
                found[name] = value or None
            continue
        kinds = (int, float) if name in ("temperature", "top_p") else int
        if isinstance(value, bool) or not isinstance(value, kinds):
            value = None
        if value != getattr(request, name):
            found[name] = value
    return found


def replaced_by_option(
    request: ChatRequest, field: RequestField, what: str, theirs: Any
) -> Warning:
    """The warning for `what` (a body option's own field) sent in place of allama's for
    `field`: unsupported, as the request's own was not sent. An extraction's record then
    shows its schema not sent, or its tool not forced."""
    from allama.types import RequestField, Warning

    if field is RequestField.RESPONSE_FORMAT:
        said = f"{what} was sent in place of the request's response format, which was not sent"
        return Warning.unsupported(field, said)
    given = json.dumps(theirs, ensure_ascii=False, separators=(",", ":"))
    said = f"{what} ({given}) was sent in place of the request's tool choice"
    choice = request.tool_choice
    if choice is not None and choice.mode in ("tool", "required"):
        forced = f"answer with tool `{choice.name}`" if choice.mode == "tool" else "call a tool"
        said += (
            f", which forced the model to {forced}; the model is no longer forced to unless "
            "the option's choice forces it"
        )
    return Warning.unsupported(field, said)


def _take_stream(
    given: dict[str, Any],
    namespace: str,
    *,
    stream: bool,
    sent: Any,
    degradations: Degradations,
    no_field: str | None = None,
) -> None:
    """Take the body option's `stream` out of `given` (the option's fields, about to be
    written over the body): whether the answer comes whole or as a stream is the call's
    (`chat` or `chat_stream`), which reads it one way only, so `chat` would fail on a stream
    (the usage of a paid answer lost with it). An option's `stream` other than the call's is
    refused on `RequestField.OPTIONS`. `sent` is the body's own `stream` (`None`: none
    sent); `no_field` names the provider whose body has no `stream` (its URL says which)."""
    from allama.types import RequestField

    if "stream" not in given:
        return
    theirs = given.pop("stream")
    if theirs is stream:
        return
    given_text = json.dumps(theirs, ensure_ascii=False, separators=(",", ":"))
    read = "a stream" if stream else "one whole response"
    if no_field is not None:
        how = (
            f"{no_field}'s body has no `stream` (the URL says whether the answer streams), "
            f"and this call reads {read}"
        )
    elif sent is None:
        how = f"this call reads {read}, so no `stream` was sent"
    else:
        how = f"this call reads {read}, so `stream: {json.dumps(sent)}` was sent"
    degradations.refuse(
        RequestField.OPTIONS,
        f"`stream` of the body option `{namespace}` ({given_text}) was not sent: {how} "
        "(`chat_stream` streams, `chat` does not)",
    )
