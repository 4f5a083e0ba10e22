/*
 * soak_record.c: the recorder of Ampel's soak run (Benchmarks/soak/run.sh).
 *
 * Subscribes at QoS 1 (clean session, before the daemon starts) to what the check needs and
 * writes one short line per message, with the time it arrived (ms since 1970):
 *
 *   S <ms> <device key> <tst> <dataDate> <phase> <ags|-> <stale 0|1>      ampel/device/<key>/state
 *   A <ms> <device key> <from|null> <to> <dataDate> <ags|->                ampel/device/<key>/alert
 *   D <ms> <ags> <from|null> <to> <dataDate>                               ampel/district/<ags>/alert
 *   I <ms> <payload>                                                       ampel/bridge/info
 *   B <ms> <payload>                                                       ampel/bridge/state
 *   X <ms> <topic> <bytes>                                                 anything else under the base topic
 *
 * The payloads are the daemon's own JSON (sorted keys, no white space; docs/topics.md), read
 * by looking for the top-level keys; a payload whose fields cannot be found is written as a
 * `?` line with its topic, for the check to count.
 *
 * SIGUSR1: from then on, exit once no message has come for --quiet seconds (default 10), so
 * the run ends when the daemon has published everything. SIGTERM/SIGINT: exit now. At exit it
 * prints one line: `record messages=.. states=.. alerts=.. district_alerts=.. infos=.. other=..`.
 *
 * Build: gcc -O2 -Wall -o soak_record soak_record.c -lmosquitto -lpthread
 * Usage: soak_record --port P --out FILE [--host H] [--base ampel] [--quiet 10]
 */
#define _GNU_SOURCE
#include <mosquitto.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static FILE *out;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_long n_messages = 0, n_states = 0, n_alerts = 0, n_district_alerts = 0, n_infos = 0, n_other = 0, n_bad = 0;
static atomic_long last_message_ms = 0;
static atomic_int subscribed = 0;
static volatile sig_atomic_t drain_requested = 0, stop_requested = 0;
static char base[64] = "ampel";
static size_t base_len = 5;

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The value of top-level key `key` in `json` (sorted keys, no white space): a string's
 * characters (without quotes) or a literal/number, copied into `dst`; 0 when not found. */
static int field(const char *json, size_t len, const char *key, char *dst, size_t cap) {
    char pattern[48];
    int plen = snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *end = json + len;
    const char *p = json;
    while ((p = memmem(p, (size_t)(end - p), pattern, (size_t)plen)) != NULL) {
        /* A key follows '{' or ','; inside a string the quote would be escaped. */
        if (p > json && (p[-1] == '{' || p[-1] == ',')) break;
        p += plen;
    }
    if (!p) return 0;
    p += plen;
    size_t n = 0;
    if (p < end && *p == '"') {
        p++;
        while (p < end && *p != '"' && n + 1 < cap) dst[n++] = *p++;
    } else {
        while (p < end && *p != ',' && *p != '}' && n + 1 < cap) dst[n++] = *p++;
    }
    dst[n] = 0;
    return n > 0;
}

/* The district's ags ("district":{"ags":"09162",...}); "-" when the district is null. */
static void district_ags(const char *json, size_t len, char *dst, size_t cap) {
    const char *p = memmem(json, len, "\"district\":{\"ags\":\"", 19);
    if (!p) { snprintf(dst, cap, "-"); return; }
    p += 19;
    size_t n = 0;
    while (p < json + len && *p != '"' && n + 1 < cap) dst[n++] = *p++;
    dst[n] = 0;
}

static void on_connect(struct mosquitto *m, void *obj, int rc) {
    (void)obj;
    if (rc != 0) { fprintf(stderr, "soak_record: connect refused: %s\n", mosquitto_connack_string(rc)); exit(1); }
    /* One subscription for everything under the base topic (overlapping filters could deliver a
     * message twice and fake a doubled alert); what is not a documented topic becomes an X line. */
    char topic[96];
    snprintf(topic, sizeof topic, "%s/#", base);
    mosquitto_subscribe(m, NULL, topic, 1);
}

static void on_subscribe(struct mosquitto *m, void *obj, int mid, int count, const int *granted) {
    (void)m; (void)obj; (void)mid; (void)count; (void)granted;
    atomic_store(&subscribed, 1);
}

/* Whether `topic` is <base>/<kind>/<one level>/<leaf>; the level is copied out. */
static int split_topic(const char *topic, const char *kind, const char *leaf, char *level, size_t cap) {
    size_t klen = strlen(kind);
    if (strncmp(topic, base, base_len) || topic[base_len] != '/') return 0;
    const char *p = topic + base_len + 1;
    if (strncmp(p, kind, klen) || p[klen] != '/') return 0;
    p += klen + 1;
    const char *slash = strrchr(p, '/');
    if (!slash || strcmp(slash + 1, leaf)) return 0;
    size_t n = (size_t)(slash - p);
    if (n == 0 || n + 1 > cap) return 0;
    memcpy(level, p, n);
    level[n] = 0;
    return 1;
}

