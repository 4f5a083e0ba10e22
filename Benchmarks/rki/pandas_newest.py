#!/usr/bin/env python3
"""The program a user would write instead of Ampel's reader: pandas reads the RKI district
file and keeps each district's newest day (the value for the data day).

Usage: pandas_newest.py URL_OR_PATH   (prints the newest day and the number of districts)
"""
import sys

import pandas as pd

frame = pd.read_csv(sys.argv[1], dtype={"Landkreis_id": str}, parse_dates=["Meldedatum"])
newest = frame["Meldedatum"].max()
latest = frame[frame["Meldedatum"] == newest]
latest = latest[~latest["Landkreis_id"].isin(["17000", "u"])]
values = dict(zip(latest["Landkreis_id"], latest["Inzidenz_7-Tage"]))
print(newest.date(), len(values))
