"""FDB5's own toc stores shared between ECMWF's pyfdb 5.25 and fieldstore's ``pyfdb`` module.

Both sides use the SAME config file (``type: local``, ``engine: toc``, a root under ``tmp_path``,
the ECMWF schema or an 8-keyword-datum schema) and the same environment (an empty ``FDB_HOME``,
``FDB_DBNAMES_FILE=/nonexistent``, so Debian's ``/etc/fdb/dbnames`` nests nothing). One driver
script (``DRIVER``) runs a list of operations with whichever ``pyfdb`` its interpreter has: the
real pyfdb 5.25 + fdb5lib from the reference virtualenv (``$FIELDSTORE_REF_PYTHON``, or
``target/py-venv-ref``, made by ``scripts/python-test``), or ours from this one. Listings (the
element reprs, with their data file, offset, length and timestamp; keys; masked duplicates),
axes and retrieved bytes are compared between the two, and against the bytes archived last.

1. pyfdb 5.25 writes (several flushes, re-archived keys, a key archived twice in one flush, a
   second process); ours reads it as 5.25 does.
2. 5.25's ``fdb-purge``, ``fdb-lock``/``fdb-unlock`` and ``fdb-wipe`` on such a store; ours
   follows.
3. An 8-keyword datum rule: 5.25 writes ``BTreeIndex64`` indexes; ours reads them, and appends
   to them so that 5.25 reads ours.
4. Ours appends into a 5.25 database (new fields, a re-archived key); 5.25 reads them. Then the
   writers alternate, FDB5, fieldstore, FDB5, on one database.
5. ``format: fdb5``: a store written only by ours; 5.25 reads it.

Skipped when no reference virtualenv is found (as ``test_pyfdb_compare_real_pyfdb.py``); with
``FIELDSTORE_NEED_FDB5LIB`` set that is a failure instead (as ``tests/fdb5_stores.rs``).
"""

import hashlib
import json
import os
import pathlib
import subprocess
import sys

import pytest

import fieldstore
from fieldstore import _native

ROOT = pathlib.Path(__file__).resolve().parents[3]
ECMWF_SCHEMA = ROOT / "crates/fieldstore/tests/fixtures/ecmwf-fdb5-schema"

# The 8-keyword datum rule of shared/testdata's fdbfmt/schema64: FDB5 5.25 picks BTreeIndex64.
SCHEMA64 = """\
param:      Param;
step:       Step;
date:       Date;
levelist:   Double;
expver:     Expver;
time:       Time;
number:     Integer;
[ class, expver, stream, date, time, domain?
       [ type, levtype
               [ step, levelist?, param, number?, frequency?, direction?, channel?, iteration? ]]
]
"""

D1, D2, D3 = "20240101", "20240102", "20240103"
BASE = {"class": "od", "expver": "0001"}

# Runs the operations of a JSON file with the `pyfdb` of the interpreter running it; prints one
# JSON result per operation (an exception is a result: {"error": ..., "message": ...}).
DRIVER = r"""
import hashlib, json, pathlib, sys
import pyfdb

spec = json.load(open(sys.argv[1]))
fdb = pyfdb.FDB(pathlib.Path(spec["config"]))


def sha(b):
    return hashlib.sha256(b).hexdigest()


def messages(data):
    out, pos = [], 0
    while pos < len(data):
        if data[pos:pos + 4] != b"GRIB":
            return out + ["not GRIB at %d" % pos]
        if data[pos + 7] == 2:
            n = int.from_bytes(data[pos + 8:pos + 16], "big")
        else:
            n = int.from_bytes(data[pos + 4:pos + 7], "big")
        out.append(sha(data[pos:pos + n]))
        pos += n
    return sorted(out)


def do(op):
    kind = op["op"]
    if kind == "archive":
        for f in op["files"]:
            fdb.archive(open(f, "rb").read())
        return None
    if kind == "flush":
        fdb.flush()
        return None
    if kind == "list":
        rows = []
        for e in fdb.list(op["sel"], include_masked=op.get("masked", False), level=op.get("level", 3)):
            row = {"repr": repr(e), "keys": e.keys(), "key": e.combined_key(), "located": e.has_location()}
            if e.has_location():
                row.update(offset=e.offset(), length=e.length(), path=e.uri.path())
                if op.get("read"):
                    dh = e.data_handle
                    with dh:
                        row["sha"] = sha(dh.read())
            rows.append(row)
        return rows
    if kind == "retrieve":
        dh = fdb.retrieve(op["sel"])
        with dh:
            data = dh.read()
        return {"size": len(data), "messages": messages(data)}
    if kind == "axes":
        out = {}
        for k, v in fdb.axes(op["sel"], level=op.get("level", 3)).items():
            # pyfdb 5.25 names an optional keyword no field sets with [""]: a documented difference.
            values = [x for x in v if x != ""]
            if values:
                out[k] = values
        return out
    raise ValueError(kind)


results = []
for op in spec["ops"]:
    try:
        results.append(do(op))
    except Exception as exc:
        results.append({"error": "RuntimeError" if isinstance(exc, RuntimeError) else type(exc).__name__,
                        "message": " ".join(str(exc).split())[:400]})
print(json.dumps(results))
"""


