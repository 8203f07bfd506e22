"""``multio.Metadata``: a typed key/value set, as pymultio's (which wraps a C metadata object)."""

from __future__ import annotations

_INT64 = (-(2**63), 2**63 - 1)


class Metadata:
    """Metadata for a field, flush or notification.

    ``Metadata(parent_multio, md=None)`` as in pymultio; ``md[key] = value`` takes a bool, int
    (64-bit), float or str. Unlike pymultio, a bool stays a bool (pymultio tests ``int`` first,
    so ``True`` reaches MultIO as the int 1), an int that does not fit in 64 bits raises instead
    of being truncated to 32 bits, and keys and strings may be any Unicode, not only ASCII.
    """

    def __init__(self, parent_multio=None, md=None):
        self._values = {}
        if md is not None:
            for key, value in md.items():
                self[key] = value

    def __setitem__(self, key, value):
        if not isinstance(key, str):
            raise TypeError(f"metadata keys are str, not {type(key).__name__}")
        if isinstance(value, bool):
            pass
        elif isinstance(value, int):
            if not _INT64[0] <= value <= _INT64[1]:
                raise ValueError(f"metadata key '{key}': {value} does not fit in 64 bits")
        elif isinstance(value, (str, float)):
            pass
        else:
            raise TypeError(f"{type(value).__name__} is not allowed for metadata (key '{key}')")
        self._values[key] = value

    def __getitem__(self, key):
        return self._values[key]

    def __contains__(self, key):
        return key in self._values

    def __iter__(self):
        return iter(self._values)

    def __len__(self):
        return len(self._values)

    def items(self):
        return self._values.items()

    def copy(self):
        return Metadata(md=self._values)

    def to_dict(self):
        """A copy of the keys and values as a dict."""
        return dict(self._values)

    def __repr__(self):
        return f"Metadata({self._values!r})"
