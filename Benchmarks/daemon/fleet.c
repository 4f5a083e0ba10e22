// Fleet benchmark for `ampel run` and two C relays on libmosquitto (issue 16).
//
//   fleet relay --port P --kind twin|plain|sink --qos Q [--size BYTES] [--inflight N]
//       twin:  subscribes to bench/relay/in/+ at QoS Q (as the daemon subscribes to its
//              inputs) and publishes, per message, one retained QoS 1 message of BYTES bytes
//              on bench-twin/device/<key>/state: the daemon's MQTT work and nothing else.
//              With --alert-every N (twin_alerts): every Nth message also has an alert of
//              --alert-size bytes on bench-twin_alerts/device/<key>/alert, sent before its state,
//              both at --alert-qos (the daemon's mqtt.alert_qos, the state being the alert's
//              witness): the daemon's alerts as well.
//       plain: the same, passing the input's payload through (bench-plain/device/<key>/state).
//       sink:  takes the messages in and publishes nothing but the markers' states: the
//              broker's floor, the work of taking fixes in that any target costs it.
//   fleet load --port P --target daemon|twin|plain --qos Q --route FILE --devices N --count C
//              --target-pid PID --broker-pid PID [--batch 500] [--window 4] [--interval-ms 0]
//       Devices replay the route (one "lat lon" per line, ~1 km apart) from spread offsets,
//       one point per fix. Every `batch` fixes a marker fix of a new device follows, whose
//       output (a first sighting always publishes) says that everything before it was
//       handled; at most `window` markers are outstanding. Prints one line: fixes/s, CPU of
//       the target and of the broker per fix (from /proc/<pid>/stat), and the messages and
//       bytes (topic + payload) the target published per fix, as a subscriber to all its
//       outputs received them (markers' outputs not counted).
//   fleet burst --port P --publishers P --count C --devices D [--qos 0] [--round R] [--alternate 1]
//       P publishers at once (a process and a connection each), each as fast as libmosquitto
//       lets it, send C OwnTracks fixes for D devices of their own (round robin), as a fleet
//       reconnecting after a network outage does (Benchmarks/burst/run.sh). `--alternate 1`
//       puts every device's fixes alternately in SK München and LK Altötting (red and green on
//       2020-10-15): each fix changes its phase, the worst case for the daemon's outgoing side.
//       A fix's `tst` grows with each round; `R` offsets the rounds of a second run. Prints,
//       per publisher, the fixes handed to the broker and the seconds it took.
#define _GNU_SOURCE
#include <mosquitto.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *arg(int argc, char **argv, const char *name, const char *fallback) {
    for (int i = 2; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0) return argv[i + 1];
    return fallback;
}

static void die(const char *what, int rc) {
    fprintf(stderr, "fleet: %s: %s\n", what, mosquitto_strerror(rc));
    exit(1);
}

// The in-flight window of the next client (the relay's is the daemon's: the broker's
// max_inflight_messages, fleet.sh INFLIGHT).
static unsigned int client_inflight = 1000;

static struct mosquitto *client(const char *id, int port, void *context) {
    struct mosquitto *m = mosquitto_new(id, true, context);
    if (!m) die("mosquitto_new", MOSQ_ERR_NOMEM);
    mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311);
    mosquitto_max_inflight_messages_set(m, client_inflight);
    int rc = mosquitto_connect(m, "127.0.0.1", port, 60);
    if (rc != MOSQ_ERR_SUCCESS) die("connect", rc);
    return m;
}

// MARK: relay

static char *twin_payload, *alert_payload;
static int relay_plain, relay_sink;
static int alert_every, alert_qos = 2;
static long relayed;
static char relay_prefix[32];

// JSON-shaped filler of exactly `size` bytes.
static char *filler(int size) {
    char *text = malloc((size_t)size + 1);
    memset(text, 'x', (size_t)size);
    if (size >= 8) memcpy(text, "{\"p\":\"", 6), memcpy(text + size - 2, "\"}", 2);
    text[size] = 0;
    return text;
}

