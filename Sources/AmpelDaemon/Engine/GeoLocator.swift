import AmpelGeo

/// The bundled BKG geometry as the daemon's ``Locator``.
public struct GeoLocator: Locator {
    let index: DistrictIndex

    public init(index: DistrictIndex) {
        self.index = index
    }

    /// The index over the bundled geometry.
    public static func bundled() throws -> GeoLocator {
        GeoLocator(index: try DistrictIndex.bundled())
    }

    public func place(latitude: Double, longitude: Double) -> Place {
        // The parsers only pass finite, in-range coordinates, so a coordinate error cannot
        // happen here; if it did, "in no district" is the answer that claims least.
        guard let hit = try? index.lookup(latitude: latitude, longitude: longitude) else { return .abroad }
        return .district(ags: hit.ags, name: hit.name)
    }
}
