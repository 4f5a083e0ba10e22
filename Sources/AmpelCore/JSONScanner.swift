/// A small, validating JSON scanner that reports the members of the top-level object.
///
/// The lamp needs two or three fields from payloads it does not control (the daemon's
/// signal object, the bridge state). A full JSON decoder needs Foundation or allocates a
/// tree; this scanner walks the bytes once, iteratively (no recursion, so no stack blow-up
/// on deep nesting), validates the whole document, and hands out only what sits directly
/// in the top-level object. A `"phase"` inside a nested object, an array or a string is
/// never reported. Any byte sequence is safe input: malformed documents throw, they never
/// trap and never loop.
///
/// Embedded Swift: no Foundation, no existentials, typed throws.
public enum JSONScanner {
    /// Nesting deeper than this is refused; the lamp's payloads are two levels deep.
    public static let maximumDepth = 32
    /// Documents longer than this are refused before scanning.
    public static let maximumLength = 16 * 1024

    /// Calls `member` for each member of the top-level object, in document order.
    ///
    /// The whole document is validated; `member` may already have been called when a
    /// later error is found, so callers collect into locals and commit only when this
    /// returns without throwing.
    ///
    /// - Parameters:
    ///   - bytes: The document. Leading and trailing JSON white space is allowed.
    ///   - maximumLength: Longer documents are refused unread.
    ///   - member: Receives the decoded key and a summary of the value.
    public static func scanTopLevel<Bytes: RandomAccessCollection>(
        _ bytes: Bytes,
        maximumLength: Int = JSONScanner.maximumLength,
        _ member: (JSONText, JSONValue) -> Void
    ) throws(JSONScanError) where Bytes.Element == UInt8, Bytes.Index == Int {
        try scan(bytes, maximumLength: maximumLength, member)
    }

    /// ``scanTopLevel(_:maximumLength:_:)`` for a byte array, specialised in this module: called
    /// from another module, the generic one runs unspecialised, through witness tables for every
    /// byte (the daemon's input parser, on each fix: `Cursor.peek` alone was 1.2 % of its CPU).
    public static func scanTopLevel(
        _ bytes: [UInt8],
        maximumLength: Int = JSONScanner.maximumLength,
        _ member: (JSONText, JSONValue) -> Void
    ) throws(JSONScanError) {
        try scan(bytes, maximumLength: maximumLength, member)
    }

    // Named, since the optimizer left it generic even for the concrete call above.
    @_specialize(where Bytes == [UInt8])
    static func scan<Bytes: RandomAccessCollection>(
        _ bytes: Bytes,
        maximumLength: Int,
        _ member: (JSONText, JSONValue) -> Void
    ) throws(JSONScanError) where Bytes.Element == UInt8, Bytes.Index == Int {
        guard bytes.count <= maximumLength else { throw .tooLong }
        var cursor = Cursor(bytes: bytes, position: bytes.startIndex)
        cursor.skipWhiteSpace()
        guard cursor.peek() == ascii("{") else { throw .notAnObject }

        // Containers open around the cursor: true for an object, false for an array.
        var stack: [Bool] = []
        var expect = Expect.value
        var pendingKey: JSONText? = nil

        while true {
            cursor.skipWhiteSpace()
            guard let byte = cursor.peek() else { throw .malformed(at: cursor.position) }
            switch expect {
            case .value, .valueOrClose:
                if expect == .valueOrClose, byte == ascii("]") {
                    cursor.advance()
                    stack.removeLast()
                    expect = .commaOrClose
                    if stack.isEmpty { return try cursor.finish() }
                    continue
                }
                let atTop = stack.count == 1
                switch byte {
                case ascii("{"), ascii("["):
                    let isObject = byte == ascii("{")
                    if atTop, let key = pendingKey { member(key, isObject ? .object : .array) }
                    guard stack.count < maximumDepth else { throw .tooDeep }
                    stack.append(isObject)
                    cursor.advance()
                    expect = isObject ? .keyOrClose : .valueOrClose
                default:
                    let value = try cursor.scalar(byte)
                    if atTop, let key = pendingKey { member(key, value) }
                    expect = .commaOrClose
                }
                pendingKey = nil
            case .key, .keyOrClose:
                if expect == .keyOrClose, byte == ascii("}") {
                    cursor.advance()
                    stack.removeLast()
                    expect = .commaOrClose
                    if stack.isEmpty { return try cursor.finish() }
                    continue
                }
                guard byte == ascii("\"") else { throw .malformed(at: cursor.position) }
                let key = try cursor.string(at: cursor.position)
                cursor.skipWhiteSpace()
                guard cursor.peek() == ascii(":") else { throw .malformed(at: cursor.position) }
                cursor.advance()
                pendingKey = stack.count == 1 ? key : nil
                expect = .value
            case .commaOrClose:
                guard let isObject = stack.last else { throw .malformed(at: cursor.position) }
                if byte == ascii(",") {
                    cursor.advance()
                    expect = isObject ? .key : .value
                } else if byte == (isObject ? ascii("}") : ascii("]")) {
                    cursor.advance()
                    stack.removeLast()
                    if stack.isEmpty { return try cursor.finish() }
                } else {
                    throw .malformed(at: cursor.position)
                }
            }
        }
    }

