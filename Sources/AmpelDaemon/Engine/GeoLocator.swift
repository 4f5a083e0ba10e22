import AmpelDomain
import AmpelGeo

/// The bundled BKG geometry as the daemon's ``Locator``.
struct GeoLocator: Locator {
    let index: DistrictIndex
    /// The geometry's districts as the engine's one district type, by their place in
    /// `index.districts`: made once, so a fix is located without building strings.
    let districts: [Signal.DistrictRef]

    init(index: DistrictIndex) {
        self.index = index
        // The geometry knows code and name; the state follows from the code. A signal for a
        // district the data knows names it as the data does (``RuleSet/signal(atDistrict:placeName:dataset:region:language:stale:directory:)``).
        districts = index.districts.map { Self.district(ags: $0.ags, name: $0.name) }
    }

    /// A geometry district as the engine's district: code, the geometry's name, the state.
    static func district(ags: String, name: String) -> Signal.DistrictRef {
        Signal.DistrictRef(ags: ags, name: name, state: GermanState.name(ofDistrict: ags) ?? "", type: nil)
    }

    /// The index over the bundled geometry.
    static func bundled() throws -> GeoLocator {
        GeoLocator(index: try DistrictIndex.bundled())
    }

    func place(latitude: Double, longitude: Double) -> Signal.DistrictRef? {
        // The parsers only pass finite, in-range coordinates, so a coordinate error cannot
        // happen here; if it did, "in no district" is the answer that claims least.
        guard let found = try? index.lookupDistrictIndex(latitude: latitude, longitude: longitude) else { return nil }
        return districts[found]
    }
}
