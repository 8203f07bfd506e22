/*
 * A model's output loop through MultIO's C API, in plain C: what tests/multio_c.rs builds
 * with `cc` and runs on fieldstore's libmultio-api.so and, when it is installed, on MultIO's.
 *
 *   model run PLAN.yaml DAYS     hourly fields of DAYS days (steps 0..24*DAYS) of two params on
 *                                two grids, written as a model does: field_accepted first, a
 *                                double field (167) and a float field (165), a field the plan
 *                                does not want (168), a flush after each step, a notification,
 *                                a last-step flush, close_connections.
 *   model errors DIR             the failure paths (fieldstore only: MultIO aborts on some):
 *                                prints one line per case, "case: code: message".
 *
 * Every call is checked; a failure prints the code and multio_error_string and exits 1.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "multio_c.h"

static int handler_calls = 0;

static void on_failure(void* context, int code, multio_failure_info_t* info) {
    (void)context;
    handler_calls++;
    fprintf(stderr, "failure handler: code %d: %s\n", code, multio_error_string_info(code, info));
}

#define CHECK(call)                                                                         \
    do {                                                                                    \
        int rc_ = (call);                                                                   \
        if (rc_ != MULTIO_SUCCESS) {                                                        \
            fprintf(stderr, "%s:%d: %s failed: %d: %s\n", __FILE__, __LINE__, #call, rc_, \
                    multio_error_string(rc_));                                              \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

enum { NPOINTS = 48 };

static double value(int param, int step, int i) {
    /* Positive everywhere (MultIO's legacy maximum is wrong for negative values). */
    return 250.0 + (param - 160) * 3.0 + 10.0 * sin(0.37 * i + 0.26 * step) + 0.001 * step + 0.5 * (i % 7);
}

static void set_common(multio_metadata_t* md, const char* param, long long param_id, int step) {
    CHECK(multio_metadata_set_string(md, "param", param));
    CHECK(multio_metadata_set_int(md, "paramId", param_id));
    CHECK(multio_metadata_set_string(md, "levtype", "sfc"));
    CHECK(multio_metadata_set_int(md, "level", 0));
    CHECK(multio_metadata_set_string(md, "gridType", "regular_ll"));
    CHECK(multio_metadata_set_int(md, "startDate", 20250101));
    CHECK(multio_metadata_set_int(md, "startTime", 0));
    CHECK(multio_metadata_set_int(md, "date", 20250101));
    CHECK(multio_metadata_set_int(md, "time", 0));
    CHECK(multio_metadata_set_int(md, "step", step));
    CHECK(multio_metadata_set_int(md, "timeStep", 3600));
    CHECK(multio_metadata_set_int(md, "step-frequency", 1));
    CHECK(multio_metadata_set_int(md, "misc-globalSize", NPOINTS));
    CHECK(multio_metadata_set_bool(md, "bitmapPresent", false));
    CHECK(multio_metadata_set_double(md, "missingValue", 9999.0));
}

