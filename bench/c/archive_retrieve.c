/*
 * Archive N small GRIB fields through FDB5's C API, one key per field, flush, then retrieve them
 * back (a) one request per field, as a post-processing loop does, and (b) one request naming
 * them all; every byte is checked against what was archived.
 *
 * Only functions both C ABIs share (Debian's FDB5 5.10 and upstream's current one), so the same
 * binary, compiled against Debian's header and linked against Debian's libfdb5.so.0d, runs on
 * FDB5 or, by LD_LIBRARY_PATH, on fieldstore's library.
 *
 * Usage: archive_retrieve CORPUS.grib
 *   CORPUS: the fields `fieldstore sample --params t/u/v/q --levels 1000/925/850/700/500/400/300/
 *   250/200/100 --steps 0/1/.../S-1` writes (step, level, param order; 40 fields a step). The store
 *   is the one FDB5_CONFIG_FILE names. Prints one line of `name=value` figures on stdout.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fdb5/api/fdb_c.h"

#define NLEVELS 10
#define NPARAMS 4
static const char* LEVELS[NLEVELS] = {"1000", "925", "850", "700", "500",
                                      "400",  "300", "250", "200", "100"};
static const char* PARAMS[NPARAMS] = {"130", "131", "132", "133"};
static const char* FIXED[][2] = {{"class", "od"},    {"expver", "0001"}, {"stream", "oper"},
                                 {"date", "20261122"}, {"time", "1200"}, {"domain", "g"},
                                 {"type", "fc"},     {"levtype", "pl"}};
#define NFIXED (sizeof(FIXED) / sizeof(FIXED[0]))

static void check(int err, const char* what) {
    if (err != FDB_SUCCESS) {
        fprintf(stderr, "archive_retrieve: %s failed (%d): %s\n", what, err, fdb_error_string(err));
        exit(1);
    }
}

static void die(const char* msg) {
    fprintf(stderr, "archive_retrieve: %s\n", msg);
    exit(1);
}

static void* xmalloc(size_t n) {
    void* p = malloc(n ? n : 1);
    if (!p)
        die("out of memory");
    return p;
}

static void* xrealloc(void* p, size_t n) {
    p = realloc(p, n);
    if (!p)
        die("out of memory");
    return p;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Length of the GRIB message at p (edition 1 or 2), or 0 when it is not one. */
static size_t grib_length(const unsigned char* p, size_t avail) {
    if (avail < 16 || memcmp(p, "GRIB", 4) != 0)
        return 0;
    size_t n = 0;
    if (p[7] == 2) {
        for (int i = 8; i < 16; i++)
            n = (n << 8) | p[i];
    } else if (p[7] == 1) {
        n = ((size_t)p[4] << 16) | ((size_t)p[5] << 8) | p[6];
    }
    return n <= avail ? n : 0;
}

