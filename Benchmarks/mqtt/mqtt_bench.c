/*
 * mqtt_bench.c: the plain C libmosquitto baseline for Ampel's MQTT benchmark.
 *
 * Does the same work as `AmpelBenchmarks mqtt` (Sources/AmpelBenchmarks/MQTTBenchmark.swift):
 * one subscriber and one publisher client in one process, both with libmosquitto's own network
 * thread (mosquitto_loop_start), MQTT 5, TCP_NODELAY, 100 messages in flight each way. The
 * publisher sends N messages of S bytes at QoS q to a topic the subscriber holds at the same
 * QoS. Reported:
 *   publish: N / seconds from the first publish call until every publish call returned (QoS 0)
 *            or every PUBACK arrived (QoS 1);
 *   receive: N / seconds from the first publish call until the subscriber got message N.
 *   publish_cpu_us: CPU time of the publishing thread per publish call (the loop above).
 *
 * Build: gcc -O2 -o mqtt_bench mqtt_bench.c -lmosquitto -lpthread
 * Usage: mqtt_bench <host> <port> <qos> <count> <size> <tag>
 */
#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_long received = 0;
static atomic_long acknowledged = 0;
static long target = 0;
static int subscribed = 0;
static int connected = 0;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static struct timespec received_all_at;
static struct timespec acknowledged_all_at;

static double seconds_between(struct timespec a, struct timespec b) {
    return (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
}

static void signal_all(void) {
    pthread_mutex_lock(&lock);
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

static void on_connect(struct mosquitto *m, void *obj, int rc, int flags, const mosquitto_property *props) {
    (void)m; (void)obj; (void)flags; (void)props;
    if (rc != 0) { fprintf(stderr, "connect refused: %s\n", mosquitto_reason_string(rc)); exit(1); }
    pthread_mutex_lock(&lock);
    connected++;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

static void on_subscribe(struct mosquitto *m, void *obj, int mid, int count, const int *granted, const mosquitto_property *props) {
    (void)m; (void)obj; (void)mid; (void)count; (void)granted; (void)props;
    pthread_mutex_lock(&lock);
    subscribed = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

static void on_message(struct mosquitto *m, void *obj, const struct mosquitto_message *msg, const mosquitto_property *props) {
    (void)m; (void)obj; (void)props;
    /* Touch the payload like a consumer would (the Swift client copies it out). */
    volatile unsigned char sink = msg->payloadlen > 0 ? ((unsigned char *)msg->payload)[0] : 0;
    (void)sink;
    if (atomic_fetch_add(&received, 1) + 1 == target) {
        clock_gettime(CLOCK_MONOTONIC, &received_all_at);
        signal_all();
    }
}

static void on_publish(struct mosquitto *m, void *obj, int mid, int reason, const mosquitto_property *props) {
    (void)m; (void)obj; (void)mid; (void)reason; (void)props;
    if (atomic_fetch_add(&acknowledged, 1) + 1 == target) {
        clock_gettime(CLOCK_MONOTONIC, &acknowledged_all_at);
        signal_all();
    }
}

static struct mosquitto *make_client(const char *id, const char *host, int port) {
    struct mosquitto *m = mosquitto_new(id, true, NULL);
    if (!m) { perror("mosquitto_new"); exit(1); }
    mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_int_option(m, MOSQ_OPT_TCP_NODELAY, 1);
    mosquitto_int_option(m, MOSQ_OPT_SEND_MAXIMUM, 100);
    mosquitto_int_option(m, MOSQ_OPT_RECEIVE_MAXIMUM, 100);
    mosquitto_connect_v5_callback_set(m, on_connect);
    mosquitto_subscribe_v5_callback_set(m, on_subscribe);
    mosquitto_message_v5_callback_set(m, on_message);
    mosquitto_publish_v5_callback_set(m, on_publish);
    /* Trap: connect_async before loop_start never connects; start the loop first. */
    if (mosquitto_loop_start(m) != MOSQ_ERR_SUCCESS) { fprintf(stderr, "loop_start failed\n"); exit(1); }
    int rc = mosquitto_connect_async(m, host, port, 30);
    if (rc != MOSQ_ERR_SUCCESS) { fprintf(stderr, "connect: %s\n", mosquitto_strerror(rc)); exit(1); }
    return m;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s <host> <port> <qos> <count> <size> <tag>\n", argv[0]);
        return 2;
    }
    const char *host = argv[1];
    int port = atoi(argv[2]);
    int qos = atoi(argv[3]);
    target = atol(argv[4]);
    int size = atoi(argv[5]);
    const char *tag = argv[6];
    char topic[128], sub_id[64], pub_id[64];
    snprintf(topic, sizeof topic, "bench/c/%s", tag);
    snprintf(sub_id, sizeof sub_id, "bench-c-sub-%s", tag);
    snprintf(pub_id, sizeof pub_id, "bench-c-pub-%s", tag);

    mosquitto_lib_init();
    struct mosquitto *sub = make_client(sub_id, host, port);
    struct mosquitto *pub = make_client(pub_id, host, port);
    pthread_mutex_lock(&lock);
    while (connected < 2) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    mosquitto_subscribe(sub, NULL, topic, qos);
    pthread_mutex_lock(&lock);
    while (!subscribed) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);

    unsigned char *payload = malloc(size > 0 ? size : 1);
    for (int i = 0; i < size; i++) payload[i] = (unsigned char)('a' + i % 26);

    struct timespec start, published_at, cpu_start, cpu_end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_start);
    for (long i = 0; i < target; i++) {
        int rc = mosquitto_publish_v5(pub, NULL, topic, size, payload, qos, false, NULL);
        if (rc != MOSQ_ERR_SUCCESS) { fprintf(stderr, "publish: %s\n", mosquitto_strerror(rc)); return 1; }
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_end);
    clock_gettime(CLOCK_MONOTONIC, &published_at);
    /* CPU time of the publishing thread per call: the caller's cost, free of scheduling noise. */
    double publish_cpu_us = seconds_between(cpu_start, cpu_end) * 1e6 / target;

    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 120;
    pthread_mutex_lock(&lock);
    while (atomic_load(&received) < target || (qos > 0 && atomic_load(&acknowledged) < target)) {
        if (pthread_cond_timedwait(&cond, &lock, &deadline) != 0) {
            fprintf(stderr, "timeout: received %ld acknowledged %ld of %ld\n", atomic_load(&received), atomic_load(&acknowledged), target);
            return 1;
        }
    }
    pthread_mutex_unlock(&lock);

    double publish_s = qos > 0 ? seconds_between(start, acknowledged_all_at) : seconds_between(start, published_at);
    double receive_s = seconds_between(start, received_all_at);
    printf("impl=c qos=%d count=%ld size=%d publish_s=%.4f publish_rate=%.0f receive_s=%.4f receive_rate=%.0f publish_cpu_us=%.3f calls_s=%.4f\n",
           qos, target, size, publish_s, target / publish_s, receive_s, target / receive_s, publish_cpu_us,
           seconds_between(start, published_at));

    mosquitto_disconnect(pub);
    mosquitto_disconnect(sub);
    mosquitto_loop_stop(pub, false);
    mosquitto_loop_stop(sub, false);
    mosquitto_destroy(pub);
    mosquitto_destroy(sub);
    free(payload);
    mosquitto_lib_cleanup();
    return 0;
}
