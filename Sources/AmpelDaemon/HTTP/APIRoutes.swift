import AmpelCore
import AmpelData
import AmpelDomain
import Foundation
import Hummingbird

/// The JSON API (docs/http.md): the objects the MQTT topics carry, read from the ``StatusView``.
enum APIRoutes {
    static let defaultLimit = 100
    static let maxLimit = 1_000

    static func add(to router: some RouterMethods<BasicRequestContext>, context: HTTPRoutes.Context) {
        addDistricts(to: router, view: context.view)
        addStates(to: router, context: context)
        addDevices(to: router, context: context)
        addSignal(to: router, context: context)
        let view = context.view
        router.get("api/bridge") { _, _ in HTTPResponses.json(bridgeJSON(view.snapshot())) }
    }

    /// `/api/districts`, one district, its history.
    static func addDistricts(to router: some RouterMethods<BasicRequestContext>, view: StatusView) {
        router.get("api/districts") { _, _ in
            let snapshot = view.snapshot()
            var json = JSONWriter(capacity: 96 * 1_200)
            json.raw("[")
            for (index, district) in snapshot.districts.enumerated() {
                if index > 0 { json.raw(",") }
                json.raw(district.signal.json())
            }
            json.raw("]")
            return HTTPResponses.json(json.bytes)
        }
        router.get("api/districts/:ags") { _, requestContext in
            let snapshot = view.snapshot()
            let ags = try district(requestContext, in: snapshot)
            return HTTPResponses.json(ags.signal.json())
        }
        router.get("api/districts/:ags/history") { _, requestContext in
            let snapshot = view.snapshot()
            let ags = try district(requestContext, in: snapshot).ags
            guard let ruleSet = snapshot.ruleSet else { throw APIError(.serviceUnavailable, "data not loaded") }
            return HTTPResponses.json(history(ags: ags, ruleSet: ruleSet))
        }
    }

    /// `/api/states` and one state's report (under a set of state indicators).
    static func addStates(to router: some RouterMethods<BasicRequestContext>, context: HTTPRoutes.Context) {
        let view = context.view
        router.get("api/states") { request, _ in
            let (dataset, ruleSet) = try stateData(view.snapshot())
            let language = request.uri.queryParameters.get("lang").map { Language(requested: $0) } ?? context.language
            var json = JSONWriter(capacity: 17 * 1_200)
            json.raw("[")
            for (index, report) in StateReport.all(dataset, ruleSet: ruleSet, language: language).enumerated() {
                if index > 0 { json.raw(",") }
                json.raw(report.json(ruleSet: ruleSet))
            }
            json.raw("]")
            return HTTPResponses.json(json.bytes)
        }
        router.get("api/states/:id") { request, requestContext in
            let (dataset, ruleSet) = try stateData(view.snapshot())
            let id = requestContext.parameters.get("id") ?? ""
            let language = request.uri.queryParameters.get("lang").map { Language(requested: $0) } ?? context.language
            guard let report = StateReport(state: id, dataset: dataset, ruleSet: ruleSet, language: language) else {
                throw APIError(.notFound, "no state '\(id)' (00 for Germany, 01 to 16 for the states)")
            }
            return HTTPResponses.json(report.json(ruleSet: ruleSet))
        }
    }

