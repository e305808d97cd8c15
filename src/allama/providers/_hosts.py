"""A server address as Ollama's own tools read `OLLAMA_HOST`, made a base URL.

`OLLAMA_HOST` is written for the server as much as for its clients: `0.0.0.0:11434` (listen
everywhere), `127.0.0.1`, `:8080`, `example.com:11434/ollama`, `https://ollama.example.com`.
Ollama reads it as `[scheme://]host[:port][/path]`, with quotes and spaces trimmed, `http`
and its port (11434 for Ollama) when the scheme is left out, and `127.0.0.1` when the host
is. A client cannot reach a wildcard address (`0.0.0.0`, `::`) everywhere (Windows refuses
it), and a server listening there listens on this machine too, so it is read as loopback.
"""

from __future__ import annotations

__all__ = ["host_url"]

_LOOPBACK = "127.0.0.1"
_WILDCARDS = {"0.0.0.0": _LOOPBACK, "::": "[::1]", "[::]": "[::1]"}


def _host_and_port(hostport: str) -> tuple[str, str | None]:
    """`host[:port]`, an IPv6 address with or without brackets among them."""
    if hostport.startswith("["):
        close = hostport.find("]")
        if close > 0:
            host, rest = hostport[: close + 1], hostport[close + 1 :]
            return host, rest[1:] if rest.startswith(":") and rest[1:] else None
    if hostport.count(":") > 1:
        return f"[{hostport}]", None  # a bare IPv6 address
    host, colon, port = hostport.partition(":")
    return host, port if colon and port else None


def host_url(value: str, default_port: int) -> str:
    """The base URL `value` names, read as Ollama reads `OLLAMA_HOST`.

    >>> host_url("0.0.0.0:11434", 11434)
    'http://127.0.0.1:11434'
    >>> host_url("example.com", 11434)
    'http://example.com:11434'
    >>> host_url(":8080", 11434)
    'http://127.0.0.1:8080'
    >>> host_url("https://ollama.example.com/", 11434)
    'https://ollama.example.com'
    >>> host_url("ollama.com", 11434)  # Ollama's cloud, as its own tools read it
    'https://ollama.com'
    """
    text = value.strip().strip("\"'").strip()
    scheme, separator, rest = text.partition("://")
    if not separator and text == "ollama.com":
        return "https://ollama.com"  # over TLS: the key of its cloud goes with every request
    if not separator:
        scheme, rest = "http", text
    hostport, _, path = rest.partition("/")
    host, port = _host_and_port(hostport)
    host = _WILDCARDS.get(host, host) or _LOOPBACK
    if port is None and not separator:
        port = str(default_port)
    url = f"{scheme}://{host}" + (f":{port}" if port else "")
    path = path.strip("/")
    return f"{url}/{path}" if path else url
