/* What the C test programs of both ABIs share: failure counting macros, a failure handler that
 * counts its calls, reading a file whole. Include after fdb5/api/fdb_c.h. */
#ifndef FIELDSTORE_TEST_CHECK_H
#define FIELDSTORE_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);  \
            failures++;                                                               \
        }                                                                             \
    } while (0)
#define OK(call)                                                                      \
    do {                                                                              \
        int rc_ = (call);                                                             \
        if (rc_ != FDB_SUCCESS) {                                                     \
            fprintf(stderr, "%s:%d: %s -> %d: %s\n", __FILE__, __LINE__, #call, rc_,   \
                    fdb_error_string(rc_));                                           \
            failures++;                                                               \
        }                                                                             \
    } while (0)
/* A call that must fail with a message containing `text`. */
#define FAILS(call, text)                                                             \
    do {                                                                              \
        int rc_ = (call);                                                             \
        CHECK(rc_ == FDB_ERROR_GENERAL_EXCEPTION);                                    \
        if (strstr(fdb_error_string(rc_), text) == NULL) {                            \
            fprintf(stderr, "%s:%d: %s: message \"%s\" lacks \"%s\"\n", __FILE__,      \
                    __LINE__, #call, fdb_error_string(rc_), text);                    \
            failures++;                                                               \
        }                                                                             \
    } while (0)

static int handler_calls = 0;
static void on_failure(void* context, int code) {
    CHECK(context == &handler_calls);
    CHECK(code == FDB_ERROR_GENERAL_EXCEPTION);
    handler_calls++;
}

static char* slurp(const char* path, size_t* len) {
    FILE* f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char* buf = malloc(n > 0 ? (size_t)n : 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) { perror(path); exit(2); }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

#endif
