#!/usr/bin/env python3
"""A stand-in for the RKI ArcGIS `query` endpoint of `RKI_Landkreisdaten`, for the soak run.

It serves the 96 Bavarian districts with the 7-day incidences the RKI published day by day
(../shared/data/rki/rki_fixed_7day_incidence_bavaria_2020-11-18_2021-11-22.csv, names and
population from bavaria_population.csv, the state's incidence from the states CSV), one
publication day at a time, and moves on to the next day every `--interval` seconds once told
to start, so that districts change phase while the daemon runs. Each answer is what
`RKIClient` asks for and `ArcGISDecoder` reads: an `f=json` query answer (envelope, `fields`,
`features[].attributes`), paged by `resultOffset`/`resultRecordCount` (at most
`--max-record-count` features, `exceededTransferLimit` while more follow), only the requested
`outFields`, `last_update` as "DD.MM.YYYY, 00:00 Uhr".

Control (plain GET, answered with JSON):
  /soak/start   begin switching: the next day `--interval` seconds from now, and so on;
                /soak/start?offset=S: the first switch S seconds after the last query (the
                next such moment still ahead), then every `--interval` seconds
  /soak/freeze  stop switching; the day in force goes back to the last day actually served to
                a `query`, so nothing the daemon has not seen yet is served after the freeze
  /soak/status  the day in force, the days served, the request count

Written for the check:
  --log        one JSON object per line: every request {"t","kind":"query","day","offset",
               "count","status","agent"} and every switch {"t","kind":"switch","day"}
               (t: milliseconds since 1970)
  --datasets   one JSON object {day: {ags: incidence}} of every day this run may serve,
               written at start, with the exact numbers the answers carry

Days: `--start-day` is the first day served; day i of the run serves the published values of
the i-th day after it. Past the end of the file the values start again from its first day,
while the publication day keeps counting up (the daemon only takes a newer day); the values
of such days are then not those of that calendar day (Daten verändert).

Data: Robert Koch-Institut (RKI), dl-de/by-2-0 (Daten verändert).
"""
import argparse
import csv
import datetime as dt
import json
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FIELDS = [
    ("OBJECTID", "esriFieldTypeOID"), ("RS", "esriFieldTypeString"), ("AGS", "esriFieldTypeString"),
    ("GEN", "esriFieldTypeString"), ("BEZ", "esriFieldTypeString"), ("EWZ", "esriFieldTypeInteger"),
    ("BL", "esriFieldTypeString"), ("BL_ID", "esriFieldTypeString"), ("county", "esriFieldTypeString"),
    ("last_update", "esriFieldTypeString"), ("cases7_per_100k", "esriFieldTypeDouble"),
    ("cases7_bl_per_100k", "esriFieldTypeDouble"),
]


def now_ms():
    return int(time.time() * 1000)


def load(args):
    """Per calendar day of the file: {ags: incidence}; per day the state's value; the districts."""
    by_day = {}
    with open(args.history, encoding="utf-8-sig") as f:
        for row in csv.DictReader(f):
            by_day.setdefault(row["date"], {})[row["ags"]] = float(row["incidence_7d"])
    state = {}
    with open(args.states, encoding="utf-8-sig") as f:
        for row in csv.DictReader(f):
            if row["state"] == "Bayern":
                state[row["date"]] = float(row["incidence_7d"])
    districts = []
    with open(args.population, encoding="utf-8-sig") as f:
        for row in csv.DictReader(f):
            districts.append(row)
    days = sorted(by_day)
    for day in days:
        if len(by_day[day]) != len(districts):
            sys.exit("rki_server: %s has %d districts, expected %d" % (day, len(by_day[day]), len(districts)))
    return days, by_day, state, districts


class Publications:
    """The days of the run: day i is start + i, its values those of the i-th file day after start."""

    def __init__(self, args):
        self.file_days, self.by_day, self.state, self.districts = load(args)
        if args.start_day not in self.by_day:
            sys.exit("rki_server: --start-day %s is not in %s (%s to %s)" % (
                args.start_day, args.history, self.file_days[0], self.file_days[-1]))
        self.start = dt.date.fromisoformat(args.start_day)
        self.first_index = self.file_days.index(args.start_day)
        self.cache = {}

    def day(self, i):
        return (self.start + dt.timedelta(days=i)).isoformat()

    def values(self, i):
        source_day = self.file_days[(self.first_index + i) % len(self.file_days)]
        return source_day, self.by_day[source_day]

    def features(self, i):
        if i in self.cache:
            return self.cache[i]
        day = self.day(i)
        source_day, values = self.values(i)
        state_value = self.state.get(source_day)
        d = dt.date.fromisoformat(day)
        last_update = "%02d.%02d.%04d, 00:00 Uhr" % (d.day, d.month, d.year)
        features = []
        for n, district in enumerate(self.districts, start=1):
            ags = district["ags"]
            features.append({"attributes": {
                "OBJECTID": n, "RS": ags, "AGS": ags, "GEN": district["gen"], "BEZ": district["bez"],
                "EWZ": int(district["ewz_rki_2019"]), "BL": "Bayern", "BL_ID": "9", "county": district["county"],
                "last_update": last_update, "cases7_per_100k": values[ags], "cases7_bl_per_100k": state_value,
            }})
        self.cache = {i: features}  # one day at a time is all that is asked for
        return features


