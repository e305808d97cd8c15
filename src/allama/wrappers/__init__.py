"""Wrappers: providers made of other providers (retry, failover, capability overrides).

Each is itself a `ChatProvider`, so they compose: `RetryingProvider(FailoverProvider([...]))`.
Closing one (`close`, `aclose`, `with`, `async with`) closes the providers inside it, each once.
Nothing they do is hidden: attempts and failovers are recorded on the error raised
(`allama.retry` metadata, the `fallback_from` chain) and on the response
(`provider_data["allama"]`).
"""

from typing import TYPE_CHECKING

from allama._lazy import lazy_names

if TYPE_CHECKING:
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

_getattr, __dir__ = lazy_names(
    __name__,
    {
        "allama.wrappers._capabilities": ("CapabilityOverrideProvider",),
        "allama.wrappers._failover": ("FailoverProvider",),
        "allama.wrappers._retry": ("RETRY_METADATA_KEY", "RetryingProvider", "RetryPolicy"),
    },
)
if not TYPE_CHECKING:
    __getattr__ = _getattr
