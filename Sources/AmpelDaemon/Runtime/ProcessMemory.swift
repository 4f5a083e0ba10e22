import CAmpelLinux

/// The process's heap, as a long-running daemon with a few busy threads wants it.
///
/// glibc's malloc gives threads that contend their own arena (up to eight per core) and keeps
/// freed memory in the arena where it was freed. The daemon allocates on the MQTT network
/// thread, the Swift concurrency threads and the state writer; with the default, a large
/// device table leaves far more anonymous memory behind than with two arenas and a trim after
/// bursts (figures in docs/benchmarks.md). Blocks of 128 KiB and more (the device table's arrays, their
/// copy-on-write copies during a state write) always get their own mapping, so freeing them
/// returns the memory at once; by default glibc raises that threshold after the first such
/// free and the next copies land in the heap, where only a trim gives them back.
/// The calls are CAmpelLinux's; with another C library they do nothing.
enum ProcessMemory {
    /// Caps the number of malloc arenas and fixes the mapping threshold; call before the
    /// daemon's threads start allocating.
    static func configureHeap(arenas: Int32 = 2, mmapThreshold: Int32 = 128 * 1024) {
        ampel_malloc_limit_arenas(arenas)
        ampel_malloc_fix_mmap_threshold(mmapThreshold)
    }

    /// Puts the calling thread in Linux's `SCHED_IDLE` class: it runs only on CPU time no
    /// normal thread wants, and a waking normal thread preempts it at once. For background work
    /// (the state writer). Unprivileged processes can enter it but not leave it, so only for
    /// threads that keep this role.
    static func lowerCurrentThreadToIdle() {
        _ = ampel_thread_use_idle_class()
    }

    /// Returns free heap pages to the system (after start-up and after large state writes),
    /// and stops counting the code pages that were used once: the static binary's code is
    /// 28 MB, of which start-up (the geometry index, the data, the HTTP server) touches 18 MB,
    /// each page mapped with its neighbours; the shared libraries' (libcurl and its TLS
    /// libraries) as well. Unmapped, they stay in the page cache, and the
    /// code the daemon runs from then on is mapped again at its first use (docs/DESIGN.md,
    /// decision 41).
    static func trim() {
        ampel_malloc_trim()
        _ = ampel_release_code_pages()
    }
}

#if canImport(Glibc)
import Glibc
#endif
import Foundation

extension ProcessMemory {
    /// The process's resident set in bytes (`/proc/self/statm`), `nil` where there is none.
    static func residentBytes() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
