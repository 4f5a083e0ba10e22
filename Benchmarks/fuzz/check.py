#!/usr/bin/env python3
"""The verdict of a broker-level fuzz run (Benchmarks/fuzz/run.sh): reads what fuzz_gen wrote
(summary.json, topics.tsv, info.json, munich.json, keys.txt), the RSS samples and
`ampel check`'s answer, prints a report, and exits 1 on any failure."""
import argparse
import json
import re
import sys
import unicodedata

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--rss-limit-mb", type=float, default=0, help="absolute limit; 0: --rss-limit-ratio x the RSS at start")
parser.add_argument("--rss-limit-ratio", type=float, default=2.0)
parser.add_argument("--generator-exit", type=int, required=True)
parser.add_argument("--alive", type=int, required=True)
parser.add_argument("--stop-exit", type=int, required=True)
parser.add_argument("--seconds", type=float, default=0)
args = parser.parse_args()
out = args.out

failures = []


def fail(message):
    failures.append(message)
    print("FAIL: " + message)


def read(name, mode="r"):
    try:
        with open(f"{out}/{name}", mode) as f:
            return f.read()
    except OSError:
        return b"" if "b" in mode else ""


# ---------------------------------------------------------------- the run itself
summary = json.loads(read("summary.json") or "{}")
print(f"payloads: {summary.get('count', '?')} (seed {summary.get('seed', '?')}, window {summary.get('window', '?')}), "
      f"+{summary.get('probes', 0)} pacing probes; QoS 0/1: {summary.get('sent_qos')}; "
      f"{summary.get('bytes_sent', 0) / 1e6:.1f} MB; sent in {summary.get('send_seconds', 0):.1f} s "
      f"({summary.get('rate', 0):.0f}/s), all handled {summary.get('drain_seconds', 0):.2f} s later; whole run {args.seconds:.1f} s")
if summary.get("families"):
    print("families: " + ", ".join(f"{k} {v}" for k, v in summary["families"].items()))
if args.generator_exit != 0:
    fail(f"fuzz_gen exited with {args.generator_exit} (see gen.log)")

# ---------------------------------------------------------------- alive, memory
if args.alive != 1:
    fail("the daemon is not running after the fuzz run (see daemon.log)")
else:
    print("daemon: alive after the run")
if not summary:
    fail("no summary.json: fuzz_gen did not finish")
    print(f"FUZZ RUN FAILED: {len(failures)} problem(s)")
    sys.exit(1)
samples = []  # (time, VmRSS, RssAnon, RssFile) in kB
for line in read("rss.txt").splitlines():
    parts = line.split()
    if len(parts) == 4:
        samples.append((float(parts[0]), int(parts[1]), int(parts[2]), int(parts[3])))
status = dict(re.findall(r"^(\w+):\s+(\d+) kB", read("daemon-status.txt"), re.M))
hwm = int(status.get("VmHWM", 0))
end_rss = int(status.get("VmRSS", samples[-1][1] if samples else 0))
peak_sampled = max((s[1] for s in samples), default=0)
start_rss = samples[0][1] if samples else 0
peak = max(hwm, peak_sampled)
limit_kb = args.rss_limit_mb * 1024 if args.rss_limit_mb > 0 else args.rss_limit_ratio * start_rss
limit_text = f"{args.rss_limit_mb:.0f} MiB" if args.rss_limit_mb > 0 else f"{args.rss_limit_ratio:g} x the RSS at start = {limit_kb / 1024:.1f} MiB"


def mib(kb):
    return f"{kb / 1024:.1f} MiB"


print(f"RSS: start {mib(start_rss)}, peak {mib(peak)} (VmHWM {mib(hwm)}, sampled {mib(peak_sampled)}, "
      f"{len(samples)} samples), end {mib(end_rss)}; peak/start {peak / max(start_rss, 1):.2f}; limit {limit_text}")
if samples:
    top = max(samples, key=lambda x: x[1])
    print(f"  highest sample {mib(top[1])}: anonymous {mib(top[2])}, file-backed {mib(top[3])} "
          f"(at start: {mib(samples[0][2])} and {mib(samples[0][3])})")
