import AmpelTestSupport
import Foundation
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The generated RKI district file and the fixture server's file serving, checked against the
/// bundled data and a real HTTP client (URLSession), not against the code that uses them.
@Suite struct RKIDistrictFileFixtureTests {
    @Test func writesTheRKIColumnsAndEveryDistrictEachDay() throws {
        let file = try RKIDistrictFile(from: "2021-11-20", to: "2021-11-22")
        #expect(file.days == ["2021-11-20", "2021-11-21", "2021-11-22"])
        #expect(file.districtIDs.count == 402)
        #expect(file.districtIDs.suffix(2) == ["17000", "u"])

        let text = String(decoding: file.render(), as: UTF8.self)
        #expect(text.hasSuffix("\n") && !text.contains("\r") && !text.contains("\""))
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(lines.first == Substring(RKIDistrictFile.header))
        let rows = lines.dropFirst().map { $0.split(separator: ",", omittingEmptySubsequences: false) }
        #expect(rows.allSatisfy { $0.count == 7 })
        for day in file.days {
            #expect(rows.filter { $0[0] == day }.count == 402, "\(day)")
        }
        // Sorted by day, then id, as the RKI writes it.
        let keys = rows.map { "\($0[0]),\($0[1])" }
        #expect(keys == keys.sorted())
    }

    @Test func bavarianValuesAreTheBundledHistory() throws {
        let history = try bundledBavarianIncidence(day: "2021-11-22", ags: "09162")
        #expect(history == 705.3477955278)
        let file = try RKIDistrictFile(from: "2021-11-20", to: "2021-11-22")
        #expect(file.incidence(day: "2021-11-22", id: "09162") == Double(RKIDistrictFile.format(history)))
        let row = try #require(rows(file.render()).first { $0[0] == "2021-11-22" && $0[1] == "09162" })
        #expect(row[2] == "1484226", "ewz_rki_2019")
        #expect(row[6] == RKIDistrictFile.format(history))
        #expect(Double(row[6]) == 705.3)
    }

    @Test func formatsLikeTheNationalFile() {
        #expect(RKIDistrictFile.format(0) == "0")
        #expect(RKIDistrictFile.format(0.1) == "0.1")
        #expect(RKIDistrictFile.format(103) == "103")
        #expect(RKIDistrictFile.format(102.96) == "103")
        #expect(RKIDistrictFile.format(111.14) == "111.1")
    }

    @Test func overridesRemovalsAndDuplicatesShowInTheFile() throws {
        var file = try RKIDistrictFile(from: "2021-11-22", to: "2021-11-22")
        file.set(day: "2021-11-22", id: "01001", incidence: 50.04)
        file.remove(day: "2021-11-22", id: "09161")
        file.duplicate(day: "2021-11-22", id: "09162")
        #expect(file.incidence(day: "2021-11-22", id: "01001") == 50)
        #expect(file.incidence(day: "2021-11-22", id: "09161") == nil)
        let rows = rows(file.render(order: .byDistrict))
        #expect(rows.count == 402 && file.rowCount == 402)
        #expect(rows.first { $0[1] == "01001" }?[6] == "50")
        #expect(!rows.contains { $0[1] == "09161" })
        #expect(rows.filter { $0[1] == "09162" }.count == 2)
    }

    @Test func answersAConditionalGetWithNotModified() async throws {
        let file = try RKIDistrictFile(from: "2021-11-20", to: "2021-11-22")
        let data = file.render()
        try await withServer(serving: nil) { server in
            server.serveFile(data, lastModified: Date(timeIntervalSince1970: 1_637_539_200))
            let first = try await get(server.fileURL)
            #expect(first.status == 200)
            #expect(first.body == data)
            let etag = try #require(first.headers["etag"])
            #expect(etag == "\"\(server.fileETag ?? "")\"")
            #expect(first.headers["last-modified"] == "Mon, 22 Nov 2021 00:00:00 GMT")

            let again = try await get(server.fileURL, headers: ["If-None-Match": etag])
            #expect(again.status == 304)
            #expect(again.body.isEmpty)
            #expect(server.requests.last?.headers["if-none-match"] == etag)
            #expect(server.fileOKCount == 1 && server.fileNotModifiedCount == 1)

            // Another file, another tag: the old one no longer matches.
            var changed = file
            changed.set(day: "2021-11-22", id: "09162", incidence: 1)
            server.serveFile(changed.render())
            let fresh = try await get(server.fileURL, headers: ["If-None-Match": etag])
            #expect(fresh.status == 200)
            #expect(fresh.headers["etag"] != etag)
        }
    }

    @Test func truncatedFileIsCutMidRow() async throws {
        let data = try RKIDistrictFile(from: "2021-11-20", to: "2021-11-22").render()
        try await withServer(serving: nil) { server in
            server.serveFile(data)
            server.inject(.truncatedBody)
            let answer = try await get(server.fileURL)
            #expect(answer.status == 200)
            #expect(answer.body.count < data.count && data.starts(with: answer.body))
            #expect(answer.body.last == UInt8(ascii: ","))
        }
    }

    @Test func stalledFileIsReported() async throws {
        let data = try RKIDistrictFile(from: "2021-11-20", to: "2021-11-22").render()
        try await withServer(serving: nil) { server in
            server.serveFile(data)
            server.inject(.stalledBody)
            let request = Task { try? await get(server.fileURL, timeout: 2) }
            try await withTimeout(.seconds(10), "a stalled body") { await server.waitForStalledBodies(1) }
            #expect(server.stalledBodies == 1)
            request.cancel()
            _ = await request.value
        }
    }
}

private func rows(_ data: Data) -> [[Substring]] {
    String(decoding: data, as: UTF8.self).split(separator: "\n").dropFirst()
        .map { $0.split(separator: ",", omittingEmptySubsequences: false) }
}

/// The value in the bundled Bavarian history, read directly from its CSV.
private func bundledBavarianIncidence(day: String, ags: String) throws -> Double {
    let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Sources/AmpelData/Resources/rki/rki_fixed_7day_incidence_bavaria_2020-11-18_2021-11-22.csv")
    let text = try String(contentsOf: url, encoding: .utf8)
    // The bundled file has CRLF line ends: "\r\n" is one Character, so split on any line end.
    for line in text.split(whereSeparator: \.isNewline) {
        let fields = line.split(separator: ",")
        if fields.count == 5, fields[0] == day, fields[1] == ags, let value = Double(fields[4]) { return value }
    }
    throw FixtureError("no \(ags) on \(day) in the bundled history")
}

/// A GET through URLSession with its cache off, so a `304` reaches the test as it came.
private func get(_ url: String, headers: [String: String] = [:], timeout: TimeInterval = 15) async throws
    -> (status: Int, headers: [String: String], body: Data) {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.urlCache = nil
    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
    let session = URLSession(configuration: configuration)
    defer { session.finishTasksAndInvalidate() }
    var request = URLRequest(url: try #require(URL(string: url)), timeoutInterval: timeout)
    for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
    let (body, response) = try await session.data(for: request)
    let http = try #require(response as? HTTPURLResponse)
    var fields: [String: String] = [:]
    for (name, value) in http.allHeaderFields {
        if let name = name as? String, let value = value as? String { fields[name.lowercased()] = value }
    }
    return (http.statusCode, fields, body)
}
