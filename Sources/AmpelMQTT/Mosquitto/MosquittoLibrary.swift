import CMosquitto

/// `mosquitto_lib_init` must run once per process, before any client thread exists. A Swift
/// global is initialised exactly once, thread-safely, on first use; every client touches it in
/// its initialiser, on the caller's thread, before it starts a network thread. There is no
/// matching `mosquitto_lib_cleanup`: it would break clients still alive elsewhere in the
/// process, and the process exit frees what it would.
enum MosquittoLibrary {
    private static let initialised: Int32 = mosquitto_lib_init()

    static func ensureInitialised() {
        _ = initialised
    }

    /// libmosquitto's version, e.g. `2.0.11`.
    static var version: String {
        var major: Int32 = 0
        var minor: Int32 = 0
        var revision: Int32 = 0
        _ = mosquitto_lib_version(&major, &minor, &revision)
        return "\(major).\(minor).\(revision)"
    }

    /// libmosquitto's text for a return code.
    static func describe(_ rc: Int32) -> String { String(cString: mosquitto_strerror(rc)) }

    /// The text of an MQTT 5 reason code.
    static func describeReason(_ reason: Int32) -> String { String(cString: mosquitto_reason_string(reason)) }
}

/// libmosquitto's return codes the layers above decide on, by name.
enum MosquittoResult {
    static let success = MOSQ_ERR_SUCCESS.rawValue
    static let noConnection = MOSQ_ERR_NO_CONN.rawValue
    static let invalid = MOSQ_ERR_INVAL.rawValue
    static let malformedUTF8 = MOSQ_ERR_MALFORMED_UTF8.rawValue
    static let errno = MOSQ_ERR_ERRNO.rawValue
    static let qosNotSupported = MOSQ_ERR_QOS_NOT_SUPPORTED.rawValue
}
