import AmpelDomain
import Hummingbird

/// Every route of `ampel run`'s HTTP server, registered in one place (docs/http.md).
enum HTTPRoutes {
    /// What the routes read: the daemon's ``StatusView`` and the parts of the configuration
    /// that decide answers.
    struct Context: Sendable {
        let view: StatusView
        let locator: any Locator
        let settings: DaemonConfiguration.HTTPSettings
        /// The daemon's language (`lang`, `en` when not configured).
        let language: Language
        /// `lang` when it was configured: the page's default over the browser's language.
        let pageLanguage: Language?
        /// `devices.<key>.lang`: the language of those devices' states whatever they ask for.
        let deviceLanguages: [String: Language]
        let metrics: DaemonMetrics?

        init(view: StatusView, locator: any Locator, settings: DaemonConfiguration.HTTPSettings, language: Language,
                    pageLanguage: Language? = nil, deviceLanguages: [String: Language] = [:], metrics: DaemonMetrics?) {
            self.view = view
            self.locator = locator
            self.settings = settings
            self.language = language
            self.pageLanguage = pageLanguage
            self.deviceLanguages = deviceLanguages
            self.metrics = metrics
        }

        /// The parts of `configuration` the routes read.
        init(view: StatusView, locator: any Locator, configuration: DaemonConfiguration, metrics: DaemonMetrics?) {
            self.init(view: view, locator: locator, settings: configuration.http, language: configuration.language,
                      pageLanguage: configuration.languageConfigured ? configuration.language : nil,
                      deviceLanguages: configuration.devices.compactMapValues(\.lang), metrics: metrics)
        }

        /// The language of a device's `state` topic: its configured one, else the one its messages
        /// asked for, else the daemon's (the engine's rule, `SignalEngine.language(device:messageLang:)`).
        func stateLanguage(device key: String, messageLang: String?) -> Language {
            deviceLanguages[key] ?? messageLang.map { Language(requested: $0) } ?? language
        }
    }

    /// The router with every route. `/healthz` and `/readyz` answer without credentials (a
    /// load balancer or systemd asks them, and they name no one); everything else asks for
    /// ``DaemonConfiguration/HTTPAuth`` once any is configured.
    static func router(_ context: Context) -> Router<BasicRequestContext> {
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
