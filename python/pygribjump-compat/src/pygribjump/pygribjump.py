"""pygribjump 0.13's classes and functions, on fieldstore.

``GribJump().extract(...)`` asks the store named by the usual FDB configuration (FDB_CONFIG_FILE,
FDB_HOME, ... as the ``fieldstore`` command finds it) for ranges of grid points of each field
(``fieldstore.FDB.extract``): no GribJump index files, no plugin, nothing to scan. Results have
pygribjump's shape (``values``, ``masks``, ``values_flat``...), errors are ``GribJumpException``
with GribJump's messages where callers look for them (Polytope matches "Grid hash mismatch").

Differences from pygribjump are listed in docs/gribjump.md.
"""

from __future__ import annotations

import json
import os
import struct
import warnings
from getpass import getuser
from itertools import accumulate
from socket import gethostname
from typing import Any, Callable

import numpy as np

import fieldstore

from ._version import __version__

__all__ = [
    "GribJumpException",
    "ExtractionRequest",
    "PathExtractionRequest",
    "ExtractionIterator",
    "ExtractionIteratorFromPath",
    "ExtractionSingleIterator",
    "ExtractionResult",
    "GribJump",
    "rangestr_to_list",
    "list_to_rangestr",
    "dic_to_request",
    "multivalued_dic_to_request",
    "version",
    "library_version",
    "default_context",
    "merge_default_context",
]


class GribJumpException(RuntimeError):
    """What pygribjump raises when the library reports an error."""


def _error(function: str, message: str) -> GribJumpException:
    # pygribjump's wording: "Error in function 'gribjump_extract': <library message>".
    return GribJumpException(f"Error in function '{function}': {message}")


# -- requests ----------------------------------------------------------------------------------


def _check_ranges(ranges) -> tuple[list[tuple[int, int]], list[int]]:
    if ranges is None or len(ranges) == 0:
        raise ValueError(f"Must provide at least one range but found {ranges=}")
    out, shape = [], []
    for r in ranges:
        lo, hi = int(r[0]), int(r[1])
        if not lo < hi:
            raise ValueError(f"Found invalid range {tuple(r)}: Expected lo < hi for ranges [lo, hi).")
        out.append((lo, hi))
        shape.append(hi - lo)
    return out, shape


def _request_dict(req) -> dict[str, Any]:
    if isinstance(req, str):
        body = req.split(",", 1)[1] if req.lower().startswith("retrieve,") else req
        out = {}
        for part in body.split(","):
            if part.strip():
                k, _, v = part.partition("=")
                out[k.strip()] = v.strip()
        return out
    if not isinstance(req, dict):
        raise TypeError(f"a request is a dict of MARS keywords (or a MARS string), not {type(req).__name__}")
    return dict(req)


class ExtractionRequest:
    """One field (a MARS request of cardinality 1) and the half-open ranges ``[lo, hi)`` of grid
    points to extract from it, with the md5 of its grid section if it is to be checked."""

    def __init__(self, req: dict[str, str], ranges: list[tuple[int, int]], gridHash: str = None):
        self.__ranges, self.__shape = _check_ranges(ranges)
        self.__request = _request_dict(req)
        self.__hash = gridHash

    @classmethod
    def from_mask(cls, req: dict[str, str], mask: np.ndarray, gridHash: str = None):
        """A request for the points where a 1-d boolean mask is True."""
        m = np.asarray(mask, dtype=bool).ravel()
        if not m.any():
            raise ValueError("Mask must contain at least one True value")
        d = np.diff(np.concatenate(([False], m, [False])).astype(int))
        starts = np.where(d == 1)[0]
        ends = np.where(d == -1)[0]
        return cls(req, list(zip(starts, ends)), gridHash)

    @classmethod
    def from_indices(cls, req: dict[str, str], points: np.ndarray, gridHash: str = None):
        """A request with one single-point range per index."""
        return cls(req, [(p, p + 1) for p in points], gridHash)

    @property
    def shape(self) -> list[int]:
        return self.__shape

    @property
    def ranges(self) -> list[tuple[int, int]]:
        return self.__ranges

    @property
    def request(self) -> dict[str, Any]:
        """The MARS request (not in pygribjump, which keeps only its C copy)."""
        return self.__request

    @property
    def gridHash(self) -> str | None:
        return self.__hash

    @property
    def ctype(self):
        # pygribjump's handle on its C object; here the request itself.
        return self

    def indices(self) -> np.ndarray:
        """The indexes of the points the request extracts, in order."""
        total = sum(self.__shape)
        return np.fromiter((i for lo, hi in self.__ranges for i in range(lo, hi)), int, count=total)

    def __repr__(self):
        return f"ExtractionRequest({self.__request!r}, {self.__ranges!r}, gridHash={self.__hash!r})"


