"""``pyfdb.FDB``: pyfdb 5.2x's handle, on top of ``fieldstore.FDB``."""

import logging
import os
from collections.abc import Mapping
from pathlib import Path

import fieldstore
import yaml

from pyfdb._errors import error, translated
from pyfdb.pyfdb_iterator import (
    ControlElement,
    IndexAxis,
    ListElement,
    PurgeElement,
    StatsElement,
    StatusElement,
    wipe_elements,
)
from pyfdb.pyfdb_type import (
    ControlAction,
    ControlIdentifier,
    DataHandle,
    UserInputMapper,
    selection_to_request,
)

_ACTIONS = {ControlAction.NONE: "status", ControlAction.DISABLE: "lock", ControlAction.ENABLE: "unlock"}


def _load_config(config):
    """``(what fieldstore is given, the config as a dict)`` for pyfdb's config argument."""
    if config is None:
        return None, None
    if isinstance(config, (Path, os.PathLike)):
        path = os.fspath(config)
        with open(path, "rb") as f:
            return path, _as_dict(yaml.safe_load(f.read()), path)
    if isinstance(config, Mapping):
        as_dict = dict(config)
        return as_dict, as_dict
    if isinstance(config, str):
        parsed = yaml.safe_load(config)
        # pyfdb reads a str as YAML only; a bare path is accepted here too.
        if isinstance(parsed, str) and "\n" not in config and os.path.isfile(config):
            return _load_config(Path(config))
        return _as_dict(parsed, "the config text"), _as_dict(parsed, "the config text")
    raise ValueError("Config: Unknown config type, must be str, dict or Path.")


def _as_dict(parsed, where):
    if parsed is None:
        return {}
    if not isinstance(parsed, dict):
        raise error("config", f"{where} is not a YAML mapping (got {type(parsed).__name__})")
    return parsed


def _control_names(identifiers):
    names = []
    for ident in identifiers:
        ident = ControlIdentifier(ident)
        for member in ident._members():
            if member is ControlIdentifier.UNIQUEROOT:
                raise error("unsupported", "ControlIdentifier.UNIQUEROOT cannot be locked or unlocked in fieldstore")
            if member.name.lower() not in names:
                names.append(member.name.lower())
    return names


