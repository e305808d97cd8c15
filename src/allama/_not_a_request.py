"""The refusal of a call given something other than a `ChatRequest` where one goes.

One wording for every call that takes a request (a provider's `chat`, `achat`, their
streams and dry run, the wrappers', the extraction's): a string, `None` or a dict of
OpenAI's form fails at the call, naming the argument, rather than with an `AttributeError`
on a field the first read of it asks for. It imports nothing: each caller checks with
`isinstance` against the class it already holds, and builds this error only on failure.
"""

from __future__ import annotations

__all__ = ["not_a_request"]


def not_a_request(request: object) -> TypeError:
    """The error for `request` given where a `ChatRequest` goes: named by its type alone
    (its value may be a document's text), with how to build one from a string."""
    hint = " (build one with `ChatRequest(model).user(text)`)" if isinstance(request, str) else ""
    return TypeError(f"request must be a ChatRequest, not {type(request).__name__}{hint}")
