"""`python -m fieldstore ARGS`: the `fieldstore` command (see `_cli`)."""

from fieldstore._cli import main

main()
