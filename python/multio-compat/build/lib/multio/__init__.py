"""MultIO's Python API (pymultio's shape) on fieldstore's pipeline engine.

``Multio(config_path=...)`` runs the plans of a MultIO config in this process: ``write_field``
with numpy arrays (float32 through the float path, anything else as float64), ``flush``,
``notify``, ``field_accepted``, ``write_grib``, ``write_parametrization``. ``MultioPlan`` sets a
plan for ``Multio()`` to find, as pymultio's does. Failures raise ``MultioException`` (a
``RuntimeError``, as pymultio's), naming the plan, action and field; the fieldstore exception
with its ``kind`` is its ``__cause__``.

Deliberate differences from pymultio (docs/multio-c.md, section "Python"): metadata keeps Python's
types exactly (``True`` is a bool, not the int 1; ints are 64-bit, not truncated to 32; strings
may be any Unicode), arrays of any shape are written whole (pymultio writes ``len(data)`` values,
the first dimension only), the caller's dict is never modified, and MPI-only calls (domains,
masks, servers) raise.
"""

from .metadata import Metadata
from .multio import Multio, MultioException
from .utils import MultioPlan

__all__ = ["Multio", "Metadata", "MultioPlan", "MultioException"]

__version__ = "2.12.0"
