"""The ``multio`` module (fieldstore-multio, pymultio's API) against ECMWF's pymultio.

The same script runs with this module and with pymultio 2.12 (from its own virtualenv,
``target/py-venv-multio``, made by ``scripts/python-test``, or ``$FIELDSTORE_MULTIO_PYTHON``):
hourly fields of three days through select + statistics (daily mean, minimum, maximum) +
encode raw + file sinks give the same values (relative 1e-12) and the same output metadata.
Without pymultio those comparisons skip, unless ``FIELDSTORE_NEED_MULTIO`` is set (scripts/test),
which makes the skip a failure. pymultio's data-losing defects that this module does not copy
(bools sent as ints, ints cut to 32 bits, only the first dimension of an array written) are
each shown against pymultio itself.
"""

from __future__ import annotations

import glob
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import multio

ROOT = pathlib.Path(__file__).resolve().parents[3]
DAYS = 3
NPOINTS = 48

PLAN = """
plans:
  - name: t2m
    actions:
      - type: select
        match:
          - paramId: [167]
      - type: statistics
        output-frequency: 1d
        operations: [average, minimum, maximum]
        options:
          initial-condition-present: true
      - type: print
        only-fields: true
      - type: encode
        format: raw
      - type: sink
        sinks:
          - {type: file, path: "{~}/out-167.raw", append: false, per-server: false}
  - name: d2m
    actions:
      - type: select
        match:
          - paramId: [168]
      - type: statistics
        output-frequency: 1d
        operations: [average]
        options:
          initial-condition-present: true
      - type: print
        only-fields: true
      - type: encode
        format: raw
      - type: sink
        sinks:
          - {type: file, path: "{~}/out-168.raw", append: false, per-server: false}
"""

# Runs under either implementation: argv = plan path, days, npoints.
SCRIPT = r"""
import math, sys
import numpy as np
import multio

plan, days, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
mio = multio.Multio(config_path=plan)
mio.open_connections()
i = np.arange(n)
def values(param, step):
    return 250.0 + (param - 160) * 3.0 + 10.0 * np.sin(0.37 * i + 0.26 * step) + 0.001 * step + 0.5 * (i % 7)
written = skipped = 0
for step in range(24 * days + 1):
    # no bools: pymultio would send them as ints (see test_python_types_survive_where_pymultio_loses_them)
    md = {"param": "167", "paramId": 167, "levtype": "sfc", "level": 0, "gridType": "regular_ll",
          "startDate": 20250101, "startTime": 0, "date": 20250101, "time": 0, "step": step,
          "timeStep": 3600, "step-frequency": 1, "misc-globalSize": n}
    for param, dtype in ((167, np.float64), (168, np.float32), (165, np.float64)):
        md["param"], md["paramId"] = str(param), param
        if mio.field_accepted(md):
            mio.write_field(md, values(param, step).astype(dtype))
            written += 1
        else:
            skipped += 1
    mio.flush({"flushKind": "default", "step": step})
mio.notify({"trigger": "step", "step": str(24 * days)})
mio.flush({"flushKind": "last-step"})
mio.close_connections()
print(f"script: {written} written, {skipped} skipped")
"""


def reference_python():
    """pymultio's interpreter and the LD_LIBRARY_PATH its wheel needs (MULTIO.md 4.4), or None."""
    py = os.environ.get("FIELDSTORE_MULTIO_PYTHON") or str(ROOT / "target/py-venv-multio/bin/python")
    if not os.access(py, os.X_OK):
        return None
    venv = pathlib.Path(py).parent.parent
    libs = glob.glob(str(venv / "lib/python*/site-packages/*/lib64"))
    if not any(p.endswith("multiolib/lib64") for p in libs):
        return None
    return py, ":".join(sorted(libs))


def reference_or_skip():
    ref = reference_python()
    if ref is None:
        if os.environ.get("FIELDSTORE_NEED_MULTIO"):
            pytest.fail("pymultio (target/py-venv-multio) is required here (FIELDSTORE_NEED_MULTIO)")
        pytest.skip("pymultio not installed (target/py-venv-multio, made by scripts/python-test)")
    return ref