static void on_message(struct mosquitto *m, void *obj, const struct mosquitto_message *msg) {
    (void)m; (void)obj;
    long long t = now_ms();
    atomic_store(&last_message_ms, (long)t);
    atomic_fetch_add(&n_messages, 1);
    const char *json = msg->payload ? (const char *)msg->payload : "";
    size_t len = (size_t)msg->payloadlen;
    char key[256], a[32], b[32], c[32], ags[16], tst[32];
    pthread_mutex_lock(&out_lock);
    if (split_topic(msg->topic, "device", "state", key, sizeof key)) {
        char stale[8];
        district_ags(json, len, ags, sizeof ags);
        if (field(json, len, "tst", tst, sizeof tst) && field(json, len, "dataDate", a, sizeof a) &&
            field(json, len, "phase", b, sizeof b) && field(json, len, "stale", stale, sizeof stale)) {
            fprintf(out, "S %lld %s %s %s %s %s %d\n", t, key, tst, a, b, ags, stale[0] == 't');
            atomic_fetch_add(&n_states, 1);
        } else if (len == 0) {
            fprintf(out, "S0 %lld %s\n", t, key); /* a retained state cleared */
        } else {
            fprintf(out, "? %lld %s\n", t, msg->topic);
            atomic_fetch_add(&n_bad, 1);
        }
    } else if (split_topic(msg->topic, "device", "alert", key, sizeof key)) {
        district_ags(json, len, ags, sizeof ags);
        if (field(json, len, "from", a, sizeof a) && field(json, len, "to", b, sizeof b) && field(json, len, "dataDate", c, sizeof c)) {
            fprintf(out, "A %lld %s %s %s %s %s\n", t, key, a, b, c, ags);
            atomic_fetch_add(&n_alerts, 1);
        } else {
            fprintf(out, "? %lld %s\n", t, msg->topic);
            atomic_fetch_add(&n_bad, 1);
        }
    } else if (split_topic(msg->topic, "district", "alert", key, sizeof key)) {
        if (field(json, len, "from", a, sizeof a) && field(json, len, "to", b, sizeof b) && field(json, len, "dataDate", c, sizeof c)) {
            fprintf(out, "D %lld %s %s %s %s\n", t, key, a, b, c);
            atomic_fetch_add(&n_district_alerts, 1);
        } else {
            fprintf(out, "? %lld %s\n", t, msg->topic);
            atomic_fetch_add(&n_bad, 1);
        }
    } else if (split_topic(msg->topic, "district", "state", key, sizeof key) ||
               split_topic(msg->topic, "district", "phase", key, sizeof key)) {
        /* documented, not needed by the check */
    } else if (!strncmp(msg->topic, base, base_len) && !strcmp(msg->topic + base_len, "/bridge/info")) {
        fprintf(out, "I %lld %.*s\n", t, (int)len, json);
        atomic_fetch_add(&n_infos, 1);
    } else if (!strncmp(msg->topic, base, base_len) && !strcmp(msg->topic + base_len, "/bridge/state")) {
        fprintf(out, "B %lld %.*s\n", t, (int)len, json);
    } else {
        fprintf(out, "X %lld %s %d\n", t, msg->topic, msg->payloadlen);
        atomic_fetch_add(&n_other, 1);
    }
    pthread_mutex_unlock(&out_lock);
}

static void on_usr1(int sig) { (void)sig; drain_requested = 1; }
static void on_stop(int sig) { (void)sig; stop_requested = 1; }

int main(int argc, char **argv) {
    const char *host = "127.0.0.1", *path = NULL;
    int port = 0;
    double quiet = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--host")) host = argv[i + 1];
        else if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--out")) path = argv[i + 1];
        else if (!strcmp(argv[i], "--quiet")) quiet = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--base")) { snprintf(base, sizeof base, "%s", argv[i + 1]); base_len = strlen(base); }
        else { fprintf(stderr, "soak_record: unknown option %s\n", argv[i]); return 64; }
    }
    if (!port || !path) { fprintf(stderr, "usage: soak_record --port P --out FILE [--host H] [--base ampel] [--quiet S]\n"); return 64; }
    out = fopen(path, "w");
    if (!out) { perror(path); return 1; }
    setvbuf(out, NULL, _IOFBF, 1 << 20);
    signal(SIGUSR1, on_usr1);
    signal(SIGTERM, on_stop);
    signal(SIGINT, on_stop);

    mosquitto_lib_init();
    struct mosquitto *m = mosquitto_new("ampel-soak-record", true, NULL);
    mosquitto_connect_callback_set(m, on_connect);
    mosquitto_subscribe_callback_set(m, on_subscribe);
    mosquitto_message_callback_set(m, on_message);
    mosquitto_int_option(m, MOSQ_OPT_TCP_NODELAY, 1);
    if (mosquitto_connect(m, host, port, 60) != MOSQ_ERR_SUCCESS) { fprintf(stderr, "soak_record: cannot connect\n"); return 1; }
    mosquitto_loop_start(m);
    for (int i = 0; i < 1000 && !atomic_load(&subscribed); i++) { struct timespec ts = {0, 10000000}; nanosleep(&ts, NULL); }
    if (!atomic_load(&subscribed)) { fprintf(stderr, "soak_record: not subscribed\n"); return 1; }
    printf("record ready\n");
    fflush(stdout);

    long long drain_since = 0;
    while (!stop_requested) {
        struct timespec ts = {0, 200000000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&out_lock);
        fflush(out);
        pthread_mutex_unlock(&out_lock);
        if (drain_requested) {
            long long t = now_ms();
            if (!drain_since) drain_since = t;
            long long last = atomic_load(&last_message_ms);
            if (last < drain_since) last = drain_since;
            if ((double)(t - last) >= quiet * 1000) break;
        }
    }
    mosquitto_disconnect(m);
    mosquitto_loop_stop(m, false);
    pthread_mutex_lock(&out_lock);
    fclose(out);
    pthread_mutex_unlock(&out_lock);
    mosquitto_destroy(m);
    mosquitto_lib_cleanup();
    printf("record messages=%ld states=%ld alerts=%ld district_alerts=%ld infos=%ld other=%ld unreadable=%ld\n",
           atomic_load(&n_messages), atomic_load(&n_states), atomic_load(&n_alerts), atomic_load(&n_district_alerts),
           atomic_load(&n_infos), atomic_load(&n_other), atomic_load(&n_bad));
    return 0;
}
