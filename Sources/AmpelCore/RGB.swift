/// A 24-bit colour, written `#RRGGBB` on the wire and in rule sets.
///
/// Part of the Embedded Swift core: parsing and formatting work on bytes.
public struct RGB: Sendable, Hashable {
    public var red: UInt8
    public var green: UInt8
    public var blue: UInt8

    public init(red: UInt8, green: UInt8, blue: UInt8) {
        self.red = red
        self.green = green
        self.blue = blue
    }

    /// Parses exactly `#RRGGBB` (hex digits in either case); anything else answers `nil`.
    public init?<Bytes: Collection>(hexUTF8 bytes: Bytes) where Bytes.Element == UInt8 {
        guard bytes.count == 7 else { return nil }
        var iterator = bytes.makeIterator()
        guard iterator.next() == UInt8(ascii: "#") else { return nil }
        var values: (UInt8, UInt8, UInt8) = (0, 0, 0)
        for channel in 0..<3 {
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                return nil
            }
            let value = high << 4 | low
            switch channel {
            case 0: values.0 = value
            case 1: values.1 = value
            default: values.2 = value
            }
        }
        self.init(red: values.0, green: values.1, blue: values.2)
    }

    /// Parses exactly `#RRGGBB`.
    public init?(hex: String) {
        self.init(hexUTF8: hex.utf8)
    }

    /// The seven bytes of `#RRGGBB`, upper-case.
    public var hexUTF8: [UInt8] {
        [UInt8(ascii: "#"),
         hexDigit(red >> 4), hexDigit(red & 0xF),
         hexDigit(green >> 4), hexDigit(green & 0xF),
         hexDigit(blue >> 4), hexDigit(blue & 0xF)]
    }

    /// `#RRGGBB`, upper-case.
    public var hex: String {
        String(decoding: hexUTF8, as: UTF8.self)
    }

    public static let off = RGB(red: 0, green: 0, blue: 0)
}

@inlinable
func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
}

@inlinable
func hexDigit(_ nibble: UInt8) -> UInt8 {
    nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "A") + nibble - 10
}
