/*
 * soak_load.c: the load generator of Ampel's soak run (Benchmarks/soak/run.sh).
 *
 * Sends OwnTracks location messages at a steady rate (default 1,000/s) at QoS 1 for a fixed
 * time, over N devices (default 100,000) on `owntracks/soak/d<NNNNNN>` (device key
 * `soak/d<NNNNNN>`). Devices take turns in one fixed shuffled order, so each device reports
 * every N/rate seconds (100 s by default) and its `tst` values (seconds) are distinct.
 *
 * Each device replays one of the recorded GPS tracks, moved (a constant latitude/longitude
 * offset) so that its starting point is one of the anchor points (positions in Bavaria the
 * script chose with `ampel resolve`), from a random point of the track, a random number of
 * track points further at each fix, turning back at the track's ends. So devices travel
 * across district borders at walking to motorway pace, and some leave Bavaria.
 *
 * Every fix is written to the fix log, one line each, before it is handed to libmosquitto:
 *     <send time, ms since 1970> <device number> <tst> <lat> <lon>
 * with lat/lon in exactly the text of the payload, so the check resolves the same numbers
 * the daemon parsed. At the end it waits (up to 60 s) for every PUBACK and prints one line
 *     load sent=.. acked=.. seconds=.. rate=.. behind_max_ms=.. publish_errors=..
 *
 * Build: gcc -O2 -Wall -o soak_load soak_load.c -lmosquitto -lpthread -lm
 * Usage: soak_load --port P --seconds S --tracks FILE --anchors FILE --log FILE
 *                  [--host H] [--rate R] [--devices N] [--seed X]
 *   tracks file: blocks of "lat lon" lines, one block per track, separated by an empty line
 *   anchors file: "lat lon" lines
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <mosquitto.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct { double lat, lon; } Point;
typedef struct { Point *p; int n; } Track;

typedef struct {
    float dlat, dlon;    /* offset that moves the track onto the anchor */
    int32_t pos;         /* current track point */
    int16_t step;        /* track points per fix */
    int8_t dir;          /* +1 or -1 */
    uint8_t track;
} Device;

static atomic_long acked = 0;
static atomic_int connected = 0;
static volatile sig_atomic_t stop_requested = 0;

