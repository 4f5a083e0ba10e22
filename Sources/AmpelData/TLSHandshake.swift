import CAmpelCurl
import Foundation

/// Why a TLS handshake with a server fails, in words a user can act on.
///
/// libmosquitto reports every failed certificate check as "certificate verify failed": an
/// unknown CA, a certificate for another host name and an expired one look alike. libcurl,
/// on the same OpenSSL, says which: so a broker whose handshake failed is asked once more,
/// by libcurl, for the words (a handshake only, nothing is sent after it).
public enum TLSHandshake {
    /// What went wrong with the certificates, in a sentence, and the setting to look at.
    public struct Failure: Sendable, Hashable, CustomStringConvertible {
        /// `mqtt.ca_file`, `broker` (the host name), `mqtt.cert_file and mqtt.key_file`.
        public let setting: String
        public let reason: String
        public var description: String { reason }
    }

    /// The failure of a handshake with `host:port` as libcurl makes it with these files;
    /// `nil` when it succeeds or fails for no reason of the certificates.
    ///
    /// With TLS 1.3 a server that requires a client certificate says so only after the
    /// client's side of the handshake is done, in an alert: so after a handshake that went
    /// through, the answer waits up to `alertWait` for such an alert (nothing is sent).
    public static func failure(host: String, port: Int, caFile: String?, certFile: String?, keyFile: String?,
                               timeout: Duration = .seconds(5), alertWait: Duration = .seconds(1)) -> Failure? {
        _ = CurlLoop.globalInit
        guard let easy = curl_easy_init() else { return nil }
        defer { curl_easy_cleanup(easy) }
        var buffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let url = "https://\(host.contains(":") ? "[\(host)]" : host):\(port)/"
        let code: CURLcode = buffer.withUnsafeMutableBufferPointer { errors in
            _ = url.withCString { ampel_curl_set_pointer(easy, CURLOPT_URL, $0) }
            _ = ampel_curl_set_long(easy, CURLOPT_CONNECT_ONLY, 1)
            _ = ampel_curl_set_long(easy, CURLOPT_NOSIGNAL, 1)
            _ = ampel_curl_set_long(easy, CURLOPT_CONNECTTIMEOUT_MS, milliseconds(timeout))
            _ = ampel_curl_set_pointer(easy, CURLOPT_ERRORBUFFER, errors.baseAddress)
            if let caFile { _ = caFile.withCString { ampel_curl_set_pointer(easy, CURLOPT_CAINFO, $0) } }
            if let certFile { _ = certFile.withCString { ampel_curl_set_pointer(easy, CURLOPT_SSLCERT, $0) } }
            if let keyFile { _ = keyFile.withCString { ampel_curl_set_pointer(easy, CURLOPT_SSLKEY, $0) } }
            var code = curl_easy_perform(easy)
            if code == CURLE_OK { code = alertAfterHandshake(easy, wait: alertWait) }
            // The buffer is this closure's: libcurl must not keep its address past it.
            _ = ampel_curl_set_pointer(easy, CURLOPT_ERRORBUFFER, nil)
            return code
        }
        guard code != CURLE_OK else { return nil }
        let words = buffer.withUnsafeBufferPointer { String(decoding: $0.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        return classify(words.isEmpty ? String(cString: curl_easy_strerror(code)) : words, host: host)
    }

    /// Reads from the connection once, if the server sends anything within `wait`: a TLS 1.3
    /// alert (certificate required) comes back as the read's error. `CURLE_OK` when nothing came.
    private static func alertAfterHandshake(_ easy: UnsafeMutableRawPointer, wait: Duration) -> CURLcode {
        var socket: curl_socket_t = -1
        guard ampel_curl_get_socket(easy, &socket) == CURLE_OK, socket >= 0 else { return CURLE_OK }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, Int32(milliseconds(wait))) > 0 else { return CURLE_OK }
        var byte: UInt8 = 0
        var received = 0
        let code = curl_easy_recv(easy, &byte, 1, &received)
        return code == CURLE_AGAIN ? CURLE_OK : code
    }

    private static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return max(1, Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000))
    }

    /// The certificate problem in `text` (libcurl's or libmosquitto's words for it); `nil` for
    /// anything else.
    public static func classify(_ text: String, host: String) -> Failure? {
        let lower = text.lowercased()
        if lower.contains("no alternative certificate subject name") || lower.contains("does not match target host")
            || lower.contains("hostname mismatch") {
            return Failure(setting: "broker", reason: "the broker's certificate is not made out for the host name '\(host)' (name mismatch)")
        }
        if lower.contains("certificate has expired") {
            return Failure(setting: "mqtt.ca_file", reason: "the broker's certificate has expired")
        }
        if lower.contains("certificate is not yet valid") {
            return Failure(setting: "mqtt.ca_file", reason: "the broker's certificate is not valid yet (or this machine's clock is wrong)")
        }
        if lower.contains("unable to get local issuer") || lower.contains("self-signed certificate") || lower.contains("self signed certificate")
            || lower.contains("unable to verify the first certificate") {
            return Failure(setting: "mqtt.ca_file", reason: "the broker's certificate is not signed by a CA in the CA file (unknown CA)")
        }
        if lower.contains("certificate required") {
            return Failure(setting: "mqtt.cert_file and mqtt.key_file", reason: "the broker requires a client certificate, and none is set")
        }
        if lower.contains("alert unknown ca") || lower.contains("alert bad certificate") || lower.contains("alert certificate unknown")
            || lower.contains("alert decrypt error") {
            return Failure(setting: "mqtt.cert_file and mqtt.key_file", reason: "the broker refused the client certificate")
        }
        if lower.contains("unable to set private key") || lower.contains("could not load pem client certificate")
            || lower.contains("unable to use client certificate") || lower.contains("problem with the local ssl certificate") {
            return Failure(setting: "mqtt.cert_file and mqtt.key_file", reason: "the client certificate or its key cannot be used (unreadable, or they do not belong together)")
        }
        if lower.contains("error setting certificate file") || lower.contains("error reading ca cert") || lower.contains("cafile") {
            return Failure(setting: "mqtt.ca_file", reason: "the CA file cannot be read")
        }
        return nil
    }
}
