//! `libmultio-api.so`: MultIO's C API for fields (`multio_c.h`), with fieldstore's pipeline
//! engine (`fieldstore::pipeline`) behind it, so a model built against MultIO's header runs its
//! plans on fieldstore by `LD_LIBRARY_PATH` alone. Plans run in the calling process, on the
//! fields as the model writes them; there are no I/O servers and no MPI, so the calls that only
//! make sense with them (`multio_start_server`, domains, masks, `multio_synchronize`) fail with a
//! code and a message saying so. docs/multio-c.md lists every difference from MultIO.
//!
//! Safety contract of every `unsafe extern "C"` function here (stated once rather than on each):
//! each object pointer is NULL (reported as an error, never dereferenced) or a pointer this
//! library handed out and that has not been deleted; each `const char*` is NULL or a
//! NUL-terminated string; each array pointer with its count is NULL or readable for that many
//! elements; each out-pointer is NULL or writable. Nothing panics across the boundary
//! ([`errors::run`]).
#![allow(clippy::missing_safety_doc)]

pub mod errors;
mod objects;

pub use objects::*;
