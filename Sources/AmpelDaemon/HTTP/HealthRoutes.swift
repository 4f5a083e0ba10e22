import AmpelDomain
import Foundation
import Hummingbird

/// `/healthz` (the process answers) and `/readyz` (data loaded, broker connected, subscribed).
enum HealthRoutes {
    /// `{"dataDate","held","kind","lastCheck","lastError","source","stale"}`: which data is in
    /// force and how its source fares, in the words of `bridge/info`; `null` before any data.
    static func writeData(_ feed: FeedState?, to json: inout JSONWriter) {
        guard let feed else {
            json.raw("null")
            return
        }
        json.raw(#"{"dataDate":"#)
        json.string(feed.dataset.date.iso)
        json.raw(#","held":"#)
        json.string(feed.status?.held)
        json.raw(#","kind":"#)
        json.string(feed.kind.rawValue)
        json.raw(#","lastCheck":"#)
        json.string(feed.status?.lastCheck.map { InternetTime.format(secondsSince1970: $0.timeIntervalSince1970) })
        json.raw(#","lastError":"#)
        json.string(feed.lastError)
        json.raw(#","source":"#)
        json.string(feed.dataset.source)
        json.raw(#","stale":"#)
        json.bool(feed.stale)
        json.raw("}")
    }

    static func add(to router: some RouterMethods<BasicRequestContext>, view: StatusView) {
        router.get("healthz") { _, _ in
            HTTPResponses.json(Array(#"{"status":"ok"}"#.utf8))
        }
        router.get("readyz") { _, _ in
            let snapshot = view.snapshot()
            let problem = snapshot.readiness.problem
            var json = JSONWriter(capacity: 256)
            json.raw(#"{"data":"#)
            writeData(snapshot.feed, to: &json)
            if let problem {
                // As every other error answer: the status's phrase, then the reason.
                json.raw(#","error":"#)
                json.string(HTTPResponse.Status.serviceUnavailable.reasonPhrase)
                json.raw(#","reason":"#)
                json.string(problem)
            } else if let degraded = snapshot.readiness.degraded {
                // Ready (200: it serves, and a unit's start check passes), but not wholly.
                json.raw(#","reason":"#)
                json.string(degraded)
            }
            json.raw(#","status":"#)
            json.string(problem != nil ? "unavailable" : snapshot.readiness.degraded != nil ? "degraded" : "ready")
            json.raw("}")
            return HTTPResponses.json(json.bytes, status: problem == nil ? .ok : .serviceUnavailable)
        }
    }
}
