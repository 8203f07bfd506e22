/* Exercises fieldstore's libfdb5.so through upstream FDB5's C API: versions, errors, keys,
 * requests, handles from YAML, archive (with a key and GRIB), flush, list, retrieve.
 * Usage: test_api ROOT GRIB TRUNCATED_GRIB FIRST_TWO (GRIB holds 3 fields, FIRST_TWO the
 * first two, param 130 at steps 0 and 6; see c_api.rs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fdb5/api/fdb_c.h"
#include "check.h"

static fdb_key_t* field_key(const char* step) {
    fdb_key_t* key = NULL;
    OK(fdb_new_key(&key));
    const char* kv[][2] = {{"class", "od"},  {"expver", "0001"}, {"stream", "oper"},
                           {"type", "fc"},   {"date", "20261122"}, {"time", "1200"},
                           {"levtype", "pl"}, {"levelist", "500"}, {"param", "130"}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) OK(fdb_key_add(key, kv[i][0], kv[i][1]));
    OK(fdb_key_add(key, "step", step));
    return key;
}

static fdb_request_t* request(const char* step) {
    fdb_request_t* req = NULL;
    OK(fdb_new_request(&req));
    const char* kv[][2] = {{"class", "od"},  {"expver", "0001"}, {"stream", "oper"},
                           {"type", "fc"},   {"date", "20261122"}, {"time", "1200"},
                           {"levtype", "pl"}, {"levelist", "850"}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        const char* v = kv[i][1];
        OK(fdb_request_add(req, kv[i][0], &v, 1));
    }
    if (step) OK(fdb_request_add(req, "step", &step, 1));
    return req;
}

/* As FDB5's library reads `duplicates` (it passes it on as `deduplicate`): true lists each key
 * once, false every copy, masked (replaced) ones included. */
static long count_all(fdb_handle_t* fdb, fdb_request_t* req, bool duplicates) {
    fdb_listiterator_t* it = NULL;
    long n = 0;
    OK(fdb_list(fdb, req, &it, duplicates, 3));
    int rc;
    while ((rc = fdb_listiterator_next(it)) == FDB_SUCCESS) n++;
    CHECK(rc == FDB_ITERATION_COMPLETE);
    OK(fdb_delete_listiterator(it));
    return n;
}

static long count_listed(fdb_handle_t* fdb, fdb_request_t* req) {
    return count_all(fdb, req, true);
}

/* Lines of a wipe (purge == 0) or purge report, each element deleted after use. */
static long report_lines(fdb_handle_t* fdb, fdb_request_t* req, int purge, bool doit, bool porcelain) {
    long n = 0;
    int rc;
    const char* s = NULL;
    if (purge) {
        fdb_purge_iterator_t* it = NULL;
        fdb_purge_element_t* e = NULL;
        OK(fdb_purge(fdb, req, doit, porcelain, &it));
        while ((rc = fdb_purge_iterator_next(it, &e)) == FDB_SUCCESS) {
            OK(fdb_purge_element_string(e, &s));
            CHECK(s && strlen(s) > 0);
            OK(fdb_delete_purge_element(e));
            n++;
        }
        CHECK(rc == FDB_ITERATION_COMPLETE);
        OK(fdb_delete_purge_element(e));
        OK(fdb_delete_purge_iterator(it));
    } else {
        fdb_wipe_iterator_t* it = NULL;
        fdb_wipe_element_t* e = NULL;
        OK(fdb_wipe(fdb, req, doit, porcelain, false, &it));
        while ((rc = fdb_wipe_iterator_next(it, &e)) == FDB_SUCCESS) {
            OK(fdb_wipe_element_string(e, &s));
            CHECK(s && strlen(s) > 0);
            OK(fdb_delete_wipe_element(e));
            n++;
        }
        CHECK(rc == FDB_ITERATION_COMPLETE);
        OK(fdb_delete_wipe_element(e));
        OK(fdb_delete_wipe_iterator(it));
    }
    return n;
}

