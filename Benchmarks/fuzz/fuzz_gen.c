/*
 * fuzz_gen.c: the publisher and recorder of Ampel's broker-level fuzz run (Benchmarks/fuzz/run.sh).
 *
 * One libmosquitto client (MQTT 5, its own network thread) publishes N adversarial payloads to
 * every topic a running `ampel run` reads (owntracks/<user>/<device>, ampel/location/<id>, the
 * Traccar topic, the lamp and Home Assistant status topics, and topics no filter matches), at
 * QoS 0 and 1, and subscribes to `#` with No Local, so it receives exactly what others publish:
 * the daemon. For every payload it works out, from docs/topics.md's rules and its own record
 * of each device's last `tst`, what the daemon must count it as (accepted per input, skipped
 * per type, dropped per reason, or "unknown" for blind mutations), so run.sh can hold the
 * daemon's `bridge/info` counters against those expectations.
 *
 * Pacing: every --probe-every payloads it sends a valid OwnTracks fix for the device
 * `fuzz/probe` (QoS 1, increasing `tst`) and never runs more than --window payloads ahead of
 * the last probe whose device state came back. --window 0 sends without pacing (a burst).
 *
 * At the end: a last probe (everything before it handled), one good OwnTracks fix in München
 * for a fresh device (its state saved), then the last `ampel/bridge/info` once it has settled.
 *
 * Output files in --out: summary.json (what was sent and expected), topics.tsv (every topic
 * received, hex, with count and its last payload, hex), info.json, munich.json, keys.txt.
 *
 * Build: cc -O2 -Wall -o fuzz_gen fuzz_gen.c -lmosquitto -lpthread -lm
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <inttypes.h>
#include <math.h>
#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- small helpers */

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz_gen: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

typedef struct {
    char *p;
    size_t n, cap;
} Buf;

static void b_reserve(Buf *b, size_t extra) {
    if (b->n + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra + 1) cap *= 2;
    b->p = realloc(b->p, cap);
    if (!b->p) die("out of memory");
    b->cap = cap;
}
static void b_put(Buf *b, const void *data, size_t len) {
    b_reserve(b, len);
    memcpy(b->p + b->n, data, len);
    b->n += len;
    b->p[b->n] = 0;
}
static void b_str(Buf *b, const char *s) { b_put(b, s, strlen(s)); }
static void b_byte(Buf *b, unsigned char c) { b_put(b, &c, 1); }
static void b_fmt(Buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char tmp[512];
    int len = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof tmp) die("format too long");
    b_put(b, tmp, (size_t)len);
}
static void b_clear(Buf *b) {
    b->n = 0;
    if (b->p) b->p[0] = 0;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---------------------------------------------------------------- random numbers (splitmix64) */

static uint64_t rng_state;
static uint64_t rnd64(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint32_t below(uint32_t n) { return n ? (uint32_t)(rnd64() % n) : 0; }
static double unit(void) { return (double)(rnd64() >> 11) / 9007199254740992.0; }
static int chance(double p) { return unit() < p; }
static const char *pick(const char *const *list, size_t n) { return list[below((uint32_t)n)]; }
#define PICK(list) pick(list, sizeof(list) / sizeof(list[0]))

/* ---------------------------------------------------------------- expectations */

enum { K_OT, K_PLAIN, K_TRACCAR, K_COUNT };
static const char *kind_name[K_COUNT] = {"owntracks", "plain", "traccar"};

enum { R_OVERSIZED, R_NOTJSON, R_MISSING, R_INVALID_COORD, R_INVALID_TST, R_UNSAFE_KEY, R_OUT_OF_ORDER, R_COUNT };
static const char *reason_name[R_COUNT] = {"oversized", "not-json", "missing-coordinates", "invalid-coordinates",
                                           "invalid-timestamp", "unsafe-device-key", "out-of-order"};

#define MAX_SKIP 32
static const char *skip_names[MAX_SKIP];
static long skip_expected[MAX_SKIP];
static int skip_count;
static void expect_skip(const char *name) {
    for (int i = 0; i < skip_count; i++)
        if (strcmp(skip_names[i], name) == 0) { skip_expected[i]++; return; }
    if (skip_count == MAX_SKIP) die("too many skip types");
    skip_names[skip_count] = name;
    skip_expected[skip_count++] = 1;
}

static long accepted_expected[K_COUNT];
static long dropped_expected[K_COUNT][R_COUNT];
static long unknown_expected[K_COUNT];
static long invalid_lang_expected;
static long invalid_lang_possible; /* unknown plain messages may carry an ignored lang */
static long sent_routed[K_COUNT];  /* messages on a topic an input filter matches */
static long sent_other;            /* lamp and Home Assistant status topics: no counter */
static long sent_unrouted;         /* topics no subscription matches: never delivered */
static long refused;               /* publishes libmosquitto refused locally (never sent) */
static long sent_qos[2];
static long probes;
static uint64_t bytes_sent;
static long ha_online_sent, lamp_online_sent;

/* Families: what kind of damage a payload carries. */
enum {
    F_VALID, F_HOSTILE_KEY, F_STALE, F_EDGE, F_TRUNC, F_NEST_OK, F_NEST_DEEP, F_NUMBERS, F_TOKENS, F_TYPES,
    F_MISSING, F_MEGA, F_RANDOM, F_RANDOM_OBJ, F_MUTATE, F_UTF8, F_DUPKEYS, F_ESCKEYS, F_TOPLEVEL, F_OTHER_TOPIC,
    F_UNROUTED, F_TWINS, F_COUNT
};
static const char *family_name[F_COUNT] = {
    "valid", "hostile-key", "stale", "edge-values", "truncated", "nested-ok", "nested-deep", "numbers", "number-tokens",
    "wrong-types", "missing", "megabyte", "random-bytes", "random-object", "mutated", "bad-utf8", "duplicate-keys",
    "escaped-keys", "top-level", "status-topics", "unrouted", "canonical-twins"};
/* Relative weights (per 1000) of the families. canonical-twins is off by default (--only
 * canonical-twins): it fails against the daemon of 2026-11-24, see Benchmarks/fuzz/README.md. */
static const int family_weight[F_COUNT] = {
    170, 80, 30, 30, 80, 30, 30, 70, 20, 70,
    30, 1, 90, 30, 80, 30, 20, 20, 20, 40,
    20, 0};
static long family_sent[F_COUNT];

/* Device records as the daemon keeps them: the last accepted `tst` per key. */
#define ARRIVAL INT64_MIN /* a fix without tst: the daemon holds its arrival time */
typedef struct {
    char *key;
    int used;
    int has;
    int64_t tst;
} Held;
static Held *held;
static size_t held_cap, held_used;
static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}
static Held *held_find(const char *key) {
    if (held_used * 2 >= held_cap) {
        size_t old_cap = held_cap;
        Held *old = held;
        held_cap = held_cap ? held_cap * 2 : 4096;
        held = calloc(held_cap, sizeof *held);
        held_used = 0;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].used) {
                Held *h = held_find(old[i].key);
                *h = old[i];
            }
        free(old);
    }
    size_t i = hash_bytes(key, strlen(key)) & (held_cap - 1);
    while (held[i].used && strcmp(held[i].key, key) != 0) i = (i + 1) & (held_cap - 1);
    if (!held[i].used) {
        held[i].used = 1;
        held[i].key = strdup(key);
        held_used++;
    }
    return &held[i];
}

/* The arrival time the daemon stamps on a fix without tst: seconds since 1970 now. Every tst
 * this program sends is either far above (2.0e9 and up) or far below (1.0e9) it. */
static int64_t arrival_now(void) { return (int64_t)time(NULL); }

/* ---------------------------------------------------------------- device keys */

/* One character of a key: its UTF-8 bytes, how it is written inside a JSON string, whether
 * a key holding it is safe (docs/topics.md, unsafe-device-key), whether libmosquitto lets it
 * into a topic, and what DeviceKey.sanitize makes of it (Traccar). */
typedef struct {
    const char *utf8;
    const char *json; /* NULL: written raw */
    int safe;
    int topic;
} Atom;

static const Atom atoms[] = {
    /* visible and safe */
    {"a", 0, 1, 1}, {"Z", 0, 1, 1}, {"7", 0, 1, 1}, {"-", 0, 1, 1}, {"_", 0, 1, 1}, {".", 0, 1, 1}, {"~", 0, 1, 1},
    {"!", 0, 1, 1}, {"(", 0, 1, 1}, {"=", 0, 1, 1}, {"'", 0, 1, 1}, {"*", 0, 1, 1}, {"\xc3\xb6", 0, 1, 1} /* ö */,
    {"\xc3\x9f", 0, 1, 1} /* ß */, {"\xe6\x9d\xb1", 0, 1, 1} /* 東 */, {"\xf0\x9f\x98\x80", 0, 1, 1} /* 😀 */,
    {"\xef\xbf\xbd", 0, 1, 1} /* U+FFFD */, {"e\xcc\x81", 0, 1, 1} /* e + U+0301 */,
    /* invisible, but no Cf, Cc or white space: safe by the documented rules (reported) */
    {"\xe3\x85\xa4", 0, 1, 1} /* U+3164 HANGUL FILLER */, {"\xe2\xa0\x80", 0, 1, 1} /* U+2800 braille blank */,
    {"\xcd\x8f", 0, 1, 1} /* U+034F combining grapheme joiner */, {"\xef\xb8\x8f", 0, 1, 1} /* U+FE0F */,
    /* refused: white space, format characters, bidirectional controls */
    {" ", 0, 0, 1}, {"\xc2\xa0", 0, 0, 1} /* U+00A0 */, {"\xe1\x9a\x80", 0, 0, 1} /* U+1680 */,
    {"\xe2\x80\x80", 0, 0, 1} /* U+2000 */, {"\xe3\x80\x80", 0, 0, 1} /* U+3000 */, {"\xe2\x80\xa8", 0, 0, 1} /* U+2028 */,
    {"\xe2\x80\xa9", 0, 0, 1} /* U+2029 */, {"\xe2\x80\x8b", 0, 0, 1} /* U+200B */, {"\xe2\x80\x8c", 0, 0, 1} /* U+200C */,
    {"\xe2\x80\x8d", 0, 0, 1} /* U+200D */, {"\xe2\x80\x8e", 0, 0, 1} /* U+200E */, {"\xe2\x80\x8f", 0, 0, 1} /* U+200F */,
    {"\xe2\x80\xaa", 0, 0, 1} /* U+202A */, {"\xe2\x80\xab", 0, 0, 1} /* U+202B */, {"\xe2\x80\xac", 0, 0, 1} /* U+202C */,
    {"\xe2\x80\xad", 0, 0, 1} /* U+202D */, {"\xe2\x80\xae", 0, 0, 1} /* U+202E */, {"\xe2\x81\xa6", 0, 0, 1} /* U+2066 */,
    {"\xe2\x81\xa7", 0, 0, 1} /* U+2067 */, {"\xe2\x81\xa8", 0, 0, 1} /* U+2068 */, {"\xe2\x81\xa9", 0, 0, 1} /* U+2069 */,
    {"\xe2\x81\xa0", 0, 0, 1} /* U+2060 */, {"\xef\xbb\xbf", 0, 0, 1} /* U+FEFF */, {"\xc2\xad", 0, 0, 1} /* U+00AD */,
    {"\xd8\x9c", 0, 0, 1} /* U+061C */, {"\xe1\xa0\x8e", 0, 0, 1} /* U+180E */, {"\xef\xbf\xb9", 0, 0, 1} /* U+FFF9 */,
    {"\xf3\xa0\x80\x81", 0, 0, 1} /* U+E0001 */, {"\xe2\x81\x9f", 0, 0, 1} /* U+205F */,
    /* only inside JSON (Traccar uniqueId): libmosquitto refuses controls in topics */
    {"\xc2\x85", 0, 0, 0} /* U+0085 raw */, {"\n", "\\n", 0, 0}, {"\t", "\\t", 0, 0}, {"\"", "\\\"", 0, 0},
    {"\\", "\\\\", 0, 0}, {"/", "\\/", 0, 0}, {"\x00", "\\u0000", 0, 0}, {"\xe2\x80\xae", "\\u202e", 0, 0},
    {"\xf0\x9f\x98\x80", "\\ud83d\\ude00", 1, 0}, {"\x7f", 0, 0, 0},
};
#define ATOM_COUNT (sizeof atoms / sizeof atoms[0])

