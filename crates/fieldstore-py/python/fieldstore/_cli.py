"""The `fieldstore` command when this package was built from its source distribution.

The wheels scripts/build-wheels makes carry the command as a program of its own (it starts in a
few milliseconds); a build from source (`pip install fieldstore-<v>.tar.gz`) has only the
extension, so its `fieldstore` command runs the same code inside it: same subcommands, same
output and exit status, the FDB5 tool names included (`fieldstore install-fdb-tools`).
"""

from __future__ import annotations

import os
import signal
import sys


def _installed_program():
    """The wheel's `fieldstore` program (not a launcher script) beside this environment's
    interpreter, if there is one."""
    import sysconfig

    for scripts in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        path = os.path.join(scripts or "", "fieldstore")
        try:
            with open(path, "rb") as f:
                if f.read(4) == b"\x7fELF" and os.access(path, os.X_OK):
                    return path
        except OSError:
            continue
    return None


def main() -> None:
    from . import _native

    run = getattr(_native, "_run_cli", None)
    if run is None:
        # A wheel's command is a program in the environment's scripts directory: `python -m
        # fieldstore` runs that.
        program = _installed_program()
        if program is not None:
            sys.stdout.flush()
            sys.stderr.flush()
            os.execv(program, [program] + sys.argv[1:])
        sys.stderr.write(
            "fieldstore: error: this build of the fieldstore package has no command in it (its "
            "extension was built without the `cli` feature, as scripts/python-install does); "
            "install a wheel scripts/build-wheels made, build from the sdist with the default "
            "features, or run the workspace's target/release/fieldstore\n"
        )
        sys.exit(2)
    argv = list(sys.argv) or ["fieldstore"]
    # What re-runs this command (hammer's workers; install-fdb-tools links to it): the script
    # pip made, or, under `python -m fieldstore`, this interpreter and module.
    if argv[0].endswith(".py") or not os.path.isfile(argv[0]):
        program = [sys.executable, "-m", "fieldstore"]
        argv[0] = "fieldstore"
    else:
        program = [os.path.abspath(argv[0])]
    # Interrupted as a program is: Python's own handler would only note a Ctrl-C for Python code
    # that never runs while the command does (`fieldstore server` installs its own).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.stdout.flush()
    sys.stderr.flush()
    code = run([os.fsencode(a) for a in argv], [os.fsencode(a) for a in program])
    sys.exit(code)


if __name__ == "__main__":
    main()
