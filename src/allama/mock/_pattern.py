"""Short strings that match a regular expression, built from Python's own regex parser.

A JSON Schema `pattern` is unanchored, so a string that contains a match is valid. The
sampler walks the parsed pattern and takes the least it can: repeats at their minimum count,
the first branch of an alternation, the first character of a class. Each walk records
those choices, and further strings come from changing one choice at a time (another branch,
one more repeat, the next character), fewest changes first, so that length limits and
negative lookaheads find the string that meets them; a candidate breaking a negative
lookahead changes the first choice it covers next. The number of walks is bounded.
A minimum length is spent on repeats; characters a positive lookahead needs are queued and
spent on the first class that accepts them ("at least one digit").

A string is kept only when the pattern matches it as `_conform` reads it and, where Rust's
`regex` (pydantic's default engine) compiles the pattern, as Rust reads it too. A pattern
in syntax only Rust reads (`\\p{Lu}`, `[[:upper:]]`) is walked as a narrower stand-in that
Python reads (`[A-Z]`), its strings checked by Rust.
"""

from __future__ import annotations

import heapq
import importlib
import re
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any

from allama.mock._conform import compiled, pattern_matches, rust_matches

__all__ = ["PatternSamples", "sample_pattern"]

_parser: Any = importlib.import_module("re._parser")
_compiler: Any = importlib.import_module("re._compiler")

_PREFERRED = (
    "abcdefghijklmnopqrstuvwxyz"
    "0123456789"
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    "_-. @:/+,;!#$%&*=?^~|'\"()[]{}<>\\`"
    " \t"
)
_CATEGORY_CHARS = {
    "CATEGORY_DIGIT": "0123456789",
    "CATEGORY_NOT_DIGIT": "abcdefghij",
    "CATEGORY_WORD": "abcdefghij0123456789_",
    "CATEGORY_NOT_WORD": "-. @:/+,;!",
    "CATEGORY_SPACE": " \t\n",
    "CATEGORY_NOT_SPACE": "abcdefghij",
    "CATEGORY_LINEBREAK": "\n",
    "CATEGORY_NOT_LINEBREAK": "abcdefghij",
}
_MAX_OUTPUT = 10_000
"""The longest string one walk may build."""
_WALKS = 400
"""Walks one pattern's samples may take."""
_WORK = 200_000
"""Characters all the walks for one pattern's samples may build together."""
_CHARS = 32
"""Characters of a class a walk may choose among."""
_REPEATS = 3
"""Extra repetitions beyond a repeat's minimum a walk may choose (a minimum length asks
for more)."""
_BRANCHING = 48
"""Choices of a walk that further walks change, from the first."""


def _name(op: Any) -> str:
    return str(getattr(op, "name", op))


class _TooHard(Exception):
    """The pattern uses something the sampler cannot satisfy."""


