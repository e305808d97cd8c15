"""Bearer tokens that expire: Google's Application Default Credentials, refreshed as needed.

`google-auth` is an optional extra (`pip install 'allama[google]'`): it is imported only
when a provider that takes these credentials (`vertex-gemini`) sends without a token of its
own. Refreshing is blocking I/O, so async calls run it in a worker thread.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

from allama.errors import AuthenticationError, Error, NetworkError, ServerError

__all__ = ["CLOUD_PLATFORM_SCOPE", "RefreshingToken"]

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


_TOKENS: weakref.WeakSet[RefreshingToken] = weakref.WeakSet()
"""Every token, for a child process to make their locks anew."""


def _after_fork_in_child() -> None:
    # A thread of the parent's refreshing at the fork held the lock: in the child that
    # thread does not exist, and the lock would stay held for good.
    for token in list(_TOKENS):
        token._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class RefreshingToken:
    """A token from google-auth credentials (given, or found by `google.auth.default()`),
    refreshed when it is missing or about to expire (google-auth's own `valid` check)."""

    def __init__(self, provider: str, credentials: Any | None = None) -> None:
        self._provider = provider
        self._credentials = credentials
        self._lock = threading.Lock()
        _TOKENS.add(self)

    def current(self) -> str | None:
        """The token, when it is still good; `None` when it needs a refresh first."""
        credentials = self._credentials
        if credentials is None or not getattr(credentials, "valid", False):
            return None
        token = getattr(credentials, "token", None)
        return token if isinstance(token, str) and token else None

    def refresh(self) -> str:
        """A good token, refreshing the credentials (and finding them, the first time)."""
        with self._lock:
            token = self.current()
            if token is not None:
                return token
            try:
                from google.auth import default, exceptions
            except ImportError as missing:
                raise self._failure(
                    "needs access_token=, or the google-auth package for Application Default "
                    "Credentials: pip install 'allama[google]'"
                ) from missing
            try:
                from google.auth.transport.requests import Request
            except ImportError as missing:
                # google-auth installed alone: its transport needs `requests`, an extra of its
                # own, so naming google-auth would send the caller to what is there.
                raise self._failure(
                    "needs access_token=, or google-auth's requests transport for Application "
                    "Default Credentials (google-auth is installed without it): pip install "
                    "'google-auth[requests]' (or 'allama[google]')"
                ) from missing
            try:
                if self._credentials is None:
                    self._credentials, _ = default(scopes=[CLOUD_PLATFORM_SCOPE])
                self._credentials.refresh(Request())
            except (exceptions.TransportError, exceptions.TimeoutError) as error:
                # Google's token endpoint out of reach: a network failure that may pass
                # (nothing was sent to the provider), not a refused credential.
                raise self._passing(NetworkError, "could not reach", error) from error
            except exceptions.GoogleAuthError as error:
                if getattr(error, "retryable", False):  # the endpoint's 5xx, marked so
                    raise self._passing(ServerError, "was failed by", error) from error
                raise self._failure(
                    f"could not get a token from Application Default Credentials "
                    f"({type(error).__name__}); run `gcloud auth application-default login` "
                    "or pass access_token="
                ) from error
            token = self.current()
            if token is None:
                raise self._failure("got no token from Application Default Credentials")
            return token

    def _passing(self, kind: type[Error], what: str, error: Exception) -> Error:
        return (
            kind(
                f"{self._provider} {what} Google's token endpoint refreshing Application "
                f"Default Credentials ({type(error).__name__}); nothing was sent"
            )
            .mark_authored()
            .with_provider(self._provider)
        )

    def _failure(self, why: str) -> AuthenticationError:
        return (
            AuthenticationError(f"{self._provider} {why}")
            .mark_authored()
            .with_provider(self._provider)
        )

    def __repr__(self) -> str:
        state = "valid" if self.current() is not None else "to refresh"
        return f"RefreshingToken({state})"