static void on_relay(struct mosquitto *m, void *context, const struct mosquitto_message *message) {
    (void)context;
    const char *key = strrchr(message->topic, '/');
    if (!key) return;
    if (relay_sink && strncmp(key, "/mark", 5) != 0) return;
    char topic[512];
    snprintf(topic, sizeof topic, "%s/device/%s/state", relay_prefix, key + 1);
    if (relay_plain) {
        mosquitto_publish(m, NULL, topic, message->payloadlen, message->payload, 1, true);
        return;
    }
    int qos = 1;
    if (alert_every > 0 && ++relayed % alert_every == 0 && strncmp(key, "/mark", 5) != 0) {
        char alert[512];
        snprintf(alert, sizeof alert, "%s/device/%s/alert", relay_prefix, key + 1);
        mosquitto_publish(m, NULL, alert, (int)strlen(alert_payload), alert_payload, alert_qos, false);
        qos = alert_qos;
    }
    mosquitto_publish(m, NULL, topic, (int)strlen(twin_payload), twin_payload, qos, true);
}

static int relay(int argc, char **argv) {
    int port = atoi(arg(argc, argv, "--port", "1883"));
    int qos = atoi(arg(argc, argv, "--qos", "1"));
    const char *kind = arg(argc, argv, "--kind", "twin");
    int size = atoi(arg(argc, argv, "--size", "350"));
    relay_plain = strcmp(kind, "plain") == 0;
    relay_sink = strcmp(kind, "sink") == 0;
    snprintf(relay_prefix, sizeof relay_prefix, "bench-%s", kind);
    twin_payload = filler(size);
    alert_every = atoi(arg(argc, argv, "--alert-every", "0"));
    alert_qos = atoi(arg(argc, argv, "--alert-qos", "2"));
    alert_payload = filler(atoi(arg(argc, argv, "--alert-size", "400")));
    char id[64];
    snprintf(id, sizeof id, "bench-relay-%s-%d", kind, getpid());
    client_inflight = (unsigned int)atoi(arg(argc, argv, "--inflight", "1000"));
    struct mosquitto *m = client(id, port, NULL);
    mosquitto_message_callback_set(m, on_relay);
    int rc = mosquitto_subscribe(m, NULL, "bench/relay/in/+", qos);
    if (rc != MOSQ_ERR_SUCCESS) die("subscribe", rc);
    printf("relay ready\n");
    fflush(stdout);
    rc = mosquitto_loop_forever(m, -1, 1);
    die("loop", rc);
    return 1;
}

// MARK: load

static atomic_long markers_seen;
static sem_t subscribed;

static void on_subscribed(struct mosquitto *m, void *context, int mid, int count, const int *granted) {
    (void)m, (void)context, (void)mid, (void)count, (void)granted;
    sem_post(&subscribed);
}
static atomic_long bytes_seen, messages_seen;
static char output_prefix[64];
static size_t output_prefix_length;
static char marker_tag[64];

static void on_output(struct mosquitto *m, void *context, const struct mosquitto_message *message) {
    (void)m, (void)context;
    if (message->retain) return;  // retained on subscribing: an earlier run's
    if (strncmp(message->topic, output_prefix, output_prefix_length) != 0) return;
    if (strstr(message->topic, marker_tag)) {
        size_t n = strlen(message->topic);
        if (n > 6 && strcmp(message->topic + n - 6, "/state") == 0) atomic_fetch_add(&markers_seen, 1);
        return;
    }
    atomic_fetch_add(&bytes_seen, (long)strlen(message->topic) + message->payloadlen);
    atomic_fetch_add(&messages_seen, 1);
}

