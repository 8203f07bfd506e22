"""Fixtures of the GribJump comparison tests.

The reference is ECMWF's stack from PyPI in its own virtualenv (target/py-venv-gribjump, made by
scripts/gribjump-install, or $FIELDSTORE_GRIBJUMP_PYTHON): FDB5 with GribJump's archive plugin,
pygribjump, polytope-python with polytope-mars, earthkit-data. Ours is fieldstore with its
`pygribjump` (python/pygribjump-compat) in the test virtualenv. The same GRIB fields (gjdata.py)
are archived into both, once per session.

Skips: without our `pygribjump`; without fieldstore's extraction (`FDB.extract`), unless
FIELDSTORE_GRIBJUMP_DECODE_FALLBACK=1 (then our pygribjump decodes whole fields, same answers,
slowly); without the reference, unless FIELDSTORE_NEED_GRIBJUMP=1 (scripts/python-test sets it):
then a missing reference fails the tests.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE))

import gjdata  # noqa: E402


def _need_reference():
    # In CI every dependency is installed: a missing one is a failure, never a quiet skip.
    return os.environ.get("FIELDSTORE_NEED_GRIBJUMP", "") not in ("", "0") or os.environ.get("CI") == "true"


def _find_reference():
    candidates = [os.environ.get("FIELDSTORE_GRIBJUMP_PYTHON"), ROOT / "target/py-venv-gribjump/bin/python"]
    tried = []
    for c in candidates:
        if not c:
            continue
        tried.append(str(c))
        if os.path.exists(c):
            probe = subprocess.run(
                [str(c), "-c", "import pygribjump, gribjumplib, pyfdb, eccodes, polytope_mars, covjsonkit"],
                capture_output=True,
                text=True,
                env=dict(os.environ, FDB_HOME="/nonexistent"),
            )
            if probe.returncode == 0:
                return str(c), None
            tried[-1] += f" ({probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else 'failed'})"
    return None, "the reference GribJump stack (scripts/gribjump-install) was not found: tried " + ", ".join(tried)


@pytest.fixture(scope="session")
def reference_python():
    python, why = _find_reference()
    if python is None:
        if _need_reference():
            pytest.fail(why + " (FIELDSTORE_NEED_GRIBJUMP is set)")
        pytest.skip(why)
    return python


@pytest.fixture(scope="session")
def ours():
    """Our `pygribjump` module, with fieldstore's extraction built (or the decode fallback asked for)."""
    skip = pytest.fail if _need_reference() else pytest.skip
    try:
        import pygribjump
    except ImportError:
        skip("the fieldstore-pygribjump package is not installed (scripts/python-install)")
    if not pygribjump.library_version().startswith("fieldstore"):
        skip(f"the `pygribjump` installed here is not fieldstore's ({pygribjump.__file__})")
    import fieldstore

    if not hasattr(fieldstore.FDB, "extract"):
        if os.environ.get("FIELDSTORE_GRIBJUMP_DECODE_FALLBACK", "") in ("", "0"):
            pytest.skip("fieldstore's extract is not built yet (no FDB.extract in this fieldstore build); "
                        "FIELDSTORE_GRIBJUMP_DECODE_FALLBACK=1 runs these tests through whole-field decoding")
    return pygribjump


class Data:
    """The data set, archived into FDB5 (reference) and into a fieldstore toc store (ours)."""

    def __init__(self, base: pathlib.Path):
        self.base = base
        self.coarse = gjdata.make_messages(1.0)
        # 0.1° (6,483,600 points): simple and CCSDS, another date.
        self.fine = gjdata.make_messages(0.1, params=[167, 165], steps=[0, 6], date="20240102")
        self.messages = self.coarse + self.fine
        self.grib = base / "data.grib"
        self.grib.write_bytes(b"".join(m for _, m in self.messages))
        self.offsets = gjdata.offsets(self.messages)
        self.hash = {1.0: gjdata.md5_grid_section(self.coarse[0][1]),
                     0.1: gjdata.md5_grid_section(self.fine[0][1])}
        self.fdb5_home = gjdata.fdb5_home(str(base))
        self.gj_config = base / "gribjump.yaml"
        self.gj_config.write_text('plugin:\n  select: "expver=(xxxx)"\n')
        schema = pathlib.Path(self.fdb5_home) / "etc" / "fdb" / "schema"
        root = base / "fieldstore-root"
        root.mkdir()
        self.fs_config = {"type": "local", "engine": "toc", "schema": str(schema),
                          "spaces": [{"roots": [{"path": str(root)}]}]}
        self.fs_config_file = base / "fieldstore.yaml"
        self.fs_config_file.write_text(json.dumps(self.fs_config))  # JSON is YAML

    def reference_env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FDB", "GRIBJUMP"))}
        env.update(FDB_HOME=self.fdb5_home, GRIBJUMP_CONFIG_FILE=str(self.gj_config))
        return env

    def ours_env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FDB", "GRIBJUMP"))}
        env.update(FDB_CONFIG_FILE=str(self.fs_config_file), GRIBJUMP_CONFIG_FILE=str(self.gj_config))
        return env


def run(python, env, *args, timeout=600):
    """reference.py ARGS under ``python``; its output file's JSON when it names one."""
    proc = subprocess.run([python, str(HERE / "reference.py"), *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    out = pathlib.Path(args[-1]) if args[0] != "archive" else None
    if proc.returncode != 0 or (out is not None and not out.exists()):
        raise AssertionError(f"{python} reference.py {args[0]} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(out.read_text()) if out is not None else None


@pytest.fixture(scope="session")
def data(tmp_path_factory, reference_python, ours):
    base = tmp_path_factory.mktemp("gribjump")
    d = Data(base)
    # FDB5 with GribJump's plugin (the writer sets FDB_ENABLE_GRIBJUMP).
    run(reference_python, dict(d.reference_env(), FDB_ENABLE_GRIBJUMP="1"), "archive", d.grib)
    assert list(pathlib.Path(base / "fdb5-root").glob("*/*.gribjump")), "the GribJump plugin wrote no index"
    import fieldstore

    fdb = fieldstore.FDB(d.fs_config)
    fdb.archive(d.grib.read_bytes())
    fdb.flush()
    return d


@pytest.fixture
def reference(data, reference_python, tmp_path):
    """``reference(cmd, spec)``: reference.py CMD run with ECMWF's stack on the FDB5 copy."""

    def call(cmd, spec, **env):
        spec_file = tmp_path / f"{cmd}-spec.json"
        spec_file.write_text(json.dumps(spec))
        return run(reference_python, dict(data.reference_env(), **env), cmd, spec_file, tmp_path / f"{cmd}-ref.json")

    return call


@pytest.fixture
def ours_subprocess(data, tmp_path):
    """``ours_subprocess(cmd, spec)``: reference.py CMD run with this Python (fieldstore's
    `pygribjump`) on the fieldstore copy: Polytope and earthkit open `pygribjump.GribJump()`
    from the environment, as they would for a user."""

    def call(cmd, spec, **env):
        spec_file = tmp_path / f"{cmd}-spec-ours.json"
        spec_file.write_text(json.dumps(spec))
        return run(sys.executable, dict(data.ours_env(), **env), cmd, spec_file, tmp_path / f"{cmd}-ours.json")

    return call
