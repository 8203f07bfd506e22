"""``multio.MultioPlan``: sets a plan in the environment for ``Multio()`` to find, as pymultio's.

A dict (or a pydantic plan model with ``model_dump``), YAML or JSON text go to ``MULTIO_PLANS``
as JSON; a path to a file goes to ``MULTIO_SERVER_CONFIG_FILE``, so ``{~}`` in the plan is the
file's directory (pymultio parses the file and loses its directory). The variables are restored
on exit.
"""

from __future__ import annotations

import json
import os
from contextlib import ContextDecorator

import yaml


class MultioPlan(ContextDecorator):
    def __init__(self, plan):
        self._vars = {}
        if isinstance(plan, os.PathLike) or (isinstance(plan, str) and os.path.isfile(plan)):
            self._vars["MULTIO_SERVER_CONFIG_FILE"] = os.fspath(plan)
            return
        if hasattr(plan, "model_dump"):
            plan = plan.model_dump(by_alias=True, exclude_none=True)
        if isinstance(plan, str):
            try:
                plan = yaml.safe_load(plan)
            except yaml.YAMLError as e:
                raise ValueError(f"Invalid plan, could not parse it: {e}") from e
        if not isinstance(plan, dict):
            raise ValueError(f"Invalid plan: {type(plan).__name__}, expected a dict, text or a file")
        self._vars["MULTIO_PLANS"] = json.dumps(plan)

    def __enter__(self):
        # MULTIO_SERVER_CONFIG_FILE wins over MULTIO_PLANS in MultIO's look-up: both are set or
        # cleared so that the plan given here is the one found.
        self._prior = {k: os.environ.get(k) for k in ("MULTIO_SERVER_CONFIG_FILE", "MULTIO_PLANS")}
        for k in self._prior:
            os.environ.pop(k, None)
        os.environ.update(self._vars)
        return self

    def __exit__(self, *exc):
        for k, v in self._prior.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        return False
