"""Types whose schema root is not an object, wrapped where a dialect needs an object root.

OpenAI's strict mode (Chat Completions and Responses) takes only an object at the root of a
response schema, and every tool API takes only an object as a tool's parameters. A list, an
enum, a `Literal`, a union or a scalar is then sent as `{"value": <its schema>}`, strict, and
the answer is unwrapped before it is validated as the caller's type.
"""

from __future__ import annotations

__all__ = ["ROOT_KEY", "ROOT_OPTION"]

ROOT_KEY = "value"
"""The one property of the wrapping object."""

ROOT_OPTION = "allama.extraction.root"
"""Request option set on a derived request whose schema wraps the type: its JSON value is
the key the value is wrapped in (`ROOT_KEY`). Scripted providers read it to answer in the
shape the request asks for; nothing sends it."""
