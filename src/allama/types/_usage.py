"""Token counts that add up honestly: a count nobody reported stays unknown."""

from __future__ import annotations

from allama.types._base import Data


def _add(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _both(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


class Usage(Data):
    """Tokens a response reported. `None` means not reported, which is not the same as 0.

    `reasoning_tokens` is a subset of `output_tokens`; `cache_read_tokens` and
    `cache_write_tokens` are a subset of `input_tokens` where the provider counts them so.

    >>> (Usage(input_tokens=10) + Usage(input_tokens=5, output_tokens=2)).output_tokens
    2
    >>> (Usage() + Usage()).output_tokens is None
    True
    >>> sum([Usage(input_tokens=1), Usage(input_tokens=2)]).input_tokens
    3
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            # Python's TypeError then names both types (`usage + None`: a response that
            # reported no usage).
            return NotImplemented
        return Usage(
            input_tokens=_add(self.input_tokens, other.input_tokens),
            output_tokens=_add(self.output_tokens, other.output_tokens),
            reasoning_tokens=_add(self.reasoning_tokens, other.reasoning_tokens),
            cache_read_tokens=_add(self.cache_read_tokens, other.cache_read_tokens),
            cache_write_tokens=_add(self.cache_write_tokens, other.cache_write_tokens),
        )

    def of_calls(self, other: Usage) -> Usage:
        """The usage of this call and `other` together, each a call paid for: the totals add
        what was reported, as `+` does, and a part of a total (reasoning, cache reads and
        writes) is known only where both reported it. (`+` would add one call's reasoning
        count alone, beside another's output that holds reasoning it did not count: "0 of
        974 output tokens went to reasoning".)

        >>> Usage(output_tokens=10, reasoning_tokens=0).of_calls(Usage(output_tokens=964))
        Usage(input_tokens=None, output_tokens=974, reasoning_tokens=None, ...)
        """
        if not isinstance(other, Usage):
            raise TypeError(f"of_calls(): `other` must be a Usage, not {type(other).__name__}")
        return Usage(
            input_tokens=_add(self.input_tokens, other.input_tokens),
            output_tokens=_add(self.output_tokens, other.output_tokens),
            reasoning_tokens=_both(self.reasoning_tokens, other.reasoning_tokens),
            cache_read_tokens=_both(self.cache_read_tokens, other.cache_read_tokens),
            cache_write_tokens=_both(self.cache_write_tokens, other.cache_write_tokens),
        )

    def __radd__(self, other: int) -> Usage:
        """`0 + usage`, so that `sum(usages)` works without a start value."""
        if other == 0:
            return self
        return NotImplemented

    @property
    def total_tokens(self) -> int | None:
        """Input plus output, when either was reported."""
        return _add(self.input_tokens, self.output_tokens)

    def reasoning_share(self) -> str | None:
        """'400 of 400 output tokens went to reasoning', when both counts were reported."""
        if self.output_tokens is None or self.reasoning_tokens is None:
            return None
        return f"{self.reasoning_tokens} of {self.output_tokens} output tokens went to reasoning"
