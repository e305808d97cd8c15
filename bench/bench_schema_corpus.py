"""Every dialect over the real-world schema corpus: how many schemas come out exact,
approximate, not enforced or refused, and the wall time of the whole run.

Run by hand: `./run bench` or `python bench/bench_schema_corpus.py [CORPUS_DIR]`. The
corpus directory defaults to `ALLAMA_SCHEMA_CORPUS`, else `../shared/corpus/schemas` next
to the repository. Prints a Markdown table.

- exact: no note, the rewrite accepts what the schema accepts (closed objects and
  OpenAI's stand-in nulls being the library's conventions);
- approximate: only `approximated` notes, the rewrite is wider;
- not enforced: an `unsupported` note, strict mode cannot hold;
- refused: `SchemaError`, the schema is not valid or not readable (a non-local `$ref`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from allama.schema._dialects import (
    anthropic,
    gemini_json_schema,
    gemini_response_schema,
    grammar_engine,
    json_object_fallback,
    openai_strict,
    passthrough,
)
from allama.schema._errors import SchemaError
from allama.schema._rewrite import Rewrite
from allama.types import WarningKind

DIALECTS: dict[str, Callable[[Mapping[str, Any]], Rewrite]] = {
    "`openai_strict`": openai_strict,
    "`openai_strict` (`azure_legacy`)": lambda s: openai_strict(s, profile="azure_legacy"),
    "`anthropic`": anthropic,
    "`gemini_json_schema`": gemini_json_schema,
    "`gemini_response_schema`": gemini_response_schema,
    "`grammar_engine`": grammar_engine,
    "`passthrough`": passthrough,
    "`json_object_fallback`": json_object_fallback,
}


def corpus_dir() -> Path:
    if len(sys.argv) > 1:
        return Path(sys.argv[1])
    default = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "schemas"
    return Path(os.environ.get("ALLAMA_SCHEMA_CORPUS", str(default)))


def outcome(dialect: Callable[[Mapping[str, Any]], Rewrite], schema: Any) -> str:
    try:
        notes = dialect(schema).notes
    except SchemaError:
        return "refused"
    kinds = {note.kind for note in notes}
    if WarningKind.UNSUPPORTED in kinds:
        return "not enforced"
    return "approximate" if kinds else "exact"


def main() -> None:
    root = corpus_dir()
    files = sorted(root.glob("*/*.json"))
    if not files:
        print(f"no schemas under {root}", file=sys.stderr)
        raise SystemExit(1)
    schemas = [json.loads(path.read_text()) for path in files]
    print(f"{len(schemas):,} schemas from {root}\n")
    print("| dialect | exact | approximate | not enforced | refused | time |")
    print("|---|---:|---:|---:|---:|---:|")
    total = 0.0
    for name, dialect in DIALECTS.items():
        start = time.perf_counter()
        counts = Counter(outcome(dialect, schema) for schema in schemas)
        elapsed = time.perf_counter() - start
        total += elapsed
        cells = [f"{counts[k]:,}" for k in ("exact", "approximate", "not enforced", "refused")]
        print(f"| {name} | {' | '.join(cells)} | {elapsed:.2f} s |")
    each = total / len(schemas) / len(DIALECTS) * 1e6
    print(f"\nAll dialects: {total:.2f} s ({each:.0f} µs a rewrite on average)")


if __name__ == "__main__":
    main()