class PathExtractionRequest:
    """Ranges of the GRIB message at ``offset`` in the file ``path`` (scheme ``file``), with no
    store. ``host`` and ``port`` (GribJump's remote files) are accepted and must be empty/0."""

    def __init__(self, path: str, scheme: str, offset: int, host: str, port: int,
                 ranges: list[tuple[int, int]], gridHash: str = None):
        self.__ranges, self.__shape = _check_ranges(ranges)
        self.path = str(path)
        self.scheme = scheme
        self.offset = int(offset)
        self.host = host
        self.port = int(port)
        self.__hash = gridHash

    @property
    def shape(self) -> list[int]:
        return self.__shape

    @property
    def ranges(self) -> list[tuple[int, int]]:
        return self.__ranges

    @property
    def gridHash(self) -> str | None:
        return self.__hash

    @property
    def ctype(self):
        return self


# -- results -----------------------------------------------------------------------------------


def _mask_words(present: np.ndarray) -> np.ndarray:
    """GribJump's mask of one range: bit j of uint64 word k set when point k*64+j is present."""
    n = present.size
    words = (n + 63) // 64
    padded = np.zeros(words * 64, dtype=bool)
    padded[:n] = present
    return np.packbits(padded, bitorder="little").view("<u8").astype(np.uint64)


