"""FDB construction, config, context manager, dirty, enabled: pyfdb 5.2x usage."""

import pyfdb
import pytest
import yaml
from pyfdb import FDB, ControlIdentifier

USER_CONFIG = """
type: local
engine: toc
useSubToc: true
spaces:
- roots:
  - path: "/a/path/is/something"
"""


def test_version_and_names():
    assert pyfdb.__version__.startswith("5.")
    for name in [
        "FDB",
        "URI",
        "DataHandle",
        "ListElement",
        "WipeElement",
        "StatusElement",
        "ControlAction",
        "ControlIdentifier",
        "PurgeElement",
        "StatsElement",
        "ControlElement",
        "IndexAxis",
        "MarsSelection",
    ]:
        assert hasattr(pyfdb, name), name


def test_user_config_in_signature():
    # earthkit-data looks for this parameter to decide how to pass a user config
    import inspect

    assert "user_config" in inspect.signature(pyfdb.FDB.__init__).parameters


def test_config_forms_are_equal(read_only_fdb_setup):
    from_path = FDB(read_only_fdb_setup)
    from_text = FDB(read_only_fdb_setup.read_text())
    from_dict = FDB(yaml.safe_load(read_only_fdb_setup.read_bytes()))
    assert from_path.config() == from_text.config() == from_dict.config()
    sel = {"class": "ea", "date": "20200101"}
    counts = {len(list(f.list(sel))) for f in (from_path, from_text, from_dict)}
    assert counts == {24}


def test_config_wrong_type():
    with pytest.raises(ValueError, match="Config: Unknown config type, must be str, dict or Path"):
        FDB(0)


def test_invalid_config_raises_runtime_error(tmp_path):
    with pytest.raises(RuntimeError):
        FDB({"type": "bogus", "engine": "toc", "spaces": []})


def test_user_config_round_trip(read_only_fdb_setup):
    fdb = FDB(read_only_fdb_setup, USER_CONFIG)
    system_config, user_config = fdb.config()
    assert "db_store" in repr(system_config)
    assert user_config["useSubToc"] is True
    plain_system, plain_user = FDB(read_only_fdb_setup).config()
    assert plain_system == system_config
    assert plain_user == {}
    again = FDB(system_config, user_config)
    assert again.config() == (system_config, user_config)


def test_context_manager_flushes(empty_fdb_setup, grib_messages):
    data = grib_messages[(20200101, 1800, 167)]
    with FDB(empty_fdb_setup) as fdb:
        fdb.archive(data)
        assert fdb.dirty()
    assert len(list(FDB(empty_fdb_setup).list({"class": "ea"}))) == 1


def test_dirty(empty_fdb_setup, grib_messages):
    fdb = FDB(empty_fdb_setup)
    assert not fdb.dirty()
    fdb.archive(grib_messages[(20200101, 1800, 167)])
    assert fdb.dirty()
    fdb.flush()
    assert not fdb.dirty()


def test_enabled(empty_fdb_setup):
    config = yaml.safe_load(empty_fdb_setup.read_text())
    fdb = FDB(config)
    assert all(fdb.enabled(c) for c in ControlIdentifier)
    config["writable"] = False
    ro = FDB(config)
    assert ro.enabled(ControlIdentifier.LIST)
    assert ro.enabled(ControlIdentifier.RETRIEVE)
    assert not ro.enabled(ControlIdentifier.ARCHIVE)
    assert not ro.enabled(ControlIdentifier.WIPE)


def test_repr(empty_fdb_setup):
    assert repr(FDB(empty_fdb_setup))


def test_no_config_uses_fdb_home(read_only_fdb_setup, tmp_path, monkeypatch):
    # pyfdb's FDB() reads $FDB_HOME/etc/fdb/config.yaml, as earthkit-data expects
    home = tmp_path / "home"
    (home / "etc" / "fdb").mkdir(parents=True)
    (home / "etc" / "fdb" / "config.yaml").write_text(read_only_fdb_setup.read_text())
    for var in ("FDB_CONFIG_FILE", "FDB5_CONFIG_FILE", "FDB_CONFIG", "FDB5_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FDB_HOME", str(home))
    fdb = FDB()
    assert fdb
    assert len(list(fdb.list({"class": "ea", "date": "20200104"}))) == 24
    with FDB() as again:
        assert again.config()[0]["engine"] == "toc"