if not samples or peak > limit_kb:
    fail(f"peak RSS {mib(peak)} above the limit ({limit_text})")
if args.stop_exit != 0 and args.alive == 1:
    fail(f"SIGTERM after the run ended the daemon with {args.stop_exit}, not 0")
elif args.alive == 1:
    print("SIGTERM after the run: exit 0")

# ---------------------------------------------------------------- counters
info = {}
try:
    info = json.loads(read("info.json"))
except ValueError:
    fail("no readable ampel/bridge/info at the end")
counters = info.get("counters", {})
accepted = counters.get("accepted", {})
skipped = counters.get("skipped", {})
dropped = counters.get("dropped", {})
print("bridge/info counters: accepted " + json.dumps(accepted, sort_keys=True) + ", skipped " + json.dumps(skipped, sort_keys=True)
      + ", dropped " + json.dumps(dropped, sort_keys=True) + f", invalidLang {counters.get('invalidLang')}, "
      f"published {counters.get('published')}, alerts {counters.get('alerts')}, publishFailures {counters.get('publishFailures')}, "
      f"devices {info.get('devices')}")

unknown = summary["unknown"]
unknown_total = sum(unknown.values())
routed_total = sum(summary["routed"].values())
counted_total = sum(accepted.values()) + sum(skipped.values()) + sum(dropped.values())
print(f"sent on input topics: {routed_total} (owntracks {summary['routed']['owntracks']}, plain {summary['routed']['plain']}, "
      f"traccar {summary['routed']['traccar']}; probes and the München fix included); counted by the daemon: {counted_total}")
print(f"not counted by design: {summary['sent_other']} on lamp/Home Assistant status topics (no counter), "
      f"{summary['sent_unrouted']} on topics no filter matches (never delivered), {summary['refused']} refused by libmosquitto "
      f"before sending; broker's dropped-message counter: {summary['sys_dropped']}")

rows = []  # (what, expected determinate, actual)
for kind, n in summary["accepted"].items():
    rows.append((f"accepted.{kind}", n, accepted.get(kind, 0)))
for name, n in summary["skipped"].items():
    rows.append((f"skipped.{name}", n, skipped.get(name, 0)))
for name in skipped:
    if name not in summary["skipped"]:
        rows.append((f"skipped.{name}", 0, skipped[name]))
for reason, n in summary["dropped"].items():
    rows.append((f"dropped.{reason}", n, dropped.get(reason, 0)))
for reason in dropped:
    if reason not in summary["dropped"]:
        rows.append((f"dropped.{reason}", 0, dropped[reason]))
print()
print(f"| counter | expected (determinate) | actual | from the {unknown_total} unknown (mutated, random objects) |")
print("|---|---|---|---|")
excess_total = 0
for what, expected, actual in rows:
    excess = actual - expected
    excess_total += excess
    print(f"| {what} | {expected} | {actual} | {excess:+d} |")
    if excess < 0:
        fail(f"{what}: {actual}, but {expected} payloads were sent that must be counted there")
print()
if excess_total != unknown_total or counted_total != routed_total:
    lost = routed_total - counted_total
    fail(f"the counters hold {counted_total} messages, {routed_total} were sent on input topics ({lost:+d} not accounted for; "
         f"the unknown ones add {excess_total} where {unknown_total} were sent; broker dropped-message counter "
         f"{summary['sys_dropped']})")
else:
    print(f"accounted for: all {routed_total} messages on input topics are in the counters; the {unknown_total} of unknown "
          f"outcome landed as shown in the last column")
lang = counters.get("invalidLang", 0)
if not summary["invalid_lang"] <= lang <= summary["invalid_lang"] + summary["invalid_lang_possible"]:
    fail(f"invalidLang {lang}, expected {summary['invalid_lang']} (+ up to {summary['invalid_lang_possible']} unknown plain)")
if counters.get("publishFailures", 0):
    fail(f"publishFailures {counters['publishFailures']}")
