"""fieldstore's `pygribjump` on fieldstore gives what ECMWF's pygribjump gives on FDB5 with
GribJump: the same values (NaN where missing) and masks, the same errors, the same axes; and
Polytope (polytope-mars) and earthkit-data's gribjump source give the same answers on both.
"""

import json

import pytest

import gjdata
import reference as calls

BASE = dict(gjdata.BASE)
FINE_DATE = "20240102"


def field(param, step, date=None):
    return dict(BASE, param=str(param), step=str(step), **({"date": date} if date else {}))


def canonical(obj):
    """JSON text with NaN spelled out, so that NaN compares equal to NaN."""
    return json.dumps(obj, sort_keys=True, allow_nan=True)


def ours_results(ours, data, spec, **config):
    """The cases run in this process by fieldstore's pygribjump on the fieldstore copy (named by
    ``fdb=``: the tests run with the FDB_* variables unset)."""
    gj = ours.GribJump(config=config or None, fdb=data.fs_config)
    return json.loads(json.dumps(calls.run_cases(spec, gj)))


def coarse_ranges():
    # A point, a row crossing the masked band, the start and the end of the field, a range across
    # two rows, and a long range (several 64-bit mask words).
    p = gjdata.nearest_index(45.0, 45.0)
    return sorted([(0, 3), (20000, 20070), (p, p + 1), (32400, 33200), (65150, 65160)])


def fine_ranges():
    p = gjdata.nearest_index(47.3, 8.5, 0.1)
    row = gjdata.nearest_index(40.0, 0.0, 0.1)
    return sorted([(0, 5), (p, p + 1), (row + 100, row + 1400), (6483600 - 4097, 6483600)])


@pytest.fixture
def extract_spec(data):
    h1, h01 = data.hash[1.0], data.hash[0.1]
    spec = {}
    # Every 1° field (simple, CCSDS, each with and without a bitmap), as ExtractionRequests.
    spec["coarse"] = {"kind": "requests", "requests": [
        [field(p, s), coarse_ranges(), h1] for p in gjdata.PARAMS for s in gjdata.STEPS]}
    # The same as (request, ranges, hash) tuples, as Polytope passes them.
    spec["tuples"] = {"kind": "requests", "tuples": True, "requests": [
        [field(228, s), [(100, 200), (30000, 30100)], h1] for s in gjdata.STEPS]}
    # 0.1° fields (6,483,600 points), simple and CCSDS: a point, a row, the last partial CCSDS block.
    spec["fine"] = {"kind": "requests", "requests": [
        [field(p, s, FINE_DATE), fine_ranges(), h01] for p in (167, 165) for s in (0, 6)]}
    # One request naming several fields.
    spec["single"] = {"kind": "single", "request": dict(BASE, param="166", step=["0", "6", "12"]),
                      "ranges": [(0, 10), (25000, 25300)], "hash": h1}
    # Plain files by path and offset (no FDB).
    spec["paths"] = {"kind": "paths", "paths": [
        [str(data.grib), data.offsets[i], [(5, 9), (40000, 40100)], h1] for i in (0, 5, 10, 15)]}
    return spec


def assert_same(ref, got):
    assert set(ref) == set(got)
    for name in ref:
        assert canonical(got[name]) == canonical(ref[name]), f"case {name!r} differs"


def test_extract_same_values_and_masks(data, ours, reference, extract_spec):
    ref = reference("cases", extract_spec)
    got = ours_results(ours, data, extract_spec)
    for name, result in ref.items():
        assert "error" not in result, f"the reference failed case {name}: {result}"
    # The data set exercises what it should: masked points in the bitmap fields, none elsewhere.
    coarse = ref["coarse"]
    assert any(v is None for r in coarse[8:] for vals in r["values"] for v in vals)
    assert all(v is not None for r in coarse[:8] for vals in r["values"] for v in vals)
    assert_same(ref, got)


def test_results_shape(data, ours):
    gj = ours.GribJump(config={"ignoreGridHash": True}, fdb=data.fs_config)
    req = ours.ExtractionRequest(field(166, 6), [(0, 3), (20000, 20070)])
    (res,) = list(gj.extract([req]))
    assert [v.dtype.name for v in res.values] == ["float64", "float64"]
    assert [m.dtype.name for m in res.masks] == ["uint64", "uint64"]
    assert [v.size for v in res.values] == [3, 70]
    assert [m.size for m in res.masks] == [1, 2]
    assert res.values_flat.size == 73 and res.masks_flat.size == 3
    bools = res.compute_bool_masks()
    for v, b in zip(res.values, bools):
        assert (b == ~__import__("numpy").isnan(v)).all()
    assert req.indices().tolist()[:4] == [0, 1, 2, 20000]
    legacy = gj.extract([req]).dump_legacy()
    assert len(legacy) == 1 and len(legacy[0][0]) == 2


