"""``multio.Multio``: pymultio's handle, over ``fieldstore._native.Pipeline``.

Why the PyO3 extension and not our ``libmultio-api.so`` through cffi/ctypes (pymultio's way): the
engine is already in the ``fieldstore`` wheel, so there is no second shared library to find
(pymultio needs findlibs and, for MultIO's wheel, an LD_LIBRARY_PATH fix), metadata crosses
with its Python types intact (no C ``int`` cast, no ASCII-only strings), arrays cross once as
bytes whatever their shape, and errors arrive as typed exceptions instead of codes.
"""

from __future__ import annotations

import functools
import os

import numpy as np

from fieldstore import _native
from fieldstore.errors import Error as _FieldstoreError

from .metadata import Metadata


class MultioException(RuntimeError):
    """A failure of a MultIO call: the message names the function, and the plan, action and
    field that failed; ``__cause__`` is the fieldstore exception (with its ``kind``)."""


def _calls(name):
    """Turns fieldstore's exceptions into MultioException("Error in function NAME: ..."), the
    message pymultio gives."""

    def wrap(f):
        @functools.wraps(f)
        def inner(*args, **kwargs):
            try:
                return f(*args, **kwargs)
            except _FieldstoreError as e:
                raise MultioException(f"Error in function {name}: {e}") from e

        return inner

    return wrap


def _as_dict(metadata):
    if metadata is None:
        return {}
    if isinstance(metadata, Metadata):
        return metadata.to_dict()
    if isinstance(metadata, dict):
        return dict(metadata)
    raise TypeError(f"Can not handle type {type(metadata)} as metadata")


def _mpi_only(what):
    return MultioException(
        f"{what} needs MPI (domain maps, masks or I/O servers), which fieldstore's multio does not "
        "have: write whole fields, and set missingValue/bitmapPresent instead of masks"
    )


class Multio:
    """A MultIO client: the plans of ``config_path`` (a MultIO YAML config), or of MultIO's
    environment (``MULTIO_SERVER_CONFIG_FILE``, ``MULTIO_PLANS``... as set by ``MultioPlan``)
    when it is None. The MPI arguments are accepted and ignored (no plan here uses MPI).
    Plan errors (unknown or refused actions, bad YAML) raise here, naming file and line."""

    @_calls("multio_new_handle")
    def __init__(self, config_path=None, allow_world=None, parent_comm=None, client_comm=None,
                 server_comm=None):
        path = os.fspath(config_path) if config_path is not None else None
        self._pipeline = _native.Pipeline(path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        # As deleting a MultIO handle: nothing is flushed (send a last-step flush first).
        return False

    def __version__(self):
        from . import __version__

        return __version__

    def plan_names(self):
        """The plans' names, in order (fieldstore's addition)."""
        return self._pipeline.plan_names()

    def open_connections(self):
        """Nothing to open: plans run in this process."""

    @_calls("multio_close_connections")
    def close_connections(self):
        """Sends the ``close-connection`` flush MultIO sends."""
        self._pipeline.flush({"flushKind": "close-connection", "toAllServers": True,
                              "domain": "global"})

    def start_server(self):
        raise _mpi_only("start_server")

    def write_domain(self, metadata, data):
        raise _mpi_only("write_domain")

    def write_mask(self, metadata, data):
        raise _mpi_only("write_mask")

    @_calls("multio_flush")
    def flush(self, metadata=None):
        """A step is complete (``flushKind``, ``step``...); ``last-step`` emits open windows."""
        self._pipeline.flush(_as_dict(metadata))

    @_calls("multio_notify")
    def notify(self, metadata):
        """Trigger events (``trigger: step``...)."""
        self._pipeline.notify(_as_dict(metadata))

    @_calls("multio_field_accepted")
    def field_accepted(self, metadata):
        """Whether any plan's selects take a field with this metadata."""
        return bool(self._pipeline.field_accepted(_as_dict(metadata)))

    def write_field(self, metadata, data):
        """Writes a field: float32 arrays as single precision (``multio_write_field_float``),
        anything else converted to float64 (``multio_write_field_double``). Arrays of any shape
        are written whole, in C order. A ``Metadata`` object gets ``misc-precision`` and
        ``misc-format`` set, as MultIO sets them on the C object."""
        arr = np.asarray(data)
        if arr.dtype == np.float32:
            precision, arr = "single", np.ascontiguousarray(arr).ravel()
        else:
            precision, arr = "double", np.ascontiguousarray(arr, dtype=np.float64).ravel()
        name = "multio_write_field_float" if precision == "single" else "multio_write_field_double"
        md = _as_dict(metadata)
        try:
            self._pipeline.write_field(md, arr.tobytes(), precision)
        except _FieldstoreError as e:
            raise MultioException(f"Error in function {name}: {e}") from e
        if isinstance(metadata, Metadata):
            metadata["misc-precision"] = precision
            metadata["misc-format"] = "raw"

    @_calls("multio_write_grib_encoded")
    def write_grib(self, data):
        """Writes an encoded GRIB message as is (bytes, bytearray, memoryview or a numpy array of
        its bytes)."""
        if isinstance(data, np.ndarray):
            data = np.ascontiguousarray(data).tobytes()
        self._pipeline.write_grib(bytes(data))

    @_calls("multio_write_parametrization")
    def write_parametrization(self, metadata):
        """Static keys every later message is seen with. Arrays, lists and bytes go through
        ``write_parametrization_array``; unlike pymultio the caller's dict is not modified."""
        md = _as_dict(metadata)
        scalars = {}
        for key, value in md.items():
            if isinstance(value, (np.ndarray, list, tuple, bytes, bytearray)):
                self.write_parametrization_array(key, value)
            else:
                scalars[key] = value
        self._pipeline.write_parametrization(scalars)

    @_calls("multio_write_parametrization_array")
    def write_parametrization_array(self, key, data):
        """An array under ``key``: ints (int32, int64, bytes) stay ints, floats are doubles.
        pymultio sends a Python list as doubles; here a list of ints stays ints."""
        if isinstance(data, (bytes, bytearray)):
            values = list(data)
        else:
            arr = np.asarray(data)
            if arr.dtype.kind in "iub":
                values = [int(x) for x in arr.ravel()]
            elif arr.dtype.kind == "f":
                values = [float(x) for x in arr.ravel()]
            else:
                raise TypeError(f"parametrization '{key}': {arr.dtype} is not an int or float array")
        if not values:
            raise MultioException(
                f"Error in function multio_write_parametrization_array: '{key}': the array is empty"
            )
        self._pipeline.write_parametrization({key: values})
