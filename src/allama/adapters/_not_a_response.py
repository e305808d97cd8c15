"""The error of a successful (2xx) body that every decoder refuses alike: one it cannot read
as an answer (no JSON, `[1,2,3]`, an HTML page, an object of another shape)."""

from __future__ import annotations

from allama.adapters._http import html_heading
from allama.errors import REPORTED_USAGE_KEY, ServerError

__all__ = ["not_a_response", "not_a_stream"]

_HTML_ADVICE = "check the base URL, or a proxy in between"
"""What to check where a 2xx answer is an HTML page (a proxy's sign-in page, a web server's
where the API is not): the address, or what stands between."""


def not_a_response(
    body: bytes | str,
    why: str,
    *,
    provider: str | None = None,
    model: str | None = None,
    what: str = "a response",
) -> ServerError:
    """A server error to try again, holding the body, for a 2xx body that is not `what`
    (`why` says how; an HTML page is said to be one, with its title and where to look).
    The call was answered, so made, and may be billed with nothing read to say what for:
    an empty usage is reported beside it, its cost unknown rather than nothing (as an
    answer cut off after its status), so a budget stops there. A usage the caller reads
    from the body (`with_reported_usage`) replaces it."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    why = _html_page(text, ", not JSON") or why
    return _unreadable(text, why, what, provider, model)


def not_a_stream(
    body: bytes | str, *, provider: str | None = None, model: str | None = None
) -> ServerError:
    """`not_a_response` for a streamed call answered with an HTML page (its first bytes
    said so; read whole): what a call not streamed raises for it, rather than a stream that
    ended early (which counts nothing paid)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    why = _html_page(text) or f"it is an HTML page ({_HTML_ADVICE})"
    return _unreadable(text, why, "a stream", provider, model)


def _html_page(text: str, instead: str = "") -> str | None:
    """Why a body that is an HTML page is no answer: said to be one, what its title (or
    heading, or words) says, and where to look, as an error status's page is said
    (`body_message`); `None` for a body that is no HTML page."""
    heading = html_heading(text)
    if heading is None:
        return None
    said = f"it is an HTML page{instead} ({_HTML_ADVICE})"
    return f"{said}: {heading}" if heading else said


def _unreadable(
    text: str, why: str, what: str, provider: str | None, model: str | None
) -> ServerError:
    error = (
        ServerError(f"the provider answered with a body that is not {what}: {why}")
        .mark_authored()
        .with_body(text)
        .with_metadata(REPORTED_USAGE_KEY, {})
    )
    if provider is not None:
        error.with_provider(provider)
    if model is not None:
        error.with_model(model)
    return error
