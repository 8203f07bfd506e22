"""axes, where, stats, dump, wipe, purge, control, compact: typed results."""

import pytest

import fieldstore
from testkeys import BASE_KEY, DB_REQUEST


def test_axes_sorted_by_magnitude(store):
    axes = store.axes({"class": "od"})
    assert axes["step"] == ["0", "6", "12"]
    assert axes["param"] == ["130", "131"] and axes["levelist"] == ["500", "850"]
    assert set(store.axes(level=1)) == {"class", "expver", "stream", "date", "time", "domain"}


def test_where_stats_dump(store, root):
    (w,) = store.where(DB_REQUEST)
    assert isinstance(w, fieldstore.WhereElement)
    assert w.db["class"] == "od" and w.location.startswith(str(root))
    (s,) = store.stats(DB_REQUEST)
    assert s.fields == 12 and s.masked == 0 and s.field_bytes > 0 and s.data_files >= 1
    assert "fields=12" in repr(s)
    (d,) = store.dump(DB_REQUEST)
    assert d.total_records >= 2 and isinstance(d.records, list) and d.records[0]["kind"] == "init"
    assert d.location == w.location


def test_control_lock_status_unlock(store, config):
    (c,) = store.control(DB_REQUEST, "lock", ["retrieve", "list"])
    assert sorted(c.locked) == ["list", "retrieve"]
    other = fieldstore.FDB(config)
    with pytest.raises(fieldstore.LockedError) as e:
        other.retrieve(dict(BASE_KEY, param="130", levelist="500", step="0"))
    assert e.value.kind == "locked"
    (c,) = store.control(DB_REQUEST, "status", [])
    assert sorted(c.locked) == ["list", "retrieve"]
    (c,) = store.control(DB_REQUEST, "unlock", ["retrieve", "list"])
    assert c.locked == []
    with pytest.raises(fieldstore.BadRequestError):
        store.control(DB_REQUEST, "explode", ["list"])
    with pytest.raises(fieldstore.BadRequestError):
        store.control(DB_REQUEST, "lock", ["nonsense"])


def test_purge_masked_duplicates(store, sample_fields):
    store.archive(sample_fields[0][1])
    store.flush()
    (dry,) = store.purge(DB_REQUEST)
    assert dry.doit is False and dry.masked_fields == 1
    (done,) = store.purge(DB_REQUEST, doit=True)
    assert done.doit is True
    # Only files holding nothing but masked copies go; the live fields all stay.
    assert len(list(store.list())) == 12


def test_compact(store, sample_fields):
    store.archive(sample_fields[0][1])
    store.flush()
    (c,) = store.compact(DB_REQUEST)
    assert isinstance(c, fieldstore.CompactElement) and c.merged_indexes >= 0
    assert len(list(store.list())) == 12


def test_wipe_dry_run_then_doit(store):
    (dry,) = store.wipe(DB_REQUEST)
    assert dry.doit is False and dry.removed
    assert len(list(store.list())) == 12
    (done,) = store.wipe(DB_REQUEST, doit=True)
    assert done.doit is True
    assert list(store.list()) == []


def test_wipe_matching_nothing_is_not_found(store):
    with pytest.raises(fieldstore.NotFoundError) as e:
        store.wipe({"class": "rd"})
    assert isinstance(e.value, KeyError)
    assert str(e.value).startswith("no database matches")  # not KeyError's quoted repr
    with pytest.raises(fieldstore.BadRequestError):
        store.wipe({})


def test_without_a_request_maintenance_covers_every_database(store, make_fields):
    store.archive(b"".join(d for _, d in make_fields(steps=(0,), params=("130",), levels=(500,),
                                                     date="20261121")))
    store.flush()
    assert len(store.where()) == 2
    stats = store.stats()
    assert sorted(s.db["date"] for s in stats) == ["20261121", "20261122"]
    assert sum(s.fields for s in stats) == 13
    assert len(store.dump()) == 2 and len(store.purge()) == 2 and len(store.compact()) == 2