static uint64_t fnv1a(const unsigned char* p, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static int cmp_u64(const void* a, const void* b) {
    uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
    return x < y ? -1 : x > y;
}

/* Field i of the corpus: its step, level and param, in the order the corpus holds them. */
static void field_axes(size_t i, char* step, size_t len, const char** level, const char** param) {
    snprintf(step, len, "%zu", i / (NLEVELS * NPARAMS));
    *level = LEVELS[(i / NPARAMS) % NLEVELS];
    *param = PARAMS[i % NPARAMS];
}

static void add1(fdb_request_t* req, const char* k, const char* v) {
    const char* vals[1] = {v};
    check(fdb_request_add(req, k, vals, 1), "fdb_request_add");
}

/* Reads everything the reader holds into buf (capacity cap); returns the bytes read. */
static size_t read_all(fdb_datareader_t* dr, unsigned char* buf, size_t cap) {
    long size = 0, got = 0;
    size_t done = 0;
    check(fdb_datareader_open(dr, &size), "fdb_datareader_open");
    do {
        if (done == cap)
            die("retrieved more bytes than were archived");
        check(fdb_datareader_read(dr, buf + done, (long)(cap - done), &got), "fdb_datareader_read");
        done += (size_t)got;
    } while (got > 0);
    check(fdb_datareader_close(dr), "fdb_datareader_close");
    return done;
}

int main(int argc, char** argv) {
    if (argc != 2)
        die("usage: archive_retrieve CORPUS.grib");
    FILE* f = fopen(argv[1], "rb");
    if (!f)
        die("cannot open the corpus");
    fseek(f, 0, SEEK_END);
    size_t total = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char* corpus = xmalloc(total);
    if (fread(corpus, 1, total, f) != total)
        die("cannot read the corpus");
    fclose(f);

    size_t n = 0, cap = 1024, maxlen = 0;
    size_t* off = xmalloc(cap * sizeof(size_t));
    size_t* len = xmalloc(cap * sizeof(size_t));
    for (size_t p = 0; p < total;) {
        size_t l = grib_length(corpus + p, total - p);
        if (l == 0)
            die("the corpus is not a sequence of GRIB messages");
        if (n == cap) {
            cap *= 2;
            off = xrealloc(off, cap * sizeof(size_t));
            len = xrealloc(len, cap * sizeof(size_t));
        }
        off[n] = p;
        len[n] = l;
        if (l > maxlen)
            maxlen = l;
        n++;
        p += l;
    }
    if (n == 0 || n % (NLEVELS * NPARAMS) != 0)
        die("the corpus must hold 40 fields a step (4 params x 10 levels)");
    size_t steps = n / (NLEVELS * NPARAMS);
    char step[32];
    const char *level, *param;

    check(fdb_initialise(), "fdb_initialise");

    /* Archive: a key per field, built as a model's output loop builds it, then one flush. */
    fdb_handle_t* fdb = NULL;
    check(fdb_new_handle(&fdb), "fdb_new_handle");
    double t0 = now();
    for (size_t i = 0; i < n; i++) {
        fdb_key_t* key = NULL;
        check(fdb_new_key(&key), "fdb_new_key");
        for (size_t k = 0; k < NFIXED; k++)
            check(fdb_key_add(key, FIXED[k][0], FIXED[k][1]), "fdb_key_add");
        field_axes(i, step, sizeof step, &level, &param);
        check(fdb_key_add(key, "step", step), "fdb_key_add");
        check(fdb_key_add(key, "levelist", level), "fdb_key_add");
        check(fdb_key_add(key, "param", param), "fdb_key_add");
        check(fdb_archive(fdb, key, (const char*)corpus + off[i], len[i]), "fdb_archive");
        check(fdb_delete_key(key), "fdb_delete_key");
    }
    check(fdb_flush(fdb), "fdb_flush");
    double archive_s = now() - t0;
    check(fdb_delete_handle(fdb), "fdb_delete_handle");

    /* (a) One request per field, through a new handle, as a later post-processing run would. */
    fdb = NULL;
    check(fdb_new_handle(&fdb), "fdb_new_handle");
    fdb_datareader_t* dr = NULL;
    check(fdb_new_datareader(&dr), "fdb_new_datareader");
    unsigned char* one = xmalloc(maxlen + 1);
    size_t each_bytes = 0;
    t0 = now();
    for (size_t i = 0; i < n; i++) {
        fdb_request_t* req = NULL;
        check(fdb_new_request(&req), "fdb_new_request");
        for (size_t k = 0; k < NFIXED; k++)
            add1(req, FIXED[k][0], FIXED[k][1]);
        field_axes(i, step, sizeof step, &level, &param);
        add1(req, "step", step);
        add1(req, "levelist", level);
        add1(req, "param", param);
        check(fdb_retrieve(fdb, req, dr), "fdb_retrieve");
        size_t got = read_all(dr, one, maxlen + 1);
        if (got != len[i] || memcmp(one, corpus + off[i], got) != 0) {
            fprintf(stderr, "archive_retrieve: field %zu (step %s, level %s, param %s): got %zu bytes, "
                            "archived %zu, or different bytes\n", i, step, level, param, got, len[i]);
            exit(1);
        }
        each_bytes += got;
        check(fdb_delete_request(req), "fdb_delete_request");
    }
    double each_s = now() - t0;

    /* (b) One request naming every field; its order is the library's, so the messages are
     * compared as a multiset of digests. */
    unsigned char* all = xmalloc(total + 1);
    char** stepv = xmalloc(steps * sizeof(char*));
    for (size_t s = 0; s < steps; s++) {
        stepv[s] = xmalloc(24);
        snprintf(stepv[s], 24, "%zu", s);
    }
    t0 = now();
    fdb_request_t* req = NULL;
    check(fdb_new_request(&req), "fdb_new_request");
    for (size_t k = 0; k < NFIXED; k++)
        add1(req, FIXED[k][0], FIXED[k][1]);
    check(fdb_request_add(req, "step", (const char**)stepv, (int)steps), "fdb_request_add");
    check(fdb_request_add(req, "levelist", LEVELS, NLEVELS), "fdb_request_add");
    check(fdb_request_add(req, "param", PARAMS, NPARAMS), "fdb_request_add");
    check(fdb_retrieve(fdb, req, dr), "fdb_retrieve");
    size_t all_bytes = read_all(dr, all, total + 1);
    double all_s = now() - t0;
    check(fdb_delete_request(req), "fdb_delete_request");

    if (all_bytes != total)
        die("retrieving everything gave a different number of bytes than were archived");
    uint64_t* want = xmalloc(n * sizeof(uint64_t));
    uint64_t* have = xmalloc(n * sizeof(uint64_t));
    size_t m = 0;
    for (size_t p = 0; p < all_bytes; m++) {
        size_t l = grib_length(all + p, all_bytes - p);
        if (l == 0 || m == n)
            die("retrieving everything gave bytes that are not the archived messages");
        have[m] = fnv1a(all + p, l);
        p += l;
    }
    if (m != n)
        die("retrieving everything gave a different number of fields than were archived");
    for (size_t i = 0; i < n; i++)
        want[i] = fnv1a(corpus + off[i], len[i]);
    qsort(want, n, sizeof(uint64_t), cmp_u64);
    qsort(have, n, sizeof(uint64_t), cmp_u64);
    if (memcmp(want, have, n * sizeof(uint64_t)) != 0)
        die("retrieving everything gave different fields than were archived");

    check(fdb_delete_datareader(dr), "fdb_delete_datareader");
    check(fdb_delete_handle(fdb), "fdb_delete_handle");
    /* Which library ran: fieldstore's vcs version is fieldstore-<version>; FDB5's may be empty. */
    const char *version = "?", *vcs = "?";
    check(fdb_version(&version), "fdb_version");
    check(fdb_vcs_version(&vcs), "fdb_vcs_version");
    printf("fields=%zu bytes=%zu archive_s=%.6f retrieve_each_s=%.6f retrieve_all_s=%.6f "
           "archive_fps=%.0f retrieve_each_fps=%.0f retrieve_all_fps=%.0f checked=%zu version=%s library=%s\n",
           n, total, archive_s, each_s, all_s, n / archive_s, n / each_s, n / all_s,
           each_bytes + all_bytes, version, *vcs ? vcs : "-");
    return 0;
}
