"""Checks of the arguments of `allama.provider(...)`, made when the provider is built.

A wrong argument fails there, naming the argument and what it takes, rather than at the
first call. Messages never quote a key or a header value (they may be secrets), nor a URL
(its path or query may carry an account id or a key).
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from allama._lazy import deferred_module

if TYPE_CHECKING:
    import httpx2
else:
    # Loaded only to check a URL the caller gave, with the parser that will send to it.
    httpx2 = deferred_module("httpx2", globals(), "httpx2")

__all__ = ["check_headers", "check_key", "check_text", "check_url"]

_UNSAFE = ("\r", "\n", "\x00")
_TOKEN = frozenset(f"{string.ascii_letters}{string.digits}!#$%&'*+-.^_`|~")
"""The characters of an HTTP field name (RFC 9110's `token`): httpx2 refuses any other at
every call, as a network error that retrying cannot mend."""


def _kind(value: Any) -> str:
    return type(value).__name__


def _around(name: str) -> ValueError:
    """The error for a value with whitespace or a line break around it, which would go
    out as written (in a URL, a query or a header) and fail there, or at the server."""
    return ValueError(
        f"{name} has a line break or whitespace around it; pass the value alone "
        "(a value read from a file often ends with a newline)"
    )


def _not_ascii(name: str) -> ValueError:
    """The error for a header value HTTP cannot carry: httpx2 sends header values as ASCII,
    and would fail at every call, outside allama's errors."""
    return ValueError(
        f"{name} has a character outside ASCII (a quote or dash pasted from a document?), "
        "which an HTTP header cannot carry"
    )


def check_text(name: str, value: Any) -> None:
    """`value` is `None` or a non-empty string, without whitespace around it."""
    if value is None:
        return
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {_kind(value)}")
    if not value.strip():
        raise ValueError(f"{name} is empty; leave it out to use the default")
    if value != value.strip():
        raise _around(name)


def key_fault(value: str) -> Literal["around", "nul", "break", "ascii"] | None:
    """What keeps a key or token out of a header: space or a line break around it, a NUL, a
    line break in it, a character outside ASCII; `None` when it can go. One reading for a
    key given (`check_key`) and a token a function returns, each worded as its own."""
    if value != value.strip():
        return "around"
    if "\x00" in value:
        return "nul"
    if any(char in value for char in _UNSAFE):
        return "break"
    if not value.isascii():
        return "ascii"
    return None


def check_key(value: Any, *, name: str = "api_key") -> None:
    """A key or token: a string fit for a header, sent as given."""
    if value is None:
        return
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string (the key itself), got {_kind(value)}")
    if not value.strip():
        # An empty key given (`api_key=os.getenv("X", "")`) would switch the environment's
        # off, and the first call say none was set.
        raise ValueError(
            f"{name} is empty; leave it out"
            + (" to use the key from the environment" if name == "api_key" else "")
        )
    fault = key_fault(value)
    if fault == "around":
        raise ValueError(
            f"{name} has a line break or whitespace around it; pass the key alone "
            "(a key read from a file often ends with a newline)"
        )
    if fault == "nul":
        raise ValueError(f"{name} has a NUL character (U+0000) in it; pass the key alone")
    if fault == "break":
        raise ValueError(f"{name} has a line break in it; pass the key alone")
    if fault == "ascii":
        raise _not_ascii(name)


def check_url(name: str, value: Any) -> None:
    """An absolute http(s) URL with a host, and no fragment."""
    if value is None:
        return
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, an http:// or https:// URL, got {_kind(value)}")
    if value != value.strip():
        raise _around(name)
    if "#" in value:
        # A fragment is never sent: the calls would go to the URL before it, the key with
        # them (`https://evil.example#@api.openai.com/v1` reads as OpenAI's, and is not).
        raise ValueError(
            f"{name} has a `#` in it, which begins a fragment no request sends: the calls "
            "would go to the URL before it; pass the URL alone, such as "
            "https://api.example.com/v1"
        )
    try:
        url = httpx2.URL(value)
    except httpx2.InvalidURL:
        raise ValueError(f"{name} is not a valid URL") from None
    if url.scheme not in ("http", "https"):
        shown = f"`{url.scheme}`" if url.scheme else "none"
        raise ValueError(
            f"{name} must start with http:// or https:// (its scheme is {shown}), "
            "such as https://api.example.com/v1"
        )
    if not url.host:
        raise ValueError(f"{name} has no host, such as https://api.example.com/v1")
    if url.port is not None and not 1 <= url.port <= _MAX_PORT:
        # Else each call fails outside allama's errors (async), or goes to port 80 (`:0`).
        raise ValueError(f"{name} has port {url.port}, outside 1-{_MAX_PORT}")
    if not _resolvable(url.raw_host):
        raise ValueError(
            f"{name} has a host that is no valid name (an empty label, as in `a..b`, one "
            f"over {_MAX_LABEL} characters, or over {_MAX_HOST} in all)"
        )


_MAX_PORT = 65535
_MAX_LABEL = 63
_MAX_HOST = 253


def _resolvable(host: bytes) -> bool:
    """Whether a name lookup takes `host` (as sent: IDNA-encoded): each label 1 to 63
    characters, 253 in all, a final `.` aside. Else the lookup fails at every call, outside
    allama's errors in sync code (the `idna` codec's UnicodeError). An IP literal passes."""
    name = host.decode("ascii", "replace")
    if ":" in name:  # (an IPv6 address, which httpx2 has checked)
        return True
    name = name.removesuffix(".")
    labels = name.split(".")
    return len(name) <= _MAX_HOST and all(0 < len(label) <= _MAX_LABEL for label in labels)


def check_headers(value: Any) -> None:
    """Extra headers: a mapping of names to string values, each fit for a header."""
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise TypeError(f"headers must be a mapping of header names to strings, got {_kind(value)}")
    for key, item in value.items():
        if not isinstance(key, str) or not key or not _TOKEN.issuperset(key):
            raise TypeError(
                f"headers must have header names as keys (letters, digits and "
                f"!#$%&'*+-.^_`|~, no spaces), got {_kind(key)} {key!r}"
            )
        if not isinstance(item, str):
            raise TypeError(f"headers[{key!r}] must be a string, got {_kind(item)}")
        if any(char in item for char in _UNSAFE):
            raise ValueError(f"headers[{key!r}] has a line break in its value")
        if item != item.strip(" \t"):  # httpx2 refuses it at every call, as a network error
            raise _around(f"headers[{key!r}]")
        if not item.isascii():
            raise _not_ascii(f"headers[{key!r}]")
