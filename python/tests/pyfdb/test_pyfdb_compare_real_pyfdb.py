"""The same pyfdb script run with ECMWF's pyfdb 5.25 and with this module gives the same answers.

The real pyfdb lives in its own virtualenv (``target/py-venv-ref``, made by ``scripts/python-test``;
or ``$FIELDSTORE_REF_PYTHON``); the test is skipped when none is found.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]

SCRIPT = r"""
import hashlib, json, sys
import pyfdb

config_path, grib_path = sys.argv[1], sys.argv[2]
out = {}
fdb = pyfdb.FDB(__import__("pathlib").Path(config_path))
fdb.archive(open(grib_path, "rb").read())
out["dirty"] = fdb.dirty()
fdb.flush()
out["dirty_after_flush"] = fdb.dirty()

def listing(sel, level):
    rows = []
    for e in fdb.list(sel, level=level):
        rows.append([e.combined_key(), e.keys(), e.length(), e.has_location()])
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))

out["list3"] = listing({"class": "ea"}, 3)
out["list2"] = listing({"class": "ea", "date": "20200102"}, 2)
out["list1"] = listing({"type": "an"}, 1)
out["list_lists"] = len(list(fdb.list({"class": "ea", "date": ["20200101", "20200102"], "time": "1800", "param": [167, 165]})))
out["list_range"] = len(list(fdb.list({"class": "ea", "date": "20200101/to/20200103", "time": "1800", "param": "165/166"})))
# pyfdb also names unset optional keywords, with [""]: left out of the comparison
out["axes"] = {k: list(v) for k, v in fdb.axes({"class": "ea", "time": "1800"}).items() if list(v) != [""]}
out["axes1"] = {k: list(v) for k, v in fdb.axes({"class": "ea"}, level=1).items()}

hashes = {}
for e in fdb.list({"class": "ea", "date": "20200103"}):
    key = e.combined_key()
    with fdb.retrieve(key) as dh:
        hashes[json.dumps(key, sort_keys=True)] = [dh.size(), hashlib.sha256(dh.read()).hexdigest()]
out["fields"] = hashes
dh = fdb.retrieve({"class": "ea", "expver": "0001", "stream": "oper", "date": "20200104", "time": "0000",
                   "domain": "g", "type": "an", "levtype": "sfc", "step": "0", "param": ["167", "165", "166"]})
with dh:
    data = dh.read()
out["multi"] = [len(data), data.count(b"GRIB"), data[:4].decode()]

missing = fdb.retrieve({"class": "ea", "expver": "0001", "stream": "oper", "date": "20200104", "time": "0000",
                        "domain": "g", "type": "an", "levtype": "sfc", "step": "0", "param": "999"})
missing.open()
out["missing"] = [bool(missing), missing.size(), len(missing.read(10)), len(missing.read())]

# A message archived under an identifier other than its own keys: stored under the identifier.
grib = open(grib_path, "rb").read()
first = grib[:int.from_bytes(grib[8:16], "big")]
given = {"class": "ea", "expver": "0001", "stream": "oper", "date": "20200106", "time": "0600",
         "domain": "g", "type": "an", "levtype": "sfc", "step": "0", "param": "166"}
fdb.archive(first, identifier=given)
fdb.flush()
with fdb.retrieve(given) as dh:
    under_given = dh.read()
out["identifier"] = [
    [e.combined_key() for e in fdb.list({"class": "ea", "date": "20200106"})],
    hashlib.sha256(under_given).hexdigest() == hashlib.sha256(first).hexdigest(),
    len(list(fdb.list({"class": "ea"}))),
]

errors = {}
for name, sel in [("keyword", {"class": "ea", "foo": "1"}), ("value", {"class": "ea", "step": "abc"})]:
    try:
        list(fdb.list(sel))
        errors[name] = None
    except RuntimeError:
        errors[name] = "RuntimeError"
    except Exception as exc:
        errors[name] = type(exc).__name__
try:
    fdb.retrieve({})
except TypeError:
    errors["wildcard"] = "TypeError"
out["errors"] = errors
print(json.dumps(out, sort_keys=True))
"""


def reference_python():
    candidates = [
        os.environ.get("FIELDSTORE_REF_PYTHON"),
        ROOT / "target/py-venv-ref/bin/python",
        "/work/venv-ref/bin/python",
    ]
    for c in candidates:
        if c and os.path.exists(c):
            probe = subprocess.run(
                [str(c), "-c", "import pyfdb, fdb5lib"],
                capture_output=True,
                env=dict(os.environ, FDB_HOME="/nonexistent"),
            )
            if probe.returncode == 0:
                return str(c)
    return None


def run(python, tmp, grib_file, write_config):
    home = tmp / "home"
    home.mkdir()
    config = write_config(tmp)
    script = tmp / "script.py"
    script.write_text(SCRIPT)
    # FDB_HOME on an empty directory: the real pyfdb's list() crashes on a system /etc/fdb otherwise.
    env = dict(os.environ, FDB_HOME=str(home))
    env.pop("FDB_CONFIG_FILE", None)
    env.pop("FDB5_CONFIG_FILE", None)
    proc = subprocess.run([python, str(script), str(config), str(grib_file)], capture_output=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def test_same_answers_as_real_pyfdb(tmp_path, grib_file, make_config):
    ref = reference_python()
    if ref is None:
        pytest.skip("no virtualenv with the real pyfdb and fdb5lib (target/py-venv-ref or $FIELDSTORE_REF_PYTHON)")
    (tmp_path / "real").mkdir()
    (tmp_path / "compat").mkdir()
    real = run(ref, tmp_path / "real", grib_file, make_config)
    compat = run(sys.executable, tmp_path / "compat", grib_file, make_config)
    assert len(real["list3"]) == 96
    assert len(real["fields"]) == 24 and all(size > 0 for size, _ in real["fields"].values())
    assert (
        real["multi"][1] == 3
        and real["list_lists"] == 4
        and real["list_range"] == 6
        and real["errors"]["keyword"] == "RuntimeError"
    )
    assert real["identifier"][1] is True and len(real["identifier"][0]) == 1
    for key in real:
        assert compat[key] == real[key], key