/* What DeviceKey.sanitize makes of the atom: per Unicode scalar, itself when in
 * A-Z a-z 0-9 . _ - and `_` otherwise ("e" + U+0301 is "e_"). */
static void atom_sanitized(const Atom *a, Buf *out) {
    const unsigned char *p = (const unsigned char *)a->utf8;
    if (!*p) { b_byte(out, '_'); return; } /* U+0000, written as \u0000 */
    for (; *p; p++) {
        unsigned char c = *p;
        if ((c & 0xC0) == 0x80) continue; /* continuation byte */
        int keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
        b_byte(out, keep ? c : '_');
    }
}
/* Whether the atom leaves anything but `_` after sanitizing. */
static int atom_sanitized_keeps(const Atom *a) {
    Buf b = {0};
    atom_sanitized(a, &b);
    int keeps = 0;
    for (size_t i = 0; i < b.n; i++) keeps |= b.p[i] != '_';
    free(b.p);
    return keeps;
}

typedef struct {
    char *key;  /* the device key the daemon would use (topic levels, or the sanitized uniqueId) */
    char *uid;  /* Traccar: the uniqueId as written inside a JSON string */
    char *topic;/* owntracks/plain: the topic */
    int qos;    /* every fix of this device goes at this QoS, so the broker keeps their order */
    int safe;   /* the key passes DeviceKey.isSafe (owntracks, plain) or sanitize (Traccar) */
} Dev;

typedef struct {
    Dev *d;
    int n;
} Pool;
enum { P_REGULAR, P_HOSTILE, P_EDGE, P_CHAOS, P_TWINS, P_COUNT };
static Pool pools[K_COUNT][P_COUNT];

static void pool_add(Pool *p, Dev d) {
    p->d = realloc(p->d, sizeof(Dev) * (size_t)(p->n + 1));
    p->d[p->n++] = d;
}

static Dev make_ot(const char *user, const char *device, int qos, int safe) {
    Dev d = {0};
    Buf b = {0};
    b_fmt(&b, "%s/%s", user, device);
    d.key = b.p;
    Buf t = {0};
    b_fmt(&t, "owntracks/%s/%s", user, device);
    d.topic = t.p;
    d.qos = qos;
    d.safe = safe;
    return d;
}
static Dev make_plain(const char *id, int qos, int safe) {
    Dev d = {0};
    d.key = strdup(id);
    Buf t = {0};
    b_fmt(&t, "ampel/location/%s", id);
    d.topic = t.p;
    d.qos = qos;
    d.safe = safe;
    return d;
}
static Dev make_traccar(const char *uid_json, const char *key, int qos, int safe) {
    Dev d = {0};
    d.uid = strdup(uid_json);
    d.key = strdup(key);
    d.qos = qos;
    d.safe = safe;
    return d;
}

/* A topic level of 1..8 atoms usable in topics; *safe is cleared when one is refused. */
static void hostile_level(Buf *b, int *safe) {
    int n = 1 + (int)below(8);
    for (int i = 0; i < n; i++) {
        const Atom *a;
        do a = &atoms[below(ATOM_COUNT)]; while (!a->topic);
        b_str(b, a->utf8);
        if (!a->safe) *safe = 0;
    }
}

static void make_pools(void) {
    char user[64], dev[64];
    for (int i = 0; i < 800; i++) {
        snprintf(user, sizeof user, "u%d", i / 20);
        snprintf(dev, sizeof dev, "d%d", i);
        pool_add(&pools[K_OT][P_REGULAR], make_ot(user, dev, i % 2, 1));
    }
    for (int i = 0; i < 600; i++) {
        snprintf(dev, sizeof dev, "p%d", i);
        pool_add(&pools[K_PLAIN][P_REGULAR], make_plain(dev, i % 2, 1));
        snprintf(dev, sizeof dev, "t%d", i);
        pool_add(&pools[K_TRACCAR][P_REGULAR], make_traccar(dev, dev, i % 2, 1));
    }
    for (int i = 0; i < 100; i++) {
        snprintf(dev, sizeof dev, "e%d", i);
        pool_add(&pools[K_OT][P_EDGE], make_ot("edge", dev, i % 2, 1));
        snprintf(dev, sizeof dev, "edge-%d", i);
        pool_add(&pools[K_PLAIN][P_EDGE], make_plain(dev, i % 2, 1));
        pool_add(&pools[K_TRACCAR][P_EDGE], make_traccar(dev, dev, i % 2, 1));
        snprintf(dev, sizeof dev, "c%d", i);
        pool_add(&pools[K_OT][P_CHAOS], make_ot("chaos", dev, i % 2, 1));
        snprintf(dev, sizeof dev, "chaos-%d", i);
        pool_add(&pools[K_PLAIN][P_CHAOS], make_plain(dev, i % 2, 1));
        pool_add(&pools[K_TRACCAR][P_CHAOS], make_traccar(dev, dev, i % 2, 1));
    }
    /* Canonically equivalent twins: the same text precomposed (U+00E9) and decomposed (e U+0301),
     * two different byte strings and topics, so two devices for MQTT. */
    for (int i = 0; i < 100; i++) {
        snprintf(dev, sizeof dev, "caf\xc3\xa9-%d", i);
        pool_add(&pools[K_OT][P_TWINS], make_ot("twin", dev, i % 2, 1));
        snprintf(dev, sizeof dev, "cafe\xcc\x81-%d", i);
        pool_add(&pools[K_OT][P_TWINS], make_ot("twin", dev, i % 2, 1));
    }
    /* Hostile OwnTracks keys: odd characters, empty levels, `$`, too long, exactly 128 bytes. */
    for (int i = 0; i < 300; i++) {
        Buf u = {0}, d = {0};
        int safe = 1, mode = (int)below(20);
        b_str(&u, "");
        b_str(&d, "");
        if (mode == 0) { /* empty user level: "/device" */
            hostile_level(&d, &safe);
            b_fmt(&d, "%d", i);
            safe = 0;
        } else if (mode == 1) { /* empty device level: "user/" */
            hostile_level(&u, &safe);
            safe = 0;
        } else if (mode == 2) { /* starts with $ */
            b_str(&u, "$");
            hostile_level(&u, &safe);
            hostile_level(&d, &safe);
            b_fmt(&d, "%d", i);
            safe = 0;
        } else if (mode == 3) { /* 129 to 400 bytes */
            int len = 129 + (int)below(272);
            for (int k = 0; k < 60; k++) b_byte(&u, 'L');
            b_fmt(&d, "%d-", i);
            while ((int)(u.n + 1 + d.n) < len) b_byte(&d, 'x');
            safe = 0;
        } else if (mode == 4) { /* exactly 128 bytes: the longest key accepted */
            for (int k = 0; k < 60; k++) b_byte(&u, 'M');
            b_fmt(&d, "%d-", i);
            while (u.n + 1 + d.n < 128) b_byte(&d, 'x');
        } else {
            hostile_level(&u, &safe);
            hostile_level(&d, &safe);
            b_fmt(&d, "%d", i);
        }
        pool_add(&pools[K_OT][P_HOSTILE], make_ot(u.p, d.p, i % 2, safe));
        free(u.p);
        free(d.p);
    }
    /* Hostile plain ids. */
    for (int i = 0; i < 300; i++) {
        Buf id = {0};
        int safe = 1, mode = (int)below(20);
        b_str(&id, "");
        if (mode == 0) {
            safe = 0; /* empty: ampel/location/ */
        } else if (mode == 1) {
            b_str(&id, "$");
            hostile_level(&id, &safe);
            safe = 0;
        } else if (mode == 2) {
            b_fmt(&id, "%d-", i);
            int len = 129 + (int)below(300);
            while ((int)id.n < len) b_byte(&id, 'y');
            safe = 0;
        } else if (mode == 3) {
            b_fmt(&id, "%d-", i);
            while (id.n < 128) b_byte(&id, 'y');
        } else {
            hostile_level(&id, &safe);
            b_fmt(&id, "%d", i);
        }
        pool_add(&pools[K_PLAIN][P_HOSTILE], make_plain(id.p, i % 2, safe));
        free(id.p);
    }
    /* Hostile Traccar uniqueIds: the daemon replaces every character outside A-Z a-z 0-9 . _ -
     * by `_`; a key of only `_`, or longer than 128, is refused. */
    for (int i = 0; i < 300; i++) {
        Buf json = {0}, key = {0};
        int mode = (int)below(10), safe;
        b_str(&json, "");
        b_str(&key, "");
        if (mode < 3) { /* nothing a key can be made of */
            int n = 1 + (int)below(6);
            for (int k = 0; k < n; k++) {
                const Atom *a;
                do a = &atoms[below(ATOM_COUNT)]; while (atom_sanitized_keeps(a));
                b_str(&json, a->json ? a->json : a->utf8);
                atom_sanitized(a, &key);
            }
            safe = 0;
        } else if (mode == 3) { /* 128 or 129 characters */
            int len = 128 + (int)below(2);
            b_fmt(&json, "h%d-", i % 2);
            while ((int)json.n < len) b_byte(&json, 'q');
            b_str(&key, json.p);
            safe = len <= 128;
        } else {
            b_fmt(&json, "h%d-%d-", i % 2, i);
            b_str(&key, json.p);
            int n = 1 + (int)below(8);
            for (int k = 0; k < n; k++) {
                const Atom *a = &atoms[below(ATOM_COUNT)];
                b_str(&json, a->json ? a->json : a->utf8);
                atom_sanitized(a, &key);
            }
            safe = key.n <= 128;
        }
        pool_add(&pools[K_TRACCAR][P_HOSTILE], make_traccar(json.p, key.p, i % 2, safe));
        free(json.p);
        free(key.p);
    }
}

