#if canImport(Glibc)
import Glibc
#endif

/// The process's heap, as a long-running daemon with a few busy threads wants it.
///
/// glibc's malloc gives threads that contend their own arena (up to eight per core) and keeps
/// freed memory in the arena where it was freed. The daemon allocates on the MQTT network
/// thread, the Swift concurrency threads and the state writer; with the default, 100,000
/// devices left ~60 MB of anonymous memory, with two arenas and a trim after bursts much
/// less (docs/benchmarks.md). Blocks of 128 KiB and more (the device table's arrays, their
/// copy-on-write copies during a state write) always get their own mapping, so freeing them
/// returns the memory at once; by default glibc raises that threshold after the first such
/// free and the next copies land in the heap, where only a trim gives them back.
/// `<malloc.h>` is not part of Swift's Glibc module, so the two functions are looked up by
/// name; elsewhere (macOS, musl) these calls do nothing.
enum ProcessMemory {
    #if canImport(Glibc)
    private typealias MallOpt = @convention(c) (Int32, Int32) -> Int32
    private typealias MallocTrim = @convention(c) (Int) -> Int32
    /// `M_ARENA_MAX` from glibc's `<malloc.h>`.
    private static let arenaMaxParameter: Int32 = -8
    /// `M_MMAP_THRESHOLD` from glibc's `<malloc.h>`; setting it also stops its dynamic raising.
    private static let mmapThresholdParameter: Int32 = -3
    /// `SCHED_IDLE` from `<sched.h>` (Linux).
    private static let idlePolicy: Int32 = 5

    private static func function<T>(_ name: String, as type: T.Type) -> T? {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else { return nil }  // RTLD_DEFAULT
        return unsafeBitCast(symbol, to: type)
    }
    #endif

    /// Caps the number of malloc arenas and fixes the mapping threshold; call before the
    /// daemon's threads start allocating.
    static func configureHeap(arenas: Int32 = 2, mmapThreshold: Int32 = 128 * 1024) {
        #if canImport(Glibc)
        guard let mallopt = function("mallopt", as: MallOpt.self) else { return }
        _ = mallopt(arenaMaxParameter, arenas)
        _ = mallopt(mmapThresholdParameter, mmapThreshold)
        #endif
    }

    /// Puts the calling thread in Linux's `SCHED_IDLE` class: it runs only on CPU time no
    /// normal thread wants, and a waking normal thread preempts it at once. For background work
    /// (the state writer). Unprivileged processes can enter it but not leave it, so only for
    /// threads that keep this role. Elsewhere does nothing.
    static func lowerCurrentThreadToIdle() {
        #if canImport(Glibc)
        var parameters = sched_param(sched_priority: 0)
        _ = sched_setscheduler(0, idlePolicy, &parameters)  // 0: the calling thread
        #endif
    }

    /// Returns free heap pages to the system (after start-up and after large state writes).
    static func trim() {
        #if canImport(Glibc)
        _ = function("malloc_trim", as: MallocTrim.self)?(0)
        #endif
    }
}
