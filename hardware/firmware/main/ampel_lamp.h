/*
 * The lamp logic's C interface, implemented in Embedded Swift
 * (hardware/firmware/swift/LampABI.swift over Sources/AmpelLamp and Sources/AmpelCore).
 *
 * Not thread-safe: call every function under one lock. Pointers are only read during the
 * call. Times are milliseconds on a monotonic clock (esp_timer_get_time() / 1000).
 */
#ifndef AMPEL_LAMP_H
#define AMPEL_LAMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the lamp follows. */
#define AMPEL_FOLLOW_DISTRICT 0 /* id = AGS, topic <base>/district/<ags>/phase */
#define AMPEL_FOLLOW_DEVICE 1   /* id = device key, topic <base>/device/<key>/state */

/* Light bits in ampel_lamp_frame(). */
#define AMPEL_LIGHT_RED 0x01
#define AMPEL_LIGHT_YELLOW 0x02
#define AMPEL_LIGHT_GREEN 0x04
#define AMPEL_LIGHT_BLUE 0x08

/* Pattern codes of ampel_lamp_pattern() and of the event functions' return value. */
enum {
    AMPEL_PATTERN_UNCONFIGURED = -1,
    AMPEL_PATTERN_TEST = 0,
    AMPEL_PATTERN_GREEN = 1,
    AMPEL_PATTERN_YELLOW = 2,
    AMPEL_PATTERN_RED = 3,
    AMPEL_PATTERN_DARKRED = 4,
    AMPEL_PATTERN_OUTSIDE = 5,
    AMPEL_PATTERN_NOSIGNAL_WAITING = 6,
    AMPEL_PATTERN_NOSIGNAL_OFFLINE = 7,
    AMPEL_PATTERN_NOSIGNAL_STALE = 8,
};

/* Configures the lamp; false for an empty/invalid id or base topic. */
bool ampel_lamp_configure(int32_t follow, const uint8_t *id, size_t id_len,
                          const uint8_t *base, size_t base_len);

/* Topics to subscribe to: count, then each copied NUL-terminated; -1 if out of range or
 * the buffer is too small. */
size_t ampel_lamp_topic_count(void);
ptrdiff_t ampel_lamp_topic(size_t index, uint8_t *buffer, size_t capacity);

/* Events; each returns the pattern code afterwards. */
int32_t ampel_lamp_power_on(uint64_t now_ms);
int32_t ampel_lamp_tick(uint64_t now_ms);
int32_t ampel_lamp_link(bool up);
int32_t ampel_lamp_message(const uint8_t *topic, size_t topic_len,
                           const uint8_t *payload, size_t payload_len);

/* Output. */
int32_t ampel_lamp_pattern(void);
uint8_t ampel_lamp_frame(uint64_t now_ms);      /* AMPEL_LIGHT_* bits lit now */
uint32_t ampel_lamp_frame_rgb(uint64_t now_ms); /* 0xRRGGBB for RGB pixels */

#ifdef __cplusplus
}
#endif

#endif
