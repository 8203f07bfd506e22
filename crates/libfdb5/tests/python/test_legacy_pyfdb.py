"""The legacy pyfdb (PyPI 0.1.3, cffi over fdb_c.h) on fieldstore's libfdb5.so: it finds the
library through findlibs and FDB5_HOME, accepts its version, and archives, lists and retrieves."""

import os

import pytest

import pyfdb
from conftest import REQUEST, key_of


def test_loads_fieldstores_library_through_fdb5_home(fdb5_home):
    assert os.path.realpath(pyfdb.lib.path) == os.path.join(fdb5_home, "lib", "libfdb5.so")
    # pyfdb refuses a library older than 5.12.1; ours reports the API level it implements.
    assert tuple(int(p) for p in pyfdb.lib.version.split(".")) >= (5, 12, 1)
    vcs = pyfdb.ffi.new("char**")
    pyfdb.lib.fdb_vcs_version(vcs)
    assert pyfdb.ffi.string(vcs[0]).decode().startswith("fieldstore-")


def test_list_gives_every_field_with_keys_and_location(store, fields):
    fdb = pyfdb.FDB(store)
    listed = list(fdb.list(REQUEST, keys=True))
    assert len(listed) == len(fields)
    assert sorted(tuple(sorted(el["keys"].items())) for el in listed) == sorted(
        tuple(sorted(key_of(*k).items())) for k in fields
    )
    by_key = {(int(el["keys"]["date"]), int(el["keys"]["param"]), int(el["keys"]["step"])): el for el in listed}
    for k, message in fields.items():
        el = by_key[k]
        assert el["length"] == len(message)
        # A plain path to the archived bytes, as FDB5 gives it (not a file:// URI).
        with open(el["path"], "rb") as f:
            f.seek(el["offset"])
            assert f.read(el["length"]) == message


def test_list_depth_1_gives_databases(store):
    fdb = pyfdb.FDB(store)
    dbs = list(fdb.list({"class": "od", "expver": "0001"}, keys=True, depth=1))
    assert {el["keys"]["date"] for el in dbs} == {"20240101", "20240102"}
    assert all("param" not in el["keys"] for el in dbs)


def test_retrieve_gives_the_archived_bytes(store, fields):
    fdb = pyfdb.FDB(store)
    for k, message in fields.items():
        date, param, step = k
        one = fdb.retrieve(dict(REQUEST, date=date, param=param, step=step))
        assert one.read() == message
    everything = fdb.retrieve(REQUEST)
    everything.open()
    assert everything.size() == sum(len(m) for m in fields.values())
    data = everything.read()
    assert len(data) == everything.size()
    assert sorted(fields.values()) == sorted(_split(data))


def test_reader_seeks_tells_and_skips(store, fields):
    fdb = pyfdb.FDB(store)
    message = fields[(20240101, 167, 6)]
    reader = fdb.retrieve(dict(REQUEST, date=20240101, param=167, step=6))
    reader.open()
    assert reader.tell() == 0
    reader.seek(10)
    assert reader.tell() == 10
    assert reader.read(20) == message[10:30]
    reader.skip(5)
    assert reader.tell() == 35
    assert reader.read(10) == message[35:45]
    reader.close()


def test_archive_with_a_key_stores_bytes_under_it(config, fields):
    fdb = pyfdb.FDB(config)
    message = fields[(20240102, 165, 0)]
    key = key_of(20240102, 165, 0)
    fdb.archive(message, key=key)
    fdb.flush()
    listed = list(fdb.list(dict(REQUEST, date=20240102, param=165, step=0), keys=True))
    assert [el["keys"] for el in listed] == [key]
    assert fdb.retrieve(dict(REQUEST, date=20240102, param=165, step=0)).read() == message