    /// `/api/devices`, paged, and one device.
    static func addDevices(to router: some RouterMethods<BasicRequestContext>, context: HTTPRoutes.Context) {
        let view = context.view
        router.get("api/devices") { request, _ in
            let query = request.uri.queryParameters
            let limit = try self.limit(query.get("limit"))
            let after = try cursor(query.get("cursor"))
            let search = query.get("q").flatMap { $0.isEmpty ? nil : $0 }
            let snapshot = await view.devices()
            let keys = view.sortedKeys(of: snapshot)
            let page = DevicePage.page(keys, after: after, matching: search, limit: limit)
            var json = JSONWriter(capacity: 256 * page.keys.count + 64)
            json.raw(#"{"devices":["#)
            for (index, key) in page.keys.enumerated() {
                if index > 0 { json.raw(",") }
                if let record = snapshot.devices[key] {
                    write(key, record, to: &json, positions: context.settings.showPositions,
                          stateLanguage: context.stateLanguage(device: key, messageLang: record.lang))
                }
            }
            json.raw(#"],"next":"#)
            json.string(page.next.map(DevicePage.cursor(for:)))
            json.raw(#","total":"#)
            json.number(page.total)
            json.raw("}")
            return HTTPResponses.json(json.bytes)
        }
        router.get("api/devices/**") { request, _ in
            // The key may hold `/` (`alice/phone`): everything after `devices/`, percent-decoded.
            let path = request.uri.path
            let raw = path.dropFirst("/api/devices/".count)
            guard let key = String(raw).removingPercentEncoding, !key.isEmpty else {
                throw APIError(.badRequest, "no device key")
            }
            let snapshot = await view.devices()
            guard let record = snapshot.devices[key] else { throw APIError(.notFound, "no device '\(key)'") }
            var json = JSONWriter(capacity: 512)
            write(key, record, to: &json, positions: context.settings.showPositions,
                  stateLanguage: context.stateLanguage(device: key, messageLang: record.lang))
            return HTTPResponses.json(json.bytes)
        }
    }

    /// `/api/signal?lat=&lon=`: the engine's path for a position.
    static func addSignal(to router: some RouterMethods<BasicRequestContext>, context: HTTPRoutes.Context) {
        let view = context.view
        router.get("api/signal") { request, _ in
            let query = request.uri.queryParameters
            let lat = try coordinate(query.get("lat"), name: "lat", range: -90...90)
            let lon = try coordinate(query.get("lon"), name: "lon", range: -180...180)
            let language = query.get("lang").map { Language(requested: $0) } ?? context.language
            let snapshot = view.snapshot()
            guard let ruleSet = snapshot.ruleSet, let dataset = snapshot.dataset else { throw APIError(.serviceUnavailable, "data not loaded") }
            // The engine's path for a fix: the index, then the rule set (`ampel check` takes it too).
            let place = context.locator.place(latitude: lat, longitude: lon)
            do {
                let signal = try ruleSet.signal(atDistrict: place?.ags, placeName: place?.name, dataset: dataset, region: ruleSet.region,
                                                language: language, stale: snapshot.stale)
                return HTTPResponses.json(signal.json())
            } catch {
                throw APIError(.serviceUnavailable, "\(error)")
            }
        }
    }

    /// `/api/bridge`: the errors held, `bridge/info`, the lamps, readiness.
    static func bridgeJSON(_ snapshot: StatusView.Snapshot) -> [UInt8] {
        var json = JSONWriter(capacity: 2_048 + 256 * snapshot.errors.entries.count)
        json.raw(#"{"errors":["#)
        for (index, entry) in snapshot.errors.entries.enumerated() {
            if index > 0 { json.raw(",") }
            json.raw(#"{"at":"#)
            json.string(InternetTime.format(secondsSince1970: TimeInterval(entry.at)))
            json.raw(#","detail":"#)
            json.string(entry.detail)
            json.raw(#","kind":"#)
            json.string(entry.kind)
            json.raw(#","reason":"#)
            json.string(entry.reason)
            json.raw(#","topic":"#)
            json.string(entry.topic)
            json.raw("}")
        }
        json.raw(#"],"info":"#)
        if snapshot.bridgeInfo.isEmpty { json.raw("null") } else { json.raw(snapshot.bridgeInfo) }
        json.raw(#","lamps":["#)
        for (index, lamp) in snapshot.lamps.enumerated() {
            if index > 0 { json.raw(",") }
            write(lamp, to: &json)
        }
        json.raw(#"],"ready":"#)
        json.bool(snapshot.readiness.problem == nil)
        json.raw("}")
        return json.bytes
    }

    // MARK: Parameters

    static func district(_ context: BasicRequestContext, in snapshot: StatusView.Snapshot) throws -> StatusView.District {
        let ags = context.parameters.get("ags") ?? ""
        guard District.isValidCode(ags) else { throw APIError(.badRequest, "'\(ags)' is not a district code (five digits, e.g. 09162)") }
        guard let district = snapshot.district(ags) else { throw APIError(.notFound, "no district \(ags) in the region's data") }
        return district
    }

    /// The publication in force with state indicators, and its rule set.
    static func stateData(_ snapshot: StatusView.Snapshot) throws -> (Dataset, RuleSet) {
        guard let dataset = snapshot.dataset, let ruleSet = snapshot.ruleSet else { throw APIError(.serviceUnavailable, "data not loaded") }
        guard !dataset.states.isEmpty else {
            throw APIError(.notFound, "the data in force has no state indicators: they come with a rule set that reads them, e.g. --rules krankenhausampel-2021")
        }
        return (dataset, ruleSet)
    }

    static func coordinate(_ text: String?, name: String, range: ClosedRange<Double>) throws -> Double {
        guard let text else { throw APIError(.badRequest, "\(name) is missing") }
        guard let value = Double(text), value.isFinite, range.contains(value) else {
            throw APIError(.badRequest, "\(name) '\(text)' is not a number from \(Int(range.lowerBound)) to \(Int(range.upperBound))")
        }
        return value
    }

    static func limit(_ text: String?) throws -> Int {
        guard let text else { return defaultLimit }
        guard let value = Int(text), (1...maxLimit).contains(value) else {
            throw APIError(.badRequest, "limit '\(text)' is not a whole number from 1 to \(maxLimit)")
        }
        return value
    }

    static func cursor(_ text: String?) throws -> String? {
        guard let text, !text.isEmpty else { return nil }
        guard let key = DevicePage.key(ofCursor: text) else { throw APIError(.badRequest, "cursor '\(text)' is not one this API gave") }
        return key
    }

    // MARK: Objects

    /// A device as the engine remembers it (the fields of its `state` topic that are its own):
    /// the district, not the position, unless `http.show_positions`; `stateLang` is the
    /// language its `state` topic is in.
    static func write(_ key: String, _ record: DeviceRecord, to json: inout JSONWriter, positions: Bool, stateLanguage: Language) {
        json.raw(#"{"dataDate":"#)
        json.string(record.dataDate)
        json.raw(#","device":"#)
        json.string(key)
        json.raw(#","district":"#)
        json.optional(record.district) { $1.write(to: &$0) }
        json.raw(#","lang":"#)
        json.string(record.lang)
        if positions {
            json.raw(#","lat":"#)
            json.number(record.lat)
            json.raw(#","lon":"#)
            json.number(record.lon)
        }
        json.raw(#","phase":"#)
        json.string(record.phase)
        json.raw(#","stale":"#)
        json.bool(record.stale)
        json.raw(#","stateLang":"#)
        json.string(stateLanguage.rawValue)
        json.raw(#","tst":"#)
        json.number(record.tst)
        json.raw("}")
    }

    static func write(_ lamp: StatusView.Lamp, to json: inout JSONWriter) {
        json.raw(#"{"blink":"#)
        json.bool(lamp.blink)
        json.raw(#","color":"#)
        json.string(lamp.color)
        json.raw(#","driver":"#)
        json.string(lamp.settings.driver.rawValue)
        json.raw(#","follows":"#)
        switch lamp.settings.follows {
        case .district(let ags):
            json.raw(#"{"district":"#)
            json.string(ags)
        case .device(let key):
            json.raw(#"{"device":"#)
            json.string(key)
        }
        json.raw(#"},"name":"#)
        json.string(lamp.settings.name)
        json.raw(#","online":"#)
        if let online = lamp.online { json.bool(online) } else { json.null() }
        json.raw(#","topic":"#)
        json.string(lamp.settings.topic)
        json.raw("}")
    }

    /// The bundled daily history of one district, each day with the phase the rule set in force
    /// gives its incidence: `{"ags","days":[{"date","incidence","phase"}],"ruleSet"}`.
    static func history(ags: String, ruleSet: RuleSet) -> [UInt8] {
        let series = BundledData.shared.dailyHistory.series(ags: ags)
        var json = JSONWriter(capacity: 64 * series.count + 64)
        json.raw(#"{"ags":"#)
        json.string(ags)
        json.raw(#","days":["#)
        for (index, point) in series.enumerated() {
            if index > 0 { json.raw(",") }
            json.raw(#"{"date":"#)
            json.string(point.day.iso)
            json.raw(#","incidence":"#)
            json.number(point.incidence)
            json.raw(#","phase":"#)
            json.string((try? ruleSet.classify(point.incidence)).map { "\($0.id.name)" })
            json.raw("}")
        }
        json.raw(#"],"ruleSet":"#)
        json.string(ruleSet.id)
        json.raw("}")
        return json.bytes
    }
}
