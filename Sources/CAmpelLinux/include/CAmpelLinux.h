#ifndef AMPEL_CAMPELLINUX_H
#define AMPEL_CAMPELLINUX_H
/* The Linux calls Ampel makes that Swift's Glibc module does not reach (<malloc.h>, eventfd,
 * prctl) or reaches only with magic numbers (scheduling classes). One small reviewed place,
 * the way swift-nio keeps CNIOLinux; every function is a no-op or a portable fallback elsewhere. */
#include <stddef.h>
#include <stdint.h>

/* Names the calling thread (15 bytes at most on Linux), so that it shows up in top -H, gdb and
 * /proc/<pid>/task/<tid>/comm. */
void ampel_thread_set_name(const char *name);

/* Scheduling classes for the calling thread. Return 0, or -1 with errno set. */
/* SCHED_BATCH: waking this thread no longer preempts the thread that woke it. */
int ampel_thread_use_batch_class(void);
/* SCHED_IDLE: runs only on CPU time no normal thread wants; cannot be left without privileges. */
int ampel_thread_use_idle_class(void);

/* glibc's malloc tuning (<malloc.h>); no-ops with other C libraries. */
/* Caps the number of malloc arenas (M_ARENA_MAX). */
void ampel_malloc_limit_arenas(int arenas);
/* Fixes the size from which blocks get their own mapping (M_MMAP_THRESHOLD); fixing it also
 * stops glibc from raising it after the first such block is freed. */
void ampel_malloc_fix_mmap_threshold(int bytes);
/* Returns free heap pages to the system (malloc_trim(0)). */
void ampel_malloc_trim(void);
/* Unmaps the pages of the code mapped from files, the executable's and the shared libraries'
 * (MADV_DONTNEED on their r-xp mappings): the code that start-up alone ran stops counting in
 * the resident set; what runs later is mapped again from the page cache on its next use.
 * Returns the bytes of mapping advised, or -1. */
long ampel_release_code_pages(void);

/* A wake-up descriptor for a thread that sleeps in poll: an eventfd on Linux, the read end of a
 * pipe elsewhere (write end in *write_fd). Non-blocking, close-on-exec. Returns -1 on failure. */
int ampel_wake_create(int *write_fd);
/* Wakes a thread blocked in ampel_wake_poll. Never blocks (a full counter or pipe wakes anyway). */
void ampel_wake_signal(int write_fd);
/* Closes what ampel_wake_create opened. */
void ampel_wake_close(int read_fd, int write_fd);
/* Waits until `socket` is readable (if want_read) or writable (if want_write), `wake_fd` was signalled, or
 * `timeout_ms` passed, and consumes every pending wake-up. Returns poll's result (-1 with errno
 * set); *readable tells whether the socket has data, an error or a hang-up to read. */
int ampel_wake_poll(int socket, int want_read, int want_write, int wake_fd, int timeout_ms, int *readable);

/* Read-ahead for the MQTT socket. libmosquitto reads each packet with several small reads (the
 * type byte, each byte of the length, the rest): about seven read calls per relayed fix, most of
 * the network thread's kernel time. Attached to a socket, the calling thread's reads of it take
 * what one recv brought in (up to 64 KiB) before they ask the kernel again; reads of every other
 * descriptor, and every other thread's reads, go to the kernel as before. Attach after the
 * connection is made and detach when it ends, on the thread that runs its loop: bytes read ahead
 * and not yet taken are dropped with the connection, as the kernel's would be. */
int ampel_read_ahead_attach(int socket);
void ampel_read_ahead_detach(void);
/* Whether bytes read ahead from `socket` wait to be read (so that a poll must not sleep). */
int ampel_read_ahead_pending(int socket);

/* While on (1) for the calling thread, socketpair(2) fails there with EMFILE. mosquitto_new opens
 * a socket pair whose only use is to wake mosquitto_loop's select, which Ampel never calls; every
 * packet queued afterwards writes a byte into it, and once the pair is full each such write is
 * a failing system call that also leaves errno at EAGAIN, which ends mosquitto_loop_read after
 * one packet. A handle created with this on has no pair, and libmosquitto then skips the write.
 * Other threads, and this one once it is off (0), get socket pairs as before. */
void ampel_refuse_socket_pairs(int on);
/* How many socket pairs this thread has refused so far (0 where nothing is refused). */
long ampel_socket_pairs_refused(void);

/* TCP_CORK on `socket` (on = 1) or off (on = 0): while corked, the kernel keeps what is written
 * and sends it in full segments when the cork comes off. Returns 0, or -1 with errno set (also
 * where there is no TCP_CORK, or the socket is not TCP). */
int ampel_tcp_cork(int socket, int on);

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) with the CPU's own instruction (SSE4.2
 * `crc32` on x86-64). ampel_crc32c_available() tells whether this CPU has it (0 elsewhere);
 * ampel_crc32c() must not be called otherwise. `crc` goes in and comes out without the initial
 * and final inversion, which the caller applies. */
int ampel_crc32c_available(void);
uint32_t ampel_crc32c(uint32_t crc, const void *data, size_t length);
#endif
