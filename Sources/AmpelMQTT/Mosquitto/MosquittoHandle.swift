import CMosquitto

/// A `struct mosquitto *` that may cross threads.
///
/// This is the one reviewed place where a libmosquitto pointer becomes `Sendable`. It is sound
/// because of how ``MosquittoSession`` uses it:
/// - the handle is created with `mosquitto_threaded_set(true)`, so libmosquitto guards its
///   queues with its own mutexes and calls from any thread (publish, subscribe, disconnect)
///   only queue packets and wake the network thread;
/// - only the session's own network thread calls `mosquitto_connect*` and `mosquitto_loop`;
/// - `mosquitto_destroy` runs in the session's `deinit`, when no thread can hold it any more.
struct MosquittoHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// A `mosquitto_property` list owned by the session (freed in its `deinit`).
/// Sendable for the same reason as ``MosquittoHandle``: it is written once before the network
/// thread starts and only read by libmosquitto afterwards.
struct MosquittoProperties: @unchecked Sendable {
    let pointer: OpaquePointer?
}

/// `mosquitto_lib_init` must run once per process, before any client thread exists. A Swift
/// global is initialised exactly once, thread-safely, on first use; every session touches it in
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
}
