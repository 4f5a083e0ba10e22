import AmpelCore
import AmpelDomain

extension SignalEngine {
    struct Settings: Sendable {
        var ruleSet: RuleSet
        var region: Region
        var topics: Topics
        var defaultLanguage: Language
        var devices: [String: DaemonConfiguration.DeviceSettings]
        /// Message expiry of alerts; `nil` for none (MQTT 3.1.1 has no expiry).
        var alertExpiry: Duration?
        var lamps: [LampSettings]
        /// `nil` turns discovery off.
        var discovery: Discovery?
        /// What earlier runs may have announced (``DiscoveryScopeFile``): what of it the
        /// current ``discovery`` does not announce is removed at start.
        var announcedDiscovery: [DiscoveryScope]
        /// The shape of the states the last run left retained (``PublishedShapeFile``); another
        /// than this run's republishes every device state at start. `nil`: take it as this run's.
        var publishedShape: PublishedShape?
        /// Alerts to the OwnTracks apps of devices that report as `owntracks/<user>/<device>`;
        /// `nil` for none (`notify.owntracks: false`).
        var owntracks: OwnTracksNotices?
        /// Devices republished per batch after a reconnect (state and discovery config each),
        /// and devices re-evaluated (and announced) per batch after new data and at start; the
        /// daemon handles what arrived in between before it asks for the next batch. A fix that
        /// arrives meanwhile waits for at most one batch: 500 devices' configs and states take
        /// about 10 ms to build (2,000 held fixes back 40 ms at 1,000,000 devices).
        var recoveryBatch: Int
        /// A fix older than this when it arrives (its `tst` against the time it arrived) moves
        /// no device into another phase and so alerts no one, not even as a first sighting
        /// (``DeviceRecord/announced``); `nil` for no limit.
        var maxFixAge: Duration?
        /// A fix whose `acc` is above this many metres moves no device into another district;
        /// `nil` for no limit.
        var maxAccuracy: Double?
        /// How long a device must stay in a new phase it moved into before its alert goes out.
        var minDwell: Dwell
        /// The webhooks, in the order of ``Action/notify(webhook:payload:)``'s index.
        var webhooks: [WebhookSettings]
        /// A device whose last fix is older than this is forgotten (``Event/forget(now:)``);
        /// `nil` never forgets.
        var forgetAfter: Duration?
        /// When device states go out and whether states carry the texts (`outputs`).
        var outputs: DaemonConfiguration.OutputSettings
        /// District states, phases and alerts (with their webhooks) and the bridge's and the
        /// districts' discovery configs (`outputs.districts`). Off on every instance of a
        /// partitioned deployment but one: the district topics are the same for all.
        var publishDistricts = true
        /// How long after a new device's discovery configs its first alert goes to Home
        /// Assistant's event entity (``Decision/HomeAssistantEvent``).
        var newEntityDelay: Duration = .seconds(2)

        init(ruleSet: RuleSet, region: Region = .bavaria, topics: Topics = Topics(), defaultLanguage: Language = .en,
                    devices: [String: DaemonConfiguration.DeviceSettings] = [:], alertExpiry: Duration? = .seconds(3600),
                    lamps: [LampSettings] = [], discovery: Discovery? = nil, announcedDiscovery: [DiscoveryScope] = [],
                    publishedShape: PublishedShape? = nil, owntracks: OwnTracksNotices? = nil, recoveryBatch: Int = 500,
                    maxFixAge: Duration? = nil, maxAccuracy: Double? = nil, minDwell: Dwell = .none, webhooks: [WebhookSettings] = [],
                    forgetAfter: Duration? = nil, outputs: DaemonConfiguration.OutputSettings = .init()) {
            self.webhooks = webhooks
            self.forgetAfter = forgetAfter
            self.outputs = outputs
            self.ruleSet = ruleSet
            self.region = region
            self.topics = topics
            self.defaultLanguage = defaultLanguage
            self.devices = devices
            self.alertExpiry = alertExpiry
            self.lamps = lamps
            self.discovery = discovery
            self.announcedDiscovery = announcedDiscovery
            self.publishedShape = publishedShape
            self.owntracks = owntracks
            self.recoveryBatch = max(1, recoveryBatch)
            self.maxFixAge = maxFixAge
            self.maxAccuracy = maxAccuracy
            self.minDwell = minDwell
        }
    }
}
