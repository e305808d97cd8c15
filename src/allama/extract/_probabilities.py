"""How likely each option of a decision was, from the token log-probabilities reported.

The answer is spelled by tokens; at each of them the provider lists the likeliest
alternatives. Walking the answer's tokens from where the option starts, every listed
alternative opens a branch: the text written so far plus that token. A branch only one
option can still complete is that option's (its probability is the product of the
probabilities along the way); a branch no option can complete is outside the options; a
branch several options share, one whose text cannot be told (a token given without its
bytes whose text does not show them, or given U+FFFD's bytes for part of a character where
no option writes U+FFFD), or the probability the provider did not list at all, cannot be
followed and is counted as `unresolved`. A token that writes nothing (llama.cpp's
end of generation, a special token such as `<|end|>` given without bytes) ends the output.
The walk ends at the token after which only the chosen option can follow: under a grammar
(or an enum enforced exactly) the rest is forced. Where the option's first token also writes
the text before it (`":"b`), an alternative that writes that text otherwise (`": "`) may
still lead to any option: it is `unresolved`.

A plain answer the prompt alone holds to the options is read trimmed, so its walk starts
at the output's first token and a branch is read as the answer would be: space before and
after an option is that option's, and space alone may yet become any option. Nothing holds
such an answer to the options, so any text may follow a branch (`Yes, but`): a branch is an
option's only once it has ended (a token that writes nothing), one that has not ended and
may still become an option is `unresolved`, and the walk follows the chosen tokens to the
end of the output, whose end, unless a token that writes nothing shows it, is `unresolved`
too. A JSON answer no exact constraint holds (its enforcement approximate or not enforced)
may likewise be any string: a branch is an option's only once it has written the whole
option and its closing quote, one that leaves the option's spelling at an escape (`caf\\`,
which may yet be `caf\\u00e9`, `café`) may still become it, and the walk follows the
chosen tokens to that quote. There a token of no text and no bytes may be part of a
character (newer vLLM lists one so) as well as the end: `unresolved` too.

So each option's probability is measured from numbers the provider gave, never guessed: it
is exact when nothing was left unresolved, and any option's true probability is higher by
at most `unresolved`. Probabilities are conditional on the text before the answer (a JSON
wrapper, an opening quote), which is the same for every option.
"""

from __future__ import annotations

import codecs
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from allama.types import TokenAlternative, TokenLogprob

__all__ = ["Measured", "Spelling", "json_string_span", "measure"]


@dataclass(frozen=True, slots=True)
class Spelling:
    """Where the chosen label sits in the output text, and how any label would be written
    there: as plain text (nothing may follow) or inside a JSON string (a closing quote,
    then anything)."""

    start: int
    """Character offset of the label's first character in the output text."""
    json: bool
    trimmed: bool = False
    """A plain answer read trimmed, as one held to the options by the prompt alone is: the
    whole output is read, from its first token (`start` aside), and since nothing holds it
    to the options, a branch is an option's only once it has ended. Otherwise the option is
    written as it is at `start` (a JSON string, a grammar's or an enum's plain answer)."""
    held: bool = True
    """Whether the answer written as it is was held to the options (a grammar, an enum
    enforced exactly): a branch only one option can still complete is then that option's.
    Otherwise any text may follow a branch: it is an option's only once it has ended (a
    JSON string: its closing quote written; plain text: a token that writes nothing)."""

    def written(self, label: str) -> bytes:
        if self.json:
            return json.dumps(label, ensure_ascii=False)[1:-1].encode("utf-8")
        return label.encode("utf-8")

    @property
    def closing(self) -> bytes:
        return b'"' if self.json else b""


@dataclass(frozen=True, slots=True)
class Measured:
    probabilities: dict[str, float]
    """Every label, with the probability of the branches that lead to it alone."""
    unresolved: float
    """Probability the walk could not attribute: unlisted, shared by several options, or on
    a branch that may yet become an option or none."""
    unlisted: frozenset[str] = frozenset()
    """Labels no listed branch led to alone: their figure is a least, not a measure (an
    option listed at a probability of 0, or one that rounds to it, is listed)."""


