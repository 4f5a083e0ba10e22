import AmpelDomain
import Foundation
import Logging
import Synchronization

/// The live source `rki` of a rule set of state indicators: the RKI's hospitalisation file
/// and the DIVI register's state file, each asked for with ``FileDownload`` (conditional GET,
/// stall and whole timeouts, retries, `file://`), as the incidence file is.
///
/// The client holds the last good contents of both files: a file that answers `304` keeps
/// them, a changed file is checked whole (``HospitalisationCSV``, ``IntensiveCareCSV``) and
/// merged so that a value once read is kept as first published. A file that fails fails the
/// check: the store keeps the data in force and says why. The publication's validators name
/// both files' versions, so the store's conditional check answers `notModified` only when
/// neither file changed.
public final class RKIIndicatorClient: ConditionalSource {
    public struct Configuration: Sendable {
        public var hospitalisationURL: String
        public var icuURL: String
        public var region: Region
        /// How many days up to the newest one a publication carries (for trend and day counts).
        public var windowDays: Int
        public var stallTimeout: Duration
        public var timeout: Duration
        public var clock: any Clock<Duration>
        public var retry: RetryPolicy
        public var userAgent: String
        /// The largest body accepted, in bytes (the files are 2 and 4 MB in 2026).
        public var maxBodyBytes: Int

        public init(hospitalisationURL: String = RKIIndicatorClient.defaultHospitalisationURL,
                    icuURL: String = RKIIndicatorClient.defaultICUURL,
                    region: Region = .bavaria, windowDays: Int = PublicationHistory.defaultLength,
                    stallTimeout: Duration = .seconds(30), timeout: Duration = .seconds(600),
                    clock: any Clock<Duration> = ContinuousClock(), retry: RetryPolicy = .standard,
                    userAgent: String = DataHTTP.userAgent, maxBodyBytes: Int = 256 << 20) {
            self.hospitalisationURL = hospitalisationURL
            self.icuURL = icuURL
            self.region = region
            self.windowDays = max(1, windowDays)
            self.stallTimeout = stallTimeout
            self.timeout = timeout
            self.clock = clock
            self.retry = retry
            self.userAgent = userAgent
            self.maxBodyBytes = maxBodyBytes
        }
    }

    /// The hospitalisation file on the `main` branch of the RKI's GitHub repository.
    public static let defaultHospitalisationURL =
        "https://raw.githubusercontent.com/robert-koch-institut/COVID-19-Hospitalisierungen_in_Deutschland/main/Aktuell_Deutschland_adjustierte-COVID-19-Hospitalisierungen.csv"
    /// The DIVI register's state file on the `main` branch of the RKI's GitHub repository.
    public static let defaultICUURL =
        "https://raw.githubusercontent.com/robert-koch-institut/Intensivkapazitaeten_und_COVID-19-Intensivbettenbelegung_in_Deutschland/main/Intensivregister_Bundeslaender_Kapazitaeten.csv"

    /// One file's last good contents and the validators of that version.
    struct Held: Sendable {
        var table: IndicatorTable
        var validators: HTTPValidators?
    }

    public let configuration: Configuration
    let httpClient: HTTPClient
    let logger: Logger
    private let held = Mutex<(hospital: Held?, icu: Held?)>((nil, nil))

    public init(configuration: Configuration = Configuration(), httpClient: HTTPClient = .shared,
                logger: Logger = Logger(label: "ampel.data.rki-indicators")) {
        self.configuration = configuration
        self.httpClient = httpClient
        self.logger = logger
    }

    public var name: String { "rki" }

    public func check(ifChanged validators: HTTPValidators?, attemptFailed: (@Sendable (DataError) -> Void)?) async throws(DataError) -> SourceAnswer {
        let before = held.withLock { $0 }
        // Without validators the caller wants the files whole.
        let hospital = try await refresh(before.hospital, ask: validators != nil, url: configuration.hospitalisationURL,
                                         what: "RKI hospitalisation download", attemptFailed: attemptFailed) { data, file throws(DataError) in
            try HospitalisationCSV.parse(data, file: file)
        }
        let icu = try await refresh(before.icu, ask: validators != nil, url: configuration.icuURL,
                                    what: "RKI intensive-care download", attemptFailed: attemptFailed) { data, file throws(DataError) in
            try IntensiveCareCSV.parse(data, file: file)
        }
        held.withLock { $0 = (hospital, icu) }
        let version = Self.version(hospital.validators, icu.validators)
        if let validators, validators == version { return .notModified }
        let fresh = StateIndicators(hospital.table.series + icu.table.series)
        let previous = before.hospital.flatMap { h in before.icu.map { StateIndicators(h.table.series + $0.table.series) } }
        let (indicators, changed) = fresh.keepingPublished(previous)
        if changed > 0 {
            logger.notice("published values changed in the new files; the values first read are kept",
                          metadata: ["values": "\(changed)"])
        }
        let newest = try indicators.dataset(region: configuration.region, source: name)
        let earlier = indicators.datasets(before: newest.date, count: configuration.windowDays - 1,
                                          region: configuration.region, source: name)
        return .publication(Publication(newest: newest, earlier: earlier, validators: version))
    }

    /// One file: unchanged (`304`) keeps what is held; a new version is parsed whole.
    private func refresh(_ held: Held?, ask: Bool, url: String, what: String,
                         attemptFailed: (@Sendable (DataError) -> Void)?,
                         parse: @escaping @Sendable (Data, String) throws(DataError) -> IndicatorTable) async throws(DataError) -> Held {
        let download = FileDownload(
            url: url, stallTimeout: configuration.stallTimeout, timeout: configuration.timeout, clock: configuration.clock,
            retry: configuration.retry, userAgent: configuration.userAgent, maxBodyBytes: configuration.maxBodyBytes,
            httpClient: httpClient, logger: logger, what: what)
        let file = URL(string: url)?.lastPathComponent ?? url
        let validators = ask ? held?.validators : nil
        switch try await download.fetch(ifChanged: validators, attemptFailed: attemptFailed, makeParser: {
            WholeFileParse(file: file, parse: parse)
        }) {
        case .notModified:
            guard let held else { throw DataError(.malformed, "\(file): 304 Not Modified to a request without validators") }
            return held
        case .changed(let table, let received):
            return Held(table: table, validators: received)
        }
    }

    /// Both files' versions as one: the store compares it as it compares one file's.
    static func version(_ hospital: HTTPValidators?, _ icu: HTTPValidators?) -> HTTPValidators {
        func tag(_ validators: HTTPValidators?) -> String { validators?.etag ?? validators?.lastModified ?? "-" }
        return HTTPValidators(etag: "\(tag(hospital)) \(tag(icu))", lastModified: nil)
    }
}

/// A whole file collected and parsed at its end: the indicator files are a few MB, and
/// their checks (every day has every state) need all rows anyway.
final class WholeFileParse: StreamingFileParser {
    let file: String
    let parse: @Sendable (Data, String) throws(DataError) -> IndicatorTable
    var data = Data()

    init(file: String, parse: @escaping @Sendable (Data, String) throws(DataError) -> IndicatorTable) {
        self.file = file
        self.parse = parse
    }

    func consume(_ chunk: UnsafeRawBufferPointer) throws(DataError) {
        data.append(contentsOf: chunk)
    }

    func finish() throws(DataError) -> IndicatorTable {
        try parse(data, file)
    }
}
