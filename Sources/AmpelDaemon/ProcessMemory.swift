#if canImport(Glibc)
import Glibc
#endif

/// The process's heap, as a long-running daemon with a few busy threads wants it.
///
/// glibc's malloc gives threads that contend their own arena (up to eight per core) and keeps
/// freed memory in the arena where it was freed. The daemon allocates on the MQTT network
/// thread, the Swift concurrency threads and the state writer; with the default, 100,000
/// devices left ~60 MB of anonymous memory, with two arenas and a trim after bursts much
/// less (docs/benchmarks.md). `<malloc.h>` is not part of Swift's Glibc module, so the two
/// functions are looked up by name; elsewhere (macOS, musl) these calls do nothing.
enum ProcessMemory {
    #if canImport(Glibc)
    private typealias MallOpt = @convention(c) (Int32, Int32) -> Int32
    private typealias MallocTrim = @convention(c) (Int) -> Int32
    /// `M_ARENA_MAX` from glibc's `<malloc.h>`.
    private static let arenaMaxParameter: Int32 = -8

    private static func function<T>(_ name: String, as type: T.Type) -> T? {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else { return nil }  // RTLD_DEFAULT
        return unsafeBitCast(symbol, to: type)
    }
    #endif

    /// Caps the number of malloc arenas; call before the daemon's threads start allocating.
    static func limitArenas(_ count: Int32 = 2) {
        #if canImport(Glibc)
        _ = function("mallopt", as: MallOpt.self)?(arenaMaxParameter, count)
        #endif
    }

    /// Returns free heap pages to the system (after start-up and after large state writes).
    static func trim() {
        #if canImport(Glibc)
        _ = function("malloc_trim", as: MallocTrim.self)?(0)
        #endif
    }
}
