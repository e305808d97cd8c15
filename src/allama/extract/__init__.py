"""Structured extraction: a typed value, and the truth about how it was obtained."""

from typing import TYPE_CHECKING

from allama._lazy import lazy_names

if TYPE_CHECKING:
    from allama.extract._choices import ABSTAIN_LABEL
    from allama.extract._decide import Decision
    from allama.extract._engine import Extracted, ExtractionPlan
    from allama.extract._errors import (
        EXTRACTION_TOOL,
        EnforcementBelowError,
        MissingStructuredTextError,
        MissingToolCallError,
        ModeUnsupportedError,
        ParseError,
        RefusalSource,
        RefusedError,
        ToolConflictError,
        TruncatedError,
        UnexpectedToolCallCountError,
    )
    from allama.extract._extractor import (
        Extractor,
        OpeningStream,
        adecide,
        aextract,
        aextract_stream,
        decide,
        extract,
        extract_stream,
    )
    from allama.extract._metadata import AutoFallback, ExtractionMetadata
    from allama.extract._mode import ExtractionMode, SchemaEnforcement
    from allama.extract._parse import repair_candidate
    from allama.extract._stream import AsyncExtractionStream, ExtractionStream

__all__ = [
    "ABSTAIN_LABEL",
    "EXTRACTION_TOOL",
    "AsyncExtractionStream",
    "AutoFallback",
    "Decision",
    "EnforcementBelowError",
    "Extracted",
    "ExtractionMetadata",
    "ExtractionMode",
    "ExtractionPlan",
    "ExtractionStream",
    "Extractor",
    "MissingStructuredTextError",
    "MissingToolCallError",
    "ModeUnsupportedError",
    "OpeningStream",
    "ParseError",
    "RefusalSource",
    "RefusedError",
    "SchemaEnforcement",
    "ToolConflictError",
    "TruncatedError",
    "UnexpectedToolCallCountError",
    "adecide",
    "aextract",
    "aextract_stream",
    "decide",
    "extract",
    "extract_stream",
    "repair_candidate",
]

_getattr, __dir__ = lazy_names(
    __name__,
    {
        "allama.extract._choices": ("ABSTAIN_LABEL",),
        "allama.extract._decide": ("Decision",),
        "allama.extract._engine": ("Extracted", "ExtractionPlan"),
        "allama.extract._errors": (
            "EXTRACTION_TOOL",
            "EnforcementBelowError",
            "MissingStructuredTextError",
            "MissingToolCallError",
            "ModeUnsupportedError",
            "ParseError",
            "RefusalSource",
            "RefusedError",
            "ToolConflictError",
            "TruncatedError",
            "UnexpectedToolCallCountError",
        ),
        "allama.extract._extractor": (
            "Extractor",
            "OpeningStream",
            "adecide",
            "aextract",
            "aextract_stream",
            "decide",
            "extract",
            "extract_stream",
        ),
        "allama.extract._metadata": ("AutoFallback", "ExtractionMetadata"),
        "allama.extract._mode": ("ExtractionMode", "SchemaEnforcement"),
        "allama.extract._parse": ("repair_candidate",),
        "allama.extract._stream": ("AsyncExtractionStream", "ExtractionStream"),
    },
)
if not TYPE_CHECKING:
    __getattr__ = _getattr
