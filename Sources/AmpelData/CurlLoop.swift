import CAmpelCurl
import Foundation
import Synchronization

/// The thread that drives libcurl's multi handle: transfers are added and cancelled through a
/// queue of commands and a wake-up, so that libcurl is only ever called from this thread.
final class CurlLoop: @unchecked Sendable {
    private enum Command {
        case add(CurlTransfer)
        case cancel(CurlTransfer)
    }

    /// libcurl's global set-up, once before the first handle (thread-safe since 7.84).
    static let globalInit: Void = {
        _ = curl_global_init(Int(CURL_GLOBAL_DEFAULT))
    }()

    /// What other threads hand to the loop's thread.
    private struct Shared {
        var queue: [Command] = []
        var stopping = false
        /// The thread has left its loop: nothing more is taken, the multi handle is gone.
        var ended = false
    }

    private let shared = Mutex(Shared())
    /// Made, with the thread, by the first transfer: a process that never sends a request
    /// (bundled data, no webhooks) starts neither libcurl (its TLS library's set-up) nor the
    /// thread. Written under `shared`'s lock; afterwards read by the thread, which frees it.
    private var multi: UnsafeMutableRawPointer?
    /// The loop's thread only: the transfers in the multi handle, by easy handle.
    private var running: [UnsafeMutableRawPointer: CurlTransfer] = [:]

    func add(_ transfer: CurlTransfer) {
        if !submit(.add(transfer)) { transfer.complete(.failure(CancellationError())) }
    }

    func cancel(_ transfer: CurlTransfer) {
        _ = submit(.cancel(transfer))
    }

    /// Ends the thread once it has cancelled what runs.
    func stop() {
        shared.withLock { state in
            guard !state.ended else { return }
            state.stopping = true
            if let multi { curl_multi_wakeup(multi) } else { state.ended = true }
        }
    }

    /// Queues `command` and wakes the thread (starting it with the first `add`); false once
    /// the thread has ended. All under the lock the thread takes before it frees the handle.
    private func submit(_ command: Command) -> Bool {
        shared.withLock { state in
            guard !state.ended, !state.stopping else { return false }
            if multi == nil {
                guard case .add = command else { return true }
                Self.globalInit
                multi = curl_multi_init()
                // Named from inside: a name set from outside does not reach the system's
                // thread, which would keep the name of the thread that started it.
                Thread { [self] in
                    Thread.current.name = "ampel-http"
                    run()
                }.start()
            }
            state.queue.append(command)
            curl_multi_wakeup(multi)
            return true
        }
    }

    private func run() {
        guard let multi else { return }
        while true {
            let (batch, stop) = shared.withLock { state in
                defer { state.queue = [] }
                return (state.queue, state.stopping)
            }
            for command in batch {
                switch command {
                case .add(let transfer): start(transfer)
                case .cancel(let transfer): abandon(transfer, with: CancellationError())
                }
            }
            if stop { break }
            var active: Int32 = 0
            _ = curl_multi_perform(multi, &active)
            finishDone()
            _ = curl_multi_poll(multi, nil, 0, 1000, nil)
        }
        for transfer in Array(running.values) { abandon(transfer, with: CancellationError()) }
        let late = shared.withLock { state in
            state.ended = true
            defer { state.queue = [] }
            return state.queue
        }
        for case .add(let transfer) in late { transfer.complete(.failure(CancellationError())) }
        curl_multi_cleanup(multi)
    }

