import AmpelMessages
import AmpelDomain
import CAmpelLinux

/// One entry of the daemon's journal (``Journal``), and its binary form.
///
/// A record on disk is `[u32 length][u32 CRC-32C][u8 type][fields]`, little endian, where
/// `length` counts the type byte and the fields and the CRC covers the same bytes. A length of
/// 0 ends a segment (the rest of the file is the zeroes it was created with); a record that
/// runs past the file or fails its CRC is the torn last write of a process that died, and ends
/// the segment too.
enum JournalRecord: Sendable, Equatable {
    /// A message taken from the broker, before it is handled (the broker may have its PUBACK).
    case input(seq: UInt64, receivedAt: Int, topic: String, payload: [UInt8], qos: UInt8, retain: Bool)
    /// Every input up to `seq` is handled: its decisions are in the records before this one.
    case handled(seq: UInt64)
    /// A device's record as the engine now holds it.
    case device(key: String, record: DeviceRecord)
    /// A district's phase as the engine now holds it.
    case district(ags: String, phase: String)
    /// An alert decided and about to be handed to the broker, with its witness: the retained
    /// message published right after it (``PendingAlert/witness``).
    case alert(id: UInt64, message: OutgoingMessage, witness: Witness?)
    /// The broker acknowledged alert `id`.
    case alertAcknowledged(id: UInt64)
    /// The broker refused alert `id` (a PUBACK reason of 0x80 or above, e.g. not authorised):
    /// it stays pending without a witness, so the next start sends it again whatever is
    /// retained, once, and not this run in a loop against a refusal that persists.
    case alertRefused(id: UInt64)
    /// The daemon stopped cleanly: the retained topics on the broker are what it last published.
    case stopped
    /// The device is forgotten (`devices.forget_after`): the replay removes it.
    case forgotten(key: String)

    enum Kind: UInt8 {
        case input = 1, handled, device, district, alert, alertAcknowledged, stopped, forgotten, alertRefused
    }

    static let headerSize = 8

    /// The size of the type byte and the fields.
    var bodySize: Int {
        switch self {
        case .input(_, _, let topic, let payload, _, _):
            return 1 + 8 + 8 + 1 + 1 + 2 + topic.utf8.count + 4 + payload.count
        case .handled, .alertAcknowledged, .alertRefused:
            return 1 + 8
        case .device(let key, let record):
            var size = 1 + 2 + key.utf8.count + 8 + 8 + 8 + 1 + 1
            size += 1 + (record.lang.map { 2 + $0.utf8.count } ?? 0)
            if let district = record.district {
                size += 2 + district.ags.utf8.count + 2 + district.name.utf8.count + 2 + district.state.utf8.count
                size += 1 + (district.type.map { 2 + $0.utf8.count } ?? 0)
            }
            size += 2 + record.phase.utf8.count + 2 + record.dataDate.utf8.count
            return size
        case .district(let ags, let phase):
            return 1 + 2 + ags.utf8.count + 2 + phase.utf8.count
        case .alert(_, let message, let witness):
            return 1 + 8 + 2 + message.topic.utf8.count + 4 + message.payload.count + 1 + 1 + 4
                + 2 + (witness?.topic.utf8.count ?? 0) + 4 + (witness?.payload.count ?? 0)
        case .stopped:
            return 1
        case .forgotten(let key):
            return 1 + 2 + key.utf8.count
        }
    }

    /// Writes the whole record (header included) at `base`, which has room for
    /// `headerSize + bodySize` bytes.
    func write(to base: UnsafeMutableRawPointer) {
        var writer = JournalWriter(base + Self.headerSize)
        switch self {
        case .input(let seq, let receivedAt, let topic, let payload, let qos, let retain):
            writer.u8(Kind.input.rawValue)
            writer.u64(seq)
            writer.u64(UInt64(bitPattern: Int64(receivedAt)))
            writer.u8(qos)
            writer.u8(retain ? 1 : 0)
            writer.string16(topic)
            writer.bytes32(payload)
        case .handled(let seq):
            writer.u8(Kind.handled.rawValue)
            writer.u64(seq)
        case .device(let key, let record):
            writer.u8(Kind.device.rawValue)
            writer.string16(key)
            writer.u64(record.lat.bitPattern)
            writer.u64(record.lon.bitPattern)
            writer.u64(UInt64(bitPattern: Int64(record.tst)))
            // Flags in the byte that held only `stale`: a journal of an earlier version reads the
            // same (its devices were all announced, and 4 is set only for one that is not).
            writer.u8((record.stale ? 1 : 0) | (record.owntracks ? 2 : 0) | (record.announced ? 0 : 4))
            writer.u8(record.district == nil ? 0 : 1)
            writer.optional(record.lang)
            if let district = record.district {
                writer.string16(district.ags)
                writer.string16(district.name)
                writer.string16(district.state)
                writer.optional(district.type)
            }
            writer.string16(record.phase)
            writer.string16(record.dataDate)
        case .district(let ags, let phase):
            writer.u8(Kind.district.rawValue)
            writer.string16(ags)
            writer.string16(phase)
        case .alert(let id, let message, let witness):
            writer.u8(Kind.alert.rawValue)
            writer.u64(id)
            writer.string16(message.topic)
            writer.bytes32(message.payload)
            writer.u8(UInt8(message.qos.rawValue))
            writer.u8(message.retain ? 1 : 0)
            writer.u32(message.expiry.map { UInt32(clamping: $0.components.seconds) } ?? 0)
            writer.string16(witness?.topic ?? "")
            writer.bytes32(witness?.payload ?? [])
        case .alertAcknowledged(let id):
            writer.u8(Kind.alertAcknowledged.rawValue)
            writer.u64(id)
        case .alertRefused(let id):
            writer.u8(Kind.alertRefused.rawValue)
            writer.u64(id)
        case .stopped:
            writer.u8(Kind.stopped.rawValue)
        case .forgotten(let key):
            writer.u8(Kind.forgotten.rawValue)
            writer.string16(key)
        }
        let length = writer.position - (base + Self.headerSize)
        base.storeBytes(of: UInt32(length).littleEndian, toByteOffset: 0, as: UInt32.self)
        let crc = CRC32C.checksum(UnsafeRawBufferPointer(start: base + Self.headerSize, count: length))
        base.storeBytes(of: crc.littleEndian, toByteOffset: 4, as: UInt32.self)
    }

