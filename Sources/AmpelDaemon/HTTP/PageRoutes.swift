import AmpelCore
import AmpelData
import AmpelDomain
import AmpelGeo
import AmpelPage
import Hummingbird

/// The status page (`/`) and the district pages (`/districts/{ags}`): the glue between the
/// ``StatusView`` and the pure renderers of `AmpelPage` (docs/http.md, "The page").
///
/// The page shows what the daemon published (the districts' signals of the last hand-over),
/// never a classification of its own.
enum PageRoutes {
    /// Nothing the page needs comes from elsewhere, and the browser is told to load nothing
    /// from elsewhere either: the style and script are inline, the API is on this origin.
    static let contentSecurityPolicy =
        "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'"

    static func add(to router: some RouterMethods<BasicRequestContext>, context: HTTPRoutes.Context) {
        let view = context.view
        router.get("/") { request, _ in
            let snapshot = view.snapshot()
            guard let ruleSet = snapshot.ruleSet else { return notReady(snapshot) }
            let shapes: MapShapes
            do {
                shapes = try MapShapes.bundled(prefixes: ruleSet.region.prefixes)
            } catch {
                throw APIError(.internalServerError, "the bundled geometry is unreadable: \(error)")
            }
            let model = StatusPageModel(
                language: language(request, configured: context.pageLanguage), ruleSet: ruleSet, data: data(snapshot),
                districts: Dictionary(snapshot.districts.map { ($0.ags, status($0)) }, uniquingKeysWith: { first, _ in first }),
                states: states(snapshot, ruleSet: ruleSet, language: language(request, configured: context.pageLanguage)))
            return html(StatusPage.render(model, shapes: shapes))
        }
        router.get("districts/:ags") { request, requestContext in
            let snapshot = view.snapshot()
            guard let ruleSet = snapshot.ruleSet else { return notReady(snapshot) }
            let district = try APIRoutes.district(requestContext, in: snapshot)
            let pageLanguage = language(request, configured: context.pageLanguage)
            var model = DistrictPageModel(
                language: pageLanguage, ruleSet: ruleSet, data: data(snapshot),
                district: status(district), history: BundledData.shared.dailyHistory.series(ags: district.ags))
            model.states = states(snapshot, ruleSet: ruleSet, language: pageLanguage).filter { $0.id == "00" || district.ags.hasPrefix($0.id) }
            // The reason in the page's language: the state's report says it as the district's signal does.
            if model.district.reason != nil, let own = model.states.first(where: { district.ags.hasPrefix($0.id) && $0.id != "00" }) {
                model.district.reason = own.reason
            }
            return html(DistrictPage.render(model))
        }
    }

    /// `?lang=` (the page's language link) wins, then the configured `lang`; the browser's
    /// `Accept-Language` only where no `lang` is configured.
    static func language(_ request: Request, configured: Language?) -> Language {
        PageLanguage.choose(query: request.uri.queryParameters.get("lang"), configured: configured,
                            acceptLanguage: request.headers[.acceptLanguage])
    }

    /// The data in force as `bridge/info` says it (the feed's state, which the script polls),
    /// so the first render shows the same badge and lines as the polls after it.
    static func data(_ snapshot: StatusView.Snapshot) -> PageDataStatus {
        guard let feed = snapshot.feed else {
            return PageDataStatus(dataDate: snapshot.dataset?.date.iso, source: snapshot.dataset?.source ?? "", stale: snapshot.stale)
        }
        return PageDataStatus(dataDate: feed.dataset.date.iso, source: feed.dataset.source, stale: feed.stale,
                              kind: PageDataKind(rawValue: feed.kind.rawValue), lastError: feed.lastError, held: feed.status?.held)
    }

    /// Germany and the region's states, where the data in force has state indicators.
    static func states(_ snapshot: StatusView.Snapshot, ruleSet: RuleSet, language: Language) -> [StateReport] {
        guard let dataset = snapshot.dataset, !dataset.states.isEmpty else { return [] }
        let region = Set(snapshot.districts.map { String($0.ags.prefix(2)) })
        return StateReport.all(dataset, ruleSet: ruleSet, language: language).filter { $0.id == "00" || region.contains($0.id) }
    }

    /// A district's published signal as the page draws it.
    static func status(_ district: StatusView.District) -> DistrictStatus {
        let signal = district.signal
        let phase: DistrictStatus.Phase =
            if let id = signal.phaseID { .phase(id) } else if signal.phase == OutsideMarker.id { .outside } else { .noData }
        return DistrictStatus(ags: district.ags, name: signal.district?.name ?? district.ags, incidence: signal.incidence,
                              phase: phase, color: RGB(hex: signal.color), reason: signal.incidence == nil ? signal.reason : nil)
    }

    static func html(_ text: String) -> Response {
        var response = HTTPResponses.text(text, contentType: "text/html; charset=utf-8")
        response.headers[.contentSecurityPolicy] = contentSecurityPolicy
        response.headers[.cacheControl] = "no-store"
        return response
    }

    /// Before the loop's first hand-over there is no rule set to draw with; what it waits for
    /// (the broker's error, while the connect is retried) is said.
    static func notReady(_ snapshot: StatusView.Snapshot) -> Response {
        let waiting = snapshot.readiness.problem ?? "data not loaded"
        var response = HTTPResponses.text("Ampel is starting: \(waiting).\n", status: .serviceUnavailable)
        response.headers[.retryAfter] = "1"
        return response
    }
}
