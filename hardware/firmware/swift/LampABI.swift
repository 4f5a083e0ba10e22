import AmpelCore
import AmpelLamp

// The C interface of the lamp logic for the board glue (`hardware/firmware/main/ampel_lamp.h`).
//
// The glue owns Wi-Fi, MQTT and the LEDs; this file owns the one lamp state machine. The
// functions are not thread-safe: the glue calls them under one mutex (the MQTT event task
// and the LED task both call in). Pointers are borrowed only for the duration of a call.

/// The lamp, configured once by `ampel_lamp_configure`.
nonisolated(unsafe) private var lamp: LampStateMachine? = nil

private func copy(_ pointer: UnsafePointer<UInt8>?, _ length: Int) -> [UInt8] {
    guard let pointer, length > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: pointer, count: length))
}

/// Configures the lamp: `follow` 0 = district (`id` is the AGS), 1 = device (`id` is the key).
/// Answers false for an invalid id or base topic; the lamp then stays unconfigured.
@_cdecl("ampel_lamp_configure")
public func ampelLampConfigure(
    _ follow: Int32,
    _ id: UnsafePointer<UInt8>?, _ idLength: Int,
    _ base: UnsafePointer<UInt8>?, _ baseLength: Int
) -> Bool {
    let mode: LampFollow
    switch follow {
    case 0: mode = .district
    case 1: mode = .device
    default: return false
    }
    do {
        let topics = try LampTopics(follow: mode, id: copy(id, idLength), base: copy(base, baseLength))
        lamp = LampStateMachine(topics: topics)
        return true
    } catch {
        return false
    }
}

/// The number of topics to subscribe to (0 before configuration).
@_cdecl("ampel_lamp_topic_count")
public func ampelLampTopicCount() -> Int {
    lamp?.topics.subscriptions.count ?? 0
}

/// Copies topic `index` into `buffer` with a terminating NUL; answers its length, or -1
/// when `index` is out of range or `capacity` too small.
@_cdecl("ampel_lamp_topic")
public func ampelLampTopic(_ index: Int, _ buffer: UnsafeMutablePointer<UInt8>?, _ capacity: Int) -> Int {
    guard let lamp, let buffer, index >= 0 else { return -1 }
    let topics = lamp.topics.subscriptions
    guard index < topics.count, topics[index].count < capacity else { return -1 }
    let topic = topics[index]
    for offset in 0..<topic.count { buffer[offset] = topic[offset] }
    buffer[topic.count] = 0
    return topic.count
}

/// Feeds one event and answers the pattern code (see `ampel_lamp_pattern`).
private func feed(_ event: LampEvent) -> Int32 {
    guard lamp != nil else { return -1 }
    _ = lamp!.event(event)
    return ampelLampPattern()
}

/// Power-on: forget everything, start the lamp test.
@_cdecl("ampel_lamp_power_on")
public func ampelLampPowerOn(_ nowMs: UInt64) -> Int32 { feed(.powerOn(at: nowMs)) }

/// Time passes; call every 10–50 ms.
@_cdecl("ampel_lamp_tick")
public func ampelLampTick(_ nowMs: UInt64) -> Int32 { feed(.tick(at: nowMs)) }

/// The broker connection came up (true) or went down (false).
@_cdecl("ampel_lamp_link")
public func ampelLampLink(_ up: Bool) -> Int32 { feed(.link(up: up)) }

/// A message on any subscribed topic; the lamp sorts it out and drops what it does not understand.
@_cdecl("ampel_lamp_message")
public func ampelLampMessage(
    _ topic: UnsafePointer<UInt8>?, _ topicLength: Int,
    _ payload: UnsafePointer<UInt8>?, _ payloadLength: Int
) -> Int32 {
    feed(.message(topic: copy(topic, topicLength), payload: copy(payload, payloadLength)))
}

/// The current pattern: 0 test, 1 green, 2 yellow, 3 red, 4 darkred, 5 outside,
/// 6 no signal (waiting), 7 no signal (offline), 8 no signal (stale); -1 unconfigured.
@_cdecl("ampel_lamp_pattern")
public func ampelLampPattern() -> Int32 {
    guard let lamp else { return -1 }
    switch lamp.pattern {
    case .lampTest: return 0
    case .phase(let phase): return 1 + Int32(phase.rawValue)
    case .outside: return 5
    case .noSignal(let reason): return 6 + Int32(reason.rawValue)
    }
}

/// The lights on at `nowMs`: bit 0 red, bit 1 yellow, bit 2 green, bit 3 blue.
@_cdecl("ampel_lamp_frame")
public func ampelLampFrame(_ nowMs: UInt64) -> UInt8 {
    lamp?.frame(at: nowMs).lit.rawValue ?? 0
}

/// The colour at `nowMs` for RGB pixels, as 0xRRGGBB.
@_cdecl("ampel_lamp_frame_rgb")
public func ampelLampFrameRGB(_ nowMs: UInt64) -> UInt32 {
    guard let lamp else { return 0 }
    let color = lamp.frame(at: nowMs).color()
    return UInt32(color.red) << 16 | UInt32(color.green) << 8 | UInt32(color.blue)
}