def measure(
    tokens: Sequence[TokenLogprob],
    text: str,
    labels: Sequence[str],
    chosen: str,
    spelling: Spelling,
) -> Measured | str:
    """The options' probabilities, or why they cannot be measured from these tokens."""
    written = text.encode("utf-8")
    spans: list[tuple[int, bytes]] = []
    offset = 0
    for token in tokens:
        piece = token.utf8()
        spans.append((offset, piece))
        offset += len(piece)
    if offset != len(written) or b"".join(piece for _, piece in spans) != written:
        return "the tokens the provider reported do not spell the output"
    if spelling.trimmed:
        if text.strip() != chosen.strip():
            return "the answer is not written in the output as its option is"
        start, before = 0, b""
        fitting = _trimmed_reader(labels)
    else:
        start = len(text[: spelling.start].encode("utf-8"))
        before = written[:start]
        whole = before + spelling.written(chosen) + spelling.closing
        if not written.startswith(whole) and not (not spelling.json and written == whole):
            return "the answer is not written in the output as its option is"
        fitting = _written_reader(before, labels, spelling)
    closes = _closer(before, spelling)
    masses = dict.fromkeys(labels, 0.0)
    seen: set[str] = set()
    unresolved = 0.0
    path = 0.0  # log-probability of the chosen tokens from the answer's first token on
    index = next((i for i, (at, piece) in enumerate(spans) if at + len(piece) > start), None)
    if index is None:
        return "the tokens the provider reported do not reach the answer"
    while True:
        if index >= len(spans):
            # The output ended: for plain text that is the end of the option (its
            # probability, the model's choice to stop, was not reported).
            return _ended(masses, unresolved + math.exp(path), seen)
        at, piece = spans[index]
        token = tokens[index]
        so_far = written[:at]
        reach = math.exp(path)
        listed = math.exp(token.logprob)
        for branch, probability in _distinct(token, spelling):
            if branch == piece:
                continue
            # What the tokens at one place list sums to at most 1 (a provider that lists one
            # token twice).
            probability = min(probability, max(0.0, 1.0 - listed))
            weight = reach * probability
            listed += probability
            if branch is None:  # what it writes cannot be told: it may be any option's
                unresolved += weight
                continue
            reached = so_far + branch
            if _departs(reached, before):  # the wrapper written otherwise: any option may follow
                unresolved += weight
                continue
            if _replaced(reached, len(so_far), fitting):  # part of a character, shown as U+FFFD
                unresolved += weight
                continue
            options = fitting(reached, not branch)
            if len(options) == 1 and closes(reached, not branch, options[0]):
                masses[options[0]] += weight
                seen.add(options[0])
            elif options:
                unresolved += weight
        unresolved += reach * max(0.0, 1.0 - listed)
        options = fitting(so_far + piece, not piece)
        if chosen not in options:
            return "the tokens the provider reported do not spell the answer"
        if options == [chosen] and closes(so_far + piece, not piece, chosen):
            masses[chosen] += math.exp(path + token.logprob)
            seen.add(chosen)
            return _ended(masses, unresolved, seen)
        path += token.logprob
        index += 1


def _departs(branch: bytes, before: bytes) -> bool:
    """Whether `branch` leaves the text written before the label (the option's first token
    may also write the end of a JSON wrapper) before reaching the label."""
    return not before.startswith(branch) and not branch.startswith(before)


_Closer = Callable[[bytes, bool, str], bool]
"""Whether a text starting with these bytes (with `True`: one that ends there), which only
this option can still be read as, is that option's."""


def _closer(before: bytes, spelling: Spelling) -> _Closer:
    """Under a grammar (or an enum enforced exactly), a branch only one option can still
    follow is that option's: the rest is forced. Nothing holds a trimmed answer, or one
    whose constraint is not exact, to the options: any text may follow a branch, so it is
    an option's only once it has ended, which a JSON string does at its closing quote."""
    if spelling.held and not spelling.trimmed:
        return lambda branch, ended, label: True
    if spelling.json:
        return lambda branch, ended, label: branch.startswith(
            before + spelling.written(label) + spelling.closing
        )
    return lambda branch, ended, label: ended


