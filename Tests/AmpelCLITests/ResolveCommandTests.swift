import AmpelGeo
import AmpelTestSupport
import Foundation
import Testing

/// `ampel resolve` as a user runs it: the built binary, stdin in, stdout/stderr/exit code out.
@Suite struct ResolveCommandTests {
    @Test func answersOneLinePerInputLine() async throws {
        let input = """
            48.1374,11.5755
            48.0658, 11.6155
            47.8005,13.0443
            48.3985,9.9917\r
            52.5163,13.3777
            """
        let run = try await AmpelBinary.run(["resolve"], stdin: Data((input + "\n").utf8))
        #expect(run.exitCode == 0, "\(run.stderrText)")
        #expect(run.stdoutLines == ["09162", "09184", "", "08421", "11000"])
        #expect(run.stderrText.isEmpty)
    }

    @Test func malformedLinesAreReportedInPlaceAndFailTheRun() async throws {
        let input = "48.1374,11.5755\nnot a position\n\n91,11\n48.1,nan\n47.8371,12.9769"  // no final newline
        let run = try await AmpelBinary.run(["resolve"], stdin: Data(input.utf8))
        #expect(run.exitCode == 1)
        let lines = run.stdoutLines
        #expect(lines.count == 6)
        #expect(lines[0] == "09162")
        #expect(lines[1].hasPrefix("error: line 2: "))
        #expect(lines[2].hasPrefix("error: line 3: empty line"))
        #expect(lines[3] == "error: line 4: latitude 91.0 is not in [-90, 90]")
        #expect(lines[4].hasPrefix("error: line 5: longitude"))
        #expect(lines[5] == "09172")
        #expect(run.stderrText.contains("4 of 6 lines malformed"))
    }

    @Test func streamsLargeInput() async throws {
        // 200,000 lines across many read chunks; every line must come back in order.
        var rng = SplitMix64(seed: 1)
        var input = ""
        var expected: [String] = []
        let places = [("48.1374,11.5755", "09162"), ("47.8005,13.0443", ""), ("48.3985,9.9917", "08421")]
        for _ in 0..<200_000 {
            let p = places[Int.random(in: 0..<places.count, using: &rng)]
            input += p.0 + "\n"
            expected.append(p.1)
        }
        let run = try await AmpelBinary.run(["resolve"], stdin: Data(input.utf8))
        #expect(run.exitCode == 0)
        #expect(run.stdoutLines == expected)
    }

    @Test func userGeometry() async throws {
        let run = try await AmpelBinary.run(["resolve", "--geometry", fixture("four-squares.geojson").path],
                                            stdin: Data("0.5,0.5\n1.5,1.5\n5,5\n".utf8))
        #expect(run.exitCode == 0)
        #expect(run.stdoutLines == ["09001", "09004", ""])

        let failed = try await AmpelBinary.run(["resolve", "--geometry", fixture("open-ring.geojson").path], stdin: Data("0.5,0.5\n".utf8))
        #expect(failed.exitCode != 0)
        #expect(failed.stderrText.contains("ring is not closed"))
        #expect(failed.stdout.isEmpty)
    }
}
