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


def test_archive_under_an_identifier_the_message_disagrees_with(empty_fdb_setup, grib_messages):
    """Regression: pyfdb stores the bytes under the identifier given, with no consistency check
    against the message's own keys; this module refused ("the key given for message 1
    disagrees with the GRIB")."""
    fdb = FDB(empty_fdb_setup)
    message = grib_messages[(20200101, 0, 167)]  # its own keys: 20200101, 0000, 2t
    given = dict(FIELD_KEY, date="20200105", time="0600", param="166")
    fdb.archive(message, identifier=given)
    fdb.flush()
    with fdb.retrieve(given) as dh:
        assert dh.read() == message
    listed = [e.combined_key() for e in fdb.list({"class": "ea"})]
    assert len(listed) == 1
    assert {k: listed[0][k] for k in ("date", "time", "param")} == {
        "date": "20200105",
        "time": "0600",
        "param": "166",
    }
    # Nothing under the keys the message itself carries.
    own = dict(FIELD_KEY, date="20200101", time="0000", param="167")
    with fdb.retrieve(own) as dh:
        assert dh.read() == b""


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
