/*
 * fdb_c.h -- FDB5's C API, as implemented by fieldstore (libfdb5.so).
 *
 * Declares the functions, types and error codes of upstream FDB5's current C API (5.11 and
 * later), so that a program written against FDB5 compiles and links against fieldstore
 * unchanged. Written for fieldstore; semantics follow FDB5's documentation.
 *
 * Conventions: every function returns an FdbErrorValues code; on failure,
 * fdb_error_string(code) gives the full message of the calling thread's last failure, and the
 * failure handler (if set) is called. Nothing is printed on stdout. Objects are created by
 * fdb_new_* and freed by fdb_delete_*; deleting NULL is a no-op.
 */
#ifndef fdb5_api_fdb_c_H
#define fdb5_api_fdb_c_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Initialisation and versions ---- */

/* Call once before anything else (kept for FDB5 compatibility; sets nothing up). */
int fdb_initialise(void);

/* The FDB5 API level this library implements, e.g. "5.25.0" (static string). */
int fdb_version(const char** version);

/* fieldstore's own version, e.g. "fieldstore-0.1.0" (static string). */
int fdb_vcs_version(const char** sha1);

/* ---- Errors ---- */

enum FdbErrorValues {
    FDB_SUCCESS = 0,
    FDB_ERROR_GENERAL_EXCEPTION = 1,
    FDB_ERROR_UNKNOWN_EXCEPTION = 2,
    FDB_ITERATION_COMPLETE = 3
};

/* "Success", "Iteration complete", or the calling thread's last failure message. Valid until
 * the thread's next failure. */
const char* fdb_error_string(int err);

typedef void (*fdb_failure_handler_t)(void* context, int error_code);

/* Process-wide callback run on every failure with `context`; NULL clears it. */
int fdb_set_failure_handler(fdb_failure_handler_t handler, void* context);

/* ---- Keys: the metadata one archived object is stored under ---- */

struct fdb_key_t;
typedef struct fdb_key_t fdb_key_t;

int fdb_new_key(fdb_key_t** key);
/* Adding a keyword again replaces its value. */
int fdb_key_add(fdb_key_t* key, const char* param, const char* value);
int fdb_delete_key(fdb_key_t* key);

/* ---- Requests: MARS requests, keyword by keyword ---- */

struct fdb_request_t;
typedef struct fdb_request_t fdb_request_t;

int fdb_new_request(fdb_request_t** req);
/* Each value may hold several '/'-separated values ("20191110/to/20191115/by/2"). */
int fdb_request_add(fdb_request_t* req, const char* param, const char* values[], int numValues);
/* *values is an array of *numValues strings, all allocated with malloc: the caller frees each
 * string and the array. */
int fdb_request_get(fdb_request_t* req, const char* param, char** values[], size_t* numValues);
/* Replaces ranges by their values and values by their canonical form. */
int fdb_expand_request(fdb_request_t* req);
int fdb_delete_request(fdb_request_t* req);

/* ---- Split keys: the database, index and datum keys of a listed field ---- */

struct fdb_split_key_t;
typedef struct fdb_split_key_t fdb_split_key_t;

int fdb_new_splitkey(fdb_split_key_t** key);
/* Next keyword/value and its level (0 database, 1 index, 2 datum); FDB_ITERATION_COMPLETE at
 * the end. Strings stay valid until the split key is next filled or deleted. */
int fdb_splitkey_next_metadata(fdb_split_key_t* it, const char** key, const char** value, size_t* level);
int fdb_delete_splitkey(fdb_split_key_t* key);

/* ---- List iterators ---- */

struct fdb_listiterator_t;
typedef struct fdb_listiterator_t fdb_listiterator_t;

/* FDB_SUCCESS on moving to the next element, FDB_ITERATION_COMPLETE after the last. */
int fdb_listiterator_next(fdb_listiterator_t* it);
/* Where the current element's bytes are; uri valid until the next call to next. */
int fdb_listiterator_attrs(fdb_listiterator_t* it, const char** uri, size_t* off, size_t* len);
/* Fills `key` with the current element's keys, read with fdb_splitkey_next_metadata. */
int fdb_listiterator_splitkey(fdb_listiterator_t* it, fdb_split_key_t* key);
int fdb_delete_listiterator(fdb_listiterator_t* it);

/* ---- Data readers: the bytes a retrieve returns ---- */

struct fdb_datareader_t;
typedef struct fdb_datareader_t fdb_datareader_t;

