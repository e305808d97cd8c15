"""Wrappers: providers made of other providers (retry, failover, capability overrides).

Each is itself a `ChatProvider`, so they compose: `RetryingProvider(FailoverProvider([...]))`.
Nothing they do is hidden: attempts and failovers are recorded on the error raised
(`allama.retry` metadata, the `fallback_from` chain) and on the response
(`provider_data["allama"]`).
"""

from allama.wrappers._capabilities import CapabilityOverrideProvider
from allama.wrappers._failover import FailoverProvider
from allama.wrappers._retry import RETRY_METADATA_KEY, RetryingProvider, RetryPolicy

__all__ = [
    "RETRY_METADATA_KEY",
    "CapabilityOverrideProvider",
    "FailoverProvider",
    "RetryPolicy",
    "RetryingProvider",
]