static long cpu_ticks(int pid) {
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
    char *p = strrchr(text, ')');
    if (!p) return -1;
    long utime = 0, stime = 0;
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &utime, &stime) != 2) return -1;
    return utime + stime;
}

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int load(int argc, char **argv) {
    int port = atoi(arg(argc, argv, "--port", "1883"));
    int qos = atoi(arg(argc, argv, "--qos", "1"));
    const char *target = arg(argc, argv, "--target", "daemon");
    const char *route_path = arg(argc, argv, "--route", "route.txt");
    long devices = atol(arg(argc, argv, "--devices", "5000"));
    long count = atol(arg(argc, argv, "--count", "100000"));
    long batch = atol(arg(argc, argv, "--batch", "500"));
    long window = atol(arg(argc, argv, "--window", "4"));
    long warm = atol(arg(argc, argv, "--warm", "1"));
    int target_pid = atoi(arg(argc, argv, "--target-pid", "0"));
    int broker_pid = atoi(arg(argc, argv, "--broker-pid", "0"));
    const char *tag = arg(argc, argv, "--tag", "f");
    double interval = atof(arg(argc, argv, "--interval-ms", "0")) / 1000.0;
    int daemon = strcmp(target, "daemon") == 0;

    // The route.
    FILE *f = fopen(route_path, "r");
    if (!f) { perror(route_path); return 1; }
    size_t points = 0, capacity = 1024;
    double *lat = malloc(capacity * sizeof *lat), *lon = malloc(capacity * sizeof *lon);
    while (fscanf(f, "%lf %lf", &lat[points], &lon[points]) == 2) {
        if (++points == capacity) {
            capacity *= 2;
            lat = realloc(lat, capacity * sizeof *lat);
            lon = realloc(lon, capacity * sizeof *lon);
        }
    }
    fclose(f);
    if (points < 2) { fprintf(stderr, "fleet: %s holds no route\n", route_path); return 1; }

    const char *input = daemon ? "ampel/location" : "bench/relay/in";
    if (daemon) snprintf(output_prefix, sizeof output_prefix, "ampel/");
    else snprintf(output_prefix, sizeof output_prefix, "bench-%s/", target);
    output_prefix_length = strlen(output_prefix);
    snprintf(marker_tag, sizeof marker_tag, "/mark%s%d", tag, getpid());

    char id[64];
    snprintf(id, sizeof id, "bench-observer-%d", getpid());
    struct mosquitto *observer = client(id, port, NULL);
    mosquitto_message_callback_set(observer, on_output);
    sem_init(&subscribed, 0, 0);
    mosquitto_subscribe_callback_set(observer, on_subscribed);
    // What a consumer of states subscribes to: not the daemon's inputs (below its base topic
    // too), which would count the broker's work for this observer twice.
    char filter[80];
    snprintf(filter, sizeof filter, "%s#", output_prefix);
    char *const daemon_filters[] = {"ampel/device/#", "ampel/district/#", "ampel/bridge/info"};
    char *const relay_filters[] = {filter};
    int rc = daemon ? mosquitto_subscribe_multiple(observer, NULL, 3, daemon_filters, 1, 0, NULL)
                    : mosquitto_subscribe_multiple(observer, NULL, 1, relay_filters, 1, 0, NULL);
    if (rc != MOSQ_ERR_SUCCESS) die("subscribe", rc);
    mosquitto_loop_start(observer);
    snprintf(id, sizeof id, "bench-fleet-%d", getpid());
    struct mosquitto *publisher = client(id, port, NULL);
    mosquitto_loop_start(publisher);
    sem_wait(&subscribed);  // the SUBACK: no output is published before the observer reads

    // Fixes 10 s apart, ending near now: fresh for alerts.max_fix_age, so crossings alert.
    long base = (long)time(NULL) - 10 * (count / (devices > 0 ? devices : 1) + warm + 1);
    long markers = 0;
    char topic[256], payload[160];
    // Paced: fix `i` of a phase (warm-up, then the measured run) is due `i / devices`
    // intervals plus its device's share of one interval after the phase began.
    double paced_start = now_seconds();
    #define PACE(i)                                                                                  \
        do {                                                                                         \
            if (interval > 0) {                                                                      \
                double due = paced_start + (double)((i) / devices) * interval                       \
                             + (double)((i) % devices) * interval / (double)devices;                \
                double wait = due - now_seconds();                                                   \
                if (wait > 0) usleep((useconds_t)(wait * 1e6));                                      \
            }                                                                                        \
        } while (0)
    // Fix `i` of the run: device i % devices at its offset plus its round, one point per fix.
    #define FIX(i, round_base)                                                                       \
        do {                                                                                         \
            long device = (i) % devices, round = (i) / devices + (round_base);                      \
            size_t p = ((size_t)device * 7919u + (size_t)round) % points;                             \
            snprintf(topic, sizeof topic, "%s/f%s%ld", input, tag, device);                         \
            long tst = interval > 0 ? (long)time(NULL) : base + round * 10;                           \
            int n = snprintf(payload, sizeof payload, "{\"lat\":%.6f,\"lon\":%.6f,\"tst\":%ld}",     \
                             lat[p], lon[p], tst);                                                     \
            rc = mosquitto_publish(publisher, NULL, topic, n, payload, qos, false);                  \
            if (rc != MOSQ_ERR_SUCCESS) die("publish", rc);                                         \
        } while (0)
    #define MARK()                                                                                   \
        do {                                                                                         \
            snprintf(topic, sizeof topic, "%s%s%ld", input, marker_tag, markers);                   \
            int n = snprintf(payload, sizeof payload, "{\"lat\":48.137,\"lon\":11.575,\"tst\":%ld}", base); \
            rc = mosquitto_publish(publisher, NULL, topic, n, payload, qos, false);                  \
            if (rc != MOSQ_ERR_SUCCESS) die("publish", rc);                                         \
            markers++;                                                                               \
        } while (0)
    #define AWAIT(limit)                                                                             \
        do {                                                                                         \
            double deadline = now_seconds() + 300;                                                   \
            while (atomic_load(&markers_seen) < (limit)) {                                           \
                if (now_seconds() > deadline) {                                                      \
                    fprintf(stderr, "fleet: %ld of %ld markers back after 300 s\n",                  \
                            atomic_load(&markers_seen), (long)(limit));                              \
                    return 1;                                                                        \
                }                                                                                    \
                usleep(200);                                                                         \
            }                                                                                        \
        } while (0)

    // Warm-up: every device seen `warm` times (first sightings publish in every mode).
    for (long i = 0; i < devices * warm; i++) {
        PACE(i);
        FIX(i, 0);
        if ((i + 1) % batch == 0) {
            MARK();
            AWAIT(markers - window);
        }
    }
    MARK();
    AWAIT(markers);

    long bytes0 = atomic_load(&bytes_seen), messages0 = atomic_load(&messages_seen);
    long target0 = target_pid ? cpu_ticks(target_pid) : 0, broker0 = broker_pid ? cpu_ticks(broker_pid) : 0;
    double start = now_seconds();
    paced_start = start;
    for (long i = 0; i < count; i++) {
        PACE(i);
        FIX(i, warm);
        if ((i + 1) % batch == 0) {
            MARK();
            AWAIT(markers - window);
        }
    }
    MARK();
    AWAIT(markers);
    double seconds = now_seconds() - start;
    long target1 = target_pid ? cpu_ticks(target_pid) : 0, broker1 = broker_pid ? cpu_ticks(broker_pid) : 0;
    long bytes = atomic_load(&bytes_seen) - bytes0, messages = atomic_load(&messages_seen) - messages0;
    double tick_us = 1e6 / (double)sysconf(_SC_CLK_TCK);
    printf("mode=fleet target=%s qos=%d devices=%ld count=%ld seconds=%.3f rate=%.0f target_cpu_us=%.2f broker_cpu_us=%.2f "
           "messages=%.4f bytes=%.1f\n",
           target, qos, devices, count, seconds, (double)count / seconds, (double)(target1 - target0) * tick_us / (double)count,
           (double)(broker1 - broker0) * tick_us / (double)count, (double)messages / (double)count, (double)bytes / (double)count);
    fflush(stdout);
    mosquitto_disconnect(publisher);
    mosquitto_disconnect(observer);
    mosquitto_loop_stop(publisher, false);
    mosquitto_loop_stop(observer, false);
    return 0;
}

