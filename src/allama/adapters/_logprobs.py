"""Token log-probabilities in OpenAI's shape, read once for every dialect that uses it.

Chat Completions (`choices[].logprobs.content`), the Responses API (`output_text.logprobs`),
Ollama's native API and llama.cpp's server all send a list of
`{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}`. A list
that does not have this shape is dropped whole (`None`), never half read: a probability
computed from part of it would be a number made up. So is one whose tokens were merged
(`merged_characters`): it spells the text, but its log-probabilities are not its tokens'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from allama.types._logprobs import TokenAlternative, TokenLogprob

__all__ = ["merged_characters", "openai_logprobs", "read_logprob"]

_NOISE = 1e-6
"""How far above 0 a log-probability may be and still be read, as 0: a probability of 1
computed in floating point (`1.2e-7`). One higher is no log-probability."""


def read_logprob(value: Any) -> float | None:
    """A log-probability as a provider writes it, noise above 0 read as 0; `None` for what
    is none (every dialect's reader shares this reading)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    if math.isnan(number) or number > _NOISE:
        return None
    return min(number, 0.0)


def _token_bytes(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, list):
        return None
    if not all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 255 for b in value):
        return None
    return tuple(value)


def _alternative(raw: Any) -> TokenAlternative | None:
    if not isinstance(raw, dict):
        return None
    token, logprob = raw.get("token"), read_logprob(raw.get("logprob"))
    if not isinstance(token, str) or logprob is None:
        return None
    return TokenAlternative.model_construct(
        token=token, logprob=logprob, token_bytes=_token_bytes(raw.get("bytes"))
    )


def openai_logprobs(content: Any) -> tuple[TokenLogprob, ...] | None:
    """The tokens of a `logprobs.content`-shaped list, or `None` when it has another shape."""
    if not isinstance(content, list) or not content:
        return None
    tokens: list[TokenLogprob] = []
    for raw in content:
        chosen = _alternative(raw)
        if chosen is None:
            return None
        top_raw = raw.get("top_logprobs") or []
        if not isinstance(top_raw, list):
            return None
        top: list[TokenAlternative] = []
        for item in top_raw:
            alternative = _alternative(item)
            if alternative is None:
                return None
            top.append(alternative)
        tokens.append(
            TokenLogprob.model_construct(
                token=chosen.token,
                logprob=chosen.logprob,
                token_bytes=chosen.token_bytes,
                top=tuple(top),
            )
        )
    return tuple(tokens)


def _continues(data: bytes) -> bool:
    """Whether `data` begins inside a character: with a UTF-8 continuation byte."""
    return bool(data) and 0x80 <= data[0] <= 0xBF


def merged_characters(tokens: Sequence[TokenLogprob], counted: int | None) -> bool:
    """Whether the provider gave the tokens of a character the model wrote in several as one
    entry, as llama.cpp's server does: it holds back a token that ends inside a character,
    and lists the character's bytes with the log-probability and alternatives of its last
    token alone. Such an entry begins at a character of several bytes, yet its alternatives
    begin inside one (lone continuation bytes): they were listed where the last token
    began. The tokens before it are missing, so no probability read from the list (the
    answer's, an option's) is the model's.

    `counted`, the output tokens the usage counts: where it is no more than the entries,
    none was merged away (a token that begins a character and lists a stray continuation
    byte as an alternative is the model's own)."""
    if counted is not None and counted <= len(tokens):
        return False
    for token in tokens:
        data = token.utf8()
        if not data or _continues(data) or max(data) < 0xC0:
            continue  # no character of several bytes begins in it
        if any(_continues(alternative.utf8()) for alternative in token.top):
            return True
    return False
