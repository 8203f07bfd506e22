"""pyfdb 5.2x's Python API on fieldstore: scripts written for ECMWF's pyfdb run unchanged.

A separate distribution (``fieldstore-pyfdb``) so it never shadows a real pyfdb by surprise.
``__version__`` is the pyfdb API level emulated; ``__fieldstore_version__`` the store underneath.
"""

import fieldstore as _fieldstore

from pyfdb._errors import FDBException
from pyfdb.pyfdb import FDB
from pyfdb.pyfdb_iterator import (
    ControlElement,
    IndexAxis,
    ListElement,
    PurgeElement,
    StatsElement,
    StatusElement,
    WipeElement,
    WipeElementType,
)
from pyfdb.pyfdb_type import URI, ControlAction, ControlIdentifier, DataHandle, MarsSelection

__version__ = "5.25.0"
__fieldstore_version__ = getattr(_fieldstore, "__version__", "unknown")

__all__ = [
    "FDB",
    "URI",
    "DataHandle",
    "ListElement",
    "WipeElement",
    "WipeElementType",
    "StatusElement",
    "ControlAction",
    "ControlIdentifier",
    "PurgeElement",
    "StatsElement",
    "ControlElement",
    "IndexAxis",
    "MarsSelection",
    "FDBException",
]