/* ---------------------------------------------------------------- payload specs */

enum { C_OK, C_MISSING, C_INVALID, C_BAD };             /* a coordinate */
enum { T_ABSENT, T_NULL, T_VALUE, T_INVALID, T_RANGE, T_TEXTBAD }; /* tst / fixTime */
enum { J_VALID, J_NOTJSON, J_UNKNOWN };

typedef struct {
    int kind;
    Dev *dev;
    int json;
    int oversized;
    int array;       /* owntracks: a valid JSON array (skipped "array") */
    const char *type;/* owntracks `_type`: NULL = missing/not a string (untyped) */
    int type_missing;
    int uid_missing; /* traccar: no string uniqueId */
    int lat, lon;
    double latv, lonv;
    int tst;
    int64_t tstv;
    int lang_ignored;
    int lang_valid;
} Spec;

static int64_t tst_counter = 2000000000; /* far above any arrival time, far below 1e12 */

static const char *known_skips[] = {"lwt", "transition", "waypoint", "waypoints", "card", "encrypted", "cmd",
                                    "status", "steps", "beacon", "dump", "configuration", "request"};

/* What the daemon must make of a spec; updates the device record like the engine does. */
static void expect(const Spec *s) {
    int k = s->kind;
    if (s->oversized) { dropped_expected[k][R_OVERSIZED]++; return; }
    if (s->json == J_NOTJSON) { dropped_expected[k][R_NOTJSON]++; return; }
    if (s->json == J_UNKNOWN) {
        unknown_expected[k]++;
        if (k == K_PLAIN) invalid_lang_possible++;
        return;
    }
    if (k == K_OT) {
        if (s->array) { expect_skip("array"); return; }
        if (s->type_missing) { expect_skip("untyped"); return; }
        if (strcmp(s->type, "location") != 0) {
            const char *name = "other";
            for (size_t i = 0; i < sizeof known_skips / sizeof known_skips[0]; i++)
                if (strcmp(known_skips[i], s->type) == 0) name = known_skips[i];
            expect_skip(name);
            return;
        }
    }
    if (k == K_TRACCAR) {
        if (s->uid_missing || !s->dev->safe) { dropped_expected[k][R_UNSAFE_KEY]++; return; }
        if (s->tst == T_TEXTBAD) { dropped_expected[k][R_INVALID_TST]++; return; }
    }
    if (!s->dev->safe) { dropped_expected[k][R_UNSAFE_KEY]++; return; }
    if (s->lat == C_INVALID || s->lon == C_INVALID) { dropped_expected[k][R_INVALID_COORD]++; return; }
    if (s->lat == C_MISSING || s->lon == C_MISSING) { dropped_expected[k][R_MISSING]++; return; }
    if (s->lat == C_BAD || s->lon == C_BAD) { dropped_expected[k][R_INVALID_COORD]++; return; }
    if (s->tst == T_INVALID || s->tst == T_RANGE || s->tst == T_TEXTBAD) { dropped_expected[k][R_INVALID_TST]++; return; }
    if (s->lang_ignored) invalid_lang_expected++;
    Held *h = held_find(s->dev->key);
    if (s->tst == T_VALUE && h->has) {
        int64_t prev = h->tst == ARRIVAL ? arrival_now() : h->tst;
        if (s->tstv < prev) { dropped_expected[k][R_OUT_OF_ORDER]++; return; }
    }
    h->has = 1;
    h->tst = s->tst == T_VALUE ? s->tstv : ARRIVAL;
    accepted_expected[k]++;
}

/* ---------------------------------------------------------------- rendering */

static void ws(Buf *b) {
    static const char *const spaces[] = {"", "", "", "", " ", "\n", "\t", "\r\n", "  "};
    b_str(b, PICK(spaces));
}

/* A member name, sometimes with \u escapes (the scanner and JSONDecoder decode them). */
static void key(Buf *b, const char *name) {
    b_byte(b, '"');
    int escape = chance(0.05);
    for (const char *c = name; *c; c++) {
        if (escape && chance(0.5)) b_fmt(b, "\\u%04x", (unsigned char)*c);
        else b_byte(b, (unsigned char)*c);
    }
    b_byte(b, '"');
    ws(b);
    b_byte(b, ':');
    ws(b);
}

static void number(Buf *b, double v) {
    switch (below(5)) {
    case 0: b_fmt(b, "%.6f", v); break;
    case 1: b_fmt(b, "%.17g", v); break;
    case 2: b_fmt(b, "%.4e", v); break;
    case 3: b_fmt(b, "%.9E", v); break;
    default: b_fmt(b, "%.2f", v); break;
    }
}

/* A random JSON value, nested at most `depth` more levels (`depth` 0: a scalar). */
static void random_value(Buf *b, int depth) {
    int r = (int)below(depth > 0 ? 9 : 6);
    switch (r) {
    case 0: b_fmt(b, "%d", (int)below(100000) - 50000); break;
    case 1: b_fmt(b, "%.3f", unit() * 1000); break;
    case 2: b_str(b, "\"x\""); break;
    case 3: b_str(b, chance(0.5) ? "true" : "false"); break;
    case 4: b_str(b, "null"); break;
    case 5: b_str(b, "\"\\u00e4\\n\\\"\""); break;
    case 6:
    case 7: {
        b_byte(b, '[');
        int n = (int)below(3);
        for (int i = 0; i < n; i++) {
            if (i) b_byte(b, ',');
            random_value(b, depth - 1);
        }
        b_byte(b, ']');
        break;
    }
    default: {
        b_byte(b, '{');
        int n = (int)below(3);
        for (int i = 0; i < n; i++) {
            if (i) b_byte(b, ',');
            b_fmt(b, "\"k%d\":", i);
            random_value(b, depth - 1);
        }
        b_byte(b, '}');
    }
    }
}

/* Nesting of exactly `depth` containers, balanced. */
static void nested(Buf *b, int depth) {
    for (int i = 0; i < depth; i++) b_str(b, i % 3 == 2 ? "{\"n\":" : "[");
    b_str(b, "1");
    for (int i = depth - 1; i >= 0; i--) b_str(b, i % 3 == 2 ? "}" : "]");
}

/* Rendering choices that are not in the spec (they must not change the outcome). */
typedef struct {
    const char *lat_text, *lon_text, *tst_text; /* verbatim values; NULL: render from the spec */
    const char *lang_text;                      /* plain: the lang member's value, NULL: none */
    const char *type_text;                      /* owntracks: the `_type` member's value, NULL: none */
    const char *extra;                          /* one more member, verbatim ("\"k\":v") */
    int nest;                                   /* a member nested this deep (0: none) */
    int pad;                                    /* a string member of this many bytes */
    int lat_key_long;                           /* plain: latitude/longitude instead of lat/lon */
} Look;

typedef struct {
    char name[48];
    Buf value;
} Member;

static void shuffle_members(Member *m, int n) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)below((uint32_t)i + 1);
        Member t = m[i];
        m[i] = m[j];
        m[j] = t;
    }
}

static void emit_object(Buf *b, Member *m, int n) {
    ws(b);
    b_byte(b, '{');
    for (int i = 0; i < n; i++) {
        if (i) { ws(b); b_byte(b, ','); }
        ws(b);
        key(b, m[i].name);
        b_put(b, m[i].value.p, m[i].value.n);
    }
    ws(b);
    b_byte(b, '}');
}

static void civil(int64_t days, int *y, int *m, int *d) { /* days since 1970-01-01 -> date */
    days += 719468;
    int64_t era = (days >= 0 ? days : days - 146096) / 146097;
    int64_t doe = days - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t yy = yoe + era * 400;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yy + (*m <= 2));
}

/* The fix time T as Traccar may write it: seconds, milliseconds, or RFC 3339 text with an offset. */
static void traccar_time(Buf *b, int64_t t) {
    int r = (int)below(4);
    if (r == 0) { b_fmt(b, "%" PRId64, t); return; }
    if (r == 1) { b_fmt(b, "%" PRId64 "%03d", t, 0); return; }
    int offset_min = r == 2 ? 0 : ((int)below(27) - 12) * 60 + (chance(0.2) ? 30 : 0);
    int64_t local = t + offset_min * 60;
    int64_t days = local >= 0 ? local / 86400 : (local - 86399) / 86400;
    int64_t sec = local - days * 86400;
    int y, mo, d;
    civil(days, &y, &mo, &d);
    b_fmt(b, "\"%04d-%02d-%02dT%02d:%02d:%02d", y, mo, d, (int)(sec / 3600), (int)(sec / 60 % 60), (int)(sec % 60));
    if (chance(0.5)) b_fmt(b, ".%03d", (int)below(1000));
    if (offset_min == 0 && chance(0.7)) b_str(b, chance(0.9) ? "Z" : "z");
    else {
        int a = abs(offset_min);
        b_fmt(b, "%c%02d%s%02d", offset_min < 0 ? '-' : '+', a / 60, chance(0.5) ? ":" : "", a % 60);
    }
    b_byte(b, '"');
}