static uint64_t rng_state;
static uint64_t next_random(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static int random_below(int n) { return (int)(next_random() % (uint64_t)n); }

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_connect(struct mosquitto *m, void *obj, int rc) {
    (void)m; (void)obj;
    if (rc != 0) { fprintf(stderr, "soak_load: connect refused: %s\n", mosquitto_connack_string(rc)); exit(1); }
    atomic_store(&connected, 1);
}

static void on_publish(struct mosquitto *m, void *obj, int mid) {
    (void)m; (void)obj; (void)mid;
    atomic_fetch_add(&acked, 1);
}

static void on_signal(int sig) { (void)sig; stop_requested = 1; }

static int read_points(const char *path, Track **tracks, int *ntracks, int split) {
    FILE *f = fopen(path, "r");
    if (!f) { perror(path); return -1; }
    char line[256];
    *tracks = NULL; *ntracks = 0;
    Track *cur = NULL;
    while (fgets(line, sizeof line, f)) {
        double lat, lon;
        if (sscanf(line, "%lf %lf", &lat, &lon) != 2) { if (split) cur = NULL; continue; }
        if (!cur) {
            *tracks = realloc(*tracks, sizeof(Track) * (size_t)(*ntracks + 1));
            cur = &(*tracks)[(*ntracks)++];
            cur->p = NULL; cur->n = 0;
        }
        if ((cur->n & (cur->n - 1)) == 0) cur->p = realloc(cur->p, sizeof(Point) * (size_t)(cur->n ? cur->n * 2 : 1));
        cur->p[cur->n++] = (Point){lat, lon};
    }
    fclose(f);
    return 0;
}

int main(int argc, char **argv) {
    const char *host = "127.0.0.1", *tracks_path = NULL, *anchors_path = NULL, *log_path = NULL;
    int port = 0, devices = 100000;
    double rate = 1000, seconds = 0;
    uint64_t seed = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--host")) host = v;
        else if (!strcmp(k, "--port")) port = atoi(v);
        else if (!strcmp(k, "--rate")) rate = atof(v);
        else if (!strcmp(k, "--devices")) devices = atoi(v);
        else if (!strcmp(k, "--seconds")) seconds = atof(v);
        else if (!strcmp(k, "--seed")) seed = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--tracks")) tracks_path = v;
        else if (!strcmp(k, "--anchors")) anchors_path = v;
        else if (!strcmp(k, "--log")) log_path = v;
        else { fprintf(stderr, "soak_load: unknown option %s\n", k); return 64; }
    }
    if (!port || seconds <= 0 || !tracks_path || !anchors_path || !log_path || devices <= 0 || devices > 999999 || rate <= 0) {
        fprintf(stderr, "usage: soak_load --port P --seconds S --tracks FILE --anchors FILE --log FILE "
                        "[--host H] [--rate R] [--devices N<=999999] [--seed X]\n");
        return 64;
    }
    rng_state = seed;

    Track *tracks, *anchor_sets;
    int ntracks, nanchor_sets;
    if (read_points(tracks_path, &tracks, &ntracks, 1) || ntracks == 0) { fprintf(stderr, "soak_load: no tracks\n"); return 1; }
    if (read_points(anchors_path, &anchor_sets, &nanchor_sets, 0) || nanchor_sets == 0) { fprintf(stderr, "soak_load: no anchors\n"); return 1; }
    Track anchors = anchor_sets[0];

    /* Devices: a track, a start point on it, a pace, and the offset onto an anchor. */
    Device *dev = calloc((size_t)devices, sizeof(Device));
    int *order = malloc(sizeof(int) * (size_t)devices);
    for (int d = 0; d < devices; d++) {
        Device *x = &dev[d];
        x->track = (uint8_t)random_below(ntracks);
        Track *t = &tracks[x->track];
        x->pos = random_below(t->n);
        x->dir = random_below(2) ? 1 : -1;
        /* Track points per fix: the A5 route has a point every ~32 m, the München car trace one per
         * second; a fix every 100 s at 10 to 130 km/h is ~ 9 to 110 route points. */
        x->step = (int16_t)(t->n > 1500 ? 9 + random_below(100) : 50 + random_below(100));
        Point a = anchors.p[random_below(anchors.n)];
        x->dlat = (float)(a.lat - t->p[x->pos].lat);
        x->dlon = (float)(a.lon - t->p[x->pos].lon);
        order[d] = d;
    }
    for (int i = devices - 1; i > 0; i--) { /* Fisher-Yates */
        int j = random_below(i + 1), tmp = order[i];
        order[i] = order[j]; order[j] = tmp;
    }

    FILE *log = fopen(log_path, "w");
    if (!log) { perror(log_path); return 1; }
    setvbuf(log, NULL, _IOFBF, 1 << 20);

    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    mosquitto_lib_init();
    struct mosquitto *m = mosquitto_new("ampel-soak-load", true, NULL);
    mosquitto_connect_callback_set(m, on_connect);
    mosquitto_publish_callback_set(m, on_publish);
    mosquitto_int_option(m, MOSQ_OPT_TCP_NODELAY, 1);
    mosquitto_max_inflight_messages_set(m, 1000);
    if (mosquitto_connect(m, host, port, 60) != MOSQ_ERR_SUCCESS) { fprintf(stderr, "soak_load: cannot connect\n"); return 1; }
    mosquitto_loop_start(m);
    for (int i = 0; i < 1000 && !atomic_load(&connected); i++) { struct timespec ts = {0, 10000000}; nanosleep(&ts, NULL); }
    if (!atomic_load(&connected)) { fprintf(stderr, "soak_load: no CONNACK\n"); return 1; }
    printf("load ready\n");
    fflush(stdout);

    const long total = (long)llround(rate * seconds);
    long sent = 0, errors = 0;
    double behind_max = 0;
    const double start = mono();
    char topic[64], payload[256];
    while (sent < total && !stop_requested) {
        double elapsed = mono() - start;
        long due = (long)(elapsed * rate) + 1;
        if (due > total) due = total;
        if (sent >= due) {
            double wake = start + (double)sent / rate; /* when the next fix is due */
            struct timespec ts;
            double rest = wake - mono();
            if (rest > 0) {
                ts.tv_sec = (time_t)rest;
                ts.tv_nsec = (long)((rest - (double)ts.tv_sec) * 1e9);
                nanosleep(&ts, NULL);
            }
            continue;
        }
        double behind = elapsed - (double)sent / rate;
        if (behind > behind_max) behind_max = behind;
        while (sent < due) {
            int d = order[sent % devices];
            Device *x = &dev[d];
            Track *t = &tracks[x->track];
            if (sent >= devices) { /* the first round reports the start points */
                int next = x->pos + x->dir * x->step;
                if (next < 0 || next >= t->n) { x->dir = (int8_t)-x->dir; next = x->pos + x->dir * x->step; }
                if (next < 0) next = 0;
                if (next >= t->n) next = t->n - 1;
                x->pos = next;
            }
            double lat = t->p[x->pos].lat + x->dlat, lon = t->p[x->pos].lon + x->dlon;
            int64_t ms = now_ms();
            long tst = (long)(ms / 1000);
            char slat[24], slon[24];
            snprintf(slat, sizeof slat, "%.6f", lat);
            snprintf(slon, sizeof slon, "%.6f", lon);
            snprintf(topic, sizeof topic, "owntracks/soak/d%06d", d);
            int len = snprintf(payload, sizeof payload,
                               "{\"_type\":\"location\",\"acc\":12,\"batt\":%d,\"lat\":%s,\"lon\":%s,\"tid\":\"sk\",\"tst\":%ld,\"vel\":%d}",
                               20 + d % 80, slat, slon, tst, x->step);
            fprintf(log, "%lld %d %ld %s %s\n", (long long)ms, d, tst, slat, slon);
            int rc = mosquitto_publish(m, NULL, topic, len, payload, 1, false);
            if (rc != MOSQ_ERR_SUCCESS) errors++;
            sent++;
        }
    }
    double took = mono() - start;
    fflush(log);
    /* Every PUBACK, or give up after 60 s. */
    for (int i = 0; i < 6000 && atomic_load(&acked) < sent - errors; i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    fclose(log);
    mosquitto_disconnect(m);
    mosquitto_loop_stop(m, false);
    mosquitto_destroy(m);
    mosquitto_lib_cleanup();
    printf("load sent=%ld acked=%ld seconds=%.3f rate=%.1f behind_max_ms=%.1f publish_errors=%ld stopped_early=%d\n",
           sent, atomic_load(&acked), took, (double)sent / took, behind_max * 1000, errors, stop_requested ? 1 : 0);
    return 0;
}
