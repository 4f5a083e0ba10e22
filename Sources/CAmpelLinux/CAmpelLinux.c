#define _GNU_SOURCE
/* read(2) is defined below: glibc's fortified inline read must not be. */
#undef _FORTIFY_SOURCE
#include "CAmpelLinux.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <limits.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#endif
#ifdef __GLIBC__
#include <malloc.h>
#endif

void ampel_thread_set_name(const char *name) {
#ifdef __linux__
    prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
#else
    (void)name;
#endif
}

#ifdef __linux__
static int use_class(int policy) {
    struct sched_param param = { .sched_priority = 0 };
    return sched_setscheduler(0, policy, &param);
}
#endif

int ampel_thread_use_batch_class(void) {
#ifdef __linux__
    return use_class(SCHED_BATCH);
#else
    return 0;
#endif
}

int ampel_thread_use_idle_class(void) {
#ifdef __linux__
    return use_class(SCHED_IDLE);
#else
    return 0;
#endif
}

void ampel_malloc_limit_arenas(int arenas) {
#ifdef __GLIBC__
    mallopt(M_ARENA_MAX, arenas);
#else
    (void)arenas;
#endif
}

void ampel_malloc_fix_mmap_threshold(int bytes) {
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, bytes);
#else
    (void)bytes;
#endif
}

void ampel_malloc_trim(void) {
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

long ampel_release_code_pages(void) {
#ifdef __linux__
    FILE *maps = fopen("/proc/self/maps", "re");
    if (!maps) return -1;
    long released = 0;
    char line[PATH_MAX + 256];
    while (fgets(line, sizeof line, maps)) {
        unsigned long start, end;
        char perms[8];
        int path_at = 0;
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &start, &end, perms, &path_at) != 3 || path_at == 0) continue;
        char *path = line + path_at;
        path[strcspn(path, "\n")] = 0;
        /* Only code mapped from a file (the executable's and the shared libraries': libcurl
         * brings libcrypto, gnutls and more, 6.6 MB of code pages at start): never written, so
         * dropping the page table entries loses nothing, and a later use maps the page again
         * from the page cache. Not r--p: a library's relocated read-only data (RELRO) is
         * private copies that would be lost. */
        if (strcmp(perms, "r-xp") != 0 || path[0] != '/') continue;
        if (madvise((void *)start, end - start, MADV_DONTNEED) == 0) released += (long)(end - start);
    }
    fclose(maps);
    return released;
#else
    return 0;
#endif
}