static void coord_value(Buf *b, int state, double v, const char *text) {
    if (text) { b_str(b, text); return; }
    if (state == C_MISSING) { b_str(b, "null"); return; }
    number(b, v);
}

/* Renders the spec with the look into b. */
static void render(const Spec *s, const Look *l, Buf *b) {
    Member m[16];
    memset(m, 0, sizeof m);
    int n = 0;
#define ADD(nm) (snprintf(m[n].name, sizeof m[n].name, "%s", nm), &m[n++].value)
    int k = s->kind;
    if (k == K_TRACCAR) {
        Member pos[8];
        memset(pos, 0, sizeof pos);
        int pn = 0;
        if (s->lat != C_MISSING || l->lat_text || chance(0.3)) {
            snprintf(pos[pn].name, sizeof pos[pn].name, "latitude");
            coord_value(&pos[pn++].value, s->lat, s->latv, l->lat_text);
        }
        if (s->lon != C_MISSING || l->lon_text || chance(0.3)) {
            snprintf(pos[pn].name, sizeof pos[pn].name, "longitude");
            coord_value(&pos[pn++].value, s->lon, s->lonv, l->lon_text);
        }
        if (l->tst_text) {
            snprintf(pos[pn].name, sizeof pos[pn].name, "fixTime");
            b_str(&pos[pn++].value, l->tst_text);
        } else if (s->tst == T_VALUE) {
            snprintf(pos[pn].name, sizeof pos[pn].name, "fixTime");
            traccar_time(&pos[pn++].value, s->tstv);
        } else if (s->tst == T_NULL) {
            snprintf(pos[pn].name, sizeof pos[pn].name, "fixTime");
            b_str(&pos[pn++].value, "null");
        }
        snprintf(pos[pn].name, sizeof pos[pn].name, "speed");
        b_fmt(&pos[pn++].value, "%.1f", unit() * 30);
        snprintf(pos[pn].name, sizeof pos[pn].name, "attributes");
        b_fmt(&pos[pn++].value, "{\"batteryLevel\":%d,\"motion\":%s}", (int)below(101), chance(0.5) ? "true" : "false");
        shuffle_members(pos, pn);
        emit_object(ADD("position"), pos, pn);
        for (int i = 0; i < pn; i++) free(pos[i].value.p);
        Member dev[3];
        memset(dev, 0, sizeof dev);
        int dn = 0;
        if (!s->uid_missing) {
            snprintf(dev[dn].name, sizeof dev[dn].name, "uniqueId");
            b_fmt(&dev[dn++].value, "\"%s\"", s->dev->uid);
        } else if (l->extra == NULL) {
            static const char *const bad_uid[] = {"12345", "null", "true", "[\"a\"]", "{}"};
            snprintf(dev[dn].name, sizeof dev[dn].name, "uniqueId");
            b_str(&dev[dn++].value, PICK(bad_uid));
        }
        snprintf(dev[dn].name, sizeof dev[dn].name, "name");
        b_str(&dev[dn++].value, "\"Van 7\"");
        shuffle_members(dev, dn);
        emit_object(ADD("device"), dev, dn);
        for (int i = 0; i < dn; i++) free(dev[i].value.p);
        if (chance(0.3)) b_str(ADD("event"), "{\"type\":\"deviceMoving\"}");
    } else {
        if (k == K_OT && l->type_text) b_str(ADD("_type"), l->type_text);
        const char *latk = l->lat_key_long ? "latitude" : "lat", *lonk = l->lat_key_long ? "longitude" : "lon";
        if (s->lat != C_MISSING || l->lat_text || chance(0.3)) coord_value(ADD(latk), s->lat, s->latv, l->lat_text);
        if (s->lon != C_MISSING || l->lon_text || chance(0.3)) coord_value(ADD(lonk), s->lon, s->lonv, l->lon_text);
        if (l->tst_text) b_str(ADD("tst"), l->tst_text);
        else if (s->tst == T_VALUE) {
            Buf *v = ADD("tst");
            if (chance(0.1)) b_fmt(v, "%" PRId64 ".%d", s->tstv, (int)below(10));
            else if (chance(0.1)) b_fmt(v, "%" PRId64 "e0", s->tstv);
            else b_fmt(v, "%" PRId64, s->tstv);
        } else if (s->tst == T_NULL) b_str(ADD("tst"), "null");
        if (k == K_PLAIN && l->lang_text) b_str(ADD("lang"), l->lang_text);
        if (k == K_OT) {
            if (chance(0.5)) b_fmt(ADD("acc"), "%d", (int)below(100));
            if (chance(0.5)) b_fmt(ADD("batt"), "%d", (int)below(101));
            if (chance(0.3)) b_str(ADD("tid"), "\"ph\"");
            if (chance(0.2)) b_str(ADD("inregions"), "[\"home\",\"work\"]");
        }
        if (chance(0.1)) random_value(ADD("x"), 3);
    }
    if (l->nest) nested(ADD("deep"), l->nest);
    if (l->pad) {
        Buf *v = ADD("pad");
        b_reserve(v, (size_t)l->pad + 5);
        b_str(v, "\"PAD");
        for (int i = 3; i < l->pad; i++) v->p[v->n++] = (char)('a' + i % 26);
        v->p[v->n] = 0;
        b_byte(v, '"');
    }
    shuffle_members(m, n);
    Buf out = {0};
    emit_object(b, m, n);
    if (l->extra) {
        /* insert right after the opening brace */
        char *brace = memchr(b->p, '{', b->n);
        size_t at = (size_t)(brace - b->p) + 1;
        b_str(&out, l->extra);
        if (n > 0) b_byte(&out, ',');
        Buf joined = {0};
        b_put(&joined, b->p, at);
        b_put(&joined, out.p, out.n);
        b_put(&joined, b->p + at, b->n - at);
        free(b->p);
        *b = joined;
    }
    free(out.p);
    for (int i = 0; i < n; i++) free(m[i].value.p);
#undef ADD
}

/* ---------------------------------------------------------------- MQTT */

static struct mosquitto *client;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int connected, subscribed;
static int64_t probe_seen = -1;          /* highest probe number whose state came back */
static Buf info_payload, munich_payload; /* last bridge/info, the München device state */
static double info_at, munich_at;
static char munich_topic[128];
static long received, received_bytes;
static long sys_dropped = -1;
static const int64_t probe_base = 2500000000;

typedef struct {
    char *topic;
    long count;
    Buf last;
} Seen;
static Seen *seen;
static size_t seen_cap, seen_used;

static Seen *seen_find(const char *topic) {
    if (seen_used * 2 >= seen_cap) {
        size_t old_cap = seen_cap;
        Seen *old = seen;
        seen_cap = seen_cap ? seen_cap * 2 : 8192;
        seen = calloc(seen_cap, sizeof *seen);
        seen_used = 0;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].topic) {
                Seen *s = seen_find(old[i].topic);
                *s = old[i];
            }
        free(old);
    }
    size_t i = hash_bytes(topic, strlen(topic)) & (seen_cap - 1);
    while (seen[i].topic && strcmp(seen[i].topic, topic) != 0) i = (i + 1) & (seen_cap - 1);
    if (!seen[i].topic) {
        seen[i].topic = strdup(topic);
        seen_used++;
    }
    return &seen[i];
}

