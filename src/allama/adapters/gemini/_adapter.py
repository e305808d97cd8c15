"""The Gemini dialect as an `Adapter`: a profile and a Gemini capability table joined to
the encoder, the decoders and the error mapping of this package (loaded on first use).

On Vertex AI (a base URL of the shape `.../v1*/projects/{p}/locations/{l}/publishers/google`,
or the express mode's `.../v1*/publishers/google`) a model is named as google-genai names
it there: `projects/...` is a full resource name under the versioned root (a tuned model's
endpoint, another project's model), `publishers/...` goes under the project and location,
and `{publisher}/{model}` (`google/gemini-2.5-flash`) is `publishers/{publisher}/models/
{model}`; a bare id and `models/{id}` stay under the base URL's `publishers/google`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import quote

from allama.adapters._adapter import PackageAdapter, table_for
from allama.adapters.gemini._capabilities import CAPABILITY_TABLES, GeminiTable
from allama.adapters.gemini._profile import GeminiProfile
from allama.errors import InvalidRequestError

if TYPE_CHECKING:
    from allama._degradations import Degradations
    from allama.adapters._http import HttpRequest
    from allama.types import ChatRequest

__all__ = ["GenerateContentAdapter", "check_model_name", "make_adapter", "model_path", "vertex_url"]

_SSE = {"alt": "sse"}

_VERTEX_BASE = re.compile(
    r"(?P<root>[a-z][a-z0-9+.-]*://[^/]+(?:/[^/]+)*?/v1[^/]*/)"
    r"(?P<scope>projects/[^/]+/locations/[^/]+/)?publishers/google/?"
)
"""A Vertex AI base URL: the versioned root, then (but in express mode) the project and
location, then Google's publisher."""


def _method(stream: bool) -> str:
    return ":streamGenerateContent" if stream else ":generateContent"


_NOT_IN_A_NAME = re.compile(r"[?#%\x00-\x1f\x7f\ud800-\udfff]")
"""What cuts a URL's path (`?`, `#`), escapes another character (`%`) or is no character a
URL can carry: never part of a model's name."""


def check_model_name(model: str, provider: str | None) -> None:
    """Refuse before sending a `model` that cannot be the path naming it in a URL: one that
    would name another path (a part `.` or `..` between its `/`) or cut it (`g?x=1`, `g#1`)."""
    if step := next((part for part in model.split("/") if part in (".", "..")), None):
        wrong = f"its part `{step}` is a step to this folder or its parent, not a name"
    elif found := _NOT_IN_A_NAME.search(model):
        wrong = f"it holds {found.group()!r}, which a model's name in the URL cannot carry"
    else:
        return
    error = InvalidRequestError(
        f"the model {model!r} cannot be named in the URL: {wrong} (a model's name has "
        "letters, digits, `-`, `_` and `.`, and `/` between its parts)"
    )
    error.mark_authored().with_model(model)
    raise error if provider is None else error.with_provider(provider)


def _quoted(name: str) -> str:
    # Each segment's own characters and the `/` between them stay as written; the rest is
    # escaped (a space as `%20`, as the HTTP client did). A name `check_model_name` refuses
    # is only made harmless here: it is refused before anything is sent.
    return quote(name, safe="/!$&'()*+,;=:@", errors="surrogatepass")


def model_path(model: str) -> str:
    """The path naming `model` under the base URL, quoted: `gemini-2.5-flash`,
    `models/gemini-2.5-flash` and `tunedModels/...` each as Gemini names it."""
    return _quoted(model if "/" in model else f"models/{model}")


def vertex_url(base: str, model: str, *, stream: bool) -> str | None:
    """The URL of a call to `model` under a Vertex AI `base`, when the model is named by a
    resource path of its own there; `None` when `base` is not Vertex AI's, or the model
    goes under its `publishers/google` as on the Gemini API (a bare id, `models/{id}`)."""
    found = _VERTEX_BASE.fullmatch(base)
    if found is None or "/" not in model or model.startswith("models/"):
        return None
    root, scope = found["root"], found["scope"] or ""  # as the base URL wrote them
    if model.startswith("projects/"):
        scope, name = "", model
    elif model.startswith("publishers/"):
        name = model
    else:
        publisher, _, model_id = model.partition("/")
        name = f"publishers/{publisher}/models/{model_id}"
    return f"{root}{scope}{_quoted(name)}{_method(stream)}"


class GenerateContentAdapter(PackageAdapter):
    """`POST {base}/models/{model}:generateContent` (`:streamGenerateContent?alt=sse` for a
    stream), spoken as `profile` says, answered from `table`; on Vertex AI a model named by
    its resource path is called there (see the module docstring)."""

    __slots__ = ()

    package = "allama.adapters.gemini"
    stream_decoder_class = "_stream:GenerateStreamDecoder"

    def path(self, model: str, *, stream: bool) -> tuple[str, Mapping[str, str]]:
        return f"/{model_path(model)}{_method(stream)}", _SSE if stream else {}

    def encode(
        self,
        request: ChatRequest,
        degradations: Degradations,
        *,
        stream: bool,
        url: str,
        headers: Mapping[str, str],
        params: Mapping[str, str],
    ) -> HttpRequest:
        # Here, not in `path`, where the provider that refuses it is not known.
        check_model_name(request.model, degradations.provider)
        # The URL is the base URL and `path`: the base is known only here.
        path, _ = self.path(request.model, stream=stream)
        if url.endswith(path):
            url = vertex_url(url[: -len(path)], request.model, stream=stream) or url
        return super().encode(
            request, degradations, stream=stream, url=url, headers=headers, params=params
        )


def make_adapter(preset_name: str, profile: object, capabilities: object) -> GenerateContentAdapter:
    if not isinstance(profile, GeminiProfile):
        raise TypeError(f"a Gemini preset needs a GeminiProfile, got {profile!r}")
    table = table_for(CAPABILITY_TABLES, GeminiTable, preset_name, "gemini", capabilities, "Gemini")
    return GenerateContentAdapter(profile, table)