int ampel_wake_create(int *write_fd) {
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

void ampel_wake_signal(int write_fd) {
#ifdef __linux__
    uint64_t one = 1;
    ssize_t rc = write(write_fd, &one, sizeof one);
#else
    char one = 1;
    ssize_t rc = write(write_fd, &one, 1);
#endif
    (void)rc;
}

void ampel_wake_close(int read_fd, int write_fd) {
    close(read_fd);
    if (write_fd != read_fd) close(write_fd);
}

int ampel_wake_poll(int socket, int want_read, int want_write, int wake_fd, int timeout_ms, int *readable) {
    /* Bytes already read ahead are data to read: only look, do not sleep. */
    int ahead = want_read && ampel_read_ahead_pending(socket);
    if (ahead) timeout_ms = 0;
    struct pollfd fds[2] = {
        { .fd = socket, .events = (short)((want_read ? POLLIN : 0) | (want_write ? POLLOUT : 0)), .revents = 0 },
        { .fd = wake_fd, .events = POLLIN, .revents = 0 },
    };
    int count = poll(fds, 2, timeout_ms);
    *readable = ahead || (count > 0 && (fds[0].revents & (POLLIN | POLLERR | POLLHUP)) != 0);
    if (ahead && count == 0) count = 1;
    if (count > 0 && (fds[1].revents & POLLIN)) {
        char buffer[64];
        while (read(wake_fd, buffer, sizeof buffer) > 0) {}
    }
    return count;
}

#ifdef __linux__
/* Read-ahead for one socket per thread (see the header). The state is the thread's own, so no
 * other thread's read ever sees it, and a descriptor number that another thread reuses after
 * libmosquitto closed the socket is never served from it. */
enum { read_ahead_capacity = 64 * 1024 };
static __thread int read_ahead_fd = -1;
static __thread unsigned char *read_ahead_bytes;
static __thread size_t read_ahead_start, read_ahead_end;

int ampel_read_ahead_attach(int socket) {
    if (!read_ahead_bytes) {
        read_ahead_bytes = malloc(read_ahead_capacity);
        if (!read_ahead_bytes) return -1;
    }
    read_ahead_fd = socket;
    read_ahead_start = read_ahead_end = 0;
    return 0;
}

void ampel_read_ahead_detach(void) {
    read_ahead_fd = -1;
    read_ahead_start = read_ahead_end = 0;
    free(read_ahead_bytes);
    read_ahead_bytes = NULL;
}

int ampel_read_ahead_pending(int socket) {
    return socket >= 0 && socket == read_ahead_fd && read_ahead_end > read_ahead_start;
}

/* Takes the place of the C library's read(2) for the whole process (libmosquitto's calls bind to
 * it, as an executable's definition comes first in symbol lookup). Every descriptor but the
 * calling thread's attached socket goes straight to the kernel, as before. For that socket, a
 * read is served from bytes read ahead; when none are left, one recv fills the buffer (a request
 * as large as the buffer goes straight into the caller's memory). A served read may be short, as
 * a socket's may; errors, EAGAIN and the end of the stream pass through unchanged, and errno is
 * touched only when the kernel sets it. Unlike glibc's, it is no thread cancellation point
 * (nothing here cancels threads), and it takes the place of a sanitizer's read interceptor. */
ssize_t read(int fd, void *destination, size_t count) {
    if (fd != read_ahead_fd || fd < 0) return syscall(SYS_read, fd, destination, count);
    if (count == 0) return 0;
    if (read_ahead_end == read_ahead_start) {
        if (count >= read_ahead_capacity) return recv(fd, destination, count, 0);
        ssize_t got = recv(fd, read_ahead_bytes, read_ahead_capacity, 0);
        if (got <= 0) return got;
        read_ahead_start = 0;
        read_ahead_end = (size_t)got;
    }
    size_t available = read_ahead_end - read_ahead_start;
    size_t served = count < available ? count : available;
    memcpy(destination, read_ahead_bytes + read_ahead_start, served);
    read_ahead_start += served;
    return (ssize_t)served;
}
#else
int ampel_read_ahead_attach(int socket) { (void)socket; return 0; }
void ampel_read_ahead_detach(void) {}
int ampel_read_ahead_pending(int socket) { (void)socket; return 0; }
#endif

#ifdef __linux__
static __thread int refuse_socket_pairs;
static __thread long socket_pairs_refused;

void ampel_refuse_socket_pairs(int on) { refuse_socket_pairs = on; }
long ampel_socket_pairs_refused(void) { return socket_pairs_refused; }

/* Takes the place of the C library's socketpair(2), as read(2) above does; see the header. */
int socketpair(int domain, int type, int protocol, int pair[2]) {
    if (refuse_socket_pairs) {
        socket_pairs_refused += 1;
        errno = EMFILE;
        return -1;
    }
    return (int)syscall(SYS_socketpair, domain, type, protocol, pair);
}
#else
void ampel_refuse_socket_pairs(int on) { (void)on; }
long ampel_socket_pairs_refused(void) { return 0; }
#endif

int ampel_tcp_cork(int socket, int on) {
#if defined(__linux__) && defined(TCP_CORK)
    return setsockopt(socket, IPPROTO_TCP, TCP_CORK, &on, sizeof on);
#else
    (void)socket;
    (void)on;
    errno = ENOTSUP;
    return -1;
#endif
}

#if defined(__x86_64__)
#include <nmmintrin.h>

int ampel_crc32c_available(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2");
}

/* Eight bytes per instruction, then the tail byte by byte. Compiled for SSE4.2 alone, so the
 * rest of the library stays runnable on any x86-64; called only when the CPU has it. */
__attribute__((target("sse4.2")))
uint32_t ampel_crc32c(uint32_t crc, const void *data, size_t length) {
    const unsigned char *bytes = data;
    uint64_t wide = crc;
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, bytes, 8);
        wide = _mm_crc32_u64(wide, word);
        bytes += 8;
        length -= 8;
    }
    uint32_t narrow = (uint32_t)wide;
    while (length > 0) {
        narrow = _mm_crc32_u8(narrow, *bytes);
        bytes += 1;
        length -= 1;
    }
    return narrow;
}
#else
int ampel_crc32c_available(void) { return 0; }

uint32_t ampel_crc32c(uint32_t crc, const void *data, size_t length) {
    (void)data;
    (void)length;
    return crc;
}
#endif
