"""Fixtures for the xarray engine tests (``config`` comes from python/tests/conftest.py)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

pytest.importorskip("eccodes")

import gribmaker  # noqa: E402

pytest.importorskip("fieldstore")

from storetools import archive  # noqa: E402


@pytest.fixture
def ensemble_store(config):
    """6 members x 3 steps x 2 levels x 2 params on a regular 15-degree grid."""
    return config, archive(config, gribmaker.ensemble(members=6))