// MARK: burst

// Publishes libmosquitto has written (QoS 0) or the broker acknowledged (QoS 1), and a
// semaphore posted for each: a post nobody waits for costs no system call, and one posted
// before its wait only makes the waiter check its condition once more (no lost wake-up).
static atomic_long burst_done;
static sem_t burst_progress;

static void on_burst_publish(struct mosquitto *m, void *context, int mid) {
    (void)m, (void)context, (void)mid;
    atomic_fetch_add_explicit(&burst_done, 1, memory_order_relaxed);
    sem_post(&burst_progress);
}

// Waits until libmosquitto has written or the broker acknowledged one more publish (or one
// that did before this call). Called only while publishes are outstanding.
static void await_progress(void) {
    while (sem_wait(&burst_progress) != 0) {}
}

static int burst_publisher(int index, int port, long count, long devices, int qos, int round, int alternate) {
    char id[64];
    snprintf(id, sizeof id, "burst-%d-%d", index, (int)getpid());
    sem_init(&burst_progress, 0, 0);
    struct mosquitto *m = client(id, port, NULL);
    mosquitto_publish_callback_set(m, on_burst_publish);
    int rc = mosquitto_loop_start(m);
    if (rc != MOSQ_ERR_SUCCESS) die("loop_start", rc);
    double start = now_seconds();
    char topic[96], payload[256];
    // Positions spread over Bavaria's south (München .. Augsburg), a few km apart per device.
    for (long i = 0; i < count; i++) {
        long device = i % devices;
        long step = round + i / devices;
        double lat = 48.10 + (device % 50) * 0.005 + (step % 10) * 0.0005;
        double lon = 10.90 + (device / 50 % 40) * 0.017;
        if (alternate) {
            lat = step % 2 ? 48.2264 : 48.1374;
            lon = step % 2 ? 12.6770 : 11.5755;
        }
        snprintf(topic, sizeof topic, "owntracks/burst%d/d%ld", index, device);
        int length = snprintf(payload, sizeof payload,
                              "{\"_type\":\"location\",\"lat\":%.5f,\"lon\":%.5f,\"tst\":%ld,\"acc\":10,\"tid\":\"b%d\"}",
                              lat, lon, 1700000000 + step, index);
        // A full outgoing queue is libmosquitto's to drain: the fix goes once a publish is out.
        while ((rc = mosquitto_publish(m, NULL, topic, length, payload, qos, false)) == MOSQ_ERR_NOMEM) await_progress();
        if (rc != MOSQ_ERR_SUCCESS) die("publish", rc);
    }
    // A DISCONNECT now would drop what waits beyond the in-flight window: first every fix out
    // (QoS 0) or acknowledged (QoS 1).
    while (atomic_load_explicit(&burst_done, memory_order_relaxed) < count) await_progress();
    mosquitto_disconnect(m);
    mosquitto_loop_stop(m, false);
    printf("publisher %d: %ld fixes in %.2f s\n", index, count, now_seconds() - start);
    fflush(stdout);
    mosquitto_destroy(m);
    return 0;
}

