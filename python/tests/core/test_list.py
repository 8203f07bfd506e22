"""FDB.list: requests as dicts or MARS strings, levels, elements, iterators outliving the FDB."""

import gc
import os

import pytest

import fieldstore
from testkeys import BASE_KEY, DB_REQUEST

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_list_everything_and_element_fields(store, sample_fields, root):
    els = list(store.list())
    assert len(els) == len(sample_fields)
    el = els[0]
    assert isinstance(el, fieldstore.ListElement)
    assert list(el.key)[:6] == ["class", "expver", "stream", "date", "time", "domain"]
    db, index, datum = el.split_keys
    assert db["class"] == "od" and index["levtype"] == "pl" and "step" in datum
    assert {**db, **index, **datum} == el.key
    assert el.uri.startswith("file://") and el.path.startswith(str(root))
    assert el.offset >= 0 and el.length > 0
    assert el.timestamp > 0 and el.masked is False
    assert el["param"] == el.key["param"]
    assert "param" in el and "nothing" not in el
    with pytest.raises(KeyError):
        el["nothing"]
    assert "ListElement(" in repr(el)
    assert el == list(store.list())[0] and el != els[1]
    with open(el.path, "rb") as f:
        f.seek(el.offset)
        assert f.read(4) == b"GRIB"


def test_request_forms_agree(store):
    as_dict = {"class": "od", "param": ["130"], "step": [0, 6], "levelist": 500}
    as_text = "class=od,param=130,step=0/6,levelist=500"
    a = [e.key for e in store.list(as_dict)]
    b = [e.key for e in store.list(as_text)]
    c = [e.key for e in store.list({"class": "od", "param": 130, "step": "0/6", "levelist": 500.0})]
    assert a == b == c and len(a) == 2


def test_levels(store):
    dbs = list(store.list(DB_REQUEST, level=1))
    assert len(dbs) == 1 and len(dbs[0].split_keys) == 1 and dbs[0].uri is None
    idx = list(store.list(DB_REQUEST, level=2))
    assert len(idx) == 1 and len(idx[0].split_keys) == 2
    with pytest.raises(ValueError):
        store.list(level=4)


def test_masked_fields_only_when_asked(store, sample_fields):
    store.archive(sample_fields[0][1])
    store.flush()
    assert len(list(store.list())) == 12
    els = list(store.list(include_masked=True))
    assert len(els) == 13 and sum(e.masked for e in els) == 1


def test_matching_nothing_lists_nothing(store):
    assert list(store.list({"class": "od", "param": "999"})) == []


def test_unknown_keyword_is_a_bad_request(store):
    with pytest.raises(fieldstore.SchemaError, match="unknown keyword"):
        list(store.list({"nosuchkeyword": "1"}))


@pytest.mark.parametrize("bad", [{"step": True}, {"step": None}, {"step": [b"0"]}, {1: "x"}, 42])
def test_wrong_request_types_are_type_errors(store, bad):
    with pytest.raises(TypeError):
        store.list(bad)


def test_iterator_outlives_its_fdb(config, store):
    it = store.list()
    first = next(it)
    del store
    gc.collect()
    rest = list(it)
    assert len(rest) == 11 and first.key["class"] == "od"
    assert list(it) == []  # exhausted stays exhausted


def test_many_fields_come_in_batches(fdb, make_fields):
    fields = make_fields(steps=range(0, 600, 1), params=("130",), levels=(500,), npoints=4)
    fdb.archive(b"".join(d for _, d in fields))
    fdb.flush()
    keys = [e.key["step"] for e in fdb.list(dict(BASE_KEY))]
    assert sorted(keys, key=int) == [str(s) for s in range(600)]


def test_a_damaged_index_fails_the_listing_after_the_fields_before_it(config, fdb, make_fields,
                                                                      root):
    for date in ("20261121", "20261122"):
        fdb.archive(b"".join(d for _, d in make_fields(steps=range(5), params=("130",),
                                                        levels=(500,), date=date)))
    fdb.flush()
    (idx,) = root.glob("*20261122*/*.idx")
    data = idx.read_bytes()
    idx.write_bytes(data[: len(data) // 2] + bytes(len(data) - len(data) // 2))
    got = []
    with pytest.raises(fieldstore.CorruptError, match="corrupt"):
        for el in fieldstore.FDB(config).list():
            got.append(el.key["date"])
    assert got == ["20261121"] * 5


def test_optional_keywords_a_field_lacks_are_left_out(config, make_fields):
    # ECMWF's schema names optional keywords (`quantile?` for enfo...) that these fields do
    # not have: the store keeps them with empty values, which must not reach Python (FDB5's
    # listing and pyfdb leave them out, and an empty value in a request is refused).
    schema = os.path.join(REPO, "crates/fieldstore/tests/fixtures/ecmwf-fdb5-schema")
    fdb = fieldstore.FDB(dict(config, schema=schema))
    sample_fields = make_fields(numbers=(1, 2), stream="enfo", steps=(0, 6))
    fdb.archive(b"".join(data for _, data in sample_fields))
    fdb.flush()
    els = list(fdb.list())
    assert len(els) == len(sample_fields)
    for el in els:
        assert "" not in el.key.values(), el.key
        for part in el.split_keys:
            assert "" not in part.values(), part
        # The key as listed is a request that finds the field again.
        assert len(list(fdb.list(el.key))) == 1
    reader = fdb.retrieve(els[0].key)
    assert len(reader.fields) == 1 and "" not in reader.fields[0].key.values()
    assert all("" not in values for values in fdb.axes().values())
