#!/usr/bin/env python3
"""Pack the BKG district geometry into Ampel's bundled binary (districts.ampelgeo).

Why a generator: parsing 8 MB of GeoJSON costs far more than the 100 ms start-up budget;
the packed file is read with a few memcpy-sized loads. Rerun it whenever the sources or the
seam rules change, and commit its output (see docs/geo.md).

Layers (the "rank" byte; lower wins, see docs/geo.md):
  0 = VG250 (simplified 20 m) for Bavaria, AGS 09xxx  - the most precise file there
  1 = VG1000 for every district outside Bavaria
  2 = VG1000 for Bavarian districts, clipped to 0.02 deg around the other states: a fallback
      that fills the seam where VG250 and VG1000 do not meet (used only when no rank 0/1
      polygon contains the point and none lies within the snap distance)

Usage: .venv-bench/bin/python tools/pack_geometry.py [DATA_DIR] [OUT_FILE]
Needs shapely 2 (only for the rank-2 clip); Benchmarks/geo/run.sh sets up that venv.

Format (little endian), version 1:
  "AMPELGEO" | u32 version | u32 entries | u32 rings | u32 points
  entries x { 5 bytes AGS | u8 rank | u8 name length | name UTF-8 | u32 first ring | u32 ring count }
  rings   x { u32 first point | u32 point count }          (rings not closed: last != first)
  points  x { f64 longitude | f64 latitude }
"""
import json
import struct
import sys

from shapely.geometry import shape, mapping
from shapely.ops import unary_union

DATA = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/data/geo"
OUT = sys.argv[2] if len(sys.argv) > 2 else "Sources/AmpelGeo/Resources/geometry/districts.ampelgeo"
VG250 = "bkg_vg250_krs_bayern_sim20_2018-12-31_wgs84.geojson"
VG1000 = "bkg_vg1000_krs_2024-12-31_wgs84.geojson"
SEAM_DEG = 0.02


def features(name):
    with open(f"{DATA}/{name}", encoding="utf-8") as f:
        return json.load(f)["features"]


def polygons(geom):
    """The polygon list of a GeoJSON geometry dict, each a list of rings of [lon, lat]."""
    if geom["type"] == "Polygon":
        return [geom["coordinates"]]
    if geom["type"] == "MultiPolygon":
        return geom["coordinates"]
    if geom["type"] == "GeometryCollection":
        out = []
        for g in geom["geometries"]:
            if g["type"] in ("Polygon", "MultiPolygon"):
                out += polygons(g)
        return out
    return []


def open_ring(ring):
    pts = [(float(x), float(y)) for x, y, *_ in ring]
    if len(pts) > 1 and pts[0] == pts[-1]:
        pts = pts[:-1]
    return pts


entries = []  # (ags, rank, name, [ring points])
bav = sorted(features(VG250), key=lambda f: f["properties"]["RS"])
names_by = {}
for f in bav:
    p = f["properties"]
    ags = p["RS"][:5]
    names_by[ags] = p["GEN"]
    rings = [open_ring(r) for poly in polygons(f["geometry"]) for r in poly]
    entries.append((ags, 0, p["GEN"], rings))

rest = sorted(features(VG1000), key=lambda f: f["properties"]["ARS"])
for f in rest:
    p = f["properties"]
    if p["ARS"].startswith("09"):
        continue
    rings = [open_ring(r) for poly in polygons(f["geometry"]) for r in poly]
    entries.append((p["ARS"][:5], 1, p["GEN"], rings))

others = unary_union([shape(f["geometry"]) for f in rest if not f["properties"]["ARS"].startswith("09")])
seam = others.buffer(SEAM_DEG)
for f in rest:
    p = f["properties"]
    if not p["ARS"].startswith("09"):
        continue
    clipped = shape(f["geometry"]).intersection(seam)
    if clipped.is_empty:
        continue
    rings = [open_ring(r) for poly in polygons(mapping(clipped)) for r in poly]
    rings = [r for r in rings if len(r) >= 3]
    if rings:
        ags = p["ARS"][:5]
        entries.append((ags, 2, names_by.get(ags, p["GEN"]), rings))

head = bytearray()
ring_table = bytearray()
points = bytearray()
n_rings = 0
n_points = 0
for ags, rank, name, rings in entries:
    nb = name.encode("utf-8")
    assert len(ags) == 5 and ags.isdigit() and len(nb) < 256
    head += ags.encode("ascii") + struct.pack("<BB", rank, len(nb)) + nb + struct.pack("<II", n_rings, len(rings))
    for r in rings:
        ring_table += struct.pack("<II", n_points, len(r))
        for x, y in r:
            points += struct.pack("<dd", x, y)
        n_points += len(r)
        n_rings += 1

with open(OUT, "wb") as out:
    out.write(b"AMPELGEO" + struct.pack("<IIII", 1, len(entries), n_rings, n_points))
    out.write(head)
    out.write(ring_table)
    out.write(points)
print(f"{OUT}: {len(entries)} entries, {n_rings} rings, {n_points} points")
