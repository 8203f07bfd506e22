"""Exceptions raised by fieldstore: one class per error kind of the library.

Every exception is a :class:`fieldstore.Error` with ``kind`` (the library's stable kind name,
e.g. ``"not-found"``) and ``message``; each class also derives from the builtin exception a Python
user would catch (``KeyError`` for a missing field, ``ValueError`` for a bad request...).
"""

from __future__ import annotations

import builtins

__all__ = [
    "Error",
    "NotFoundError",
    "BadRequestError",
    "SchemaError",
    "ConfigError",
    "PermissionDeniedError",
    "LockedError",
    "CorruptError",
    "StorageIOError",
    "RemoteError",
    "FullError",
    "UnsupportedError",
    "TimeoutError",
    "FellBehindError",
    "InternalError",
]


class Error(Exception):
    """Base class of every fieldstore error."""

    kind: str = "internal"

    def __init__(self, message: str = "", kind: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if kind is not None:
            self.kind = kind

    # KeyError's own __str__ would quote the message as a repr.
    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class NotFoundError(Error, KeyError):
    """Nothing matches the request (no database, no field)."""

    kind = "not-found"


class BadRequestError(Error, ValueError):
    """The request or input is malformed or not allowed (bad keyword, bad value, not GRIB)."""

    kind = "bad-request"


class SchemaError(Error, ValueError):
    """A schema does not parse, or a key does not fit it."""

    kind = "schema"


class ConfigError(Error, ValueError):
    """The configuration is wrong or incomplete."""

    kind = "config"


class PermissionDeniedError(Error, PermissionError):
    """The operating system or the store's owner refuses the action."""

    kind = "permission"


class LockedError(Error):
    """The operation is locked on the database (see FDB.control)."""

    kind = "locked"


class CorruptError(Error):
    """Stored data fails its checks: needs repair, not retry."""

    kind = "corrupt"


class StorageIOError(Error, OSError):
    """An I/O failure of the local system: may succeed on retry."""

    kind = "io"

    # OSError.__str__ formats errno/strerror; the message says it all.
    def __str__(self) -> str:
        return self.message


class RemoteError(Error, ConnectionError):
    """A failure talking to a fieldstore server."""

    kind = "remote"

    def __str__(self) -> str:
        return self.message


class FullError(Error, OSError):
    """The store has no room left."""

    kind = "full"

    def __str__(self) -> str:
        return self.message


class UnsupportedError(Error, NotImplementedError):
    """The frontend or backend does not offer this operation."""

    kind = "unsupported"


class TimeoutError(Error, builtins.TimeoutError):  # noqa: A001 - fieldstore.TimeoutError
    """A wait ran out (``retrieve(..., wait=)``): the message names the fields still missing."""

    kind = "timeout"

    def __str__(self) -> str:
        return self.message


class FellBehindError(Error):
    """A subscription's position points at history the store no longer keeps: start again
    from ``"now"`` or ``"beginning"``, or re-read what was missed another way."""

    kind = "fell-behind"


class InternalError(Error):
    """A defect of fieldstore itself: please report it."""

    kind = "internal"


_BY_KIND = {
    cls.kind: cls
    for cls in (
        NotFoundError,
        BadRequestError,
        SchemaError,
        ConfigError,
        PermissionDeniedError,
        LockedError,
        CorruptError,
        StorageIOError,
        RemoteError,
        FullError,
        UnsupportedError,
        TimeoutError,
        FellBehindError,
        InternalError,
    )
}


def _from_kind(kind: str, message: str) -> Error:
    """The exception for a kind (used by the native module); unknown kinds give Error."""
    cls = _BY_KIND.get(kind, Error)
    return cls(message, kind)