static int burst(int argc, char **argv) {
    int port = atoi(arg(argc, argv, "--port", "1883"));
    int publishers = atoi(arg(argc, argv, "--publishers", "5"));
    long count = atol(arg(argc, argv, "--count", "60000"));
    long devices = atol(arg(argc, argv, "--devices", "2000"));
    int qos = atoi(arg(argc, argv, "--qos", "0"));
    int round = atoi(arg(argc, argv, "--round", "0"));
    int alternate = atoi(arg(argc, argv, "--alternate", "0"));
    for (int p = 0; p < publishers; p++) {
        pid_t child = fork();
        if (child == 0) _exit(burst_publisher(p, port, count, devices, qos, round, alternate));
        if (child < 0) { perror("fork"); return 1; }
    }
    int failed = 0, status;
    while (wait(&status) > 0)
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed++;
    return failed ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: fleet relay|load|burst [options]\n");
        return 2;
    }
    mosquitto_lib_init();
    if (strcmp(argv[1], "relay") == 0) return relay(argc, argv);
    if (strcmp(argv[1], "load") == 0) return load(argc, argv);
    if (strcmp(argv[1], "burst") == 0) return burst(argc, argv);
    fprintf(stderr, "fleet: unknown mode %s\n", argv[1]);
    return 2;
}
