#!/usr/bin/env python3
"""The fleet benchmark's route: the recorded tracks in DIR (../shared/data/tracks, see its
SOURCES.md) resampled to one point per STEP metres, each there and back, as `lat lon` lines.

  route.py DIR [STEP]  > route.txt
"""
import json, math, re, sys

def metres(a, b):
    (la1, lo1), (la2, lo2) = a, b
    x = math.radians(lo2 - lo1) * math.cos(math.radians((la1 + la2) / 2))
    return 6371000 * math.hypot(x, math.radians(la2 - la1))

def resample(points, step):
    out, since = [points[0]], 0.0
    for a, b in zip(points, points[1:]):
        since += metres(a, b)
        if since >= step:
            out.append(b)
            since = 0.0
    return out

directory = sys.argv[1]
step = float(sys.argv[2]) if len(sys.argv) > 2 else 1000
tracks = []
car = json.load(open(f"{directory}/barefoot_x0001-001.json"))
tracks.append([(float(m.group(2)), float(m.group(1)))
               for p in car if (m := re.match(r"POINT\(([-\d.]+) ([-\d.]+)\)", p["point"]))])
gpx = open(f"{directory}/rallygpxmerger_A5_Augsburg-Muenchen_PLANNED.gpx").read()
tracks.append([(float(a), float(b)) for a, b in re.findall(r'<trkpt lat="([-\d.]+)" lon="([-\d.]+)"', gpx)])
for track in tracks:
    points = resample(track, step)
    for lat, lon in points + points[-2:0:-1]:
        print(f"{lat:.6f} {lon:.6f}")
