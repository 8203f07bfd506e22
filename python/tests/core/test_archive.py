"""FDB.archive / flush: bytes in any form, keys, and all-or-nothing on bad input."""

import pytest

import fieldstore
from testkeys import DB_REQUEST


def count(fdb, request=None):
    return len(list(fdb.list(request)))


def test_archive_many_messages_then_flush(fdb, sample_fields):
    data = b"".join(d for _, d in sample_fields)
    summary = fdb.archive(data)
    assert (summary.messages, summary.bytes) == (len(sample_fields), len(data))
    assert "messages=12" in repr(summary)
    assert count(fdb) == 0  # not visible before flush
    fdb.flush()
    assert count(fdb) == 12


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_archive_accepts_bytes_like(fdb, sample_fields, wrap):
    fdb.archive(wrap(sample_fields[0][1]))
    fdb.flush()
    assert count(fdb) == 1


@pytest.mark.parametrize("bad", ["text", 12, None, [b"GRIB"]])
def test_archive_wrong_type_is_a_type_error(fdb, bad):
    with pytest.raises(TypeError):
        fdb.archive(bad)


def test_archive_under_a_key_stores_the_bytes_as_one_object(fdb, sample_fields):
    key, data = sample_fields[0]
    for k in (key, ",".join(f"{a}={b}" for a, b in key.items())):
        assert fdb.archive(data, key=k).messages == 1
    # Any bytes at all under an explicit key.
    fdb.archive(b"not grib at all", key=dict(key, step="99"))
    fdb.flush()
    assert count(fdb) == 2
    assert fdb.retrieve(dict(key, step="99")).read() == b"not grib at all"


def test_a_key_disagreeing_with_the_message_is_refused(fdb, sample_fields):
    key, data = sample_fields[0]
    with pytest.raises(fieldstore.BadRequestError, match="step"):
        fdb.archive(data, key=dict(key, step="999"))


def test_check_grib_false_stores_under_the_key_given_as_fdb5_does(fdb, sample_fields):
    """What FDB5's archive(key, ...) does (pyfdb's identifier, the C API's fdb_archive): the
    bytes go under the key given, whatever keys the GRIB message carries."""
    key, data = sample_fields[0]
    given = dict(key, step="999")
    assert fdb.archive(data, key=given, check_grib=False).messages == 1
    fdb.flush()
    assert fdb.retrieve(given).read() == data
    assert count(fdb) == 1
    assert fdb.retrieve(key).read() == b""
    # The key is still checked against the schema.
    with pytest.raises(fieldstore.Error):
        fdb.archive(data, key={"class": "od"}, check_grib=False)


def test_a_key_missing_schema_keywords_is_refused(fdb):
    with pytest.raises(fieldstore.Error) as e:
        fdb.archive(b"x", key={"class": "od"})
    assert isinstance(e.value, ValueError)


def _assert_nothing_archived(fdb, good):
    """After a failed call, flushing publishes nothing, and good input still goes in."""
    fdb.flush()
    assert count(fdb) == 0
    fdb.archive(good)
    fdb.flush()
    assert count(fdb) == 1


def test_not_grib_archives_nothing(fdb, sample_fields):
    good = sample_fields[0][1]
    with pytest.raises(fieldstore.BadRequestError, match="no GRIB"):
        fdb.archive(b"hello world, not a weather field")
    _assert_nothing_archived(fdb, good)


def test_truncated_message_archives_nothing_and_names_it(fdb, sample_fields):
    data = b"".join(d for _, d in sample_fields)
    offset = len(data) - len(sample_fields[-1][1])
    with pytest.raises(fieldstore.Error) as e:
        fdb.archive(data[:-10])
    msg = str(e.value)
    assert "message 12" in msg and f"offset {offset}" in msg and "truncated" in msg
    _assert_nothing_archived(fdb, sample_fields[0][1])


@pytest.mark.parametrize(
    "override, says",
    [({"date": "20261301"}, "invalid value"), ({"stream": "wave"}, "not used by the schema")],
)
def test_a_message_the_schema_refuses_archives_nothing(fdb, make_fields, sample_fields,
                                                        override, says):
    bad = make_fields(steps=(0,), params=("130",), levels=(500,), **override)
    data = b"".join(d for _, d in sample_fields) + bad[0][1]
    with pytest.raises(fieldstore.SchemaError) as e:
        fdb.archive(data)
    assert "message 13" in str(e.value) and says in str(e.value)
    _assert_nothing_archived(fdb, sample_fields[0][1])


def test_context_manager_flushes_unless_an_exception_propagates(config, sample_fields):
    with fieldstore.FDB(config) as fdb:
        fdb.archive(sample_fields[0][1])
    assert count(fieldstore.FDB(config)) == 1
    with pytest.raises(RuntimeError):
        with fieldstore.FDB(config) as fdb:
            fdb.archive(sample_fields[1][1])
            raise RuntimeError("boom")
    assert count(fieldstore.FDB(config)) == 1


def test_archive_into_a_locked_database_raises_locked(config, store, sample_fields):
    store.control(DB_REQUEST, "lock", ["archive"])
    other = fieldstore.FDB(config)
    with pytest.raises(fieldstore.LockedError, match="locked"):
        other.archive(sample_fields[0][1])
        other.flush()
    store.control(DB_REQUEST, "unlock", ["archive"])
    other = fieldstore.FDB(config)
    other.archive(sample_fields[0][1])
    other.flush()
