"""fieldstore: a store for GRIB weather fields (FDB5-compatible), from Python.

    import fieldstore
    fdb = fieldstore.FDB({"type": "local", "engine": "toc", "spaces": [{"roots": [{"path": "/data/fdb"}]}]})
    fdb.archive(open("fields.grib", "rb").read()); fdb.flush()
    for el in fdb.list({"class": "od", "param": "t"}): print(el.key)
    full = {"class": "od", "expver": "0001", "stream": "oper", "date": "20261122", "time": "1200",
            "type": "fc", "levtype": "pl", "levelist": 500, "param": "t", "step": [0, 6]}
    values = fdb.retrieve(full).to_numpy()   # retrieve names every keyword; list may be partial
"""

from __future__ import annotations

from . import _native
from ._field import Field


def _register_eccodeslib() -> None:
    """Tell the native library where the `eccodeslib` wheel is (by import spec, which also works
    for `--target` and user-site installs), so that ecCodes, opened when first needed, is the
    same copy pyfdb and eccodes-python use: one ecCodes per process. Imports and loads nothing."""
    import importlib.util
    import os

    def package_dir(name: str):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
        if spec is None or not spec.submodule_search_locations:
            return None
        return os.fspath(list(spec.submodule_search_locations)[0])

    eccodeslib = package_dir("eccodeslib")
    if eccodeslib is not None:
        _native._prefer_eccodeslib(eccodeslib, package_dir("eckitlib"))


_register_eccodeslib()
from ._native import (
    FDB,
    ArchiveSummary,
    CompactElement,
    ControlElement,
    DumpElement,
    FieldInfo,
    ListElement,
    Message,
    ListIterator,
    PurgeElement,
    Reader,
    StatsElement,
    Subscription,
    WaitingReader,
    WhereElement,
    WipeElement,
    eccodes_info,
    eccodes_version,
    make_field,
)
from .errors import (
    BadRequestError,
    ConfigError,
    CorruptError,
    Error,
    FullError,
    InternalError,
    LockedError,
    NotFoundError,
    PermissionDeniedError,
    FellBehindError,
    RemoteError,
    SchemaError,
    StorageIOError,
    TimeoutError,
    UnsupportedError,
)

__version__: str = _native.__version__

__all__ = [
    "FDB",
    "ArchiveSummary",
    "ListElement",
    "ListIterator",
    "Reader",
    "Subscription",
    "WaitingReader",
    "FieldInfo",
    "Field",
    "Message",
    "WhereElement",
    "WipeElement",
    "PurgeElement",
    "StatsElement",
    "DumpElement",
    "ControlElement",
    "CompactElement",
    "eccodes_info",
    "eccodes_version",
    "make_field",
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
    "__version__",
]