int fdb_new_datareader(fdb_datareader_t** dr);
int fdb_datareader_open(fdb_datareader_t* dr, long* size);
/* Reads, seeks and tells fail after close until fdb_datareader_open reopens the reader. */
int fdb_datareader_close(fdb_datareader_t* dr);
int fdb_datareader_tell(fdb_datareader_t* dr, long* pos);
int fdb_datareader_seek(fdb_datareader_t* dr, long pos);
int fdb_datareader_skip(fdb_datareader_t* dr, long count);
int fdb_datareader_size(fdb_datareader_t* dr, long* size);
/* Reads up to `count` bytes; *read is 0 at the end. */
int fdb_datareader_read(fdb_datareader_t* dr, void* buf, long count, long* read);
int fdb_delete_datareader(fdb_datareader_t* dr);

/* ---- The store ---- */

struct fdb_handle_t;
typedef struct fdb_handle_t fdb_handle_t;

/* The store the environment names (FDB5_CONFIG_FILE, FDB_HOME, ...). */
int fdb_new_handle(fdb_handle_t** fdb);
/* The store `system_config` (YAML text) describes. `user_config` may be NULL, or YAML with
 * FDB5's user settings (useSubToc, preloadTocBTree, limits.read: accepted, no effect); any
 * other setting is an error. */
int fdb_new_handle_from_yaml(fdb_handle_t** fdb, const char* system_config, const char* user_config);
/* Stores `length` bytes under `key`, checked against the schema first. Visible after flush. */
int fdb_archive(fdb_handle_t* fdb, fdb_key_t* key, const char* data, size_t length);
/* Stores every GRIB message in `data` under its own keys; all or nothing. `req` may be NULL;
 * when given, the messages must be exactly the fields it names, each once. */
int fdb_archive_multiple(fdb_handle_t* fdb, fdb_request_t* req, const char* data, size_t length);
/* Fields matching `req` (NULL: all). As FDB5's library reads it, duplicates is "deduplicate":
 * true lists each key once (its newest copy), false every copy, masked (replaced) ones
 * included. depth: 1 databases, 2 indexes, 3 fields (anything else is taken as 3). */
int fdb_list(fdb_handle_t* fdb, const fdb_request_t* req, fdb_listiterator_t** it, bool duplicates, int depth);
/* Positions `dr` on the bytes of the fields `req` names, newest copy of each. */
int fdb_retrieve(fdb_handle_t* fdb, fdb_request_t* req, fdb_datareader_t* dr);
/* Makes everything archived through this handle durable and visible. */
int fdb_flush(fdb_handle_t* fdb);
/* Flushes, then frees the handle. */
int fdb_delete_handle(fdb_handle_t* fdb);

/* ---- Wipe ---- */

struct fdb_wipe_element_t;
typedef struct fdb_wipe_element_t fdb_wipe_element_t;
struct fdb_wipe_iterator_t;
typedef struct fdb_wipe_iterator_t fdb_wipe_iterator_t;

/* Databases matching `req`, deleted only with doit. */
int fdb_wipe(fdb_handle_t* fdb, fdb_request_t* req, bool doit, bool porcelain, bool unsafeWipeAll,
             fdb_wipe_iterator_t** it);
int fdb_wipe_iterator_next(fdb_wipe_iterator_t* it, fdb_wipe_element_t** element);
int fdb_delete_wipe_iterator(fdb_wipe_iterator_t* it);
int fdb_delete_wipe_element(fdb_wipe_element_t* element);
int fdb_wipe_element_string(fdb_wipe_element_t* element, const char** str);

/* ---- Purge ---- */

struct fdb_purge_element_t;
typedef struct fdb_purge_element_t fdb_purge_element_t;
struct fdb_purge_iterator_t;
typedef struct fdb_purge_iterator_t fdb_purge_iterator_t;

/* Masked duplicates under `req`, removed only with doit. */
int fdb_purge(fdb_handle_t* fdb, fdb_request_t* req, bool doit, bool porcelain, fdb_purge_iterator_t** it);
int fdb_purge_iterator_next(fdb_purge_iterator_t* it, fdb_purge_element_t** element);
int fdb_delete_purge_iterator(fdb_purge_iterator_t* it);
int fdb_delete_purge_element(fdb_purge_element_t* element);
int fdb_purge_element_string(fdb_purge_element_t* element, const char** str);

#ifdef __cplusplus
}
#endif

#endif /* fdb5_api_fdb_c_H */