def error_cases(data):
    h1 = data.hash[1.0]
    return {
        "bad_hash": {"kind": "requests", "requests": [[field(167, 0), [(0, 3)], "0123456789abcdef"]]},
        "no_hash": {"kind": "requests", "requests": [[field(167, 0), [(0, 3)], None]]},
        "missing": {"kind": "requests", "requests": [[field(167, 0), [(0, 3)], h1],
                                                     [field(167, 7), [(0, 3)], h1]]},
        "unsorted": {"kind": "requests", "requests": [[field(167, 0), [(10, 13), (0, 3)], h1]]},
        "overlapping": {"kind": "requests", "requests": [[field(167, 0), [(0, 13), (5, 15)], h1]]},
        "two_fields_in_one_request": {"kind": "requests", "requests": [[dict(field(167, 0), step="0/6"), [(0, 3)], h1]]},
        "single_missing": {"kind": "single", "request": dict(BASE, param="166", step=["6", "7"]),
                           "ranges": [(0, 3)], "hash": h1},
        "path_bad_hash": {"kind": "paths", "paths": [[str(data.grib), 0, [(0, 3)], "nope"]]},
    }


# What each error message must contain, on both sides (Polytope matches on such substrings).
ERROR_TEXT = {
    "bad_hash": "Grid hash mismatch",
    "no_hash": "Grid hash was not specified",
    "missing": "DataNotFound",
    "unsorted": "checkIntervals",
    "overlapping": "checkIntervals",
    "two_fields_in_one_request": "DataNotFound",
    "single_missing": "DataNotFound",
    "path_bad_hash": "Grid hash mismatch",
}


def test_errors_as_gribjump(data, ours, reference):
    spec = error_cases(data)
    ref = reference("cases", spec)
    got = ours_results(ours, data, spec)
    for name, text in ERROR_TEXT.items():
        assert isinstance(ref[name], dict) and ref[name]["error"] == "GribJumpException", (name, ref[name])
        assert text in ref[name]["message"], (name, ref[name])
        assert isinstance(got[name], dict) and got[name]["error"] == "GribJumpException", (name, got[name])
        assert text in got[name]["message"], (name, got[name])


def test_ignore_grid_hash(data, ours, reference):
    spec = {"wrong": {"kind": "requests", "requests": [[field(165, 6), [(0, 3)], "wrong"]]},
            "none": {"kind": "requests", "requests": [[field(165, 6), [(0, 3)], None]]}}
    ref = reference("cases", spec, GRIBJUMP_IGNORE_GRID="1")
    got = ours_results(ours, data, spec, ignoreGridHash=True)
    assert "error" not in ref["wrong"] and "error" not in ref["none"]
    assert_same(ref, got)


def test_request_validation_as_pygribjump(ours):
    with pytest.raises(ValueError, match="lo < hi"):
        ours.ExtractionRequest(field(167, 0), [(3, 3)])
    with pytest.raises(ValueError, match="at least one range"):
        ours.ExtractionRequest(field(167, 0), [])
    gj = ours.GribJump(config={"ignoreGridHash": True}, fdb={"type": "local", "engine": "toc",
                                                           "spaces": [{"roots": [{"path": "/nonexistent"}]}]})
    with pytest.raises(ValueError, match="should not be empty"):
        gj.extract([])
    with pytest.raises(ValueError, match="list of tuples"):
        gj.extract((field(167, 0), [(0, 1)]))


def test_axes_same(data, ours, reference):
    spec = {
        "level3": {"kind": "axes", "request": dict(BASE), "level": 3},
        "level2": {"kind": "axes", "request": dict(BASE), "level": 2},
        "level1": {"kind": "axes", "request": {"class": "rd"}, "level": 1},
        "partial": {"kind": "axes", "request": {"class": "rd", "date": FINE_DATE}},
        # FDB5's axes take an index whole once its own keys match: every step and param.
        "narrowed": {"kind": "axes", "request": dict(BASE, step="6", param="167"), "level": 3},
    }
    assert_same(reference("cases", spec), ours_results(ours, data, spec))


