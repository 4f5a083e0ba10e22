"""Measure where VG250 (Bavaria) and VG1000 (rest of Germany) meet: overlaps and gaps.

Why: the bundled geometry mixes two BKG scales; this shows how much area the
deterministic seam rules (VG250 first, then VG1000, then nearest within 15 m)
actually decide. Coordinates are scaled to metres with a local equirectangular
projection at 49° N (good to ~1 % over Bavaria's borders).
"""
import json, math, sys
from shapely.geometry import shape
from shapely.ops import unary_union
from shapely import affinity

DATA = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/data/geo"
K = 111_320.0
COS = math.cos(math.radians(49.0))

def load(name):
    with open(f"{DATA}/{name}") as f:
        return json.load(f)["features"]

def metric(g):
    return affinity.scale(g, xfact=K * COS, yfact=K, origin=(0, 0))

vg250 = [f for f in load("bkg_vg250_krs_bayern_sim20_2018-12-31_wgs84.geojson")]
vg1000 = load("bkg_vg1000_krs_2024-12-31_wgs84.geojson")
A = metric(unary_union([shape(f["geometry"]).buffer(0) for f in vg250]))
B = metric(unary_union([shape(f["geometry"]) for f in vg1000 if not f["properties"]["ARS"].startswith("09")]))
BAV1000 = metric(unary_union([shape(f["geometry"]) for f in vg1000 if f["properties"]["ARS"].startswith("09")]))
G = metric(unary_union([shape(f["geometry"]) for f in vg1000]))

km2 = 1e6
print(f"VG250 Bavaria area          {A.area/km2:10.2f} km²")
print(f"VG1000 Bavaria area         {BAV1000.area/km2:10.2f} km²")
ov = A.intersection(B)
print(f"overlap VG250-BY x VG1000-rest {ov.area/km2:8.3f} km² (decided for the Bavarian district)")
gap = G.difference(A).difference(B)
print(f"inside VG1000 Germany, in no bundled polygon {gap.area/km2:8.3f} km²")
far = gap.difference(unary_union([A.boundary.buffer(15), B.boundary.buffer(15)]))
print(f"  of which farther than 15 m from any polygon {far.area/km2:8.3f} km² (answered: no district)")
print(f"  widest such gap: max distance to a polygon {max((gap.hausdorff_distance(gap) or 0), 0):.0f}" if False else "")
outside = A.difference(G)
print(f"VG250 Bavaria outside the VG1000 outline {outside.area/km2:8.3f} km²")
# Length of the seam (Bavaria's border with other German states), for scale.
seam = A.boundary.intersection(B.buffer(200))
print(f"seam length (Bavarian border within 200 m of VG1000 rest) {seam.length/1000:8.1f} km")
near_rest = B.buffer(2000)
seam_gap = far.intersection(near_rest)
print(f"  of these, within 2 km of another state (seam gaps) {seam_gap.area/km2:8.3f} km²; elsewhere (outer border) {far.difference(near_rest).area/km2:8.3f} km²")
