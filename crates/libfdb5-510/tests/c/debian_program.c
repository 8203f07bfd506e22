/* A program as a model developer builds it against Debian's libfdb5-dev (5.10.8): compiled
 * with Debian's header, linked with Debian's libfdb5.so.0d. The test runs it unchanged on
 * FDB5 and on fieldstore (LD_LIBRARY_PATH) and compares what it prints and retrieves.
 * Usage: debian_program GRIB OUT. Archives GRIB, lists everything, archives it again and lists
 * everything (both copies), lists one field, retrieves two steps of param 130 into OUT; prints the listing and reader positions on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fdb5/api/fdb_c.h"

#define OK(call)                                                                    \
    do {                                                                            \
        int rc_ = (call);                                                           \
        if (rc_ != FDB_SUCCESS) {                                                   \
            fprintf(stderr, "%s:%d: %s -> %d: %s\n", __FILE__, __LINE__, #call, rc_, \
                    fdb_error_string(rc_));                                         \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

static void add(fdb_request_t* req, const char* k, const char* v) {
    OK(fdb_request_add(req, k, &v, 1));
}

static void list(fdb_handle_t* fdb, const fdb_request_t* req, const char* title) {
    fdb_listiterator_t* it = NULL;
    bool exist = true;
    const char* line = NULL;
    OK(fdb_new_listiterator(&it));
    OK(fdb_list(fdb, req, it));
    printf("%s\n", title);
    for (;;) {
        OK(fdb_listiterator_next(it, &exist, &line));
        if (!exist) break;
        printf("  %s\n", line);
    }
    OK(fdb_delete_listiterator(it));
}

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: debian_program GRIB OUT\n");
        return 2;
    }
    FILE* f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 2; }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char* grib = malloc((size_t)n);
    if (fread(grib, 1, (size_t)n, f) != (size_t)n) { perror(argv[1]); return 2; }
    fclose(f);

    const char* v = NULL;
    OK(fdb_initialise());
    OK(fdb_version(&v));
    printf("version %s\n", v);

    fdb_handle_t* fdb = NULL;
    OK(fdb_new_handle(&fdb));
    OK(fdb_archive_multiple(fdb, NULL, grib, (size_t)n));
    OK(fdb_flush(fdb));

    list(fdb, NULL, "all:");
    /* archived again: 5.10 lists both copies of each field */
    OK(fdb_archive_multiple(fdb, NULL, grib, (size_t)n));
    OK(fdb_flush(fdb));
    list(fdb, NULL, "all, archived twice:");

    fdb_request_t* req = NULL;
    OK(fdb_new_request(&req));
    add(req, "class", "od");
    add(req, "expver", "0001");
    add(req, "stream", "oper");
    add(req, "type", "fc");
    add(req, "date", "20261122");
    add(req, "time", "1200");
    add(req, "domain", "g");
    add(req, "levtype", "pl");
    add(req, "levelist", "850");
    add(req, "param", "130");
    add(req, "step", "0");
    list(fdb, req, "one:");

    const char* steps[] = {"0", "6"};
    OK(fdb_request_add(req, "step", steps, 2));
    fdb_datareader_t* dr = NULL;
    OK(fdb_new_datareader(&dr));
    OK(fdb_retrieve(fdb, req, dr));
    long size = -1, pos = -1, got = 0;
    OK(fdb_datareader_open(dr, &size));
    printf("size %ld\n", size);
    char* buf = malloc((size_t)size + 1);
    OK(fdb_datareader_skip(dr, 4));
    OK(fdb_datareader_tell(dr, &pos));
    printf("after skip %ld\n", pos);
    OK(fdb_datareader_seek(dr, 0));
    long done = 0;
    while (done < size) {
        OK(fdb_datareader_read(dr, buf + done, size - done < 100 ? size - done : 100, &got));
        if (got == 0) break;
        done += got;
    }
    OK(fdb_datareader_tell(dr, &pos));
    printf("read %ld, at %ld\n", done, pos);
    OK(fdb_datareader_close(dr));
    OK(fdb_delete_datareader(dr));
    OK(fdb_delete_request(req));
    OK(fdb_delete_handle(fdb));

    FILE* out = fopen(argv[2], "wb");
    if (!out || fwrite(buf, 1, (size_t)done, out) != (size_t)done) { perror(argv[2]); return 2; }
    fclose(out);
    free(buf);
    free(grib);
    return 0;
}
