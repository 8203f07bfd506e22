"""Value types of pyfdb 5.2x: selections, identifiers, the data handle, control enums, URIs."""

import io
import os
from collections.abc import Collection, Mapping
from enum import IntEnum, IntFlag, auto
from pathlib import Path
from typing import Dict, List, Tuple, Union
from urllib import parse

from pyfdb._errors import error

MarsSelection = Mapping[str, Union[str, int, float, Collection]]
"""A MARS selection: keyword -> value, ``"a/b"`` string, or a collection of values."""

MarsIdentifier = Union[List[Tuple[str, str]], Dict[str, str]]
"""One field's key: keyword -> a single value."""


class UserInputMapper:
    """Normalises user selections and identifiers the way pyfdb does."""

    @classmethod
    def map_selection_to_internal(cls, selection):
        """``{keyword: [str, ...]}``; ``"a/b"`` strings are split, numbers become strings."""
        if selection is None:
            return {}
        if not isinstance(selection, Mapping):
            raise ValueError(
                f"MarsSelectionMapper: a selection must be a mapping of keyword to values, "
                f"not {type(selection).__name__}"
            )
        result = {}
        for key, values in selection.items():
            if isinstance(values, Mapping) or not isinstance(values, (int, float, str, Collection)):
                raise ValueError(
                    f"MarsSelectionMapper: The given value for key '{key}' is not valid. A MarsSelection "
                    f"has str, int, float or a collection of those as values"
                )
            if isinstance(values, str):
                result[key] = values.split("/") if "/" in values else [values]
            elif isinstance(values, (int, float)):
                result[key] = [str(values)]
            else:
                result[key] = [v if isinstance(v, str) else str(v) for v in values]
        return result

    @classmethod
    def map_selection_to_external(cls, selection):
        result = {}
        for key, values in selection.items():
            if isinstance(values, (str, int, float)):
                result[key] = str(values)
            else:
                result[key] = [str(v) for v in values]
        return result

    @classmethod
    def map_identifier_to_internal(cls, identifier):
        """``[(keyword, value), ...]``: one value per keyword, no duplicates."""
        if isinstance(identifier, list):
            pairs = identifier
        elif isinstance(identifier, Mapping):
            pairs = identifier.items()
        else:
            raise ValueError(
                "Identifier: Unknown type for key_value_pairs. List[Tuple[str, str]] or Dict[str, str] needed"
            )
        seen = {}
        for k, v in pairs:
            if k in seen:
                raise KeyError(f"Identifier: Key {k} already exists in Identifier: {seen}")
            if isinstance(v, (list, tuple)) or "/" in str(v):
                raise ValueError(
                    "No list of values allowed. An Identifier has to be a mapping from a single key to a single value."
                )
            seen[k] = str(v)
        return list(seen.items())


def selection_to_request(selection):
    """The fieldstore request for a pyfdb selection (values joined with ``/``, MARS ranges kept)."""
    internal = UserInputMapper.map_selection_to_internal(selection)
    request = {}
    for key, values in internal.items():
        if len(values) == 0:
            raise error("bad-request", f"no value given for keyword '{key}'")
        for v in values:
            # pyfdb refuses ["131/132"]: a list item is one value, never a list.
            if "/" in v or "," in v or "=" in v:
                raise error("bad-request", f"Bad value '{v}' for keyword '{key}': one value per list item")
        request[key] = "/".join(values)
    return request


_NOT_OPENED = "DataHandle: Read occured before the handle was opened. Must be opened first."


