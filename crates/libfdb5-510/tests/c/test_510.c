/* Every function of Debian FDB5 5.10's C API on fieldstore's libfdb5.so.0d, with its error
 * paths. The store comes from the environment (FDB5_CONFIG_FILE), as a 5.10 program has it.
 * Usage: test_510 GRIB TRUNCATED FIRST_TWO (GRIB holds 3 fields at levelist 850: param 130 at
 * steps 0 and 6, param 131 at step 0; FIRST_TWO the first two; see c_api_510.rs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fdb5/api/fdb_c.h"
#include "../../../libfdb5/tests/c/check.h"

static void add(fdb_request_t* req, const char* k, const char* v) {
    OK(fdb_request_add(req, k, &v, 1));
}

/* The request for the test fields, without step and param. ECMWF's schema names domain in
 * its database keys, so a retrieve must give it. */
static fdb_request_t* base_request(void) {
    fdb_request_t* req = NULL;
    OK(fdb_new_request(&req));
    const char* kv[][2] = {{"class", "od"},   {"expver", "0001"},   {"stream", "oper"},
                           {"type", "fc"},    {"date", "20261122"}, {"time", "1200"},
                           {"levtype", "pl"}, {"levelist", "850"}, {"domain", "g"}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) add(req, kv[i][0], kv[i][1]);
    return req;
}

/* Fields listed for `req` (NULL: all); the first line into `first` if given. */
static long count(fdb_handle_t* fdb, const fdb_request_t* req, char* first, size_t cap) {
    fdb_listiterator_t* it = NULL;
    OK(fdb_new_listiterator(&it));
    OK(fdb_list(fdb, req, it));
    long n = 0;
    bool exist = false;
    const char* s = NULL;
    for (;;) {
        int rc = fdb_listiterator_next(it, &exist, &s);
        CHECK(rc == FDB_SUCCESS);
        if (rc != FDB_SUCCESS || !exist) break;
        CHECK(s != NULL && s[0] == '{');
        if (n == 0 && first) snprintf(first, cap, "%s", s);
        n++;
    }
    OK(fdb_delete_listiterator(it));
    return n;
}

