"""Store helpers for the xarray tests: archiving, and an FDB that counts what is read."""

import fieldstore


def archive(config, fields):
    """Archive ``(key, message)`` pairs in the store of ``config``; returns them."""
    with fieldstore.FDB(config) as fdb:
        fdb.archive(b"".join(m for _, m in fields))
    return fields


class CountingFDB:
    """A fieldstore.FDB that counts the retrieves made and the fields read through it."""

    def __init__(self, fdb):
        self._fdb = fdb
        self.retrieves = []
        self.fields_read = 0

    def list(self, *args, **kwargs):
        return self._fdb.list(*args, **kwargs)

    def retrieve(self, request):
        self.retrieves.append(request)
        return _CountingReader(self, self._fdb.retrieve(request))

    @property
    def config(self):
        return self._fdb.config


class _CountingReader:
    def __init__(self, owner, reader):
        self._owner = owner
        self._reader = reader

    def __iter__(self):
        for field in self._reader:
            self._owner.fields_read += 1
            yield field

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._reader.close()
