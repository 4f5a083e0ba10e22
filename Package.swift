// swift-tools-version:6.1
import PackageDescription

// Ampel: device positions in, Corona traffic-light signals out.
// The targets and how a location travels through them: docs/DESIGN.md, "Modules".

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "Ampel",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "ampel", targets: ["ampel"]),
        .library(name: "AmpelCore", targets: ["AmpelCore"]),
        .library(name: "AmpelDomain", targets: ["AmpelDomain"]),
        .library(name: "AmpelLamp", targets: ["AmpelLamp"]),
        .library(name: "AmpelGeo", targets: ["AmpelGeo"]),
        .library(name: "AmpelData", targets: ["AmpelData"]),
        .library(name: "AmpelMessages", targets: ["AmpelMessages"]),
        .library(name: "AmpelMQTT", targets: ["AmpelMQTT"]),
        .library(name: "AmpelPage", targets: ["AmpelPage"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "5.0.0"),
        // The HTTP face of `ampel run` (docs/http.md) and its Prometheus metrics.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // Phases, colours, bounds: no Foundation, no existentials; also compiles as Embedded Swift.
        .target(name: "AmpelCore", swiftSettings: strict),
        // The lamp state machine and payload scanner; Embedded Swift as well.
        .target(name: "AmpelLamp", dependencies: ["AmpelCore"], swiftSettings: strict),
        // Rule sets as data, texts in de/en, districts, datasets, signals. Pure.
        .target(
            name: "AmpelDomain",
            dependencies: ["AmpelCore"],
            resources: [.copy("Resources/rulesets"), .copy("Resources/districts")],
            swiftSettings: strict
        ),
        // District geometry and the spatial index.
        .target(
            name: "AmpelGeo",
            resources: [.copy("Resources/geometry")],
            swiftSettings: strict
        ),
        // Incidence sources: bundled snapshots and history, the live RKI client, cache, refresh.
        .target(
            name: "AmpelData",
            dependencies: [
                "AmpelCore", "AmpelDomain", "CAmpelCurl",
                .product(name: "Logging", package: "swift-log"),
            ],
            resources: [.copy("Resources/rki"), .copy("Resources/indicators")],
            swiftSettings: strict
        ),
        // The status page's pure rendering: map and chart SVG, HTML, texts (no server, no I/O
        // beyond reading the bundled geometry once).
        .target(
            name: "AmpelPage",
            dependencies: ["AmpelCore", "AmpelDomain", "AmpelGeo"],
            swiftSettings: strict
        ),
        // The messages the engine decides and the MQTT client sends (`OutgoingMessage`, `MQTTQoS`):
        // their own module, so that the pure engine does not depend on the client. Not in AmpelCore,
        // which also compiles as Embedded Swift (a hashed String needs Unicode tables a board lacks).
        .target(name: "AmpelMessages", swiftSettings: strict),
        // libcurl, Ampel's HTTP client (AmpelData's HTTPClient): the system's, with its TLS and CA
        // store; the C functions Swift needs around its variadic setters.
        .target(name: "CAmpelCurl", linkerSettings: [.linkedLibrary("curl")]),
        // The Linux calls (thread names, scheduling classes, malloc tuning, eventfd wake-ups).
        .target(name: "CAmpelLinux"),
        // libmosquitto, seen only by AmpelMQTT.
        .systemLibrary(
            name: "CMosquitto",
            pkgConfig: "libmosquitto",
            providers: [.apt(["libmosquitto-dev"])]
        ),
        .target(
            name: "AmpelMQTT",
            dependencies: [
                "AmpelCore", "AmpelMessages", "CMosquitto", "CAmpelLinux",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The composition root of `ampel run`.
        .target(
            name: "AmpelDaemon",
            dependencies: [
                "AmpelCore", "AmpelMessages", "AmpelDomain", "AmpelGeo", "AmpelData", "AmpelMQTT", "AmpelPage", "CAmpelLinux",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            // The crash tests' fault injection (Sources/AmpelDaemon/ForTesting) is in the debug
            // builds the tests run, never in the release binary.
            swiftSettings: strict + [.define("AMPEL_FAULT_INJECTION", .when(configuration: .debug))]
        ),
        .executableTarget(
            name: "ampel",
            dependencies: [
                "AmpelCore", "AmpelMessages", "AmpelDomain", "AmpelGeo", "AmpelData", "AmpelMQTT", "AmpelLamp", "AmpelDaemon",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // Benchmarks (run in release by scripts in Benchmarks/; never part of the tests).
        .executableTarget(
            name: "AmpelBenchmarks",
            dependencies: ["AmpelMessages", "AmpelGeo", "AmpelMQTT", "AmpelDomain", "AmpelData", "AmpelDaemon", "AmpelSyntheticData"],
            swiftSettings: strict
        ),

        // The RKI district file built from real data (every district, every day, values set per
        // test): for the tests and the benchmarks, so that neither depends on the other.
        .target(name: "AmpelSyntheticData", swiftSettings: strict),
        // Test helpers: a real mosquitto on a free port, a loopback HTTP fixture server, the built binary.
        .target(
            name: "AmpelTestSupport",
            dependencies: [
                "AmpelSyntheticData",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tests/AmpelTestSupport",
            swiftSettings: strict
        ),
        .testTarget(name: "AmpelCoreTests", dependencies: ["AmpelCore"]),
        .testTarget(name: "AmpelLampTests", dependencies: ["AmpelLamp", "AmpelCore"]),
        .testTarget(name: "AmpelDomainTests", dependencies: ["AmpelDomain", "AmpelCore"]),
        .testTarget(name: "AmpelGeoTests", dependencies: ["AmpelGeo"]),
        .testTarget(name: "AmpelPageTests", dependencies: ["AmpelPage", "AmpelCore", "AmpelDomain", "AmpelGeo", "AmpelData"]),
        .testTarget(
            name: "AmpelDataTests",
            dependencies: ["AmpelData", "AmpelDomain", "AmpelTestSupport"],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(name: "AmpelMQTTTests", dependencies: ["AmpelCore", "AmpelMessages", "AmpelMQTT", "AmpelTestSupport", "CAmpelLinux"]),
        // Test-only: a client process the MQTT tests can kill -9 (Last Will).
        .executableTarget(
            name: "ampel-mqtt-probe",
            dependencies: ["AmpelMessages", "AmpelMQTT"],
            path: "Tests/AmpelMQTTProbe",
            swiftSettings: strict
        ),
        .testTarget(
            name: "AmpelDaemonTests",
            dependencies: [
                "AmpelCore", "AmpelMessages", "AmpelDaemon", "AmpelMQTT", "AmpelData", "AmpelDomain", "AmpelGeo", "AmpelTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ],
            // Recorded tracks (Fixtures/tracks/README.md) replayed through the engine.
            resources: [.copy("Fixtures")]
        ),
        // Every test that runs the built `ampel` binary, one file per command, fixtures next to them.
        .testTarget(
            name: "AmpelCLITests",
            // AmpelMQTT: a QoS 1 load publisher for the stop-under-load test (one client, many device topics).
            dependencies: ["AmpelCore", "AmpelMessages", "AmpelData", "AmpelDomain", "AmpelGeo", "AmpelMQTT", "AmpelTestSupport"],
            resources: [.copy("Fixtures")]
        ),
    ]
)