# The unknown ones per input must not exceed what was sent per input.
for kind in ("owntracks", "plain", "traccar"):
    more = accepted.get(kind, 0) - summary["accepted"][kind]
    if more > unknown[kind]:
        fail(f"accepted.{kind} {more} above the determinate expectation, only {unknown[kind]} unknown were sent there")

# ---------------------------------------------------------------- topics
keys = {}
for line in read("keys.txt").splitlines():
    hexkey, kind, safe = line.split("\t")
    keys[bytes.fromhex(hexkey).decode("utf-8")] = (kind, safe == "1")


def key_is_safe(key):
    """DeviceKey.isSafe as docs/topics.md states it (unsafe-device-key)."""
    raw = key.encode("utf-8")
    if not raw or len(raw) > 128 or key.startswith("$") or key.startswith("/") or key.endswith("/") or "//" in key:
        return False
    for ch in key:
        if ch in "+#" or ord(ch) <= 0x20 or ord(ch) == 0x7F:
            return False
        if ord(ch) >= 0x80 and (ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs")):
            return False
    return True


def object_id(key):
    """DeviceKey.objectID: [a-z0-9_], with an FNV-1a hash of the key when anything was replaced."""
    out_id = "".join(ch if re.fullmatch(r"[a-z0-9_]", ch) else "_" for ch in key)
    if out_id == key:
        return out_id
    h = 2166136261
    for byte in key.encode("utf-8"):
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return f"{out_id}_{h:08x}"


lamp_topics = {"wled/fuzz/col", "wled/fuzz/api", "cmnd/fuzzbulb/Color", "cmnd/fuzzbulb/Power", "signs/fuzz/color"}
patterns = [
    ("bridge", re.compile(r"ampel/bridge/(state|info)")),
    # docs/topics.md: each device alert again on `…/event`, for Home Assistant's event entity.
    ("device", re.compile(r"ampel/device/(.+)/(state|alert|event)", re.S)),
    ("district", re.compile(r"ampel/district/(09\d{3})/(state|phase|alert)")),
    ("discovery-bridge", re.compile(r"homeassistant/(?:binary_sensor/ampel/bridge_(?:connectivity|stale)|sensor/ampel/bridge_data_date)/config")),
    ("discovery-district", re.compile(r"homeassistant/(?:sensor/ampel/district_(09\d{3})(?:_incidence)?|event/ampel/district_(09\d{3}))/config")),
    ("discovery-device", re.compile(r"homeassistant/(?:sensor|event)/ampel/device_([a-z0-9_]+)/config")),
    # docs/owntracks.md: transitions and the card to the apps of an OwnTracks user (one level).
    ("owntracks-notice", re.compile(r"owntracks/([^/]+)/ampel/(event|info)", re.S)),
]
by_class = {}
device_keys = set()
object_ids = set()
notice_users = set()
odd_keys = []
topic_count = 0
for line in read("topics.tsv").splitlines():
    hextopic, n, hexpayload = line.split("\t")
    topic = bytes.fromhex(hextopic).decode("utf-8", errors="replace")
    payload = bytes.fromhex(hexpayload)
    n = int(n)
    topic_count += 1
    cls = "lamp" if topic in lamp_topics else None
    match = None
    for name, pattern in patterns:
        match = pattern.fullmatch(topic)
        if match:
            cls = name
            break
    if cls is None:
        fail(f"published on an undocumented topic: {topic!r} ({n} messages)")
        continue
    by_class.setdefault(cls, [0, 0])
    by_class[cls][0] += 1
    by_class[cls][1] += n
    if cls == "device":
        key = match.group(1)
        device_keys.add(key)
        if not key_is_safe(key):
            fail(f"device topic with an unsafe key: {topic!r}")
        elif key not in keys:
            # A mutated Traccar uniqueId can name a new device; sanitized, it is plain ASCII.
            if re.fullmatch(r"[A-Za-z0-9._-]{1,128}", key):
                odd_keys.append(key)
            else:
                fail(f"device topic for a key no payload carried: {topic!r}")
        elif not keys[key][1]:
            fail(f"device topic for a key the daemon must refuse: {topic!r}")
        try:
            body = json.loads(payload)
            if match.group(2) == "state" and body.get("device") != key:
                fail(f"{topic!r}: state names device {body.get('device')!r}")
        except ValueError:
            fail(f"{topic!r}: last payload is not JSON")
    elif cls == "discovery-device":
        object_ids.add(match.group(1))
    elif cls == "owntracks-notice":
        notice_users.add(match.group(1))
        try:
            body = json.loads(payload)
            wanted = "transition" if match.group(2) == "event" else "card"
            if body.get("_type") != wanted:
                fail(f"{topic!r}: last payload is a {body.get('_type')!r}, not a {wanted}")
        except ValueError:
            fail(f"{topic!r}: last payload is not JSON")
    elif cls in ("district", "discovery-district", "discovery-bridge", "bridge") and not (cls == "district" and topic.endswith("/phase")):
        try:
            json.loads(payload)
        except ValueError:
            fail(f"{topic!r}: last payload is not JSON")
# Only users of OwnTracks devices that have a state hear from Ampel.
owntracks_users = {k.split("/", 1)[0] for k in device_keys if k.count("/") == 1}
for user in sorted(notice_users - owntracks_users)[:10]:
    fail(f"OwnTracks notices for user {user!r} of no device that has a state")
expected_ids = {object_id(k) for k in device_keys}
for oid in sorted(object_ids - expected_ids)[:10]:
    fail(f"discovery config for object id {oid!r} of no device that has a state")
print(f"topics: {topic_count} distinct, every one documented: " + ", ".join(
    f"{cls} {v[0]} topics / {v[1]} messages" for cls, v in sorted(by_class.items())))
odd_keys = sorted(set(odd_keys))
if odd_keys:
    print(f"  {len(odd_keys)} device keys from mutated Traccar uniqueIds (ASCII, sanitized), e.g. {odd_keys[:3]}")
invisible = sorted(k for k in device_keys if any(ch in k for ch in "\u3164\u2800\u034f\ufe0f"))
if invisible:
    # Safe by the documented rules (no Cf, Cc or white space), though a person cannot see them.
    print(f"  {len(invisible)} keys with an invisible character that is neither Cf, Cc nor white space "
          f"(U+3164, U+2800, U+034F, U+FE0F) got a state, as the documented rules allow: e.g. {invisible[:2]!r}")
received_keys_in_pool = sum(1 for k in device_keys if k in keys)
print(f"  device states for {len(device_keys)} keys ({received_keys_in_pool} from the generator's pools); "
      f"hostile keys with a state: {sum(1 for k in device_keys if k in keys and not re.fullmatch(r'[ -~]*', k))}")

# ---------------------------------------------------------------- München afterwards
try:
    munich = json.loads(read("munich.json"))
except ValueError:
    munich = None
try:
    check = json.loads(read("check.json"))
except ValueError:
    check = None
if munich is None:
    fail("no device state for the München fix after the run")
elif check is None:
    fail("`ampel check --lat 48.1374 --lon 11.5755 --json` gave no JSON")
else:
    ags = (munich.get("district") or {}).get("ags")
    if ags != "09162":
        fail(f"München fix: district {ags}, expected 09162")
    for field in ("phase", "color", "incidence", "dataDate", "district", "title", "ruleSet", "stale", "rules", "always"):
        if munich.get(field) != check.get(field):
            fail(f"München fix: {field} is {munich.get(field)!r}, `ampel check` says {check.get(field)!r}")
    if (munich.get("lat"), munich.get("lon")) != (48.1374, 11.5755):
        fail(f"München fix: position {munich.get('lat')}, {munich.get('lon')}")
    print(f"München afterwards: {summary['munich_topic']}: district {ags}, phase {munich.get('phase')}, "
          f"incidence {munich.get('incidence')} (ampel check: {check.get('phase')}, {check.get('incidence')}), "
          f"{summary.get('munich_seconds', -1) * 1000:.0f} ms after sending")

print()
if failures:
    print(f"FUZZ RUN FAILED: {len(failures)} problem(s)")
    sys.exit(1)
print("FUZZ RUN PASSED")
