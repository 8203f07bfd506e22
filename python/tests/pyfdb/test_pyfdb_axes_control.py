"""axes / IndexAxis, control / status, stats, purge, wipe."""

import pytest
from pyfdb import FDB, IndexAxis
from pyfdb.pyfdb_iterator import WipeElementType

DB = {"class": "ea", "expver": "0001", "stream": "oper", "date": "20200101", "time": "1800", "domain": "g"}


def test_axes(read_only_fdb_setup):
    axes = FDB(read_only_fdb_setup).axes({"class": "ea", "time": "1800"})
    assert isinstance(axes, IndexAxis)
    assert axes["date"] == ["20200101", "20200102", "20200103", "20200104"]
    assert sorted(axes["param"]) == ["165", "166", "167"]
    assert axes["time"] == ["1800"]
    assert "param" in axes and axes.has_key("step")
    level1 = FDB(read_only_fdb_setup).axes({"class": "ea"}, level=1)
    assert "param" not in level1
    assert len(level1["time"]) == 8


def test_index_axis_is_read_only_mapping():
    sel = {"type": ["an"], "param": ["167", "131"], "step": "0"}
    axis = IndexAxis(sel)
    assert axis == sel
    assert axis.keys() == sel.keys()
    assert axis["step"] == ["0"]
    with pytest.raises(TypeError):
        axis["date"] = "1999"
    with pytest.raises(TypeError):
        del axis["type"]
    with pytest.raises(TypeError):
        axis.clear()
    assert repr(axis) == "IndexAxis[axis={param=(167,131),step=(0),type=(an)}]"


def test_stats(read_only_fdb_setup):
    stats = list(FDB(read_only_fdb_setup).stats(DB))
    assert len(stats) == 1
    assert "Reacheable fields               : 3" in stats[0].index_statistics()
    assert "Index Statistics" in repr(stats[0])


def test_purge(read_only_fdb_setup, grib_messages):
    fdb = FDB(read_only_fdb_setup)
    fdb.archive(grib_messages[(20200101, 1800, 167)])
    fdb.flush()
    assert len(list(fdb.list(DB, include_masked=True))) == 4
    dry = list(fdb.purge(DB))
    assert dry
    assert len(list(fdb.list(DB, include_masked=True))) == 4
    list(fdb.purge(DB, doit=True))
    # the replaced field's entry may stay listed with include_masked while its index holds live ones
    assert len(list(fdb.list(DB, include_masked=True))) in (3, 4)
    assert len(list(fdb.list(DB))) == 3
    with fdb.retrieve(dict(DB, type="an", levtype="sfc", step="0", param="167")) as dh:
        assert dh.read() == grib_messages[(20200101, 1800, 167)]


def test_wipe(read_only_fdb_setup):
    fdb = FDB(read_only_fdb_setup)
    dry = list(fdb.wipe(DB))
    # pyfdb 5.25 hands out its binding's enum from type(): compare by name
    assert dry[0].type().name == WipeElementType.CATALOGUE_INFO.name
    assert any(e.type().name == "STORE" and e.uris() for e in dry)
    assert len(list(fdb.list(DB))) == 3
    list(fdb.wipe(DB, doit=True))
    assert list(FDB(read_only_fdb_setup).list(DB)) == []
    assert len(list(FDB(read_only_fdb_setup).list({}))) == 93
