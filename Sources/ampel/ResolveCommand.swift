import AmpelGeo
import ArgumentParser
import Foundation

/// `ampel resolve`: `lat,lon` lines on stdin to AGS lines on stdout, streaming.
///
/// One output line per input line, so outputs can be pasted next to inputs: the AGS, an empty
/// line for a position in no German district, or `error: line N: ...` for a line that is not a
/// valid position (written in place, so line numbers stay aligned). A count of bad lines goes to
/// stderr and the exit code is 1 if there was any. Input is read in 1 MiB chunks and output is
/// buffered, so memory stays constant however long the input is.
struct Resolve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Resolve 'lat,lon' lines from standard input to district AGS codes.",
        discussion: """
            Each output line is the 5-digit AGS, an empty line when the position is in no German \
            district, or 'error: line N: <reason>' for a malformed line or invalid coordinate. \
            The exit code is 1 if any line was malformed. Berlin answers 11000 (the geometry has \
            one Berlin district).

            Example:
              echo 48.1374,11.5755 | ampel resolve
            """
    )

    @Option(name: .long, help: "GeoJSON FeatureCollection of districts to use instead of the bundled BKG geometry.")
    var geometry: String?

    @Option(name: .long, help: "Property holding the district code in --geometry (default: ARS, RS, then AGS).")
    var codeProperty: String?

    func run() throws {
        let index: DistrictIndex
        do {
            if let path = geometry {
                let data = try Data(contentsOf: URL(fileURLWithPath: path))
                index = try DistrictIndex(geoJSON: data, codeProperty: codeProperty)
            } else {
                index = try DistrictIndex.bundled()
            }
        } catch let error as GeometryError {
            throw ValidationError("\(geometry ?? "bundled geometry"): \(error)")
        }
        var resolver = LineResolver(index: index)
        let input = FileHandle.standardInput
        while let chunk = try input.read(upToCount: 1 << 20), !chunk.isEmpty {
            try resolver.feed(chunk)
        }
        try resolver.finish()
        if resolver.malformed > 0 {
            FileHandle.standardError.write(Data("ampel resolve: \(resolver.malformed) of \(resolver.lineNumber) lines malformed\n".utf8))
            throw ExitCode(1)
        }
    }
}

/// The streaming core of `resolve`: splits chunks into lines, parses, looks up, buffers output.
struct LineResolver {
    let index: DistrictIndex
    private(set) var lineNumber = 0
    private(set) var malformed = 0
    /// The tail of the previous chunk that had no newline yet (bounded by `maxLine`).
    private var partial: [UInt8] = []
    private var partialTooLong = false
    private var out: [UInt8] = []
    static let maxLine = 4096
    static let flushAt = 1 << 16

    init(index: DistrictIndex) {
        self.index = index
        out.reserveCapacity(Self.flushAt + 256)
    }

    mutating func feed(_ chunk: Data) throws {
        try chunk.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            let bytes = raw.bindMemory(to: UInt8.self)
            var start = 0
            while let nl = bytes[start...].firstIndex(of: 10) {
                if partial.isEmpty && !partialTooLong {
                    handle(UnsafeBufferPointer(rebasing: bytes[start..<nl]), tooLong: false)
                } else {
                    appendPartial(UnsafeBufferPointer(rebasing: bytes[start..<nl]))
                    let tooLong = partialTooLong
                    let line = partial
                    partial.removeAll(keepingCapacity: true)
                    partialTooLong = false
                    line.withUnsafeBufferPointer { handle($0, tooLong: tooLong) }
                }
                start = nl + 1
                if out.count >= Self.flushAt { try flush() }
            }
            appendPartial(UnsafeBufferPointer(rebasing: bytes[start...]))
        }
    }

    /// Handles a last line without a trailing newline, then writes what is buffered.
    mutating func finish() throws {
        if !partial.isEmpty || partialTooLong {
            let line = partial, tooLong = partialTooLong
            partial = []
            line.withUnsafeBufferPointer { handle($0, tooLong: tooLong) }
        }
        try flush()
    }

    private mutating func appendPartial(_ bytes: UnsafeBufferPointer<UInt8>) {
        if partialTooLong { return }
        if partial.count + bytes.count > Self.maxLine {
            partialTooLong = true
            partial.removeAll()
        } else {
            partial.append(contentsOf: bytes)
        }
    }

    private mutating func flush() throws {
        guard !out.isEmpty else { return }
        try FileHandle.standardOutput.write(contentsOf: out)
        out.removeAll(keepingCapacity: true)
    }

    private mutating func handle(_ line: UnsafeBufferPointer<UInt8>, tooLong: Bool) {
        lineNumber += 1
        if tooLong { return fail("longer than \(Self.maxLine) bytes") }
        switch PositionParser.parse(line) {
        case .malformed(let reason):
            fail(reason)
        case .position(let lat, let lon):
            do throws(CoordinateError) {
                if let ags = try index.lookupAGS(latitude: lat, longitude: lon) { out.append(contentsOf: ags.utf8) }
                out.append(10)
            } catch {
                fail(error.description)
            }
        }
    }

    private mutating func fail(_ reason: String) {
        malformed += 1
        out.append(contentsOf: "error: line \(lineNumber): \(reason)\n".utf8)
    }
}