class State:
    def __init__(self, args, publications):
        self.args = args
        self.pub = publications
        self.lock = threading.Lock()
        self.index = 0            # the day in force (index into the run's days)
        self.served_max = -1      # the highest day index served to a query
        self.switching = False
        self.timer = None
        self.requests = 0
        self.last_query = None    # monotonic time of the last query answered
        self.log = open(args.log, "a", buffering=1, encoding="utf-8")

    def write(self, record):
        self.log.write(json.dumps(record, separators=(",", ":")) + "\n")

    def start(self, offset=None):
        """Switch every interval from now on; with `offset`, the switches fall `offset` seconds
        after the last query (and every interval after that), so a client that asks every
        interval never asks at the moment of a switch."""
        with self.lock:
            if self.switching:
                return
            self.switching = True
            now = time.monotonic()
            if offset is not None and self.last_query is not None:
                self.next_switch = self.last_query + offset
                while self.next_switch <= now:
                    self.next_switch += self.args.interval
            else:
                self.next_switch = now + self.args.interval
            self.schedule()

    def schedule(self):
        # Called with the lock held; each switch is scheduled from the planned time, so the
        # interval does not drift with the timer's lateness.
        delay = max(0.0, self.next_switch - time.monotonic())
        self.timer = threading.Timer(delay, self.switch)
        self.timer.daemon = True
        self.timer.start()

    def switch(self):
        with self.lock:
            if not self.switching:
                return
            self.index += 1
            self.write({"t": now_ms(), "kind": "switch", "day": self.pub.day(self.index)})
            self.next_switch += self.args.interval
            self.schedule()

    def freeze(self):
        with self.lock:
            self.switching = False
            if self.timer:
                self.timer.cancel()
            if self.served_max >= 0 and self.index != self.served_max:
                self.index = self.served_max
                self.write({"t": now_ms(), "kind": "switch", "day": self.pub.day(self.index), "frozen": True})
            self.write({"t": now_ms(), "kind": "freeze", "day": self.pub.day(self.index)})
            return self.pub.day(self.index)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the real service: the daemon's pool reuses it
    server_version = "ampel-soak-rki/1"

    def log_message(self, format, *args):  # the JSON log is the record
        pass

    def send(self, status, body, content_type="application/json; charset=utf-8"):
        data = body.encode("utf-8") if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        state = self.server.state
        parsed = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(parsed.query, keep_blank_values=True))
        if parsed.path == "/soak/start":
            state.start(float(query["offset"]) if "offset" in query else None)
            return self.send(200, json.dumps({"started": True, "day": state.pub.day(state.index)}))
        if parsed.path == "/soak/freeze":
            return self.send(200, json.dumps({"frozen": True, "day": state.freeze()}))
        if parsed.path == "/soak/status":
            with state.lock:
                body = {"day": state.pub.day(state.index), "served": state.pub.day(state.served_max) if state.served_max >= 0 else None,
                        "requests": state.requests, "switching": state.switching}
            return self.send(200, json.dumps(body))
        if not parsed.path.endswith("/query"):
            return self.send(404, "not found\n", "text/plain")
        if query.get("f") != "json":
            return self.send(200, json.dumps({"error": {"code": 400, "message": "Invalid or missing input parameters.",
                                                        "details": ["'f' must be json"]}}))
        with state.lock:
            index = state.index
            state.requests += 1
        features = state.pub.features(index)
        offset = max(0, int(query.get("resultOffset") or 0))
        asked = int(query.get("resultRecordCount") or self.server.max_record_count)
        count = max(0, min(asked, self.server.max_record_count))
        page = features[offset:offset + count]
        out_fields = query.get("outFields", "*").split(",")
        if "*" not in out_fields:
            page = [{"attributes": {k: v for k, v in f["attributes"].items() if k in out_fields}} for f in page]
        body = {
            "objectIdFieldName": "OBJECTID",
            "uniqueIdField": {"name": "OBJECTID", "isSystemMaintained": True},
            "globalIdFieldName": "",
            "geometryType": "esriGeometryPolygon",
            "spatialReference": {"wkid": 4326, "latestWkid": 4326},
            "fields": [{"name": n, "type": t, "alias": n} for n, t in FIELDS if "*" in out_fields or n in out_fields],
            "features": page,
        }
        if offset + count < len(features):
            body["exceededTransferLimit"] = True
        # Logged before the answer leaves: the daemon cannot apply it earlier than this time.
        with state.lock:
            state.served_max = max(state.served_max, index)
            state.last_query = time.monotonic()
            state.write({"t": now_ms(), "kind": "query", "day": state.pub.day(index), "offset": offset,
                         "count": len(page), "status": 200, "agent": self.headers.get("User-Agent")})
        self.send(200, json.dumps(body, ensure_ascii=False, separators=(",", ":")))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--data", default="../shared/data/rki", help="folder with the RKI CSV files")
    p.add_argument("--start-day", default="2021-02-08")
    p.add_argument("--interval", type=float, default=60.0, help="seconds between two publications")
    p.add_argument("--days", type=int, default=400, help="how many days the run may serve (for --datasets)")
    p.add_argument("--max-record-count", type=int, default=1000)
    p.add_argument("--log", required=True)
    p.add_argument("--datasets", required=True)
    args = p.parse_args()
    args.history = args.data + "/rki_fixed_7day_incidence_bavaria_2020-11-18_2021-11-22.csv"
    args.states = args.data + "/rki_fixed_7day_incidence_states_2020-05-06_2021-11-22.csv"
    args.population = args.data + "/bavaria_population.csv"
    publications = Publications(args)
    with open(args.datasets, "w", encoding="utf-8") as f:
        json.dump({publications.day(i): publications.values(i)[1] for i in range(args.days)}, f)
    state = State(args, publications)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.state = state
    server.max_record_count = max(1, args.max_record_count)
    print("rki_server ready on 127.0.0.1:%d, first day %s" % (args.port, publications.day(0)), flush=True)
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
