import CMallocStats
#if canImport(Glibc)
import Glibc
#endif

/// A `kB` field of /proc/self/status (`VmRSS`, `RssAnon`, `RssFile`), or -1.
public func statusKiB(_ field: String) -> Int {
    guard let file = fopen("/proc/self/status", "r") else { return -1 }
    defer { fclose(file) }
    var line: UnsafeMutablePointer<CChar>?
    var capacity = 0
    defer { free(line) }
    while getline(&line, &capacity, file) > 0, let line {
        let text = String(cString: line)
        if text.hasPrefix(field + ":") { return Int(String(text.dropFirst(field.count + 1).filter(\.isNumber))) ?? -1 }
    }
    return -1
}

/// The three resident-memory figures as `VmRSS=… RssAnon=… RssFile=…` (kB), for run.sh.
public func residentLine() -> String {
    ["VmRSS", "RssAnon", "RssFile"].map { "\($0)=\(statusKiB($0))" }.joined(separator: " ")
}

/// Bytes the program holds from malloc: small chunks in the arenas plus mmapped large ones.
public func heapBytes() -> Int {
    Int(malloc_bytes_in_use())
}