    /// What ends a segment's readable part.
    enum End: Equatable {
        /// The zero-filled rest of a segment, or its end.
        case clean
        /// A record cut short or failing its CRC: the last write of a process that died mid-way.
        case torn(offset: Int)
    }

    /// Reads every record in `bytes`, in order, until the end or the first torn record.
    static func readAll(_ bytes: UnsafeRawBufferPointer, _ body: (JournalRecord) -> Void) -> End {
        var offset = 0
        while offset + headerSize <= bytes.count {
            let length = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
            if length == 0 { return .clean }
            guard offset + headerSize + length <= bytes.count else { return .torn(offset: offset) }
            let crc = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self))
            let record = UnsafeRawBufferPointer(rebasing: bytes[(offset + headerSize)..<(offset + headerSize + length)])
            guard CRC32C.checksum(record) == crc, let decoded = decode(record) else { return .torn(offset: offset) }
            body(decoded)
            offset += headerSize + length
        }
        return .clean
    }

    /// One record's type and fields; `nil` for anything malformed.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> JournalRecord? {
        var reader = JournalReader(bytes)
        guard let raw = reader.u8(), let kind = Kind(rawValue: raw) else { return nil }
        let record: JournalRecord?
        switch kind {
        case .input:
            guard let seq = reader.u64(), let receivedAt = reader.u64(), let qos = reader.u8(), let retain = reader.u8(),
                  let topic = reader.string16(), let payload = reader.bytes32() else { return nil }
            record = .input(seq: seq, receivedAt: Int(Int64(bitPattern: receivedAt)), topic: topic, payload: payload, qos: qos, retain: retain != 0)
        case .handled:
            record = reader.u64().map { .handled(seq: $0) }
        case .device:
            guard let key = reader.string16(), let lat = reader.u64(), let lon = reader.u64(), let tst = reader.u64(),
                  let stale = reader.u8(), let hasDistrict = reader.u8(), let lang = reader.optional() else { return nil }
            var district: Signal.DistrictRef?
            if hasDistrict != 0 {
                guard let ags = reader.string16(), let name = reader.string16(), let state = reader.string16(),
                      let type = reader.optional() else { return nil }
                district = Signal.DistrictRef(ags: ags, name: name, state: state, type: type)
            }
            guard let phase = reader.string16(), let dataDate = reader.string16() else { return nil }
            record = .device(key: key, record: DeviceRecord(
                lat: Double(bitPattern: lat), lon: Double(bitPattern: lon), tst: Int(Int64(bitPattern: tst)), lang: lang,
                district: district, phase: phase, dataDate: dataDate, stale: stale & 1 != 0, owntracks: stale & 2 != 0,
                announced: stale & 4 == 0))
        case .district:
            guard let ags = reader.string16(), let phase = reader.string16() else { return nil }
            record = .district(ags: ags, phase: phase)
        case .alert:
            guard let id = reader.u64(), let topic = reader.string16(), let payload = reader.bytes32(), let qosByte = reader.u8(), let qos = MQTTQoS(rawValue: Int(qosByte)),
                  let retain = reader.u8(), let expiry = reader.u32(), let witnessTopic = reader.string16(),
                  let witnessPayload = reader.bytes32() else { return nil }
            record = .alert(id: id, message: OutgoingMessage(topic: topic, payload: payload, qos: qos, retain: retain != 0,
                                                             expiry: expiry == 0 ? nil : .seconds(Int(expiry))),
                            witness: witnessTopic.isEmpty ? nil : Witness(topic: witnessTopic, payload: witnessPayload))
        case .alertAcknowledged:
            record = reader.u64().map { .alertAcknowledged(id: $0) }
        case .alertRefused:
            record = reader.u64().map { .alertRefused(id: $0) }
        case .stopped:
            record = .stopped
        case .forgotten:
            record = reader.string16().map { .forgotten(key: $0) }
        }
        return reader.atEnd ? record : nil
    }
}

