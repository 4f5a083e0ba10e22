#!/usr/bin/env python3
"""The program a user would write instead of Ampel's readers: pandas reads the RKI's
hospitalisation file and the DIVI register's state file and takes each state's newest values
(the fixed 7-day admissions and incidence of age group 00+, and the intensive-care patients
summed over the treatment groups, Germany as the sum of the states).

Usage: pandas_states.py HOSPITAL_CSV ICU_CSV   (prints the newest days and the states)
"""
import sys

import pandas as pd

hospital = pd.read_csv(sys.argv[1], dtype={"Bundesland_Id": str}, parse_dates=["Datum"])
hospital = hospital[hospital["Altersgruppe"] == "00+"]
newest_hospital = hospital["Datum"].max()
day = hospital[hospital["Datum"] == newest_hospital]
cases = dict(zip(day["Bundesland_Id"], day["fixierte_7T_Hospitalisierung_Faelle"]))
incidence = dict(zip(day["Bundesland_Id"], day["fixierte_7T_Hospitalisierung_Inzidenz"]))

icu = pd.read_csv(sys.argv[2], dtype={"bundesland_id": str}, parse_dates=["datum"])
newest_icu = icu["datum"].max()
patients = icu[icu["datum"] == newest_icu].groupby("bundesland_id")["faelle_covid_aktuell"].sum().to_dict()
patients["00"] = sum(patients.values())
print(newest_hospital.date(), newest_icu.date(), len(cases), len(incidence), len(patients))
