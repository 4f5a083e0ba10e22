#!/usr/bin/env python3
"""Writes a state.json with N devices, as `ampel run` writes it (StateStore.save), for the
scale benchmark: devices spread over the 96 Bavarian districts, each in the phase the given
data day gives its district, so that a start with that day's data changes nothing.

  gen_state.py --devices 1000000 --districts districts.json --out DIR/state.json

districts.json: the output of `ampel districts --source snapshot --date DAY --json`.
"""
import argparse
import json

parser = argparse.ArgumentParser()
parser.add_argument("--devices", type=int, required=True)
parser.add_argument("--districts", required=True)
parser.add_argument("--out", required=True)
parser.add_argument("--prefix", default="scale-dev-")
args = parser.parse_args()

districts = json.load(open(args.districts))
refs = []
for d in districts:
    kind = d["name"].split(" ", 1)[0]
    ref = {"ags": d["ags"], "name": d["name"], "state": d["state"], "type": kind if kind in ("LK", "SK") else None}
    refs.append((json.dumps(ref, ensure_ascii=False, separators=(",", ":")), d["phase"], d["dataDate"], d["stale"]))

with open(args.out, "w", encoding="utf-8") as out:
    phases = ",".join(f'"{d["ags"]}":"{d["phase"]}"' for d in districts)
    out.write('{"version":1,"districts":{' + phases + '},"devices":{')
    for i in range(args.devices):
        ref, phase, day, stale = refs[i % len(refs)]
        lat = 47.5 + (i % 1000) / 1000 * 2.5
        lon = 9.0 + (i // 1000 % 1000) / 1000 * 4.8
        sep = "," if i else ""
        out.write(f'{sep}\n"{args.prefix}{i:07d}":{{"lat":{lat},"lon":{lon},"tst":{1600000000 + i},"lang":null,'
                  f'"district":{ref},"phase":"{phase}","dataDate":"{day}","stale":{"true" if stale else "false"}}}')
    out.write("}}\n")