/// Parses `lat,lon` in decimal degrees (optional spaces, optional CR), without allocating.
enum PositionParser {
    enum Parsed {
        case position(Double, Double)
        case malformed(String)
    }
    static func parse(_ line: UnsafeBufferPointer<UInt8>) -> Parsed {
        var end = line.count
        if end > 0 && line[end - 1] == 13 { end -= 1 }
        guard let comma = line[0..<end].firstIndex(of: 44) else {
            return .malformed(end == 0 ? "empty line, expected 'lat,lon'" : "expected 'lat,lon', found no comma")
        }
        guard let lat = number(line, 0, comma) else { return .malformed("latitude is not a decimal number") }
        guard let lon = number(line, comma + 1, end) else { return .malformed("longitude is not a decimal number") }
        return .position(lat, lon)
    }

    /// A decimal number in bytes[from..<to], spaces around allowed; exact (correctly rounded).
    static func number(_ b: UnsafeBufferPointer<UInt8>, _ from: Int, _ to: Int) -> Double? {
        var i = from, j = to
        while i < j && (b[i] == 32 || b[i] == 9) { i += 1 }
        while j > i && (b[j - 1] == 32 || b[j - 1] == 9) { j -= 1 }
        guard i < j else { return nil }
        // Fast path: [-+]digits[.digits] with at most 15 significant digits is exact as m / 10^k.
        var k = i
        var negative = false
        if b[k] == 45 || b[k] == 43 { negative = b[k] == 45; k += 1 }
        var mantissa: UInt64 = 0
        var digits = 0, fraction = 0
        var seenDot = false, simple = true
        while k < j {
            let c = b[k]
            if c >= 48 && c <= 57 {
                mantissa = mantissa &* 10 &+ UInt64(c - 48)
                digits += 1
                if seenDot { fraction += 1 }
            } else if c == 46 && !seenDot {
                seenDot = true
            } else {
                simple = false
                break
            }
            k += 1
        }
        if simple && digits > 0 && digits <= 15 {
            let value = Double(mantissa) / powersOfTen[fraction]
            return negative ? -value : value
        }
        // Anything else (exponents, long digit strings): C's strtod on a NUL-terminated stack copy,
        // but only plain decimal text, so "nan", "inf" and hex floats stay malformed.
        for c in b[i..<j] where !(c >= 48 && c <= 57) && c != 46 && c != 45 && c != 43 && c != 101 && c != 69 {
            return nil
        }
        guard j - i < 64 else { return nil }
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buf -> Double? in
            for k in i..<j { buf[k - i] = CChar(bitPattern: b[k]) }
            buf[j - i] = 0
            var end: UnsafeMutablePointer<CChar>?
            let value = strtod(buf.baseAddress!, &end)
            guard let end, end - buf.baseAddress! == j - i, value.isFinite else { return nil }
            return value
        }
    }

    static let powersOfTen: [Double] = (0...15).map { p in (0..<p).reduce(1.0) { r, _ in r * 10 } }
}
