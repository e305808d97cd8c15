"""Entry point of the `allama` command."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from allama.cli._load import TypeNotFound, load_type
from allama.cli._plan import plan_rows, render_table
from allama.schema._types import type_label


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="allama", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    plan = commands.add_parser(
        "plan",
        help="what each provider and mode would enforce for a type, without sending anything",
    )
    plan.add_argument("type", help="path/to/file.py:Name or package.module:Name")
    plan.add_argument("--json", action="store_true", help="one JSON document for machines")
    plan.add_argument(
        "--provider",
        action="append",
        default=None,
        help="only this preset (repeatable); default: every preset",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        tp = load_type(args.type)
    except TypeNotFound as error:
        print(f"allama plan: {error}", file=sys.stderr)
        return 2
    from allama.cli._providers import planning_providers

    try:
        providers = planning_providers(args.provider)
    except KeyError as error:
        print(f"allama plan: {error.args[0]}", file=sys.stderr)
        return 2
    rows = plan_rows(tp, providers)
    label = type_label(tp)
    if args.json:
        print(json.dumps({"type": label, "plans": [row.to_json() for row in rows]}, indent=2))
    else:
        print(render_table(label, rows))
    return 0
