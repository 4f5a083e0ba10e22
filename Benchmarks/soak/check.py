#!/usr/bin/env python3
"""The check of Ampel's soak run: what should have happened against what the daemon published.

Reads the run folder that Benchmarks/soak/run.sh fills and prints a summary; writes
result.json; exits 0 when every check passed, 1 otherwise.

Inputs (in --dir):
  fixes.log     every fix sent: <send ms> <device> <tst> <lat> <lon>          (soak_load)
  record.log    every message the daemon published under the base topic      (soak_record)
  rki.log       every answer and every switch of the RKI stand-in, JSON lines (rki_server.py)
  datasets.json {day: {ags: incidence}} as served                           (rki_server.py)
  samples.csv   the daemon's RSS and descriptors every --sample seconds       (run.sh)
  rules.json    `ampel rules --json` of the binary under test
  meta.json     the run's parameters and times                                (run.sh)
  load.out, record.out  the summary lines of the load generator and the recorder

What is expected, computed here and not read from the daemon:
  - the district of every fix: `ampel resolve` of the binary under test on the fix's lat/lon
    text (the bundled geometry; the geometry is not what this run tests);
  - the phase of a district in a publication: the served incidence classified by the bounds of
    `ampel rules --json` (inclusive/exclusive as given), `outside` for no district or one
    outside Bavaria (AGS not 09…);
  - the publications the daemon took: the days the stand-in served, in order, each once;
  - per device, the phase after each event (its fixes in order; each publication, once the
    device has a position): an alert whenever the phase differs from the one before, `from`
    null on the first fix (docs/topics.md: "the device's phase differs from its last known
    phase (a first sighting counts)"); per district, an alert whenever a publication moves it
    to another phase (never for the first data of a fresh daemon).
Only two things are taken from the daemon: where, between two fixes of a device, a new
publication took effect, and whether the daemon's walk over its devices after the publication
reached the device before its next fix (docs/DESIGN.md, decision 48: the re-evaluation goes in
paced batches; a fix that comes first is judged with the new data at once, so that device gets
one alert from its old phase at its old place to its new phase at its new one, not two). The
walk's state for a device (the new `dataDate` with the `tst` of its last fix) says it did. A fix and a refresh that happen close together may be handled in
either order; the state the daemon published for the fix (its `tst` and `dataDate`) says which,
and that order is then checked for plausibility against the times (a fix cannot have been
handled with a publication served after its state arrived or more than --slack seconds after
the fix was sent, nor with an older publication when the newer one was served more than --slack
seconds before the fix was sent).
"""
import argparse
import bisect
import collections
import json
import statistics
import subprocess
import sys
from array import array


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class Rules:
    def __init__(self, rules):
        self.bands = []
        for phase in rules["phases"]:
            self.bands.append((phase["id"], phase.get("lower"), phase.get("lowerInclusive", True),
                               phase.get("upper"), phase.get("upperInclusive", False)))

    def classify(self, x):
        for pid, lo, lo_inc, hi, hi_inc in self.bands:
            if lo is not None and (x < lo or (x == lo and not lo_inc)):
                continue
            if hi is not None and (x > hi or (x == hi and not hi_inc)):
                continue
            return pid
        return self.bands[-1][0]


def median(values):
    return statistics.median(values) if values else None


def percentile(sorted_values, p):
    if not sorted_values:
        return None
    k = min(len(sorted_values) - 1, max(0, int(round(p / 100.0 * (len(sorted_values) - 1)))))
    return sorted_values[k]


