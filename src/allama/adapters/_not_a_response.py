"""The error of a successful (2xx) body that every decoder refuses alike: one it cannot read
as an answer (no JSON, `[1,2,3]`, an HTML page, an object of another shape)."""

from __future__ import annotations

from allama.errors import REPORTED_USAGE_KEY, ServerError

__all__ = ["not_a_response"]


def not_a_response(
    body: bytes | str,
    why: str,
    *,
    provider: str | None = None,
    model: str | None = None,
    what: str = "a response",
) -> ServerError:
    """A server error to try again, holding the body, for a 2xx body that is not `what`
    (`why` says how). The call was answered, so made, and may be billed with nothing read
    to say what for: an empty usage is reported beside it, its cost unknown rather than
    nothing (as an answer cut off after its status), so a budget stops there. A usage the
    caller reads from the body (`with_reported_usage`) replaces it."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
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
