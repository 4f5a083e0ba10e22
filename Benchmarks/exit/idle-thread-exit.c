/* How long a process takes from SIGTERM to being reaped when one of its threads sits in a
 * low scheduling class, with the CPU it runs on busy. A process ends only when every thread has
 * run to its end, and a thread in SCHED_IDLE (or at nice 19) has to wait for CPU time for that
 * too, even one asleep with nothing to do. docs/DESIGN.md, decision 35; run.sh runs it.
 *
 * Usage: idle-thread-exit MODE ROUNDS   (MODE 0: normal thread, 1: SCHED_IDLE, 2: nice 19) */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int mode;

static void *sleeper(void *unused) {
    (void)unused;
    if (mode == 1) {
        struct sched_param param = {0};
        sched_setscheduler(0, SCHED_IDLE, &param);
    } else if (mode == 2) {
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
    }
    pause();
    return NULL;
}

static double seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODE(0 normal, 1 SCHED_IDLE, 2 nice 19) ROUNDS\n", argv[0]);
        return 2;
    }
    mode = atoi(argv[1]);
    int rounds = atoi(argv[2]);
    double worst = 0, total = 0;
    for (int round = 0; round < rounds; round++) {
        pid_t child = fork();
        if (child == 0) {
            pthread_t thread;
            pthread_create(&thread, NULL, sleeper, NULL);
            pause();
            _exit(0);
        }
        usleep(100000); /* the thread is asleep in pause() by now */
        double start = seconds();
        kill(child, SIGTERM);
        int status;
        waitpid(child, &status, 0);
        double took = seconds() - start;
        total += took;
        if (took > worst) worst = took;
    }
    static const char *names[] = {"normal", "SCHED_IDLE", "nice 19"};
    printf("%-10s thread asleep: SIGTERM to reaped mean %.1f ms, worst %.1f ms (%d rounds)\n",
           names[mode % 3], 1000 * total / rounds, 1000 * worst, rounds);
    return 0;
}
