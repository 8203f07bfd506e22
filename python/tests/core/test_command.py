"""`python -m fieldstore`: the `fieldstore` command from the package (fieldstore._cli).

A build from the sdist runs the command inside its extension; a wheel runs the program it
carries; a build without either (scripts/python-install's) says so and exits 2.
"""

import os
import subprocess
import sys

import fieldstore
from fieldstore import _cli, _native


def run(*args, **kw):
    return subprocess.run([sys.executable, "-m", "fieldstore", *args], capture_output=True,
                          text=True, timeout=60, **kw)


def test_python_m_fieldstore_is_the_command_or_says_why_not():
    out = run("--version")
    if hasattr(_native, "_run_cli") or _cli._installed_program() is not None:
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == f"fieldstore {fieldstore.__version__}", out.stdout
    else:
        assert out.returncode == 2, out
        assert "has no command in it" in out.stderr, out.stderr
        assert out.stdout == ""


def test_the_in_process_command_keeps_exit_status_and_output(tmp_path):
    if not hasattr(_native, "_run_cli"):
        import pytest

        pytest.skip("this build has no in-process command (built without the `cli` feature)")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"type: local\nengine: toc\nspaces:\n- roots:\n  - path: {tmp_path / 'root'}\n")
    env = dict(os.environ, FDB5_CONFIG_FILE=str(cfg))
    bad = run("list", "nonsense=1", env=env)
    assert bad.returncode == 1 and "unknown keyword" in bad.stderr, bad
    empty = run("list", "class=od", env=env)
    assert empty.returncode == 0, empty.stderr
