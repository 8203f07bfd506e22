"""Fields read back from a store, decoded by ecCodes on demand."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
# numpy is imported only when values are decoded: importing it starts OpenBLAS's threads, which
# cost CPU in programs that only archive, list or read bytes.

_MISSING = object()


def _message(data: bytes) -> Any:
    from fieldstore import _native

    cls = getattr(_native, "Message", None)
    if cls is None:
        raise NotImplementedError("this build of fieldstore has no GRIB decoder (_native.Message)")
    return cls(data)


class Field:
    """One retrieved field: its key, where it sat in the Reader's stream, and its GRIB bytes.

    Values and metadata are decoded by ecCodes when first asked for, then kept.
    """

    __slots__ = ("key", "offset", "length", "data", "_msg")

    def __init__(self, key: dict, offset: int, length: int, data: bytes) -> None:
        self.key = key
        self.offset = offset
        self.length = length
        self.data = data
        self._msg = None

    @property
    def message(self) -> Any:
        """The decoded message (`fieldstore.Message`)."""
        if self._msg is None:
            self._msg = _message(self.data)
        return self._msg

    def to_numpy(self) -> np.ndarray:
        """The values as a float64 array, missing values as NaN."""
        return self.message.to_numpy()

    def metadata(self, name: str, default: Any = _MISSING) -> Any:
        """Any ecCodes key of the message; `default` if given and the key is absent."""
        if default is _MISSING:
            return self.message.metadata(name)
        return self.message.metadata(name, default)

    @property
    def latitudes(self) -> np.ndarray:
        return self.message.latitudes

    @property
    def longitudes(self) -> np.ndarray:
        return self.message.longitudes

    @property
    def grid(self) -> dict:
        """The grid's description (gridType, Ni, Nj, N, pl...)."""
        return self.message.grid

    def __getitem__(self, keyword: str) -> str:
        return self.key[keyword]

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        key = ",".join(f"{k}={v}" for k, v in self.key.items())
        return f"Field({{{key}}}, offset={self.offset}, length={self.length})"


def _reader_to_numpy(reader: Any) -> np.ndarray:
    """Reader.to_numpy: every field's values stacked, shape (fields, points)."""
    import numpy as np

    rows = [f.to_numpy() for f in reader]
    if not rows:
        return np.empty((0, 0), dtype=np.float64)
    sizes = {r.shape[0] for r in rows}
    if len(sizes) > 1:
        raise ValueError(
            f"the fields have different numbers of points ({sorted(sizes)}): "
            "iterate over the reader and decode each field instead"
        )
    return np.stack(rows).astype(np.float64, copy=False)