class DataHandle:
    """The bytes of a retrieve, read like a file once opened.

    Unlike pyfdb 5.25, ``read(n)`` returns at most the bytes left (pyfdb pads with zeros after a
    partial read), and ``seek``/``tell`` work.
    """

    def __init__(self, dataHandle, *, _internal=False):
        if not _internal:
            raise TypeError("Creating a DataHandle from user code is not supported.")
        self.dataHandle = dataHandle
        self.opened = False
        self._used = False

    def __enter__(self):
        self.open()
        return self

    def __exit__(self, exc_type, exc_value, exc_traceback):
        self.close()

    def __bool__(self):
        # pyfdb's handle is always truthy, even when the retrieve matched nothing.
        return True

    def open(self):
        """Open for reading; reopening after ``close`` starts again from the first byte."""
        if self.opened:
            return
        if self._used and self.dataHandle is not None:
            self.dataHandle.seek(0)
        self.opened = True
        self._used = True

    def close(self):
        self.opened = False

    @property
    def closed(self):
        return not self.opened

    def size(self):
        """Total bytes of the handle."""
        if self.dataHandle is None:
            return 0
        return _size(self.dataHandle)

    def read(self, len=-1):
        """Up to ``len`` bytes (all that is left for -1 or None); ``b""`` at the end."""
        if not self.opened:
            raise RuntimeError(_NOT_OPENED)
        if self.dataHandle is None:
            return b""
        if len is None or len < 0:
            return bytes(self.dataHandle.read(-1))
        chunks = []
        want = len
        while want > 0:
            chunk = self.dataHandle.read(want)
            if not chunk:
                break
            chunks.append(chunk)
            want -= chunk.__len__()
        return b"".join(chunks)

    def readinto(self, buffer):
        """Fill ``buffer`` as far as the data goes; the number of bytes written."""
        if not self.opened:
            raise RuntimeError(_NOT_OPENED)
        if self.dataHandle is None:
            return 0
        view = memoryview(buffer).cast("B")
        total = 0
        while total < view.nbytes:
            n = self.dataHandle.readinto(view[total:])
            if not n:
                break
            total += n
        return total

    def readall(self, buffer_size=1024):
        """Everything from the current position; opens and closes the handle itself."""
        self.open()
        try:
            return self.read(-1)
        finally:
            self.close()

    def readable(self):
        return True

    def seekable(self):
        return True

    def writable(self):
        return False

    def seek(self, offset, whence=io.SEEK_SET):
        if self.dataHandle is None:
            return 0
        return self.dataHandle.seek(offset, whence)

    def tell(self):
        if self.dataHandle is None:
            return 0
        return self.dataHandle.tell()

    def __repr__(self):
        return f"[{'Opened' if self.opened else 'Closed'}] Datahandle: fieldstore reader of {self.size()} bytes"


def _size(reader):
    size = getattr(reader, "size", None)
    if callable(size):
        return size()
    if size is not None:
        return int(size)
    return len(reader)


class FileSliceReader:
    """One field's bytes in a data file, read lazily: the data handle of a listed element."""

    def __init__(self, path, offset, length):
        self._path = os.fspath(path)
        self._offset = offset
        self.size = length
        self._pos = 0

    def read(self, n=-1):
        left = self.size - self._pos
        if n is None or n < 0 or n > left:
            n = left
        if n <= 0:
            return b""
        with open(self._path, "rb") as f:
            f.seek(self._offset + self._pos)
            data = f.read(n)
        self._pos += len(data)
        return data

    def readinto(self, buffer):
        view = memoryview(buffer).cast("B")
        data = self.read(view.nbytes)
        view[: len(data)] = data
        return len(data)

    def seek(self, offset, whence=io.SEEK_SET):
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}.get(whence)
        if base is None:
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        pos = base + offset
        if pos < 0:
            raise ValueError(f"negative seek position {pos}")
        self._pos = pos
        return pos

    def tell(self):
        return self._pos


class ControlIdentifier(IntFlag):
    """Which function of a database a control call addresses."""

    NONE = 0
    LIST = auto()
    RETRIEVE = auto()
    ARCHIVE = auto()
    WIPE = auto()
    UNIQUEROOT = auto()

    def _members(self):
        return [
            m
            for m in (
                ControlIdentifier.LIST,
                ControlIdentifier.RETRIEVE,
                ControlIdentifier.ARCHIVE,
                ControlIdentifier.WIPE,
                ControlIdentifier.UNIQUEROOT,
            )
            if self & m
        ]

    def __repr__(self):
        names = "|".join(m.name for m in self._members())
        return names or "NONE"

    def __str__(self):
        return self.__repr__()


class ControlAction(IntEnum):
    """What a control call does: ``DISABLE`` locks, ``ENABLE`` unlocks, ``NONE`` only reports."""

    NONE = 0
    DISABLE = auto()
    ENABLE = auto()

    def __repr__(self):
        return self.name

    def __str__(self):
        return self.__repr__()


class URI:
    """A resource location, as pyfdb's ``URI`` (a thin wrapper over ``urllib.parse``)."""

    def __init__(self, uri, scheme="", allow_fragments=True):
        if isinstance(uri, Path):
            uri = uri.as_posix()
        self._uri = parse.urlsplit(str(uri), scheme=scheme, allow_fragments=allow_fragments)

    def __eq__(self, other):
        return isinstance(other, URI) and parse.urlunsplit(self._uri) == parse.urlunsplit(other._uri)

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(parse.urlunsplit(self._uri))

    def netloc(self):
        return self._uri.netloc

    def scheme(self):
        return self._uri.scheme

    def username(self):
        return self._uri.username

    def password(self):
        return self._uri.password

    def hostname(self):
        return self._uri.hostname

    def port(self):
        return self._uri.port

    def path(self):
        return self._uri.path

    def query(self):
        return self._uri.query

    def fragment(self):
        return self._uri.fragment

    def __repr__(self):
        return parse.urlunsplit(self._uri)

    def __str__(self):
        return self.__repr__()
