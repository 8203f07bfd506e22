"""Exceptions of the compatibility layer.

pyfdb 5.2x raises ``RuntimeError`` for everything its C++ library reports, so scripts written for
it say ``except RuntimeError``. fieldstore raises typed errors (``fieldstore.NotFoundError`` is
also a ``KeyError``, and so on). Each class here is both: a ``RuntimeError`` for old scripts and the
matching ``fieldstore`` class for new code.
"""

import fieldstore


class FDBException(RuntimeError):
    """Base of every error this module raises on behalf of the store."""

    kind = "internal"

    def __init__(self, message, kind=None):
        RuntimeError.__init__(self, message)
        self.message = message
        if kind is not None:
            self.kind = kind

    def __str__(self):
        return self.message


# fieldstore kind -> (fieldstore class name, message prefix pyfdb users grep for)
_KINDS = {
    "not-found": ("NotFoundError", "UserError: "),
    "bad-request": ("BadRequestError", "UserError: "),
    "schema": ("SchemaError", "UserError: "),
    "config": ("ConfigError", "UserError: "),
    "permission": ("PermissionDeniedError", ""),
    "locked": ("LockedError", ""),
    "corrupt": ("CorruptError", "SeriousBug: "),
    "io": ("StorageIOError", ""),
    "remote": ("RemoteError", ""),
    "full": ("FullError", ""),
    "unsupported": ("UnsupportedError", ""),
    "internal": ("InternalError", "SeriousBug: "),
}

_CLASSES = {}


def _make(kind, fs_name):
    base = getattr(fieldstore, fs_name, None)
    bases = (FDBException,) if base is None else (FDBException, base)
    name = "FDB" + fs_name
    cls = type(name, bases, {"kind": kind, "__module__": __name__, "__str__": FDBException.__str__})
    globals()[name] = cls
    return cls


for _kind, (_fs_name, _prefix) in _KINDS.items():
    _CLASSES[_kind] = _make(_kind, _fs_name)


def error(kind, message):
    """A compatibility exception of ``kind``, with the prefix pyfdb would print."""
    _fs_name, prefix = _KINDS.get(kind, _KINDS["internal"])
    cls = _CLASSES.get(kind, _CLASSES["internal"])
    return cls(prefix + message, kind)


def translate(exc):
    """The compatibility exception for a ``fieldstore.Error`` (chained by the caller)."""
    kind = getattr(exc, "kind", "internal")
    message = getattr(exc, "message", None) or str(exc)
    return error(kind, message)


class translated:
    """Context manager turning ``fieldstore.Error`` into the compatibility exceptions."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        base = getattr(fieldstore, "Error", None)
        if exc is not None and base is not None and isinstance(exc, base):
            if isinstance(exc, FDBException):
                return False
            raise translate(exc) from exc
        return False
