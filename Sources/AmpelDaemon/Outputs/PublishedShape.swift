import AmpelDomain

/// What a run's device states look like apart from the data and the fixes: the format of the
/// state JSON, the base topic they go under, the rule set, whether the texts are inline or on
/// which retained texts topics, the default language and each configured device language.
///
/// A device that sends nothing keeps the state an earlier run retained for it. When a start
/// finds another shape than the last run left (``PublishedShapeFile``), its first device walk
/// republishes every device's state and the texts topics no longer named are emptied; with the
/// same shape it republishes only what the data changed. Without this, a restart with another
/// rule set or language left parked devices naming the old rule set, language and texts topic.
struct PublishedShape: Codable, Sendable, Hashable {
    /// Raised whenever the device state JSON gains, loses or changes a key, so that the first
    /// start after an upgrade republishes the states an older release left retained.
    static let stateFormat = 2

    /// Everything but the texts topics, as one comparable string.
    var fingerprint: String
    /// The retained texts topics of the run (empty with `outputs.texts_in_state`), sorted.
    var texts: [String]
    /// The retained state report topics of the run (``Topics/stateReport(_:)``; none under an
    /// incidence set), sorted: those the next run does not publish are emptied.
    var states: [String]

    init(fingerprint: String, texts: [String], states: [String] = []) {
        self.fingerprint = fingerprint
        self.texts = texts
        self.states = states
    }

    private enum Keys: String, CodingKey { case fingerprint, texts, states }

    /// A record of a release before the state reports has no `states`: it published none.
    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        fingerprint = try c.decode(String.self, forKey: .fingerprint)
        texts = try c.decode([String].self, forKey: .texts)
        states = try c.decodeIfPresent([String].self, forKey: .states) ?? []
    }

    /// What a start assumes when a state directory with devices has no record: an earlier
    /// release's, unknown, so every state goes out once.
    static let unknown = PublishedShape(fingerprint: "", texts: [])

    init(base: String, ruleSet: String, textsInState: Bool, defaultLanguage: Language, deviceLanguages: [String: Language],
         texts: [String], states: [String] = []) {
        let devices = deviceLanguages.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value.rawValue)" }
        // Keys cannot hold a newline (docs/topics.md, device keys), so the parts stay apart.
        fingerprint = ["format=\(Self.stateFormat)", "base=\(base)", "ruleSet=\(ruleSet)", "texts=\(textsInState ? "inline" : "topics")",
                       "lang=\(defaultLanguage.rawValue)", "devices:"].joined(separator: "\n") + "\n" + devices.joined(separator: "\n")
        self.texts = texts.sorted()
        self.states = states.sorted()
    }
}
