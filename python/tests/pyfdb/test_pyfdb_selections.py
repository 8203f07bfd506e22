"""Selections: value lists, \"a/b\" strings, to-ranges, several fields in one retrieve, inspect."""

import pytest
from pyfdb import FDB

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


def one(param="167"):
    return dict(FULL, param=param)


@pytest.mark.parametrize("param", ["165/166/167", [165, 166, 167], ["165", "166", "167"]])
def test_every_value_of_a_list_matches(read_only_fdb_setup, param):
    assert len(list(FDB(read_only_fdb_setup).list(dict(FULL, param=param)))) == 3


@pytest.mark.parametrize("date", [["20200101", "to", "20200103"], "20200101/to/20200103"])
def test_date_ranges(read_only_fdb_setup, date):
    sel = dict(FULL, date=date, param=["165", "166", "167"])
    assert len(list(FDB(read_only_fdb_setup).list(sel))) == 9


def test_several_fields_retrieved(read_only_fdb_setup, grib_messages):
    data = FDB(read_only_fdb_setup).retrieve(dict(FULL, param="167/165/166")).readall()
    wanted = [grib_messages[(20200101, 1800, p)] for p in (167, 165, 166)]
    assert len(data) == sum(len(m) for m in wanted)
    for m in wanted:
        assert m in data


def test_inspect_finds_the_field(read_only_fdb_setup, grib_messages):
    elements = list(FDB(read_only_fdb_setup).inspect(one("165")))
    assert len(elements) == 1
    assert elements[0].length() == len(grib_messages[(20200101, 1800, 165)])