class _Walk:
    """One walk of a parsed pattern, taking `choices[k]` at its k-th choice (0 past them)."""

    def __init__(
        self,
        choices: tuple[int, ...],
        extra: int,
        classes: dict[int, tuple[Callable[[str], bool], list[str]]] | None = None,
    ) -> None:
        self.choices = choices
        self.extra = extra
        self.classes: dict[int, tuple[Callable[[str], bool], list[str]]] = (
            {} if classes is None else classes
        )
        """The characters each class offers, by the `id` of its parsed form (shared by
        the walks of one pattern)."""
        self.decisions: list[tuple[int, int]] = []
        """Each choice met: how many options it had, and where in the output it was."""
        self.groups: dict[int, str] = {}
        self.pending: list[str] = []
        self.out: list[str] = []
        self.size = 0
        self.avoid: list[tuple[int, Any]] = []
        """Negative lookaheads met: where, and their parsed body."""

    def decide(self, options: int) -> int:
        index = len(self.decisions)
        self.decisions.append((options, self.size))
        chosen = self.choices[index] if index < len(self.choices) else 0
        return min(chosen, options - 1)

    def emit(self, text: str) -> None:
        self.out.append(text)
        self.size += len(text)
        if self.size > _MAX_OUTPUT:
            raise _TooHard("the sample grew too long")

    def text(self) -> str:
        return "".join(self.out)

    def choose(self, key: int, make: Callable[[], tuple[Callable[[str], bool], str]]) -> str:
        """A character of the class `key` (made by `make`: its test and the characters it
        names first): a queued lookahead need, else the one this walk's choice picks."""
        entry = self.classes.get(key)
        if entry is None:
            accepts, options = make()
            entry = self.classes[key] = (accepts, _fitting(accepts, options))
        accepts, fitting = entry
        for index, wanted in enumerate(self.pending):
            if accepts(wanted):
                del self.pending[index]
                return wanted
        return fitting[self.decide(len(fitting))] if len(fitting) > 1 else fitting[0]

    def run(self, items: Any) -> None:
        for op, arg in items:
            self.step(_name(op), arg)

    def step(self, op: str, arg: Any) -> None:
        if op == "LITERAL":
            self.emit(chr(arg))
        elif op == "NOT_LITERAL":
            self.emit(self.choose(-1 - arg, lambda: (lambda ch: ch != chr(arg), _PREFERRED)))
        elif op == "ANY":
            self.emit(self.choose(0, lambda: (lambda ch: ch != "\n", _PREFERRED)))
        elif op == "IN":
            self.emit(self.choose(id(arg), lambda: (_class_test(arg), _first_options(arg))))
        elif op == "AT":
            return
        elif op == "BRANCH":
            branches = arg[1]
            self.run(branches[self.decide(len(branches))] if len(branches) > 1 else branches[0])
        elif op in ("SUBPATTERN", "ATOMIC_GROUP"):
            group = arg[0] if op == "SUBPATTERN" else None
            body = arg[-1] if op == "SUBPATTERN" else arg
            start = len(self.out)
            self.run(body)
            if group is not None:
                # Only the group's own pieces are joined: a walk stays linear in its text.
                self.groups[group] = "".join(self.out[start:])
        elif op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            self.repeat(arg)
        elif op == "GROUPREF":
            self.emit(self.groups.get(arg, ""))
        elif op == "GROUPREF_EXISTS":
            group, yes, no = arg
            self.run(yes if group in self.groups else (no or []))
        elif op == "ASSERT":
            direction, body = arg
            if direction == 1:
                ahead = _Walk((), 0)
                ahead.run(body)
                needed = ahead.text()
                self.pending.extend(needed[-1:] if needed else "")
        elif op == "ASSERT_NOT":
            direction, body = arg
            if direction == 1:
                self.avoid.append((self.size, body))
        elif op in ("FAILURE", "SUCCESS"):
            return
        else:
            raise _TooHard(f"unsupported regex construct {op}")

    def repeat(self, arg: Any) -> None:
        low, high, body = arg
        maximum = _parser.MAXREPEAT
        room = (_REPEATS if high == maximum else min(high - low, _REPEATS)) if high > low else 0
        times = low + (self.decide(room + 1) if room else 0)
        count = 0
        for _ in range(times):
            self.run(body)
            count += 1
        while high == maximum or count < high:
            wants_length = self.extra > 0
            if not wants_length and not self.pending:
                break
            before, pending = self.size, len(self.pending)
            self.run(body)
            count += 1
            if wants_length:
                self.extra -= self.size - before
            progressed = self.size > before if wants_length else len(self.pending) < pending
            if not progressed or count > _MAX_OUTPUT:
                break


def _fitting(accepts: Callable[[str], bool], options: str) -> list[str]:
    """The characters a walk may choose for a class: those it names first, then others."""
    fitting = list(dict.fromkeys(ch for ch in options if accepts(ch)))
    for ch in _PREFERRED:
        if len(fitting) >= _CHARS:
            break
        if ch not in fitting and accepts(ch):
            fitting.append(ch)
    if not fitting:
        for code in range(0xA1, 0x3000):
            if accepts(chr(code)):
                fitting.append(chr(code))
                if len(fitting) >= 4:
                    break
    if not fitting:
        raise _TooHard("no character fits a class")
    return fitting[:_CHARS]


