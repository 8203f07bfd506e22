/*
 * fieldstore/fdb_subscribe.h -- fieldstore's extensions to FDB5's C API: subscriptions,
 * retrieve-and-wait (docs/subscribe.md) and extraction (docs/extraction.md). Not part of FDB5: the functions are named
 * fieldstore_*, and both libfdb5.so builds (upstream's API and Debian's 5.10) export them.
 * Include after fdb5/api/fdb_c.h. Conventions as fdb_c.h's: every function returns an
 * FdbErrorValues code, fdb_error_string(code) gives the message, objects are freed by their
 * fieldstore_delete_* function (NULL is a no-op). Strings handed out stay valid until the next
 * call on the same object.
 */
#ifndef fieldstore_fdb_subscribe_H
#define fieldstore_fdb_subscribe_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The fields matching a partial request as flushes make them visible: each once, whole
 * flushes at a time, in each database's flush order. */
typedef struct fieldstore_subscription_t fieldstore_subscription_t;

/* Starts a subscription. `start`: "now" (or NULL: what is flushed from now on), "beginning"
 * (everything already there, then what follows), or a position token that
 * fieldstore_subscription_position gave (resume exactly after the last field seen). A NULL
 * request matches everything. */
int fieldstore_subscribe(fdb_handle_t* fdb, const fdb_request_t* req, const char* start,
                         fieldstore_subscription_t** sub);

/* Waits up to `timeout_ms` milliseconds (negative: forever) for the next field; `*got` is 1
 * when one came (it is then the current field), 0 when the time ran out. */
int fieldstore_subscription_next(fieldstore_subscription_t* sub, long timeout_ms, int* got);

/* The current field's key as `fdb-list --porcelain` prints it: {db}{index}{datum}. */
int fieldstore_subscription_key(fieldstore_subscription_t* sub, const char** key);

/* The current field's value of one keyword; `*value` is NULL if its key has no such keyword. */
int fieldstore_subscription_value(fieldstore_subscription_t* sub, const char* keyword,
                                  const char** value);

/* Where the current field's bytes are (as fdb_listiterator_attrs: a path for a local file). */
int fieldstore_subscription_attrs(fieldstore_subscription_t* sub, const char** uri, size_t* off,
                                  size_t* len);

/* Where to resume (the `start` of fieldstore_subscribe) to get exactly the fields this
 * subscription has not returned yet: a text token to keep. */
int fieldstore_subscription_position(fieldstore_subscription_t* sub, const char** position);

int fieldstore_delete_subscription(fieldstore_subscription_t* sub);

/* fdb_retrieve that waits up to `timeout_ms` milliseconds (negative: forever) until every field
 * the request names is flushed, then positions `dr` on all of them as fdb_retrieve does. When
 * the time runs out it fails; fdb_error_string names the fields still missing and
 * fieldstore_error_kind() says "timeout". */
int fieldstore_retrieve_wait(fdb_handle_t* fdb, fdb_request_t* req, long timeout_ms,
                             fdb_datareader_t* dr);

/* Values at ranges of grid points (GribJump's extraction) of every field a request names, in
 * retrieve's order, reading only the bytes those points need where the store kept how each
 * field is packed. `ranges` holds `n` pairs lo, hi: grid points lo..hi-1 in the field's point
 * order, sorted and apart. */
typedef struct fieldstore_extraction_t fieldstore_extraction_t;

int fieldstore_extract(fdb_handle_t* fdb, const fdb_request_t* req, const size_t* ranges,
                       size_t n, fieldstore_extraction_t** ex);

/* How many fields the request named. */
int fieldstore_extraction_count(fieldstore_extraction_t* ex, size_t* fields);

/* Field `field`'s full key, {class=od,expver=0001,...}. */
int fieldstore_extraction_key(fieldstore_extraction_t* ex, size_t field, const char** key);

/* The values of range `range` of field `field`: `*count` doubles, NaN where missing. Valid
 * until fieldstore_delete_extraction. */
int fieldstore_extraction_values(fieldstore_extraction_t* ex, size_t field, size_t range,
                                 const double** values, size_t* count);

/* The same range's mask: bit j of word i set when point i*64+j of the range is present. */
int fieldstore_extraction_mask(fieldstore_extraction_t* ex, size_t field, size_t range,
                               const unsigned long long** mask, size_t* words);

int fieldstore_delete_extraction(fieldstore_extraction_t* ex);

/* Adds extraction information to the fields a request names that were stored without it
 * (databases FDB5 wrote), as `fieldstore extract-index`: afterwards fieldstore_extract reads only
 * the bytes the ranges need from them too. Resumable: fields already described are skipped.
 * A handle on a local config only. `dry_run` != 0: counts what would be added, writes nothing. */
typedef struct {
    size_t fields;     /* fields the request names */
    size_t added;      /* described now (or would be) */
    size_t already;    /* described before */
    size_t left;       /* left without: small (read whole anyway) or not describable */
    size_t bytes_read; /* bytes of fields read */
    size_t side_files; /* side files written to */
} fieldstore_extract_index_report_t;

int fieldstore_extract_index(fdb_handle_t* fdb, const fdb_request_t* req, int dry_run,
                             fieldstore_extract_index_report_t* report);

/* The kind of the calling thread's last failure, a stable name: "timeout", "fell-behind" (a
 * position whose history the store no longer keeps), "not-found", "bad-request", ... ("" if
 * none yet). Static string. */
const char* fieldstore_error_kind(void);

#ifdef __cplusplus
}
#endif

#endif
