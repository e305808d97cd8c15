"""Token log-probabilities, as the provider reported them for the output text.

Kept token by token, with the alternatives the model weighed at each position, so that a
caller (and `allama.decide`) can say how likely an answer was from the numbers the provider
gave, without any made up. The reprs withhold the tokens: they are the model's text.
"""

from __future__ import annotations

import math
import re

from pydantic import Field, field_serializer, field_validator

from allama.types._base import Data

__all__ = ["TokenAlternative", "TokenLogprob"]

_SPECIAL = re.compile(r"<[|\uff5c][^\s<>|\uff5c]+[|\uff5c]>")
"""A special token's name (`<|end|>`, `<|eot_id|>`; DeepSeek's bars are full-width): what
a provider shows for a token that writes no text, such as the end of the output."""


class TokenAlternative(Data):
    """A token the model could have written at a position, and its log-probability.

    `token_bytes` is the token's UTF-8 bytes where the provider gives them: a token may
    hold part of a character, which its text cannot show. Not every provider gives such a
    token its own: vLLM, and some Ollama versions, give U+FFFD's (`EF BF BD`), the bytes of
    its text decoded with replacement, which `allama.decide` reads as unknown.
    """

    token: str
    logprob: float
    token_bytes: tuple[int, ...] | None = None

    @field_validator("logprob")
    @classmethod
    def _real(cls, logprob: float) -> float:
        """Refuse NaN and +infinity, no log-probability; -infinity is one (a probability
        of 0, as OpenAI-family servers may send it), and one a little above 0 is rounding."""
        if math.isnan(logprob) or logprob == math.inf:
            kind = "NaN" if math.isnan(logprob) else "+infinity"
            raise ValueError(
                f"a log-probability is a finite number, or -infinity (a probability of 0), "
                f"not {kind}"
            )
        return logprob

    @field_serializer("logprob", when_used="json")
    def _written(self, logprob: float) -> float | str:
        """-infinity as `"-Infinity"`: JSON has no number for it (pydantic would write
        `null`, which no log-probability reads back as), and the string reads back."""
        return "-Infinity" if logprob == -math.inf else logprob

    def __repr__(self) -> str:
        return f"{type(self).__name__}(logprob={self.logprob!r})"

    def utf8(self) -> bytes:
        """The token's bytes: the provider's where given; none for a special token given
        without them (OpenAI lists the end of the output as `<|end|>`, bytes `null`), which
        writes no text; else its text encoded."""
        if self.token_bytes is not None:
            return bytes(self.token_bytes)
        if _SPECIAL.fullmatch(self.token):
            return b""
        return self.token.encode("utf-8")


class TokenLogprob(TokenAlternative):
    """An output token, its log-probability, and the most likely tokens at its position.

    `top` is sorted as the provider sent it (most likely first) and may or may not hold
    the token itself: under a grammar the chosen token need not be among the likeliest.
    """

    top: tuple[TokenAlternative, ...] = Field(default=())

    def __repr__(self) -> str:
        return f"TokenLogprob(logprob={self.logprob!r}, top={len(self.top)})"