class FDB:
    """A field store opened from a pyfdb-style config (fieldstore underneath).

    ``config`` is a dict, YAML text, a ``Path`` (or a path string) or None (the usual discovery:
    ``FDB_CONFIG_FILE``, ``FDB_HOME``...). ``user_config`` is accepted and reported by ``config()``.
    One handle may be shared between threads.
    """

    def __init__(self, config=None, user_config=None):
        self.logger = logging.getLogger(__name__ + ".FDB")
        given, self._system_config = _load_config(config)
        _, user = _load_config(user_config)
        self._user_config = dict(user or {})
        with translated():
            self.FDB = fieldstore.FDB(given)
        self._dirty = False

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_value, exc_traceback):
        # pyfdb flushes on every exit, an exception propagating or not.
        self.flush()

    def archive(self, data, identifier=None):
        """Archive GRIB bytes (one or many messages), or any bytes under ``identifier``.

        As pyfdb does, the bytes are stored under the identifier given, without checking it
        against the keys a GRIB message carries (``check_grib=False``)."""
        with translated():
            if identifier is None:
                self.FDB.archive(data)
            else:
                key = dict(UserInputMapper.map_identifier_to_internal(identifier))
                self.FDB.archive(data, key=key, check_grib=False)
        self._dirty = True

    def flush(self):
        """Make everything archived so far visible and durable."""
        with translated():
            self.FDB.flush()
        self._dirty = False

    def retrieve(self, mars_selection):
        """A data handle on the fields ``mars_selection`` names (empty when none is stored)."""
        if mars_selection is None or len(mars_selection) == 0:
            raise TypeError("FDB.retrieve: Wildcard selection aren't support for retrieving.")
        request = selection_to_request(mars_selection)
        try:
            with translated():
                reader = self.FDB.retrieve(request)
        except KeyError:
            # Nothing stored for the request: pyfdb gives an empty handle, not an error.
            reader = None
        return DataHandle(reader, _internal=True)

    def list(self, mars_selection=None, include_masked=False, level=3):
        """The fields (level 3), indexes (2) or databases (1) matching the selection."""
        request = selection_to_request(mars_selection)
        with translated():
            iterator = self.FDB.list(request, keys=True, level=level, include_masked=include_masked)
        fdb = self.FDB
        with translated():
            for element in iterator:
                yield ListElement(element, fdb, _internal=True)

    def inspect(self, mars_selection):
        """The fields a full request names, as list elements."""
        request = selection_to_request(mars_selection)
        with translated():
            elements = list(self.FDB.list(request, keys=True, level=3))
        for element in elements:
            yield ListElement(element, self.FDB, _internal=True)

    def status(self, mars_selection):
        """The locks of every database matching the selection."""
        request = selection_to_request(mars_selection)
        with translated():
            elements = self.FDB.control(request, "status", [])
        return iter([StatusElement(e, _internal=True) for e in elements])

    def wipe(self, mars_selection, doit=False, porcelain=False, unsafe_wipe_all=False):
        """Delete whole databases (a dry run unless ``doit``); done when called."""
        request = selection_to_request(mars_selection)
        with translated():
            elements = self.FDB.wipe(request, doit=doit)
        return iter([w for e in elements for w in wipe_elements(e)])

    def purge(self, mars_selection, doit=False, porcelain=False):
        """Remove replaced (masked) fields (a dry run unless ``doit``); done when called."""
        request = selection_to_request(mars_selection)
        with translated():
            elements = self.FDB.purge(request, doit=doit)
        return iter([PurgeElement(e, _internal=True) for e in elements])

    def stats(self, mars_selection):
        """Statistics of every database matching the selection."""
        request = selection_to_request(mars_selection)
        with translated():
            elements = self.FDB.stats(request)
        return iter([StatsElement(e, _internal=True) for e in elements])

    def control(self, mars_selection, control_action, control_identifiers):
        """Lock (``DISABLE``) or unlock (``ENABLE``) functions of databases; done when called."""
        request = selection_to_request(mars_selection)
        action = _ACTIONS[ControlAction(control_action)]
        names = _control_names(control_identifiers)
        with translated():
            elements = self.FDB.control(request, action, names)
        return iter([ControlElement(e, _internal=True) for e in elements])

    def axes(self, mars_selection=None, level=3):
        """Keyword -> values present, for the keywords of schema levels up to ``level``, sorted
        as strings as pyfdb sorts them (step 0, 12, 6). As pyfdb: every index whose own keys
        the selection matches counts whole, and ``''`` stands for an optional keyword some
        fields lack."""
        request = selection_to_request(mars_selection)
        with translated():
            axes = self.FDB.axes(request, level=level, as_fdb5=True)
        return IndexAxis({k: sorted(v) for k, v in axes.items()})

    def enabled(self, control_identifier):
        """Whether the config allows a function (``writable``/``visitable``, as FDB5 reads them)."""
        cfg = self._config_dict()
        ident = ControlIdentifier(control_identifier)
        if ident in (ControlIdentifier.ARCHIVE, ControlIdentifier.WIPE):
            return bool(cfg.get("writable", True))
        if ident in (ControlIdentifier.LIST, ControlIdentifier.RETRIEVE):
            return bool(cfg.get("visitable", True))
        return True

    def dirty(self):
        """True when something was archived since the last flush."""
        return self._dirty

    def _config_dict(self):
        if self._system_config is not None:
            return self._system_config
        try:
            return dict(self.FDB.config or {})
        except Exception:  # the config view is best effort; never fail a query on it
            return {}

    def config(self):
        """``(system config, user config)`` as dicts."""
        return dict(self._config_dict()), dict(self._user_config)

    def __repr__(self):
        return f"LocalFDB(fieldstore {getattr(self.FDB, 'name', '')})"
