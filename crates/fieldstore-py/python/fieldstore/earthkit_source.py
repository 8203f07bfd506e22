"""The earthkit-data source ``"fieldstore"``: fields straight from a field store, without pyfdb.

``earthkit.data.from_source("fieldstore", request, config=None)``. earthkit-data 1.x finds this
module through the ``earthkit.data.sources`` entry point and instantiates its ``source`` class.
Unlike earthkit's ``fdb`` source it needs no environment variable (the configuration is discovered
as the CLI does, or given), and by default it gives a field list held in memory rather than a
cached file: a cache keyed by the request would show stale fields after the store changes.
See docs/python-xarray.md.
"""

from __future__ import annotations

import io

from earthkit.data.sources import Source
from earthkit.data.utils.request import RequestBuilder, RequestMapper

__all__ = ["FieldstoreSource", "source"]


def _open_fdb(config, fdb):
    if fdb is not None:
        return fdb
    import fieldstore

    return fieldstore.FDB(config)


def _clean(key):
    """A listed key without the empty values of absent optional keys (``hdate=``)."""
    return {str(k): str(v) for k, v in dict(key).items() if v is not None and str(v) != ""}


def _listed_request(fdb, request):
    """The request as one retrieve can take it: every key named, with the values the store lists.

    A retrieve needs a value for every key of the schema; users of earthkit often leave some
    out. Listing first fills them in; the result is the hypercube of listed values, which holds
    exactly the listed fields (each value of each key matched the request). None: no field.
    """
    merged = {}
    for element in fdb.list(request, keys=True, level=3):
        for name, value in _clean(element.key).items():
            values = merged.setdefault(name, [])
            if value not in values:
                values.append(value)
    if not merged:
        return None
    return {name: values[0] if len(values) == 1 else values for name, values in merged.items()}


class _BufferedReader(io.RawIOBase):
    """A fieldstore Reader as a true ``io.RawIOBase``, so ``io.BufferedReader`` (which gives
    earthkit the ``peek`` it uses to recognise GRIB) can wrap it."""

    def __init__(self, reader):
        super().__init__()
        self._reader = reader

    def readable(self):
        return True

    def readinto(self, buffer):
        return self._reader.readinto(buffer)

    def close(self):
        try:
            self._reader.close()
        finally:
            super().close()


class FieldstoreSource(Source):
    """Fields a MARS request selects in a field store.

    ``stream=False`` (default): every field read into memory, a full field list (``len``,
    ``sel``, ``order_by``, ``to_xarray``...). ``stream=True``: fields read one by one as iterated.
    ``lazy=True``: the store is listed now, each field retrieved when its values are needed.
    ``config``: as ``fieldstore.FDB(config)`` (None: discovery); ``fdb``: an open handle instead.
    """

    def __init__(
        self, *args, request=None, config=None, fdb=None, stream=False, lazy=False, **kwargs
    ):
        super().__init__()
        text = request if isinstance(request, str) else None
        if text is None and len(args) == 1 and isinstance(args[0], str):
            text, args = args[0], ()
        if text is not None:
            # A MARS string ("class=od,param=t/u") goes to the store as it is.
            if args or kwargs:
                raise ValueError("a MARS string request cannot be combined with other request keys")
            self.request = text
        else:
            requests = RequestBuilder(self, *args, request=request, **kwargs).requests
            if len(requests) != 1:
                raise ValueError(
                    f"the fieldstore source takes exactly one request, not {len(requests)}"
                )
            self.request = dict(requests[0])
        self.config = config
        self._fdb = fdb
        self.stream = stream
        self.lazy = lazy
        if stream and lazy:
            raise ValueError("the fieldstore source is either stream=True or lazy=True, not both")

    def fdb(self):
        if self._fdb is None:
            self._fdb = _open_fdb(self.config, None)
        return self._fdb

    def mutate(self):
        from earthkit.data.sources import _from_source_internal

        if self.lazy:
            from earthkit.data.field.grib.virtual import VirtualGribFieldList

            return VirtualGribFieldList(_Mapper(self.request, self.fdb()), _Retriever(self.fdb()))
        request = _listed_request(self.fdb(), self.request)
        if request is None:
            return _from_source_internal("empty")
        reader = self.fdb().retrieve(request)
        if self.stream:
            from earthkit.data.sources.stream import StreamSource

            return StreamSource(io.BufferedReader(_BufferedReader(reader)))
        with reader:
            data = reader.readall()
        return _from_source_internal("memory", data)

    def __repr__(self):
        return f"FieldstoreSource(request={self.request!r}, stream={self.stream}, lazy={self.lazy})"


class _Mapper(RequestMapper):
    """The fields of a request, one request per field, as the store lists them (lazy mode)."""

    _CONVERT = {"date": int, "time": int, "step": int, "levelist": int, "number": int}

    def __init__(self, request, fdb, **kwargs):
        super().__init__(request, **kwargs)
        self._fdb = fdb
        # earthkit asks virtual fields for GRIB keys; these are the MARS keys they mean.
        self.metadata_alias = {
            "stepRange": "step",
            "typeOfLevel": "leveltype",
            "level": "levelist",
            "dataDate": "date",
            "dataTime": "time",
        }

    def _build(self):
        out = []
        for element in self._fdb.list(self.request, keys=True, level=3):
            key = _clean(element.key)
            for name, convert in self._CONVERT.items():
                if name in key:
                    try:
                        key[name] = convert(key[name])
                    except ValueError:
                        pass  # e.g. step=0-6 or levelist=0.5 stay text
            out.append(key)
        return out


class _Retriever:
    """Fetches the one field a virtual field stands for (lazy mode)."""

    def __init__(self, fdb):
        self._fdb = fdb

    def get(self, request):
        from earthkit.data.sources import _from_source_internal

        request = {k: str(v) for k, v in request.items()}
        with self._fdb.retrieve(request) as reader:
            data = reader.readall()
        return _from_source_internal("memory", data).to_fieldlist()


source = FieldstoreSource
