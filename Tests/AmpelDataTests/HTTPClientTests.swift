import AmpelData
import AmpelTestSupport
import Foundation
import Testing

/// The HTTP client on its own (libcurl behind it), against the loopback fixture server: what
/// the sources and the webhooks rely on beyond a plain GET.
@Suite struct HTTPClientTests {
    @Test("a POST carries its body and headers as given, without waiting for a 100 Continue")
    func postCarriesBodyAndHeaders() async throws {
        try await withServer(serving: nil) { server in
            let client = HTTPClient()
            // Over 1 MB: libcurl 7.88 would otherwise send `Expect: 100-continue` and wait a
            // second for an answer this server (like many) never sends.
            let payload = Array(#"{"alert":"\#(String(repeating: "x", count: 1_100_000))"}"#.utf8)
            let request = HTTPClient.Request(url: server.baseURL + "/hook", method: "POST",
                                             headers: [("Content-Type", "application/json"), ("Idempotency-Key", "k-1")],
                                             body: payload, redirects: 0, timeout: .seconds(10))
            let (head, _) = try await client.collect(request, upTo: 1 << 16)
            #expect(head.status == 200)
            let delivered = try #require(server.delivered.first)
            #expect(delivered.body == payload)
            #expect(delivered.headers["idempotency-key"] == "k-1")
            #expect(delivered.headers["content-type"] == "application/json")
            #expect(delivered.headers["expect"] == nil)
        }
    }

    @Test("a task cancelled while the body stalls ends at once, and the client serves the next request")
    func cancellationEndsAStalledTransfer() async throws {
        let file = Data(String(repeating: "line of the file\n", count: 20_000).utf8)
        try await withServer(serving: nil) { server in
            server.serveFile(file)
            server.inject(.stalledBody, times: 1)
            let client = HTTPClient()
            let url = server.fileURL
            let stalled = Task { try await client.collect(.init(url: url), upTo: 1 << 24) }
            await server.waitForStalledBodies(1)
            stalled.cancel()
            await #expect(throws: CancellationError.self) { _ = try await stalled.value }
            let (head, body) = try await client.collect(.init(url: url), upTo: 1 << 24)
            #expect(head.status == 200)
            #expect(body.count == file.count)
        }
    }

    @Test("a refused connection and an unusable URL are told apart, in words a user can act on")
    func failuresInWords() async throws {
        let client = HTTPClient()
        let port = try MosquittoBroker.freeLoopbackPort()
        do {
            _ = try await client.collect(.init(url: "http://127.0.0.1:\(port)/"), upTo: 1024)
            Issue.record("a request to a closed port succeeded")
        } catch let error as HTTPClient.TransferError {
            #expect(error.kind == .cannotConnect)
            #expect(error.cause == "connection refused")
        }
        for url in ["ftp://127.0.0.1/file", "file:///etc/passwd", "http://"] {
            do {
                _ = try await client.collect(.init(url: url), upTo: 1024)
                Issue.record("\(url) was fetched")
            } catch let error as HTTPClient.TransferError {
                #expect(error.kind == .unusableURL, "\(url): \(error.cause)")
            }
        }
    }

    @Test("a 2xx body over the limit fails; an error's body is kept in part and its status returned")
    func bodyLimits() async throws {
        try await withServer(serving: nil) { server in
            server.serveFile(Data(repeating: 0x41, count: 100_000))
            let client = HTTPClient()
            await #expect(throws: HTTPClient.BodyTooLarge.self) {
                _ = try await client.collect(.init(url: server.fileURL), upTo: 1_000)
            }
            server.inject(.status(503), times: 1)
            let (head, _) = try await client.collect(.init(url: server.fileURL), upTo: 1_000)
            #expect(head.status == 503)
            #expect(head.reason == "Service Unavailable")
        }
    }

    @Test("a source follows a redirect to the file; a webhook's POST gets the redirect itself")
    func redirects() async throws {
        let file = Data("the file\n".utf8)
        try await withServer(serving: nil) { target in
            target.serveFile(file)
            try await withServer(serving: nil) { origin in
                let client = HTTPClient()
                origin.inject(.redirect(to: target.fileURL), times: 2)
                let (followed, body) = try await client.collect(.init(url: origin.baseURL + "/moved.csv"), upTo: 1 << 16)
                #expect(followed.status == 200)
                #expect(body == Array(file))
                let post = HTTPClient.Request(url: origin.baseURL + "/hook", method: "POST", body: Array("{}".utf8), redirects: 0)
                let (answer, _) = try await client.collect(post, upTo: 1 << 16)
                #expect(answer.status == 302)
                #expect(answer.first(name: "location") == target.fileURL)
                #expect(target.delivered.isEmpty, "the POST must not reach the redirect's target")
            }
        }
    }
}
