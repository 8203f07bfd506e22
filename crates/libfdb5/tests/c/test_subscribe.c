/* fieldstore's C extensions (fieldstore/fdb_subscribe.h) on a memory store: a subscription sees
 * each flushed field once and resumes from its position; fieldstore_retrieve_wait returns when
 * a producer thread flushes the last field, and times out naming a field that never comes.
 * Usage: test_subscribe */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fdb5/api/fdb_c.h"
#include "fieldstore/fdb_subscribe.h"
#include "check.h"

static const char* kv[][2] = {{"class", "od"},   {"expver", "0001"},   {"stream", "oper"},
                              {"type", "fc"},    {"date", "20261122"}, {"time", "0000"},
                              {"levtype", "sfc"}, {"param", "167"}};
#define NKV (sizeof kv / sizeof kv[0])

static void archive(fdb_handle_t* fdb, const char* step) {
    fdb_key_t* key = NULL;
    char data[32];
    snprintf(data, sizeof data, "field %s", step);
    OK(fdb_new_key(&key));
    for (size_t k = 0; k < NKV; k++) OK(fdb_key_add(key, kv[k][0], kv[k][1]));
    OK(fdb_key_add(key, "step", step));
    OK(fdb_archive(fdb, key, data, strlen(data)));
    fdb_delete_key(key);
}

static fdb_request_t* request(const char** steps, int n) {
    fdb_request_t* req = NULL;
    OK(fdb_new_request(&req));
    for (size_t k = 0; k < NKV; k++) OK(fdb_request_add(req, kv[k][0], &kv[k][1], 1));
    if (n > 0) OK(fdb_request_add(req, "step", steps, n));
    return req;
}

static void* late_producer(void* arg) {
    fdb_handle_t* fdb = arg;
    struct timespec pause = {0, 200 * 1000 * 1000};
    nanosleep(&pause, NULL);
    archive(fdb, "12");
    OK(fdb_flush(fdb));
    return NULL;
}

int main(void) {
    fdb_handle_t* fdb = NULL;
    OK(fdb_initialise());
    OK(fdb_new_handle_from_yaml(&fdb, "type: local\nengine: memory\n", NULL));
    OK(fdb_set_failure_handler(on_failure, &handler_calls));
    (void)slurp;

    /* Subscribed before the flush: both fields, in flush order, each once. */
    fieldstore_subscription_t* sub = NULL;
    fdb_request_t* all = request(NULL, 0);
    OK(fieldstore_subscribe(fdb, all, "now", &sub));
    archive(fdb, "0");
    OK(fdb_flush(fdb));
    archive(fdb, "6");
    OK(fdb_flush(fdb));
    int got = 0;
    const char* value = NULL;
    const char* key = NULL;
    OK(fieldstore_subscription_next(sub, 5000, &got));
    CHECK(got == 1);
    OK(fieldstore_subscription_value(sub, "step", &value));
    CHECK(value && strcmp(value, "0") == 0);
    OK(fieldstore_subscription_key(sub, &key));
    CHECK(key && strstr(key, "{class=od") == key && strstr(key, "step=0"));
    OK(fieldstore_subscription_value(sub, "number", &value));
    CHECK(value == NULL);
    const char* uri = NULL;
    size_t off = 99, len = 0;
    OK(fieldstore_subscription_attrs(sub, &uri, &off, &len));
    CHECK(len == strlen("field 0"));
    const char* pos = NULL;
    OK(fieldstore_subscription_position(sub, &pos));
    char saved[4096];
    CHECK(pos && strlen(pos) < sizeof saved);
    snprintf(saved, sizeof saved, "%s", pos);
    OK(fieldstore_subscription_next(sub, 5000, &got));
    CHECK(got == 1);
    OK(fieldstore_subscription_value(sub, "step", &value));
    CHECK(value && strcmp(value, "6") == 0);
    OK(fieldstore_subscription_next(sub, 100, &got));
    CHECK(got == 0);
    OK(fieldstore_delete_subscription(sub));

    /* Resumed from the position after step 0: step 6 alone. */
    OK(fieldstore_subscribe(fdb, all, saved, &sub));
    OK(fieldstore_subscription_next(sub, 5000, &got));
    CHECK(got == 1);
    OK(fieldstore_subscription_value(sub, "step", &value));
    CHECK(value && strcmp(value, "6") == 0);
    OK(fieldstore_subscription_next(sub, 100, &got));
    CHECK(got == 0);
    OK(fieldstore_delete_subscription(sub));
    FAILS(fieldstore_subscribe(fdb, all, "yesterday", &sub), "not a subscription position");
    CHECK(strcmp(fieldstore_error_kind(), "bad-request") == 0);
    FAILS(fieldstore_subscription_next(NULL, 0, &got), "sub is NULL");

    /* Waiting: step 12 comes from another thread 200 ms later. */
    const char* steps[] = {"0", "6", "12"};
    fdb_request_t* three = request(steps, 3);
    fdb_datareader_t* dr = NULL;
    OK(fdb_new_datareader(&dr));
    pthread_t producer;
    CHECK(pthread_create(&producer, NULL, late_producer, fdb) == 0);
    OK(fieldstore_retrieve_wait(fdb, three, 10000, dr));
    pthread_join(producer, NULL);
    long size = 0;
    OK(fdb_datareader_open(dr, &size));
    CHECK(size == (long)(strlen("field 0") + strlen("field 6") + strlen("field 12")));

    /* Step 18 never comes: a timeout naming it. */
    const char* never[] = {"6", "18"};
    fdb_request_t* missing = request(never, 2);
    FAILS(fieldstore_retrieve_wait(fdb, missing, 200, dr), "step=18");
    CHECK(strcmp(fieldstore_error_kind(), "timeout") == 0);

    CHECK(handler_calls == 3);
    fdb_delete_datareader(dr);
    fdb_delete_request(all);
    fdb_delete_request(three);
    fdb_delete_request(missing);
    fdb_delete_handle(fdb);
    if (failures) fprintf(stderr, "%d failures\n", failures);
    return failures ? 1 : 0;
}