def test_module_functions_use_the_discovered_config(config, fields, monkeypatch):
    # pyfdb.archive/list/retrieve make one FDB() from the environment (fdb_new_handle).
    monkeypatch.setenv("FDB5_CONFIG", str(config).replace("'", '"'))
    monkeypatch.setattr(pyfdb.pyfdb, "fdb", None)
    message = fields[(20240101, 165, 6)]
    pyfdb.archive(message)
    pyfdb.flush()
    request = dict(REQUEST, date=20240101, param=165, step=6)
    assert len(list(pyfdb.list(request))) == 1
    assert pyfdb.retrieve(request).read() == message
    monkeypatch.setattr(pyfdb.pyfdb, "fdb", None)


def test_a_request_matching_nothing_lists_and_reads_nothing(store):
    fdb = pyfdb.FDB(store)
    request = dict(REQUEST, date=20230101)
    assert list(fdb.list(request)) == []
    assert fdb.retrieve(request).read() == b""


def test_bad_input_raises_with_fieldstores_message_and_stores_nothing(config, fields):
    fdb = pyfdb.FDB(config)
    with pytest.raises(pyfdb.pyfdb.FDBException, match="unknown keyword in request: foo"):
        list(fdb.list({"class": "od", "foo": "bar"}))
    with pytest.raises(pyfdb.pyfdb.FDBException, match="fdb_archive: .*missing"):
        fdb.archive(b"GRIB", key={"class": "od", "param": "167"})
    one, two = fields[(20240101, 167, 0)], fields[(20240101, 167, 6)]
    with pytest.raises(pyfdb.pyfdb.FDBException, match="fdb_archive_multiple: .*truncated"):
        fdb.archive(one + two[: len(two) // 2])
    fdb.flush()
    assert list(fdb.list(REQUEST)) == []


def test_a_bad_config_is_an_error_not_a_crash():
    with pytest.raises(pyfdb.pyfdb.FDBException, match="fdb_new_handle_from_yaml"):
        pyfdb.FDB({"type": "local", "engine": "toc", "spaces": "not a list"})


def _split(data):
    """GRIB messages in a byte stream, by the total length in each GRIB2 section 0."""
    out = []
    i = 0
    while i < len(data):
        assert data[i:i + 4] == b"GRIB"
        n = int.from_bytes(data[i + 8:i + 16], "big")
        out.append(data[i:i + n])
        i += n
    return out


def test_list_without_a_request_lists_everything(store, fields):
    fdb = pyfdb.FDB(store)
    assert len(list(fdb.list())) == len(fields)


def test_duplicates_is_fdb5s_deduplicate(config, fields):
    """FDB5's library passes ``duplicates`` on as ``deduplicate``: ``list(request)`` gives every
    copy of a replaced field, ``list(request, True, True)`` (earthkit-data's call) each key once,
    the newest copy."""
    fdb = pyfdb.FDB(config)
    message = fields[(20240101, 167, 0)]
    request = dict(REQUEST, date=20240101, param=167, step=0)
    fdb.archive(message)
    fdb.flush()
    fdb.archive(message)
    fdb.flush()
    every = {(e["path"], e["offset"]) for e in fdb.list(request)}
    assert len(every) == 2
    once = list(fdb.list(request, True, True))
    assert len(once) == 1
    assert once[0]["keys"]["step"] == "0"
    assert (once[0]["path"], once[0]["offset"]) in every


def test_archive_against_a_request_checks_the_messages(config, fields):
    fdb = pyfdb.FDB(config)
    day = {k: m for k, m in fields.items() if k[0] == 20240101}
    request = dict(REQUEST, date=20240101)
    fdb.archive(b"".join(day.values()), request=request)
    fdb.flush()
    assert len(list(fdb.list(request))) == len(day)
    # A field the request does not name: refused, nothing archived.
    other = fields[(20240102, 167, 0)]
    with pytest.raises(pyfdb.pyfdb.FDBException, match="fdb_archive_multiple"):
        fdb.archive(other, request=request)
    fdb.flush()
    assert list(fdb.list(dict(REQUEST, date=20240102))) == []
