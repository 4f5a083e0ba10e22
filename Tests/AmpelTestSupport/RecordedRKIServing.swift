import Foundation

/// Starts a loopback RKI server answering with the recording of `recordedDay` (nothing when
/// `nil`), runs `body`, and stops it.
public func withServer<T>(
    serving recordedDay: String? = "2020-11-05", maxRecordCount: Int = 2000,
    _ body: (HTTPFixtureServer) async throws -> T
) async throws -> T {
    let server = try await HTTPFixtureServer.start(maxRecordCount: maxRecordCount)
    do {
        if let recordedDay { try server.serve(contentsOf: RecordedRKI.url(day: recordedDay)) }
        let result = try await body(server)
        try await server.shutdown()
        return result
    } catch {
        try? await server.shutdown()
        throw error
    }
}

public struct RecordingError: Error, CustomStringConvertible {
    public let description: String
}

/// The Bavarian incidences of a recorded RKI answer, read with `JSONSerialization`, so the
/// expectations do not come from the decoder under test.
public func rawBavarianIncidences(day: String) throws -> [String: Double] {
    let data = try Data(contentsOf: RecordedRKI.url(day: day))
    guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any],
          let features = object["features"] as? [[String: Any]] else {
        throw RecordingError(description: "the recording of \(day) has no features list")
    }
    var result: [String: Double] = [:]
    for feature in features {
        guard let attributes = feature["attributes"] as? [String: Any], let rs = attributes["RS"] as? String else {
            throw RecordingError(description: "a feature of \(day) without attributes or RS")
        }
        guard rs.hasPrefix("09") else { continue }
        guard let incidence = (attributes["cases7_per_100k"] as? NSNumber)?.doubleValue else {
            throw RecordingError(description: "\(rs) of \(day) has no cases7_per_100k")
        }
        result[rs] = incidence
    }
    return result
}

/// The Bavarian autumn-2020 phase of an incidence, written out independently of the rule set.
public func expectedPhase(_ incidence: Double) -> String {
    incidence < 35 ? "green" : incidence <= 50 ? "yellow" : incidence <= 100 ? "red" : "darkred"
}
