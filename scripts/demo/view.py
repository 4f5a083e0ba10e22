#!/usr/bin/env python3
"""Terminal views for the Ampel demo, fed by `mosquitto_sub -F '%t %x'` (topic, hex payload).

  view.py alerts              a compact live log of device alerts (one line each)
  view.py lamp KEY            a lamp drawn from ampel/device/KEY/state (used while
                              `ampel lamp` is not available)
  view.py watch SECONDS KEY...
                              for `demo.sh --check`: reads ampel/# live from stdin; exits 0
                              as soon as every KEY has a state and a device changed phase
                              on the move, or after SECONDS if every KEY has a state and any
                              alert came; else 1. Prints what it saw.
  view.py verify FILE KEY...  the same judgement on a finished capture

`mosquitto_sub -d` debug lines in the input are ignored, except that `alerts` prints its
header when the subscription is acknowledged (demo.sh waits for that line).
Python 3 standard library only.
"""
import json
import os
import select
import sys
import time

PHASE_ANSI = {"green": "32", "yellow": "33", "red": "31", "darkred": "31;1", "outside": "90"}
PHASE_RGB = {"green": (0, 160, 0), "yellow": (230, 180, 0), "red": (220, 0, 0),
             "darkred": (139, 0, 0), "outside": (110, 110, 110)}
TTY = sys.stdout.isatty() or os.environ.get("AMPEL_DEMO_COLOR") == "1"


def paint(text, phase):
    if not TTY or phase not in PHASE_ANSI:
        return text
    return f"\x1b[{PHASE_ANSI[phase]}m{text}\x1b[0m"


def parse(line):
    """(topic, payload object, raw text, or None) from a `%t %x` line; None for other lines."""
    line = line.rstrip("\n")
    if not line:
        return None
    if line.startswith(("Client ", "Subscribed ")):  # mosquitto_sub -d
        return ("$debug", line)
    topic, _, hexpayload = line.partition(" ")
    try:
        raw = bytes.fromhex(hexpayload).decode("utf-8")
    except ValueError:
        return (topic, None)
    try:
        return (topic, json.loads(raw))
    except ValueError:
        return (topic, raw)


def records(stream):
    """Yields (topic, payload) from `%t %x` lines, skipping debug lines."""
    for line in stream:
        rec = parse(line)
        if rec is not None and rec[0] != "$debug":
            yield rec


def district_name(d):
    if isinstance(d, dict):
        return d.get("name") or d.get("ags") or "?"
    return str(d) if d is not None else "-"


def incidence_text(x):
    return f"{x:.1f}" if isinstance(x, (int, float)) else "-"


def device_key(topic, suffix):
    # ampel/device/<key>/<suffix>, where <key> may have two levels (OwnTracks user/device).
    parts = topic.split("/")
    if len(parts) >= 4 and parts[0] == "ampel" and parts[1] == "device" and parts[-1] == suffix:
        return "/".join(parts[2:-1])
    return None


HEADER = "time      device       change              district (incidence)          title"


def alerts():
    header_shown = False
    for line in sys.stdin:
        rec = parse(line)
        if rec is None:
            continue
        topic, obj = rec
        if topic == "$debug":
            if not header_shown and "received SUBACK" in obj:
                print(HEADER, flush=True)
                header_shown = True
            continue
        key = device_key(topic, "alert")
        if key is None or not isinstance(obj, dict):
            continue
        frm = obj.get("from") or "(new)"
        to = obj.get("to") or "?"
        change = f"{frm:>7} -> {paint(f'{to:<8}', to)}"
        where = f"{district_name(obj.get('district'))} ({incidence_text(obj.get('incidence'))})"
        print(f"{time.strftime('%H:%M:%S')}  {key:<12} {change} {where:<29} "
              f"{obj.get('title') or ''} [{obj.get('lang') or ''}]", flush=True)


def lamp(key):
    state_topic = f"ampel/device/{key}/state"
    last = None
    # The state names the retained topic of its phase's texts (`texts`); with
    # outputs.texts_in_state it carries `title` itself.
    texts = {}
    for topic, obj in records(sys.stdin):
        if topic == "ampel/bridge/state":
            online = isinstance(obj, dict) and obj.get("state") == "online"
            if not online:
                draw_lamp(key, None, "Ampel is offline")
            continue
        if topic.startswith("ampel/rules/") and isinstance(obj, dict):
            texts[topic] = obj
            if last is not None and last.get("texts") == topic:
                draw_lamp(key, dict(last, title=obj.get("title")), None)
            continue
        if topic != state_topic or not isinstance(obj, dict):
            continue
        last = obj
        shown = obj if "title" in obj else dict(obj, title=texts.get(obj.get("texts"), {}).get("title"))
        draw_lamp(key, shown, None)


