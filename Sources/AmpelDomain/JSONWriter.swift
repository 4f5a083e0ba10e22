/// Writes compact JSON straight into bytes, exactly as ``AmpelJSON`` (`JSONEncoder` with
/// sorted keys and unescaped slashes) writes the same values.
///
/// The daemon writes a signal object for every location it accepts; `JSONEncoder` builds a
/// tree of boxed values for each, which would cost more than all the rest of the daemon's
/// work on a fix. Callers write keys in sorted (byte) order themselves. The output is checked
/// byte for byte against `JSONEncoder` in the tests (`JSONWriterTests`).
public struct JSONWriter: Sendable {
    public private(set) var bytes: [UInt8]

    public init(capacity: Int = 1024) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Appends text that is already JSON (punctuation, a key with its quotes and colon).
    public mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// Appends text that is already JSON.
    public mutating func raw(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }

    /// Appends UTF-8 that is already JSON (a document another writer made).
    public mutating func raw(_ json: [UInt8]) {
        bytes.append(contentsOf: json)
    }

    /// Empties the output, keeping its capacity (for writing a large document in chunks).
    public mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
    }

    /// A JSON string: `"`, `\` and control characters escaped, `/` and non-ASCII as they are.
    public mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var start = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
                start = index + 1
                bytes.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                default:
                    let hex: [UInt8] = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    public mutating func string(_ text: String?) {
        optional(text) { $0.string($1) }
    }

    /// A finite number in its shortest round-trip form, without a trailing `.0`
    /// (`23`, `0.1`, `1e-07`, `1.2345678901234568e+16`).
    public mutating func number(_ value: Double) {
        guard value.isFinite else { return null() }  // never held: inputs and data are checked
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        text.withUTF8 { bytes.append(contentsOf: $0) }
    }

    public mutating func number(_ value: Double?) {
        optional(value) { $0.number($1) }
    }

    public mutating func number(_ value: Int) {
        var text = String(value)
        text.withUTF8 { bytes.append(contentsOf: $0) }
    }

    public mutating func bool(_ value: Bool) {
        if value { raw("true") } else { raw("false") }
    }

    public mutating func null() {
        raw("null")
    }

    /// `null` for `nil`, else what `write` writes: the one place Ampel's payloads and state
    /// file spell an absent value, so every key is always present.
    public mutating func optional<Value>(_ value: Value?, _ write: (inout JSONWriter, Value) -> Void) {
        if let value { write(&self, value) } else { null() }
    }

    /// `["a","b"]`.
    public mutating func strings(_ values: [String]) {
        bytes.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            string(value)
        }
        bytes.append(UInt8(ascii: "]"))
    }
}

