"""The schema toolkit: a type's JSON Schema, per-dialect rewrites, and the checks around them.

Pure functions, no I/O. Each dialect rewrite returns a `Rewrite`: the schema to send and
notes on what it widened or could not keep; `apply_strict_policy` turns those into warnings
or a refusal.
"""

from allama.schema._rewrite import Rewrite, SchemaNote, apply_strict_policy

__all__ = ["Rewrite", "SchemaNote", "apply_strict_policy"]
