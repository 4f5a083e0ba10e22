import AmpelCore
import AmpelDomain
import Foundation

/// Reads back what the daemon itself published and the broker retains: a device's
/// `<base>/device/<key>/state`, a district's `<base>/district/<ags>/phase` and the device count
/// of `<base>/bridge/info`. Pure: topic and bytes in, a record or the reason why not out.
///
/// Used when the state file was lost (``StateRecovery``): the retained states are the last
/// thing the daemon announced, so a device that reports again in the same phase must not be
/// alerted as if it were new. A payload that is not one the daemon wrote is refused with a
/// reason, never trusted in part.
enum RetainedState {
    /// Why a retained message is not one of the daemon's states.
    struct Rejection: Error, Sendable, Hashable, CustomStringConvertible {
        let reason: String
        init(_ reason: String) { self.reason = reason }
        var description: String { reason }
    }

    /// The broker accepts packets up to `max_packet_size` (64 KiB in deploy/mosquitto); a
    /// state is about 1 KB. Anything longer is not the daemon's and is not parsed.
    static let maximumPayload = 65_536

    /// The members of a state payload that a ``DeviceRecord`` keeps (``Signal/json(device:)``).
    private struct DeviceState: Decodable {
        var device: String
        var lat: Double
        var lon: Double
        var tst: Int
        var lang: String?
        var district: Signal.DistrictRef?
        var phase: String
        var dataDate: String
        var stale: Bool
    }

    /// The record behind a device's retained state, as the engine held it when it published it.
    ///
    /// `lang` is the language the state was written in; the engine drops it again where the
    /// device gets that language without asking (``SignalEngine/Event/restore(devices:districts:)``).
    ///
    /// The payload is decoded with `JSONDecoder` (as the Traccar input is), not with
    /// `JSONScanner`: the district is a nested object and its name may be longer than the
    /// scanner keeps of a string.
    static func device(key: String, payload: [UInt8]) -> Result<DeviceRecord, Rejection> {
        guard payload.count <= maximumPayload else { return .failure(Rejection("\(payload.count) bytes, more than a state")) }
        let state: DeviceState
        do {
            state = try JSONDecoder().decode(DeviceState.self, from: Data(payload))
        } catch DecodingError.keyNotFound(let key, _) {
            return .failure(Rejection("no \(key.stringValue)"))
        } catch DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context) {
            return .failure(Rejection("\(context.codingPath.map(\.stringValue).joined(separator: ".")) is not what a state holds"))
        } catch {
            return .failure(Rejection("not JSON"))
        }
        guard state.device == key else { return .failure(Rejection("its device is not the topic's")) }
        guard state.lat.isFinite, state.lon.isFinite, (-90...90).contains(state.lat), (-180...180).contains(state.lon) else {
            return .failure(Rejection("coordinates out of range"))
        }
        guard state.tst >= 0, state.tst < 1_000_000_000_000 else { return .failure(Rejection("tst out of range")) }
        let phaseID = PhaseID(state.phase)
        guard phaseID != nil || state.phase == OutsideMarker.id else { return .failure(Rejection("no phase Ampel knows")) }
        // Only `outside` is given outside every German district.
        guard phaseID == nil || state.district != nil else { return .failure(Rejection("a phase without a district")) }
        guard Day(iso: state.dataDate) != nil else { return .failure(Rejection("dataDate is no day")) }
        if let district = state.district, district.ags.isEmpty { return .failure(Rejection("a district without a code")) }
        let lang = state.lang.flatMap { Language(known: $0) }?.rawValue
        return .success(DeviceRecord(lat: state.lat, lon: state.lon, tst: state.tst, lang: lang, district: state.district,
                                     phase: state.phase, dataDate: state.dataDate, stale: state.stale))
    }

    /// A district's retained phase (`green` … `darkred`: a district of the region is never `outside`).
    static func districtPhase(payload: [UInt8]) -> Result<String, Rejection> {
        guard payload.count <= 16, let id = PhaseID(utf8: payload) else { return .failure(Rejection("no phase Ampel knows")) }
        return .success(id.id)
    }

    /// How many devices the daemon held when it last published `bridge/info`; `nil` when the
    /// payload is not a `bridge/info`.
    static func bridgeDevices(payload: [UInt8]) -> Int? {
        guard let info = FlatMessage(payload, maximumLength: maximumPayload), case .value(let devices) = info.number("devices"),
              devices >= 0, devices < 1e9, devices == devices.rounded() else { return nil }
        return Int(devices)
    }
}
