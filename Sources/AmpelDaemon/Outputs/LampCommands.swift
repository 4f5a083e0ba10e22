import AmpelCore
import AmpelMessages

/// Turns a lamp's colour into the commands its firmware understands.
///
/// Commands are never retained: a lamp that comes back gets its colour again when it
/// reports online on its availability topic, not a stale retained command.
enum LampDriver {
    /// What a lamp should show.
    struct Look: Sendable, Hashable {
        var color: RGB
        /// DARK RED blinks.
        var blink: Bool
        init(color: RGB, blink: Bool) {
            self.color = color
            self.blink = blink
        }
    }

    /// The messages that make `lamp` show `look`.
    ///
    /// - `plain`: `#RRGGBB` to the topic.
    /// - `wled`: `#RRGGBB` to `<topic>/col`, then `<topic>/api` `T=1&FX=1` (effect Blink) or
    ///   `T=1&FX=0` (Solid), so DARK RED blinks and every other phase stops blinking.
    /// - `tasmota`: `#RRGGBB` to `cmnd/<topic>/Color`, then `BLINK` (DARK RED) or `ON` to
    ///   `cmnd/<topic>/Power`; `ON` also ends a blink (hardware/ZERO-FIRMWARE.md sets
    ///   `BlinkCount 0`, blinking until the next `Power ON`).
    static func commands(for lamp: LampSettings, look: Look) -> [OutgoingMessage] {
        let hex = look.color.hex
        switch lamp.driver {
        case .plain:
            return [OutgoingMessage(topic: lamp.topic, text: hex, qos: .atLeastOnce, retain: false)]
        case .wled:
            return [
                OutgoingMessage(topic: "\(lamp.topic)/col", text: hex, qos: .atLeastOnce, retain: false),
                OutgoingMessage(topic: "\(lamp.topic)/api", text: look.blink ? "T=1&FX=1" : "T=1&FX=0", qos: .atLeastOnce, retain: false),
            ]
        case .tasmota:
            return [
                OutgoingMessage(topic: "cmnd/\(lamp.topic)/Color", text: hex, qos: .atLeastOnce, retain: false),
                OutgoingMessage(topic: "cmnd/\(lamp.topic)/Power", text: look.blink ? "BLINK" : "ON", qos: .atLeastOnce, retain: false),
            ]
        }
    }

    /// Where the lamp says it is online, and the payload that means so.
    ///
    /// WLED publishes `online` on `<topic>/status` (its Last Will says `offline`); Tasmota
    /// `Online` on `tele/<topic>/LWT`; a plain lamp only if configured.
    static func availability(of lamp: LampSettings) -> (topic: String, online: String)? {
        switch lamp.driver {
        case .plain: lamp.availabilityTopic.map { ($0, lamp.onlinePayload) }
        case .wled: ("\(lamp.topic)/status", "online")
        case .tasmota: ("tele/\(lamp.topic)/LWT", "Online")
        }
    }
}