extension Signal.DistrictRef {
    /// `{"ags","name","state","type"}`, `type` `null` when unknown.
    public func write(to json: inout JSONWriter) {
        json.raw(#"{"ags":"#)
        json.string(ags)
        json.raw(#","name":"#)
        json.string(name)
        json.raw(#","state":"#)
        json.string(state)
        json.raw(#","type":"#)
        json.string(type)
        json.raw("}")
    }
}

extension IndicatorReading {
    /// `{"date","decisive","level","name","region","value"}`, `date` and `value` `null` without a value.
    public func write(to json: inout JSONWriter) {
        json.raw(#"{"date":"#)
        json.string(value.date?.iso)
        json.raw(#","decisive":"#)
        json.bool(decisive)
        json.raw(#","level":"#)
        json.string(level.rawValue)
        json.raw(#","name":"#)
        json.string(name.rawValue)
        json.raw(#","region":"#)
        json.string(value.region)
        json.raw(#","value":"#)
        json.number(value.value)
        json.raw("}")
    }
}

extension IndicatorValue {
    /// `{"date","level","name","region","value"}`; with `series`, its values over the last days
    /// (`"series"` before `"value"`), as the state reports carry them.
    public func write(to json: inout JSONWriter, series: [Double?]? = nil) {
        json.raw(#"{"date":"#)
        json.string(date?.iso)
        json.raw(#","level":"#)
        json.string(key.level.rawValue)
        json.raw(#","name":"#)
        json.string(key.name.rawValue)
        json.raw(#","region":"#)
        json.string(region)
        if let series {
            json.raw(#","series":["#)
            for (day, point) in series.enumerated() {
                if day > 0 { json.raw(",") }
                json.number(point)
            }
            json.raw("]")
        }
        json.raw(#","value":"#)
        json.number(value)
        json.raw("}")
    }
}

extension JSONWriter {
    /// A signal's `indicators` array.
    public mutating func readings(_ readings: [IndicatorReading]) {
        raw("[")
        for (index, reading) in readings.enumerated() {
            if index > 0 { raw(",") }
            reading.write(to: &self)
        }
        raw("]")
    }
}

extension Trend {
    /// `{"change7","direction","series"}`.
    public func write(to json: inout JSONWriter) {
        json.raw(#"{"change7":"#)
        json.number(change7)
        json.raw(#","direction":"#)
        json.string(direction.rawValue)
        json.raw(#","series":["#)
        for (index, value) in series.enumerated() {
            if index > 0 { json.raw(",") }
            json.number(value)
        }
        json.raw("]}")
    }
}

extension Signal {
    /// Fields a `…/state` payload adds to the signal object: the device and its position.
    public struct DeviceFields: Sendable, Hashable {
        public var device: String
        public var lat: Double
        public var lon: Double
        public var tst: Int

        public init(device: String, lat: Double, lon: Double, tst: Int) {
            self.device = device
            self.lat = lat
            self.lon = lon
            self.tst = tst
        }
    }

    /// The compact JSON of the signal contract (docs/signal.md), keys sorted, every key present
    /// (`null` where a value does not apply);
    /// with `device`, the `ampel/device/<key>/state` payload (the signal plus `device`, `lat`,
    /// `lon`, `tst`); with `texts`, without `title`, `rules` and `always` but naming the topic
    /// that holds them (``textsJSON()``) in `texts`.
    public func json(device: DeviceFields? = nil, texts: String? = nil) -> [UInt8] {
        StateJSON(self, texts: texts).json(device: device)
    }

    /// A signal's JSON in the three pieces between which a device state's own fields go (keys
    /// sorted: `device` after `dataDate`, `lat` and `lon` after `lang`, `tst` last).
    ///
    /// Every device in one district and language shares these pieces, so the daemon renders
    /// them once per district and data day and writes only the device's fields per fix: the
    /// signal's numbers (incidence, the 14-day trend series) cost more to print than all of a
    /// fix's own fields.
    public struct StateJSON: Sendable {
        /// From `{` through the `dataDate` value.
        private let head: [UInt8]
        /// From `,"district"` through the `lang` value.
        private let middle: [UInt8]
        /// From `,"measuredPhase"` through the `trend` value.
        private let tail: [UInt8]

        public init(_ signal: Signal, texts: String?) {
            var json = JSONWriter(capacity: texts == nil ? 1536 : 384)
            if texts == nil {
                json.raw(#"{"always":"#)
                json.strings(signal.always)
                json.raw(#","color":"#)
            } else {
                json.raw(#"{"color":"#)
            }
            json.string(signal.color)
            json.raw(#","complete":"#)
            json.bool(signal.complete)
            json.raw(#","dataDate":"#)
            json.string(signal.dataDate)
            head = json.bytes
            json.removeAll()
            json.raw(#","district":"#)
            json.optional(signal.district) { $1.write(to: &$0) }
            json.raw(#","incidence":"#)
            json.number(signal.incidence)
            json.raw(#","indicators":"#)
            json.readings(signal.indicators)
            json.raw(#","lang":"#)
            json.string(signal.lang)
            middle = json.bytes
            json.removeAll()
            json.raw(#","measuredPhase":"#)
            json.string(signal.measuredPhase)
            json.raw(#","phase":"#)
            json.string(signal.phase)
            json.raw(#","reason":"#)
            json.string(signal.reason)
            json.raw(#","ruleSet":"#)
            json.string(signal.ruleSet)
            if texts == nil {
                json.raw(#","rules":"#)
                json.strings(signal.rules)
            }
            json.raw(#","since":"#)
            json.string(signal.since)
            json.raw(#","stale":"#)
            json.bool(signal.stale)
            if let texts {
                json.raw(#","texts":"#)
                json.string(texts)
            } else {
                json.raw(#","title":"#)
                json.string(signal.title)
            }
            json.raw(#","trend":"#)
            json.optional(signal.trend) { $1.write(to: &$0) }
            tail = json.bytes
        }

        /// The signal's JSON, or with `device` the device state's.
        public func json(device: DeviceFields? = nil) -> [UInt8] {
            var json = JSONWriter(capacity: head.count + middle.count + tail.count + (device.map { 80 + $0.device.utf8.count } ?? 1))
            json.raw(head)
            if let device {
                json.raw(#","device":"#)
                json.string(device.device)
            }
            json.raw(middle)
            if let device {
                json.raw(#","lat":"#)
                json.number(device.lat)
                json.raw(#","lon":"#)
                json.number(device.lon)
            }
            json.raw(tail)
            if let device {
                json.raw(#","tst":"#)
                json.number(device.tst)
            }
            json.raw("}")
            return json.bytes
        }
    }

    /// The payload of a texts topic: the phase's texts in one language, with what names them
    /// (`lang`, `phase`, `ruleSet`), keys sorted.
    public func textsJSON() -> [UInt8] {
        var json = JSONWriter(capacity: 1536)
        json.raw(#"{"always":"#)
        json.strings(always)
        json.raw(#","lang":"#)
        json.string(lang)
        json.raw(#","phase":"#)
        json.string(phase)
        json.raw(#","ruleSet":"#)
        json.string(ruleSet)
        json.raw(#","rules":"#)
        json.strings(rules)
        json.raw(#","title":"#)
        json.string(title)
        json.raw("}")
        return json.bytes
    }

    /// What a push service needs beside the alert object: a one-line text and a priority
    /// (Gotify reads `message` and `priority` from the JSON body as they are).
    public struct PushFields: Sendable, Hashable {
        public var message: String
        public var priority: Int

        public init(message: String, priority: Int) {
            self.message = message
            self.priority = priority
        }
    }

    /// The compact JSON of an alert: the phase change from `from` (`null` on a first sighting)
    /// to this signal, for `device` (`null` for a district alert); with `push`, the webhook
    /// body, which adds `message` and `priority` (docs/webhooks.md).
    public func alertJSON(device: String?, from: String?, push: PushFields? = nil) -> [UInt8] {
        var json = JSONWriter(capacity: 1536)
        json.raw(#"{"always":"#)
        json.strings(always)
        json.raw(#","dataDate":"#)
        json.string(dataDate)
        json.raw(#","device":"#)
        json.string(device)
        json.raw(#","district":"#)
        json.optional(district) { $1.write(to: &$0) }
        json.raw(#","from":"#)
        json.string(from)
        json.raw(#","incidence":"#)
        json.number(incidence)
        json.raw(#","indicators":"#)
        json.readings(indicators)
        json.raw(#","lang":"#)
        json.string(lang)
        if let push {
            json.raw(#","message":"#)
            json.string(push.message)
            json.raw(#","priority":"#)
            json.number(push.priority)
        }
        json.raw(#","reason":"#)
        json.string(reason)
        json.raw(#","rules":"#)
        json.strings(rules)
        json.raw(#","title":"#)
        json.string(title)
        json.raw(#","to":"#)
        json.string(phase)
        json.raw("}")
        return json.bytes
    }
}