static int run(const char* plan, int days) {
    multio_configuration_t* cc = NULL;
    multio_handle_t* mio = NULL;
    const char* version = NULL;
    CHECK(multio_initialise());
    CHECK(multio_version(&version));
    CHECK(multio_new_configuration_from_filename(&cc, plan));
    CHECK(multio_config_set_failure_handler(cc, on_failure, NULL));
    CHECK(multio_new_handle(&mio, cc));
    CHECK(multio_open_connections(mio));

    double dvals[NPOINTS];
    float fvals[NPOINTS];
    int written = 0, skipped = 0;
    for (int step = 0; step <= 24 * days; step++) {
        multio_metadata_t* md = NULL;
        bool accepted = false;

        /* 2t as doubles */
        CHECK(multio_new_metadata(&md, mio));
        set_common(md, "167", 167, step);
        CHECK(multio_field_accepted(mio, md, &accepted));
        if (accepted) {
            for (int i = 0; i < NPOINTS; i++) dvals[i] = value(167, step, i);
            CHECK(multio_write_field_double(mio, md, dvals, NPOINTS));
            written++;
        } else {
            skipped++;
        }

        /* 2d as floats, through a copy of the metadata */
        multio_metadata_t* md2 = NULL;
        CHECK(multio_copy_metadata(&md2, md));
        CHECK(multio_metadata_set_string(md2, "param", "168"));
        CHECK(multio_metadata_set_int(md2, "paramId", 168));
        CHECK(multio_field_accepted(mio, md2, &accepted));
        if (accepted) {
            for (int i = 0; i < NPOINTS; i++) fvals[i] = (float)value(168, step, i);
            CHECK(multio_write_field_float(mio, md2, fvals, NPOINTS));
            written++;
        } else {
            skipped++;
        }
        CHECK(multio_delete_metadata(md2));

        /* 10u: not selected by the plan */
        CHECK(multio_metadata_set_string(md, "param", "165"));
        CHECK(multio_metadata_set_int(md, "paramId", 165));
        CHECK(multio_field_accepted(mio, md, &accepted));
        if (accepted) {
            for (int i = 0; i < NPOINTS; i++) dvals[i] = value(165, step, i);
            CHECK(multio_write_field_double(mio, md, dvals, NPOINTS));
            written++;
        } else {
            skipped++;
        }
        CHECK(multio_delete_metadata(md));

        /* the step is complete */
        multio_metadata_t* fl = NULL;
        CHECK(multio_new_metadata(&fl, mio));
        CHECK(multio_metadata_set_string(fl, "flushKind", "default"));
        CHECK(multio_metadata_set_int(fl, "step", step));
        CHECK(multio_flush(mio, fl));
        CHECK(multio_delete_metadata(fl));
    }

    multio_metadata_t* md = NULL;
    CHECK(multio_new_metadata(&md, mio));
    CHECK(multio_metadata_set_string(md, "trigger", "step"));
    CHECK(multio_metadata_set_string(md, "step", "72"));
    CHECK(multio_notify(mio, md));
    CHECK(multio_delete_metadata(md));

    CHECK(multio_new_metadata(&md, mio));
    CHECK(multio_metadata_set_string(md, "flushKind", "last-step"));
    CHECK(multio_flush(mio, md));
    CHECK(multio_delete_metadata(md));

    CHECK(multio_close_connections(mio));
    CHECK(multio_delete_handle(mio));
    CHECK(multio_delete_configuration(cc));
    printf("model: version %s, %d fields written, %d skipped, %d failures\n", version, written, skipped,
           handler_calls);
    return handler_calls == 0 ? 0 : 1;
}

/* ---- failure paths (built against fieldstore's header only: pymultio's processed_multio.h,
   the header MultIO ships on PyPI, lacks the handle failure handler and the data buffers) ---- */
#ifndef PYMULTIO_HEADER

static void report(const char* what, int rc) {
    /* One line per case; newlines in messages folded so the test can read them. */
    const char* msg = multio_error_string(rc);
    printf("%s: %d: ", what, rc);
    for (const char* p = msg; *p; p++) putchar(*p == '\n' ? ' ' : *p);
    putchar('\n');
}

