/*
 * fdb_c.h -- FDB5's C API as Debian's FDB5 5.10.8 ships it (libfdb5.so.0d), implemented by
 * fieldstore.
 *
 * Declares the 29 functions, the types and the error codes of the 5.10 API, so that a program
 * written for Debian's libfdb5-dev compiles against this header, and a program already built
 * against Debian's library runs on fieldstore's libfdb5.so.0d with LD_LIBRARY_PATH alone.
 * Written for fieldstore; the semantics follow FDB5's documentation. For upstream's current API
 * (fdb_list with duplicates and depth, split keys, wipe, purge) use fieldstore's libfdb5.so and
 * its header instead.
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

/* The FDB5 API level this library implements: "5.10.8" (static string). */
int fdb_version(const char** version);

/* fieldstore's own version, e.g. "fieldstore-0.1.0" (static string). */
int fdb_vcs_version(const char** version);

/* ---- Errors ---- */

enum FdbErrorValues {
    FDB_SUCCESS = 0,
    FDB_ERROR_GENERAL_EXCEPTION = 1,
    FDB_ERROR_UNKNOWN_EXCEPTION = 2
};

/* "Success", or the calling thread's last failure message. Valid until the thread's next
 * failure. */
const char* fdb_error_string(int err);

typedef void (*fdb_failure_handler_t)(void* context, int error_code);

/* Process-wide callback run on every failure with `context`; NULL clears it. */
int fdb_set_failure_handler(fdb_failure_handler_t handler, void* context);

/* ---- Types ---- */

struct fdb_key_t;
typedef struct fdb_key_t fdb_key_t;
struct fdb_request_t;
typedef struct fdb_request_t fdb_request_t;
struct fdb_listiterator_t;
typedef struct fdb_listiterator_t fdb_listiterator_t;
struct fdb_datareader_t;
typedef struct fdb_datareader_t fdb_datareader_t;
struct fdb_handle_t;
typedef struct fdb_handle_t fdb_handle_t;

/* ---- The store ---- */

/* The store the environment names (FDB5_CONFIG_FILE, FDB_HOME, ...). */
int fdb_new_handle(fdb_handle_t** fdb);
/* Stores `length` bytes under `key`, checked against the schema first (the bytes are not
 * decoded). Visible after fdb_flush. */
int fdb_archive(fdb_handle_t* fdb, fdb_key_t* key, const char* data, size_t length);
/* Stores every GRIB message in `data` under its own keys; all or nothing. `req` may be NULL;
 * when given, the messages must be exactly the fields it names, each once. */
int fdb_archive_multiple(fdb_handle_t* fdb, fdb_request_t* req, const char* data, size_t length);
/* Fills `it` (made by fdb_new_listiterator) with the fields `req` names (NULL: all), newest
 * copy of each. */
int fdb_list(fdb_handle_t* fdb, const fdb_request_t* req, fdb_listiterator_t* it);
/* Positions `dr` on the bytes of the fields `req` names, newest copy of each. */
int fdb_retrieve(fdb_handle_t* fdb, fdb_request_t* req, fdb_datareader_t* dr);
/* Makes everything archived through this handle durable and visible. */
int fdb_flush(fdb_handle_t* fdb);
/* Flushes, then frees the handle. */
int fdb_delete_handle(fdb_handle_t* fdb);

/* ---- Keys: the metadata one archived object is stored under ---- */

int fdb_new_key(fdb_key_t** key);
/* Adding a keyword again replaces its value. */
int fdb_key_add(fdb_key_t* key, const char* param, const char* value);
int fdb_delete_key(fdb_key_t* key);

/* ---- Requests: MARS requests, keyword by keyword ---- */

int fdb_new_request(fdb_request_t** req);
/* Each value may hold several '/'-separated values ("20191110/to/20191115/by/2"). */
int fdb_request_add(fdb_request_t* req, const char* param, const char* values[], int numValues);
int fdb_delete_request(fdb_request_t* req);

/* ---- List iterators ---- */

/* An iterator listing nothing until fdb_list fills it. */
int fdb_new_listiterator(fdb_listiterator_t** it);
/* *exist is false after the last field; otherwise *str is the field's key as
 * "{db keys}{index keys}{datum keys}", e.g. "{class=od,expver=0001,...}{type=fc,...}{step=0,...}",
 * valid until the next call. */
int fdb_listiterator_next(fdb_listiterator_t* it, bool* exist, const char** str);
int fdb_delete_listiterator(fdb_listiterator_t* it);

/* ---- Data readers: the bytes a retrieve returns ---- */

int fdb_new_datareader(fdb_datareader_t** dr);
/* Opens (or reopens) at the start; *size (if size is not NULL) gets the total bytes. */
int fdb_datareader_open(fdb_datareader_t* dr, long* size);
/* Reads, seeks and tells fail after close until fdb_datareader_open reopens the reader. */
int fdb_datareader_close(fdb_datareader_t* dr);
int fdb_datareader_tell(fdb_datareader_t* dr, long* pos);
int fdb_datareader_seek(fdb_datareader_t* dr, long pos);
int fdb_datareader_skip(fdb_datareader_t* dr, long count);
/* Reads up to `count` bytes; *read is 0 at the end. */
int fdb_datareader_read(fdb_datareader_t* dr, void* buf, long count, long* read);
int fdb_delete_datareader(fdb_datareader_t* dr);

#ifdef __cplusplus
}
#endif

#endif /* fdb5_api_fdb_c_H */
