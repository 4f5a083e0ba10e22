/// The `id` every alert carries (on MQTT and in a webhook's body) and a webhook's
/// `Idempotency-Key`: `<run>-<journal id>`, the same string wherever the alert goes.
///
/// The journal id alone is unique only while the snapshot lives: with a lost `state.json` the
/// journal counts from what its remaining segments hold and hands out ids it gave before. A
/// prefix of 64 random bits drawn at each start keeps the ids of different runs apart. An alert
/// the next start sends again (it was pending in the journal) keeps the id it was journaled
/// with: the id is part of the payload the journal holds.
struct AlertIDs: Sendable {
    let prefix: String

    /// A prefix drawn now, for this run.
    init() {
        let hex = String(UInt64.random(in: .min ... .max), radix: 16)
        prefix = String(repeating: "0", count: 16 - hex.count) + hex
    }

    init(prefix: String) {
        self.prefix = prefix
    }

    /// The id of the alert with journal id `journalID`.
    func id(_ journalID: UInt64) -> String {
        "\(prefix)-\(journalID)"
    }

    /// `payload`, a JSON object, with `"id":"<id>"` as its first member; anything else as it is.
    ///
    /// The engine writes alerts before the journal numbers them (it is pure and knows no
    /// journal), so the id goes in here, between the two, rather than the engine writing a
    /// placeholder. The id is hex digits, a dash and decimal digits: no escaping.
    static func stamp(_ payload: [UInt8], id: String) -> [UInt8] {
        guard payload.first == UInt8(ascii: "{") else { return payload }
        let empty = payload.dropFirst().first { $0 != UInt8(ascii: " ") } == UInt8(ascii: "}")
        var stamped: [UInt8] = []
        stamped.reserveCapacity(payload.count + id.utf8.count + 8)
        stamped.append(contentsOf: #"{"id":""#.utf8)
        stamped.append(contentsOf: id.utf8)
        stamped.append(UInt8(ascii: "\""))
        if !empty { stamped.append(UInt8(ascii: ",")) }
        stamped.append(contentsOf: empty ? [UInt8(ascii: "}")] : Array(payload.dropFirst()))
        return stamped
    }
}
