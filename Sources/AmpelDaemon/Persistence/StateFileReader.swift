import AmpelDomain
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Reads `state.json` in one pass over its bytes, straight into the ``DeviceTable``.
///
/// `JSONDecoder` took 13 s and several times the file's size in memory for 1,000,000 devices
/// (a 214 MB file): it builds a dictionary of every record first, with every string of every
/// record allocated on its own. Here a device costs one string (its key): its district, phase
/// and data day are looked up by their bytes among the few hundred distinct ones the file
/// holds. The reader accepts any valid JSON of the file's shape (members in any order,
/// white space, escapes; members it does not know are skipped) and refuses what `JSONDecoder`
/// refused (malformed JSON, a missing `version`, `districts` or `devices`, a record without a
/// position, time, phase or data day, wrong types), with the byte offset of the fault. The
/// journal mark, a few numbers and the alerts awaiting an acknowledgement, is small and keeps
/// its `Codable` form.
struct StateFileReader {
    struct Failure: Error, CustomStringConvertible {
        let offset: Int
        let reason: String
        var description: String { "at byte \(offset): \(reason)" }
    }

    /// Reads a whole state file.
    static func read(_ data: Data) throws(Failure) -> PersistedState {
        let result: Result<PersistedState, Failure> = data.withUnsafeBytes { raw in
            guard let base = raw.bindMemory(to: UInt8.self).baseAddress, !raw.isEmpty else {
                return .failure(Failure(offset: 0, reason: "the file is empty"))
            }
            var reader = StateFileReader(base: base, end: raw.count)
            do throws(Failure) { return .success(try reader.document()) } catch { return .failure(error) }
        }
        return try result.get()
    }

    private let base: UnsafePointer<UInt8>
    private let end: Int
    private var position = 0
    /// The distinct districts, phases and data days met so far, by their bytes in the file.
    private var districts: [Bytes: Signal.DistrictRef] = [:]
    private var texts: [Bytes: String] = [:]
    /// Nesting of skipped values, at most (the file's own values are three levels deep).
    private static let maximumDepth = 64

    private init(base: UnsafePointer<UInt8>, end: Int) {
        self.base = base
        self.end = end
    }

    /// A run of the file's bytes, hashed and compared by content (valid while reading).
    private struct Bytes: Hashable {
        let start: UnsafePointer<UInt8>
        let count: Int

        static func == (lhs: Bytes, rhs: Bytes) -> Bool {
            lhs.count == rhs.count && memcmp(lhs.start, rhs.start, lhs.count) == 0
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(bytes: UnsafeRawBufferPointer(start: start, count: count))
        }

        func equals(_ ascii: StaticString) -> Bool {
            count == ascii.utf8CodeUnitCount && memcmp(start, ascii.utf8Start, count) == 0
        }
    }

    // MARK: The file's shape

    private mutating func document() throws(Failure) -> PersistedState {
        var state = PersistedState()
        var seen = (version: false, districts: false, devices: false)
        try object { reader, key throws(Failure) in
            if key.equals("version") {
                state.version = try reader.integer()
                seen.version = true
            } else if key.equals("districts") {
                state.districts = try reader.districtPhases()
                seen.districts = true
            } else if key.equals("devices") {
                state.devices = try reader.devices()
                seen.devices = true
            } else if key.equals("journal") {
                state.journal = try reader.journalMark()
            } else {
                try reader.skipValue(depth: 0)
            }
        }
        skipWhiteSpace()
        guard position == end else { throw fail("content after the state object") }
        guard seen.version else { throw Failure(offset: 0, reason: "no \"version\"") }
        guard seen.districts else { throw Failure(offset: 0, reason: "no \"districts\"") }
        guard seen.devices else { throw Failure(offset: 0, reason: "no \"devices\"") }
        return state
    }

    private mutating func districtPhases() throws(Failure) -> [String: String] {
        var phases: [String: String] = [:]
        try object { reader, key throws(Failure) in
            phases[try reader.text(key)] = try reader.internedString()
        }
        return phases
    }

