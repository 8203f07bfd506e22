/* Lists a replaced field through fdb_list with `duplicates` true and false, and prints what it
 * got: built against fieldstore's libfdb5.so and against upstream FDB5's, run on
 * each, the two outputs must be the same (FDB5 passes `duplicates` on as `deduplicate`).
 * Usage: list_duplicates ROOT GRIB (GRIB: one field, param 130 on 850 hPa at step 0; see
 * c_api.rs). Exits 0 after printing OK. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fdb5/api/fdb_c.h"

static void ok(int rc, const char* what) {
    if (rc != FDB_SUCCESS) {
        fprintf(stderr, "%s -> %d: %s\n", what, rc, fdb_error_string(rc));
        exit(1);
    }
}

static const char* KEY[][2] = {{"class", "od"},      {"expver", "0001"}, {"stream", "oper"},
                               {"date", "20261122"}, {"time", "1200"},   {"type", "fc"},
                               {"levtype", "pl"},    {"levelist", "850"}, {"param", "130"},
                               {"step", "0"}};
#define NKEY (sizeof KEY / sizeof KEY[0])

static void archive(fdb_handle_t* fdb, const char* data, size_t len) {
    fdb_key_t* key = NULL;
    ok(fdb_new_key(&key), "fdb_new_key");
    for (size_t i = 0; i < NKEY; i++) ok(fdb_key_add(key, KEY[i][0], KEY[i][1]), "fdb_key_add");
    ok(fdb_archive(fdb, key, data, len), "fdb_archive");
    ok(fdb_delete_key(key), "fdb_delete_key");
    ok(fdb_flush(fdb), "fdb_flush");
}

/* Prints how many elements fdb_list gives, and at depth 3 their lengths. */
static void list(fdb_handle_t* fdb, fdb_request_t* req, bool duplicates, int depth) {
    fdb_listiterator_t* it = NULL;
    ok(fdb_list(fdb, req, &it, duplicates, depth), "fdb_list");
    long n = 0;
    size_t total = 0;
    int rc;
    while ((rc = fdb_listiterator_next(it)) == FDB_SUCCESS) {
        if (depth == 3) {
            const char* uri = NULL;
            size_t off = 0, len = 0;
            ok(fdb_listiterator_attrs(it, &uri, &off, &len), "fdb_listiterator_attrs");
            total += len;
        }
        n++;
    }
    if (rc != FDB_ITERATION_COMPLETE) ok(rc, "fdb_listiterator_next");
    ok(fdb_delete_listiterator(it), "fdb_delete_listiterator");
    printf("depth=%d duplicates=%s: %ld listed", depth, duplicates ? "true" : "false", n);
    if (depth == 3) printf(", %zu bytes", total);
    printf("\n");
}

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: list_duplicates ROOT GRIB\n");
        return 2;
    }
    FILE* f = fopen(argv[2], "rb");
    if (!f) { perror(argv[2]); return 2; }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char* grib = malloc(len > 0 ? (size_t)len : 1);
    if (len <= 0 || fread(grib, 1, (size_t)len, f) != (size_t)len) { perror(argv[2]); return 2; }
    fclose(f);

    ok(fdb_initialise(), "fdb_initialise");
    char config[4096];
    snprintf(config, sizeof config,
             "type: local\nengine: toc\nspaces:\n  - roots:\n      - path: %s\n", argv[1]);
    fdb_handle_t* fdb = NULL;
    ok(fdb_new_handle_from_yaml(&fdb, config, ""), "fdb_new_handle_from_yaml");
    /* The same field archived twice, each copy flushed: the first is masked by the second. */
    archive(fdb, grib, (size_t)len);
    archive(fdb, grib, (size_t)len);

    fdb_request_t* req = NULL;
    ok(fdb_new_request(&req), "fdb_new_request");
    for (size_t i = 0; i < NKEY; i++) ok(fdb_request_add(req, KEY[i][0], &KEY[i][1], 1), "fdb_request_add");
    list(fdb, req, true, 3);
    list(fdb, req, false, 3);
    /* Databases and indexes, each once. (Without deduplication FDB5 lists an index key once per
     * flush that wrote it, fieldstore once: its flushes' indexes are merged as they pile up.) */
    list(fdb, req, true, 2);
    list(fdb, req, true, 1);
    ok(fdb_delete_request(req), "fdb_delete_request");
    ok(fdb_delete_handle(fdb), "fdb_delete_handle");
    free(grib);
    printf("OK\n");
    return 0;
}
