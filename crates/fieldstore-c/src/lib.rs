//! FDB5's C API over fieldstore, so that programs written for FDB5 run on fieldstore unchanged.
//! This crate implements every function of both ABIs and exports (`#[no_mangle]`) the 25 both
//! share; `libfdb5` (upstream's current ABI) and `libfdb5-510` (Debian's 5.10) export the rest,
//! so that each library exports exactly its ABI's functions. Every entry point catches
//! panics and turns failures into FDB5's error codes; nothing is printed on stdout.
#![allow(non_camel_case_types)]
// The C ABI takes raw pointers from the caller; each is checked for NULL before use.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

pub(crate) mod cube;
pub(crate) mod errors;
pub mod extract;
pub(crate) mod handle;
pub(crate) mod key;
pub mod list;
pub(crate) mod reader;
pub(crate) mod request;
pub(crate) mod strings;
pub mod subscribe;
pub(crate) mod user_config;
pub mod version;
pub(crate) mod wipe;

pub use errors::{
    fdb_error_string, fdb_failure_handler_t, fdb_set_failure_handler, fieldstore_error_kind,
    FDB_ERROR_GENERAL_EXCEPTION, FDB_ERROR_UNKNOWN_EXCEPTION, FDB_ITERATION_COMPLETE, FDB_SUCCESS,
};
pub use extract::{
    fieldstore_delete_extraction, fieldstore_extract, fieldstore_extract_index,
    fieldstore_extract_index_report_t, fieldstore_extraction_count, fieldstore_extraction_key,
    fieldstore_extraction_mask, fieldstore_extraction_t, fieldstore_extraction_values,
};
pub use handle::{
    fdb_archive, fdb_archive_multiple, fdb_delete_handle, fdb_flush, fdb_handle_t, fdb_new_handle,
    fdb_new_handle_from_yaml,
};
pub use key::{fdb_delete_key, fdb_key_add, fdb_key_t, fdb_new_key};
pub use list::{
    fdb_delete_listiterator, fdb_delete_splitkey, fdb_listiterator_attrs,
    fdb_listiterator_splitkey, fdb_listiterator_t, fdb_new_splitkey, fdb_split_key_t,
    fdb_splitkey_next_metadata,
};
pub use reader::{
    fdb_datareader_close, fdb_datareader_open, fdb_datareader_read, fdb_datareader_seek,
    fdb_datareader_size, fdb_datareader_skip, fdb_datareader_t, fdb_datareader_tell,
    fdb_delete_datareader, fdb_new_datareader, fdb_retrieve,
};
pub use request::{
    fdb_delete_request, fdb_expand_request, fdb_new_request, fdb_request_add, fdb_request_get,
    fdb_request_t,
};
pub use subscribe::{
    fieldstore_delete_subscription, fieldstore_retrieve_wait, fieldstore_subscribe,
    fieldstore_subscription_attrs, fieldstore_subscription_key, fieldstore_subscription_next,
    fieldstore_subscription_position, fieldstore_subscription_t, fieldstore_subscription_value,
};
pub use version::{fdb_initialise, fdb_vcs_version};
pub use wipe::{
    fdb_delete_purge_element, fdb_delete_purge_iterator, fdb_delete_wipe_element,
    fdb_delete_wipe_iterator, fdb_purge, fdb_purge_element_string, fdb_purge_element_t,
    fdb_purge_iterator_next, fdb_purge_iterator_t, fdb_wipe, fdb_wipe_element_string,
    fdb_wipe_element_t, fdb_wipe_iterator_next, fdb_wipe_iterator_t,
};
