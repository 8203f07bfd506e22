"""Result elements of pyfdb 5.2x, built from fieldstore's typed results."""

import logging
from collections.abc import Collection, ItemsView, KeysView, Mapping, ValuesView
from enum import IntEnum, auto

from pyfdb._errors import translated
from pyfdb.pyfdb_type import URI, ControlIdentifier, DataHandle, FileSliceReader, UserInputMapper

logger = logging.getLogger(__name__)

_NO_LOCATION = "Asking for %s on list element without location. Did you specify `level=3` in a list call?"


def _sorted_key(key):
    # pyfdb hands keys out sorted by keyword and leaves out unset optional keywords.
    return {k: str(v) for k, v in sorted(dict(key).items()) if v is not None and str(v) != ""}


def _braced(key):
    return "{" + ",".join(f"{k}={v}" for k, v in dict(key).items()) + "}"


class ListElement:
    """One entry of a listing: a field (level 3), an index (level 2) or a database (level 1)."""

    def __init__(self, list_element, fdb=None, *, _internal=False):
        if not _internal:
            raise TypeError("Creating a ListElement from user code is not supported.")
        self._element = list_element
        self._fdb = fdb

    def has_location(self):
        return getattr(self._element, "offset", None) is not None

    def offset(self):
        if self.has_location():
            return int(self._element.offset)
        logger.info(_NO_LOCATION, "offset")
        return None

    def length(self):
        if self.has_location():
            return int(self._element.length)
        logger.info(_NO_LOCATION, "length")
        return None

    def combined_key(self):
        """All keywords of the element's levels, sorted by keyword."""
        return _sorted_key(self._element.key)

    def keys(self):
        """The keys of the three schema levels (empty dicts below the level listed)."""
        split = [_sorted_key(k) for k in self._element.split_keys]
        while len(split) < 3:
            split.append({})
        return split

    @property
    def data_handle(self):
        """A handle on this one field's bytes (level 3 only)."""
        if not self.has_location():
            logger.info(_NO_LOCATION, "data handle")
            return None
        path = getattr(self._element, "path", None)
        if path:
            reader = FileSliceReader(path, int(self._element.offset), int(self._element.length))
            return DataHandle(reader, _internal=True)
        if self._fdb is None:
            return None
        with translated():
            reader = self._fdb.retrieve(dict(self._element.key))
        return DataHandle(reader, _internal=True)

    @property
    def uri(self):
        """Where the field's bytes are: a file path for local stores."""
        if not self.has_location():
            logger.info(_NO_LOCATION, "uri")
            return None
        path = getattr(self._element, "path", None)
        return URI(path if path else self._element.uri)

    def __repr__(self):
        text = "".join(_braced(k) for k in self._element.split_keys)
        if self.has_location():
            e = self._element
            where = getattr(e, "path", None) or e.uri
            text += (
                f",TocFieldLocation[uri=URI[scheme=file,name={where}],offset={e.offset},"
                f"length={e.length},remapKey={{}}],length={e.length},timestamp={e.timestamp}"
            )
        else:
            text += ",length=0,timestamp=0"
        return text

    def __str__(self):
        return self.__repr__()


class WipeElementType(IntEnum):
    """What a line of a wipe report is about."""

    ERROR = 0
    CATALOGUE_INFO = auto()
    CATALOGUE = auto()
    CATALOGUE_INDEX = auto()
    CATALOGUE_SAFE = auto()
    CATALOGUE_CONTROL = auto()
    STORE = auto()
    STORE_AUX = auto()
    STORE_SAFE = auto()
    UNKNOWN = auto()

    def __repr__(self):
        return self.name

    def __str__(self):
        return self.__repr__()


_WIPE_TITLES = {
    WipeElementType.CATALOGUE: "Catalogue URIs to delete:",
    WipeElementType.CATALOGUE_INDEX: "Index URIs to delete:",
    WipeElementType.CATALOGUE_CONTROL: "Control URIs to delete:",
    WipeElementType.STORE: "Data URIs to delete:",
    WipeElementType.UNKNOWN: "Other URIs to delete:",
}


def _wipe_type(path):
    name = str(path).rstrip("/").rsplit("/", 1)[-1]
    if name in ("toc", "schema") or name.startswith("toc."):
        return WipeElementType.CATALOGUE
    if name.endswith(".index"):
        return WipeElementType.CATALOGUE_INDEX
    if name.endswith(".lock"):
        return WipeElementType.CATALOGUE_CONTROL
    if name.endswith(".data"):
        return WipeElementType.STORE
    return WipeElementType.UNKNOWN


class WipeElement:
    """One part of a wipe report: the database wiped, or one kind of file removed."""

    def __init__(self, wipe_element, *, _internal=False):
        if not _internal:
            raise TypeError("Creating a WipeElement from user code is not supported.")
        self._type, self._msg, self._uris = wipe_element

    def type(self):
        return self._type

    def msg(self):
        return self._msg

    def uris(self):
        return [URI(u) for u in self._uris]

    def __repr__(self):
        if not self._uris:
            return self._msg
        return self._msg + "\n" + "".join(f"    {u}\n" for u in self._uris)


