/// The real OwnTracks message samples of owntracks/json-schema (`tests/`), verbatim.
///
/// From https://github.com/owntracks/json-schema, MIT, "Copyright (c) 2023 OwnTracks".
/// Kept as literals so the test target needs no resource declaration.
enum OwnTracksSamples {
    static let all: [String: String] = [
        "array": #"""
[
	{
		"_type": "location", "lat": 8, "lon": 9, "tst": 1000
	},
	{
		"_type": "lwt", "tst": 1000
	}
]
"""#,
        "cmd-reportLocation": #"""
{
  "_type" : "cmd", "action":"reportLocation"
}
"""#,
        "e": #"""
{
	"_type": "encrypted",
	"data": "YWJjZGUK"
}
"""#,
        "l": #"""
{
    "_type" : "location",
    "acc" : 35,
    "alt" : 0,
    "batt" : 75,
    "bs" : 1,
    "conn" : "w",
    "lat" : 52.195913,
    "lon" : 7.688245,
    "m" : 1,
    "tag" : "Coffee",
    "tid" : "C1",
    "tst" : 1699882482
}
"""#,
        "l2": #"""
{
  "_type" : "location",
  "acc" : -1,
  "alt" : 142.40000000000001,
  "batt" : 6,
  "cid" : "1776",
  "cog" : 80,
  "count" : "4696",
  "din1" : false,
  "din2" : false,
  "dout1" : false,
  "dout2" : false,
  "driver" : "Saul",
  "fake" : false,
  "ign" : false,
  "lac" : "3903",
  "lat" : 53.026676000000002,
  "lon" : 9.5435610000000004,
  "mcc" : 262,
  "mnc" : 1,
  "motion" : false,
  "odometer" : 86746.699999999997,
  "plate" : "XX-DD-99",
  "rid" : 1,
  "rit" : 10,
  "rty" : 0,
  "sens" : false,
  "sent" : 1699143186,
  "t" : "t",
  "tid" : "53",
  "tow" : false,
  "tst" : 1698947571,
  "vel" : 0
}
"""#,
        "location-5s": #"""
{"_type":"location","acc":9,"alt":93,"batt":94,"bs":1,"BSSID":"ca:fe:ed:40:81:5b","cog":252,"conn":"w","lat":53.430722,"lon":5.112126,"m":1,"p":99.182,"SSID":"hotel","t":"p","tid":"SG","tst":1701263310,"vac":3,"vel":1}
"""#,
        "location-lat-missing": #"""
{
    "_type" : "location",
    "acc" : 35,
    "alt" : 0,
    "batt" : 75,
    "bs" : 1,
    "conn" : "w",
    "lon" : 8.688245,
    "m" : 1,
    "tag" : "Coffee",
    "tid" : "C1",
    "tst" : 1699882482
}
"""#,
        "location-short": #"""
{"lat":44.221389,"lon":6.64635,"tst":1692430980,"_type":"location","batt":100}
"""#,
        "location-sk": #"""
{"_type":"location","acc":35,"alt":40,"batt":80,"bs":1,"BSSID":"ca:fe:36:2:b9:2b","conn":"w","created_at":1701258670,"inregions":["office"],"inrids":["cb6046"],"lat":71.215592,"lon":3.767957,"m":1,"p":99.834,"SSID":"office","t":"p","tid":"SG","tst":1701258666,"vac":19}
"""#,
        "lwt-extra": #"""
{
    "_type" : "lwt",
    "tst" : 1699882482,
    "tid": "LW"
}
"""#,
        "lwt-notst": #"""
{
    "_type" : "lwt"
}
"""#,
        "lwt": #"""
{
    "_type" : "lwt",
    "tst" : 1699882482
}
"""#,
        "status": #"""
{
  "_type": "status",
  "iOS": {
    "altimeterAuthorizationStatus": "CMAuthorizationStatusNotDetermined",
    "altimeterIsAbsoluteAltitudeAvailable": false,
    "altimeterIsRelativeAltitudeAvailable": false,
    "backgroundRefreshStatus": "UIBackgroundRefreshStatusAvailable",
    "deviceIdentifierForVendor": "27A2DC28-0371-4077-B607-85FE50BDCB74",
    "deviceModel": "iPad",
    "deviceSystemName": "iPadOS",
    "deviceSystemVersion": "17.2",
    "deviceUserInterfaceIdiom": "UIUserInterfaceIdiomPad",
    "locale": "de_DE",
    "localeUsesMetricSystem": true,
    "locationManagerAuthorizationStatus": "kCLAuthorizationStatusAuthorizedAlways",
    "version": "17.2.3"
  }
}
"""#,
        "transition-illegal-lat": #"""
{"_type":"transition","acc":6,"created_at":1701264373,"desc":"blukii","event":"enter","lat":"61.195709","lon":9.688233,"rid":"c00b92","t":"b","tid":"SG","tst":1701264368,"wtst":1610104404}
"""#,
        "transition": #"""
{"_type":"transition","acc":6,"created_at":1701264373,"desc":"blukii","event":"enter","lat":61.195709,"lon":9.688233,"rid":"c00b92","t":"b","tid":"SG","tst":1701264368,"wtst":1610104404}
"""#,
    ]
}
