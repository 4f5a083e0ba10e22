import AmpelDomain
import Hummingbird

/// Every route of `ampel run`'s HTTP server, registered in one place (docs/http.md).
public enum HTTPRoutes {
    /// What the routes read: the daemon's ``StatusView`` and the parts of the configuration
    /// that decide answers.
    public struct Context: Sendable {
        public let view: StatusView
        public let locator: any Locator
        public let settings: DaemonConfiguration.HTTPSettings
        public let language: Language
        public let metrics: DaemonMetrics?

        public init(view: StatusView, locator: any Locator, settings: DaemonConfiguration.HTTPSettings, language: Language,
                    metrics: DaemonMetrics?) {
            self.view = view
            self.locator = locator
            self.settings = settings
            self.language = language
            self.metrics = metrics
        }
    }

    /// The router with every route. `/healthz` and `/readyz` answer without credentials (a
    /// load balancer or systemd asks them, and they name no one); everything else asks for
    /// ``DaemonConfiguration/HTTPAuth`` once any is configured.
    public static func router(_ context: Context) -> Router<BasicRequestContext> {
        let router = Router()
        HealthRoutes.add(to: router, view: context.view)
        let protected = router.group()
        if context.settings.auth.isConfigured {
            protected.add(middleware: HTTPAuthMiddleware(auth: context.settings.auth))
        }
        APIRoutes.add(to: protected, context: context)
        if let metrics = context.metrics {
            MetricsRoutes.add(to: protected, view: context.view, metrics: metrics)
        }
        PageRoutes.add(to: protected, context: context)
        return router
    }
}
