"""What a dialect rewrite returns, and the one place that applies the `UnsupportedPolicy` to it.

A rewrite may make a schema weaker than the caller's (and says so with an `APPROXIMATED`
note), never stronger. When strict mode cannot hold at all, it says why with an
`UNSUPPORTED` note, and `apply_strict_policy` decides: send without `strict` and warn
(`UnsupportedPolicy.WARN`), or refuse before sending (`UnsupportedPolicy.ERROR`).

Notes name the place in the schema by JSON pointer in backticks (`/properties/contact`), so
that extraction can reword them in the caller's terms (`Customer.contact`).

Annotations a dialect does not send (`default`, `examples`, `discriminator`...) change
nothing the schema accepts, so they leave a rewrite exact; they are listed apart, in
`Rewrite.dropped`, for whoever shows the caller what was sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from allama._degradations import Degradations
from allama.types import RequestField, UnsupportedPolicy, WarningKind

__all__ = ["Rewrite", "SchemaNote", "apply_strict_policy"]


@dataclass(frozen=True, slots=True)
class SchemaNote:
    """One thing a rewrite could not keep.

    `message` is a phrase that names its place with a backticked JSON pointer, such as
    "the subschema at `/properties/contact` is a map" or
    "`pattern` was removed at `/properties/code`".
    """

    kind: WarningKind
    pointer: str
    message: str


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A schema in a provider's dialect, with notes on what it lost."""

    schema: dict[str, Any]
    notes: tuple[SchemaNote, ...] = field(default=())
    dropped: tuple[SchemaNote, ...] = field(default=())
    """Annotations left out of `schema` (`default`, `examples`...): they never change what
    is accepted, so they are not `notes` and do not make the rewrite approximate."""

    @property
    def strict_representable(self) -> bool:
        """Whether strict mode can hold over `schema` (no `UNSUPPORTED` note)."""
        return not any(note.kind is WarningKind.UNSUPPORTED for note in self.notes)

    @property
    def exact(self) -> bool:
        """Nothing was widened or refused: the rewrite accepts exactly what the original does."""
        return not self.notes


def apply_strict_policy(
    rewrite: Rewrite,
    *,
    field: RequestField,
    subject: str,
    degradations: Degradations,
    rewrite_sent_anyway: bool = True,
) -> bool:
    """Record `rewrite`'s notes on `field` and decide whether it can be sent strict.

    `subject` names what carries the schema, as the caller would read it: "tool
    `submit_structured_output`" or "the response format `person`". Approximations are
    warnings and never fail. When strict mode cannot hold, under `UnsupportedPolicy.ERROR`
    this raises an `UnsupportedError` before sending; under `WARN` it records an
    unsupported warning and returns `False` (send without `strict`). A caller that then
    sends the original schema rather than the rewrite (`rewrite_sent_anyway=False`) gets
    no approximations recorded: nothing was widened in what went out.
    """
    unsupported = [note for note in rewrite.notes if note.kind is WarningKind.UNSUPPORTED]
    if not unsupported or rewrite_sent_anyway:
        for note in rewrite.notes:
            if note.kind is WarningKind.APPROXIMATED:
                degradations.approximate(field, f"{subject} was approximated: {note.message}")
    if not unsupported:
        return True
    reasons = "; ".join(note.message for note in unsupported)
    why = f"{subject} is not strict-representable: {reasons}"
    if degradations.policy is UnsupportedPolicy.ERROR:
        raise degradations.unsupported(field, why)
    degradations.refuse(field, f"{why}; it goes without `strict`")
    return False
