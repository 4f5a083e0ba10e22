import AmpelTestSupport
import Foundation
import Testing

/// `--help` of every command as a user reads it (docs/cli.md): each option's default said once,
/// the daemon's options with their defaults, and one example that can be copied.
@Suite("--help of every command (built binary)")
struct HelpTests {
    static let commands = ["check", "districts", "rules", "resolve", "fetch", "lamp", "run", "replay"]

    /// The options of a help text, each with its wrapped lines joined: `--name <value>` → text.
    static func options(_ help: String) -> [String: String] {
        var entries: [(name: String, text: String)] = []
        var inOptions = false
        for line in help.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("OPTIONS:") { inOptions = true; continue }
            guard inOptions else { continue }
            // The section ends at its first empty line.
            if line.isEmpty { inOptions = false; continue }
            let text = line.trimmingCharacters(in: .whitespaces)
            // An option's first line starts two spaces in with its flag; wrapped lines further in.
            if line.hasPrefix("  -"), let name = text.split(separator: " ").first(where: { $0.hasPrefix("--") }) {
                entries.append((String(name), text))
            } else if !entries.isEmpty {
                entries[entries.count - 1].text += " " + text
            }
        }
        return Dictionary(entries.map { ($0.name, $0.text) }, uniquingKeysWith: { $0 + " | " + $1 })
    }

    @Test("each option says its default at most once", arguments: [""] + commands)
    func defaultsOnce(command: String) async throws {
        let help = try await AmpelBinary.run(plain: command.isEmpty ? ["--help"] : [command, "--help"])
        #expect(help.exitCode == 0, "\(help.stderrText)")
        let options = Self.options(help.stdoutText)
        #expect(!options.isEmpty, "no options in:\n\(help.stdoutText)")
        for (name, text) in options {
            let said = text.lowercased().components(separatedBy: "default").count - 1
            #expect(said <= 1, "\(command) \(name) says its default \(said) times: \(text)")
        }
    }

    @Test("every option of run that takes a value shows its default")
    func runDefaults() async throws {
        let help = try await AmpelBinary.run(plain: ["run", "--help"])
        let options = Self.options(help.stdoutText)
        for name in ["--config", "--broker", "--source", "--url", "--date", "--state-dir", "--refresh", "--lang", "--rules", "--log-level", "--http"] {
            let text = try #require(options[name], "\(name) in run --help:\n\(help.stdoutText)")
            #expect(text.contains("(default: "), "\(name): \(text)")
        }
        // The defaults in force, not other words for them.
        #expect(options["--broker"]?.contains("(default: mqtt://localhost:1883)") == true, "\(options["--broker"] ?? "")")
        #expect(options["--source"]?.contains("(default: snapshot)") == true)
        #expect(options["--refresh"]?.contains("(default: 10m)") == true)
        #expect(options["--lang"]?.contains("(default: en)") == true)
        #expect(options["--state-dir"]?.contains("~/.local/state/ampel") == true)
        #expect(options["--source"]?.contains("bundled") == true, "run takes the sources check takes")
    }

    @Test("each command shows one example, on a line of its own", arguments: [""] + commands)
    func example(command: String) async throws {
        let help = try await AmpelBinary.run(plain: command.isEmpty ? ["--help"] : [command, "--help"])
        let lines = help.stdoutText.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let headings = lines.indices.filter { lines[$0] == "Example:" }
        #expect(headings.count == 1, "one example in:\n\(help.stdoutText)")
        let heading = try #require(headings.first)
        let example = heading + 1 < lines.count ? lines[heading + 1] : ""
        #expect(example.hasPrefix("  "), "indented: '\(example)'")
        #expect(example.contains("ampel \(command)"), "an example of \(command.isEmpty ? "ampel" : command): '\(example)'")
        // Not wrapped: the next line ends the example.
        #expect(heading + 2 >= lines.count || lines[heading + 2].isEmpty, "the example spans lines:\n\(help.stdoutText)")
    }
}