static void on_connect(struct mosquitto *m, void *obj, int rc, int flags, const mosquitto_property *props) {
    (void)m; (void)obj; (void)flags; (void)props;
    if (rc != 0) die("connect refused: %s", mosquitto_reason_string(rc));
    pthread_mutex_lock(&lock);
    connected = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

static void on_disconnect(struct mosquitto *m, void *obj, int rc, const mosquitto_property *props) {
    (void)m; (void)obj; (void)props;
    if (rc != 0) fprintf(stderr, "fuzz_gen: connection lost (%s)\n", mosquitto_strerror(rc));
}

static void on_subscribe(struct mosquitto *m, void *obj, int mid, int count, const int *granted, const mosquitto_property *props) {
    (void)m; (void)obj; (void)mid; (void)props;
    for (int i = 0; i < count; i++)
        if (granted[i] >= 0x80) die("subscription refused");
    pthread_mutex_lock(&lock);
    subscribed++;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

static void on_message(struct mosquitto *m, void *obj, const struct mosquitto_message *msg, const mosquitto_property *props) {
    (void)m; (void)obj; (void)props;
    const char *topic = msg->topic;
    if (strncmp(topic, "$SYS/", 5) == 0) {
        if (strcmp(topic, "$SYS/broker/publish/messages/dropped") == 0 && msg->payloadlen < 32) {
            char tmp[32];
            memcpy(tmp, msg->payload, (size_t)msg->payloadlen);
            tmp[msg->payloadlen] = 0;
            pthread_mutex_lock(&lock);
            sys_dropped = atol(tmp);
            pthread_mutex_unlock(&lock);
        }
        return;
    }
    pthread_mutex_lock(&lock);
    received++;
    received_bytes += msg->payloadlen;
    Seen *s = seen_find(topic);
    s->count++;
    b_clear(&s->last);
    b_put(&s->last, msg->payload, (size_t)msg->payloadlen);
    if (strcmp(topic, "ampel/bridge/info") == 0) {
        b_clear(&info_payload);
        b_put(&info_payload, msg->payload, (size_t)msg->payloadlen);
        info_at = now_s();
    } else if (strcmp(topic, "ampel/device/fuzz/probe/state") == 0) {
        const char *p = memmem(msg->payload, (size_t)msg->payloadlen, "\"tst\":", 6);
        if (p) {
            int64_t n = strtoll(p + 6, NULL, 10) - probe_base;
            if (n > probe_seen) probe_seen = n;
            pthread_cond_broadcast(&cond);
        }
    } else if (munich_topic[0] && strcmp(topic, munich_topic) == 0) {
        b_clear(&munich_payload);
        b_put(&munich_payload, msg->payload, (size_t)msg->payloadlen);
        munich_at = now_s();
        pthread_cond_broadcast(&cond);
    }
    pthread_mutex_unlock(&lock);
}

static void publish(const char *topic, const void *payload, size_t len, int qos) {
    int rc = mosquitto_publish_v5(client, NULL, topic, (int)len, payload, qos, false, NULL);
    if (rc == MOSQ_ERR_SUCCESS) {
        sent_qos[qos]++;
        bytes_sent += len;
        return;
    }
    if (rc == MOSQ_ERR_MALFORMED_UTF8 || rc == MOSQ_ERR_INVAL || rc == MOSQ_ERR_PAYLOAD_SIZE || rc == MOSQ_ERR_OVERSIZE_PACKET) {
        refused++;
        return;
    }
    die("publish to %s: %s", topic, mosquitto_strerror(rc));
}

/* ---------------------------------------------------------------- generation */

static const char *traccar_topic = "traccar/events";

static void random_position(Spec *s) {
    int r = (int)below(10);
    if (r < 5) { /* Bavaria's box: every phase of the data */
        s->latv = 47.3 + unit() * 3.3;
        s->lonv = 8.98 + unit() * 4.85;
    } else if (r < 6) { /* München */
        s->latv = 48.1374;
        s->lonv = 11.5755;
    } else { /* anywhere */
        s->latv = unit() * 180 - 90;
        s->lonv = unit() * 360 - 180;
    }
}

/* tst for a valid fix of this device: new, absent, null, or equal to the one held. */
static void valid_tst(Spec *s) {
    Held *h = held_find(s->dev->key);
    int r = (int)below(100);
    if (r < 12) s->tst = T_ABSENT;
    else if (r < 22) s->tst = T_NULL;
    else if (r < 30 && h->has && h->tst != ARRIVAL && h->tst >= 2000000000 && h->tst < 100000000000) {
        s->tst = T_VALUE;
        s->tstv = h->tst;
    } else {
        s->tst = T_VALUE;
        s->tstv = ++tst_counter;
    }
}

static void base_valid(Spec *s, int kind, Dev *d, Look *l) {
    memset(s, 0, sizeof *s);
    memset(l, 0, sizeof *l);
    s->kind = kind;
    s->dev = d;
    s->json = J_VALID;
    s->type = "location";
    if (kind == K_OT) l->type_text = chance(0.05) ? "\"loc\\u0061tion\"" : "\"location\"";
    random_position(s);
    valid_tst(s);
    if (kind == K_PLAIN) {
        l->lat_key_long = chance(0.3);
        int r = (int)below(100);
        if (r < 15) {
            static const char *const good[] = {"\"de\"", "\"en\"", "\"DE\"", "\"en-GB\"", "\"de_DE.UTF-8\"", "\"de@euro\"", "\"EN_us\""};
            l->lang_text = PICK(good);
        } else if (r < 22) {
            l->lang_text = "null";
        } else if (r < 32) {
            static const char *const bad[] = {"\"fr\"", "\"\"", "\"klingon\"", "5", "[\"de\"]", "{}", "true", "\"-de\"",
                                              "\"de-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"", "\"\\u00e9\"", "\"d\\u0000e\""};
            l->lang_text = PICK(bad);
            s->lang_ignored = 1;
        }
    }
}

static Dev *from(int kind, int pool) {
    Pool *p = &pools[kind][pool];
    return &p->d[below((uint32_t)p->n)];
}

static const char *topic_of(const Spec *s) { return s->kind == K_TRACCAR ? traccar_topic : s->dev->topic; }

static int pick_family(void) {
    static int total = 0;
    if (!total)
        for (int i = 0; i < F_COUNT; i++) total += family_weight[i];
    int r = (int)below((uint32_t)total);
    for (int i = 0; i < F_COUNT; i++) {
        if (r < family_weight[i]) return i;
        r -= family_weight[i];
    }
    return F_VALID;
}

static int only_kind = -1;
static int pick_kind(void) {
    if (only_kind >= 0) return only_kind;
    int r = (int)below(100);
    return r < 42 ? K_OT : r < 74 ? K_PLAIN : K_TRACCAR;
}

static Buf payload, scratch;
static int max_payload = 16384;
static int only_family = -1;

/* Sends one spec: expectation first (it reads the device record as the daemon will see it). */
static void send_spec(Spec *s, Look *l, int qos, int family) {
    b_clear(&payload);
    render(s, l, &payload);
    if ((int)payload.n > max_payload) s->oversized = 1;
    expect(s);
    sent_routed[s->kind]++;
    family_sent[family]++;
    publish(topic_of(s), payload.p, payload.n, qos);
}

static void gen_one(int family) {
    Spec s;
    Look l;
    int kind = pick_kind();
    switch (family) {
    case F_VALID: {
        base_valid(&s, kind, from(kind, P_REGULAR), &l);
        send_spec(&s, &l, s.dev->qos, family);
        return;
    }
    case F_HOSTILE_KEY: {
        base_valid(&s, kind, from(kind, P_HOSTILE), &l);
        send_spec(&s, &l, s.dev->qos, family);
        return;
    }
    case F_STALE: { /* older than what the device holds: out-of-order (or first sighting) */
        base_valid(&s, kind, from(kind, P_REGULAR), &l);
        s.tst = T_VALUE;
        s.tstv = chance(0.5) ? 1000000000 : 1000000000 + below(1000);
        send_spec(&s, &l, s.dev->qos, family);
        return;
    }
    case F_EDGE: { /* limits that are still fine: ±90, ±180, -0, 1e-400, tst 0 and 999999999999 */
        base_valid(&s, kind, from(kind, P_EDGE), &l);
        int r = (int)below(9);
        if (r == 0) { s.latv = 90; l.lat_text = chance(0.5) ? "90" : "9e1"; }
        else if (r == 1) { s.latv = -90; l.lat_text = "-90.0"; }
        else if (r == 2) { s.lonv = 180; l.lon_text = "180"; }
        else if (r == 3) { s.lonv = -180; l.lon_text = "-1.8E+2"; }
        else if (r == 4) { s.latv = 0; l.lat_text = "-0"; }
        else if (r == 5) { /* underflows to 0 for the scanner; JSONDecoder refuses the value */
            s.latv = 0;
            l.lat_text = "1e-400";
            if (kind == K_TRACCAR) s.lat = C_INVALID;
        }
        else if (r == 6) {
            s.tst = T_VALUE; s.tstv = 0;
            l.tst_text = kind == K_TRACCAR ? "0" : (chance(0.5) ? "-0" : "0.5");
        } else if (r == 7) {
            s.tst = T_VALUE; s.tstv = 999999999999;
            l.tst_text = kind == K_TRACCAR ? "999999999999000" : (chance(0.5) ? "999999999999" : "999999999999.9");
        } else {
            s.tst = T_VALUE; s.tstv = 1000000000;
            l.tst_text = kind == K_TRACCAR ? "\"2001-09-09T01:46:40+00:00\"" : "1e9";
        }
        send_spec(&s, &l, s.dev->qos, family);
        return;
    }
    case F_TRUNC: { /* a valid payload cut short: never JSON */
        base_valid(&s, kind, from(kind, P_REGULAR), &l);
        b_clear(&payload);
        render(&s, &l, &payload);
        /* Every rendering ends with its closing brace: any proper prefix is no document. */
        size_t cut = below((uint32_t)payload.n);
        s.json = J_NOTJSON;
        expect(&s);
        sent_routed[kind]++;
        family_sent[family]++;
        publish(topic_of(&s), payload.p, cut, (int)below(2));
        return;
    }
    case F_NEST_OK: { /* a member nested within the scanner's 32 levels */
        base_valid(&s, kind, from(kind, P_REGULAR), &l);
        l.nest = 1 + (int)below(kind == K_TRACCAR ? 60 : 30);
        send_spec(&s, &l, s.dev->qos, family);
        return;
    }
    case F_NEST_DEEP: { /* deeper than any parser takes, or unbalanced */
        base_valid(&s, kind, from(kind, P_REGULAR), &l);
        s.json = J_NOTJSON;
        if (chance(0.5)) {
            l.nest = kind == K_TRACCAR ? 600 + (int)below(4000) : 32 + (int)below(4000);
            send_spec(&s, &l, (int)below(2), family);
        } else {
            b_clear(&payload);
            int depth = 1 + (int)below(16000);
            b_str(&payload, kind == K_OT && chance(0.3) ? "" : "{\"a\":");
            for (int i = 0; i < depth && payload.n < (size_t)max_payload - 1; i++) b_byte(&payload, chance(0.8) ? '[' : '{');
            expect(&s);
            sent_routed[kind]++;
            family_sent[family]++;
            publish(topic_of(&s), payload.p, payload.n, (int)below(2));
        }
        return;
    }
    case F_NUMBERS: {
        base_valid(&s, kind, from(kind, P_REGULAR), &l);
        int r = (int)below(12);
        static const char *const nonnumbers[] = {"NaN", "nan", "Infinity", "-Infinity", "inf", "+1", ".5", "0x10"};
        if (r == 0) { l.lat_text = PICK(nonnumbers); s.json = J_NOTJSON; }
        else if (r == 1) { l.lon_text = PICK(nonnumbers); s.json = J_NOTJSON; }
        else if (r == 2) { l.lat_text = chance(0.5) ? "1e400" : "-1e400"; s.lat = C_BAD; }
        else if (r == 3) { l.lon_text = chance(0.5) ? "1E400" : "-2e308"; s.lon = C_BAD; }
        else if (r == 4) { static const char *const v[] = {"90.000001", "-90.5", "91", "1e308", "-1000"}; l.lat_text = PICK(v); s.lat = C_BAD; }
        else if (r == 5) { static const char *const v[] = {"180.0001", "-180.5", "360", "1e10"}; l.lon_text = PICK(v); s.lon = C_BAD; }
        else if (r == 6) { l.tst_text = chance(0.5) ? "1e400" : "-1e400"; s.tst = T_RANGE; }
        else if (r == 7) { l.tst_text = kind == K_TRACCAR ? "-1" : (chance(0.5) ? "-1" : "-0.5e1"); s.tst = T_RANGE; }
        else if (r == 8) { l.tst_text = kind == K_TRACCAR ? "1e15" : (chance(0.5) ? "1e12" : "1000000000000"); s.tst = T_RANGE; }
        else if (r == 9) { l.tst_text = kind == K_TRACCAR ? "-1e300" : "123456789012345678901234567890"; s.tst = T_RANGE; }
        else if (r == 10) { l.tst_text = "NaN"; s.json = J_NOTJSON; }
        else { l.lat_text = "4.8e"; s.json = J_NOTJSON; }
        if (kind == K_TRACCAR && r == 11) { s.json = J_VALID; s.lat = C_INVALID; } /* see number-tokens */
        send_spec(&s, &l, s.json == J_VALID ? (int)below(2) : s.dev->qos, family);
        return;
    }
    case F_TOKENS: { /* malformed number tokens: not JSON; JSONDecoder fails only that value */
        base_valid(&s, kind, from(kind, P_REGULAR), &l);
        static const char *const tokens[] = {"048", "1-604", "12e", "1.", "-", "1.5.2", "00"};
        l.lat_text = PICK(tokens);
        if (kind == K_TRACCAR) s.lat = C_INVALID;
        else s.json = J_NOTJSON;
        send_spec(&s, &l, (int)below(2), family);
        return;
    }
    case F_TYPES: {
        base_valid(&s, kind, from(kind, P_REGULAR), &l);
        int r = (int)below(kind == K_OT ? 9 : kind == K_TRACCAR ? 10 : 6);
        static const char *const not_numbers[] = {"\"48.1\"", "true", "false", "{}", "[]", "\"\"", "[48.1]", "{\"v\":48}"};
        static const char *const not_times[] = {"\"1604570400\"", "true", "{}", "[]", "[1604570400]", "false"};
        if (r == 0) { l.lat_text = PICK(not_numbers); s.lat = C_INVALID; }
        else if (r == 1) { l.lon_text = PICK(not_numbers); s.lon = C_INVALID; }
        else if (r == 2) { s.lat = C_MISSING; l.lat_text = chance(0.5) ? "null" : NULL; }
        else if (r == 3) {
            l.tst_text = PICK(not_times);
            s.tst = kind == K_TRACCAR && l.tst_text[0] == '"' ? T_TEXTBAD : T_INVALID;
        } else if (r == 4) { s.tst = T_NULL; }
        else if (r == 5) { s.lat = C_INVALID; s.lon = C_MISSING; l.lat_text = "\"x\""; }
        else if (kind == K_OT) {
            static const char *const types[] = {"\"lwt\"", "\"transition\"", "\"waypoint\"", "\"waypoints\"", "\"card\"",
                                                "\"encrypted\"", "\"cmd\"", "\"status\"", "\"steps\"", "\"beacon\"", "\"dump\"",
                                                "\"configuration\"", "\"request\"", "\"LOCATION\"", "\"locations\"", "\"\"",
                                                "\"location_______________________________\""};
            if (r == 6) {
                l.type_text = PICK(types);
                static char name[64];
                /* the skipped name is the text without quotes (cut to 32 bytes: other) */
                size_t len = strlen(l.type_text) - 2;
                memcpy(name, l.type_text + 1, len);
                name[len] = 0;
                s.type = strdup(name);
            } else if (r == 7) {
                static const char *const untyped[] = {"5", "null", "true", "[\"location\"]", "{\"t\":\"location\"}"};
                l.type_text = PICK(untyped);
                s.type_missing = 1;
            } else {
                l.type_text = NULL;
                s.type_missing = 1;
            }
        } else if (kind == K_TRACCAR) {
            if (r == 6) { s.uid_missing = 1; }
            else if (r == 7) {
                static const char *const bad_times[] = {"\"yesterday\"", "\"\"", "\"2020-13-01T00:00:00Z\"", "\"2021-02-29T10:00:00Z\"",
                                                        "\"2020-11-05T24:00:00Z\"", "\"2020-11-05T10:00:00\"", "\"2020-11-05 10:00:00Z\"",
                                                        "\"2020-11-05T10:00:00Zjunk\"", "\"\\u0032020-11-05T10:00:00+25:00\""};
                l.tst_text = PICK(bad_times);
                s.tst = T_TEXTBAD;
                if (chance(0.5)) { s.lat = C_INVALID; l.lat_text = "\"x\""; } /* fixTime is read first */
            } else if (r == 8) { /* position is no object: no coordinates */
                b_clear(&payload);
                b_fmt(&payload, "{\"position\":%s,\"device\":{\"uniqueId\":\"%s\"}}", chance(0.5) ? "[48.1,11.5]" : "\"48.1,11.5\"", s.dev->uid);
                s.lat = s.lon = C_MISSING;
                s.tst = T_ABSENT;
                expect(&s);
                sent_routed[kind]++;
                family_sent[family]++;
                publish(traccar_topic, payload.p, payload.n, s.dev->qos);
                return;
            } else { /* device is no object */
                b_clear(&payload);
                b_fmt(&payload, "{\"position\":{\"latitude\":48.1,\"longitude\":11.5},\"device\":%s}",
                      chance(0.5) ? "[\"t1\"]" : "\"t1\"");
                s.uid_missing = 1;
                expect(&s);
                sent_routed[kind]++;
                family_sent[family]++;
                publish(traccar_topic, payload.p, payload.n, (int)below(2));
                return;
            }
        }
        send_spec(&s, &l, s.dev->qos, family);
        return;
    }
    case F_MISSING: {
        base_valid(&s, kind, from(kind, P_REGULAR), &l);
        int r = (int)below(4);
        if (r == 0) s.lat = C_MISSING;
        else if (r == 1) s.lon = C_MISSING;
        else if (r == 2) s.lat = s.lon = C_MISSING;
        else { /* {} */
            b_clear(&payload);
            b_str(&payload, chance(0.5) ? "{}" : " { \n } ");
            s.lat = s.lon = C_MISSING;
            if (kind == K_OT) s.type_missing = 1;
            if (kind == K_TRACCAR) s.uid_missing = 1;
            expect(&s);
            sent_routed[kind]++;
            family_sent[family]++;
            publish(topic_of(&s), payload.p, payload.n, (int)below(2));
            return;
        }
        if (kind == K_PLAIN && s.lat == C_MISSING && chance(0.5)) { l.lat_text = "null"; l.lat_key_long = 0; }
        send_spec(&s, &l, s.dev->qos, family);
        return;
    }
    case F_MEGA: { /* past inputs.max_payload: 16 KiB + 1, 64 KiB, 1 MiB, 4 MiB; or exactly the limit */
        base_valid(&s, kind, from(kind, P_REGULAR), &l);
        int r = (int)below(20);
        if (r < 4) { /* exactly max_payload bytes: accepted */
            l.pad = 3;
            b_clear(&payload);
            render(&s, &l, &payload);
            char *marker = memmem(payload.p, payload.n, "\"PAD\"", 5);
            if (!marker) die("no pad marker");
            size_t at = (size_t)(marker - payload.p) + 4, fill = (size_t)max_payload - payload.n;
            b_clear(&scratch);
            b_put(&scratch, payload.p, at);
            for (size_t i = 0; i < fill; i++) b_byte(&scratch, 'z');
            b_put(&scratch, payload.p + at, payload.n - at);
            expect(&s);
            sent_routed[kind]++;
            family_sent[family]++;
            publish(topic_of(&s), scratch.p, scratch.n, s.dev->qos);
            return;
        }
        static const int sizes[] = {16385, 16400, 65536, 1048576, 1048576, 4194304};
        l.pad = sizes[r < 19 ? below(5) : 5];
        s.oversized = 1;
        send_spec(&s, &l, (int)below(2), family);
        return;
    }
    case F_RANDOM: { /* random bytes that cannot start a JSON object or array */
        memset(&s, 0, sizeof s);
        s.kind = kind;
        s.json = J_NOTJSON;
        s.dev = from(kind, P_REGULAR);
        b_clear(&payload);
        int len = (int)below(600);
        for (int i = 0; i < len; i++) {
            unsigned char c = (unsigned char)below(256);
            if (i == 0) while (c == '{' || c == '[' || c == ' ' || c == '\t' || c == '\r' || c == '\n') c = (unsigned char)below(256);
            b_byte(&payload, c);
        }
        expect(&s);
        sent_routed[kind]++;
        family_sent[family]++;
        publish(topic_of(&s), payload.p, payload.n, (int)below(2));
        return;
    }
    case F_RANDOM_OBJ: { /* `{` and random bytes, or JSON-ish tokens: unknown outcome */
        memset(&s, 0, sizeof s);
        s.kind = kind;
        s.json = J_UNKNOWN;
        s.dev = from(kind, P_CHAOS);
        b_clear(&payload);
        b_byte(&payload, chance(0.8) ? '{' : '[');
        int len = (int)below(300);
        static const char *const tokens[] = {"\"lat\"", "\"lon\"", "\"tst\"", "\"_type\"", "\"location\"", ":", ",", "{", "}",
                                             "[", "]", "1", "-0.5", "1e400", "null", "true", "\"", "\\", "\\u", "\xff", "\xc3"};
        for (int i = 0; i < len; i++) {
            if (chance(0.5)) b_byte(&payload, (unsigned char)below(256));
            else b_str(&payload, PICK(tokens));
        }
        expect(&s);
        sent_routed[kind]++;
        family_sent[family]++;
        publish(topic_of(&s), payload.p, payload.n, (int)below(2));
        return;
    }
    case F_MUTATE: { /* a valid fix with 1-4 bytes changed, inserted or removed: unknown outcome */
        base_valid(&s, kind, from(kind, P_CHAOS), &l);
        b_clear(&payload);
        render(&s, &l, &payload);
        int edits = 1 + (int)below(4);
        static const char alphabet[] = "{}[]\":,.-+eE0123456789 \ntrufalsn\\u";
        for (int i = 0; i < edits && payload.n > 0; i++) {
            size_t at = below((uint32_t)payload.n);
            unsigned char c = chance(0.7) ? (unsigned char)alphabet[below(sizeof alphabet - 1)] : (unsigned char)below(256);
            int op = (int)below(3);
            if (op == 0) payload.p[at] = (char)c;
            else if (op == 1) {
                b_byte(&payload, 0);
                memmove(payload.p + at + 1, payload.p + at, payload.n - at - 1);
                payload.p[at] = (char)c;
            } else {
                memmove(payload.p + at, payload.p + at + 1, payload.n - at - 1);
                payload.n--;
            }
        }
        s.json = J_UNKNOWN;
        expect(&s);
        sent_routed[kind]++;
        family_sent[family]++;
        publish(topic_of(&s), payload.p, payload.n, s.dev->qos);
        return;
    }
    case F_UTF8: { /* a string that is not UTF-8, or an escaped lone surrogate */
        int good = chance(0.25);
        base_valid(&s, kind, from(kind, good || kind != K_TRACCAR ? P_REGULAR : P_CHAOS), &l);
        static const char *const bad[] = {"\"\xff\"", "\"\xc0\x80\"", "\"\x80\"", "\"\xed\xa0\x80\"", "\"\xf5\x80\x80\x80\"",
                                          "\"\xe2\x82\"", "\"\xf4\x90\x80\x80\"", "\"\\ud800\"", "\"\\udc00\"",
                                          "\"\\ud800\\u0041\"", "\"a\x01\"", "\"\\x41\""};
        static const char *const fine[] = {"\"\\ud83d\\ude00\"", "\"\xf0\x9f\x98\x80\"", "\"\\u0000\"", "\"\xef\xbb\xbf\"",
                                           "\"\xe2\x80\xae\""};
        Buf extra = {0};
        b_fmt(&extra, "\"tid\":%s", good ? PICK(fine) : PICK(bad));
        l.extra = extra.p;
        if (!good) s.json = kind == K_TRACCAR ? J_UNKNOWN : J_NOTJSON;
        send_spec(&s, &l, s.dev->qos, family);
        free(extra.p);
        return;
    }
    case F_DUPKEYS: { /* a member twice: the last one counts (scanner); JSONDecoder: unknown */
        base_valid(&s, kind, from(kind, kind == K_TRACCAR ? P_CHAOS : P_REGULAR), &l);
        if (kind == K_TRACCAR) {
            s.json = J_UNKNOWN;
            l.extra = "\"device\":{\"uniqueId\":\"chaos-0\"}";
        } else if (chance(0.5)) {
            l.extra = l.lat_key_long ? "\"latitude\":91" : "\"lat\":\"x\""; /* replaced by the later valid one */
        } else {
            /* the valid one first, then a bad one: invalid */
            l.lat_key_long = 0;
            l.lat_text = "48.5";
            s.latv = 48.5;
            Buf *tail = &scratch;
            b_clear(tail);
            b_clear(&payload);
            render(&s, &l, &payload);
            /* append ,"lat":"x" before the final brace */
            char *end = payload.p + payload.n - 1;
            while (*end != '}') end--;
            size_t at = (size_t)(end - payload.p);
            b_put(tail, payload.p, at);
            b_str(tail, ",\"lat\":\"x\"");
            b_put(tail, payload.p + at, payload.n - at);
            s.lat = C_INVALID;
            expect(&s);
            sent_routed[kind]++;
            family_sent[family]++;
            publish(topic_of(&s), tail->p, tail->n, s.dev->qos);
            return;
        }
        send_spec(&s, &l, s.dev->qos, family);
        return;
    }
    case F_ESCKEYS: { /* keys spelled with escapes; keys longer than the scanner keeps */
        base_valid(&s, kind, from(kind, P_REGULAR), &l);
        if (kind == K_TRACCAR) {
            l.extra = "\"p\\u006fsition_is_not_this_one_because_it_is_long\":{\"latitude\":1}";
        } else if (chance(0.5)) {
            l.extra = "\"latXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX\":\"ignored\"";
        } else {
            /* only an overlong lat key, no lat: missing */
            l.extra = "\"latYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYY\":48.1";
            s.lat = C_MISSING;
            l.lat_text = NULL;
        }
        send_spec(&s, &l, s.dev->qos, family);
        return;
    }
    case F_TOPLEVEL: {
        memset(&s, 0, sizeof s);
        s.kind = kind;
        s.dev = from(kind, P_REGULAR);
        s.json = J_NOTJSON;
        b_clear(&payload);
        int r = (int)below(8);
        if (r == 0) {
            b_str(&payload, "[{\"_type\":\"location\",\"lat\":8,\"lon\":9,\"tst\":1000},{\"_type\":\"lwt\",\"tst\":1000}]");
            if (kind == K_OT) { s.json = J_VALID; s.array = 1; }
        } else if (r == 1) {
            b_str(&payload, chance(0.5) ? "[]" : " \n[ ]");
            if (kind == K_OT) { s.json = J_VALID; s.array = 1; }
        } else if (r == 2) {
            b_str(&payload, "[{\"_type\":\"location\",\"lat\":8,");
        } else {
            static const char *const scalars[] = {"\"location\"", "123", "null", "true", "-0", "\"\"", " ", "", "\xef\xbb\xbf{}"};
            int which = (int)below(9);
            b_str(&payload, scalars[which]);
            if (which == 8 && kind == K_TRACCAR) { /* JSONDecoder skips a byte order mark: {} has no uniqueId */
                s.json = J_VALID;
                s.uid_missing = 1;
            }
        }
        expect(&s);
        sent_routed[kind]++;
        family_sent[family]++;
        publish(topic_of(&s), payload.p, payload.n, (int)below(2));
        return;
    }
    case F_OTHER_TOPIC: { /* the lamp and Home Assistant status topics the daemon subscribes to */
        static const char *const topics[] = {"wled/fuzz/status", "tele/fuzzbulb/LWT", "signs/fuzz/status", "homeassistant/status"};
        const char *topic = PICK(topics);
        b_clear(&payload);
        int r = (int)below(1000);
        if (strcmp(topic, "homeassistant/status") == 0) {
            /* online resends every discovery config: rarely */
            if (r == 0 && ha_online_sent < 3) { b_str(&payload, "online"); ha_online_sent++; }
            else b_str(&payload, r < 500 ? "offline" : "onl1ne");
        } else if (r < 50) {
            b_str(&payload, strcmp(topic, "tele/fuzzbulb/LWT") == 0 ? "Online" : "online");
            lamp_online_sent++;
        } else {
            int len = (int)below(64);
            for (int i = 0; i < len; i++) b_byte(&payload, (unsigned char)below(256));
        }
        sent_other++;
        family_sent[family]++;
        publish(topic, payload.p, payload.n, (int)below(2));
        return;
    }
    case F_TWINS: { /* first the precomposed twin with a new tst, then the decomposed one with an older tst */
        Pool *p = &pools[K_OT][P_TWINS];
        int pair = (int)below((uint32_t)p->n / 2);
        Dev *first = &p->d[2 * pair], *second = &p->d[2 * pair + 1];
        int later = held_find(first->key)->has && !held_find(second->key)->has;
        base_valid(&s, K_OT, later ? second : first, &l);
        s.tst = T_VALUE;
        s.tstv = later ? 1000000000 + pair : ++tst_counter;
        send_spec(&s, &l, s.dev->qos, family);
        return;
    }
    default: { /* F_UNROUTED: topics no input filter matches: never delivered to the daemon */
        static const char *const topics[] = {"owntracks/alone", "owntracks/a/b/c", "ampel/location", "ampel/location/a/b",
                                             "traccar/events/x", "traccar", "fuzz/elsewhere", "ampel/locations/x",
                                             "Owntracks/u/d", "owntracks"};
        base_valid(&s, K_OT, from(K_OT, P_REGULAR), &l);
        b_clear(&payload);
        render(&s, &l, &payload);
        sent_unrouted++;
        family_sent[family]++;
        publish(PICK(topics), payload.p, payload.n, (int)below(2));
        return;
    }
    }
}

/* ---------------------------------------------------------------- main */

static void send_probe(int64_t n) {
    char json[128];
    int len = snprintf(json, sizeof json, "{\"_type\":\"location\",\"lat\":48.1374,\"lon\":11.5755,\"tst\":%" PRId64 "}", probe_base + n);
    publish("owntracks/fuzz/probe", json, (size_t)len, 1);
    accepted_expected[K_OT]++;
    sent_routed[K_OT]++;
    probes++;
}

static pid_t daemon_pid; /* --daemon-pid: stop waiting as soon as it is gone */

static int wait_probe(int64_t n, double timeout) {
    double end = now_s() + timeout;
    pthread_mutex_lock(&lock);
    while (probe_seen < n) {
        struct timespec soon;
        clock_gettime(CLOCK_REALTIME, &soon);
        soon.tv_sec += 1;
        pthread_cond_timedwait(&cond, &lock, &soon);
        if (probe_seen >= n) break;
        if ((daemon_pid > 0 && kill(daemon_pid, 0) != 0 && errno == ESRCH) || now_s() > end) {
            pthread_mutex_unlock(&lock);
            return 0;
        }
    }
    pthread_mutex_unlock(&lock);
    return 1;
}

static void write_hex(FILE *f, const char *p, size_t n) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        fputc(digits[(unsigned char)p[i] >> 4], f);
        fputc(digits[(unsigned char)p[i] & 15], f);
    }
}

