#ifndef AMPEL_CMOSQUITTO_SHIM_H
#define AMPEL_CMOSQUITTO_SHIM_H
#include <mosquitto.h>
#include <mqtt_protocol.h>

#ifdef __linux__
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
#endif
