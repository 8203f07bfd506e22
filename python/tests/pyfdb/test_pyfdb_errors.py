"""Exceptions: RuntimeError for scripts written for pyfdb, the fieldstore class for new code."""

import pyfdb
import pytest
from pyfdb import FDB

fieldstore = pytest.importorskip("fieldstore")
if not hasattr(pyfdb, "__fieldstore_version__"):
    pytest.skip("fieldstore's compatibility module only", allow_module_level=True)

from pyfdb import _errors

KINDS = {
    "not-found": (fieldstore.NotFoundError, KeyError),
    "bad-request": (fieldstore.BadRequestError, ValueError),
    "schema": (fieldstore.SchemaError, ValueError),
    "config": (fieldstore.ConfigError, ValueError),
    "permission": (fieldstore.PermissionDeniedError, PermissionError),
    "locked": (fieldstore.LockedError, fieldstore.Error),
    "corrupt": (fieldstore.CorruptError, fieldstore.Error),
    "io": (fieldstore.StorageIOError, OSError),
    "remote": (fieldstore.RemoteError, ConnectionError),
    "full": (fieldstore.FullError, OSError),
    "unsupported": (fieldstore.UnsupportedError, NotImplementedError),
    "internal": (fieldstore.InternalError, fieldstore.Error),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_is_both(kind):
    fs_class, builtin = KINDS[kind]
    exc = _errors.translate(fs_class("something went wrong", kind))
    assert isinstance(exc, RuntimeError)
    assert isinstance(exc, pyfdb.FDBException)
    assert isinstance(exc, fs_class) and isinstance(exc, builtin)
    assert exc.kind == kind
    assert str(exc).endswith("something went wrong")
    assert not str(exc).startswith("'")
    with pytest.raises(RuntimeError):
        raise exc


def test_bad_request_reads_like_pyfdb(read_only_fdb_setup):
    with pytest.raises(ValueError) as info:
        list(FDB(read_only_fdb_setup).list({"class": "ea", "foo": "1"}))
    assert isinstance(info.value, RuntimeError)
    assert isinstance(info.value, (fieldstore.BadRequestError, fieldstore.SchemaError))
    assert str(info.value).startswith("UserError: ")
    assert isinstance(info.value.__cause__, fieldstore.Error)


def test_bad_config(tmp_path):
    (tmp_path / "schema").write_text("[ class [ type [ param ]]]\n")
    with pytest.raises(RuntimeError) as info:
        FDB(
            {
                "type": "local",
                "engine": "nosuchengine",
                "schema": str(tmp_path / "schema"),
                "spaces": [{"roots": [{"path": str(tmp_path)}]}],
            }
        )
    assert isinstance(info.value, fieldstore.Error)


def test_config_not_a_mapping():
    with pytest.raises(fieldstore.ConfigError):
        FDB("- just\n- a list\n")


def test_missing_config_file(tmp_path):
    with pytest.raises(OSError):
        FDB(tmp_path / "absent.yaml")


def test_locked_is_locked_error(read_only_fdb_setup):
    db = {"class": "ea", "expver": "0001", "stream": "oper", "date": "20200102", "time": "0000", "domain": "g"}
    fdb = FDB(read_only_fdb_setup)
    list(fdb.control(db, pyfdb.ControlAction.DISABLE, [pyfdb.ControlIdentifier.ARCHIVE]))
    with pytest.raises(fieldstore.LockedError) as info:
        with FDB(read_only_fdb_setup) as other:
            other.archive(b"x", identifier=dict(db, type="an", levtype="sfc", step="0", param="167"))
    assert isinstance(info.value, RuntimeError)


def test_uniqueroot_cannot_be_locked(read_only_fdb_setup):
    with pytest.raises(NotImplementedError):
        FDB(read_only_fdb_setup).control(
            {"class": "ea"}, pyfdb.ControlAction.DISABLE, [pyfdb.ControlIdentifier.UNIQUEROOT]
        )


def test_wrong_types():
    with pytest.raises(ValueError):
        FDB(12)
    with pytest.raises(TypeError):
        pyfdb.ListElement(None)
