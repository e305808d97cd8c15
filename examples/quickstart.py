"""Extract typed invoices from sample documents and show how each value was obtained.

Runs offline against `allama.mock.TestProvider`, which answers every extraction with a value
its schema accepts (it does not read the document: it shows the API and the bookkeeping).
Swap in a real provider, such as `allama.provider("openai")`, and nothing else changes.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from invoice import Invoice

import allama
from allama import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ExtractionMode,
    Extractor,
    SchemaEnforcement,
)
from allama.mock import ChatResponseBuilder, MockProvider, TestProvider

DOCUMENTS = Path(__file__).resolve().parent / "documents"


def request_for(document: str) -> ChatRequest:
    return (
        ChatRequest("test-model")
        .system("Extract the invoice. Use ISO dates.")
        .user(document)
        .with_max_output_tokens(1_000)
    )


def main() -> None:
    provider = TestProvider()
    extractor = Extractor(repair=True, retries=1, min_enforcement=SchemaEnforcement.APPROXIMATE)

    print("== Extraction, one document at a time ==")
    for path in sorted(DOCUMENTS.glob("*.txt")):
        extracted = extractor.extract(provider, Invoice, request_for(path.read_text()))
        meta = extracted.metadata
        usage = meta.usage
        print(f"{path.name}:")
        print(f"  value        {extracted.value!r}")
        tokens = (None, None) if usage is None else (usage.input_tokens, usage.output_tokens)
        print(
            f"  mode={meta.mode.value} passes={meta.passes} enforcement={meta.enforcement.value} "
            f"input_tokens={tokens[0]} output_tokens={tokens[1]}"
        )

    print("\n== What an extraction would do, before sending ==")
    plan = extractor.plan(provider, Invoice, request_for("..."))
    print(
        f"  mode={plan.mode.value} enforcement={plan.enforcement.value} "
        f"coverage={plan.coverage.value}"
    )

    print("\n== Streaming, with the typed value so far ==")
    request = request_for((DOCUMENTS / "northwind.txt").read_text())
    with allama.extract_stream(provider, Invoice, request) as stream:
        shown = 0
        for _ in stream:
            partial = stream.partial
            if partial is not None and len(partial.model_fields_set) > shown:
                shown = len(partial.model_fields_set)
                print(f"  fields so far: {sorted(partial.model_fields_set)}")
        print(f"  finished: {stream.finish().value.number}")

    print("\n== The same, async ==")
    asyncio.run(stream_async(provider, request))

    print("\n== A list at the root: wrapped where the provider needs an object ==")
    wants_objects = TestProvider().with_chat_capability(
        ChatCapability.RESPONSE_SCHEMA_ANY_ROOT, CapabilitySupport.UNSUPPORTED
    )
    listed = allama.extract(wants_objects, list[Invoice], request)
    print(f"  {len(listed.value)} invoices, root_wrapped={listed.metadata.root_wrapped}")

    print("\n== A failure keeps what was paid for ==")
    cut_off = (
        ChatResponseBuilder()
        .text('{"number": "INV-1", "items": [')
        .finish_reason("length")
        .usage(812, 1_000)
        .build()
    )
    native = request.with_option(ExtractionMode.NATIVE)
    try:
        allama.extract(MockProvider([cut_off]), Invoice, native)
    except allama.TruncatedError as failure:
        print(f"  {failure}")
        print(f"  passes={failure.metadata.passes} usage={failure.metadata.usage!r}")


async def stream_async(provider: TestProvider, request: ChatRequest) -> None:
    async with allama.aextract_stream(provider, Invoice, request) as stream:
        async for _ in stream:
            pass
        print(f"  finished: {(await stream.finish()).value.number}")


if __name__ == "__main__":
    main()