def _class_test(items: Any) -> Callable[[str], bool]:
    """Whether a character is in a parsed class, its literals and ranges looked up fast."""
    negate = False
    literals: set[int] = set()
    ranges: list[tuple[int, int]] = []
    categories: list[str] = []
    for op, arg in items:
        name = _name(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            literals.add(arg)
        elif name == "RANGE":
            ranges.append(arg)
        elif name == "CATEGORY":
            categories.append(_name(arg))

    def test(ch: str) -> bool:
        code = ord(ch)
        hit = (
            code in literals
            or any(low <= code <= high for low, high in ranges)
            or any(_in_category(category, ch) for category in categories)
        )
        return hit != negate

    return test


def _first_options(items: Any) -> str:
    """Characters a class names outright, in order: its literals and its ranges' starts."""
    options: list[str] = []
    for op, arg in items:
        name = _name(op)
        if name == "LITERAL":
            options.append(chr(arg))
        elif name == "RANGE":
            low, high = arg
            options.extend(chr(code) for code in range(low, min(high, low + 25) + 1))
        elif name == "CATEGORY":
            options.extend(_CATEGORY_CHARS.get(_name(arg), ""))
    return "".join(options)


def _in_category(name: str, ch: str) -> bool:
    if name == "CATEGORY_DIGIT":
        return ch.isdigit()
    if name == "CATEGORY_NOT_DIGIT":
        return not ch.isdigit()
    if name == "CATEGORY_WORD":
        return ch.isalnum() or ch == "_"
    if name == "CATEGORY_NOT_WORD":
        return not (ch.isalnum() or ch == "_")
    if name == "CATEGORY_SPACE":
        return ch.isspace()
    if name == "CATEGORY_NOT_SPACE":
        return not ch.isspace()
    if name == "CATEGORY_LINEBREAK":
        return ch == "\n"
    return ch != "\n"


class PatternSamples:
    """Distinct strings the pattern matches, fewest changed choices first, whose length
    lies within `shortest` and `longest`.

    After iterating, `made` says whether any string matched (of whatever length), and
    `readable` whether the pattern could be walked at all: one neither engine reads is not
    held against a value (`_conform`), so its caller may take any string.
    """

    def __init__(
        self,
        pattern: str,
        *,
        shortest: int = 0,
        longest: int | None = None,
        spend: Callable[[int], None] | None = None,
    ) -> None:
        self.pattern = pattern
        self.shortest = shortest
        self.longest = longest
        self.spend = spend
        """Told the characters each walk built and each check read, so that a caller's
        budget counts them (it may raise to stop the search)."""
        self.made = False
        self.readable = True

    def _accepts(self, walked: str) -> Callable[[str], bool]:
        pattern = self.pattern

        def accepts(text: str) -> bool:
            if walked != pattern and not pattern_matches(walked, text):
                return False
            if not pattern_matches(pattern, text):
                return False
            return rust_matches(pattern, text) is not False

        return accepts

    def __iter__(self) -> Iterator[str]:
        walked = self.pattern if compiled(self.pattern) is not None else _stand_in(self.pattern)
        if walked is None or compiled(walked) is None:
            self.readable = False
            return
        try:
            parsed = _parser.parse(walked)
        except (ValueError, OverflowError, RecursionError):
            self.readable = False
            return
        accepts = self._accepts(walked)
        yield from self._search(parsed, walked, accepts)

    def _search(self, parsed: Any, walked: str, accepts: Callable[[str], bool]) -> Iterator[str]:
        queue: list[tuple[int, int, tuple[int, ...]]] = [(0, 0, ())]
        queued: set[tuple[int, ...]] = {()}
        classes: dict[int, tuple[Callable[[str], bool], list[str]]] = {}
        given: set[str] = set()
        walks = work = order = 0
        while queue and walks < _WALKS and work < _WORK:
            cost, _, choices = heapq.heappop(queue)
            walks += 1
            walk = _Walk(choices, 0, classes)
            texts = _walked(walk, parsed)
            built = walk.size
            if texts and len(texts[0]) < self.shortest:
                longer = _Walk(choices, self.shortest - len(texts[0]), classes)
                texts += _walked(longer, parsed)
                built += longer.size
                texts.append(_pad(walked, texts[-1], self.shortest))
            work += built
            if self.spend is not None:
                self.spend(built)
            repair: tuple[int, ...] | None = None
            for text in dict.fromkeys(texts):
                if text in given:
                    continue
                if self.spend is not None:
                    self.spend(len(text))
                if not accepts(text):
                    if repair is None:
                        repair = _repair(walk, choices, text)
                    continue
                given.add(text)
                self.made = True
                if self.shortest <= len(text) and (
                    self.longest is None or len(text) <= self.longest
                ):
                    yield text
            # A repair is tried before the other walks of its cost: it is the way out.
            children: list[tuple[int, bool, tuple[int, ...]]] = []
            if repair is not None:
                children.append((cost, True, repair))
            last = len(choices) - 1
            for index in range(max(last, 0), min(len(walk.decisions), _BRANCHING)):
                taken = choices[index] if index < len(choices) else 0
                if taken + 1 < walk.decisions[index][0]:
                    padded = choices[:index] + (0,) * max(0, index - len(choices))
                    children.append((cost + 1, False, (*padded, taken + 1)))
            for child_cost, urgent, child in children:
                if child not in queued:
                    queued.add(child)
                    order += 1
                    heapq.heappush(queue, (child_cost, -order if urgent else order, child))


def _repair(walk: _Walk, choices: tuple[int, ...], text: str) -> tuple[int, ...] | None:
    """Choices that change the first character a broken negative lookahead covers."""
    for where, body in walk.avoid:
        try:
            regex = _compiler.compile(body, 0)
            broken = regex.match(text, where) is not None
        except (TypeError, ValueError, AttributeError, IndexError, RecursionError):
            continue
        if not broken:
            continue
        for index, (options, at) in enumerate(walk.decisions):
            taken = choices[index] if index < len(choices) else 0
            if at >= where and taken + 1 < options:
                padded = choices[:index] + (0,) * max(0, index - len(choices))
                return (*padded, taken + 1)
    return None


def _pad(pattern: str, text: str, size: int) -> str:
    """`text` lengthened to `size` where the pattern is open at an end."""
    missing = size - len(text)
    if missing <= 0:
        return text
    if not pattern.endswith("$") and not pattern.endswith(r"\Z"):
        return text + "a" * missing
    if not pattern.startswith("^") and not pattern.startswith(r"\A"):
        return "a" * missing + text
    return text


def sample_pattern(pattern: str, *, length: int = 0, variant: int = 0) -> str | None:
    """The `variant`-th string matching `pattern`, at least `length` characters long where
    the pattern allows it, or `None` when none can be made. Syntax `re` cannot read gives
    `None` here (`PatternSamples` walks stand-ins for it).

    >>> sample_pattern(r"^[A-Z]{2}-\\d{3}$")
    'AA-000'
    """
    if compiled(pattern) is None:
        return None
    for shortest in dict.fromkeys((length, 0)):
        for index, text in enumerate(PatternSamples(pattern, shortest=shortest)):
            if index == variant:
                return text
    return None


# Stand-ins for syntax only Rust's `regex` reads


_SAMPLE_ALPHABET = (
    "".join(chr(code) for code in range(0x20, 0x7F))
    + "\t\n"
    + "".join(chr(code) for code in range(0xA0, 0x100))
    + "".join(chr(code) for code in (*range(0x3B1, 0x3B5), *range(0x391, 0x395)))
    + "".join(chr(code) for code in (*range(0x430, 0x434), *range(0x410, 0x414)))
    + "".join(chr(code) for code in (0x4E00, 0x4E8C, 0x3042, 0x30A2, 0xAC00, 0x5D0, 0x627))
    + "".join(chr(code) for code in (0x660, 0x661, 0x20AC, 0x2028, 0x2029, 0x200B))
)
"""Characters a Unicode class of Rust's stands in for: a few of every common kind."""

_POSIX: dict[str, Callable[[str], bool]] = {
    "alnum": lambda ch: ch.isascii() and ch.isalnum(),
    "alpha": lambda ch: ch.isascii() and ch.isalpha(),
    "ascii": lambda ch: ch.isascii(),
    "blank": lambda ch: ch in " \t",
    "cntrl": lambda ch: ord(ch) < 0x20 or ord(ch) == 0x7F,
    "digit": lambda ch: "0" <= ch <= "9",
    "graph": lambda ch: "!" <= ch <= "~",
    "lower": lambda ch: "a" <= ch <= "z",
    "print": lambda ch: " " <= ch <= "~",
    "punct": lambda ch: ch.isascii() and ch in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    "space": lambda ch: ch in " \t\n\r\f\v",
    "upper": lambda ch: "A" <= ch <= "Z",
    "word": lambda ch: ch.isascii() and (ch.isalnum() or ch == "_"),
    "xdigit": lambda ch: ch in "0123456789abcdefABCDEF",
}

_CATEGORY_NAMES = {
    "letter": "L",
    "casedletter": "L&",
    "uppercaseletter": "Lu",
    "lowercaseletter": "Ll",
    "titlecaseletter": "Lt",
    "modifierletter": "Lm",
    "otherletter": "Lo",
    "mark": "M",
    "number": "N",
    "decimalnumber": "Nd",
    "digit": "Nd",
    "letternumber": "Nl",
    "othernumber": "No",
    "punctuation": "P",
    "connectorpunctuation": "Pc",
    "dashpunctuation": "Pd",
    "openpunctuation": "Ps",
    "closepunctuation": "Pe",
    "otherpunctuation": "Po",
    "symbol": "S",
    "mathsymbol": "Sm",
    "currencysymbol": "Sc",
    "othersymbol": "So",
    "separator": "Z",
    "spaceseparator": "Zs",
    "other": "C",
    "control": "Cc",
    "format": "Cf",
}
_SCRIPTS: dict[str, Callable[[str], bool]] = {
    "latin": lambda ch: ch.isalpha() and (ch.isascii() or 0xC0 <= ord(ch) <= 0x24F),
    "greek": lambda ch: 0x370 <= ord(ch) <= 0x3FF and ch.isalpha(),
    "cyrillic": lambda ch: 0x400 <= ord(ch) <= 0x4FF,
    "han": lambda ch: 0x4E00 <= ord(ch) <= 0x9FFF,
    "hiragana": lambda ch: 0x3041 <= ord(ch) <= 0x309F,
    "katakana": lambda ch: 0x30A0 <= ord(ch) <= 0x30FF,
    "hangul": lambda ch: 0xAC00 <= ord(ch) <= 0xD7A3,
    "hebrew": lambda ch: 0x5D0 <= ord(ch) <= 0x5EA,
    "arabic": lambda ch: 0x620 <= ord(ch) <= 0x64A,
}
_PROPERTIES: dict[str, Callable[[str], bool]] = {
    "alphabetic": str.isalpha,
    "alpha": str.isalpha,
    "uppercase": str.isupper,
    "upper": str.isupper,
    "lowercase": str.islower,
    "lower": str.islower,
    "whitespace": str.isspace,
    "space": str.isspace,
    "ascii": str.isascii,
    "any": lambda ch: True,
}


def _unicode_class(name: str) -> Callable[[str], bool] | None:
    """The test for a character of Rust's `\\p{name}`, or `None` for a name not known."""
    key = name.replace(" ", "").replace("_", "").replace("-", "").lower()
    for prefix in ("gc=", "generalcategory=", "sc=", "script=", "scx=", "scriptextensions="):
        if key.startswith(prefix):
            key = key[len(prefix) :]
    short = {code.lower(): code for code in _CATEGORY_NAMES.values()}
    category = _CATEGORY_NAMES.get(key) or short.get(key)
    if category == "L&":
        return lambda ch: unicodedata.category(ch) in ("Lu", "Ll", "Lt")
    if category is not None:
        return lambda ch: unicodedata.category(ch).startswith(category)
    return _SCRIPTS.get(key) or _PROPERTIES.get(key)


def _chars(test: Callable[[str], bool], *, negate: bool = False) -> str | None:
    """The stand-in characters of a class, escaped for inside `[...]`."""
    kept = [ch for ch in _SAMPLE_ALPHABET if test(ch) != negate]
    if not kept:
        return None
    return "".join(f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else ch for ch in kept)


def _stand_in(pattern: str) -> str | None:
    """A pattern Python's `re` reads, matching only strings Rust's reading also matches
    (`\\p{Lu}` as `[A-Z...]`, `[[:digit:]]` as `[0-9]`); `None` when there is none."""
    out: list[str] = []
    leading = ""
    index, depth = 0, 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            letter = pattern[index + 1]
            if letter in "pP":
                if pattern.startswith("{", index + 2):
                    end = pattern.find("}", index + 3)
                    if end < 0:
                        return None
                    name, after = pattern[index + 3 : end], end + 1
                else:
                    name, after = pattern[index + 2 : index + 3], index + 3
                negate = letter == "P"
                if name.startswith("^"):
                    name, negate = name[1:], not negate
                test = _unicode_class(name)
                chars = None if test is None else _chars(test, negate=negate)
                if chars is None:
                    return None
                out.append(chars if depth else f"[{chars}]")
                index = after
                continue
            if letter == "z":
                out.append("\\Z")
            elif letter == "x" and pattern.startswith("{", index + 2):
                end = pattern.find("}", index + 3)
                try:
                    code = int(pattern[index + 3 : end], 16)
                    out.append(f"\\U{code:08x}")
                except ValueError:
                    return None
                index = end + 1
                continue
            else:
                out.append(pattern[index : index + 2])
            index += 2
            continue
        if depth:
            if pattern.startswith("[:", index):
                end = pattern.find(":]", index + 2)
                if end < 0:
                    return None
                name = pattern[index + 2 : end]
                negate = name.startswith("^")
                test = _POSIX.get(name.lstrip("^"))
                chars = None if test is None else _chars(test, negate=negate)
                if chars is None:
                    return None
                out.append(chars)
                index = end + 2
                continue
            if char == "[" or pattern[index : index + 2] in ("&&", "--", "~~"):
                return None  # a nested class or a set operation: not worth a stand-in
            if char == "]":
                depth = 0
            out.append(char)
            index += 1
            continue
        if char == "[":
            depth = 1
            out.append(char)
            index += 1
            if pattern.startswith("^", index):
                out.append("^")
                index += 1
            if pattern.startswith("]", index):
                out.append("\\]")
                index += 1
            continue
        flags = _INLINE_FLAGS.match(pattern, index)
        if flags is not None:
            # Rust sets flags from here on; Python only at the start (broader: checked).
            leading += flags.group(1).replace("U", "").replace("R", "")
            index = flags.end()
            continue
        if pattern.startswith("(?<", index) and pattern[index + 3 : index + 4] not in ("=", "!"):
            out.append("(?P<")
            index += 3
            continue
        out.append(char)
        index += 1
    return (f"(?{leading})" if leading else "") + "".join(out)


_INLINE_FLAGS = re.compile(r"\(\?([imsxUR]+)\)")
"""Flags set inline for the rest of the pattern (`(?i)`), as Rust reads them anywhere."""


def _walked(walk: _Walk, parsed: Any) -> list[str]:
    """The text `walk` makes of `parsed`, or none where it cannot make one."""
    try:
        walk.run(parsed)
    except (_TooHard, RecursionError, ValueError, OverflowError, TypeError):
        return []
    return [walk.text()]