    /// Sets up `transfer`'s easy handle and adds it to the multi handle.
    private func start(_ transfer: CurlTransfer) {
        guard !transfer.cancelled.load(ordering: .acquiring) else {
            transfer.complete(.failure(CancellationError()))
            return
        }
        guard let easy = curl_easy_init() else {
            transfer.complete(.failure(HTTPClient.TransferError(kind: .other, cause: "libcurl could not make a handle", curlCode: -1)))
            return
        }
        transfer.easy = easy
        let request = transfer.request
        let context = Unmanaged.passUnretained(transfer).toOpaque()
        _ = request.url.withCString { ampel_curl_set_pointer(easy, CURLOPT_URL, $0) }
        // Signals are the daemon's: timeouts must not use SIGALRM.
        _ = ampel_curl_set_long(easy, CURLOPT_NOSIGNAL, 1)
        // file:// and the rest are not for a client of web services.
        _ = "http,https".withCString { ampel_curl_set_pointer(easy, CURLOPT_PROTOCOLS_STR, $0) }
        _ = "http,https".withCString { ampel_curl_set_pointer(easy, CURLOPT_REDIR_PROTOCOLS_STR, $0) }
        _ = ampel_curl_set_long(easy, CURLOPT_FOLLOWLOCATION, request.redirects > 0 ? 1 : 0)
        _ = ampel_curl_set_long(easy, CURLOPT_MAXREDIRS, request.redirects)
        _ = ampel_curl_set_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Self.milliseconds(request.connectTimeout))
        if let timeout = request.timeout {
            _ = ampel_curl_set_long(easy, CURLOPT_TIMEOUT_MS, Self.milliseconds(timeout))
        }
        if request.acceptsCompression {
            _ = "".withCString { ampel_curl_set_pointer(easy, CURLOPT_ACCEPT_ENCODING, $0) }
        }
        var lines = request.headers.map { "\($0.name): \($0.value)" }
        if request.method == "POST" {
            // A body over 1 MB (libcurl 7.88) would wait a second for a `100 Continue` that few
            // servers send.
            lines.append("Expect:")
            _ = ampel_curl_set_long(easy, CURLOPT_POST, 1)
            _ = ampel_curl_set_long(easy, CURLOPT_POSTFIELDSIZE, request.body.count)
            if request.body.isEmpty {
                _ = "".withCString { ampel_curl_set_pointer(easy, CURLOPT_COPYPOSTFIELDS, $0) }
            } else {
                _ = request.body.withUnsafeBytes { ampel_curl_set_pointer(easy, CURLOPT_COPYPOSTFIELDS, $0.baseAddress) }
            }
        } else if request.method != "GET" {
            _ = request.method.withCString { ampel_curl_set_pointer(easy, CURLOPT_CUSTOMREQUEST, $0) }
        }
        for line in lines {
            transfer.headerList = line.withCString { curl_slist_append(transfer.headerList, $0) }
        }
        _ = ampel_curl_set_pointer(easy, CURLOPT_HTTPHEADER, transfer.headerList)
        _ = ampel_curl_set_data_callback(easy, CURLOPT_HEADERFUNCTION, CurlTransfer.headerCallback)
        _ = ampel_curl_set_pointer(easy, CURLOPT_HEADERDATA, context)
        _ = ampel_curl_set_data_callback(easy, CURLOPT_WRITEFUNCTION, CurlTransfer.bodyCallback)
        _ = ampel_curl_set_pointer(easy, CURLOPT_WRITEDATA, context)
        _ = ampel_curl_set_pointer(easy, CURLOPT_ERRORBUFFER, transfer.errorBuffer)
        running[easy] = transfer
        _ = curl_multi_add_handle(multi!, easy)
    }

    /// Completes the transfers libcurl reports done.
    private func finishDone() {
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi!, &left) {
            guard ampel_curl_message_is_done(message) != 0, let easy = ampel_curl_message_handle(message),
                  let transfer = running.removeValue(forKey: easy) else { continue }
            let code = ampel_curl_message_result(message)
            _ = curl_multi_remove_handle(multi!, easy)
            if code == CURLE_OK {
                transfer.complete(.success(transfer.currentHead()))
            } else if let consumerError = transfer.consumerError {
                transfer.complete(.failure(consumerError))
            } else if transfer.cancelled.load(ordering: .acquiring) {
                transfer.complete(.failure(CancellationError()))
            } else {
                transfer.complete(.failure(Self.error(code, of: transfer, easy: easy)))
            }
        }
    }

    /// Takes `transfer` out of the multi handle, if it is there, and completes it with `error`.
    private func abandon(_ transfer: CurlTransfer, with error: any Error) {
        guard let easy = transfer.easy, running[easy] === transfer else { return }
        running[easy] = nil
        _ = curl_multi_remove_handle(multi!, easy)
        transfer.complete(.failure(error))
    }

    private static func milliseconds(_ duration: Duration) -> Int {
        Int(max(1, duration.nanoseconds / 1_000_000))
    }

    /// libcurl's result in the words a user can act on.
    private static func error(_ code: CURLcode, of transfer: CurlTransfer, easy: UnsafeMutableRawPointer) -> HTTPClient.TransferError {
        var osErrno = 0
        _ = ampel_curl_get_long(easy, CURLINFO_OS_ERRNO, &osErrno)
        let system = osErrno != 0 ? String(cString: strerror(Int32(osErrno))).lowercased() : nil
        let detail = String(cString: transfer.errorBuffer)
        let words = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
        let host = URL(string: transfer.request.url)?.host ?? transfer.request.url
        let kind: HTTPClient.TransferError.Kind
        let cause: String
        switch code {
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
            (kind, cause) = (.unusableURL, "'\(transfer.request.url)' is not a usable URL")
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            (kind, cause) = (.unknownHost, "unknown host \(host)")
        case CURLE_COULDNT_CONNECT:
            (kind, cause) = (.cannotConnect, system ?? words)
        case CURLE_OPERATION_TIMEDOUT:
            var connected: curl_off_t = 0
            _ = ampel_curl_get_off(easy, CURLINFO_CONNECT_TIME_T, &connected)
            if connected == 0 {
                (kind, cause) = (.connectTimeout, "no connection within \(transfer.request.connectTimeout)")
            } else {
                (kind, cause) = (.timeout, "no complete answer within \(transfer.request.timeout ?? .zero)")
            }
        case CURLE_GOT_NOTHING:
            (kind, cause) = (.connectionLost, "the server closed the connection before answering")
        case CURLE_PARTIAL_FILE:
            (kind, cause) = (.connectionLost, "the connection closed before the whole answer arrived")
        case CURLE_RECV_ERROR, CURLE_SEND_ERROR:
            (kind, cause) = (.connectionLost, system ?? words)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
             CURLE_SSL_CACERT_BADFILE:
            (kind, cause) = (.tls, "TLS: \(words)")
        case CURLE_TOO_MANY_REDIRECTS:
            (kind, cause) = (.other, "more than \(transfer.request.redirects) redirects")
        default:
            (kind, cause) = (.other, words)
        }
        return HTTPClient.TransferError(kind: kind, cause: cause, curlCode: Int(code.rawValue))
    }
}