    private enum Expect: Equatable {
        case value, valueOrClose, key, keyOrClose, commaOrClose
    }

    private struct Cursor<Bytes: RandomAccessCollection> where Bytes.Element == UInt8, Bytes.Index == Int {
        let bytes: Bytes
        var position: Int

        /// The string, literal or number that starts with `byte` at the cursor, read past.
        /// Inlined: the scan's loop runs once per token of every location message.
        @inline(__always)
        mutating func scalar(_ byte: UInt8) throws(JSONScanError) -> JSONValue {
            switch byte {
            case ascii("\""):
                return .string(try string(at: position))
            case ascii("t"):
                try literal("true")
                return .bool(true)
            case ascii("f"):
                try literal("false")
                return .bool(false)
            case ascii("n"):
                try literal("null")
                return .null
            case ascii("-"), ascii("0")...ascii("9"):
                let start = position
                try number()
                return .number(JSONNumber(start: start, end: position))
            default:
                throw .malformed(at: position)
            }
        }

        func peek() -> UInt8? {
            position < bytes.endIndex ? bytes[position] : nil
        }

        mutating func advance() { position += 1 }

        mutating func skipWhiteSpace() {
            while let byte = peek(), byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D {
                position += 1
            }
        }

        /// Only white space may follow the top-level object.
        mutating func finish() throws(JSONScanError) {
            skipWhiteSpace()
            if position != bytes.endIndex { throw .malformed(at: position) }
        }

        mutating func literal(_ word: StaticString) throws(JSONScanError) {
            let start = word.utf8Start
            for offset in 0..<word.utf8CodeUnitCount {
                guard peek() == start[offset] else { throw .malformed(at: position) }
                position += 1
            }
        }

        /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
        mutating func number() throws(JSONScanError) {
            if peek() == ascii("-") { position += 1 }
            guard let first = peek(), isDigit(first) else { throw .malformed(at: position) }
            position += 1
            if first != ascii("0") {
                while let byte = peek(), isDigit(byte) { position += 1 }
            }
            if peek() == ascii(".") {
                position += 1
                try digits()
            }
            if let byte = peek(), byte == ascii("e") || byte == ascii("E") {
                position += 1
                if let sign = peek(), sign == ascii("+") || sign == ascii("-") { position += 1 }
                try digits()
            }
        }

        private mutating func digits() throws(JSONScanError) {
            guard let byte = peek(), isDigit(byte) else { throw .malformed(at: position) }
            while let byte = peek(), isDigit(byte) { position += 1 }
        }

        /// Reads a string starting at its opening quote; decodes escapes into a capped text.
        mutating func string(at start: Int) throws(JSONScanError) -> JSONText {
            position = start + 1
            var text = JSONText()
            while true {
                guard let byte = peek() else { throw .malformed(at: position) }
                position += 1
                switch byte {
                case ascii("\""):
                    return text
                case ascii("\\"):
                    guard let escape = peek() else { throw .malformed(at: position) }
                    position += 1
                    switch escape {
                    case ascii("\""), ascii("\\"), ascii("/"): text.append(escape)
                    case ascii("b"): text.append(0x08)
                    case ascii("f"): text.append(0x0C)
                    case ascii("n"): text.append(0x0A)
                    case ascii("r"): text.append(0x0D)
                    case ascii("t"): text.append(0x09)
                    case ascii("u"): try unicodeEscape(into: &text)
                    default: throw .malformed(at: position - 1)
                    }
                case 0x00..<0x20:
                    // Raw control characters are not allowed inside JSON strings.
                    throw .malformed(at: position - 1)
                case 0x20..<0x80:
                    text.append(byte)
                default:
                    try utf8Sequence(lead: byte, into: &text)
                }
            }
        }

        /// A multi-byte UTF-8 sequence after its lead byte: no overlong forms, no
        /// surrogates, nothing above U+10FFFF (JSON text is UTF-8, RFC 8259).
        private mutating func utf8Sequence(lead: UInt8, into text: inout JSONText) throws(JSONScanError) {
            let at = position - 1
            var count: Int
            var lower: UInt8 = 0x80
            var upper: UInt8 = 0xBF
            switch lead {
            case 0xC2...0xDF: count = 1
            case 0xE0: count = 2; lower = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: count = 2
            case 0xED: count = 2; upper = 0x9F
            case 0xF0: count = 3; lower = 0x90
            case 0xF1...0xF3: count = 3
            case 0xF4: count = 3; upper = 0x8F
            default: throw .malformed(at: at)
            }
            text.append(lead)
            while count > 0 {
                guard let byte = peek(), byte >= lower, byte <= upper else { throw .malformed(at: at) }
                text.append(byte)
                position += 1
                lower = 0x80
                upper = 0xBF
                count -= 1
            }
        }

