import CAmpelCurl
import Foundation
import Synchronization

/// One request in flight. `continuation` is set before the transfer reaches the loop, and
/// `cancelled` may be set from any thread; everything else belongs to the loop's thread.
final class CurlTransfer: @unchecked Sendable {
    let request: HTTPClient.Request
    let receive: @Sendable (HTTPClient.Head, UnsafeRawBufferPointer) throws -> Void
    var continuation: CheckedContinuation<HTTPClient.Head, any Error>?
    let cancelled = Atomic<Bool>(false)

    var easy: UnsafeMutableRawPointer?
    var headerList: UnsafeMutablePointer<curl_slist>?
    let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
    /// The head being read (the last one, after redirects and `100 Continue`).
    var head: HTTPClient.Head?
    /// What `receive` threw.
    var consumerError: (any Error)?

    init(request: HTTPClient.Request, receive: @escaping @Sendable (HTTPClient.Head, UnsafeRawBufferPointer) throws -> Void) {
        self.request = request
        self.receive = receive
        errorBuffer.initialize(to: 0)
    }

    deinit {
        if let easy { curl_easy_cleanup(easy) }
        if let headerList { curl_slist_free_all(headerList) }
        errorBuffer.deallocate()
    }

    /// Ends the transfer for its caller; a second call does nothing.
    func complete(_ result: Result<HTTPClient.Head, any Error>) {
        guard let continuation else { return }
        self.continuation = nil
        continuation.resume(with: result)
    }

    /// One header line (CRLF included). A status line starts a new head: redirects and
    /// `100 Continue` come before the answer that counts.
    func headerLine(_ bytes: UnsafeRawBufferPointer) {
        var end = bytes.count
        while end > 0, bytes[end - 1] == 0x0D || bytes[end - 1] == 0x0A { end -= 1 }
        let line = String(decoding: bytes[..<end], as: UTF8.self)
        if line.hasPrefix("HTTP/") {
            let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
            let status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
            let reason = parts.count > 2 ? String(parts[2]) : HTTPClient.standardReason(status)
            head = HTTPClient.Head(status: status, reason: reason, headers: [])
        } else if let colon = line.firstIndex(of: ":"), head != nil {
            let name = String(line[..<colon]).trimmingCharacters(in: .whitespaces)
            let value = String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
            head?.headers.append((name, value))
        }
    }

    /// A chunk of the body; false stops the transfer.
    func bodyChunk(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if cancelled.load(ordering: .acquiring) { return false }
        do {
            try receive(currentHead(), bytes)
            return true
        } catch {
            consumerError = error
            return false
        }
    }

    /// The head as read, or as libcurl knows it when no header line came.
    func currentHead() -> HTTPClient.Head {
        if let head { return head }
        var status = 0
        if let easy { _ = ampel_curl_get_long(easy, CURLINFO_RESPONSE_CODE, &status) }
        let made = HTTPClient.Head(status: status, reason: HTTPClient.standardReason(status), headers: [])
        head = made
        return made
    }

    /// libcurl's header and body callbacks; `context` is the transfer, unretained (the loop holds it).
    static let headerCallback: ampel_curl_data_fn = { data, size, count, context in
        guard let context else { return 0 }
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
        transfer.headerLine(UnsafeRawBufferPointer(start: data, count: size * count))
        return size * count
    }

    static let bodyCallback: ampel_curl_data_fn = { data, size, count, context in
        guard let context else { return 0 }
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
        return transfer.bodyChunk(UnsafeRawBufferPointer(start: data, count: size * count)) ? size * count : 0
    }
}
