#!/usr/bin/env python3
"""Simulated devices for the Ampel demo: replays real GPS tracks, sped up, as MQTT locations.

Each device drives one track (scripts/demo/tracks/), back and forth, publishing a few fixes
per second through its own long-running `mosquitto_pub -l` (one message per stdin line), so
the simulator needs only the Python standard library and mosquitto-clients.

Devices (payload formats the daemon accepts, issue 6):
  owntracks/anna/car    OwnTracks location, A5 Augsburg -> München (5 districts)
  owntracks/ben/bike    OwnTracks location, the same route from München to Augsburg
  ampel/location/taxi1  plain {"lat","lon","tst","lang":"en"}, a car trace in München
  ampel/location/van2   Home Assistant style {"latitude","longitude"}, that trace reversed

Usage: simulate.py --port 1883 [--host 127.0.0.1] [--rate 4] [--trip-seconds 90]
Stops on SIGINT/SIGTERM, closing its mosquitto_pub children.
"""
import argparse
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

TRACKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tracks")


def load_barefoot(path):
    """[{"point": "POINT(lon lat)", ...}] -> [(lat, lon)]"""
    with open(path, encoding="utf-8") as f:
        rows = json.load(f)
    points = []
    for row in rows:
        m = re.match(r"POINT\(\s*(\S+)\s+(\S+)\s*\)", row["point"])
        if m:
            points.append((float(m.group(2)), float(m.group(1))))
    return points


def load_gpx(path):
    """GPX 1.1 track points -> [(lat, lon)]"""
    ns = {"g": "http://www.topografix.com/GPX/1/1"}
    root = ET.parse(path).getroot()
    return [(float(p.get("lat")), float(p.get("lon"))) for p in root.iterfind(".//g:trkpt", ns)]


def owntracks(tid):
    def payload(lat, lon, tst, vel):
        return {"_type": "location", "lat": round(lat, 6), "lon": round(lon, 6), "tst": tst,
                "tid": tid, "acc": 8, "vel": vel, "batt": 87, "conn": "m", "t": "u"}
    return payload


def plain(lat, lon, tst, vel):
    return {"lat": round(lat, 6), "lon": round(lon, 6), "tst": tst, "lang": "en"}


def home_assistant(lat, lon, tst, vel):
    return {"latitude": round(lat, 6), "longitude": round(lon, 6), "gps_accuracy": 8}


class Device:
    def __init__(self, topic, points, payload, start_fraction=0.0):
        self.topic = topic
        self.points = points
        self.payload = payload
        self.index = int(start_fraction * (len(points) - 1))
        self.direction = 1
        self.proc = None

    def step(self, stride):
        """The next point along the track; turns around at either end."""
        nxt = self.index + self.direction * stride
        if nxt >= len(self.points) or nxt < 0:
            self.direction = -self.direction
            nxt = self.index + self.direction * stride
        self.index = max(0, min(len(self.points) - 1, nxt))
        return self.points[self.index]


def distance_m(a, b):
    lat = math.radians((a[0] + b[0]) / 2)
    dy = (b[0] - a[0]) * 111_320
    dx = (b[1] - a[1]) * 111_320 * math.cos(lat)
    return math.hypot(dx, dy)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--rate", type=float, default=4.0, help="fixes per second per device")
    ap.add_argument("--trip-seconds", type=float, default=90.0,
                    help="time for one trip along a track (sets the speed-up)")
    ap.add_argument("--qos", type=int, default=1, choices=(0, 1))
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()

    a5 = load_gpx(os.path.join(TRACKS, "rallygpxmerger_A5_Augsburg-Muenchen_PLANNED.gpx"))
    car = load_barefoot(os.path.join(TRACKS, "barefoot_x0001-001.json"))
    devices = [
        Device("owntracks/anna/car", a5, owntracks("an")),
        Device("owntracks/ben/bike", list(reversed(a5)), owntracks("be")),
        Device("ampel/location/taxi1", car, plain, start_fraction=0.45),
        Device("ampel/location/van2", list(reversed(car)), home_assistant),
    ]

    stopping = False

    def stop(signum, frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)

    for d in devices:
        d.proc = subprocess.Popen(
            ["mosquitto_pub", "-h", args.host, "-p", str(args.port), "-q", str(args.qos),
             "-i", "ampel-demo-" + d.topic.replace("/", "-"), "-t", d.topic, "-l"],
            stdin=subprocess.PIPE, text=True, bufsize=1)

    period = 1.0 / args.rate
    strides = {d.topic: max(1, round(len(d.points) / (args.rate * args.trip_seconds))) for d in devices}
    if not args.quiet:
        for d in devices:
            print(f"simulate: {d.topic}: {len(d.points)} points, one in {strides[d.topic]}, "
                  f"{args.rate:g} per second", file=sys.stderr)
    sent = 0
    next_tick = time.monotonic()
    try:
        while not stopping:
            tst = int(time.time())
            for d in devices:
                before = d.points[d.index]
                lat, lon = d.step(strides[d.topic])
                # Speed as it would be in reality (km/h), from the track's 1 s spacing.
                vel = int(distance_m(before, (lat, lon)) / strides[d.topic] * 3.6)
                d.proc.stdin.write(json.dumps(d.payload(lat, lon, tst, vel), separators=(",", ":")) + "\n")
                sent += 1
            # Pace the replay: the wall clock is the event here.
            next_tick += period
            delay = next_tick - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_tick = time.monotonic()
    except BrokenPipeError:
        print("simulate: a mosquitto_pub exited (broker gone?)", file=sys.stderr)
    finally:
        for d in devices:
            try:
                d.proc.stdin.close()
            except BrokenPipeError:
                pass
        for d in devices:
            try:
                d.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                d.proc.kill()
                d.proc.wait()
        if not args.quiet:
            print(f"simulate: {sent} fixes sent", file=sys.stderr)


if __name__ == "__main__":
    main()
