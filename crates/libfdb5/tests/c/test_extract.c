/* fieldstore_extract (fieldstore/fdb_subscribe.h) from C: archives a GRIB file into a toc store,
 * extracts two ranges of every field a request names and prints, per field, its key and the
 * values as exact hex floats (%a), so the test compares them bit for bit with an ecCodes
 * decode. Then fieldstore_extract_index (the fields are small: named, left as they are), and
 * bad calls: ranges out of order, NULL out pointers.
 * Usage: test_extract ROOT FIELDS.grib */
#include <stdio.h>
#include <string.h>

#include "fdb5/api/fdb_c.h"
#include "fieldstore/fdb_subscribe.h"
#include "check.h"

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_extract ROOT FIELDS.grib\n");
        return 2;
    }
    char yaml[4096];
    snprintf(yaml, sizeof yaml,
             "type: local\nengine: toc\nspaces:\n- handler: Default\n  roots:\n  - path: %s\n",
             argv[1]);
    fdb_handle_t* fdb = NULL;
    OK(fdb_initialise());
    OK(fdb_new_handle_from_yaml(&fdb, yaml, NULL));
    (void)on_failure;
    size_t len = 0;
    char* data = slurp(argv[2], &len);
    OK(fdb_archive_multiple(fdb, NULL, data, len));
    OK(fdb_flush(fdb));

    fdb_request_t* req = NULL;
    OK(fdb_new_request(&req));
    const char* cls[] = {"od"};
    const char* params[] = {"130", "131"};
    const char* steps[] = {"0", "6"};
    OK(fdb_request_add(req, "class", cls, 1));
    OK(fdb_request_add(req, "param", params, 2));
    OK(fdb_request_add(req, "step", steps, 2));
    const char* more[][2] = {{"expver", "0001"}, {"stream", "oper"}, {"type", "fc"},
                             {"date", "20261122"}, {"time", "1200"}, {"levtype", "pl"},
                             {"levelist", "850"}};
    for (size_t k = 0; k < sizeof more / sizeof more[0]; k++)
        OK(fdb_request_add(req, more[k][0], &more[k][1], 1));

    size_t ranges[] = {0, 3, 10, 20};
    fieldstore_extraction_t* ex = NULL;
    OK(fieldstore_extract(fdb, req, ranges, 2, &ex));
    size_t n = 0;
    OK(fieldstore_extraction_count(ex, &n));
    CHECK(n == 3); /* 130 at steps 0 and 6, 131 at step 0 */
    for (size_t f = 0; f < n; f++) {
        const char* key = NULL;
        OK(fieldstore_extraction_key(ex, f, &key));
        printf("field %s\n", key);
        for (size_t r = 0; r < 2; r++) {
            const double* v = NULL;
            size_t count = 0;
            const unsigned long long* mask = NULL;
            size_t words = 0;
            OK(fieldstore_extraction_values(ex, f, r, &v, &count));
            OK(fieldstore_extraction_mask(ex, f, r, &mask, &words));
            CHECK(count == ranges[2 * r + 1] - ranges[2 * r]);
            CHECK(words == 1 && mask[0] == (1ULL << count) - 1);
            for (size_t i = 0; i < count; i++) printf("%zu %a\n", ranges[2 * r] + i, v[i]);
        }
    }
    {
        const double* v = NULL;
        size_t count = 0;
        FAILS(fieldstore_extraction_values(ex, 3, 0, &v, &count), "field 3");
    }
    OK(fieldstore_delete_extraction(ex));

    /* extract-index: these fields are small (read whole anyway): named, none added. */
    fieldstore_extract_index_report_t rep;
    memset(&rep, 0xff, sizeof rep);
    OK(fieldstore_extract_index(fdb, req, 1, &rep));
    CHECK(rep.fields == 3 && rep.added == 0 && rep.added + rep.already + rep.left == 3);
    CHECK(rep.side_files == 0);
    OK(fieldstore_extract_index(fdb, req, 0, &rep));
    CHECK(rep.fields == 3 && rep.left == 3 && rep.side_files == 0);
    FAILS(fieldstore_extract_index(fdb, req, 0, NULL), "NULL");

    size_t backwards[] = {10, 20, 0, 3};
    ex = NULL;
    FAILS(fieldstore_extract(fdb, req, backwards, 2, &ex), "out of order");
    FAILS(fieldstore_extract(fdb, req, ranges, 2, NULL), "NULL");
    OK(fieldstore_delete_extraction(NULL));

    fdb_delete_request(req);
    OK(fdb_delete_handle(fdb));
    free(data);
    return failures == 0 ? 0 : 1;
}
