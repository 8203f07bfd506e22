"""pyfdb's API and earthkit-data on a store in S3 (a real MinIO, started by scripts/minio): a
script written for FDB5 runs unchanged when its config says `engine: s3`.

Skipped when MinIO is not built (`scripts/minio install`); under CI=true that fails instead."""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

import pyfdb

from testkeys import BASE_KEY, DB_REQUEST

SCRIPT = pathlib.Path(__file__).resolve().parents[3] / "scripts" / "minio"


@pytest.fixture(scope="module")
def minio(tmp_path_factory):
    built = subprocess.run([str(SCRIPT), "path"], capture_output=True).returncode == 0
    if not built:
        if os.environ.get("CI") == "true":
            pytest.fail("MinIO is not built, and CI=true: run scripts/minio install")
        pytest.skip("MinIO is not built (scripts/minio install builds it)")
    d = tmp_path_factory.mktemp("minio")
    out = subprocess.run([str(SCRIPT), "start", str(d)], capture_output=True, text=True, check=True)
    env = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    yield env
    subprocess.run([str(SCRIPT), "stop", str(d)], check=False)


@pytest.fixture
def s3_config(minio, request):
    return {
        "type": "local",
        "engine": "s3",
        "store": "s3",
        "s3": {
            "endpoint": minio["endpoint"],
            "bucket": "pyfdb",
            "prefix": f"{request.node.name}/",
            "access_key_id": minio["access_key"],
            "secret_access_key": minio["secret_key"],
        },
    }


def test_archive_list_retrieve_on_s3(s3_config, sample_fields):
    fdb = pyfdb.FDB(s3_config)
    fdb.archive(b"".join(data for _, data in sample_fields))
    fdb.flush()
    # Another handle (as another process would be) sees the flushed fields.
    other = pyfdb.FDB(s3_config)
    listed = list(other.list(DB_REQUEST))
    assert len(listed) == len(sample_fields)
    key, data = sample_fields[0]
    handle = other.retrieve(key)
    handle.open()
    assert handle.read(-1) == data
    handle.close()


def test_earthkit_reads_fields_from_s3(s3_config, sample_fields):
    ekd = pytest.importorskip("earthkit.data")
    fdb = pyfdb.FDB(s3_config)
    fdb.archive(b"".join(data for _, data in sample_fields))
    fdb.flush()
    request = dict(BASE_KEY, step=["0", "6"], levelist="500", param=["130", "131"])
    fl = ekd.from_source("fdb", request, config=s3_config, stream=False).to_fieldlist()
    assert len(fl) == 4
    assert sorted(f.metadata("step") for f in fl) == [0, 0, 6, 6]
