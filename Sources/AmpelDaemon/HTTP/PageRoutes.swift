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
                districts: Dictionary(snapshot.districts.map { ($0.ags, status($0)) }, uniquingKeysWith: { first, _ in first }))
            return html(StatusPage.render(model, shapes: shapes))
        }
        router.get("districts/:ags") { request, requestContext in
            let snapshot = view.snapshot()
            guard let ruleSet = snapshot.ruleSet else { return notReady(snapshot) }
            let district = try APIRoutes.district(requestContext, in: snapshot)
            let model = DistrictPageModel(
                language: language(request, configured: context.pageLanguage), ruleSet: ruleSet, data: data(snapshot),
                district: status(district), history: BundledData.shared.dailyHistory.series(ags: district.ags))
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

    /// A district's published signal as the page draws it.
    static func status(_ district: StatusView.District) -> DistrictStatus {
        let signal = district.signal
        let phase: DistrictStatus.Phase =
            if let id = signal.phaseID { .phase(id) } else if signal.phase == OutsideMarker.id { .outside } else { .noData }
        return DistrictStatus(ags: district.ags, name: signal.district?.name ?? district.ags, incidence: signal.incidence,
                              phase: phase, color: RGB(hex: signal.color))
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
