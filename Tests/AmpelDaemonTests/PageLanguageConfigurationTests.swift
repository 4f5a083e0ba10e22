@testable import AmpelDaemon
import AmpelDomain
import Foundation
import Testing

/// What the HTTP layer takes from the configuration for the page: whether `lang` was given
/// (only then does the page open in it rather than in the browser's language), and each
/// device's language as its state carries it.
@Suite("The page's language from the configuration")
struct PageLanguageConfigurationTests {
    func context(_ configuration: DaemonConfiguration) -> HTTPRoutes.Context {
        HTTPRoutes.Context(view: StatusView(), locator: NoLocator(), configuration: configuration, metrics: nil)
    }

    @Test("lang in the file, AMPEL_LANG or --lang is the page's language; left at its default, none is")
    func configuredOrNot() throws {
        let none = try DaemonConfiguration.load(yaml: "base_topic: ampel\n")
        #expect(none.language == .en && !none.languageConfigured)
        #expect(context(none).pageLanguage == nil)
        let file = try DaemonConfiguration.load(yaml: "lang: de\n")
        #expect(context(file).pageLanguage == .de)
        let variable = try DaemonConfiguration.load(yaml: nil, environment: ["AMPEL_LANG": "de"])
        #expect(context(variable).pageLanguage == .de)
        // `en` given is a choice too: it wins over a German browser.
        let flag = try DaemonConfiguration.load(yaml: nil, flags: ConfigurationOverrides(lang: "en"))
        #expect(flag.languageConfigured && context(flag).pageLanguage == .en)
    }

    @Test("a device's state language: its configured one, else the one it asked for, else the daemon's")
    func stateLanguage() throws {
        let configuration = try DaemonConfiguration.load(yaml: "lang: de\ndevices:\n  bob/car: {lang: en}\n")
        let context = context(configuration)
        #expect(context.stateLanguage(device: "alice/phone", messageLang: nil) == .de)
        #expect(context.stateLanguage(device: "alice/phone", messageLang: "en") == .en)
        #expect(context.stateLanguage(device: "bob/car", messageLang: nil) == .en)
        #expect(context.stateLanguage(device: "bob/car", messageLang: "de") == .en)
    }
}

/// Places nothing: these tests ask no route.
private struct NoLocator: Locator {
    func place(latitude: Double, longitude: Double) -> Signal.DistrictRef? { nil }
}
