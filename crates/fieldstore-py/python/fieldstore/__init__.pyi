from . import _native as _native
from ._field import Field as Field
from ._native import (
    FDB as FDB,
    ArchiveSummary as ArchiveSummary,
    CompactElement as CompactElement,
    ControlElement as ControlElement,
    DumpElement as DumpElement,
    FieldInfo as FieldInfo,
    Message as Message,
    ListElement as ListElement,
    ListIterator as ListIterator,
    PurgeElement as PurgeElement,
    Reader as Reader,
    StatsElement as StatsElement,
    Subscription as Subscription,
    WaitingReader as WaitingReader,
    WhereElement as WhereElement,
    WipeElement as WipeElement,
    eccodes_info as eccodes_info,
    eccodes_version as eccodes_version,
    make_field as make_field,
)
from .errors import (
    BadRequestError as BadRequestError,
    ConfigError as ConfigError,
    CorruptError as CorruptError,
    Error as Error,
    FullError as FullError,
    InternalError as InternalError,
    LockedError as LockedError,
    NotFoundError as NotFoundError,
    PermissionDeniedError as PermissionDeniedError,
    FellBehindError as FellBehindError,
    RemoteError as RemoteError,
    SchemaError as SchemaError,
    StorageIOError as StorageIOError,
    TimeoutError as TimeoutError,
    UnsupportedError as UnsupportedError,
)

__version__: str