class ExtractionResult:
    """One field's extraction: per range asked for, the values (float64, NaN where the field has
    no value) and the mask words (uint64; bit j of word k set when point k*64+j is present)."""

    def __init__(self, values: list[np.ndarray], masks: list[np.ndarray], shape: list[int], key=None):
        self.__shape = list(shape)
        self.__mask_shape = [(size + 63) // 64 for size in self.__shape]
        flat = np.concatenate([np.asarray(v, dtype=np.float64) for v in values]) if values else np.empty(0)
        mflat = np.concatenate([np.asarray(m, dtype=np.uint64) for m in masks]) if masks else np.empty(0, np.uint64)
        self.__values_flat = flat
        self.__masks_flat = mflat
        self.__values = np.split(flat, list(accumulate(self.__shape))[:-1])
        self.__masks = np.split(mflat, list(accumulate(self.__mask_shape))[:-1])
        self.key = key
        """The field's full MARS key (dict), when it came from a store (not in pygribjump)."""

    @property
    def values(self) -> list[np.ndarray]:
        return self.__values

    @property
    def masks(self) -> list[np.ndarray]:
        return self.__masks

    @property
    def values_flat(self) -> np.ndarray:
        return self.__values_flat

    @property
    def masks_flat(self) -> np.ndarray:
        return self.__masks_flat

    def compute_bool_masks(self) -> list[np.ndarray]:
        """The masks as one boolean array per range (True = present)."""
        out = []
        for n, words in zip(self.__shape, self.__masks):
            bits = np.unpackbits(np.asarray(words, dtype="<u8").view(np.uint8), bitorder="little")
            out.append(bits[:n].astype(bool))
        return out

    def copy_values(self) -> list[np.ndarray]:
        return [v.copy() for v in self.values]

    def copy_masks(self) -> list[np.ndarray]:
        return [m.copy() for m in self.masks]

    def __repr__(self):
        return f"ExtractionResult(ranges={len(self.__shape)}, values={sum(self.__shape)}, key={self.key!r})"


class ExtractionIterator:
    """The results of one extract call, one per request (per field for ``extract_single``), in
    request order. Unlike pygribjump's it can be iterated more than once, and has ``len``."""

    def __init__(self, results: list[ExtractionResult]):
        self._results = list(results)

    def __iter__(self):
        return iter(self._results)

    def __len__(self):
        return len(self._results)

    def dump_legacy(self):
        """pygribjump's legacy nesting: [request][0][range] = (values, mask)."""
        return [[list(zip(r.copy_values(), r.copy_masks()))] for r in self]

    def dump_values(self) -> list[list[np.ndarray]]:
        return [r.copy_values() for r in self]


class ExtractionIteratorFromPath(ExtractionIterator):
    pass


class ExtractionSingleIterator(ExtractionIterator):
    pass


# -- configuration -----------------------------------------------------------------------------

_TRUE = {"1", "true", "yes", "on", "t", "y"}
_FALSE = {"0", "false", "no", "off", "f", "n", ""}


def _env_bool(name: str):
    v = os.environ.get(name)
    if v is None:
        return None
    s = v.strip().lower()
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    raise GribJumpException(f"Bad value: environment variable {name}={v!r} is not a boolean")


def _load_config(config) -> dict:
    """GribJump's configuration: the dict given, else $GRIBJUMP_CONFIG_FILE (YAML), else
    $GRIBJUMP_HOME/etc/gribjump/config.yaml if it exists, else empty."""
    if config is not None:
        return dict(config)
    path = os.environ.get("GRIBJUMP_CONFIG_FILE")
    if not path and os.environ.get("GRIBJUMP_HOME"):
        candidate = os.path.join(os.environ["GRIBJUMP_HOME"], "etc", "gribjump", "config.yaml")
        path = candidate if os.path.exists(candidate) else None
    if not path:
        return {}
    import yaml

    try:
        with open(path) as f:
            loaded = yaml.safe_load(f) or {}
    except OSError as exc:
        raise GribJumpException(f"Cannot open GribJump config file {path}: {exc}") from exc
    if not isinstance(loaded, dict):
        raise GribJumpException(f"GribJump config file {path} is not a mapping")
    return loaded


# -- reading messages (extract_from_paths, and the decode fallback) ----------------------------


def _message_length(head: bytes, where: str) -> int:
    if head[:4] != b"GRIB":
        raise GribJumpException(f"Bad value: no GRIB message at {where}")
    edition = head[7]
    if edition == 2:
        return struct.unpack(">Q", head[8:16])[0]
    if edition == 1:
        n = int.from_bytes(head[4:7], "big")
        if n & 0x800000:
            raise GribJumpException(f"Bad value: GRIB1 message larger than 8 MB at {where} is not supported")
        return n
    raise GribJumpException(f"Bad value: GRIB edition {edition} at {where}")


def _read_message(path: str, offset: int) -> bytes:
    where = f"{path} offset {offset}"
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            head = f.read(16)
            length = _message_length(head, where)
            f.seek(offset)
            data = f.read(length)
    except OSError as exc:
        raise GribJumpException(f"Cannot open {path}: {exc}") from exc
    if len(data) != length or data[-4:] != b"7777":
        raise GribJumpException(f"Bad value: truncated GRIB message at {where}")
    return data


def _decode_extract(message: bytes, ranges: list[tuple[int, int]]) -> tuple[list, list]:
    """Values and masks of ranges of one message by a full ecCodes decode."""
    values = fieldstore.Message(message).values
    out_v, out_m = [], []
    for lo, hi in ranges:
        if hi > values.size:
            raise GribJumpException(
                f"Bad value: range [{lo}, {hi}) is beyond the field's {values.size} grid points")
        v = np.array(values[lo:hi], dtype=np.float64)
        out_v.append(v)
        out_m.append(_mask_words(~np.isnan(v)))
    return out_v, out_m


def _native_message_extract():
    """The extension's extraction of one message in memory, if this build has one."""
    from fieldstore import _native

    return getattr(_native, "extract_message", None)


# -- the client ----------------------------------------------------------------------------------


class GribJump:
    """pygribjump's client, on a fieldstore store.

    ``GribJump()`` opens the store the environment names (as ``fieldstore.FDB()`` does: FDB_CONFIG_FILE,
    FDB_HOME...) and reads GribJump's own configuration from GRIBJUMP_CONFIG_FILE (only
    ``ignoreGridHash`` matters here; GRIBJUMP_IGNORE_GRID overrides it, as in GribJump).
    Extensions: ``config=`` a GribJump configuration dict instead of the file; ``fdb=`` a
    ``fieldstore.FDB`` or anything ``fieldstore.FDB(...)`` takes (a config dict, YAML, path).
    """

    def __init__(self, config: dict | None = None, *, fdb=None):
        self._config = _load_config(config)
        ignore = _env_bool("GRIBJUMP_IGNORE_GRID")
        if ignore is None:
            ignore = bool(self._config.get("ignoreGridHash", False))
        self._ignore_grid = ignore
        self._fdb_arg = fdb
        self._fdb = fdb if isinstance(fdb, fieldstore.FDB) else None

    # The store is opened on first use: extract_from_paths needs none.
    @property
    def fdb(self) -> "fieldstore.FDB":
        if self._fdb is None:
            try:
                self._fdb = fieldstore.FDB(self._fdb_arg) if self._fdb_arg is not None else fieldstore.FDB()
            except fieldstore.Error as exc:
                raise _error("gribjump_new_handle", str(exc)) from exc
        return self._fdb

    @property
    def ignore_grid_hash(self) -> bool:
        return self._ignore_grid

    @property
    def ctype(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    # -- extraction ----------------------------------------------------------------------------

    def extract(self, polyrequest, ctx=None) -> ExtractionIterator:
        """Extracts a list of requests, each naming one field: ``ExtractionRequest`` objects, or
        ``(request, ranges)`` / ``(request, ranges, gridHash)`` tuples. One result per request,
        in order. Fails (GribJumpException, "DataNotFound") if any field is missing."""
        merge_default_context(ctx, "pygribjump_extract")
        if not isinstance(polyrequest, list):
            raise ValueError("Polyrequest should be a list of tuples or ExtractionRequest objects")
        if len(polyrequest) == 0:
            raise ValueError("Polyrequest should not be empty")
        if isinstance(polyrequest[0], tuple):
            requests = self._unpack_polyrequest(polyrequest)
        elif isinstance(polyrequest[0], ExtractionRequest):
            requests = polyrequest
        else:
            raise ValueError("Polyrequest should be a list of tuples or ExtractionRequest objects")
        return ExtractionIterator(self._extract_requests(requests, "gribjump_extract"))

    def extract_single(self, request: dict, ranges: list[tuple[int, int]], gridHash: str = None,
                       ctx=None) -> ExtractionSingleIterator:
        """Extracts the same ranges from every field one request (of any cardinality) names:
        one result per field, in request order."""
        merge_default_context(ctx, "pygribjump_extract_single")
        ranges, shape = _check_ranges(ranges)
        req = _request_dict(request)
        found = [e for e in self._fdb_extract(req, ranges, "gribjump_extract_single") if self._exists(e)]
        expected = _cardinality(req)
        if expected is not None and len(found) != expected:
            raise _error("gribjump_extract_single", _not_found(len(found), expected, [req]))
        if not found:
            raise _error("gribjump_extract_single", _not_found(0, 1, [req]))
        out = []
        for i, e in enumerate(found):
            self._check_hash(e, req, gridHash, i, "gribjump_extract_single")
            out.append(ExtractionResult(e.values, e.masks, shape, e.key))
        return ExtractionSingleIterator(out)

    def extract_from_paths(self, requests: list[PathExtractionRequest], ctx=None) -> ExtractionIterator:
        """Extracts ranges of GRIB messages in plain files, by path and offset (no store)."""
        merge_default_context(ctx, "pygribjump_extract")
        if not isinstance(requests, list) or not requests:
            raise ValueError("extract_from_paths needs a non-empty list of PathExtractionRequest")
        native = _native_message_extract()
        out = []
        for i, r in enumerate(requests):
            if r.scheme not in ("file", "") or (r.host not in ("", None)) or r.port:
                raise _error("gribjump_extract_from_paths",
                             f"Bad value: only local files (scheme 'file', no host) are supported, "
                             f"not {r.scheme}://{r.host}:{r.port}")
            _check_order(r.ranges, "gribjump_extract_from_paths")
            message = _read_message(r.path, r.offset)
            if native is not None:
                try:
                    got = native(message, r.ranges)
                except fieldstore.Error as exc:
                    raise _error("gribjump_extract_from_paths", f"{type(exc).__name__}: {exc}") from exc
                values, masks, actual = got.values, got.masks, got.grid_hash
            else:
                values, masks = _decode_extract(message, r.ranges)
                actual = None if self._ignore_grid else fieldstore.Message(message).metadata("md5GridSection")
            if not self._ignore_grid:
                _compare_hash(r.gridHash, actual, i, f"file {r.path}", "gribjump_extract_from_paths")
            out.append(ExtractionResult(values, masks, r.shape))
        return ExtractionIteratorFromPath(out)

    def extract_from_mask(self, requests, mask, gridHash=None, ctx=None) -> ExtractionIterator:
        if not isinstance(requests, list):
            raise ValueError("Requests should be a list of dictionaries")
        return self.extract([ExtractionRequest.from_mask(r, mask, gridHash) for r in requests], ctx)

    def extract_from_indices(self, requests, indices, gridHash=None, ctx=None) -> ExtractionIterator:
        if not isinstance(requests, list):
            raise ValueError("Requests should be a list of dictionaries")
        return self.extract([ExtractionRequest.from_indices(r, indices, gridHash) for r in requests], ctx)

    def extract_from_ranges(self, requests, ranges, gridHash=None, ctx=None) -> ExtractionIterator:
        if not isinstance(requests, list):
            raise ValueError("Requests should be a list of dictionaries")
        return self.extract([ExtractionRequest(r, ranges, gridHash) for r in requests], ctx)

    def _unpack_polyrequest(self, polyrequest) -> list[ExtractionRequest]:
        requests = []
        for item in polyrequest:
            if len(item) == 2:
                req, ranges = item
                gridhash = None
            elif len(item) == 3:
                req, ranges, gridhash = item
            else:
                raise ValueError("Polyrequest should be a list of tuples of length 2 or 3")
            requests.append(ExtractionRequest(req, list(ranges), gridhash))
        return requests

    def _batched(self, requests: list[ExtractionRequest], function: str) -> dict:
        """Requests with the same ranges (a time series: one per step) answered by one library
        call over the union of their values: {request index: [extraction]}. A group whose union
        would name many more fields than asked for, or whose answers cannot be told apart by
        the keywords that vary, is left out (asked one by one)."""
        groups: dict = {}
        for i, r in enumerate(requests):
            groups.setdefault(tuple(tuple(x) for x in r.ranges), []).append(i)
        answers: dict = {}
        for ranges, members in groups.items():
            if len(members) < 2:
                continue
            reqs = [{k: _values(v) for k, v in requests[i].request.items()} for i in members]
            keys = set(reqs[0])
            if any(set(q) != keys for q in reqs) or any(len(v) != 1 for q in reqs for v in q.values()):
                continue
            union = {k: list(dict.fromkeys(q[k][0] for q in reqs)) for k in reqs[0]}
            varying = [k for k, v in union.items() if len(v) > 1]
            size = 1
            for v in union.values():
                size *= len(v)
            if size > 4 * len(members):
                continue
            got = self._fdb_extract(union, [tuple(x) for x in ranges], function)
            by_values = {}
            for e in got:
                key = getattr(e, "key", None) or {}
                by_values.setdefault(tuple(str(key.get(k)) for k in varying), []).append(e)
            picked = {}
            for i, q in zip(members, reqs):
                hit = [e for e in by_values.get(tuple(q[k][0] for k in varying), []) if self._exists(e)]
                if len(hit) != 1:
                    # Missing, twice, or named otherwise than asked (param=2t): one by one.
                    picked = None
                    break
                picked[i] = hit
            if picked is None:
                continue
            answers.update(picked)
        return answers

    def _extract_requests(self, requests: list[ExtractionRequest], function: str) -> list[ExtractionResult]:
        found = []
        missing = 0
        for r in requests:
            _check_order(r.ranges, function)
        batched = self._batched(requests, function) if len(requests) > 1 else {}
        for i, r in enumerate(requests):
            if i in batched:
                got = batched[i]
            else:
                got = [e for e in self._fdb_extract(r.request, r.ranges, function) if self._exists(e)]
            if len(got) != 1:
                # GribJump counts the fields matched across the whole call and fails it when any
                # request names no field, or more than one (extract_single is for those).
                missing += 1
            found.append(got)
        if missing:
            matched = sum(1 for g in found if len(g) == 1)
            raise _error(function, _not_found(matched, len(requests), [r.request for r in requests]))
        out = []
        for i, (r, got) in enumerate(zip(requests, found)):
            e = got[0]
            self._check_hash(e, r.request, r.gridHash, i, function)
            out.append(ExtractionResult(e.values, e.masks, r.shape, e.key))
        return out

    def _fdb_extract(self, request: dict, ranges, function: str):
        _check_order(ranges, function)
        fdb = self.fdb
        try:
            if hasattr(fdb, "extract"):
                return fdb.extract(request, ranges)
            return _retrieve_and_decode(fdb, request, ranges)
        except fieldstore.NotFoundError:
            return []
        except fieldstore.Error as exc:
            raise _error(function, f"{type(exc).__name__}: {exc}") from exc
        except ValueError as exc:
            raise _error(function, f"Bad value: {exc}") from exc

    def _exists(self, extraction) -> bool:
        """Whether an extraction is of a stored field. A library may answer a field it does not
        have with NaN everywhere (nothing present): only then is the store asked."""
        if any(np.any(np.asarray(m)) for m in extraction.masks):
            return True
        key = getattr(extraction, "key", None)
        if not key:
            return True
        try:
            return next(iter(self.fdb.list(key)), None) is not None
        except fieldstore.Error:
            return True

    def _check_hash(self, extraction, request, expected, item, function):
        if self._ignore_grid:
            return
        actual = getattr(extraction, "grid_hash", None) or getattr(extraction, "md5_grid_section", None)
        if actual is None and expected:
            actual = _grid_hash_of(self.fdb, extraction.key)
        _compare_hash(expected, actual, item, f"field {_request_text(extraction.key or request)}", function)

    # -- axes ----------------------------------------------------------------------------------

    def axes(self, req: dict[str, str], level: int = 3, ctx: str = None) -> dict[str, list[str]]:
        """The values present of every keyword of the schema levels up to ``level`` (1: databases,
        2: indexes, 3: fields) under a partial request, as GribJump gives them (lists of str):
        FDB5's axes, every index whose own keys match counting whole."""
        merge_default_context(ctx, "pygribjump_axes")
        try:
            axes = self.fdb.axes(_request_dict(req), level=level, as_fdb5=True)
        except fieldstore.NotFoundError:
            return {}
        except fieldstore.Error as exc:
            raise _error("gribjump_new_axes", f"{type(exc).__name__}: {exc}") from exc
        except ValueError as exc:
            raise _error("gribjump_new_axes", f"Bad value: {exc}") from exc
        return {k: [str(v) for v in vals] for k, vals in axes.items()}


def _check_order(ranges, function):
    for (lo0, hi0), (lo1, hi1) in zip(ranges, ranges[1:]):
        if lo1 < hi0:
            raise _error(
                function,
                "Serious bug: Encountered 1 error during task execution:\n"
                "Assertion failed: checkIntervals(extractionItem.intervals()) "
                f"(ranges must be ascending and not overlap: ({lo0}, {hi0}) then ({lo1}, {hi1}))",
            )


def _cardinality(req: dict) -> int | None:
    """How many fields a request names, when it has no ranges (to/by) or ``all``; else None."""
    n = 1
    for v in req.values():
        vals = v if isinstance(v, (list, tuple)) else str(v).split("/")
        low = [str(x).lower() for x in vals]
        if "to" in low or "by" in low or "all" in low:
            return None
        n *= len(vals)
    return n


def _values(v) -> list:
    """A request value as a list of strings: `a/b`, a list or tuple, or one value."""
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v]
    text = str(v)
    return text.split("/") if "/" in text else [text]


def _request_text(req: dict) -> str:
    parts = []
    for k, v in (req or {}).items():
        v = "/".join(str(x) for x in v) if isinstance(v, (list, tuple)) else str(v)
        parts.append(f"{k}={v}")
    return ",".join(parts)


def _not_found(matched: int, requested: int, requests: list[dict]) -> str:
    union = {}
    for r in requests:
        for k, v in r.items():
            for x in (v if isinstance(v, (list, tuple)) else str(v).split("/")):
                union.setdefault(k, [])
                if str(x) not in union[k]:
                    union[k].append(str(x))
    return (f"GribJumpException: DataNotFound. Matched {matched} fields but {requested} were requested.\n"
            f"Union request: retrieve,{_request_text(dict(sorted(union.items())))}")


def _compare_hash(expected, actual, item, where, function):
    if not expected:
        raise _error(function,
                     "Serious bug: Encountered 1 error during task execution:\n"
                     "Bad value: Grid hash was not specified in request but is required. "
                     f"(Extraction item {item} in {where})")
    if expected != actual:
        raise _error(function,
                     "Serious bug: Encountered 1 error during task execution:\n"
                     f"BadValue: Grid hash mismatch for extraction item {item} in {where}. "
                     f"Request specified: {expected}, JumpInfo contains: {actual}")


def _grid_hash_of(fdb, key) -> str | None:
    """md5GridSection of a stored field (for stores whose extraction does not report it): the md5
    of its whole grid section (GRIB2 section 3, GRIB1 section 2), as ecCodes computes it, reading
    only the message's first sections."""
    reader = fdb.retrieve(key)
    try:
        return _grid_hash_from(reader)
    finally:
        reader.close()


def _grid_hash_from(reader) -> str | None:
    import hashlib

    def at(offset, n):
        reader.seek(offset)
        b = reader.read(n)
        if len(b) != n:
            raise GribJumpException(f"Bad value: truncated GRIB message (byte {offset})")
        return b

    head = reader.read(16)
    if len(head) < 16:
        return None
    total = _message_length(head, "retrieved field")
    if head[7] == 1:
        len1 = int.from_bytes(at(8, 3), "big")
        flags = at(8 + 7, 1)[0]
        if not flags & 0x80:  # no grid description: a predefined grid
            return None
        len2 = int.from_bytes(at(8 + len1, 3), "big")
        return hashlib.md5(at(8 + len1, len2)).hexdigest()
    pos = 16
    while pos + 5 <= total - 4:
        hdr = at(pos, 5)
        length, number = int.from_bytes(hdr[:4], "big"), hdr[4]
        if number == 3:
            return hashlib.md5(at(pos, length)).hexdigest()
        if length < 5:
            break
        pos += length
    return None


class _Decoded:
    def __init__(self, key, values, masks):
        self.key, self.values, self.masks = key, values, masks


_warned_fallback = False


def _retrieve_and_decode(fdb, request, ranges):
    """``FDB.extract``'s results by a retrieve and a full decode: for a fieldstore built before
    extraction existed. Correct, not fast (warned once)."""
    global _warned_fallback
    if not _warned_fallback:
        warnings.warn("this fieldstore has no FDB.extract: pygribjump decodes whole fields", stacklevel=4)
        _warned_fallback = True
    reader = fdb.retrieve(request)
    data = reader.readall()
    out = []
    fields = reader.fields
    for info in (fields() if callable(fields) else fields):
        message = data[info.offset: info.offset + info.length]
        values, masks = _decode_extract(message, ranges)
        e = _Decoded(dict(info.key), values, masks)
        out.append(e)
    return out


# -- utilities (as pygribjump's) -----------------------------------------------------------------


def rangestr_to_list(rangestr: str) -> list[tuple[int, int]]:
    """``"0-6,7-12"`` -> ``[(0, 6), (7, 12)]``."""
    return [tuple(map(int, r.split("-"))) for r in rangestr.split(",")]


def list_to_rangestr(ranges) -> str:
    return ",".join("-".join(map(str, r)) for r in ranges)


def dic_to_request(dic: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in dic.items())


def multivalued_dic_to_request(dic: dict) -> str:
    return ",".join(
        f"{k}=" + ("/".join(str(i) for i in v) if isinstance(v, list) else str(v)) for k, v in dic.items()
    )


def version() -> str:
    return __version__


def library_version() -> str:
    """fieldstore's version (the library behind this pygribjump)."""
    return f"fieldstore-{fieldstore.__version__}"


def default_context(action: str) -> dict[str, str]:
    def try_get(function: Callable[[], str], default: str) -> str:
        try:
            return function()
        except Exception:
            return default

    return {
        "source": "pygribjump",
        "action": action,
        "pygribjump_version": __version__,
        "gribjump_version": library_version(),
        "user": try_get(getuser, "unknown"),
        "hostname": try_get(gethostname, "unknown"),
    }


def merge_default_context(ctx: dict[str, str] | None, action: str) -> dict[str, str]:
    """The caller's log context with the defaults added (kept for API parity; fieldstore does not
    log it). Raises as pygribjump does when it is not JSON-serialisable."""
    defaults = default_context(action)
    if ctx is None:
        return defaults
    out = dict(ctx)
    for k, v in defaults.items():
        out.setdefault(k, v)
    json.dumps(out)
    return out
