// Burst load for `ampel run` (issue 29): P publishers at once, each as fast as libmosquitto
// lets it, send C QoS 0 OwnTracks fixes for D devices of their own (round robin), as a fleet
// reconnecting after a network outage does.
//
//   burst --port PORT --publishers P --count C --devices D [--qos 0] [--round R] [--alternate 1]
//
// `--alternate 1` puts every device's fixes alternately in SK München and LK Altötting (red
// and green on 2020-10-15): each fix changes its phase, an alert and a state per fix, the
// worst case for the daemon's outgoing side; otherwise a device stays where it is.
//
// Each publisher is a process with its own connection; a fix's `tst` grows with each round
// (so none is out of order) and `R` offsets the rounds of a second run. Prints, per
// publisher, the fixes handed to the broker and the seconds it took.
#define _GNU_SOURCE
#include <mosquitto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *arg(int argc, char **argv, const char *name, const char *fallback) {
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0) return argv[i + 1];
    return fallback;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

// Publishes libmosquitto has written (QoS 0) or the broker acknowledged (QoS 1).
static int published;

static void on_publish(struct mosquitto *m, void *context, int mid) {
    (void)m, (void)context, (void)mid;
    __atomic_add_fetch(&published, 1, __ATOMIC_RELAXED);
}

static int publisher(int index, int port, int count, int devices, int qos, int round, int alternate) {
    mosquitto_lib_init();
    char id[64];
    snprintf(id, sizeof id, "burst-%d-%d", index, (int)getpid());
    struct mosquitto *m = mosquitto_new(id, true, NULL);
    if (!m) return 1;
    mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311);
    mosquitto_max_inflight_messages_set(m, 1000);
    mosquitto_publish_callback_set(m, on_publish);
    if (mosquitto_connect(m, "127.0.0.1", port, 60) != MOSQ_ERR_SUCCESS) return 1;
    if (mosquitto_loop_start(m) != MOSQ_ERR_SUCCESS) return 1;
    double start = now();
    char topic[96], payload[256];
    // Positions spread over Bavaria's south (München .. Augsburg), a few km apart per device.
    for (int i = 0; i < count; i++) {
        int device = i % devices;
        int step = round + i / devices;
        double lat = 48.10 + (device % 50) * 0.005 + (step % 10) * 0.0005;
        double lon = 10.90 + (device / 50 % 40) * 0.017;
        if (alternate) {
            lat = step % 2 ? 48.2264 : 48.1374;
            lon = step % 2 ? 12.6770 : 11.5755;
        }
        snprintf(topic, sizeof topic, "owntracks/burst%d/d%d", index, device);
        int length = snprintf(payload, sizeof payload,
                              "{\"_type\":\"location\",\"lat\":%.5f,\"lon\":%.5f,\"tst\":%d,\"acc\":10,\"tid\":\"b%d\"}",
                              lat, lon, 1700000000 + step, index);
        int rc;
        // A full outgoing queue is libmosquitto's to drain: try again until it takes the fix.
        while ((rc = mosquitto_publish(m, NULL, topic, length, payload, qos, false)) == MOSQ_ERR_NOMEM) usleep(100);
        if (rc != MOSQ_ERR_SUCCESS) {
            fprintf(stderr, "burst %d: publish: %s\n", index, mosquitto_strerror(rc));
            return 1;
        }
    }
    // A DISCONNECT now would drop what waits beyond the in-flight window: first every fix out
    // (QoS 0) or acknowledged (QoS 1).
    while (__atomic_load_n(&published, __ATOMIC_RELAXED) < count) usleep(1000);
    mosquitto_disconnect(m);
    mosquitto_loop_stop(m, false);
    printf("publisher %d: %d fixes in %.2f s\n", index, count, now() - start);
    fflush(stdout);
    mosquitto_destroy(m);
    mosquitto_lib_cleanup();
    return 0;
}

int main(int argc, char **argv) {
    int port = atoi(arg(argc, argv, "--port", "1883"));
    int publishers = atoi(arg(argc, argv, "--publishers", "5"));
    int count = atoi(arg(argc, argv, "--count", "60000"));
    int devices = atoi(arg(argc, argv, "--devices", "2000"));
    int qos = atoi(arg(argc, argv, "--qos", "0"));
    int round = atoi(arg(argc, argv, "--round", "0"));
    int alternate = atoi(arg(argc, argv, "--alternate", "0"));
    for (int p = 0; p < publishers; p++) {
        pid_t child = fork();
        if (child == 0) _exit(publisher(p, port, count, devices, qos, round, alternate));
        if (child < 0) { perror("fork"); return 1; }
    }
    int failed = 0, status;
    while (wait(&status) > 0)
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed++;
    return failed ? 1 : 0;
}
