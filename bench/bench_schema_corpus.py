"""Every dialect over the real-world schema corpus: how many schemas come out exact,
approximate, not enforced or refused, and the wall time of the whole run; then every
dialect over large generated schemas, and how the time grows with their size.

Run by hand: `./run bench` or `python bench/bench_schema_corpus.py [CORPUS_DIR]`. The
corpus directory defaults to `ALLAMA_SCHEMA_CORPUS`, else `../shared/corpus/schemas` next
to the repository. `--large-only` skips the corpus. Prints Markdown tables.

- exact: no note, the rewrite accepts what the schema accepts (closed objects and
  OpenAI's stand-in nulls being the library's conventions);
- approximate: only `approximated` notes, the rewrite is wider;
- not enforced: an `unsupported` note, strict mode cannot hold;
- refused: `SchemaError`, the schema is not valid or not readable (a non-local `$ref`).

The large schemas are made here, deterministically, in the shapes that make real large
schemas slow: Kubernetes-like definitions (hundreds of `$defs` with thousands of properties,
`$ref`s everywhere, `allOf: [{$ref}]` beside a description, maps, vendor keywords); the same
definitions inlined into one tree (the "standalone" form); long `$ref` chains; a union of
hundreds of discriminated objects; an enum of many thousand values.
"""

from __future__ import annotations

import json
import os
import random
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
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if args:
        return Path(args[0])
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


def corpus_table(root: Path) -> None:
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
    print(f"\nAll dialects: {total:.2f} s ({each:.0f} µs a rewrite on average)\n")


# ----- large schemas, made here


def kubernetes_like(definitions: int, *, seed: int = 1) -> dict[str, Any]:
    """Definitions like Kubernetes' OpenAPI: objects of about twelve properties that refer
    to later definitions, long descriptions, maps, formats and vendor keywords."""
    rng = random.Random(seed)
    names = [f"io.k8s.api.group{i % 23}.v1.Kind{i}" for i in range(definitions)]
    defs: dict[str, Any] = {}
    for i, name in enumerate(names):
        props: dict[str, Any] = {}
        for j in range(12):
            text = f"Field {j} of {name}: what it holds and when it applies. " * 3
            later = (
                "#/definitions/" + names[rng.randrange(i + 1, definitions)]
                if i + 1 < definitions
                else None
            )
            roll = rng.random()
            if later and roll < 0.2:
                props[f"f{j}"] = {"$ref": later, "description": text}
            elif later and roll < 0.3:
                props[f"f{j}"] = {"allOf": [{"$ref": later}], "default": {}, "description": text}
            elif later and roll < 0.42:
                props[f"f{j}"] = {
                    "type": "array",
                    "items": {"$ref": later},
                    "description": text,
                    "x-kubernetes-list-type": "atomic",
                }
            elif roll < 0.52:
                props[f"f{j}"] = {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": text,
                }
            elif roll < 0.64:
                props[f"f{j}"] = {"type": "integer", "format": "int32", "description": text}
            elif roll < 0.74:
                props[f"f{j}"] = {"type": "string", "enum": ["Always", "Never", "IfNotPresent"]}
            elif roll < 0.8:
                props[f"f{j}"] = {"type": "string", "format": "date-time", "description": text}
            else:
                props[f"f{j}"] = {"type": "string", "description": text}
        defs[name] = {
            "type": "object",
            "description": f"{name} is a kind.",
            "properties": props,
            "required": [f"f{j}" for j in range(0, 12, 4)],
            "x-kubernetes-group-version-kind": [{"group": "g", "kind": name, "version": "v1"}],
        }
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$ref": "#/definitions/" + names[0],
        "definitions": defs,
    }


def standalone(depth: int, width: int, *, seed: int = 2) -> dict[str, Any]:
    """One tree of inlined objects, as the "standalone" Kubernetes schemas are written."""
    rng = random.Random(seed)

    def node(level: int) -> dict[str, Any]:
        if level == depth:
            return {"type": "string", "description": "a leaf"}
        props = {
            f"p{j}": node(level + 1) if rng.random() < 0.55 else {"type": ["integer", "null"]}
            for j in range(width)
        }
        return {"type": "object", "properties": props, "description": f"level {level}"}

    return node(0)


