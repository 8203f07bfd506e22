"""FDB(config): dict, YAML text, path, discovery; invalid configs raise ConfigError."""

import os
import pathlib

import pytest

import fieldstore


def test_dict_config_opens_and_is_shown(config):
    fdb = fieldstore.FDB(config)
    assert fdb.name == "local"
    assert fdb.config == config
    assert "local" in repr(fdb)


def test_yaml_text_path_and_pathlike(root, tmp_path, sample_fields):
    text = f"type: local\nengine: toc\nspaces:\n  - roots:\n      - path: {root}\n"
    path = tmp_path / "c.yaml"
    path.write_text(text)
    a = fieldstore.FDB(text)
    a.archive(sample_fields[0][1])
    a.flush()
    for cfg in (str(path), path, pathlib.PurePath(path)):
        fdb = fieldstore.FDB(cfg)
        assert len(list(fdb.list())) == 1
        assert fdb.config["spaces"][0]["roots"][0]["path"] == str(root)


def test_discovery_uses_the_environment(config_path, root, sample_fields):
    fdb = fieldstore.FDB()
    fdb.archive(sample_fields[0][1])
    fdb.flush()
    assert fdb.config["type"] == "local"
    assert any(root.iterdir())


def test_discovery_without_any_config_uses_the_embedded_default(tmp_path):
    fdb = fieldstore.FDB()
    roots = fdb.config["spaces"][0]["roots"]
    assert roots[0]["path"] == os.path.join(os.environ["XDG_DATA_HOME"], "fieldstore")


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "nonsense"},
        {"type": "local", "engine": "toc", "spaces": "not a list"},
        "type: [unclosed\n",
    ],
)
def test_invalid_config_raises_config_error(bad):
    with pytest.raises(fieldstore.ConfigError) as e:
        fieldstore.FDB(bad)
    assert isinstance(e.value, ValueError)
    assert e.value.kind == "config"
    assert e.value.message == str(e.value)


def test_missing_config_file_is_a_config_error(tmp_path):
    with pytest.raises(fieldstore.ConfigError, match="missing.yaml"):
        fieldstore.FDB(tmp_path / "missing.yaml")


@pytest.mark.parametrize("bad", [42, 3.5, [1, 2], b"type: local"])
def test_wrong_config_type_is_a_type_error(bad):
    with pytest.raises(TypeError):
        fieldstore.FDB(bad)