# --- the reference -----------------------------------------------------------------------------


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


@pytest.fixture(scope="module")
def ref_python():
    ref = reference_python()
    if ref is None:
        why = (
            "no virtualenv with the real pyfdb 5.25 and fdb5lib ($FIELDSTORE_REF_PYTHON or "
            "target/py-venv-ref, made by scripts/python-test)"
        )
        if os.environ.get("FIELDSTORE_NEED_FDB5LIB"):
            pytest.fail(why + ", and FIELDSTORE_NEED_FDB5LIB is set")
        pytest.skip(why)
    return ref


@pytest.fixture(autouse=True)
def _flat_layout(monkeypatch):
    # In this process too (the fieldstore module's checks): no dbnames file nests the databases.
    monkeypatch.setenv("FDB_DBNAMES_FILE", "/nonexistent")


def fdb525_tools(ref):
    """FDB5 5.25's tools (fdb5lib/bin) and the LD_LIBRARY_PATH they need (the wheels' lib dirs)."""
    site = pathlib.Path(
        subprocess.run(
            [ref, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            check=True,
            text=True,
        ).stdout.strip()
    )
    libs = [site / "fdb5lib/lib64"]
    for p in sorted(site.iterdir()):
        if p.name.endswith(".libs"):
            libs.append(p)
        elif p.name.endswith("lib") and p.name != "fdb5lib" and (p / "lib64").is_dir():
            libs.append(p / "lib64")
    return site / "fdb5lib/bin", ":".join(str(p) for p in libs)


# --- a store shared by both --------------------------------------------------------------------


def canonical(key):
    """A key as a hashable, order-free text: unset optional keywords left out."""
    return json.dumps(sorted((k, str(v)) for k, v in key.items() if v is not None and str(v) != ""))


class Shared:
    """One config file, one root, one environment, used by pyfdb 5.25, its tools and ours."""

    def __init__(self, tmp_path, ref, schema_text=None, extra_config=""):
        self.tmp = tmp_path
        self.ref = ref
        self.root = tmp_path / "root"
        self.root.mkdir()
        self.home = tmp_path / "fdbhome"
        self.home.mkdir()
        self.grib = tmp_path / "grib"
        self.grib.mkdir()
        if schema_text is None:
            schema = ECMWF_SCHEMA
        else:
            schema = tmp_path / "schema"
            schema.write_text(schema_text)
        self.config = tmp_path / "fdb_config.yaml"
        self.config.write_text(
            f"{extra_config}type: local\nengine: toc\nschema: {schema}\n"
            f"spaces:\n- handler: Default\n  roots:\n  - path: {self.root}\n"
        )
        self.driver = tmp_path / "driver.py"
        self.driver.write_text(DRIVER)
        self.latest = {}  # canonical key -> the bytes archived last under it
        self.runs = 0
        self.files = 0

    def env(self):
        env = dict(os.environ)
        for var in list(env):
            if var.startswith(("FDB_", "FDB5_")) or var in ("FIELDSTORE_LOG", "FIELDSTORE_TOKEN"):
                del env[var]
        # An empty FDB home: 5.25's list() crashes on a system /etc/fdb otherwise; no dbnames file:
        # Debian's would nest the databases.
        env.update(FDB_HOME=str(self.home), FDB_DBNAMES_FILE="/nonexistent")
        return env

    def run(self, python, ops):
        """The driver's results for ``ops`` run in a new process of ``python``."""
        self.runs += 1
        spec = self.tmp / f"ops{self.runs}.json"
        spec.write_text(json.dumps({"config": str(self.config), "ops": ops}))
        proc = subprocess.run(
            [python, str(self.driver), str(spec)],
            capture_output=True,
            env=self.env(),
            cwd=self.tmp,  # FDB5 drops dump_of_toc.* files here when it meets a toc not its own
            timeout=600,
        )
        who = "pyfdb 5.25" if python == self.ref else "fieldstore's pyfdb"
        assert proc.returncode == 0, f"{who}: {proc.stderr.decode(errors='replace')[-3000:]}"
        return json.loads(proc.stdout.decode().strip().splitlines()[-1])

    def theirs(self, ops):
        return self.run(self.ref, ops)

    def ours(self, ops):
        return self.run(sys.executable, ops)

    def write(self, python, rounds):
        """Archives ``rounds`` (lists of fields), one flush after each, in one process."""
        ops = []
        for fields in rounds:
            ops += [{"op": "archive", "files": [self.file(f) for f in fields]}, {"op": "flush"}]
        results = self.run(python, ops)
        assert all(r is None for r in results), results
        for fields in rounds:
            for key, data in fields:
                self.latest[canonical(key)] = data

    def file(self, field):
        self.files += 1
        path = self.grib / f"f{self.files}.grib"
        path.write_bytes(field[1])
        return str(path)

    def tool(self, name, *args):
        """One of FDB5 5.25's tools, on this config; its stdout."""
        bin_dir, libs = fdb525_tools(self.ref)
        env = dict(self.env(), FDB_CONFIG_FILE=str(self.config), LD_LIBRARY_PATH=libs)
        proc = subprocess.run([str(bin_dir / name), *args], capture_output=True, env=env, cwd=self.tmp, timeout=300)
        out = proc.stdout.decode(errors="replace")
        assert proc.returncode == 0, f"{name} {args}: {out[-2000:]}{proc.stderr.decode(errors='replace')[-3000:]}"
        return out

    def tocs(self):
        return sorted(self.root.glob("*/toc"))


def field(date, step, param, levelist=None, seed=0, levtype=None, **extra):
    """``(key, GRIB2 bytes)``: a field of the ECMWF schema's od/oper/fc rule."""
    key = {
        "class": "od",
        "expver": "0001",
        "stream": "oper",
        "date": date,
        "time": "1200",
        "domain": "g",
        "type": "fc",
        "levtype": levtype or ("pl" if levelist is not None else "sfc"),
        "step": str(step),
        "param": str(param),
    }
    if levelist is not None:
        key["levelist"] = str(levelist)
    key.update({k: str(v) for k, v in extra.items()})
    # Different seeds give different values, so a re-archived key has new bytes.
    salt = int(hashlib.sha256(canonical(key).encode()).hexdigest()[:6], 16)
    return key, _native.make_field(key, 40, (salt + 7919 * seed) & 0xFFFFFFFF)


def full_request(date, levtype="pl", steps=("0", "6", "12", "24"), levels=("500", "850", "1000")):
    """A retrieve of every step, level and param the tests may have written (and some not)."""
    # Surface params other than 165/167 left out: 5.25's metkit rewrites sfc 131/132 (a
    # documented difference).
    params = ("130", "131", "133") if levtype == "pl" else ("167", "165", "168")
    req = {
        "class": "od",
        "expver": "0001",
        "stream": "oper",
        "date": date,
        "time": "1200",
        "domain": "g",
        "type": "fc",
        "levtype": levtype,
        "step": list(steps),
        "param": list(params),
    }
    if levtype == "pl":
        req["levelist"] = list(levels)
    return req


def comparison_ops(dates):
    """What both sides are asked, on the whole store and on parts of it."""
    ops = [
        {"op": "list", "sel": BASE, "level": 3, "read": True},
        {"op": "list", "sel": BASE, "level": 3, "masked": True, "read": True},
        {"op": "list", "sel": BASE, "level": 2},
        {"op": "list", "sel": BASE, "level": 1},
        {"op": "list", "sel": BASE, "level": 2, "masked": True},
        {"op": "list", "sel": BASE, "level": 1, "masked": True},
        {"op": "axes", "sel": BASE, "level": 3},
        {"op": "axes", "sel": BASE, "level": 2},
        {"op": "axes", "sel": BASE, "level": 1},
    ]
    for date in dates:
        sel = dict(BASE, stream="oper", date=date, time="1200", type="fc", levtype="pl")
        ops += [
            {"op": "list", "sel": dict(sel, param="130", step=["0", "12"]), "masked": True},
            {"op": "list", "sel": dict(sel, levelist="500/850"), "level": 3},
            {"op": "axes", "sel": sel},
            {"op": "retrieve", "sel": full_request(date, "pl")},
            {"op": "retrieve", "sel": full_request(date, "sfc")},
            {"op": "retrieve", "sel": dict(full_request(date, "pl"), step="0", levelist="500", param="130")},
            {"op": "retrieve", "sel": dict(full_request(date, "pl"), param="999")},
        ]
    return ops


def normalized(op, result, exact=False):
    """A result as compared: listings sorted (pyfdb promises no order).

    Unless ``exact``, two differences are set aside here, each checked exactly by a test of its
    own: at level 1 and 2 with ``include_masked``, 5.25 lists an element per index (so one per
    flush that wrote that index key); and axis values are compared as sets.
    """
    if isinstance(result, list):
        rows = sorted(result, key=lambda row: json.dumps(row, sort_keys=True))
        if not exact and op.get("masked") and op.get("level", 3) < 3:
            rows = [r for i, r in enumerate(rows) if i == 0 or r != rows[i - 1]]
        return rows
    if not exact and op["op"] == "axes" and isinstance(result, dict) and "error" not in result:
        return {k: sorted(v) for k, v in result.items()}
    return result


def compare(store, ops, stage, exact=False):
    """Both sides' answers to ``ops``; asserts they are equal; returns 5.25's."""
    theirs = store.theirs(ops)
    ours = store.ours(ops)
    wrong = []
    for op, t, o in zip(ops, theirs, ours):
        t, o = normalized(op, t, exact), normalized(op, o, exact)
        if o != t:
            wrong.append(f"{json.dumps(op)}\n{difference(t, o)}")
    assert not wrong, f"{stage}: {len(wrong)} of {len(ops)} answers differ:\n" + "\n\n".join(wrong)
    return theirs


def difference(theirs, ours):
    """What differs, briefly: for listings, the rows only one side has."""
    if isinstance(theirs, list) and isinstance(ours, list):
        t = [json.dumps(r, sort_keys=True) for r in theirs]
        o = [json.dumps(r, sort_keys=True) for r in ours]
        only_t = [r for r in t if r not in o or t.count(r) > o.count(r)]
        only_o = [r for r in o if r not in t or o.count(r) > t.count(r)]
        return (
            f"5.25 lists {len(t)}, ours {len(o)}\nonly (or more often) 5.25's:\n  "
            + "\n  ".join(only_t[:12])
            + "\nonly (or more often) ours:\n  "
            + "\n  ".join(only_o[:12])
        )
    return f"5.25: {json.dumps(theirs)[:3000]}\nours: {json.dumps(ours)[:3000]}"


def visible_rows(results, ops):
    """The rows of the first visible (not masked), read level-3 listing of ``BASE``."""
    for op, r in zip(ops, results):
        if op["op"] == "list" and op["sel"] == BASE and op.get("level") == 3 and not op.get("masked"):
            return r
    raise AssertionError("no listing")


def check_latest(store, rows, stage):
    """The visible fields are exactly the keys archived, each with the bytes archived last."""
    got = {canonical(r["key"]): r["sha"] for r in rows}
    want = {k: hashlib.sha256(v).hexdigest() for k, v in store.latest.items()}
    assert len(rows) == len(got), f"{stage}: a key listed twice without include_masked"
    assert got == want, f"{stage}: listed {sorted(got)} want {sorted(want)}"


def retrieve_ops(store, keys):
    """One retrieve per key, the key as its request."""
    return [{"op": "retrieve", "sel": json_key(k)} for k in keys]


def json_key(canonical_key):
    return dict(json.loads(canonical_key))


def check_retrieved(store, keys, results, stage):
    for k, r in zip(keys, results):
        want = store.latest[k]
        assert r == {"size": len(want), "messages": [hashlib.sha256(want).hexdigest()]}, f"{stage}: {k}: {r}"


# --- the stores ---------------------------------------------------------------------------------


def build_525_store(store):
    """pyfdb 5.25 writes: three flushes in one process, then a second process.

    Re-archived keys across flushes (masked duplicates in older indexes), a key archived twice
    within one flush (the second replaces the first in the same index), surface and
    pressure-level indexes, two databases.
    """
    ref = store.ref
    r1 = [field(D1, s, 130, lev) for s in (0, 6) for lev in (500, 850)] + [field(D1, 0, 167)]
    r2 = [field(D1, 12, 130, lev) for lev in (500, 850)] + [field(D1, 0, 130, 500, seed=1)]
    r3 = [
        field(D1, 0, 130, 500, seed=2),
        field(D1, 6, 130, 850, seed=1),
        field(D1, 6, 130, 850, seed=2),  # the same key again in this flush
        field(D1, 0, 167, seed=1),
    ] + [field(D2, s, 130, 500) for s in (0, 6)] + [field(D2, 0, 165)]
    store.write(ref, [r1, r2, r3])
    r4 = [field(D1, 0, 130, 500, seed=3), field(D1, 0, 131, 500), field(D1, 6, 131, 500),
          field(D2, 0, 130, 500, seed=1), field(D2, 6, 167)]
    store.write(ref, [r4])
    return store


def test_525_written_store_read_by_ours(tmp_path, ref_python):
    store = build_525_store(Shared(tmp_path, ref_python))
    assert len(store.tocs()) == 2
    ops = comparison_ops([D1, D2])
    theirs = compare(store, ops, "written by 5.25")

    rows = visible_rows(theirs, ops)
    check_latest(store, rows, "5.25's own listing")
    masked = theirs[1]
    # Masked duplicates: (0,500,130) four times across four flushes, (6,850,130) twice (the
    # second of the same flush replaced the first), (0,167) twice, D2's (0,500,130) twice.
    assert len(masked) == len(rows) + 3 + 1 + 1 + 1, [r["repr"] for r in masked]

    keys = sorted(store.latest)
    check_retrieved(store, keys, store.theirs(retrieve_ops(store, keys)), "5.25 retrieve")
    check_retrieved(store, keys, store.ours(retrieve_ops(store, keys)), "our retrieve")

    # The fieldstore module sees them as FDB5-format databases, and lists the same fields.
    with fieldstore.FDB(store.config.read_text()) as fdb:
        assert {w.format for w in fdb.where(BASE)} == {"fdb5"}
        assert len(list(fdb.list(BASE))) == len(rows)
        assert len(list(fdb.list(BASE, include_masked=True))) == len(masked)
        for el in fdb.list(BASE):
            with open(el.path, "rb") as f:
                f.seek(el.offset)
                assert f.read(el.length) == store.latest[canonical(el.key)]
            assert not el.masked


def test_525_purge_lock_wipe_then_ours(tmp_path, ref_python):
    store = build_525_store(Shared(tmp_path, ref_python))
    ops = comparison_ops([D1, D2])
    db1 = f"class=od,expver=0001,stream=oper,date={D1},time=1200,domain=g"
    db2 = f"class=od,expver=0001,stream=oper,date={D2},time=1200,domain=g"
    before = compare(store, ops, "before the purge")

    store.tool("fdb-purge", "--doit", db1)
    store.tool("fdb-purge", "--doit", db2)
    after = compare(store, ops, "purged by 5.25")
    check_latest(store, visible_rows(after, ops), "purged")
    assert visible_rows(after, ops) == visible_rows(before, ops), "a purge changed the visible fields"
    assert len(after[1]) < len(before[1]), "5.25's purge removed no masked field"

    # A list lock on D1: both leave that database out of level 2 and 3 listings and give its
    # values in axes, as FDB5's axes check no lock. (5.25 still lists it at level 1; ours does
    # not: test_525_list_lock_level1_and_axes.)
    store.tool("fdb-lock", "--list", db1)
    lops = [op for op in ops if not (op["op"] == "list" and op.get("level") == 1)]
    locked = compare(store, lops, "D1 list-locked")
    assert {r["key"]["date"] for r in visible_rows(locked, lops)} == {D2}
    store.tool("fdb-unlock", "--list", db1)
    compare(store, ops, "D1 list-unlocked")

    # A retrieve lock on D1: 5.25 gives an empty handle, ours raises (a documented difference,
    # docs/python.md); listing is unaffected.
    store.tool("fdb-lock", "--retrieve", db1)
    rops = [
        {"op": "retrieve", "sel": full_request(D1)},
        {"op": "retrieve", "sel": full_request(D2)},
        {"op": "list", "sel": BASE, "level": 3},
    ]
    theirs, ours = store.theirs(rops), store.ours(rops)
    assert theirs[0] == {"size": 0, "messages": []}, theirs[0]
    assert ours[0].get("error") == "RuntimeError" and "lock" in ours[0]["message"].lower(), ours[0]
    assert ours[1] == theirs[1] and theirs[1]["size"] > 0
    assert normalized(rops[2], ours[2]) == normalized(rops[2], theirs[2])
    store.tool("fdb-unlock", "--retrieve", db1)

    # An archive lock on D2: both refuse to write into it.
    store.tool("fdb-lock", "--archive", db2)
    new = field(D2, 24, 130, 500)
    aops = [{"op": "archive", "files": [store.file(new)]}, {"op": "flush"}]
    theirs, ours = store.theirs(aops), store.ours(aops)
    assert any(r and r.get("error") for r in theirs), f"5.25 archived into an archive-locked database: {theirs}"
    assert any(r and r.get("error") for r in ours), f"ours archived into an archive-locked database: {ours}"
    store.tool("fdb-unlock", "--archive", db2)
    unlocked = compare(store, ops, "D2 archive-unlocked")
    check_latest(store, visible_rows(unlocked, ops), "after the archive lock")

    # 5.25 wipes D2: gone for both.
    store.tool("fdb-wipe", "--doit", db2)
    assert len(store.tocs()) == 1
    wiped = compare(store, ops, "D2 wiped by 5.25")
    store.latest = {k: v for k, v in store.latest.items() if json_key(k)["date"] != D2}
    check_latest(store, visible_rows(wiped, ops), "after the wipe")


def test_btreeindex64_written_by_525_read_by_ours(tmp_path, ref_python):
    store = Shared(tmp_path, ref_python, schema_text=SCHEMA64)
    r1 = [field(D1, s, 130, lev) for s in (0, 6) for lev in (500, 850)]
    r2 = [field(D1, 0, 130, 500, seed=1), field(D1, 0, 167)]
    r3 = [field(D1, 0, 130, 500, seed=2, type="pf", number=n) for n in (1, 2)]
    store.write(ref_python, [r1, r2])
    store.write(ref_python, [r3])
    (toc,) = store.tocs()
    indexes64 = lambda: sum(t.read_bytes().count(b"BTreeIndex64") for t in toc.parent.glob("toc*"))  # noqa: E731
    written = indexes64()
    assert written > 0, "5.25 did not write a BTreeIndex64 index"
    ops = comparison_ops([D1])
    ops.append({"op": "list", "sel": dict(BASE, type="pf", number="2"), "read": True})
    theirs = compare(store, ops, "BTreeIndex64 by 5.25")
    check_latest(store, visible_rows(theirs, ops), "BTreeIndex64 by 5.25")
    assert len(theirs[-1]) == 1 and theirs[-1][0]["key"]["number"] == "2"

    # Ours appends (a new field, a re-archived key): 5.25 reads them.
    store.write(sys.executable, [[field(D1, 12, 130, 500), field(D1, 0, 130, 850, seed=1)]])
    assert indexes64() > written, "ours did not write a BTreeIndex64 index"
    theirs = compare(store, ops, "BTreeIndex64 appended by ours")
    check_latest(store, visible_rows(theirs, ops), "BTreeIndex64 appended by ours")
    keys = sorted(store.latest)
    check_retrieved(store, keys, store.theirs(retrieve_ops(store, keys)), "5.25 retrieve")


def test_ours_appends_into_525_database_then_writers_alternate(tmp_path, ref_python):
    store = build_525_store(Shared(tmp_path, ref_python))
    tocs_before = {t: t.read_bytes() for t in store.tocs()}

    # Ours: new fields (pressure level and surface: one flush, two indexes), a re-archived key
    # (in 5.25's database), a field of a third, new database.
    ours1 = [field(D1, 24, 130, lev) for lev in (500, 850)] + [field(D1, 24, 167), field(D1, 0, 130, 500, seed=10)]
    ours2 = [field(D2, 6, 130, 500, seed=10), field(D2, 24, 167)]
    store.write(sys.executable, [ours1, ours2])
    subtocs = sorted(p.name for p in store.root.glob(f"*:{D1}:*/toc.*"))
    assert len(subtocs) == 1, f"ours' flush of two indexes into D1 made no sub-toc of its own: {subtocs}"
    for toc, old in tocs_before.items():
        now = toc.read_bytes()
        assert now.startswith(old) and len(now) > len(old), f"{toc}: not appended to"
        assert now[:1] == b"t", f"{toc}: no longer an FDB5 toc"
    with fieldstore.FDB(store.config.read_text()) as fdb:
        assert {w.format for w in fdb.where(BASE)} == {"fdb5"}, "a new database in another format"

    dates = [D1, D2]
    ops = comparison_ops(dates)
    theirs = compare(store, ops, "appended to by ours")
    check_latest(store, visible_rows(theirs, ops), "appended to by ours, 5.25's listing")
    keys = sorted(store.latest)
    check_retrieved(store, keys, store.theirs(retrieve_ops(store, keys)), "5.25 retrieve of ours")

    # FDB5, fieldstore, FDB5 on one database; each re-archives the key the one before wrote.
    store.write(ref_python, [[field(D1, 48, 130, 500), field(D1, 48, 167), field(D1, 24, 167, seed=20)]])
    store.write(sys.executable, [[field(D1, 72, 130, 500), field(D1, 48, 167, seed=30)]])
    store.write(ref_python, [[field(D1, 96, 130, 850), field(D1, 72, 130, 500, seed=40)], [field(D1, 96, 167)]])
    ops = comparison_ops(dates) + [
        {"op": "retrieve", "sel": full_request(D1, "pl", steps=("24", "48", "72", "96"))},
        {"op": "retrieve", "sel": full_request(D1, "sfc", steps=("24", "48", "72", "96"))},
    ]
    theirs = compare(store, ops, "alternating writers")
    check_latest(store, visible_rows(theirs, ops), "alternating writers")
    keys = sorted(store.latest)
    check_retrieved(store, keys, store.theirs(retrieve_ops(store, keys)), "5.25 retrieve, alternating")
    check_retrieved(store, keys, store.ours(retrieve_ops(store, keys)), "our retrieve, alternating")
    # pl: step 24 at 500 and 850, 48 and 72 at 500, 96 at 850; sfc: steps 24, 48, 96.
    assert len(theirs[-2]["messages"]) == 5 and len(theirs[-1]["messages"]) == 3

    # A new database in a root that holds FDB5's (the config does not say `format:`) is made in
    # FDB5's format, so 5.25 reads it too (it stops on a database in fieldstore's format).
    d3 = field(D3, 0, 130, 500)
    store.write(sys.executable, [[d3]])
    with fieldstore.FDB(store.config.read_text()) as fdb:
        formats = {w.db["date"]: w.format for w in fdb.where(BASE)}
    assert formats == {D1: "fdb5", D2: "fdb5", D3: "fdb5"}, formats
    for who in (store.theirs, store.ours):
        listed = who(ops[:1])[0]
        assert len(listed) == len(visible_rows(theirs, ops)) + 1
        assert [r for r in listed if r["key"]["date"] == D3][0]["sha"] == hashlib.sha256(d3[1]).hexdigest()


def test_format_fdb5_store_written_by_ours_read_by_525(tmp_path, ref_python):
    store = Shared(tmp_path, ref_python, extra_config="format: fdb5\n")
    r1 = [field(D1, s, 130, lev) for s in (0, 6) for lev in (500, 850)] + [field(D1, 0, 167)]
    r2 = [field(D1, 0, 130, 500, seed=1), field(D1, 12, 131, 500), field(D2, 0, 130, 500)]
    r3 = [field(D1, 0, 130, 500, seed=2), field(D1, 0, 167, seed=1), field(D2, 0, 165)]
    store.write(sys.executable, [r1, r2])
    store.write(sys.executable, [r3])
    assert len(store.tocs()) == 2
    for toc in store.tocs():
        assert toc.read_bytes()[:1] == b"t", f"{toc} is not an FDB5 toc"
    with fieldstore.FDB(store.config.read_text()) as fdb:
        assert {w.format for w in fdb.where(BASE)} == {"fdb5"}

    ops = comparison_ops([D1, D2])
    theirs = compare(store, ops, "written by ours in FDB5's format")
    check_latest(store, visible_rows(theirs, ops), "format: fdb5, 5.25's listing")
    assert len(theirs[1]) == len(visible_rows(theirs, ops)) + 3, "masked duplicates"
    keys = sorted(store.latest)
    check_retrieved(store, keys, store.theirs(retrieve_ops(store, keys)), "5.25 retrieve")


def test_525_level2_masked_listing(tmp_path, ref_python):
    store = Shared(tmp_path, ref_python)
    store.write(ref_python, [[field(D1, 0, 130, 500)], [field(D1, 6, 130, 500)]])
    ops = [{"op": "list", "sel": BASE, "level": 2, "masked": True}]
    assert len(store.theirs(ops)[0]) == 2, "5.25: one level-2 element per index"
    compare(store, ops, "exactly as 5.25", exact=True)


def test_525_axes_value_order(tmp_path, ref_python):
    store = Shared(tmp_path, ref_python)
    store.write(ref_python, [[field(D1, s, 130, 500) for s in (0, 6, 12)]])
    ops = [{"op": "axes", "sel": BASE, "level": 3}]
    assert store.theirs(ops)[0]["step"] == ["0", "12", "6"], "5.25: axis values in string order"
    compare(store, ops, "exactly as 5.25", exact=True)


def test_525_list_lock_level1_and_axes(tmp_path, ref_python):
    store = Shared(tmp_path, ref_python)
    store.write(ref_python, [[field(D1, 0, 130, 500), field(D2, 6, 130, 850)]])
    store.tool("fdb-lock", "--list", f"class=od,expver=0001,stream=oper,date={D1},time=1200,domain=g")
    ops = [
        {"op": "list", "sel": BASE, "level": 3},
        {"op": "list", "sel": BASE, "level": 1},
        {"op": "axes", "sel": BASE, "level": 1},
        {"op": "axes", "sel": dict(BASE, date=D1), "level": 3},
    ]
    theirs = store.theirs(ops)
    assert [r["key"]["date"] for r in theirs[0]] == [D2], "5.25 lists a list-locked database's fields"
    assert len(theirs[1]) == 2 and theirs[2]["date"] == [D1, D2] and theirs[3]["step"] == ["0"]
    compare(store, ops, "exactly as 5.25", exact=True)