    private mutating func devices() throws(Failure) -> DeviceTable {
        var table = DeviceTable()
        try object { reader, key throws(Failure) in
            let name = try reader.text(key)
            table[name] = try reader.record()
        }
        return table
    }

    private mutating func record() throws(Failure) -> DeviceRecord {
        let start = position
        var lat: Double?, lon: Double?, tst: Int?, phase: String?, dataDate: String?, stale: Bool?
        var lang: String?, district: Signal.DistrictRef?, owntracks: Bool?, announced: Bool?
        try object { reader, key throws(Failure) in
            if key.equals("lat") {
                lat = try reader.double()
            } else if key.equals("lon") {
                lon = try reader.double()
            } else if key.equals("tst") {
                tst = try reader.integer()
            } else if key.equals("lang") {
                lang = try reader.nullOr { reader throws(Failure) in try reader.internedString() }
            } else if key.equals("district") {
                district = try reader.nullOr { reader throws(Failure) in try reader.districtRef() }
            } else if key.equals("phase") {
                phase = try reader.internedString()
            } else if key.equals("dataDate") {
                dataDate = try reader.internedString()
            } else if key.equals("stale") {
                stale = try reader.bool()
            } else if key.equals("owntracks") {
                owntracks = try reader.nullOr { reader throws(Failure) in try reader.bool() }
            } else if key.equals("announced") {
                announced = try reader.nullOr { reader throws(Failure) in try reader.bool() }
            } else {
                try reader.skipValue(depth: 0)
            }
        }
        guard let lat, let lon, let tst, let phase, let dataDate, let stale else {
            throw Failure(offset: start, reason: "a device record without lat, lon, tst, phase, dataDate or stale")
        }
        return DeviceRecord(lat: lat, lon: lon, tst: tst, lang: lang, district: district, phase: phase, dataDate: dataDate, stale: stale,
                            owntracks: owntracks ?? false, announced: announced ?? true)
    }

    /// A district object; the same bytes again give the same (shared) value without parsing.
    private mutating func districtRef() throws(Failure) -> Signal.DistrictRef {
        let start = position
        try skipValue(depth: 0)
        let bytes = Bytes(start: base + start, count: position - start)
        if let known = districts[bytes] { return known }
        let after = position
        position = start
        var ags: String?, name: String?, state: String?, type: String?
        try object { reader, key throws(Failure) in
            if key.equals("ags") {
                ags = try reader.internedString()
            } else if key.equals("name") {
                name = try reader.internedString()
            } else if key.equals("state") {
                state = try reader.internedString()
            } else if key.equals("type") {
                type = try reader.nullOr { reader throws(Failure) in try reader.internedString() }
            } else {
                try reader.skipValue(depth: 0)
            }
        }
        position = after
        guard let ags, let name, let state else { throw Failure(offset: start, reason: "a district without ags, name or state") }
        let district = Signal.DistrictRef(ags: ags, name: name, state: state, type: type)
        districts[bytes] = district
        return district
    }

    private mutating func journalMark() throws(Failure) -> JournalMark? {
        let start = position
        try skipValue(depth: 0)
        let bytes = Data(bytes: base + start, count: position - start)
        do {
            return try JSONDecoder().decode(JournalMark?.self, from: bytes)
        } catch {
            throw Failure(offset: start, reason: "the journal mark: \(error)")
        }
    }

    // MARK: JSON

    /// Reads an object's members; `member` must read the value that follows its key.
    private mutating func object(_ member: (inout StateFileReader, Bytes) throws(Failure) -> Void) throws(Failure) {
        skipWhiteSpace()
        try expect(UInt8(ascii: "{"))
        skipWhiteSpace()
        if peek() == UInt8(ascii: "}") {
            position += 1
            return
        }
        while true {
            skipWhiteSpace()
            let key = try rawString()
            skipWhiteSpace()
            try expect(UInt8(ascii: ":"))
            skipWhiteSpace()
            try member(&self, key)
            skipWhiteSpace()
            guard let byte = peek() else { throw fail("the object is not closed") }
            position += 1
            if byte == UInt8(ascii: "}") { return }
            guard byte == UInt8(ascii: ",") else { throw Failure(offset: position - 1, reason: "expected ',' or '}'") }
        }
    }