        private mutating func hex4() throws(JSONScanError) -> UInt32 {
            var value: UInt32 = 0
            for _ in 0..<4 {
                guard let byte = peek(), let nibble = hexNibble(byte) else { throw .malformed(at: position) }
                value = value << 4 | UInt32(nibble)
                position += 1
            }
            return value
        }

        /// After `\u`: one code unit, or a surrogate pair; a lone surrogate is malformed.
        private mutating func unicodeEscape(into text: inout JSONText) throws(JSONScanError) {
            var scalar = try hex4()
            if scalar >= 0xD800, scalar < 0xDC00 {
                // A high surrogate wants `\uDC00`...`\uDFFF` right behind it.
                guard peek() == ascii("\\") else { throw .malformed(at: position) }
                position += 1
                guard peek() == ascii("u") else { throw .malformed(at: position) }
                position += 1
                let low = try hex4()
                guard low >= 0xDC00, low < 0xE000 else { throw .malformed(at: position) }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if scalar >= 0xDC00, scalar < 0xE000 {
                throw .malformed(at: position)
            }
            text.appendScalar(scalar)
        }
    }
}

/// Why a document was refused.
public enum JSONScanError: Error, Sendable, Equatable {
    /// The document does not start with `{` (after white space).
    case notAnObject
    /// Not JSON at this byte offset (or the document ends early).
    case malformed(at: Int)
    /// Nesting deeper than ``JSONScanner/maximumDepth``.
    case tooDeep
    /// Longer than ``JSONScanner/maximumLength``.
    case tooLong
}

/// A decoded JSON string, kept only up to a short capacity.
///
/// The lamp compares keys and values with short ASCII words; longer text can never match,
/// so it is not kept (``isTruncated`` tells).
public struct JSONText: Sendable, Equatable {
    /// Bytes kept beyond this are dropped and the text marked truncated.
    public static let capacity = 32

    /// The decoded UTF-8 bytes, at most ``capacity``.
    public private(set) var utf8: [UInt8] = []
    /// Whether the string was longer than ``capacity``.
    public private(set) var isTruncated = false

    public init() {}

    /// Builds a text from bytes (for tests and comparisons).
    public init<Bytes: Sequence>(utf8 bytes: Bytes) where Bytes.Element == UInt8 {
        for byte in bytes { append(byte) }
    }

    mutating func append(_ byte: UInt8) {
        if utf8.count < JSONText.capacity { utf8.append(byte) } else { isTruncated = true }
    }

    mutating func appendScalar(_ scalar: UInt32) {
        switch scalar {
        case 0..<0x80:
            append(UInt8(scalar))
        case 0x80..<0x800:
            append(UInt8(0xC0 | (scalar >> 6)))
            append(UInt8(0x80 | (scalar & 0x3F)))
        case 0x800..<0x10000:
            append(UInt8(0xE0 | (scalar >> 12)))
            append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            append(UInt8(0x80 | (scalar & 0x3F)))
        default:
            append(UInt8(0xF0 | (scalar >> 18)))
            append(UInt8(0x80 | ((scalar >> 12) & 0x3F)))
            append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            append(UInt8(0x80 | (scalar & 0x3F)))
        }
    }

    /// Whether this text is exactly `literal` (a truncated text never is).
    public func equals(_ literal: StaticString) -> Bool {
        guard !isTruncated, utf8.count == literal.utf8CodeUnitCount else { return false }
        let start = literal.utf8Start
        for index in 0..<utf8.count where utf8[index] != start[index] {
            return false
        }
        return true
    }
}

/// What a top-level member's value is; strings carry their (capped) text, numbers where
/// their text lies in the document.
public enum JSONValue: Sendable, Equatable {
    case string(JSONText)
    case number(JSONNumber)
    case bool(Bool)
    case null
    case object
    case array
}

/// A number member: its text is `bytes[start..<end]` of the scanned document, already
/// checked against the JSON number grammar (convert it where floating-point parsing exists).
public struct JSONNumber: Sendable, Equatable {
    public let start: Int
    public let end: Int

    public init(start: Int, end: Int) {
        self.start = start
        self.end = end
    }
}

@inline(__always)
func ascii(_ scalar: Unicode.Scalar) -> UInt8 { UInt8(ascii: scalar) }

@inline(__always)
func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

func hexNibble(_ byte: UInt8) -> UInt8? {
    switch byte {
    case 0x30...0x39: byte - 0x30
    case 0x41...0x46: byte - 0x41 + 10
    case 0x61...0x66: byte - 0x61 + 10
    default: nil
    }
}
