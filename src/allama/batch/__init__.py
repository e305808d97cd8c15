"""Extraction over many inputs: concurrent, rate-limited, resumable from a ledger, costed."""

from typing import TYPE_CHECKING

from allama._lazy import lazy_names

if TYPE_CHECKING:
    from allama.batch._jobs import EndpointNotConfirmedError, JobsNotCancelledError, cancel_jobs
    from allama.batch._ledger import Ledger, LedgerError, LedgerRow
    from allama.batch._run import (
        AsyncBatchRun,
        BatchFailure,
        BatchResult,
        BatchRun,
        BatchSummary,
        abatch,
        batch,
        input_key,
    )

__all__ = [
    "AsyncBatchRun",
    "BatchFailure",
    "BatchResult",
    "BatchRun",
    "BatchSummary",
    "EndpointNotConfirmedError",
    "JobsNotCancelledError",
    "Ledger",
    "LedgerError",
    "LedgerRow",
    "abatch",
    "batch",
    "cancel_jobs",
    "input_key",
]

_getattr, __dir__ = lazy_names(
    __name__,
    {
        "allama.batch._jobs": ("EndpointNotConfirmedError", "JobsNotCancelledError", "cancel_jobs"),
        "allama.batch._ledger": ("Ledger", "LedgerError", "LedgerRow"),
        "allama.batch._run": (
            "AsyncBatchRun",
            "BatchFailure",
            "BatchResult",
            "BatchRun",
            "BatchSummary",
            "abatch",
            "batch",
            "input_key",
        ),
    },
)
if not TYPE_CHECKING:
    __getattr__ = _getattr