def run_script(python, libs, directory, script=SCRIPT, args=()):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "plan.yaml").write_text(PLAN)
    (directory / "script.py").write_text(script)
    env = dict(os.environ)
    if libs:
        env["LD_LIBRARY_PATH"] = libs
    # pymultio must not find fieldstore's `multio` (nor the reverse): each runs in its own venv.
    env.pop("PYTHONPATH", None)
    out = subprocess.run(
        [python, str(directory / "script.py"), str(directory / "plan.yaml"), *map(str, args)],
        capture_output=True, text=True, env=env, cwd=directory, timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def printed(stdout):
    rows = []
    for line in stdout.splitlines():
        if "tag=Field" in line:
            start = line.index("metadata=") + len("metadata=")
            end = line.rindex(", payload-size")
            rows.append((json.loads(line[start:end]), int(line[end + len(", payload-size="):].rstrip(")"))))
    return rows


def outputs(directory, stdout):
    return {
        "printed": printed(stdout),
        "t2m": np.fromfile(directory / "out-167.raw", dtype=np.float64),
        "d2m": np.fromfile(directory / "out-168.raw", dtype=np.float32),
    }


def ours(directory):
    stdout = run_script(sys.executable, None, directory, args=(DAYS, NPOINTS))
    return outputs(directory, stdout), stdout


def values(param, step):
    i = np.arange(NPOINTS)
    return 250.0 + (param - 160) * 3.0 + 10.0 * np.sin(0.37 * i + 0.26 * step) + 0.001 * step + 0.5 * (i % 7)


def test_daily_statistics_from_numpy_fields(tmp_path):
    out, stdout = ours(tmp_path / "ours")
    assert f"script: {2 * (24 * DAYS + 1)} written, {24 * DAYS + 1} skipped" in stdout
    t2m = out["t2m"].reshape(DAYS, 3, NPOINTS)
    d2m = out["d2m"].reshape(DAYS, NPOINTS)
    for day in range(DAYS):
        xs = np.array([values(167, s) for s in range(24 * day + 1, 24 * day + 25)])
        np.testing.assert_allclose(t2m[day], [xs.mean(0), xs.min(0), xs.max(0)], rtol=1e-12)
        xs32 = np.array([values(168, s).astype(np.float32) for s in range(24 * day + 1, 24 * day + 25)])
        np.testing.assert_allclose(d2m[day], xs32.astype(np.float64).mean(0).astype(np.float32),
                                   rtol=np.finfo(np.float32).eps)
    ops = [(m["operation"], m["step"], m["paramId"], m["misc-precision"]) for m, _ in out["printed"]]
    expected = []
    for day in range(1, DAYS + 1):
        expected += [(op, 24 * day, 167, "double") for op in ("average", "minimum", "maximum")]
        expected += [("average", 24 * day, 168, "single")]
    assert ops == expected


def test_same_outputs_as_pymultio(tmp_path):
    python, libs = reference_or_skip()
    mine, _ = ours(tmp_path / "ours")
    theirs_stdout = run_script(python, libs, tmp_path / "theirs", args=(DAYS, NPOINTS))
    theirs = outputs(tmp_path / "theirs", theirs_stdout)
    assert len(mine["t2m"]) == len(theirs["t2m"]) == DAYS * 3 * NPOINTS
    worst = float(np.max(np.abs(mine["t2m"] - theirs["t2m"]) / np.abs(theirs["t2m"])))
    assert worst <= 1e-12, worst
    # pymultio's MultIO keeps float statistics in float; fieldstore in double, rounded once.
    worst32 = float(np.max(np.abs(mine["d2m"].astype(np.float64) - theirs["d2m"]) / np.abs(theirs["d2m"])))
    assert worst32 <= 1e-6, worst32
    assert mine["printed"] == theirs["printed"]
    print(f"pymultio vs multio: doubles {worst:.3g}, floats {worst32:.3g} (relative); "
          f"{len(mine['printed'])} outputs' metadata equal")


TYPES_PLAN_SCRIPT = r"""
import sys
import numpy as np
import multio
plan = sys.argv[1]
open(plan, "w").write('plans: [{name: p, actions: [{type: print, only-fields: true}, {type: "null"}]}]')
mio = multio.Multio(config_path=plan)
md = {"bitmapPresent": True, "toAllServers": False, "big": 2**33 + 5, "paramId": 167}
mio.write_field(md, np.arange(2 * 24, dtype=np.float64).reshape(2, 24))
"""


def test_python_types_survive_where_pymultio_loses_them(tmp_path):
    """pymultio tests ``int`` before ``bool`` (True arrives as 1), casts ints to C ``int`` (2**33+5
    arrives as 5) and writes ``len(data)`` values of an array (2 of a 2x24 array). This module
    keeps all three; with pymultio installed, its losses are shown too."""
    stdout = run_script(sys.executable, None, tmp_path / "ours", script=TYPES_PLAN_SCRIPT)
    [(md, size)] = printed(stdout)
    assert md["bitmapPresent"] is True and md["toAllServers"] is False
    assert md["big"] == 2**33 + 5
    assert size == 48 * 8
    ref = reference_python()
    if ref is None:
        return
    theirs = run_script(*ref, tmp_path / "theirs", script=TYPES_PLAN_SCRIPT)
    [(md, size)] = printed(theirs)
    assert md["bitmapPresent"] == 1 and md["bitmapPresent"] is not True
    assert md["big"] == 5
    assert size == 2 * 8


def write_plan(tmp_path, text, name="plan.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_bad_plans_raise_naming_file_line_and_action(tmp_path):
    bad = write_plan(tmp_path, "plans:\n  - name: p\n    actions: [ {type: select\n", "bad.yaml")
    with pytest.raises(multio.MultioException, match=r"bad\.yaml.*line 3"):
        multio.Multio(config_path=bad)
    unknown = write_plan(tmp_path, "plans:\n  - name: p\n    actions:\n      - type: statistix\n", "u.yaml")
    with pytest.raises(multio.MultioException, match=r"u\.yaml:4: unknown action type 'statistix'"):
        multio.Multio(config_path=unknown)
    refused = write_plan(tmp_path, "plans:\n  - name: p\n    actions:\n      - type: transport\n", "r.yaml")
    with pytest.raises(multio.MultioException, match=r"r\.yaml:4: action 'transport' is not supported"):
        multio.Multio(config_path=refused)
    with pytest.raises(multio.MultioException, match="cannot read"):
        multio.Multio(config_path=tmp_path / "missing.yaml")


def test_bad_fields_fail_alone(tmp_path):
    out = tmp_path / "out.raw"
    plan = write_plan(tmp_path, PLAN.split("  - name: d2m")[0].replace("{~}/out-167.raw", str(out)))
    mio = multio.Multio(config_path=plan)
    md = {"param": "167", "paramId": 167, "levtype": "sfc", "level": 0, "gridType": "regular_ll",
          "startDate": 20250101, "startTime": 0, "step": 0, "timeStep": 3600}
    mio.write_field(md, np.ones(4))
    with pytest.raises(multio.MultioException) as e:
        mio.write_field({**md, "step": "one"}, np.ones(4))
    assert "plan 't2m', action 'statistics #2'" in str(e.value)
    assert "key 'step' must be an int" in str(e.value)
    assert e.value.__cause__.kind == "bad-request"
    with pytest.raises(TypeError, match="key 'step'"):
        mio.write_field({**md, "step": object()}, np.ones(4))
    with pytest.raises(ValueError, match="64 bits"):
        multio.Metadata(md={"big": 2**70})
    with pytest.raises(multio.MultioException, match="MPI"):
        mio.write_domain({}, [1, 2])
    # the plan goes on: day 1 completes
    for step in range(1, 25):
        mio.write_field({**md, "step": step}, np.ones(4))
    means = np.fromfile(out, dtype=np.float64)
    assert means.shape == (12,)
    np.testing.assert_allclose(means[:4], 1.0, rtol=1e-12)


def test_parametrization_is_seen_by_selects_and_written_once(tmp_path):
    out = tmp_path / "out.raw"
    plan = write_plan(tmp_path, f"""
plans:
  - name: p
    actions:
      - type: select
        match: [{{experiment: [hindcast]}}]
      - type: encode
        format: raw
      - type: sink
        sinks: [{{type: file, path: "{out}", append: false, per-server: false}}]
""")
    mio = multio.Multio(config_path=plan)
    assert not mio.field_accepted({"paramId": 1})
    params = {"experiment": "hindcast", "levels": np.array([1, 2, 3], dtype=np.int32)}
    mio.write_parametrization(params)
    assert "levels" in params  # pymultio deletes array keys from the caller's dict
    assert mio.field_accepted({"paramId": 1})
    mio.write_field({"paramId": 1}, np.array([1.5, 2.5]))
    assert np.fromfile(out).tolist() == [1.5, 2.5]
    mio.write_parametrization({"experiment": "hindcast"})  # the same value again is fine
    with pytest.raises(multio.MultioException, match="'experiment' already has a different value"):
        mio.write_parametrization({"experiment": "forecast"})


def test_multio_plan_sets_the_plan_for_multio(tmp_path, monkeypatch):
    for var in ("MULTIO_SERVER_CONFIG_FILE", "MULTIO_SERVER_CONFIG_PATH", "MULTIO_PLANS",
                "MULTIO_PLANS_FILE", "MULTIO_CONFIG", "MULTIO_CONFIG_FILE", "MULTIO_SINKS"):
        monkeypatch.delenv(var, raising=False)
    out = tmp_path / "out.raw"
    plan = {"plans": [{"name": "dict-plan", "actions": [
        {"type": "encode", "format": "raw"},
        {"type": "sink", "sinks": [{"type": "file", "path": str(out), "append": True, "per-server": False}]},
    ]}]}
    with multio.MultioPlan(plan):
        mio = multio.Multio()
        assert mio.plan_names() == ["dict-plan"]
    assert "MULTIO_PLANS" not in os.environ
    mio.write_field({"paramId": 1}, np.array([3.0], dtype=np.float32))
    assert np.fromfile(out, dtype=np.float32).tolist() == [3.0]
    path = write_plan(tmp_path, "plans: [{name: from-file, actions: [{type: \"null\"}]}]")
    with multio.MultioPlan(str(path)):
        assert multio.Multio().plan_names() == ["from-file"]


RELATIVE_SCRIPT = r"""
import os, sys
import numpy as np
import multio
os.makedirs("sub", exist_ok=True)
open("sub/plan.yaml", "w").write('''
plans:
  - name: p
    actions:
      - {type: encode, format: raw}
      - type: sink
        sinks:
          - {type: file, path: "{~}/tilde.raw", append: false, per-server: false}
          - {type: file, path: "plain.raw", append: false, per-server: false}
''')
mio = multio.Multio(config_path="sub/plan.yaml")
mio.write_field({"paramId": 1}, np.ones(2))
mio.flush({})
print(sorted(os.path.relpath(os.path.join(d, f)) for d, _, fs in os.walk(".") for f in fs if f.endswith(".raw")))
"""


def test_relative_paths_resolve_as_in_multio(tmp_path):
    """A plan named by a relative path: ``{~}`` is its directory, and a relative sink path is
    relative to the working directory, as in MultIO (the engine used to write
    ``sub/sub/tilde.raw`` and put ``plain.raw`` beside the plan)."""
    expected = "['plain.raw', 'sub/tilde.raw']"
    assert expected in run_script(sys.executable, None, tmp_path / "ours", script=RELATIVE_SCRIPT)
    ref = reference_python()
    if ref is not None:
        assert expected in run_script(*ref, tmp_path / "theirs", script=RELATIVE_SCRIPT)