def slope_per_hour(points):
    """Least-squares slope of (seconds, value) points, in value units per hour."""
    if len(points) < 3:
        return None
    n = len(points)
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    if sxx == 0:
        return None
    sxy = sum((p[0] - mx) * (p[1] - my) for p in points)
    return sxy / sxx * 3600.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--ampel", required=True, help="the ampel binary under test (for resolve)")
    ap.add_argument("--slack", type=float, default=5.0,
                    help="seconds a fix may be handled with the previous publication after the next was served")
    ap.add_argument("--walk-time", type=float, default=30.0,
                    help="seconds after a publication by which its walk must have reached every device")
    ap.add_argument("--rss-growth-max", type=float, default=5.0,
                    help="fail when the last window's median RSS exceeds the first's by more than this many percent")
    ap.add_argument("--rss-slope-max", type=float, default=10.0,
                    help="fail when the RSS trend after warm-up exceeds this many percent of its median per hour")
    ap.add_argument("--fd-spread-max", type=int, default=4,
                    help="fail when the descriptors after warm-up vary by more than this")
    ap.add_argument("--fd-growth-max", type=int, default=1,
                    help="fail when the last window's median descriptor count exceeds the first's by more than this")
    ap.add_argument("--judge-memory-min", type=float, default=300.0,
                    help="judge RSS only when at least this many seconds of the load follow the warm-up")
    ap.add_argument("--result", default=None, help="result JSON (default: <dir>/result.json)")
    args = ap.parse_args()
    d = args.dir
    meta = load_json(d + "/meta.json")
    rules = Rules(load_json(d + "/rules.json"))
    datasets = load_json(d + "/datasets.json")
    result = {"meta": meta, "checks": {}, "figures": {}}
    checks = result["checks"]
    figures = result["figures"]
    problems = []

    def check(name, ok, detail):
        checks[name] = {"ok": bool(ok), **detail}
        if not ok:
            problems.append(name)

    # --- Publications the daemon got -----------------------------------------------------
    served = []       # days in the order first served
    serve_t = {}      # day -> ms of its first answer
    switches = 0
    with open(d + "/rki.log", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r["kind"] == "query":
                if not served or served[-1] != r["day"]:
                    if r["day"] in serve_t:
                        problems.append("served-day-twice")
                    served.append(r["day"])
                    serve_t[r["day"]] = r["t"]
            elif r["kind"] == "switch" and not r.get("frozen"):
                switches += 1
    day_index = {day: i for i, day in enumerate(served)}
    serve_times = [serve_t[day] for day in served]
    phase_cache = {}

    def phase_of(day, ags):
        key = (day, ags)
        p = phase_cache.get(key)
        if p is None:
            if not ags or not ags.startswith("09"):
                p = "outside"
            else:
                inc = datasets.get(day, {}).get(ags)
                p = rules.classify(inc) if inc is not None else "no-signal"
            phase_cache[key] = p
        return p

    figures["publications"] = {"served": len(served), "first": served[0] if served else None,
                               "last": served[-1] if served else None, "switches": switches}

    # --- Fixes sent, and their districts ------------------------------------------------------
    f_t, f_dev, f_tst = array("q"), array("i"), array("q")
    positions = []
    with open(d + "/fixes.log", encoding="ascii") as f:
        for line in f:
            t, dev, tst, lat, lon = line.split()
            f_t.append(int(t)); f_dev.append(int(dev)); f_tst.append(int(tst))
            positions.append(lat + "," + lon)
    n_fixes = len(f_t)
    resolved = subprocess.run([args.ampel, "resolve"], input=("\n".join(positions) + "\n").encode(),
                              capture_output=True, check=True).stdout.decode().split("\n")
    del positions
    ags_codes = []
    ags_id = {}
    f_ags = array("h")
    for i in range(n_fixes):
        code = resolved[i].strip()
        if code.startswith("error"):
            raise SystemExit("ampel resolve: line %d: %s" % (i + 1, code))
        if code not in ags_id:
            ags_id[code] = len(ags_codes)
            ags_codes.append(code)
        f_ags.append(ags_id[code])
    del resolved
    by_device = collections.defaultdict(list)   # device -> fix indices in send order
    for i in range(n_fixes):
        by_device[f_dev[i]].append(i)
    in_bavaria = sum(1 for i in range(n_fixes) if ags_codes[f_ags[i]].startswith("09"))
    figures["fixes"] = {"sent": n_fixes, "devices": len(by_device), "inBavaria": in_bavaria,
                        "inGermanyOutsideBavaria": sum(1 for i in range(n_fixes) if ags_codes[f_ags[i]] and not ags_codes[f_ags[i]].startswith("09")),
                        "abroad": sum(1 for i in range(n_fixes) if not ags_codes[f_ags[i]])}

    # --- What the daemon published ------------------------------------------------------------
    fix_day = array("i", [-1]) * n_fixes      # publication index each fix was handled with
    fix_state_t = array("q", [0]) * n_fixes
    next_fix = collections.defaultdict(int)   # device -> position in by_device[device]
    alerts = collections.defaultdict(list)    # device -> [(from, to, day, ags)]
    reevaluated = set()                       # (fix index, day): the walk re-evaluated that fix's place
    alert_count = 0
    district_alerts = []
    counts = collections.Counter()
    wrong_states = []
    unexpected_state = 0
    missing_states = 0
    republish_last = {}                       # day -> ms of the last re-evaluation state
    republish_count = collections.Counter()
    last_info = None
    other_topics = collections.Counter()
    unknown_days = collections.Counter()
    with open(d + "/record.log", encoding="utf-8", errors="replace") as f:
        for line in f:
            kind = line[:2]
            if kind == "S ":
                _, t, key, tst, day, phase, ags, stale = line.split()
                counts["states"] += 1
                if not key.startswith("soak/d"):
                    counts["statesOfUnknownDevices"] += 1
                    continue
                dev = int(key[6:])
                tst = int(tst)
                fixes = by_device.get(dev)
                if not fixes:
                    counts["statesOfUnknownDevices"] += 1
                    continue
                k = next_fix[dev]
                if day not in day_index:
                    unknown_days[day] += 1
                # Which fix this state is for: the next one (its first state), or the last one
                # handled (a re-evaluation after new data), or a later one (states were lost).
                j = k
                while j < len(fixes) and f_tst[fixes[j]] != tst:
                    j += 1
                if j < len(fixes):
                    missing_states += j - k
                    i = fixes[j]
                    fix_day[i] = day_index.get(day, -1)
                    fix_state_t[i] = int(t)
                    next_fix[dev] = j + 1
                elif k > 0 and f_tst[fixes[k - 1]] == tst:
                    i = fixes[k - 1]
                    reevaluated.add((i, day))
                    counts["reevaluationStates"] += 1
                    republish_count[day] += 1
                    republish_last[day] = max(republish_last.get(day, 0), int(t))
                else:
                    unexpected_state += 1
                    continue
                code = ags_codes[f_ags[i]]
                want = phase_of(day, code)
                got_ags = "" if ags == "-" else ags
                if phase != want or got_ags != code:
                    if len(wrong_states) < 20:
                        wrong_states.append({"device": key, "tst": tst, "dataDate": day, "phase": phase, "expected": want,
                                             "ags": got_ags, "expectedAgs": code})
                    counts["wrongStates"] += 1
            elif kind == "A ":
                _, t, key, frm, to, day, ags = line.split()
                alert_count += 1
                dev = int(key[6:]) if key.startswith("soak/d") else key
                alerts[dev].append((frm, to, day, "" if ags == "-" else ags))
            elif kind == "D ":
                _, t, ags, frm, to, day = line.split()
                district_alerts.append((ags, frm, to, day))
            elif kind == "I ":
                last_info = line[2:].split(" ", 1)[1].strip()
                counts["bridgeInfo"] += 1
            elif kind == "B ":
                counts["bridgeState"] += 1
            elif kind == "X ":
                other_topics[line.split()[2]] += 1
            elif kind == "? ":
                counts["unreadable"] += 1
            elif kind == "S0":
                counts["clearedStates"] += 1
    # Fixes whose state never came (after the last state seen for the device).
    for dev, fixes in by_device.items():
        missing_states += len(fixes) - next_fix[dev]

    # --- Plausibility of where the publications took effect ------------------------------------
    implausible = []
    unresolved = 0
    for dev, fixes in by_device.items():
        previous = -1
        for i in fixes:
            k = fix_day[i]
            if k < 0:
                unresolved += 1
                # No state: take the publication served last before the fix was sent.
                k = max(0, bisect.bisect_right(serve_times, f_t[i]) - 1)
                fix_day[i] = k
            else:
                late = k + 1 < len(served) and serve_times[k + 1] + args.slack * 1000 < f_t[i]
                # Handled with a publication served after its state arrived, or more than the
                # slack after the fix was sent (the daemon would have been that far behind; or
                # the fix's own state was lost and a later re-evaluation stands in for it).
                early = (fix_state_t[i] and serve_times[k] > fix_state_t[i]) or serve_times[k] > f_t[i] + args.slack * 1000
                if (late or early or k < previous) and len(implausible) < 20:
                    implausible.append({"device": dev, "tst": f_tst[i], "dataDate": served[k], "sentMs": f_t[i],
                                        "stateMs": fix_state_t[i], "why": "late" if late else "early" if early else "backwards"})
                if late or early or k < previous:
                    counts["implausibleOrder"] += 1
            previous = max(previous, k)

    # --- Expected alerts per device ---------------------------------------------------------
    last = len(served) - 1
    expected_total = 0
    missing, doubled, unexpected, misordered = [], [], [], 0
    n_missing = n_doubled = n_unexpected = 0
    # A walk has a whole interval to reach every device: one that did not, although the next
    # publication (or the end of the load) came more than --walk-time later, lost its alert.
    load_end = max(f_t) if n_fixes else 0
    walk_missed, walk_missed_examples = 0, []
    by_cause = collections.Counter()
    for dev, fixes in by_device.items():
        want = []
        cur = None
        k_cur = fix_day[fixes[0]]
        last_ags = None
        last_i = None
        for i in fixes:
            k = fix_day[i]
            while k_cur < k:          # publications that took effect before this fix
                k_cur += 1
                # Only where the walk reached the device before this fix.
                if last_ags is not None and (last_i, served[k_cur]) in reevaluated:
                    p = phase_of(served[k_cur], last_ags)
                    if p != cur:
                        want.append((cur or "null", p, served[k_cur], last_ags)); by_cause["publication"] += 1
                        cur = p
            code = ags_codes[f_ags[i]]
            p = phase_of(served[k], code)
            if p != cur:
                want.append((cur or "null", p, served[k], code)); by_cause["first" if cur is None else "movement"] += 1
                cur = p
            last_ags = code
            last_i = i
        while k_cur < last:           # publications after the device's last fix
            k_cur += 1
            p = phase_of(served[k_cur], last_ags)
            # A walk cut short by the next publication never reached the device for this one.
            if p != cur and (last_i, served[k_cur]) not in reevaluated:
                until = serve_times[k_cur + 1] if k_cur + 1 < len(served) else load_end
                if until - serve_times[k_cur] > args.walk_time * 1000:
                    walk_missed += 1
                    if len(walk_missed_examples) < 10:
                        walk_missed_examples.append({"device": dev, "dataDate": served[k_cur], "from": cur, "to": p})
            if p != cur and (last_i, served[k_cur]) in reevaluated:
                want.append((cur, p, served[k_cur], last_ags)); by_cause["publication"] += 1
                cur = p
        got = alerts.pop(dev, [])
        expected_total += len(want)
        if got == want:
            continue
        cw, cg = collections.Counter(want), collections.Counter(got)
        if cw == cg:
            misordered += 1
            continue
        for a, n in (cw - cg).items():
            n_missing += n
            if len(missing) < 20:
                missing.append({"device": dev, "alert": a, "times": n})
        for a, n in (cg - cw).items():
            if a in cw:
                n_doubled += n
                if len(doubled) < 20:
                    doubled.append({"device": dev, "alert": a, "extra": n})
            else:
                n_unexpected += n
                if len(unexpected) < 20:
                    unexpected.append({"device": dev, "alert": a, "times": n})
    for dev, got in alerts.items():   # alerts for devices that never sent a fix
        n_unexpected += len(got)
        if len(unexpected) < 20:
            unexpected.append({"device": dev, "alerts": got[:3]})

    # --- Expected district alerts -------------------------------------------------------------
    want_d = collections.Counter()
    for k in range(1, len(served)):
        a, b = served[k - 1], served[k]
        for ags in datasets[b]:
            pa, pb = phase_of(a, ags), phase_of(b, ags)
            if pa != pb:
                want_d[(ags, pa, pb, b)] += 1
    got_d = collections.Counter(district_alerts)
    d_missing = want_d - got_d
    d_extra = got_d - want_d

    # --- Load, latency ----------------------------------------------------------------------
    load = dict(kv.split("=", 1) for kv in open(d + "/load.out").read().split() if "=" in kv)
    latencies = sorted(fix_state_t[i] - f_t[i] for i in range(n_fixes) if fix_state_t[i])
    figures["load"] = {k: (float(v) if "." in v else int(v)) for k, v in load.items()}
    figures["fixToStateMs"] = {"p50": percentile(latencies, 50), "p99": percentile(latencies, 99),
                               "p999": percentile(latencies, 99.9), "max": latencies[-1] if latencies else None,
                               "over100ms": sum(1 for x in latencies if x > 100),
                               "over1s": sum(1 for x in latencies if x > 1000)}
    reeval = []
    for day in served[1:]:
        if day in republish_last:
            reeval.append({"day": day, "servedMs": serve_t[day], "states": republish_count[day],
                           "seconds": round((republish_last[day] - serve_t[day]) / 1000, 3)})
    figures["republishAfterPublication"] = {
        "publications": len(reeval),
        "statesMedian": median([r["states"] for r in reeval]),
        "secondsMedian": median([r["seconds"] for r in reeval]),
        "secondsMax": max((r["seconds"] for r in reeval), default=None),
        "each": reeval,
    }
    info = json.loads(last_info) if last_info else {}
    figures["bridgeInfo"] = info.get("counters")
    figures["messages"] = dict(counts)
    figures["alerts"] = {"received": alert_count, "expected": expected_total, "byCause": dict(by_cause),
                         "districtReceived": len(district_alerts), "districtExpected": sum(want_d.values())}

    target_rate = float(meta["rate"])
    check("load", int(load.get("acked", -1)) == int(load.get("sent", -2)) and int(load.get("publish_errors", 1)) == 0
          and float(load.get("rate", 0)) >= 0.98 * target_rate,
          {"sent": int(load.get("sent", 0)), "acked": int(load.get("acked", 0)), "rate": float(load.get("rate", 0)),
           "target": target_rate, "rule": "every fix acknowledged by the broker, rate at least 98 % of the target"})
    check("publications", len(served) >= 2 and not unknown_days and "served-day-twice" not in problems,
          {"served": len(served), "daysNotServed": dict(unknown_days),
           "rule": "at least one new publication taken; every dataDate published is a day that was served"})
    check("deviceAlerts", n_missing == 0 and n_doubled == 0 and n_unexpected == 0 and misordered == 0 and walk_missed == 0,
          {"expected": expected_total, "received": alert_count, "missing": n_missing, "doubled": n_doubled,
           "notReachedByTheWalk": walk_missed, "examplesNotReached": walk_missed_examples,
           "unexpected": n_unexpected, "devicesMisordered": misordered,
           "examplesMissing": missing, "examplesDoubled": doubled, "examplesUnexpected": unexpected})
    check("districtAlerts", not d_missing and not d_extra,
          {"expected": sum(want_d.values()), "received": len(district_alerts), "missing": sum(d_missing.values()),
           "extraOrDoubled": sum(d_extra.values()),
           "examplesMissing": [list(k) for k in list(d_missing)[:10]], "examplesExtra": [list(k) for k in list(d_extra)[:10]]})
    check("deviceStates", counts["wrongStates"] == 0 and missing_states == 0 and unexpected_state == 0
          and counts["statesOfUnknownDevices"] == 0,
          {"states": counts["states"], "fixesWithoutState": missing_states, "wrong": counts["wrongStates"],
           "notMatchingAFix": unexpected_state, "examplesWrong": wrong_states,
           "rule": "every fix got its state; every state's phase and district match the fix's position in the publication it names"})
    check("publicationOrder", counts["implausibleOrder"] == 0,
          {"implausible": counts["implausibleOrder"], "fixesWithoutStateAssumed": unresolved, "slackSeconds": args.slack,
           "examples": implausible})
    dropped = (info.get("counters") or {}).get("dropped") or {}
    check("daemonCounters", not dropped and (info.get("counters") or {}).get("publishFailures", 0) == 0
          and (info.get("counters") or {}).get("datasetsRejected", 0) == 0 and last_info is not None,
          {"dropped": dropped, "publishFailures": (info.get("counters") or {}).get("publishFailures"),
           "datasetsRejected": (info.get("counters") or {}).get("datasetsRejected")})
    check("daemonProcess", meta.get("daemonAliveAtEnd") is True and meta.get("daemonExitCode") == 0,
          {"aliveAtEnd": meta.get("daemonAliveAtEnd"), "exitCodeAfterSigterm": meta.get("daemonExitCode")})
    check("topics", not other_topics and counts["unreadable"] == 0,
          {"undocumented": dict(other_topics), "unreadable": counts["unreadable"]})

    # --- Memory and descriptors -------------------------------------------------------------
    samples = []
    with open(d + "/samples.csv") as f:
        header = f.readline().strip().split(",")
        for line in f:
            values = line.strip().split(",")
            if len(values) == len(header):
                samples.append({h: int(v) for h, v in zip(header, values) if v.lstrip("-").isdigit()})
    load_start, load_end = meta["loadStartMs"], meta["loadEndMs"]
    warmup, window = float(meta["warmupSeconds"]), float(meta["windowSeconds"])
    during = [s for s in samples if load_start <= s["t_ms"] <= load_end]
    after = [s for s in during if s["t_ms"] >= load_start + warmup * 1000]
    first = [s for s in after if s["t_ms"] <= load_start + (warmup + window) * 1000]
    lastw = [s for s in after if s["t_ms"] >= load_end - window * 1000]
    rss_first, rss_last = median([s["rss_kb"] for s in first]), median([s["rss_kb"] for s in lastw])
    rss_med = median([s["rss_kb"] for s in after])
    slope = slope_per_hour([((s["t_ms"] - load_start) / 1000, s["rss_kb"]) for s in after])
    slope_pct = slope / rss_med * 100 if slope is not None and rss_med else None
    growth_pct = (rss_last / rss_first - 1) * 100 if rss_first and rss_last else None
    post = (load_end - load_start) / 1000 - warmup
    judged = post >= args.judge_memory_min and len(after) >= 6
    mem = {
        "samples": len(samples), "afterWarmup": len(after), "warmupSeconds": warmup, "windowSeconds": window,
        "firstWindowMedianKiB": rss_first, "lastWindowMedianKiB": rss_last, "growthPercent": growth_pct,
        "slopeKiBPerHour": slope, "slopePercentPerHour": slope_pct, "medianAfterWarmupKiB": rss_med,
        "maxKiB": max((s["rss_kb"] for s in samples), default=None),
        "hwmKiB": max((s.get("hwm_kb", 0) for s in samples), default=None),
        "atStartKiB": samples[0]["rss_kb"] if samples else None,
        "judged": judged,
        "rule": "after warm-up: last window's median RSS at most %.1f %% above the first window's, and the "
                "least-squares trend at most %.1f %% of the median per hour; judged when at least %d s of load "
                "follow the warm-up" % (args.rss_growth_max, args.rss_slope_max, args.judge_memory_min),
    }
    ok_mem = (not judged) or (growth_pct is not None and growth_pct <= args.rss_growth_max
                              and slope_pct is not None and slope_pct <= args.rss_slope_max)
    check("memory", ok_mem, mem)
    fds_after = [s["fds"] for s in after]
    fd_first, fd_last = median([s["fds"] for s in first]), median([s["fds"] for s in lastw])
    fd = {"min": min(fds_after, default=None), "max": max(fds_after, default=None),
          "firstWindowMedian": fd_first, "lastWindowMedian": fd_last,
          "atStart": samples[0]["fds"] if samples else None,
          "rule": "after warm-up: max - min at most %d, last window's median at most %d above the first's" % (
              args.fd_spread_max, args.fd_growth_max)}
    check("descriptors", bool(fds_after) and fd["max"] - fd["min"] <= args.fd_spread_max
          and fd_last - fd_first <= args.fd_growth_max, fd)
    threads = [s["threads"] for s in after if "threads" in s]
    figures["threads"] = {"min": min(threads, default=None), "max": max(threads, default=None)}
    cpu = [s for s in during if "cpu_ticks" in s]
    if len(cpu) >= 2:
        ticks = cpu[-1]["cpu_ticks"] - cpu[0]["cpu_ticks"]
        secs = (cpu[-1]["t_ms"] - cpu[0]["t_ms"]) / 1000
        figures["daemonCpuPercent"] = round(ticks / int(meta.get("clockTicks", 100)) / secs * 100, 1) if secs > 0 else None
    # Daemon CPU a publication costs: the CPU seconds of the sampling interval in which it was
    # served and of the next one, less two intervals' worth of the median of the others.
    ticks_per_s = int(meta.get("clockTicks", 100))
    intervals = [((b["cpu_ticks"] - a["cpu_ticks"]) / ticks_per_s, a["t_ms"], b["t_ms"]) for a, b in zip(cpu, cpu[1:])]
    touched = set()
    hits = []
    for day in served[1:]:
        for n, (_, a_ms, b_ms) in enumerate(intervals):
            if a_ms <= serve_t[day] < b_ms and n + 1 < len(intervals):
                touched.update((n, n + 1))
                hits.append(n)
    quiet = [c for n, (c, _, _) in enumerate(intervals) if n not in touched]
    if hits and quiet:
        base = median(quiet)
        figures["daemonCpuSecondsPerPublication"] = round(median([intervals[n][0] + intervals[n + 1][0] - 2 * base for n in hits]), 2)
    broker = [s["broker_rss_kb"] for s in after if s.get("broker_rss_kb")]
    figures["brokerRssKiB"] = {"first": broker[0] if broker else None, "last": broker[-1] if broker else None}

    result["ok"] = not problems
    result["failed"] = problems
    with open(args.result or d + "/result.json", "w") as f:
        json.dump(result, f, indent=1, default=str)

    # --- Summary ------------------------------------------------------------------------------
    def mib(kib):
        return "%.1f MiB" % (kib / 1024) if kib else "-"
    L = figures["load"]
    print()
    print("Soak: %s min, %s devices, %s fixes/s target, RKI refresh %s s, publications every %s s" % (
        meta["minutes"], meta["devices"], meta["rate"], meta["refreshSeconds"], meta["intervalSeconds"]))
    print("  load:        %d fixes sent, %d acknowledged, %.1f/s, at most %.0f ms behind schedule" % (
        L.get("sent", 0), L.get("acked", 0), L.get("rate", 0), L.get("behind_max_ms", 0)))
    fx = figures["fixes"]
    print("  positions:   %d in Bavaria, %d elsewhere in Germany, %d abroad; %d devices" % (
        fx["inBavaria"], fx["inGermanyOutsideBavaria"], fx["abroad"], fx["devices"]))
    print("  data:        %d publications taken (%s .. %s), %d switches served" % (
        len(served), served[0] if served else "-", served[-1] if served else "-", switches))
    al = figures["alerts"]
    print("  alerts:      device %d expected (%s), %d received: missing %d, doubled %d, unexpected %d, devices out of order %d" % (
        al["expected"], ", ".join("%s %d" % kv for kv in sorted(by_cause.items())), al["received"],
        n_missing, n_doubled, n_unexpected, misordered))
    print("               district %d expected, %d received: missing %d, extra %d" % (
        al["districtExpected"], al["districtReceived"], sum(d_missing.values()), sum(d_extra.values())))
    print("  states:      %d received, %d fixes without state, %d wrong, %d not matching a fix; "
          "%d placed by their state, %d implausible" % (
              counts["states"], missing_states, counts["wrongStates"], unexpected_state,
              n_fixes - unresolved, counts["implausibleOrder"]))
    lat = figures["fixToStateMs"]
    print("  latency:     fix sent -> its state received p50 %s ms, p99 %s ms, p99.9 %s ms, max %s ms; "
          "%d fixes over 100 ms, %d over 1 s" % (lat["p50"], lat["p99"], lat["p999"], lat["max"], lat["over100ms"], lat["over1s"]))
    rp = figures["republishAfterPublication"]
    print("  republish:   after a publication, median %s device states, the last one %s s after the answer (max %s s)" % (
        rp["statesMedian"], "%.2f" % rp["secondsMedian"] if rp["secondsMedian"] is not None else "-",
        "%.2f" % rp["secondsMax"] if rp["secondsMax"] is not None else "-"))
    print("  RSS:         start %s, first window %s, last window %s (%s), trend %s; max %s, VmHWM %s%s" % (
        mib(mem["atStartKiB"]), mib(rss_first), mib(rss_last),
        "%+.2f %%" % growth_pct if growth_pct is not None else "-",
        "%+.2f %%/h" % slope_pct if slope_pct is not None else "-",
        mib(mem["maxKiB"]), mib(mem["hwmKiB"]), "" if judged else "  (not judged: run too short)"))
    print("  descriptors: %s..%s after warm-up (first window %s, last %s), %s at start" % (
        fd["min"], fd["max"], fd_first, fd_last, fd["atStart"]))
    print("  daemon CPU:  %s %% of one core on average; a publication costs about %s s of CPU more; threads %s..%s" % (
        figures.get("daemonCpuPercent"), figures.get("daemonCpuSecondsPerPublication"),
        figures["threads"]["min"], figures["threads"]["max"]))
    print()
    for name, c in checks.items():
        print("  %-16s %s" % (name, "ok" if c["ok"] else "FAILED"))
    print()
    print("RESULT: %s (%s)" % ("PASS" if result["ok"] else "FAIL", args.result or d + "/result.json"))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
