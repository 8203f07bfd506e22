"""The exception hierarchy: one class per kind, builtin bases, kind and message."""

import pickle

import pytest

import fieldstore
from fieldstore import errors

EXPECTED = {
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


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_each_kind_has_its_class(kind):
    cls, builtin = EXPECTED[kind]
    e = errors._from_kind(kind, "what happened")
    assert type(e) is cls and isinstance(e, fieldstore.Error) and isinstance(e, builtin)
    assert e.kind == kind and e.message == "what happened" and str(e) == "what happened"


def test_unknown_kind_is_the_base_class():
    e = errors._from_kind("brand-new", "m")
    assert type(e) is fieldstore.Error and e.kind == "brand-new"


def test_errors_from_the_store_carry_kind_and_message(store):
    with pytest.raises(fieldstore.NotFoundError) as e:
        store.wipe({"class": "rd"})
    assert e.value.kind == "not-found" and "class=rd" in e.value.message
    with pytest.raises(KeyError):
        store.wipe({"class": "rd"})


def test_exceptions_pickle():
    e = fieldstore.LockedError("locked", "locked")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is fieldstore.LockedError and back.message == "locked"
