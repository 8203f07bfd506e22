"""pygribjump's API (0.13) on fieldstore: ranges of grid points of stored fields, without reading
whole fields. See the package README and docs/gribjump.md."""

from .pygribjump import *  # noqa: F401,F403
from .pygribjump import __all__  # noqa: F401
from ._version import __version__, __min_lib_version__  # noqa: F401
