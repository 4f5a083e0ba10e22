import AmpelTestSupport
import Foundation
import Testing

// Helpers of the tests that run the built `ampel` (located by ``AmpelBinary``).

/// What one run of the binary produced, as text.
struct AmpelRun {
    let status: Int32
    let stdout: String
    let stderr: String
}

/// Runs the built `ampel` in English without colours, whatever the machine's locale.
func runAmpel(_ arguments: [String]) async throws -> AmpelRun {
    var environment = ProcessInfo.processInfo.environment
    environment["NO_COLOR"] = "1"
    environment["LANG"] = "en_US.UTF-8"
    environment["LC_ALL"] = nil
    environment["LC_MESSAGES"] = nil
    let output = try await AmpelBinary.run(arguments, environment: environment)
    return AmpelRun(status: output.exitCode, stdout: output.stdoutText, stderr: output.stderrText)
}

/// A file of `Fixtures/`, next to these tests.
func fixture(_ name: String) throws -> URL {
    try #require(Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Fixtures"), "fixture \(name)")
}

/// A fresh, empty directory for one test.
func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("ampel-cli-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// Starts a loopback RKI server answering with the recording of `recordedDay`, runs `body`, stops it.
func withServer<T>(serving recordedDay: String, maxRecordCount: Int = 2000, _ body: (HTTPFixtureServer) async throws -> T) async throws -> T {
    let server = try await HTTPFixtureServer.start(maxRecordCount: maxRecordCount)
    do {
        try server.serve(contentsOf: RecordedRKI.url(day: recordedDay))
        let result = try await body(server)
        try await server.shutdown()
        return result
    } catch {
        try? await server.shutdown()
        throw error
    }
}

/// The Bavarian incidences of a recorded RKI answer, read with `JSONSerialization`, so the
/// expectations do not come from the decoder the binary uses.
func rawBavarianIncidences(day: String) throws -> [String: Double] {
    let data = try Data(contentsOf: RecordedRKI.url(day: day))
    let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    let features = try #require(object["features"] as? [[String: Any]])
    var result: [String: Double] = [:]
    for feature in features {
        let attributes = try #require(feature["attributes"] as? [String: Any])
        let rs = try #require(attributes["RS"] as? String)
        guard rs.hasPrefix("09") else { continue }
        result[rs] = try #require((attributes["cases7_per_100k"] as? NSNumber)?.doubleValue)
    }
    return result
}

/// The Bavarian autumn-2020 phase of an incidence, written out independently of the rule set.
func expectedPhase(_ incidence: Double) -> String {
    incidence < 35 ? "green" : incidence <= 50 ? "yellow" : incidence <= 100 ? "red" : "darkred"
}
