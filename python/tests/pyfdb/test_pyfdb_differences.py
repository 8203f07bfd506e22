"""Where this module deliberately differs from pyfdb 5.25 (each one listed in docs/python.md).

Every test here fails with ECMWF's pyfdb 5.25 (checked by running this directory with it); the rest
of the suite passes with both.
"""

import io

import pytest

try:  # absent only when this suite is run against the real pyfdb
    import fieldstore
except ImportError:
    fieldstore = None

from pyfdb import FDB, ControlAction, ControlIdentifier

FULL = {
    "type": "an",
    "class": "ea",
    "domain": "g",
    "expver": "0001",
    "stream": "oper",
    "date": "20200101",
    "levtype": "sfc",
    "step": "0",
    "time": "1800",
}
DB = {"class": "ea", "expver": "0001", "stream": "oper", "date": "20200101", "time": "1800", "domain": "g"}


def one(param="167"):
    return dict(FULL, param=param)


def test_archive_is_all_or_nothing(empty_fdb_setup, grib_messages):
    # pyfdb archives the messages before the bad one, then raises.
    fdb = FDB(empty_fdb_setup)
    good = grib_messages[(20200101, 1800, 167)]
    with pytest.raises(RuntimeError) as info:
        fdb.archive(good + b"garbage that is not GRIB")
    if fieldstore is not None:
        assert isinstance(info.value, fieldstore.Error)
    fdb.flush()
    assert list(fdb.list({})) == []


def test_list_none_means_everything(read_only_fdb_setup):
    # pyfdb: AttributeError on None.
    fdb = FDB(read_only_fdb_setup)
    assert len(list(fdb.list({}))) == 96
    assert len(list(fdb.list(None))) == 96


def test_partial_read_then_large_read_is_not_padded(read_only_fdb_setup, grib_messages):
    # pyfdb returns min(n, size) bytes after a partial read, the tail zero-padded.
    expected = grib_messages[(20200101, 1800, 167)]
    with FDB(read_only_fdb_setup).retrieve(one()) as dh:
        head = dh.read(100)
        rest = dh.read(10 * len(expected))
    assert head + rest == expected


def test_seek_tell(read_only_fdb_setup, grib_messages):
    expected = grib_messages[(20200101, 1800, 167)]
    with FDB(read_only_fdb_setup).retrieve(one()) as dh:
        assert dh.seekable()
        dh.seek(10)
        assert dh.tell() == 10
        assert dh.read(5) == expected[10:15]
        dh.seek(-4, io.SEEK_END)
        assert dh.read() == b"7777"


def test_locked_retrieve_raises(read_only_fdb_setup):
    # pyfdb prints "is LOCKED for retrieval" and hands out an empty handle.
    fdb = FDB(read_only_fdb_setup)
    list(fdb.control(DB, ControlAction.DISABLE, [ControlIdentifier.RETRIEVE]))
    with pytest.raises(RuntimeError):
        FDB(read_only_fdb_setup).retrieve(dict(DB, type="an", levtype="sfc", step="0", param="167")).readall()
    assert len(list(FDB(read_only_fdb_setup).list(DB))) == 3
    list(fdb.control(DB, ControlAction.ENABLE, [ControlIdentifier.RETRIEVE]))
    assert FDB(read_only_fdb_setup).retrieve(dict(DB, type="an", levtype="sfc", step="0", param="167")).readall()


def test_control_acts_when_called(read_only_fdb_setup):
    # pyfdb's control/wipe/purge do nothing until their generator is consumed.
    fdb = FDB(read_only_fdb_setup)
    fdb.control(DB, ControlAction.DISABLE, [ControlIdentifier.LIST])
    assert list(fdb.status(DB))[0].controlIdentifiers() == [ControlIdentifier.LIST]
    fdb.control(DB, ControlAction.ENABLE, [ControlIdentifier.LIST])


def test_config_as_path_string(read_only_fdb_setup):
    # pyfdb reads a str as YAML text only; a path string then fails.
    assert FDB(str(read_only_fdb_setup)).config() == FDB(read_only_fdb_setup).config()


def test_param_matches_as_archived_at_surface(empty_fdb_setup, message_maker):
    # pyfdb's metkit rewrites param 131/132 (u/v) to 165/166 (10u/10v) when levtype=sfc, so it lists
    # such a field with an empty selection but finds nothing when asked for param=131.
    fdb = FDB(empty_fdb_setup)
    fdb.archive(message_maker(20200101, 1800, 131))
    fdb.flush()
    assert len(list(fdb.list(dict(FULL, param="131")))) == 1


def test_buffered_reader_over_a_handle(read_only_fdb_setup, grib_messages):
    # pyfdb's handle has no readable()/closed, which io.BufferedReader needs.
    import io as _io

    expected = grib_messages[(20200101, 1800, 167)]
    dh = FDB(read_only_fdb_setup).retrieve(one())
    dh.open()
    buffered = _io.BufferedReader(dh)
    assert buffered.read(4) == b"GRIB"
    assert buffered.read() == expected[4:]


def test_list_with_no_fdb_home(read_only_fdb_setup):
    # pyfdb 5.25's list() segfaults when FDB_HOME is unset and a system /etc/fdb/dbnames is
    # visible: run in a child process so a crash fails this test only.
    import os
    import subprocess
    import sys

    script = (
        "import pathlib, sys, pyfdb\n"
        "fdb = pyfdb.FDB(pathlib.Path(sys.argv[1]))\n"
        "print(len(list(fdb.list({'class': 'ea', 'date': '20200101'}))))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FDB_", "FDB5_"))}
    proc = subprocess.run(
        [sys.executable, "-c", script, str(read_only_fdb_setup)], capture_output=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    assert proc.stdout.decode().split() == ["24"]