def wipe_elements(element):
    """The pyfdb-style report lines of one fieldstore wipe result."""
    db = _braced(getattr(element, "db", {}))
    yield WipeElement(
        (WipeElementType.CATALOGUE_INFO, f"[Database: {db}, location: {getattr(element, 'location', '')}]", []),
        _internal=True,
    )
    groups = {}
    for path in getattr(element, "removed", []) or []:
        groups.setdefault(_wipe_type(path), []).append(str(path))
    for kind in sorted(groups):
        yield WipeElement((kind, _WIPE_TITLES[kind], groups[kind]), _internal=True)


def _control_key(element):
    return {k: [str(v)] for k, v in sorted(dict(getattr(element, "db", {})).items())}


def _control_identifiers(element):
    out = []
    for name in getattr(element, "locked", []) or []:
        member = ControlIdentifier.__members__.get(str(name).upper())
        if member is not None:
            out.append(member)
    return sorted(out)


class _ControlLike:
    _name = "ControlElement"

    def __init__(self, control_element, *, _internal=False):
        if not _internal:
            raise TypeError(f"Creating a {self._name} from user code is not supported.")
        self.element = control_element

    def __eq__(self, other):
        if isinstance(other, _ControlLike):
            return (
                self.location() == other.location()
                and self.controlIdentifiers() == other.controlIdentifiers()
                and self.key() == other.key()
            )
        return False

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = None

    def location(self):
        return URI(getattr(self.element, "location", ""))

    def controlIdentifiers(self):
        """The functions locked on this database."""
        return _control_identifiers(self.element)

    def key(self):
        """The database key, ``{keyword: [value]}`` sorted by keyword."""
        return _control_key(self.element)

    def __repr__(self):
        return (
            f"{self._name}(control_identifiers={self.controlIdentifiers()}, key={self.key()}, "
            f"location={self.location()})"
        )


class StatusElement(_ControlLike):
    """The locks of one database."""

    _name = "StatusElement"


class ControlElement(_ControlLike):
    """The locks of one database after a control call."""

    _name = "ControlElement"


class PurgeElement:
    """What purging one database removed (or would remove)."""

    def __init__(self, purge_element, *, _internal=False):
        if not _internal:
            raise TypeError("Creating a PurgeElement from user code is not supported.")
        self.element = purge_element

    def __repr__(self):
        return str(self.element)


def _num(n):
    return f"{int(n):,}"


class StatsElement:
    """The statistics of one database, as the text blocks pyfdb gives."""

    def __init__(self, stats_element, *, _internal=False):
        if not _internal:
            raise TypeError("Creating a StatsElement from user code is not supported.")
        self.element = stats_element

    def _get(self, name):
        return int(getattr(self.element, name, 0) or 0)

    def index_statistics(self):
        fields, masked = self._get("fields"), self._get("masked")
        size, masked_size = self._get("field_bytes"), self._get("masked_bytes")
        lines = [
            ("Fields", _num(fields + masked)),
            ("Size of fields", _num(size + masked_size)),
            ("Duplicated fields", _num(masked)),
            ("Size of duplicates", _num(masked_size)),
            ("Reacheable fields", _num(fields)),
            ("Reachable size", _num(size)),
        ]
        return "".join(f"{k:<32}: {v}\n" for k, v in lines)

    def db_statistics(self):
        lines = [
            ("Databases", "1"),
            ("TOC records", _num(self._get("journal_records"))),
            ("Owned data files", _num(self._get("data_files"))),
            ("Size of owned data files", _num(self._get("data_bytes"))),
            ("Index files", _num(self._get("index_files"))),
        ]
        return "".join(f"{k:<32}: {v}\n" for k, v in lines)

    def __repr__(self):
        return "Index Statistics: \n" + self.index_statistics() + "\nDB Statistics: \n" + self.db_statistics()


class IndexAxis(Mapping):
    """Read-only mapping of keyword -> values present (the answer of ``FDB.axes``)."""

    def __init__(self, index_axis):
        if isinstance(index_axis, IndexAxis):
            self._axes = dict(index_axis._axes)
        elif isinstance(index_axis, Mapping):
            internal = UserInputMapper.map_selection_to_internal(index_axis)
            self._axes = {k: list(v) for k, v in internal.items()}
        else:
            raise TypeError(
                f"IndexAxis: Unknown type {type(index_axis)} for creating IndexAxis. Only `IndexAxis` or "
                f"`dict[str, Collection[str]]` are allowed."
            )

    def __repr__(self):
        inner = ",".join(f"{k}=({','.join(v)})" for k, v in sorted(self._axes.items()))
        return f"IndexAxis[axis={{{inner}}}]"

    def __getitem__(self, key):
        return self._axes[key]

    def __setitem__(self, key, value):
        raise TypeError("This mapping is read-only")

    def __delitem__(self, key):
        raise TypeError("This mapping is read-only")

    def clear(self):
        raise TypeError("This mapping is read-only")

    def __len__(self):
        return len(self._axes)

    def __iter__(self):
        return iter(sorted(self._axes))

    def __contains__(self, item):
        return item in self._axes

    def __eq__(self, other):
        if not isinstance(other, Mapping):
            return False
        normal = {}
        for k, v in other.items():
            if isinstance(v, str):
                normal[k] = [v]
            elif not isinstance(v, Collection):
                normal[k] = [str(v)]
            else:
                normal[k] = list(v)
        return {k: list(v) for k, v in self.items()} == normal

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = None

    def has_key(self, k):
        return k in self._axes

    def keys(self):
        return KeysView(self)

    def values(self):
        return ValuesView(self)

    def items(self):
        return ItemsView(self)
