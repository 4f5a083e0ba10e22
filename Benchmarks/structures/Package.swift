// swift-tools-version:6.1
import PackageDescription

// The daemon's hand-written structures against the libraries that could replace them (issue 20).
// CompactMap.swift, InternetTime.swift and Day.swift are symlinks to the shipped files.
let package = Package(
    name: "StructuresBenchmark",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
    ],
    targets: [
        // Only Day.swift, which InternetTime needs, under the module name it imports.
        .target(name: "AmpelDomain"),
        // VmRSS and malloc statistics, without Foundation.
        .target(name: "CMallocStats"),
        .target(name: "ProcessStats", dependencies: ["CMallocStats"]),
        // Speed, heap bytes and copy-on-write of both maps; speed and accepted inputs of the time formats.
        .executableTarget(
            name: "StructuresBenchmark",
            dependencies: [
                "AmpelDomain", "ProcessStats",
                .product(name: "OrderedCollections", package: "swift-collections"),
            ]
        ),
        // One process per way of writing a timestamp, each linking only what that way needs:
        // the resident memory of linking and using it once.
        .executableTarget(name: "ProbeBare", dependencies: ["AmpelDomain", "ProcessStats"]),
        .executableTarget(name: "ProbeEssentials", dependencies: ["ProcessStats"]),
        .executableTarget(name: "ProbeFoundation", dependencies: ["AmpelDomain", "ProcessStats"]),
    ]
)
