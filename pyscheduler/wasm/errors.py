"""Errors of the fragment layer, each carrying what went wrong as attributes."""

from __future__ import annotations

__all__ = ["CallError", "FragmentError", "LoadError", "StorageError"]


class FragmentError(Exception):
    """Base of every fragment failure."""


class LoadError(FragmentError):
    """A module that cannot serve: invalid bytes, forbidden import, wrong or missing ABI marker,
    missing export, too large, failed ``wssp_init``, unknown runtime."""


class StorageError(FragmentError):
    """A module that could not be fetched: unreachable storage, missing object, size or time
    limit exceeded, sha256 mismatch, URL not allowed.

    ``refused`` is True when the configuration forbids the fetch (a URL it does not allow, a
    malformed URL): trying again cannot help until the resource or the configuration changes.
    Anything else may pass (storage away, an object not uploaded yet or being replaced)."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


class CallError(FragmentError):
    """One failed call into a fragment. ``kind`` is ``trap``, ``fuel``, ``timeout``, ``memory``,
    ``return`` (non-zero result), ``output`` (out-of-range verdict or score) or ``quarantined``
    (not called: the fragment is quarantined)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
