"""Shapely 2 STRtree on the same geometry and the same points as AmpelBenchmarks geo.

Why: the issue asks for the grid index to be compared with the usual Python answer,
`STRtree.query(points, predicate="within")`, side by side. The geometry is built by
tools/pack_geometry.py's layers() (the polygon sets that are packed into the bundle); the
points are read from the files the Swift benchmark wrote.

Usage: python shapely_bench.py DATA_DIR POINTS.f64 [POINTS.f64 ...]
"""
import os
import sys
import time

import numpy as np
import shapely
from shapely import STRtree

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from pack_geometry import layers  # noqa: E402

data_dir = sys.argv[1]
t = time.perf_counter()
entries = layers(data_dir)
geoms = [g for _, _, _, g in entries]
shapely.prepare(geoms)
tree = STRtree(geoms)
build = time.perf_counter() - t
print(f"shapely {shapely.__version__} (GEOS {shapely.geos_version_string}), numpy {np.__version__}")
print(f"  geometry: {len(geoms)} polygon sets; load GeoJSON + build STRtree + prepare: {build * 1000:.0f} ms")

for path in sys.argv[2:]:
    xy = np.fromfile(path, dtype="<f8").reshape(-1, 2)
    pts = shapely.points(xy)
    best = None
    for _ in range(3):
        t = time.perf_counter()
        pairs = tree.query(pts, predicate="within")
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    found = len(np.unique(pairs[0]))
    name = os.path.basename(path)
    print(f"  (c) {name}: {len(xy)} points, {100 * found / len(xy):.1f} % in a polygon, "
          f"STRtree.query(points, predicate='within'): {len(xy) / best / 1e6:.2f}M lookups/s (best of 3)")
