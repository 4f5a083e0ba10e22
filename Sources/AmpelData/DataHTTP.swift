import AmpelDomain
import Foundation
import Logging

/// What the live sources share: the `User-Agent`, the retry loop and the words for a failed
/// request.
public enum DataHTTP {
    /// The version sent in the `User-Agent`.
    public static let version = AmpelVersion.current

    /// `ampel/<version> (...)`: tells the data's operators who is asking.
    public static let userAgent = "ampel/\(version) (Corona-Ampel daemon; libcurl)"

    /// Whether `url` is an absolute `http` or `https` URL with a host.
    public static func isValidURL(_ url: String) -> Bool {
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(),
              let host = parsed.host, !host.isEmpty else { return false }
        return scheme == "http" || scheme == "https"
    }

    /// Why one attempt failed and whether trying again may help.
    struct Failure: Error {
        let error: DataError
        let retryable: Bool
    }

    /// An answer with a status outside 2xx.
    struct StatusError: Error {
        let code: Int
        let reason: String
    }

    /// The whole attempt took longer than its timeout.
    struct TimedOut: Error {}

    /// What one failed attempt at `url` means: the reason, the words, and whether a retry may
    /// help (network trouble, timeouts, 408, 429, 5xx); one place for both live sources.
    static func failure(of error: any Error, url: String, timeout: Duration, maxBytes: Int) -> Failure {
        let host = hostOf(url)
        switch error {
        case let status as StatusError:
            let retryable = status.code == 408 || status.code == 429 || status.code >= 500
            return Failure(error: DataError(.http, "\(host) answered HTTP \(status.code) \(status.reason)"), retryable: retryable)
        case is TimedOut:
            return Failure(error: DataError(.timeout, "no complete answer from \(host) within \(timeout)"), retryable: true)
        case let transfer as HTTPClient.TransferError:
            switch transfer.kind {
            case .timeout:
                return Failure(error: DataError(.timeout, "no complete answer from \(host) within \(timeout)"), retryable: true)
            case .unusableURL:
                return Failure(error: DataError(.network, "'\(url)' is not a usable URL"), retryable: false)
            default:
                return Failure(error: DataError(.network, "cannot reach \(host): \(transfer.cause)"), retryable: true)
            }
        case is HTTPClient.BodyTooLarge:
            return Failure(error: DataError(.malformed, "the answer is larger than \(maxBytes) bytes"), retryable: false)
        case is CancellationError:
            return Failure(error: DataError(.network, "the request was cancelled"), retryable: false)
        default:
            if Task.isCancelled { return Failure(error: DataError(.network, "the request was cancelled"), retryable: false) }
            return Failure(error: DataError(.network, "cannot reach \(host): \(cause(of: error))"), retryable: true)
        }
    }

    /// Runs `attempt` until it succeeds, fails for good, or `policy` allows no more tries;
    /// each retry is logged with its pause and reported to `attemptFailed`, so that the store
    /// shows the failure at once instead of after the last retry (four attempts with their
    /// pauses and connect timeouts take up to a minute).
    static func retrying<T>(_ policy: RetryPolicy, logger: Logger, what: String, attemptFailed: (@Sendable (DataError) -> Void)? = nil,
                            _ attempt: () async throws(Failure) -> T) async throws(DataError) -> T {
        var number = 1
        while true {
            let failure: Failure
            do {
                return try await attempt()
            } catch {
                failure = error
            }
            guard failure.retryable, number < policy.maxAttempts, !Task.isCancelled else {
                throw failure.error
            }
            let delay = policy.delay(beforeRetry: number)
            logger.notice("\(what) failed, retrying", metadata: [
                "reason": "\(failure.error.reason)", "error": "\(failure.error.message)",
                "attempt": "\(number)", "retryIn": "\(delay)",
            ])
            attemptFailed?(failure.error)
            do {
                try await policy.sleep(delay)
            } catch {
                throw failure.error
            }
            number += 1
        }
    }

    /// What went wrong on the network, in the system's words: `connection refused`, `network
    /// is unreachable`, `unknown host <host>`, …
    public static func cause(of error: any Error) -> String {
        if let transfer = error as? HTTPClient.TransferError { return transfer.cause }
        return "\(error)"
    }

    /// `host[:port]` of `url`, for messages; the whole URL if it has no host.
    public static func hostOf(_ url: String) -> String {
        guard let parsed = URL(string: url), let host = parsed.host else { return url }
        return parsed.port.map { "\(host):\($0)" } ?? host
    }
}