def ref_chains(length: int) -> dict[str, Any]:
    """Definitions that are `$ref`s to the next one, `length` long, referred to all along."""
    defs: dict[str, Any] = {f"A{i}": {"$ref": f"#/$defs/A{i + 1}"} for i in range(length)}
    defs[f"A{length}"] = {"type": "object", "properties": {"x": {"type": "string"}}}
    props = {f"p{i}": {"$ref": f"#/$defs/A{i}"} for i in range(0, length, 4)}
    return {"type": "object", "properties": props, "$defs": defs}


def wide_union(branches: int) -> dict[str, Any]:
    """A `oneOf` of objects told apart by a constant `kind`."""
    options = [
        {
            "type": "object",
            "properties": {"kind": {"const": f"k{i}"}, "value": {"type": "integer"}},
            "required": ["kind"],
        }
        for i in range(branches)
    ]
    return {"type": "object", "properties": {"u": {"oneOf": options}}, "required": ["u"]}


def big_enum(values: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"e": {"enum": [f"value-{i}" for i in range(values)]}},
        "required": ["e"],
    }


LARGE: dict[str, Callable[[], dict[str, Any]]] = {
    "Kubernetes-like, 600 definitions": lambda: kubernetes_like(600),
    "standalone tree, 6 levels": lambda: standalone(6, 8),
    "`$ref` chains, 800 long": lambda: ref_chains(800),
    "`oneOf` of 1,600 objects": lambda: wide_union(1600),
    "`enum` of 20,000 values": lambda: big_enum(20_000),
}


def timed(schema: dict[str, Any], dialect: Callable[[Mapping[str, Any]], Rewrite]) -> float:
    """The best of three runs, in seconds."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        dialect(schema)
        best = min(best, time.perf_counter() - start)
    return best


def large_table() -> None:
    schemas = {name: make() for name, make in LARGE.items()}
    heads = ["OpenAI", "Azure", "Anthropic", "Gemini JSON", "Gemini OpenAPI", "grammar"]
    heads += ["pass-through", "`json_object`"]
    print("| schema | size | " + " | ".join(heads) + " |")
    print("|---|---:|" + "---:|" * len(heads))
    for name, schema in schemas.items():
        size = len(json.dumps(schema)) / 1e6
        cells = [f"{timed(schema, dialect) * 1000:.0f} ms" for dialect in DIALECTS.values()]
        print(f"| {name} | {size:.2f} MB | " + " | ".join(cells) + " |")
    print("\nTime grows with size (all dialects, Kubernetes-like definitions):\n")
    print("| definitions | size | time | per MB |")
    print("|---:|---:|---:|---:|")
    for count in (300, 600, 1200, 2400):
        schema = kubernetes_like(count)
        size = len(json.dumps(schema)) / 1e6
        elapsed = sum(timed(schema, dialect) for dialect in DIALECTS.values())
        print(f"| {count:,} | {size:.2f} MB | {elapsed:.2f} s | {elapsed / size:.2f} s |")


def walks_table() -> None:
    """The two walks extraction runs on every response, on a list of 200 objects."""
    import timeit

    from pydantic import BaseModel

    from allama.schema import find_undeclared_key, normalize_strict_nulls, type_schema

    class Item(BaseModel):
        sku: str
        name: str
        price: float
        qty: int = 1
        note: str | None = None
        tags: list[str] = []

    class Order(BaseModel):
        items: list[Item]

    schema = type_schema(Order).schema
    row = {"sku": "s", "name": "n", "price": 1.5, "qty": 2, "note": None, "tags": ["a"]}
    clean = {"items": [dict(row, sku=f"s{i}") for i in range(200)]}
    nulls = {"items": [dict(row, sku=f"s{i}", qty=None, tags=None) for i in range(200)]}
    cases = {
        "`normalize_strict_nulls`, no stand-in `null`": lambda: normalize_strict_nulls(
            clean, schema
        ),
        "`normalize_strict_nulls`, 400 stand-in `null`s": lambda: normalize_strict_nulls(
            nulls, schema
        ),
        "`find_undeclared_key`": lambda: find_undeclared_key(clean, schema),
    }
    print("\nThe walks of one response, a list of 200 objects of 6 fields:\n")
    print("| walk | time |")
    print("|---|---:|")
    for name, call in cases.items():
        each = min(timeit.repeat(call, number=200, repeat=5)) / 200
        print(f"| {name} | {each * 1e6:.0f} µs |")


def main() -> None:
    if "--large-only" not in sys.argv:
        corpus_table(corpus_dir())
    large_table()
    walks_table()


if __name__ == "__main__":
    main()
