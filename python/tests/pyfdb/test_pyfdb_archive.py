"""archive / flush, with and without identifier, and bad input changing nothing."""

import pytest

try:  # absent only when this suite is run against the real pyfdb, to check the tests
    import fieldstore
except ImportError:
    fieldstore = None
from pyfdb import FDB

FIELD_KEY = {
    "class": "ea",
    "expver": "0001",
    "stream": "oper",
    "date": "20200101",
    "time": "1800",
    "domain": "g",
    "type": "an",
    "levtype": "sfc",
    "step": "0",
    "param": "167",
}


def test_archive_many_messages(read_only_fdb_setup):
    assert len(list(FDB(read_only_fdb_setup).list({}))) == 96


def test_archive_with_identifier_any_bytes(empty_fdb_setup):
    fdb = FDB(empty_fdb_setup)
    payload = b"not a GRIB message, stored as is"
    fdb.archive(payload, identifier=FIELD_KEY)
    fdb.flush()
    with fdb.retrieve(FIELD_KEY) as dh:
        assert dh.read() == payload


def test_archive_identifier_as_pairs(empty_fdb_setup):
    fdb = FDB(empty_fdb_setup)
    fdb.archive(b"pairs", identifier=list(FIELD_KEY.items()))
    fdb.flush()
    assert fdb.retrieve(FIELD_KEY).readall() == b"pairs"


def test_identifier_rules(empty_fdb_setup):
    fdb = FDB(empty_fdb_setup)
    with pytest.raises(KeyError):
        fdb.archive(b"x", identifier=[("class", "ea"), ("class", "od")])
    with pytest.raises(ValueError):
        fdb.archive(b"x", identifier=dict(FIELD_KEY, param="167/131"))
    with pytest.raises(ValueError):
        fdb.archive(b"x", identifier="class=ea")


def test_archive_incomplete_identifier(empty_fdb_setup):
    fdb = FDB(empty_fdb_setup)
    with pytest.raises(RuntimeError):
        fdb.archive(b"x", identifier={"class": "ea"})
        fdb.flush()