/// The retained message published right after an alert, on the same connection: found on the
/// broker at a restart, it proves that the broker took the alert before it (brokers handle one
/// connection's messages in order), so the alert is not sent twice.
struct Witness: Sendable, Hashable, Codable {
    var topic: String
    var payload: [UInt8]
}

/// Writes fields at a raw position (the journal's mapped file), little endian, unaligned.
struct JournalWriter {
    var position: UnsafeMutableRawPointer

    init(_ position: UnsafeMutableRawPointer) { self.position = position }

    mutating func u8(_ value: UInt8) {
        position.storeBytes(of: value, as: UInt8.self)
        position += 1
    }

    mutating func u16(_ value: UInt16) {
        position.storeBytes(of: value.littleEndian, as: UInt16.self)
        position += 2
    }

    mutating func u32(_ value: UInt32) {
        position.storeBytes(of: value.littleEndian, as: UInt32.self)
        position += 4
    }

    mutating func u64(_ value: UInt64) {
        position.storeBytes(of: value.littleEndian, as: UInt64.self)
        position += 8
    }

    mutating func raw(_ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            guard let base = utf8.baseAddress else { return }
            position.copyMemory(from: base, byteCount: utf8.count)
            position += utf8.count
        }
    }

    /// A string of up to 65,535 bytes (topics, keys and names are far shorter: the caller checks).
    mutating func string16(_ text: String) {
        u16(UInt16(text.utf8.count))
        raw(text)
    }

    /// A presence byte, then the string if there is one.
    mutating func optional(_ text: String?) {
        u8(text == nil ? 0 : 1)
        if let text { string16(text) }
    }

    mutating func bytes32(_ bytes: [UInt8]) {
        u32(UInt32(bytes.count))
        bytes.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            position.copyMemory(from: base, byteCount: buffer.count)
            position += buffer.count
        }
    }
}

/// Reads what ``JournalWriter`` wrote; every read checks the bounds.
struct JournalReader {
    let bytes: UnsafeRawBufferPointer
    var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var atEnd: Bool { offset == bytes.count }

    mutating func u8() -> UInt8? {
        guard offset + 1 <= bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func u16() -> UInt16? {
        guard offset + 2 <= bytes.count else { return nil }
        defer { offset += 2 }
        return UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
    }

    mutating func u32() -> UInt32? {
        guard offset + 4 <= bytes.count else { return nil }
        defer { offset += 4 }
        return UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    mutating func u64() -> UInt64? {
        guard offset + 8 <= bytes.count else { return nil }
        defer { offset += 8 }
        return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    mutating func raw(_ count: Int) -> String? {
        guard offset + count <= bytes.count else { return nil }
        defer { offset += count }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)]), as: UTF8.self)
    }

    mutating func string16() -> String? {
        guard let count = u16() else { return nil }
        return raw(Int(count))
    }

    /// What ``JournalWriter/optional(_:)`` wrote: `.some(nil)` for none, `nil` when malformed.
    mutating func optional() -> String?? {
        guard let present = u8() else { return nil }
        guard present != 0 else { return .some(nil) }
        return string16().map { .some($0) }
    }

    mutating func bytes32() -> [UInt8]? {
        guard let count = u32(), offset + Int(count) <= bytes.count else { return nil }
        defer { offset += Int(count) }
        return Array(UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + Int(count))]))
    }
}

/// CRC-32C (Castagnoli): detects a torn or stale record at the end of a segment. Computed by
/// the CPU's own instruction where it has one (SSE4.2; every x86-64 server of the last decade),
/// since each record is checksummed on the fix path (the byte-wise table loop was 2.3 % of the
/// daemon's CPU per fix; benchmarks.md "Journal checksum"); by the table otherwise. Both give
/// the same value, so journals move between machines.
package enum CRC32C {
    static let table: [UInt32] = (0..<256).map { index in
        var crc = UInt32(index)
        for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
        return crc
    }

    /// Whether this CPU has the instruction.
    package static let hardware = ampel_crc32c_available() != 0

    package static func checksum(_ bytes: UnsafeRawBufferPointer, hardware: Bool = Self.hardware) -> UInt32 {
        guard hardware else { return tableChecksum(bytes) }
        return ampel_crc32c(0xFFFF_FFFF, bytes.baseAddress, bytes.count) ^ 0xFFFF_FFFF
    }

    static func tableChecksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        table.withUnsafeBufferPointer { table in
            for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        }
        return crc ^ 0xFFFF_FFFF
    }
}
