import AmpelDomain
import Foundation

/// Decodes and checks an answer of the RKI ArcGIS layer `RKI_Landkreisdaten` (`f=json`).
///
/// One decoder serves the live service, the bundled snapshots and user-supplied snapshot
/// files, so all of them pass the same checks: an ArcGIS error body (which the service
/// sends with HTTP 200), missing fields, NaN or negative incidences, duplicate districts
/// and mixed publication days are all rejected with a reason.
public struct ArcGISDecoder: Sendable {
    /// The fields Ampel asks the service for (`outFields`).
    public static let outFields = ["RS", "GEN", "BEZ", "county", "EWZ", "BL", "BL_ID", "last_update",
                                   "cases7_per_100k", "cases7_bl_per_100k"]

    public init() {}

    /// One page of an answer: its features and whether the service has more.
    public struct Page: Sendable {
        public let entries: [DistrictIncidence]
        public let date: Day?
        public let exceededTransferLimit: Bool
    }

    struct Body: Decodable {
        struct ErrorBody: Decodable {
            let code: Int?
            let message: String?
            let details: [String]?
        }

        struct Feature: Decodable {
            let attributes: Attributes?
        }

        struct Attributes: Decodable {
            let RS: String?
            let GEN: String?
            let BEZ: String?
            let county: String?
            let EWZ: Double?
            let BL: String?
            let last_update: String?
            let cases7_per_100k: Double?
            let cases7_bl_per_100k: Double?
        }

        let error: ErrorBody?
        let features: [Feature]?
        let exceededTransferLimit: Bool?
    }

    /// Decodes one page; a page with no features is allowed here (the last page of a paged answer).
    public func decodePage(_ data: Data) throws(DataError) -> Page {
        let body: Body
        do {
            body = try JSONDecoder().decode(Body.self, from: data)
        } catch {
            throw DataError(.malformed, "the answer is not the JSON of an ArcGIS query (\(data.count) bytes): \(Self.short(error))")
        }
        if let error = body.error {
            let details = (error.details ?? []).joined(separator: "; ")
            throw DataError(.apiError, "the ArcGIS service answered with error \(error.code.map(String.init) ?? "?"): \(error.message ?? "no message")\(details.isEmpty ? "" : " (\(details))")")
        }
        guard let features = body.features else {
            throw DataError(.missingField, "the answer has no 'features' list")
        }
        var entries: [DistrictIncidence] = []
        entries.reserveCapacity(features.count)
        var date: Day?
        for (index, feature) in features.enumerated() {
            guard let a = feature.attributes else {
                throw DataError(.missingField, "feature \(index) has no attributes")
            }
            func need<T>(_ value: T?, _ field: String) throws(DataError) -> T {
                guard let value else {
                    throw DataError(.missingField, "feature \(index)\(a.RS.map { " (RS \($0))" } ?? ""): field '\(field)' is missing or null")
                }
                return value
            }
            let rs = try need(a.RS, "RS")
            guard District.isValidCode(rs) else {
                throw DataError(.invalidValue, "feature \(index): RS '\(rs)' is not five digits")
            }
            let incidence = try need(a.cases7_per_100k, "cases7_per_100k")
            guard incidence.isFinite, incidence >= 0 else {
                throw DataError(.invalidValue, "district \(rs): cases7_per_100k \(incidence) is not a finite, non-negative number")
            }
            if let state = a.cases7_bl_per_100k, !(state.isFinite && state >= 0) {
                throw DataError(.invalidValue, "district \(rs): cases7_bl_per_100k \(state) is not a finite, non-negative number")
            }
            let lastUpdate = try need(a.last_update, "last_update")
            guard let day = Day(rkiLastUpdate: lastUpdate) else {
                throw DataError(.invalidValue, "district \(rs): last_update '\(lastUpdate)' is not 'DD.MM.YYYY, HH:MM Uhr'")
            }
            if let date, date != day {
                throw DataError(.invalidValue, "the answer mixes publication days \(date) and \(day)")
            }
            date = day
            let county = try need(a.county, "county")
            let bez = a.BEZ ?? ""
            let kind: District.Kind = ["Kreisfreie Stadt", "Stadtkreis", "Bezirk"].contains(bez) || county.hasPrefix("SK ") ? .city : .county
            let population = a.EWZ.flatMap { $0.isFinite && $0 > 0 ? Int($0) : nil }
            let district = District(
                ags: rs, name: county, shortName: a.GEN ?? county, kind: kind,
                state: try need(a.BL, "BL"), population: population)
            entries.append(DistrictIncidence(district: district, incidence: incidence, stateIncidence: a.cases7_bl_per_100k))
        }
        return Page(entries: entries, date: date, exceededTransferLimit: body.exceededTransferLimit ?? false)
    }

    /// Joins pages into one dataset, rejecting duplicates and empty answers.
    ///
    /// - Parameter minimumDistricts: how many districts of `region` the answer must hold
    ///   (the RKI reports 96 Bavarian districts); fewer means a partial answer.
    public func dataset(from pages: [Page], source: String, minimumDistricts: Int = 96, region: Region = .bavaria) throws(DataError) -> Dataset {
        var districts: [String: DistrictIncidence] = [:]
        var date: Day?
        for page in pages {
            if let pageDate = page.date {
                if let date, date != pageDate {
                    throw DataError(.invalidValue, "the pages mix publication days \(date) and \(pageDate)")
                }
                date = pageDate
            }
            for entry in page.entries {
                if districts[entry.district.ags] != nil {
                    throw DataError(.duplicateDistrict, "district \(entry.district.ags) (\(entry.district.name)) appears twice")
                }
                districts[entry.district.ags] = entry
            }
        }
        guard let date, !districts.isEmpty else {
            throw DataError(.empty, "the answer holds no districts")
        }
        let inRegion = districts.keys.filter { region.contains(ags: $0) }.count
        if inRegion < minimumDistricts {
            throw DataError(.missingDistricts, "the answer holds \(inRegion) districts of \(region.name), expected at least \(minimumDistricts)")
        }
        return Dataset(date: date, source: source, districts: districts)
    }

    /// Decodes a complete, unpaged answer (a snapshot file).
    public func dataset(_ data: Data, source: String, minimumDistricts: Int = 96, region: Region = .bavaria) throws(DataError) -> Dataset {
        try dataset(from: [decodePage(data)], source: source, minimumDistricts: minimumDistricts, region: region)
    }

    static func short(_ error: any Error) -> String {
        if let error = error as? DecodingError {
            switch error {
            case .dataCorrupted(let context): return context.underlyingError.map { "\($0)" } ?? context.debugDescription
            case .typeMismatch(_, let context), .valueNotFound(_, let context):
                let path = context.codingPath.map(\.stringValue).joined(separator: ".")
                return "wrong type at \(path)"
            case .keyNotFound(let key, _): return "missing key \(key.stringValue)"
            @unknown default: return "\(error)"
            }
        }
        return "\(error)"
    }
}