int main(int argc, char** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: test_510 GRIB TRUNCATED FIRST_TWO\n");
        return 2;
    }
    size_t glen = 0, tlen = 0, two_len = 0;
    char* grib = slurp(argv[1], &glen);
    char* trunc = slurp(argv[2], &tlen);
    char* two = slurp(argv[3], &two_len);

    /* versions and errors */
    OK(fdb_initialise());
    const char* v = NULL;
    OK(fdb_version(&v));
    CHECK(v && strcmp(v, "5.10.8") == 0);
    OK(fdb_vcs_version(&v));
    CHECK(v && strncmp(v, "fieldstore", 10) == 0);
    CHECK(strcmp(fdb_error_string(FDB_SUCCESS), "Success") == 0);
    CHECK(strcmp(fdb_error_string(42), "<unknown>") == 0);
    OK(fdb_set_failure_handler(on_failure, &handler_calls));
    FAILS(fdb_archive(NULL, NULL, "x", 1), "fdb is NULL");
    CHECK(handler_calls == 1);
    FAILS(fdb_version(NULL), "version is NULL");
    CHECK(handler_calls == 2);
    OK(fdb_set_failure_handler(NULL, NULL));

    /* NULL handles and objects everywhere */
    fdb_listiterator_t* it = NULL;
    OK(fdb_new_listiterator(&it));
    FAILS(fdb_list(NULL, NULL, it), "fdb is NULL");
    FAILS(fdb_flush(NULL), "fdb is NULL");
    FAILS(fdb_archive_multiple(NULL, NULL, grib, glen), "fdb is NULL");
    FAILS(fdb_new_handle(NULL), "fdb is NULL");
    FAILS(fdb_key_add(NULL, "a", "b"), "key is NULL");
    FAILS(fdb_request_add(NULL, "a", &v, 1), "req is NULL");
    FAILS(fdb_datareader_open(NULL, NULL), "dr is NULL");
    OK(fdb_delete_handle(NULL));
    OK(fdb_delete_key(NULL));
    OK(fdb_delete_request(NULL));
    OK(fdb_delete_datareader(NULL));
    OK(fdb_delete_listiterator(NULL));

    /* an iterator fdb_list never filled lists nothing; next needs somewhere to answer */
    bool exist = true;
    const char* line = "untouched";
    OK(fdb_listiterator_next(it, &exist, &line));
    CHECK(!exist);
    CHECK(strcmp(line, "untouched") == 0);
    FAILS(fdb_listiterator_next(it, NULL, &line), "exist is NULL");
    FAILS(fdb_listiterator_next(it, &exist, NULL), "str is NULL");
    FAILS(fdb_listiterator_next(NULL, &exist, &line), "it is NULL");

    /* the handle from the environment */
    fdb_handle_t* fdb = NULL;
    OK(fdb_new_handle(&fdb));
    CHECK(fdb != NULL);
    FAILS(fdb_list(fdb, NULL, NULL), "it is NULL");

    /* a truncated GRIB: an error naming the problem, nothing archived */
    FAILS(fdb_archive_multiple(fdb, NULL, trunc, tlen), "truncated");
    OK(fdb_flush(fdb));
    CHECK(count(fdb, NULL, NULL, 0) == 0);

    /* archive_multiple against a request: every field it names, once, or nothing */
    fdb_request_t* req = base_request();
    add(req, "param", "130");
    const char* steps[] = {"0", "6", "12"};
    OK(fdb_request_add(req, "step", steps, 3));
    FAILS(fdb_archive_multiple(fdb, req, two, two_len), "lack 1 field(s)");
    FAILS(fdb_archive_multiple(fdb, req, two, two_len), "step=12");
    OK(fdb_request_add(req, "step", steps, 2));
    FAILS(fdb_archive_multiple(fdb, req, grib, glen), "param=131 is not one of 130");
    fdb_request_t* other = base_request();
    add(other, "param", "167");
    add(other, "step", "0");
    FAILS(fdb_archive_multiple(fdb, other, two, two_len), "is not a field of the request");
    OK(fdb_delete_request(other));
    char* twice = malloc(2 * two_len);
    memcpy(twice, two, two_len);
    memcpy(twice + two_len, two, two_len);
    FAILS(fdb_archive_multiple(fdb, req, twice, 2 * two_len), "repeats a field");
    free(twice);
    add(req, "foo", "bar");
    FAILS(fdb_archive_multiple(fdb, req, two, two_len), "foo");
    OK(fdb_flush(fdb));
    CHECK(count(fdb, NULL, NULL, 0) == 0);
    OK(fdb_delete_request(req));
    req = base_request();
    add(req, "param", "t");
    add(req, "step", "0/to/6/by/6");
    OK(fdb_archive_multiple(fdb, req, two, two_len));
    OK(fdb_flush(fdb));
    CHECK(count(fdb, NULL, NULL, 0) == 2);
    OK(fdb_delete_request(req));

    /* by the messages' own keys; archiving again replaces, and 5.10's listing shows every copy:
     * the two fields above, then the three messages twice */
    OK(fdb_archive_multiple(fdb, NULL, grib, glen));
    OK(fdb_flush(fdb));
    OK(fdb_archive_multiple(fdb, NULL, grib, glen));
    OK(fdb_flush(fdb));
    char first[1024] = "";
    CHECK(count(fdb, NULL, first, sizeof first) == 8);
    CHECK(strncmp(first, "{class=od,expver=0001,stream=oper,date=20261122,time=1200", 57) == 0);
    CHECK(strstr(first, "}{type=fc,levtype=pl}{step=") != NULL);

    /* a key: checked against the schema, the bytes stored as given */
    fdb_key_t* key = NULL;
    OK(fdb_new_key(&key));
    const char* kv[][2] = {{"class", "od"},   {"expver", "0001"},   {"stream", "oper"},
                           {"type", "fc"},    {"date", "20261122"}, {"time", "1200"},
                           {"levtype", "pl"}, {"levelist", "500"},  {"param", "130"},
                           {"step", "12"},    {"domain", "g"}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) OK(fdb_key_add(key, kv[i][0], kv[i][1]));
    OK(fdb_archive(fdb, key, "hello", 5));
    FAILS(fdb_archive(fdb, key, NULL, 0), "no data");
    OK(fdb_key_add(key, "foo", "bar"));
    FAILS(fdb_archive(fdb, key, "world", 5), "foo");
    OK(fdb_delete_key(key));
    OK(fdb_flush(fdb));
    CHECK(count(fdb, NULL, NULL, 0) == 9);

    /* listing by request; an unknown keyword is an error */
    req = base_request();
    add(req, "param", "130");
    CHECK(count(fdb, req, first, sizeof first) == 6); /* 2 copies of 2 fields, 1 above, the key */
    CHECK(strstr(first, "param=130") != NULL);
    add(req, "foo", "bar");
    FAILS(fdb_list(fdb, req, it), "unknown keyword");
    OK(fdb_delete_listiterator(it));
    OK(fdb_delete_request(req));

    /* retrieve: size, read, tell, seek, skip, close, reopen */
    req = base_request();
    add(req, "param", "130");
    OK(fdb_request_add(req, "step", steps, 2));
    fdb_datareader_t* dr = NULL;
    OK(fdb_new_datareader(&dr));
    FAILS(fdb_datareader_read(dr, first, 1, &(long){0}), "fdb_retrieve first");
    FAILS(fdb_retrieve(fdb, NULL, dr), "req is NULL");
    OK(fdb_retrieve(fdb, req, dr));
    long size = -1, pos = -1, got = 0;
    OK(fdb_datareader_open(dr, &size));
    CHECK(size == (long)two_len);
    char* back = malloc(two_len + 16);
    OK(fdb_datareader_read(dr, back, (long)two_len + 16, &got));
    CHECK(got == (long)two_len && memcmp(back, two, two_len) == 0);
    OK(fdb_datareader_tell(dr, &pos));
    CHECK(pos == (long)two_len);
    OK(fdb_datareader_read(dr, back, 16, &got));
    CHECK(got == 0);
    OK(fdb_datareader_seek(dr, 0));
    OK(fdb_datareader_skip(dr, 4));
    OK(fdb_datareader_tell(dr, &pos));
    CHECK(pos == 4);
    FAILS(fdb_datareader_seek(dr, -1), "must not be negative");
    FAILS(fdb_datareader_skip(dr, -1), "must not be negative");
    FAILS(fdb_datareader_read(dr, back, 4, NULL), "read is NULL");
    OK(fdb_datareader_close(dr));
    FAILS(fdb_datareader_read(dr, back, 4, &got), "closed");
    FAILS(fdb_datareader_tell(dr, &pos), "closed");
    FAILS(fdb_datareader_seek(dr, 0), "closed");
    FAILS(fdb_datareader_skip(dr, 1), "closed");
    OK(fdb_datareader_close(dr));
    OK(fdb_datareader_open(dr, NULL));
    OK(fdb_datareader_read(dr, back, 4, &got));
    CHECK(got == 4 && memcmp(back, "GRIB", 4) == 0);
    OK(fdb_delete_request(req));

    /* what fdb_archive stored under a key */
    req = base_request();
    add(req, "levelist", "500");
    add(req, "param", "130");
    add(req, "step", "12");
    OK(fdb_retrieve(fdb, req, dr));
    OK(fdb_datareader_open(dr, &size));
    CHECK(size == 5);
    OK(fdb_datareader_read(dr, back, 5, &got));
    CHECK(got == 5 && memcmp(back, "hello", 5) == 0);
    OK(fdb_delete_request(req));

    /* a request matching nothing: an empty reader, as FDB5 gives; an unknown keyword: an error */
    req = base_request();
    add(req, "param", "130");
    add(req, "step", "99");
    OK(fdb_retrieve(fdb, req, dr));
    OK(fdb_datareader_open(dr, &size));
    CHECK(size == 0);
    OK(fdb_datareader_read(dr, back, 4, &got));
    CHECK(got == 0);
    add(req, "foo", "bar");
    FAILS(fdb_retrieve(fdb, req, dr), "foo");
    OK(fdb_delete_request(req));
    OK(fdb_delete_datareader(dr));

    OK(fdb_delete_handle(fdb));
    free(back);
    free(grib);
    free(trunc);
    free(two);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    return 0;
}
