"""The identity that created a database, through a real `fieldstore server --tokens`."""

import os
import pathlib
import subprocess

import pytest

import fieldstore
from testkeys import DB_REQUEST

REPO = pathlib.Path(__file__).resolve().parents[3]


def _binary():
    path = pathlib.Path(os.environ.get("FIELDSTORE_BIN", REPO / "target" / "release" / "fieldstore"))
    if not path.exists():
        pytest.fail(f"{path} is missing: build it (cargo build --release -p fieldstore-cli) "
                    "or set FIELDSTORE_BIN")
    return path


@pytest.fixture
def server(tmp_path, root):
    local = tmp_path / "local.yaml"
    local.write_text(f"type: local\nspaces: [{{roots: [{{path: {root}}}]}}]\n")
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(
        "identities:\n"
        "  - {name: ingest, token: ingest-secret-1, role: writer}\n"
        "  - {name: viewer, token: viewer-secret-2, role: reader}\n"
    )
    proc = subprocess.Popen(
        [str(_binary()), "--config", str(local), "server", "--listen", "127.0.0.1:0",
         "--tokens", str(tokens)],
        stdout=subprocess.PIPE, stderr=open(tmp_path / "server.log", "w"), text=True,
    )
    port = None
    for line in proc.stdout:
        if line.startswith("listening on "):
            port = int(line.rsplit(":", 1)[1])
            break
    if port is None:
        proc.kill()
        pytest.fail("server did not start: " + (tmp_path / "server.log").read_text())

    def client(token):
        return fieldstore.FDB({"type": "remote", "host": "127.0.0.1", "port": port,
                               "token": token})

    yield client
    proc.kill()
    proc.wait()


def test_where_stats_and_dump_name_the_creator(server, sample_fields):
    ingest, viewer = server("ingest-secret-1"), server("viewer-secret-2")
    ingest.archive(b"".join(data for _, data in sample_fields))
    ingest.flush()
    (w,) = viewer.where(DB_REQUEST)
    (s,) = viewer.stats(DB_REQUEST)
    (d,) = viewer.dump(DB_REQUEST)
    assert w.creator == s.creator == d.creator == "ingest"
    assert s.fields == len(sample_fields)
    with pytest.raises(fieldstore.PermissionDeniedError, match="identity 'viewer' may not archive"):
        viewer.archive(sample_fields[0][1])
        viewer.flush()


def test_a_database_made_locally_has_no_creator(store):
    (w,) = store.where(DB_REQUEST)
    (s,) = store.stats(DB_REQUEST)
    assert w.creator is None and s.creator is None
