/// The federal states by the first two digits of a district code.
public enum GermanState {
    public static let names: [String: String] = [
        "01": "Schleswig-Holstein", "02": "Hamburg", "03": "Niedersachsen", "04": "Bremen",
        "05": "Nordrhein-Westfalen", "06": "Hessen", "07": "Rheinland-Pfalz", "08": "Baden-Württemberg",
        "09": "Bayern", "10": "Saarland", "11": "Berlin", "12": "Brandenburg",
        "13": "Mecklenburg-Vorpommern", "14": "Sachsen", "15": "Sachsen-Anhalt", "16": "Thüringen",
    ]

    /// Germany and the 16 states as the RKI's files key them: `00` for Germany, then `01`..`16`.
    public static let ids = ["00"] + names.keys.sorted()

    /// The name of a state id, `Deutschland` for `00`.
    public static func name(ofState id: String) -> String? { id == "00" ? "Deutschland" : names[id] }

    /// The state of a district code, e.g. `Bayern` for `09162`.
    public static func name(ofDistrict ags: String) -> String? { names[String(ags.prefix(2))] }
}

extension RuleSet {
    /// The signal for a place known by its district, the one path from a position to a signal:
    /// `ampel check` and the daemon both take it.
    ///
    /// A district of `region` that the data does not know gets no signal (an error), not
    /// `outside`: `outside` says the place is beyond the monitored region and its rules, which
    /// would be wrong there. `ampel check` reports the error; the daemon logs it and publishes
    /// nothing for that position.
    ///
    /// - Parameters:
    ///   - ags: the district the place lies in, `nil` for no German district (`outside`, district `null`).
    ///   - placeName: the geometry's name for the district, used when the data does not know it
    ///     (Berlin is one district `11000` in the geometry but twelve Bezirke in the RKI data).
    ///   - directory: districts known beyond `dataset` (e.g. all of Germany from a snapshot), for names.
    /// - Returns: `outside` with the district named when it lies outside `region`; otherwise the
    ///   district's phase from `dataset`.
    /// - Throws: ``SignalError`` when a district of the region has no valid incidence in `dataset`.
    public func signal(
        atDistrict ags: String?, placeName: String? = nil, dataset: Dataset, region: Region, language: Language,
        stale: Bool = false, directory: [String: District] = [:]
    ) throws(SignalError) -> Signal {
        guard let ags else {
            return outsideSignal(district: nil, dataDate: dataset.date, language: language, stale: stale)
        }
        guard region.contains(ags: ags) else {
            let ref: Signal.DistrictRef
            if let known = dataset[ags]?.district ?? directory[ags] {
                ref = .init(ags: known.ags, name: known.name, state: known.state, type: known.kind.rawValue)
            } else {
                ref = .init(ags: ags, name: placeName ?? ags, state: GermanState.name(ofDistrict: ags) ?? "", type: nil)
            }
            return outsideSignal(district: ref, dataDate: dataset.date, language: language, stale: stale)
        }
        guard let entry = dataset[ags] else {
            throw SignalError("district \(ags)\(placeName.map { " (\($0))" } ?? "") has no incidence in the data of \(dataset.date.iso) (\(dataset.source))")
        }
        return try signal(for: entry, dataDate: dataset.date, language: language, stale: stale, course: dataset.courses[ags])
    }
}
