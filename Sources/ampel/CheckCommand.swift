import AmpelCore
import AmpelData
import AmpelDomain
import AmpelGeo
import ArgumentParser
import Foundation

/// `ampel check`: the signal for one district, or for a position.
struct Check: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the traffic-light signal for a district (--district AGS) or a position (--lat, --lon).",
        discussion: """
            Example:
              ampel check --lat 48.1374 --lon 11.5755 --lang de
            """)

    @Option(name: .long, help: "The district's five-digit code (AGS/RS), e.g. 09162 for SK München.")
    var district: String?

    @Option(name: .long, help: "The monitored region as a code prefix, e.g. 09 for Bavaria (default: the rule set's region); elsewhere the phase is 'outside'.")
    var region: String?

    @OptionGroup var data: DataOptions
    @OptionGroup var ruleSetOptions: RuleSetOptions
    @OptionGroup var languageOptions: LanguageOptions
    @Flag(name: .long, help: "Print the signal object as JSON.") var json = false
    @OptionGroup var colorOptions: ColorOptions

    @Option(name: .long, help: "Latitude in decimal degrees (with --lon): resolve the position to its district.")
    var lat: Double?

    @Option(name: .long, help: "Longitude in decimal degrees (with --lat).")
    var lon: Double?

    @Option(name: .long, help: "District geometry as GeoJSON (default: the bundled BKG geometry).")
    var geometry: String?

    func validate() throws {
        switch (district, lat, lon) {
        case (let code?, nil, nil):
            guard AmpelDomain.District.isValidCode(code) else {
                throw ValidationError("--district must be a five-digit code such as 09162, got '\(code)'")
            }
        case (nil, .some, .some):
            break
        case (nil, .some, nil), (nil, nil, .some):
            throw ValidationError("--lat and --lon go together")
        case (.some, _, _):
            throw ValidationError("give either --district or --lat/--lon, not both")
        default:
            throw ValidationError("give --district AGS or --lat LAT --lon LON")
        }
    }

    func run() async throws {
        let ruleSet = try ruleSetOptions.load()
        let language = languageOptions.language
        let loaded = try await data.dataset(ruleSet: ruleSet)
        let dataset = loaded.dataset
        let region = self.region.map { Region(prefix: $0, name: $0 == "09" ? Region.bavaria.name : $0) } ?? ruleSet.region
        var place: (ags: String, name: String?)?
        if let lat, let lon {
            let index = try GeometryOptions.index(path: geometry)
            do {
                place = try index.lookup(latitude: lat, longitude: lon).map { ($0.ags, $0.name) }
            } catch {
                throw CLIError("invalid position: \(error)")
            }
        } else if let district {
            place = (district, nil)
            let known = dataset[district] != nil || DistrictDirectory.germany[district] != nil || (try? BundledData.shared.snapshot())?[district] != nil
            if !known {
                throw CLIError("unknown district '\(district)': no such district in the data of \(dataset.date.iso) (\(dataset.source)) or the bundled snapshots; `ampel districts` lists the Bavarian ones")
            }
        }
        let directory = DistrictDirectory.germany.byCode.merging((try? BundledData.shared.snapshot())?.districts.mapValues(\.district) ?? [:]) { known, _ in known }
        let signal: Signal
        do {
            signal = try ruleSet.signal(atDistrict: place?.ags, placeName: place?.name, dataset: dataset, region: region,
                                        language: language, stale: loaded.stale, directory: directory)
        } catch {
            throw CLIError("\(error)")
        }
        try output(signal, ruleSet: ruleSet, language: language, staleNote: loaded.staleNote(language))
    }

    func output(_ signal: Signal, ruleSet: RuleSet, language: Language, staleNote: String?) throws {
        // Standard error says it in either mode; `--json` carries `"stale": true` on standard output.
        if let staleNote { FileHandle.standardError.write(Data("Warning: \(staleNote)\n".utf8)) }
        if json {
            print(String(decoding: signal.json(), as: UTF8.self))
        } else {
            let terminal = Terminal(colorOptions)
            print(terminal.render(signal, ruleSet: ruleSet, language: language))
            if let staleNote { print(terminal.bold(staleNote)) }
        }
    }
}
