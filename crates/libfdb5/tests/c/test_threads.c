/* Several threads archive through one handle at once (FDB5 documents handles as shareable),
 * each with its own keys and its own thread-local error message; then everything is listed.
 * Usage: test_threads ROOT */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "fdb5/api/fdb_c.h"

#define THREADS 4
#define PER_THREAD 25

struct job {
    fdb_handle_t* fdb;
    int id;
    int failed;
};

static void* worker(void* arg) {
    struct job* j = arg;
    for (int i = 0; i < PER_THREAD; i++) {
        fdb_key_t* key = NULL;
        char step[16], data[32];
        snprintf(step, sizeof step, "%d", j->id * PER_THREAD + i);
        snprintf(data, sizeof data, "field %s", step);
        const char* kv[][2] = {{"class", "od"},  {"expver", "0001"}, {"stream", "oper"},
                               {"type", "fc"},   {"date", "20261122"}, {"time", "0000"},
                               {"levtype", "sfc"}, {"param", "167"}, {"step", step}};
        if (fdb_new_key(&key) != FDB_SUCCESS) j->failed++;
        for (size_t k = 0; k < sizeof kv / sizeof kv[0]; k++)
            if (fdb_key_add(key, kv[k][0], kv[k][1]) != FDB_SUCCESS) j->failed++;
        int rc = fdb_archive(j->fdb, key, data, strlen(data));
        if (rc != FDB_SUCCESS) {
            fprintf(stderr, "thread %d: %s\n", j->id, fdb_error_string(rc));
            j->failed++;
        }
        fdb_delete_key(key);
    }
    /* this thread's failure message is its own */
    int rc = fdb_flush(NULL);
    if (rc != FDB_ERROR_GENERAL_EXCEPTION || strcmp(fdb_error_string(rc), "fdb is NULL") != 0)
        j->failed++;
    return NULL;
}

int main(int argc, char** argv) {
    if (argc != 2) { fprintf(stderr, "usage: test_threads ROOT\n"); return 2; }
    char yaml[4096];
    snprintf(yaml, sizeof yaml, "spaces: [{roots: [{path: %s}]}]", argv[1]);
    fdb_handle_t* fdb = NULL;
    if (fdb_new_handle_from_yaml(&fdb, yaml, "") != FDB_SUCCESS) {
        fprintf(stderr, "handle: %s\n", fdb_error_string(FDB_ERROR_GENERAL_EXCEPTION));
        return 1;
    }
    pthread_t t[THREADS];
    struct job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (struct job){fdb, i, 0};
        pthread_create(&t[i], NULL, worker, &jobs[i]);
    }
    int failed = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        failed += jobs[i].failed;
    }
    if (fdb_flush(fdb) != FDB_SUCCESS) failed++;
    fdb_listiterator_t* it = NULL;
    long n = 0;
    if (fdb_list(fdb, NULL, &it, false, 3) != FDB_SUCCESS) failed++;
    while (it && fdb_listiterator_next(it) == FDB_SUCCESS) n++;
    fdb_delete_listiterator(it);
    fdb_delete_handle(fdb);
    if (n != THREADS * PER_THREAD) {
        fprintf(stderr, "listed %ld fields, archived %d\n", n, THREADS * PER_THREAD);
        failed++;
    }
    return failed ? 1 : 0;
}