static FILE *open_out(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) die("cannot write %s: %s", path, strerror(errno));
    return f;
}

static void usage(void) {
    fprintf(stderr, "usage: fuzz_gen --port P [--host H] [--count N] [--seed S] [--window W] [--probe-every K]\n"
                    "                [--max-payload B] [--traccar-topic T] [--only FAMILY] [--only-kind KIND]\n"
                    "                [--daemon-pid PID] --out DIR\n");
    exit(64);
}

int main(int argc, char **argv) {
    const char *host = "127.0.0.1", *out = NULL;
    int port = 0;
    long count = 1000000, window = 20000, probe_every = 1000;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) usage();
        if (strcmp(a, "--host") == 0) host = v;
        else if (strcmp(a, "--port") == 0) port = atoi(v);
        else if (strcmp(a, "--count") == 0) count = atol(v);
        else if (strcmp(a, "--seed") == 0) seed = strtoull(v, NULL, 10);
        else if (strcmp(a, "--window") == 0) window = atol(v);
        else if (strcmp(a, "--probe-every") == 0) probe_every = atol(v);
        else if (strcmp(a, "--max-payload") == 0) max_payload = atoi(v);
        else if (strcmp(a, "--traccar-topic") == 0) traccar_topic = v;
        else if (strcmp(a, "--out") == 0) out = v;
        else if (strcmp(a, "--daemon-pid") == 0) daemon_pid = (pid_t)atol(v);
        else if (strcmp(a, "--only-kind") == 0) {
            for (int k = 0; k < K_COUNT; k++)
                if (strcmp(kind_name[k], v) == 0) only_kind = k;
            if (only_kind < 0) die("unknown kind %s", v);
        } else if (strcmp(a, "--only") == 0) {
            for (int f = 0; f < F_COUNT; f++)
                if (strcmp(family_name[f], v) == 0) only_family = f;
            if (only_family < 0) die("unknown family %s", v);
        } else usage();
        i++;
    }
    if (!port || !out || probe_every < 1) usage();
    rng_state = seed;
    make_pools();

    mosquitto_lib_init();
    char id[64];
    snprintf(id, sizeof id, "ampel-fuzz-%d", (int)getpid());
    client = mosquitto_new(id, true, NULL);
    if (!client) die("mosquitto_new failed");
    mosquitto_int_option(client, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_int_option(client, MOSQ_OPT_TCP_NODELAY, 1);
    mosquitto_int_option(client, MOSQ_OPT_SEND_MAXIMUM, 1000);
    mosquitto_int_option(client, MOSQ_OPT_RECEIVE_MAXIMUM, 1000);
    mosquitto_connect_v5_callback_set(client, on_connect);
    mosquitto_disconnect_v5_callback_set(client, on_disconnect);
    mosquitto_subscribe_v5_callback_set(client, on_subscribe);
    mosquitto_message_v5_callback_set(client, on_message);
    if (mosquitto_loop_start(client) != MOSQ_ERR_SUCCESS) die("loop_start failed");
    int rc = mosquitto_connect_async(client, host, port, 60);
    if (rc != MOSQ_ERR_SUCCESS) die("connect: %s", mosquitto_strerror(rc));
    pthread_mutex_lock(&lock);
    while (!connected) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    /* Everything but our own publishes (No Local), at QoS 1 so the broker queues rather than drops. */
    rc = mosquitto_subscribe_v5(client, NULL, "#", 1, MQTT_SUB_OPT_NO_LOCAL, NULL);
    if (rc != MOSQ_ERR_SUCCESS) die("subscribe: %s", mosquitto_strerror(rc));
    rc = mosquitto_subscribe_v5(client, NULL, "$SYS/broker/publish/messages/dropped", 0, 0, NULL);
    if (rc != MOSQ_ERR_SUCCESS) die("subscribe: %s", mosquitto_strerror(rc));
    pthread_mutex_lock(&lock);
    while (subscribed < 2) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);

    double start = now_s(), last_report = start;
    int64_t probe = 0;
    for (long i = 0; i < count; i++) {
        gen_one(only_family >= 0 ? only_family : pick_family());
        if ((i + 1) % probe_every == 0) {
            send_probe(++probe);
            if (window > 0) {
                int64_t behind = probe - window / probe_every;
                if (behind > 0 && !wait_probe(behind, 120)) die("no device state for probe %" PRId64 " within 120 s, or the daemon is gone: it stopped answering", behind);
            }
        }
        double t = now_s();
        if (t - last_report >= 10) {
            fprintf(stderr, "fuzz_gen: %ld of %ld sent (%.0f/s), probe %" PRId64 " back of %" PRId64 "\n", i + 1, count,
                    (i + 1) / (t - start), probe_seen, probe);
            last_report = t;
        }
    }
    double sent_at = now_s();
    /* Everything sent before this probe has been handled when its state comes back. */
    send_probe(++probe);
    if (!wait_probe(probe, 300)) die("no device state for the last probe within 300 s, or the daemon is gone");
    double handled_at = now_s();

    /* One good location in München for a fresh device. */
    snprintf(munich_topic, sizeof munich_topic, "ampel/device/fuzz/munich-%" PRIu64 "/state", seed);
    char topic[128], json[160];
    snprintf(topic, sizeof topic, "owntracks/fuzz/munich-%" PRIu64, seed);
    int len = snprintf(json, sizeof json, "{\"_type\":\"location\",\"lat\":48.1374,\"lon\":11.5755,\"tst\":%" PRId64 ",\"acc\":12}",
                       probe_base + probe + 1);
    double munich_sent = now_s();
    publish(topic, json, (size_t)len, 1);
    accepted_expected[K_OT]++;
    sent_routed[K_OT]++;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 60;
    pthread_mutex_lock(&lock);
    while (munich_payload.n == 0)
        if (pthread_cond_timedwait(&cond, &lock, &deadline) == ETIMEDOUT) break;
    double munich_seen = munich_at;
    pthread_mutex_unlock(&lock);
    /* bridge/info goes out at most once a second while counters change: wait until one came
     * more than a second after the last change and then nothing for 2 s (at most 30 s). */
    for (int i = 0; i < 300; i++) {
        usleep(100000);
        pthread_mutex_lock(&lock);
        double info = info_at, t = now_s();
        pthread_mutex_unlock(&lock);
        /* A bridge/info that arrives after the München state was published after that fix
         * was handled (one connection, in order): it counts everything. */
        if (munich_seen > 0 && info > munich_seen && t - info > 2.0) break;
        if (munich_seen == 0 && t - handled_at > 5) break;
    }
    mosquitto_disconnect(client);
    mosquitto_loop_stop(client, false);

    /* ---- outputs */
    pthread_mutex_lock(&lock);
    FILE *f = open_out(out, "topics.tsv");
    for (size_t i = 0; i < seen_cap; i++) {
        if (!seen[i].topic) continue;
        write_hex(f, seen[i].topic, strlen(seen[i].topic));
        fprintf(f, "\t%ld\t", seen[i].count);
        write_hex(f, seen[i].last.p ? seen[i].last.p : "", seen[i].last.n);
        fputc('\n', f);
    }
    fclose(f);
    f = open_out(out, "info.json");
    fwrite(info_payload.p ? info_payload.p : "", 1, info_payload.n, f);
    fclose(f);
    f = open_out(out, "munich.json");
    fwrite(munich_payload.p ? munich_payload.p : "", 1, munich_payload.n, f);
    fclose(f);
    /* Keys that may have a device state: every key of a payload that could be accepted. */
    f = open_out(out, "keys.txt");
    for (int k = 0; k < K_COUNT; k++)
        for (int p = 0; p < P_COUNT; p++)
            for (int i = 0; i < pools[k][p].n; i++) {
                write_hex(f, pools[k][p].d[i].key, strlen(pools[k][p].d[i].key));
                fprintf(f, "\t%s\t%d\n", kind_name[k], pools[k][p].d[i].safe);
            }
    fprintf(f, "%s\towntracks\t1\n", "66757a7a2f70726f6265"); /* fuzz/probe */
    write_hex(f, munich_topic + strlen("ampel/device/"), strlen(munich_topic) - strlen("ampel/device/") - strlen("/state"));
    fprintf(f, "\towntracks\t1\n");
    fclose(f);
    f = open_out(out, "summary.json");
    double elapsed = sent_at - start;
    fprintf(f, "{\n  \"count\": %ld, \"seed\": %" PRIu64 ", \"window\": %ld, \"probe_every\": %ld, \"max_payload\": %d,\n", count, seed,
            window, probe_every, max_payload);
    fprintf(f, "  \"send_seconds\": %.3f, \"rate\": %.0f, \"drain_seconds\": %.3f, \"bytes_sent\": %" PRIu64 ",\n", elapsed,
            count / (elapsed > 0 ? elapsed : 1), handled_at - sent_at, bytes_sent);
    fprintf(f, "  \"sent_qos\": [%ld, %ld], \"probes\": %ld, \"refused\": %ld, \"sent_other\": %ld, \"sent_unrouted\": %ld,\n",
            sent_qos[0], sent_qos[1], probes, refused, sent_other, sent_unrouted);
    fprintf(f, "  \"ha_online_sent\": %ld, \"lamp_online_sent\": %ld, \"received\": %ld, \"received_bytes\": %ld, \"sys_dropped\": %ld,\n",
            ha_online_sent, lamp_online_sent, received, received_bytes, sys_dropped);
    fprintf(f, "  \"munich_topic\": \"%s\", \"munich_seconds\": %.3f,\n", munich_topic, munich_seen > 0 ? munich_seen - munich_sent : -1);
    fprintf(f, "  \"families\": {");
    for (int i = 0; i < F_COUNT; i++) fprintf(f, "%s\"%s\": %ld", i ? ", " : "", family_name[i], family_sent[i]);
    fprintf(f, "},\n  \"routed\": {");
    for (int k = 0; k < K_COUNT; k++) fprintf(f, "%s\"%s\": %ld", k ? ", " : "", kind_name[k], sent_routed[k]);
    fprintf(f, "},\n  \"accepted\": {");
    for (int k = 0; k < K_COUNT; k++) fprintf(f, "%s\"%s\": %ld", k ? ", " : "", kind_name[k], accepted_expected[k]);
    fprintf(f, "},\n  \"unknown\": {");
    for (int k = 0; k < K_COUNT; k++) fprintf(f, "%s\"%s\": %ld", k ? ", " : "", kind_name[k], unknown_expected[k]);
    fprintf(f, "},\n  \"dropped\": {");
    for (int r = 0; r < R_COUNT; r++) {
        long total = 0;
        for (int k = 0; k < K_COUNT; k++) total += dropped_expected[k][r];
        fprintf(f, "%s\"%s\": %ld", r ? ", " : "", reason_name[r], total);
    }
    fprintf(f, "},\n  \"dropped_by_kind\": {");
    for (int k = 0; k < K_COUNT; k++) {
        fprintf(f, "%s\"%s\": {", k ? ", " : "", kind_name[k]);
        for (int r = 0; r < R_COUNT; r++) fprintf(f, "%s\"%s\": %ld", r ? ", " : "", reason_name[r], dropped_expected[k][r]);
        fprintf(f, "}");
    }
    fprintf(f, "},\n  \"skipped\": {");
    for (int i = 0; i < skip_count; i++) fprintf(f, "%s\"%s\": %ld", i ? ", " : "", skip_names[i], skip_expected[i]);
    fprintf(f, "},\n  \"invalid_lang\": %ld, \"invalid_lang_possible\": %ld\n}\n", invalid_lang_expected, invalid_lang_possible);
    fclose(f);
    pthread_mutex_unlock(&lock);
    mosquitto_destroy(client);
    mosquitto_lib_cleanup();
    fprintf(stderr, "fuzz_gen: sent %ld payloads (+%ld probes) in %.1f s (%.0f/s); all handled %.1f s later\n", count, probes,
            elapsed, count / (elapsed > 0 ? elapsed : 1), handled_at - sent_at);
    return munich_payload.n > 0 ? 0 : 3;
}
