/// Ampel's version: in `bridge/info`, the Home Assistant device, and the `User-Agent` of its data requests.
public enum AmpelVersion {
    public static let current = "0.2.0"
}
