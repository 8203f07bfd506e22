"""FDB.retrieve: the Reader (read, readinto, seek, fields, iteration) and streaming."""

import gc
import io

import numpy as np
import pytest

import fieldstore
from testkeys import BASE_KEY


def request(**kw):
    return dict(BASE_KEY, param="130", levelist="500", **kw)


def test_read_whole_and_in_pieces(store, sample_fields):
    want = b"".join(d for k, d in sample_fields if k["param"] == "130" and k["levelist"] == "500")
    r = store.retrieve(request(step=[0, 6, 12]))
    assert len(r) == r.size == len(want)
    assert r.read(0) == b"" and r.tell() == 0
    head = r.read(10)
    assert head == want[:10] and r.tell() == 10
    assert r.read() == want[10:]
    assert r.read() == b"" and r.read(5) == b""
    r.seek(0)
    assert r.readall() == want


def test_readinto_fills_buffers_in_place(store):
    r = store.retrieve(request(step=[0, 6]))
    whole = r.read()
    r.seek(0)
    buf = bytearray(7)
    assert r.readinto(buf) == 7 and bytes(buf) == whole[:7]
    arr = np.zeros(100, dtype=np.uint8)
    assert r.readinto(arr) == 100 and arr.tobytes() == whole[7:107]
    mv = memoryview(bytearray(len(whole)))
    n = r.readinto(mv)
    assert n == len(whole) - 107 and mv[:n].tobytes() == whole[107:]
    assert r.readinto(bytearray(10)) == 0
    with pytest.raises(TypeError):
        r.readinto(b"read-only bytes")


def test_seek_tell_whence(store):
    r = store.retrieve(request(step=[0, 6]))
    size = len(r)
    assert r.seek(5) == 5 and r.tell() == 5
    assert r.seek(3, 1) == 8
    assert r.seek(-4, 2) == size - 4
    assert r.read() == r.read() + b"" or True
    r.seek(-4, io.SEEK_END)
    assert r.read()[-4:] == b"7777"
    with pytest.raises(ValueError):
        r.seek(0, 5)
    with pytest.raises(ValueError):
        r.seek(-1)


def test_fields_and_iteration(store):
    r = store.retrieve(request(step=[0, 6, 12]))
    infos = r.fields
    assert [f.key["step"] for f in infos] == ["0", "6", "12"]
    assert infos[1].offset == infos[0].length
    assert sum(f.length for f in infos) == len(r)
    fields = list(r)
    assert [f.key for f in fields] == [i.key for i in infos]
    for f, i in zip(fields, infos):
        assert isinstance(f, fieldstore.Field)
        assert (f.offset, f.length, len(f.data)) == (i.offset, i.length, i.length)
        assert f.data.startswith(b"GRIB") and f.data.endswith(b"7777")
    assert "FieldInfo(" in repr(infos[0]) and "Field(" in repr(fields[0])


def test_io_protocol_and_close(store):
    r = store.retrieve(request(step=0))
    assert r.readable() and r.seekable() and not r.writable() and not r.closed
    with r as same:
        assert same is r
        same.read(4)
    assert r.closed
    r.close()  # twice is fine
    with pytest.raises(ValueError):
        r.read()
    buffered = io.BufferedReader(store.retrieve(request(step=0)))
    assert buffered.read(4) == b"GRIB"


def test_nothing_matching_gives_an_empty_reader(store):
    r = store.retrieve(request(step=999))
    assert len(r) == 0 and r.read() == b"" and r.fields == [] and list(r) == []


def test_unknown_keyword_raises(store):
    with pytest.raises(fieldstore.SchemaError):
        store.retrieve({"nosuchkeyword": 1})
    with pytest.raises(TypeError):
        store.retrieve(None)


def test_reader_outlives_its_fdb(store):
    r = store.retrieve(request(step=[0, 6]))
    size = len(r)
    del store
    gc.collect()
    assert len(r.read()) == size


def test_values_as_numpy(store):
    r = store.retrieve(request(step=[0, 6]))
    values = r.to_numpy()
    assert values.shape == (2, 100) and values.dtype == np.float64
    first = next(iter(r))
    assert np.array_equal(first.to_numpy(), values[0])
    assert np.array_equal(fieldstore.Message(first.data).to_numpy(), values[0])


def test_field_metadata_and_geometry(store):
    (f,) = list(store.retrieve(request(step=6)))
    assert f.metadata("step") == 6 and f.metadata("levelist") == 500
    assert f.metadata("no-such-key", default=None) is None
    assert f.latitudes.shape == f.longitudes.shape == (100,)
    assert isinstance(f.grid, dict) and f.grid.get("gridType")
    assert f["param"] == "130" and len(f) == f.length


def test_to_numpy_refuses_fields_of_different_sizes(fdb, make_fields):
    fields = make_fields(steps=(0,), params=("130",), levels=(500,), npoints=10)
    fields += make_fields(steps=(6,), params=("130",), levels=(500,), npoints=20)
    fdb.archive(b"".join(d for _, d in fields))
    fdb.flush()
    r = fdb.retrieve(request(step=[0, 6]))
    with pytest.raises(ValueError, match="different numbers of points"):
        r.to_numpy()
    a, b = (f.to_numpy().shape for f in r)
    assert a != b
    assert fdb.retrieve(request(step=99)).to_numpy().shape == (0, 0)


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_a_retrieve_larger_than_memory_is_streamed_with_constant_rss(fdb):
    chunk = 4 << 20
    field = bytes(range(256)) * (10 << 20 >> 8)  # 10 MiB
    n = 30
    for step in range(n):
        fdb.archive(field, key=request(step=step))
    fdb.flush()
    del field
    gc.collect()
    r = fdb.retrieve(request(step=list(range(n))))
    assert len(r) == n * (10 << 20) and len(r.fields) == n
    before = _rss()
    peak = before
    total = 0
    buf = bytearray(chunk)
    while True:
        got = r.read(chunk)
        if not got:
            break
        total += len(got)
        peak = max(peak, _rss())
    r.seek(0)
    while (k := r.readinto(buf)):
        total += k
        peak = max(peak, _rss())
    assert total == 2 * len(r)
    assert peak - before < 100 << 20, f"RSS grew by {(peak - before) >> 20} MiB"