    private mutating func nullOr<T>(_ value: (inout StateFileReader) throws(Failure) -> T) throws(Failure) -> T? {
        skipWhiteSpace()
        if peek() == UInt8(ascii: "n") {
            try literal("null")
            return nil
        }
        return try value(&self)
    }

    /// A string as it stands in the file, between its quotes (escapes not decoded yet).
    private mutating func rawString() throws(Failure) -> Bytes {
        try expect(UInt8(ascii: "\""))
        let start = position
        while position < end {
            let byte = base[position]
            if byte == UInt8(ascii: "\"") {
                position += 1
                return Bytes(start: base + start, count: position - 1 - start)
            }
            if byte == UInt8(ascii: "\\") {
                position += 2
                continue
            }
            if byte < 0x20 { throw fail("a control character in a string") }
            position += 1
        }
        throw Failure(offset: start - 1, reason: "the string is not closed")
    }

    /// The string whose raw bytes are `raw`, escapes decoded, UTF-8 checked.
    private func text(_ raw: Bytes) throws(Failure) -> String {
        let offset = raw.start - base
        if memchr(raw.start, Int32(UInt8(ascii: "\\")), raw.count) == nil {
            guard let text = String(validating: UnsafeBufferPointer(start: raw.start, count: raw.count), as: UTF8.self) else {
                throw Failure(offset: offset, reason: "a string that is not UTF-8")
            }
            return text
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(raw.count)
        var index = 0
        while index < raw.count {
            let byte = raw.start[index]
            index += 1
            guard byte == UInt8(ascii: "\\") else {
                bytes.append(byte)
                continue
            }
            guard index < raw.count else { throw Failure(offset: offset + index, reason: "a cut escape") }
            let escape = raw.start[index]
            index += 1
            switch escape {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): bytes.append(escape)
            case UInt8(ascii: "b"): bytes.append(0x08)
            case UInt8(ascii: "f"): bytes.append(0x0C)
            case UInt8(ascii: "n"): bytes.append(0x0A)
            case UInt8(ascii: "r"): bytes.append(0x0D)
            case UInt8(ascii: "t"): bytes.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4(raw, &index)
                if (0xD800..<0xDC00).contains(scalar) {
                    guard index + 1 < raw.count, raw.start[index] == UInt8(ascii: "\\"), raw.start[index + 1] == UInt8(ascii: "u") else {
                        throw Failure(offset: offset + index, reason: "a lone surrogate")
                    }
                    index += 2
                    let low = try hex4(raw, &index)
                    guard (0xDC00..<0xE000).contains(low) else { throw Failure(offset: offset + index, reason: "a lone surrogate") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00..<0xE000).contains(scalar) {
                    throw Failure(offset: offset + index, reason: "a lone surrogate")
                }
                guard let unicode = Unicode.Scalar(scalar) else { throw Failure(offset: offset + index, reason: "an invalid escape") }
                bytes.append(contentsOf: UTF8.encode(unicode)!)
            default:
                throw Failure(offset: offset + index - 1, reason: "an invalid escape")
            }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw Failure(offset: offset, reason: "a string that is not UTF-8") }
        return text
    }

    private func hex4(_ raw: Bytes, _ index: inout Int) throws(Failure) -> UInt32 {
        guard index + 4 <= raw.count else { throw Failure(offset: raw.start - base + index, reason: "a cut \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = raw.start[index]
            index += 1
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw Failure(offset: raw.start - base + index - 1, reason: "an invalid \\u escape")
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    /// A string value, shared with every equal one in the file (phases, days, names).
    private mutating func internedString() throws(Failure) -> String {
        let raw = try rawString()
        if let known = texts[raw] { return known }
        let value = try text(raw)
        texts[raw] = value
        return value
    }

    /// The extent of a number token: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    private mutating func numberToken() throws(Failure) -> (start: Int, integral: Bool) {
        let start = position
        var integral = true
        if peek() == UInt8(ascii: "-") { position += 1 }
        guard let first = peek(), isDigit(first) else { throw Failure(offset: start, reason: "expected a number") }
        position += 1
        if first != UInt8(ascii: "0") { while let byte = peek(), isDigit(byte) { position += 1 } }
        if peek() == UInt8(ascii: ".") {
            integral = false
            position += 1
            try digits()
        }
        if let byte = peek(), byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
            integral = false
            position += 1
            if let sign = peek(), sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") { position += 1 }
            try digits()
        }
        return (start, integral)
    }

    private mutating func digits() throws(Failure) {
        guard let byte = peek(), isDigit(byte) else { throw fail("expected a digit") }
        while let byte = peek(), isDigit(byte) { position += 1 }
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private mutating func double() throws(Failure) -> Double {
        let (start, _) = try numberToken()
        let length = position - start
        // strtod needs a terminated string; a JSON number is short (a longer one is copied whole).
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: length + 1) { buffer in
            for index in 0..<length { buffer[index] = CChar(bitPattern: base[start + index]) }
            buffer[length] = 0
            return strtod(buffer.baseAddress!, nil)
        }
    }

    private mutating func integer() throws(Failure) -> Int {
        let (start, integral) = try numberToken()
        guard integral else { throw Failure(offset: start, reason: "expected a whole number") }
        var index = start
        let negative = base[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        var value = 0
        while index < position {
            let (times, overflowA) = value.multipliedReportingOverflow(by: 10)
            let digit = Int(base[index] - UInt8(ascii: "0"))
            let (sum, overflowB) = negative ? times.subtractingReportingOverflow(digit) : times.addingReportingOverflow(digit)
            guard !overflowA, !overflowB else { throw Failure(offset: start, reason: "a number too large") }
            value = sum
            index += 1
        }
        return value
    }

    private mutating func bool() throws(Failure) -> Bool {
        if peek() == UInt8(ascii: "t") {
            try literal("true")
            return true
        }
        try literal("false")
        return false
    }

    /// Skips one value of any kind, checking that it is valid JSON.
    private mutating func skipValue(depth: Int) throws(Failure) {
        guard depth < Self.maximumDepth else { throw fail("nested too deep") }
        skipWhiteSpace()
        guard let byte = peek() else { throw fail("expected a value") }
        switch byte {
        case UInt8(ascii: "{"):
            try object { reader, key throws(Failure) in
                _ = try reader.text(key)
                try reader.skipValue(depth: depth + 1)
            }
        case UInt8(ascii: "["):
            position += 1
            skipWhiteSpace()
            if peek() == UInt8(ascii: "]") {
                position += 1
                return
            }
            while true {
                try skipValue(depth: depth + 1)
                skipWhiteSpace()
                guard let next = peek() else { throw fail("the array is not closed") }
                position += 1
                if next == UInt8(ascii: "]") { return }
                guard next == UInt8(ascii: ",") else { throw Failure(offset: position - 1, reason: "expected ',' or ']'") }
            }
        case UInt8(ascii: "\""):
            _ = try text(try rawString())
        case UInt8(ascii: "t"): try literal("true")
        case UInt8(ascii: "f"): try literal("false")
        case UInt8(ascii: "n"): try literal("null")
        default: _ = try numberToken()
        }
    }

    private mutating func literal(_ word: StaticString) throws(Failure) {
        let count = word.utf8CodeUnitCount
        guard position + count <= end, memcmp(base + position, word.utf8Start, count) == 0 else {
            throw fail("expected \(word)")
        }
        position += count
    }

    private mutating func expect(_ byte: UInt8) throws(Failure) {
        guard peek() == byte else { throw fail("expected '\(Character(Unicode.Scalar(byte)))'") }
        position += 1
    }

    private func peek() -> UInt8? { position < end ? base[position] : nil }

    private mutating func skipWhiteSpace() {
        while position < end {
            let byte = base[position]
            guard byte == 0x20 || byte == 0x0A || byte == 0x09 || byte == 0x0D else { return }
            position += 1
        }
    }

    private func fail(_ reason: String) -> Failure { Failure(offset: position, reason: reason) }
}