int main(int argc, char** argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: test_api ROOT GRIB TRUNCATED FIRST_TWO\n");
        return 2;
    }
    OK(fdb_initialise());

    /* versions */
    const char* v = NULL;
    OK(fdb_version(&v));
    CHECK(v && strcmp(v, "5.12.1") >= 0);
    OK(fdb_vcs_version(&v));
    CHECK(v && strncmp(v, "fieldstore", 10) == 0);
    CHECK(strcmp(fdb_error_string(FDB_SUCCESS), "Success") == 0);
    CHECK(strcmp(fdb_error_string(FDB_ITERATION_COMPLETE), "Iteration complete") == 0);

    /* errors: NULL arguments give a code and a message, and call the handler */
    OK(fdb_set_failure_handler(on_failure, &handler_calls));
    int rc = fdb_archive(NULL, NULL, "x", 1);
    CHECK(rc == FDB_ERROR_GENERAL_EXCEPTION);
    CHECK(strstr(fdb_error_string(rc), "fdb is NULL") != NULL);
    CHECK(handler_calls == 1);
    CHECK(fdb_version(NULL) == FDB_ERROR_GENERAL_EXCEPTION);
    CHECK(fdb_new_handle_from_yaml(NULL, "spaces: []", NULL) == FDB_ERROR_GENERAL_EXCEPTION);
    CHECK(handler_calls == 3);
    OK(fdb_set_failure_handler(NULL, NULL));

    /* requests: add, get (malloc'd), expand */
    fdb_request_t* req = NULL;
    OK(fdb_new_request(&req));
    const char* dates[] = {"20191110/to/20191115", "by/2"};
    OK(fdb_request_add(req, "date", dates, 2));
    char** values = NULL;
    size_t n = 0;
    OK(fdb_request_get(req, "date", &values, &n));
    CHECK(n == 5);
    if (n == 5) {
        CHECK(strcmp(values[0], "20191110") == 0);
        CHECK(strcmp(values[1], "to") == 0);
        CHECK(strcmp(values[4], "2") == 0);
    }
    for (size_t i = 0; i < n; i++) free(values[i]);
    free(values);
    OK(fdb_expand_request(req));
    OK(fdb_request_get(req, "date", &values, &n));
    CHECK(n == 3);
    if (n == 3) CHECK(strcmp(values[2], "20191114") == 0);
    for (size_t i = 0; i < n; i++) free(values[i]);
    free(values);
    OK(fdb_request_get(req, "step", &values, &n));
    CHECK(n == 0);
    free(values);
    OK(fdb_delete_request(req));

    /* a handle from YAML */
    char yaml[4096];
    snprintf(yaml, sizeof yaml, "type: local\nengine: toc\nspaces:\n  - roots:\n      - path: %s\n", argv[1]);
    fdb_handle_t* fdb = NULL;
    OK(fdb_new_handle_from_yaml(&fdb, yaml, NULL));
    CHECK(fdb != NULL);
    CHECK(fdb_new_handle_from_yaml(&fdb, "type: [unclosed", NULL) == FDB_ERROR_GENERAL_EXCEPTION);

    /* user_config: FDB5's user settings accepted, anything else refused by name */
    fdb_handle_t* fdb2 = NULL;
    OK(fdb_new_handle_from_yaml(&fdb2, yaml, "useSubToc: true\npreloadTocBTree: false\nlimits:\n  read: 1024\n"));
    OK(fdb_delete_handle(fdb2));
    OK(fdb_new_handle_from_yaml(&fdb2, yaml, ""));
    OK(fdb_delete_handle(fdb2));
    fdb2 = NULL;
    rc = fdb_new_handle_from_yaml(&fdb2, yaml, "useSubtoc: true");
    CHECK(rc == FDB_ERROR_GENERAL_EXCEPTION);
    CHECK(strstr(fdb_error_string(rc), "unknown setting 'useSubtoc'") != NULL);
    CHECK(fdb2 == NULL);
    rc = fdb_new_handle_from_yaml(&fdb2, yaml, "preloadTocBTree: maybe");
    CHECK(rc == FDB_ERROR_GENERAL_EXCEPTION);
    CHECK(strstr(fdb_error_string(rc), "true or false") != NULL);

    /* a truncated GRIB: an error naming the problem, and nothing archived */
    size_t glen = 0, tlen = 0;
    char* grib = slurp(argv[2], &glen);
    char* trunc = slurp(argv[3], &tlen);
    rc = fdb_archive_multiple(fdb, NULL, trunc, tlen);
    CHECK(rc == FDB_ERROR_GENERAL_EXCEPTION);
    CHECK(strstr(fdb_error_string(rc), "truncated") != NULL);
    OK(fdb_flush(fdb));
    CHECK(count_listed(fdb, NULL) == 0);

    /* GRIB by its own keys */
    OK(fdb_archive_multiple(fdb, NULL, grib, glen));
    OK(fdb_flush(fdb));
    CHECK(count_listed(fdb, NULL) == 3);

    /* a key: checked against the schema, bytes stored as given */
    fdb_key_t* key = field_key("12");
    OK(fdb_archive(fdb, key, "hello", 5));
    OK(fdb_key_add(key, "foo", "bar"));
    rc = fdb_archive(fdb, key, "world", 5);
    CHECK(rc == FDB_ERROR_GENERAL_EXCEPTION);
    CHECK(strstr(fdb_error_string(rc), "foo") != NULL);
    OK(fdb_delete_key(key));
    OK(fdb_flush(fdb));
    CHECK(count_listed(fdb, NULL) == 4);

    /* listing with split keys and attributes */
    req = request(NULL);
    fdb_listiterator_t* it = NULL;
    fdb_split_key_t* sk = NULL;
    OK(fdb_new_splitkey(&sk));
    OK(fdb_list(fdb, req, &it, false, 3));
    CHECK(fdb_listiterator_attrs(it, &v, &n, &n) == FDB_ERROR_GENERAL_EXCEPTION);
    long listed = 0;
    while ((rc = fdb_listiterator_next(it)) == FDB_SUCCESS) {
        const char* uri = NULL;
        size_t off = 0, len = 0;
        OK(fdb_listiterator_attrs(it, &uri, &off, &len));
        CHECK(uri && strlen(uri) > 0);
        CHECK(len > 0);
        OK(fdb_listiterator_splitkey(it, sk));
        const char *k, *val;
        size_t level, seen = 0, max_level = 0;
        int has_param = 0;
        while ((rc = fdb_splitkey_next_metadata(sk, &k, &val, &level)) == FDB_SUCCESS) {
            seen++;
            if (level > max_level) max_level = level;
            if (strcmp(k, "param") == 0) has_param = 1;
        }
        CHECK(rc == FDB_ITERATION_COMPLETE);
        CHECK(seen >= 10);
        CHECK(max_level == 2);
        CHECK(has_param);
        listed++;
    }
    CHECK(rc == FDB_ITERATION_COMPLETE);
    CHECK(listed == 3);
    OK(fdb_delete_listiterator(it));
    OK(fdb_delete_splitkey(sk));
    /* a depth FDB5 does not know is taken as 3, as FDB5 does */
    OK(fdb_list(fdb, req, &it, true, 7));
    listed = 0;
    while ((rc = fdb_listiterator_next(it)) == FDB_SUCCESS) {
        const char* uri = NULL;
        size_t off = 0, len = 0;
        OK(fdb_listiterator_attrs(it, &uri, &off, &len));
        CHECK(len > 0);
        listed++;
    }
    CHECK(rc == FDB_ITERATION_COMPLETE && listed == 3);
    OK(fdb_delete_listiterator(it));

    /* retrieve two of the GRIB fields (a full request): the same bytes as archived */
    const char* param130 = "130";
    const char* steps[] = {"0", "6"};
    OK(fdb_request_add(req, "param", &param130, 1));
    OK(fdb_request_add(req, "step", steps, 2));
    size_t two_len = 0;
    char* two = slurp(argv[4], &two_len);
    fdb_datareader_t* dr = NULL;
    OK(fdb_new_datareader(&dr));
    CHECK(fdb_datareader_size(dr, &listed) == FDB_ERROR_GENERAL_EXCEPTION);
    OK(fdb_retrieve(fdb, req, dr));
    long size = 0, pos = -1, got = 0;
    OK(fdb_datareader_open(dr, &size));
    CHECK(size == (long)two_len);
    char* back = malloc(two_len + 16);
    OK(fdb_datareader_read(dr, back, (long)two_len + 16, &got));
    CHECK(got == (long)two_len);
    OK(fdb_datareader_tell(dr, &pos));
    CHECK(pos == (long)two_len);
    OK(fdb_datareader_read(dr, back, 16, &got));
    CHECK(got == 0);
    OK(fdb_datareader_seek(dr, 0));
    OK(fdb_datareader_skip(dr, 4));
    OK(fdb_datareader_tell(dr, &pos));
    CHECK(pos == 4);
    OK(fdb_datareader_seek(dr, 0));
    OK(fdb_datareader_read(dr, back, (long)two_len, &got));
    CHECK(got == (long)two_len && memcmp(back, two, two_len) == 0);
    CHECK(fdb_datareader_seek(dr, -1) == FDB_ERROR_GENERAL_EXCEPTION);
    OK(fdb_datareader_close(dr));
    /* closed: reads fail until reopened, as FDB5's DataHandle */
    rc = fdb_datareader_read(dr, back, 4, &got);
    CHECK(rc == FDB_ERROR_GENERAL_EXCEPTION);
    CHECK(strstr(fdb_error_string(rc), "closed") != NULL);
    CHECK(fdb_datareader_tell(dr, &pos) == FDB_ERROR_GENERAL_EXCEPTION);
    OK(fdb_datareader_size(dr, &size));
    CHECK(size == (long)two_len);
    OK(fdb_datareader_open(dr, &size));
    OK(fdb_datareader_read(dr, back, (long)two_len, &got));
    CHECK(got == (long)two_len && memcmp(back, two, two_len) == 0);
    OK(fdb_datareader_close(dr));
    OK(fdb_delete_request(req));

    /* retrieve what was archived under a key */
    fdb_request_t* r12 = NULL;
    OK(fdb_new_request(&r12));
    const char* kv[][2] = {{"class", "od"},  {"expver", "0001"}, {"stream", "oper"},
                           {"type", "fc"},   {"date", "20261122"}, {"time", "1200"},
                           {"levtype", "pl"}, {"levelist", "500"}, {"param", "130"}, {"step", "12"}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        const char* val = kv[i][1];
        OK(fdb_request_add(r12, kv[i][0], &val, 1));
    }
    OK(fdb_retrieve(fdb, r12, dr));
    OK(fdb_datareader_open(dr, &size));
    CHECK(size == 5);
    OK(fdb_datareader_read(dr, back, 5, &got));
    CHECK(got == 5 && memcmp(back, "hello", 5) == 0);
    OK(fdb_delete_request(r12));

    /* a request matching nothing: an empty reader, as FDB5 gives; an unknown keyword: an error */
    r12 = request("99");
    const char* p130 = "130";
    OK(fdb_request_add(r12, "param", &p130, 1));
    OK(fdb_retrieve(fdb, r12, dr));
    OK(fdb_datareader_size(dr, &size));
    CHECK(size == 0);
    const char* bar = "bar";
    OK(fdb_request_add(r12, "foo", &bar, 1));
    rc = fdb_retrieve(fdb, r12, dr);
    CHECK(rc == FDB_ERROR_GENERAL_EXCEPTION);
    CHECK(strstr(fdb_error_string(rc), "foo") != NULL);
    rc = fdb_list(fdb, r12, &it, false, 3);
    CHECK(rc == FDB_ERROR_GENERAL_EXCEPTION);
    CHECK(strstr(fdb_error_string(rc), "unknown keyword") != NULL);
    OK(fdb_delete_request(r12));
    OK(fdb_delete_datareader(dr));

    /* a replaced field: listed once with duplicates=true (FDB5's deduplicate), and both copies
     * with duplicates=false, until purged */
    key = field_key("12");
    OK(fdb_archive(fdb, key, "HELLO", 5));
    OK(fdb_delete_key(key));
    OK(fdb_flush(fdb));
    CHECK(count_all(fdb, NULL, true) == 4);
    CHECK(count_all(fdb, NULL, false) == 5);
    fdb_request_t* dbreq = NULL;
    OK(fdb_new_request(&dbreq));
    const char* dbkv[][2] = {{"class", "od"}, {"expver", "0001"}, {"stream", "oper"},
                             {"date", "20261122"}, {"time", "1200"}};
    for (size_t i = 0; i < sizeof dbkv / sizeof dbkv[0]; i++) {
        const char* val = dbkv[i][1];
        OK(fdb_request_add(dbreq, dbkv[i][0], &val, 1));
    }
    CHECK(report_lines(fdb, dbreq, 1, false, false) >= 1);
    CHECK(count_all(fdb, NULL, false) == 5);
    report_lines(fdb, dbreq, 1, true, false);
    CHECK(count_all(fdb, NULL, false) == 4);

    /* wipe: a dry run changes nothing; an empty request is refused */
    CHECK(report_lines(fdb, dbreq, 0, false, true) >= 1);
    CHECK(count_listed(fdb, NULL) == 4);
    fdb_request_t* empty = NULL;
    fdb_wipe_iterator_t* wit = NULL;
    OK(fdb_new_request(&empty));
    rc = fdb_wipe(fdb, empty, true, false, false, &wit);
    CHECK(rc == FDB_ERROR_GENERAL_EXCEPTION);
    CHECK(strstr(fdb_error_string(rc), "fdb_wipe needs a request") != NULL);
    OK(fdb_delete_request(empty));
    CHECK(report_lines(fdb, dbreq, 0, true, false) >= 1);
    CHECK(count_listed(fdb, NULL) == 0);
    OK(fdb_delete_request(dbreq));

    /* archive_multiple against a request: exactly the fields it names, each once, or nothing */
    req = request(NULL);
    const char* p130s = "130";
    OK(fdb_request_add(req, "param", &p130s, 1));
    const char* st3[] = {"0", "6", "12"};
    OK(fdb_request_add(req, "step", st3, 3));
    rc = fdb_archive_multiple(fdb, req, grib, glen);
    CHECK(rc == FDB_ERROR_GENERAL_EXCEPTION);
    CHECK(strstr(fdb_error_string(rc), "param=131 is not one of 130") != NULL);
    rc = fdb_archive_multiple(fdb, req, two, two_len);
    CHECK(rc == FDB_ERROR_GENERAL_EXCEPTION);
    CHECK(strstr(fdb_error_string(rc), "lack 1 field(s)") != NULL);
    CHECK(strstr(fdb_error_string(rc), "step=12") != NULL);
    OK(fdb_flush(fdb));
    CHECK(count_listed(fdb, NULL) == 0);
    OK(fdb_request_add(req, "step", st3, 2));
    OK(fdb_archive_multiple(fdb, req, two, two_len));
    OK(fdb_flush(fdb));
    CHECK(count_listed(fdb, NULL) == 2);
    OK(fdb_delete_request(req));

    OK(fdb_delete_handle(fdb));
    CHECK(fdb_flush(NULL) == FDB_ERROR_GENERAL_EXCEPTION);
    OK(fdb_delete_handle(NULL));
    free(back);
    free(grib);
    free(two);
    free(trunc);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    return 0;
}
