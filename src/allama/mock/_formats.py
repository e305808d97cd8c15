"""Strings of each `format` the test provider knows, valid and distinct, the plainest first.

Each format gives a run of values as long as any set a schema may ask for (dates counting
up from 2000-01-01, UUIDs counting up from the nil UUID, 127.0.0.N, https://example.com/N),
written to meet a minimum length where the format leaves room (a longer name, a longer
path). The values are the ones pydantic's types read: a UUID of the version `uuid4`
names, an `https` URL first for `uri` (which `HttpUrl` and `AnyUrl` both write). A
`multi-host-uri` (pydantic's `PostgresDsn`, `MongoDsn`, `NatsDsn`) is written as a
PostgreSQL URL, the scheme of the first of them; `decimal` is `_values`' own (its digits
come from the schema around it).
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
from collections.abc import Callable, Iterator
from itertools import count, product

from allama.schema._types import (
    COMPLEX_FORMAT,
    DECIMAL_FORMAT,
    FLAG_FORMAT,
    MOMENT_FORMATS,
    NAIVE_DATETIME_FORMAT,
    STRIPPED_FORMAT,
)

__all__ = ["UNENFORCED_MARKS", "format_values", "knows_format", "plain_strings"]

_MANY = 1_000_000
"""The most values one format gives."""
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def plain_strings(shortest: int, longest: int | None) -> Iterator[str]:
    """Strings of lowercase letters, shortest first, then in alphabetical order."""
    size = shortest
    while longest is None or size <= longest:
        if size == 0:
            yield ""
        else:
            for tail in product(_LETTERS, repeat=min(size, 4)):
                yield "a" * (size - len(tail)) + "".join(tail)
        size += 1


def _dates(shortest: int, longest: int | None) -> Iterator[str]:
    start = dt.date(2000, 1, 1)
    for days in range(_MANY // 10):
        yield (start + dt.timedelta(days=days)).isoformat()


def _date_times(shortest: int, longest: int | None) -> Iterator[str]:
    start = dt.datetime(2000, 1, 1)  # written with its offset, `Z`
    # Longer ones carry a fraction of a second (up to nine digits).
    fraction = "." + "0" * min(9, max(1, shortest - 21)) if shortest > 20 else ""
    for seconds in range(_MANY):
        moment = start + dt.timedelta(seconds=seconds)
        yield moment.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


def _naive_date_times(shortest: int, longest: int | None) -> Iterator[str]:
    """`_date_times` with no offset: allama's `naive-date-time`, a `NaiveDatetime`'s."""
    for moment in _date_times(shortest + 1, longest):
        yield moment.removesuffix("Z")


def _times(shortest: int, longest: int | None) -> Iterator[str]:
    for seconds in range(24 * 3600):
        hours, rest = divmod(seconds, 3600)
        yield f"{hours:02}:{rest // 60:02}:{rest % 60:02}Z"


def _durations(shortest: int, longest: int | None) -> Iterator[str]:
    for days in range(1, _MANY):
        yield f"P{days}D"


def _complexes(shortest: int, longest: int | None) -> Iterator[str]:
    """Whole numbers, which `complex` reads (allama's `format: complex`)."""
    for number in range(_MANY):
        yield str(number)


def _emails(shortest: int, longest: int | None) -> Iterator[str]:
    local = "a" * max(1, shortest - 12)
    yield f"{local}@example.com"
    yield f"{local}@a.co"
    for number in range(1, _MANY):
        yield f"{local}{number}@example.com"


def _name_emails(shortest: int, longest: int | None) -> Iterator[str]:
    for email in _emails(max(0, shortest - 4), None):
        yield f"a <{email}>"


def _hostnames(shortest: int, longest: int | None) -> Iterator[str]:
    label = "a" * min(63, max(1, shortest - 12)) + "." if shortest > 11 else ""
    yield f"{label}example.com"
    yield f"{label}a.co"
    for number in range(1, _MANY):
        yield f"{label}a{number}.example.com"


def _https(shortest: int) -> Iterator[str]:
    base = "https://example.com"
    if shortest > len(base):
        base += "/" + "a" * (shortest - len(base) - 1)
    yield base
    for number in range(1, _MANY):
        yield f"{base}/{number}"


def _short_https(shortest: int, longest: int) -> Iterator[str]:
    """`https` URLs of at most `longest` characters, where `example.com` is too long:
    `https://a.co` (12 characters) and longer names, then `https://a` (9) and longer up
    to 11; `HttpUrl` reads them all."""
    for size in range(max(shortest, 12), longest + 1):
        for name in plain_strings(size - 11, size - 11):
            yield f"https://{name}.co"
    for size in range(max(shortest, 9), min(longest, 11) + 1):
        for name in plain_strings(size - 8, size - 8):
            yield f"https://{name}"


def _uris(shortest: int, longest: int | None) -> Iterator[str]:
    if longest is not None and longest < len("https://example.com"):
        yield from _short_https(shortest, longest)
        for name in plain_strings(max(1, shortest - 2), longest - 2):
            yield f"a:{name}"
        return
    yield from _https(shortest)


def _urls(shortest: int, longest: int | None) -> Iterator[str]:
    yield from _https(shortest)


def _uri_references(shortest: int, longest: int | None) -> Iterator[str]:
    if longest is not None and longest < len("https://example.com"):
        yield from plain_strings(shortest, longest)
        return
    https = _https(shortest)
    yield next(https)
    yield ""
    yield from https


def _uri_templates(shortest: int, longest: int | None) -> Iterator[str]:
    yield "https://example.com/{id}"
    for number in range(1, _MANY):
        yield f"https://example.com/{number}/{{id}}"


def _multi_host_uris(shortest: int, longest: int | None) -> Iterator[str]:
    yield "postgresql://localhost/a"
    for number in range(1, _MANY):
        yield f"postgresql://localhost/a{number}"


def _uuids(version: int) -> Callable[[int, int | None], Iterator[str]]:
    """UUIDs counting up: the nil UUID first for `uuid`, the version's bits for `uuidN`."""

    def values(shortest: int, longest: int | None) -> Iterator[str]:
        middle = "0000-0000" if version == 0 else f"{version}000-8000"
        for number in range(_MANY):
            yield f"00000000-0000-{middle}-{number:012x}"

    return values


def _ipv4(suffix: str = "") -> Callable[[int, int | None], Iterator[str]]:
    def values(shortest: int, longest: int | None) -> Iterator[str]:
        for number in range(1, 2**24 - 1):
            yield f"{ipaddress.IPv4Address(0x7F000000 + number)}{suffix}"

    return values


def _ipv6(suffix: str = "") -> Callable[[int, int | None], Iterator[str]]:
    def values(shortest: int, longest: int | None) -> Iterator[str]:
        for number in range(1, _MANY):
            yield f"{ipaddress.IPv6Address(number)}{suffix}"

    return values


def _ipv4_networks(shortest: int, longest: int | None) -> Iterator[str]:
    yield "127.0.0.0/8"
    for number in range(2**16):
        yield str(ipaddress.IPv4Network((0x0A000000 + (number << 8), 24)))


def _json_pointers(shortest: int, longest: int | None) -> Iterator[str]:
    if shortest == 0:
        yield ""
    for name in plain_strings(max(1, shortest - 1), None if longest is None else longest - 1):
        yield f"/{name}"


def _relative_json_pointers(shortest: int, longest: int | None) -> Iterator[str]:
    for number in count():
        yield str(number)


def _nonempty(shortest: int, longest: int | None) -> Iterator[str]:
    yield from plain_strings(max(1, shortest), longest)


def _base64(encode: Callable[[bytes], bytes]) -> Callable[[int, int | None], Iterator[str]]:
    def values(shortest: int, longest: int | None) -> Iterator[str]:
        if shortest == 0:
            yield ""
        for number in count():
            yield encode(str(number).encode()).decode()

    return values


def _directories(shortest: int, longest: int | None) -> Iterator[str]:
    yield from (".", "/")


def _phones(shortest: int, longest: int | None) -> Iterator[str]:
    for number in range(_MANY):
        yield f"+1{number:010d}"


_FORMATS: dict[str, Callable[[int, int | None], Iterator[str]]] = {
    "date": _dates,
    "date-time": _date_times,
    "datetime": _date_times,
    "naive-date-time": _naive_date_times,
    "time": _times,
    "duration": _durations,
    "email": _emails,
    "idn-email": _emails,
    "name-email": _name_emails,
    "hostname": _hostnames,
    "idn-hostname": _hostnames,
    "ipv4": _ipv4(),
    "ipv6": _ipv6(),
    "ipvanyaddress": _ipv4(),
    "ipv4network": _ipv4_networks,
    "ipv6network": _ipv6("/128"),
    "ipvanynetwork": _ipv4_networks,
    "ipv4interface": _ipv4("/8"),
    "ipv6interface": _ipv6("/128"),
    "ipvanyinterface": _ipv4("/8"),
    "uri": _uris,
    "iri": _uris,
    "url": _urls,
    "uri-reference": _uri_references,
    "iri-reference": _uri_references,
    "uri-template": _uri_templates,
    "multi-host-uri": _multi_host_uris,
    "uuid": _uuids(0),
    **{f"uuid{version}": _uuids(version) for version in range(1, 9)},
    "json-pointer": _json_pointers,
    "relative-json-pointer": _relative_json_pointers,
    "regex": _nonempty,
    "byte": _base64(base64.b64encode),
    "base64": _base64(base64.b64encode),
    "base64url": _base64(base64.urlsafe_b64encode),
    "binary": plain_strings,
    "password": plain_strings,
    "strip-whitespace": plain_strings,  # (a stripped string's: no space to strip)
    "path": _nonempty,
    "directory-path": _directories,
    "phone": _phones,
    "complex": _complexes,
}
_FORMATS.update({mark: _FORMATS[fmt] for mark, fmt in MOMENT_FORMATS.items()})
"""allama's marks of a date, time or duration with checks its format does not say (a
bound, past or future): values of the format, which the checks may refuse (`TestProvider`)."""
_OWN = frozenset({DECIMAL_FORMAT})
"""Formats `_values` makes itself."""
UNENFORCED_MARKS = frozenset(
    {
        *MOMENT_FORMATS,
        NAIVE_DATETIME_FORMAT,
        STRIPPED_FORMAT,
        COMPLEX_FORMAT,
        FLAG_FORMAT,
        DECIMAL_FORMAT,
    }
)
"""allama's own formats, each marking a check its schema cannot say: no provider enforces
one (every dialect removes or ignores it with an `approximated` note), so the test
provider says so too, though it writes values of most of them."""


def knows_format(name: str) -> bool:
    """Whether the test provider writes values of this `format` (others get plain text)."""
    return name.lower() in _FORMATS or name.lower() in _OWN


def format_values(name: str, shortest: int, longest: int | None) -> Iterator[str] | None:
    """Values of the format, near `shortest` characters where it has room; `None` for a
    format not known here."""
    make = _FORMATS.get(name.lower())
    return None if make is None else make(shortest, longest)