_Reader = Callable[[bytes, bool], list[str]]
"""The options a text starting with these bytes can still be read as (with `True`: a text
that ends there)."""


def _written_reader(before: bytes, labels: Sequence[str], spelling: Spelling) -> _Reader:
    """Options written as they are, after `before`. A JSON string nothing holds exactly may
    spell an option with escapes (`caf\\u00e9` is `café`): a branch that leaves an option's
    spelling at an escape may still be that option."""
    full = {label: before + spelling.written(label) + spelling.closing for label in labels}
    escapes = spelling.json and not spelling.held

    def fits(branch: bytes, label: str, ended: bool) -> bool:
        whole = full[label]
        if ended:
            return not spelling.json and branch == whole
        if whole.startswith(branch):
            return True
        if spelling.json:
            return branch.startswith(whole) or (escapes and _escapes(branch, whole, len(before)))
        # Plain text: space after the whole option ends it, as the answer is read trimmed.
        return branch.startswith(whole) and not branch[len(whole) :].strip()

    return lambda branch, ended: [label for label in labels if fits(branch, label, ended)]


def _escapes(branch: bytes, whole: bytes, start: int) -> bool:
    """Whether `branch` leaves `whole` (an option's JSON string from `start`, closed) inside
    the string where either writes an escape: there the two may still be one text."""
    at = start
    while at < len(branch) and at < len(whole) and branch[at] == whole[at]:
        at += 1
    if at >= len(branch) or at >= len(whole) - 1:  # the branch goes on past the string
        return False
    if branch[at] == ord("\\"):
        return True
    escape = start
    while escape < at:  # an escape of the option's spelling that `at` falls inside
        if whole[escape] != ord("\\"):
            escape += 1
            continue
        size = 6 if whole[escape + 1 : escape + 2] == b"u" else 2
        if at < escape + size:
            return True
        escape += size
    return False


def _trimmed_reader(labels: Sequence[str]) -> _Reader:
    """Options read from the whole text trimmed, as `_decide._read_plain` reads an answer:
    the text names the option whose label it is once the space at both ends is set aside."""
    trimmed = {label: label.strip() for label in labels}
    encoded = {label: text.encode("utf-8") for label, text in trimmed.items()}

    def reader(branch: bytes, ended: bool) -> list[str]:
        text, tail = _decoded(branch)
        if ended:
            return [] if tail else [label for label in labels if trimmed[label] == text.strip()]
        rest = text.lstrip()
        if not rest and (not tail or tail in _SPACE_STARTS):
            return list(labels)  # space alone: any option may follow
        head = rest.encode("utf-8", "surrogateescape") + tail
        return [
            label
            for label in labels
            if encoded[label].startswith(head)
            or (head.startswith(encoded[label]) and _may_be_space(head[len(encoded[label]) :]))
        ]

    return reader


_SPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
"""What `str.strip()` sets aside (`str.isspace`)."""
_SPACE_STARTS = frozenset(
    char.encode("utf-8")[:size] for char in _SPACE for size in range(1, len(char.encode("utf-8")))
)
"""The bytes that begin a space of several bytes: a token may hold part of a character."""


def _may_be_space(data: bytes) -> bool:
    """Whether `data` is space, or the start of it (a character cut off at its end)."""
    text, tail = _decoded(data)
    return not text.strip() and (not tail or tail in _SPACE_STARTS)


def _decoded(data: bytes) -> tuple[str, bytes]:
    """`data` as text (bytes that are no UTF-8 kept as no space), and the bytes at its end
    that only begin a character."""
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
    text = decoder.decode(data)
    return text, decoder.getstate()[0]


def _ended(masses: dict[str, float], unresolved: float, seen: set[str]) -> Measured:
    return Measured(masses, min(1.0, unresolved), frozenset(masses) - seen)


