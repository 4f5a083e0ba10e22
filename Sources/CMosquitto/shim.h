#ifndef AMPEL_CMOSQUITTO_SHIM_H
#define AMPEL_CMOSQUITTO_SHIM_H
#include <mosquitto.h>
#include <mqtt_protocol.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <time.h>
#include <stdint.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/eventfd.h>
#include <sys/prctl.h>
#endif

/* Names the calling thread (15 bytes at most on Linux) so that a client's network thread shows
 * up as "mqtt-<client id>" in top -H, gdb and /proc. No-op elsewhere. */
static inline void ampel_mqtt_set_thread_name(const char *name) {
#ifdef __linux__
    prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
#else
    (void)name;
#endif
}

/* The network thread's wake-up descriptor (see MosquittoSession.loopOnce): an eventfd on Linux,
 * the read end of a pipe elsewhere (write end in *write_fd). Non-blocking, close-on-exec.
 * Returns -1 on failure. */
static inline int ampel_wake_create(int *write_fd) {
#ifdef __linux__
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    *write_fd = fd;
    return fd;
#else
    int fds[2];
    if (pipe(fds) != 0) return -1;
    for (int i = 0; i < 2; i++) {
        fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
        fcntl(fds[i], F_SETFD, FD_CLOEXEC);
    }
    *write_fd = fds[1];
    return fds[0];
#endif
}

/* Wakes a thread blocked in ampel_wake_poll. Never blocks (a full counter or pipe wakes anyway). */
static inline void ampel_wake_signal(int write_fd) {
#ifdef __linux__
    uint64_t one = 1;
    ssize_t rc = write(write_fd, &one, sizeof one);
#else
    char one = 1;
    ssize_t rc = write(write_fd, &one, 1);
#endif
    (void)rc;
}

/* Closes what ampel_wake_create opened. */
static inline void ampel_wake_close(int read_fd, int write_fd) {
    close(read_fd);
    if (write_fd != read_fd) close(write_fd);
}

/* Waits until `socket` is readable (or writable, if want_write), `wake_fd` was signalled, or
 * `timeout_ms` passed, and consumes every pending wake-up. Returns poll's result (-1 with errno
 * set); *readable tells whether the socket has data, an error or a hang-up to read. */
static inline int ampel_wake_poll(int socket, int want_write, int wake_fd, int timeout_ms, int *readable) {
    struct pollfd fds[2] = {
        { .fd = socket, .events = (short)(POLLIN | (want_write ? POLLOUT : 0)), .revents = 0 },
        { .fd = wake_fd, .events = POLLIN, .revents = 0 },
    };
    int count = poll(fds, 2, timeout_ms);
    *readable = count > 0 && (fds[0].revents & (POLLIN | POLLERR | POLLHUP)) != 0;
    if (count > 0 && (fds[1].revents & POLLIN)) {
        char buffer[64];
        while (read(wake_fd, buffer, sizeof buffer) > 0) {}
    }
    return count;
}

/* Puts the calling thread in Linux's SCHED_BATCH class (see MosquittoSession.applySchedulingPolicy):
 * its wake-ups no longer preempt the running thread. Returns 0, or -1 with errno. */
static inline int ampel_thread_batch_scheduling(void) {
#ifdef __linux__
    struct sched_param param = { .sched_priority = 0 };
    return sched_setscheduler(0, 3 /* SCHED_BATCH */, &param);
#else
    return 0;
#endif
}
#endif
