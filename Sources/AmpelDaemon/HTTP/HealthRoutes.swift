import Hummingbird

/// `/healthz` (the process answers) and `/readyz` (data loaded, broker connected, subscribed).
enum HealthRoutes {
    static func add(to router: some RouterMethods<BasicRequestContext>, view: StatusView) {
        router.get("healthz") { _, _ in
            HTTPResponses.json(Array(#"{"status":"ok"}"#.utf8))
        }
        router.get("readyz") { _, _ in
            let snapshot = view.snapshot()
            if let problem = snapshot.readiness.problem {
                return HTTPResponses.error(.serviceUnavailable, problem)
            }
            return HTTPResponses.json(Array(#"{"status":"ready"}"#.utf8))
        }
    }
}