static void write_file(const char* path, const char* text) {
    FILE* f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

static int errors(const char* dir) {
    char bad_yaml[1024], unknown[1024], refused[1024], good[1024], out[1024];
    snprintf(bad_yaml, sizeof bad_yaml, "%s/bad-yaml.yaml", dir);
    snprintf(unknown, sizeof unknown, "%s/unknown-action.yaml", dir);
    snprintf(refused, sizeof refused, "%s/refused-action.yaml", dir);
    snprintf(good, sizeof good, "%s/good.yaml", dir);
    snprintf(out, sizeof out, "%s/out.raw", dir);
    write_file(bad_yaml, "plans:\n  - name: p\n    actions: [ {type: select, match: [ {paramId: [167]} ]\n");
    write_file(unknown, "plans:\n  - name: p\n    actions:\n      - type: select\n        match: [{paramId: [167]}]\n      - type: statistix\n");
    write_file(refused, "plans:\n  - name: p\n    actions:\n      - type: aggregate\n      - type: sink\n        sinks: []\n");
    char plan[2048];
    snprintf(plan, sizeof plan,
             "plans:\n  - name: daily\n    actions:\n      - type: select\n        match: [{paramId: [167]}]\n"
             "      - type: statistics\n        output-frequency: 1d\n        operations: [average]\n"
             "        options: {initial-condition-present: true}\n      - type: encode\n        format: raw\n"
             "      - type: sink\n        sinks: [{type: file, path: \"%s\", append: false, per-server: false}]\n",
             out);
    write_file(good, plan);

    multio_configuration_t* cc = NULL;
    multio_handle_t* mio = NULL;
    CHECK(multio_initialise());

    report("missing file", multio_new_configuration_from_filename(&cc, "/nonexistent/plan.yaml"));
    report("bad yaml", multio_new_configuration_from_filename(&cc, bad_yaml));

    CHECK(multio_new_configuration_from_filename(&cc, unknown));
    report("unknown action", multio_new_handle(&mio, cc));
    CHECK(multio_delete_configuration(cc));

    CHECK(multio_new_configuration_from_filename(&cc, refused));
    report("refused action", multio_new_handle(&mio, cc));
    CHECK(multio_delete_configuration(cc));

    report("null handle", multio_flush(NULL, NULL));
    report("null config", multio_config_set_path(NULL, "/tmp"));

    CHECK(multio_new_configuration_from_filename(&cc, good));
    CHECK(multio_new_handle(&mio, cc));
    multio_metadata_t* md = NULL;
    CHECK(multio_new_metadata(&md, mio));
    set_common(md, "167", 167, 0);
    double vals[NPOINTS];
    for (int i = 0; i < NPOINTS; i++) vals[i] = 1.0;
    CHECK(multio_write_field_double(mio, md, vals, NPOINTS));
    /* mistyped: a string step */
    CHECK(multio_metadata_set_string(md, "step", "one"));
    report("string step", multio_write_field_double(mio, md, vals, NPOINTS));
    /* missing: no gridType */
    multio_metadata_t* md2 = NULL;
    CHECK(multio_new_metadata(&md2, mio));
    CHECK(multio_metadata_set_int(md2, "paramId", 167));
    CHECK(multio_metadata_set_string(md2, "param", "167"));
    CHECK(multio_metadata_set_int(md2, "step", 1));
    report("missing keys", multio_write_field_double(mio, md2, vals, NPOINTS));
    report("negative size", multio_write_field_double(mio, md2, vals, -1));
    report("null values", multio_write_field_double(mio, md2, NULL, NPOINTS));
    report("domain", multio_write_domain(mio, md2, NULL, 0));
    report("mask", multio_write_mask_double(mio, md2, vals, NPOINTS));
    report("server", multio_start_server(cc));
    CHECK(multio_delete_metadata(md2));

    /* data buffers are bounds-checked (MultIO checks the first position only) */
    multio_data_t* d = NULL;
    CHECK(multio_data_new(&d, mio));
    CHECK(multio_data_resize(d, 4 * (int)sizeof(double)));
    report("buffer overflow", multio_data_set_double_chunk(d, vals, 2, 3));
    report("buffer width", multio_write_field_buffer(mio, md, d, 2));
    CHECK(multio_data_delete(d));

    /* the handle still works: the rest of day 1 gives one daily mean */
    for (int step = 1; step <= 24; step++) {
        CHECK(multio_metadata_set_int(md, "step", step));
        CHECK(multio_write_field_double(mio, md, vals, NPOINTS));
    }
    CHECK(multio_delete_metadata(md));

    /* the failure handler gets the same text through its info */
    CHECK(multio_handle_set_failure_handler(mio, on_failure, NULL));
    CHECK(multio_new_metadata(&md, mio));
    CHECK(multio_metadata_set_int(md, "paramId", 167));
    report("handler", multio_write_field_double(mio, md, vals, NPOINTS));
    CHECK(multio_delete_metadata(md));
    printf("handler calls: %d\n", handler_calls);

    CHECK(multio_delete_handle(mio));
    CHECK(multio_delete_configuration(cc));
    FILE* f = fopen(out, "rb");
    long n = 0;
    if (f) {
        fseek(f, 0, SEEK_END);
        n = ftell(f);
        fclose(f);
    }
    printf("output bytes: %ld\n", n);
    return 0;
}
#endif

int main(int argc, char** argv) {
    if (argc == 4 && strcmp(argv[1], "run") == 0) return run(argv[2], atoi(argv[3]));
#ifndef PYMULTIO_HEADER
    if (argc == 3 && strcmp(argv[1], "errors") == 0) return errors(argv[2]);
#endif
    fprintf(stderr, "usage: model run PLAN.yaml DAYS | model errors DIR\n");
    return 2;
}
