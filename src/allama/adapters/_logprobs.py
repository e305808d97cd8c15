"""Token log-probabilities in OpenAI's shape, read once for every dialect that uses it.

Chat Completions (`choices[].logprobs.content`), the Responses API (`output_text.logprobs`),
Ollama's native API and llama.cpp's server all send a list of
`{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}`. A list
that does not have this shape is dropped whole (`None`), never half read: a probability
computed from part of it would be a number made up.
"""

from __future__ import annotations

import math
from typing import Any

from allama.types._logprobs import TokenAlternative, TokenLogprob

__all__ = ["openai_logprobs"]


def _logprob(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if number <= 0.0 and not math.isnan(number) else None


def _token_bytes(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, list):
        return None
    if not all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 255 for b in value):
        return None
    return tuple(value)


def _alternative(raw: Any) -> TokenAlternative | None:
    if not isinstance(raw, dict):
        return None
    token, logprob = raw.get("token"), _logprob(raw.get("logprob"))
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
