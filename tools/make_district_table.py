#!/usr/bin/env python3
"""Writes Sources/AmpelDomain/Resources/districts/germany_districts.csv: the 400 German
districts the RKI's maintained dataset keys by `Landkreis_id`, with the names Ampel shows.

Usage: tools/make_district_table.py ../shared/data

Codes, short names, kinds and states come from BKG VG1000 (Stand 2024-12-31), whose 400
districts are exactly the schema's `Landkreis_id` values without `17000` and `u`; the long
names are the RKI's own (`county` of its 2020 district layer, "SK München", "LK München"),
made the same way (SK/LK + short name) for districts that layer did not have. The output is
sorted by code and byte-for-byte reproducible.
"""
import csv, io, json, os, sys

STATES = {"01": "Schleswig-Holstein", "02": "Hamburg", "03": "Niedersachsen", "04": "Bremen",
          "05": "Nordrhein-Westfalen", "06": "Hessen", "07": "Rheinland-Pfalz",
          "08": "Baden-Württemberg", "09": "Bayern", "10": "Saarland", "11": "Berlin",
          "12": "Brandenburg", "13": "Mecklenburg-Vorpommern", "14": "Sachsen",
          "15": "Sachsen-Anhalt", "16": "Thüringen"}
CITY = {"Kreisfreie Stadt", "Stadtkreis"}

def main(data):
    geo = json.load(open(os.path.join(data, "geo/bkg_vg1000_krs_2024-12-31_wgs84.geojson"), encoding="utf-8"))
    schema = json.load(open(os.path.join(data, "rki-github/tableschema_COVID-19-Faelle_7-Tage-Inzidenz_Landkreise.json")))
    ids = [x for x in schema["fields"][1]["constraints"]["enum"] if x not in ("17000", "u")]
    rki = {}
    with open(os.path.join(data, "rki/rki_landkreisdaten_2020-11-23.csv"), encoding="utf-8-sig") as f:
        for row in csv.DictReader(f):
            rki[row["RS"]] = row["county"]
    rows = []
    for feature in geo["features"]:
        p = feature["properties"]
        ags = p["ARS"]
        kind = "SK" if p["BEZ"] in CITY or ags in ("02000", "11000") else "LK"
        name = rki.get(ags) or f"{kind} {p['GEN']}"
        rows.append((ags, name, p["GEN"], kind, STATES[p["SN_L"]]))
    rows.sort()
    assert [r[0] for r in rows] == sorted(ids), "VG1000 and the RKI schema disagree on the district codes"
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["ags", "name", "shortName", "kind", "state"])
    w.writerows(rows)
    target = os.path.join(os.path.dirname(__file__), "../Sources/AmpelDomain/Resources/districts/germany_districts.csv")
    with open(target, "w", encoding="utf-8") as f:
        f.write(out.getvalue())
    print(f"{len(rows)} districts -> {os.path.normpath(target)}")

if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/data")