def _distinct(token: TokenLogprob, spelling: Spelling) -> list[tuple[bytes | None, float]]:
    """The listed continuations by their text, with their probability: tokens that write
    the same bytes (two special tokens that print nothing) lead to one branch, whose
    probability is theirs together. Tokens whose bytes cannot be told (`_unreadable`) are
    one branch of no known text (`None`)."""
    piece = token.utf8()
    summed: dict[bytes | None, float] = {}
    listed: set[tuple[bytes | None, float]] = set()
    for alternative in token.top:
        text: bytes | None = alternative.utf8()
        if text != piece and _unreadable(alternative, spelling):
            text = None
        if (text, alternative.logprob) in listed:
            continue  # the same token listed again
        listed.add((text, alternative.logprob))
        summed[text] = summed.get(text, 0.0) + math.exp(alternative.logprob)
    return [(text, min(1.0, probability)) for text, probability in summed.items()]


_TAG = re.compile(r"</?[^\s<>]+>")
"""A special token's name of another form than `<|...|>` (`</s>`, `<eos>`, `<end_of_turn>`),
or a tag of text: which one a token given without bytes is cannot be told."""


def _unreadable(alternative: TokenAlternative, spelling: Spelling) -> bool:
    """Whether a listed token's text may not be what it writes: given without bytes, it
    holds part of a character (shown as U+FFFD) or names a special token whose text is not
    known (`<|end|>` is read as writing nothing, `TokenAlternative.utf8`). Given U+FFFD's
    bytes, it is told in the walk (`_replaced`).

    A token of no text and no bytes is the end of the output (llama.cpp's end of
    generation), except in a JSON answer nothing holds exactly: there it may also be part
    of a character, which newer vLLM lists so, and which it is cannot be told. (Where
    allama holds JSON exactly, on OpenAI, a part of a character comes with its own bytes.)"""
    if spelling.json and not spelling.held and not alternative.token and not alternative.utf8():
        return True
    if alternative.token_bytes is not None or not alternative.utf8():
        return False
    return "\ufffd" in alternative.token or _TAG.fullmatch(alternative.token) is not None


_REPLACEMENT = "\ufffd".encode()
"""U+FFFD's bytes: what vLLM and some Ollama versions give as the bytes of a token that
holds part of a character (its text decoded with replacement, then encoded)."""


def _replaced(reached: bytes, at: int, fitting: _Reader) -> bool:
    """Whether the branch's bytes (`reached` from `at` on) hold U+FFFD where no option
    writes it: a token shown so holds part of a character, whose bytes are not known, and
    may yet become any option."""
    last = reached.rfind(_REPLACEMENT, at)
    return last >= 0 and not fitting(reached[: last + len(_REPLACEMENT)], False)


def json_string_span(text: str, wrapped_key: str | None) -> tuple[int, str] | None:
    """The offset of the first character inside the answer's JSON string, and the string,
    for an answer that is a JSON string or an object with it under `wrapped_key`."""
    decoder = json.JSONDecoder()
    index = _skip_space(text, 0)
    if wrapped_key is None:
        return _string_at(decoder, text, index)
    if index >= len(text) or text[index] != "{":
        return None
    index = _skip_space(text, index + 1)
    while index < len(text) and text[index] == '"':
        key = _string_at(decoder, text, index)
        if key is None:
            return None
        key_start, key_text = key
        index = _skip_space(text, _string_end(text, key_start))
        if index >= len(text) or text[index] != ":":
            return None
        index = _skip_space(text, index + 1)
        if key_text == wrapped_key:
            return _string_at(decoder, text, index)
        try:
            _, index = decoder.raw_decode(text, index)
        except ValueError:
            return None
        index = _skip_space(text, index)
        if index < len(text) and text[index] == ",":
            index = _skip_space(text, index + 1)
    return None


def _string_at(decoder: json.JSONDecoder, text: str, index: int) -> tuple[int, str] | None:
    if index >= len(text) or text[index] != '"':
        return None
    try:
        value, _ = decoder.raw_decode(text, index)
    except ValueError:
        return None
    return (index + 1, value) if isinstance(value, str) else None


def _string_end(text: str, content_start: int) -> int:
    """The offset after the closing quote of the JSON string whose content starts here."""
    index = content_start
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == '"':
            return index + 1
        index += 1
    return index


def _skip_space(text: str, index: int) -> int:
    while index < len(text) and text[index] in " \t\r\n":
        index += 1
    return index