def draw_lamp(key, state, note):
    out = []
    if TTY:
        out.append("\x1b[H\x1b[2J")
    out.append(f"  Lamp following device {key}   (fallback view; `ampel lamp` draws this)\n\n")
    phase = state.get("phase") if state else None
    rgb = PHASE_RGB.get(phase, (60, 60, 60))
    block = "          "
    for _ in range(5):
        if TTY:
            out.append(f"    \x1b[48;2;{rgb[0]};{rgb[1]};{rgb[2]}m{block}\x1b[0m\n")
        else:
            out.append(f"    [{(phase or '----').upper():^8}]\n")
    out.append("\n")
    if state:
        out.append(f"  {paint((phase or '?').upper(), phase)}  {district_name(state.get('district'))}"
                   f"  incidence {incidence_text(state.get('incidence'))}"
                   f"  data {state.get('dataDate') or '-'}{'  STALE' if state.get('stale') else ''}\n")
        out.append(f"  {state.get('title') or ''}\n")
        lat, lon = state.get("lat"), state.get("lon")
        if isinstance(lat, (int, float)) and isinstance(lon, (int, float)):
            out.append(f"  at {lat:.5f}, {lon:.5f}\n")
    if note:
        out.append(f"  {note}\n")
    sys.stdout.write("".join(out))
    sys.stdout.flush()


class Tally:
    """What a demo run produced, and whether that is enough."""

    def __init__(self, keys):
        self.keys = keys
        self.states, self.alerts, self.districts, self.bridge = {}, [], {}, None

    def add(self, topic, obj):
        if topic == "ampel/bridge/state":
            self.bridge = obj
        elif topic.startswith("ampel/district/") and topic.endswith("/phase"):
            self.districts[topic.split("/")[2]] = obj
        elif (k := device_key(topic, "state")) is not None:
            self.states[k] = self.states.get(k, 0) + 1
        elif (k := device_key(topic, "alert")) is not None and isinstance(obj, dict):
            self.alerts.append((k, obj))

    def crossings(self):
        return [a for a in self.alerts if a[1].get("from") and a[1].get("from") != a[1].get("to")]

    def missing(self):
        problems = [f"no state for {k}" for k in self.keys if not self.states.get(k)]
        if not self.alerts:
            problems.append("no alert")
        return problems

    def report(self):
        d = self.districts
        counts = ", ".join(f"{p}: {sum(1 for v in d.values() if v == p)}"
                           for p in ("green", "yellow", "red", "darkred"))
        print(f"bridge state: {json.dumps(self.bridge) if self.bridge is not None else 'none'}")
        print(f"district phases: {len(d)}" + (f" ({counts})" if d else ""))
        for k in self.keys:
            print(f"device {k}: {self.states.get(k, 0)} states, "
                  f"{sum(1 for a in self.alerts if a[0] == k)} alerts")
        for k, a in self.alerts:
            print(f"  alert {k}: {a.get('from') or '(new)'} -> {a.get('to')} in "
                  f"{district_name(a.get('district'))} ({incidence_text(a.get('incidence'))}): "
                  f"{a.get('title') or ''}")
        print(f"alerts: {len(self.alerts)} ({len(self.crossings())} phase changes on the move)")
        for p in self.missing():
            print(f"FAIL: {p}")
        return 1 if self.missing() else 0


def verify(path, keys):
    tally = Tally(keys)
    with open(path, encoding="utf-8") as f:
        for topic, obj in records(f):
            tally.add(topic, obj)
    return tally.report()


def watch(seconds, keys):
    tally = Tally(keys)
    deadline = time.monotonic() + seconds
    buf = b""
    fd = sys.stdin.fileno()
    while True:
        if not tally.missing() and tally.crossings():
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            rec = parse(line.decode("utf-8", "replace"))
            if rec is not None and rec[0] != "$debug":
                tally.add(*rec)
    return tally.report()


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "alerts":
        alerts()
    elif len(sys.argv) == 3 and sys.argv[1] == "lamp":
        lamp(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "watch":
        sys.exit(watch(float(sys.argv[2]), sys.argv[3:]))
    elif len(sys.argv) >= 3 and sys.argv[1] == "verify":
        sys.exit(verify(sys.argv[2], sys.argv[3:]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    try:
        main()
    except (KeyboardInterrupt, BrokenPipeError):
        sys.exit(0)
