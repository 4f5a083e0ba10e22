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