def polytope_config(data):
    return {
        "datacube": {"type": "gribjump"},
        "options": {
            "axis_config": [
                {"axis_name": "date",
                 "transformations": [{"name": "merge", "other_axis": "time", "linkers": ["T", "00"]}]},
                {"axis_name": "values",
                 "transformations": [{"name": "mapper", "type": "regular", "resolution": 90,
                                      "axes": ["latitude", "longitude"], "md5_hash": data.hash[1.0]}]},
                {"axis_name": "latitude", "transformations": [{"name": "reverse", "is_reverse": True}]},
                {"axis_name": "longitude", "transformations": [{"name": "cyclic", "range": [0, 360]}]},
                {"axis_name": "step", "transformations": [{"name": "type_change", "type": "int"}]},
            ],
            "pre_path": {"class": "rd", "expver": "xxxx", "levtype": "sfc", "stream": "oper", "type": "fc"},
            "compressed_axes_config": ["date", "time", "longitude", "latitude", "param", "step"],
        },
    }


POLYTOPE_BASE = {"class": "rd", "stream": "oper", "type": "fc", "date": "20240101", "time": "0000",
                 "levtype": "sfc", "expver": "xxxx", "domain": "g"}


@pytest.mark.parametrize("name,request_", [
    # A point time series over every step; at (45N, 45E) 10v (bitmap) is missing at some steps.
    ("timeseries", dict(POLYTOPE_BASE, param="167/166",
                        feature={"type": "timeseries", "points": [[45.0, 45.0]], "time_axis": "step",
                                 "axes": ["latitude", "longitude"], "range": {"start": 0, "end": 18}})),
    # A 10x20 degree box over two steps, CCSDS with and without a bitmap.
    ("boundingbox", dict(POLYTOPE_BASE, param="165/228", step="0/12",
                         feature={"type": "boundingbox", "points": [[40, 0], [50, 20]]})),
    # A quadrilateral (Polytope's polygon slicer: a row of points per latitude, clipped to the
    # edges) over two steps, 2t (simple) and 10v (simple, with a bitmap).
    ("polygon", dict(POLYTOPE_BASE, param="167/166", step="0/12",
                     feature={"type": "polygon", "shape": [[38, 2], [52, 6], [47, 24], [36, 14]]})),
    # Two polygons at once, one across the 0 meridian (longitudes wrapped by the cyclic axis).
    ("polygons", dict(POLYTOPE_BASE, param="165", step="6",
                      feature={"type": "polygon",
                               "shape": [[[10, -8], [16, -2], [9, 4]], [[-30, 100], [-22, 110], [-32, 112]]]})),
    # A trajectory: a disk of 2 degrees swept along three points, at one step (polytope-mars
    # takes one step per trajectory), CCSDS with and without a bitmap.
    ("trajectory", dict(POLYTOPE_BASE, param="165/228", step="12",
                        feature={"type": "trajectory", "points": [[40, 0], [45, 10], [52, 20]],
                                 "axes": ["latitude", "longitude"], "inflation": 2, "inflate": "round"})),
    # The same swept as a box.
    ("trajectory-box", dict(POLYTOPE_BASE, param="167", step="18",
                            feature={"type": "trajectory", "points": [[-10, 170], [0, 185], [5, 200]],
                                     "axes": ["latitude", "longitude"], "inflation": 1.5, "inflate": "box"})),
])
def test_polytope_same_coveragejson(data, ours, reference, ours_subprocess, name, request_):
    spec = {"request": request_, "config": polytope_config(data)}
    ref = reference("polytope", spec)
    got = ours_subprocess("polytope", spec)
    assert ref["type"] == "CoverageCollection" and ref["coverages"], ref
    # Shapes that caught points: a comparison of empty answers would show nothing.
    assert any(rng["values"] for c in ref["coverages"] for rng in c["ranges"].values()), ref
    assert canonical(got) == canonical(ref)


def test_earthkit_gribjump_source(data, ours, reference, ours_subprocess):
    pytest.importorskip("earthkit.data.sources.gribjump",
                        reason="this earthkit-data has no gribjump source")
    spec = {"request": dict(BASE, param=["167", "228"], step=[0, 12]),
            "ranges": [(100, 110), (30000, 30040)]}
    # The source insists on GRIBJUMP_IGNORE_GRID (it passes no grid hash) and an FDB variable.
    ref = reference("earthkit", spec, GRIBJUMP_IGNORE_GRID="1")
    got = ours_subprocess("earthkit", spec, GRIBJUMP_IGNORE_GRID="1", FDB5_CONFIG_FILE=str(data.fs_config_file))
    assert len(ref) == 4 and all(len(values) == 50 for values in ref)
    assert canonical(got) == canonical(ref)
