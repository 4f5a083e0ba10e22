import AmpelData
import AmpelDomain
import Foundation
import Testing

/// The on-disk cache of the last good dataset.
@Suite struct DatasetCacheTests {
    @Test func aSavedDatasetReadsBackEqual() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = DatasetCache(directory: directory.appendingPathComponent("state/nested"))
        #expect(try cache.load() == nil, "no cache yet")
        for snapshotDay in BundledData.snapshotDays {
            let dataset = try BundledData.shared.snapshot(on: snapshotDay)
            let savedAt = isoDate("2020-11-24T10:15:00Z")
            try cache.save(dataset, savedAt: savedAt)
            let entry = try #require(try cache.load())
            #expect(entry.dataset == dataset)
            #expect(entry.savedAt == savedAt)
        }
        let history = try BundledData.shared.history(on: day("2021-01-10"))
        try cache.save(history)
        #expect(try cache.load()?.dataset == history)
    }

    @Test func writingLeavesOnlyTheCacheFileAndReplacesRatherThanOverwrites() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = DatasetCache(directory: directory)
        try cache.save(BundledData.shared.snapshot(on: day("2020-11-05")))
        let old = try Data(contentsOf: cache.fileURL)
        // A reader that opened the old file keeps reading the whole old file: the new one is
        // renamed over it, never written into it.
        let reader = try FileHandle(forReadingFrom: cache.fileURL)
        defer { try? reader.close() }
        try cache.save(BundledData.shared.snapshot(on: day("2020-11-23")))
        #expect(try reader.readToEnd() == old)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == [DatasetCache.fileName])
        #expect(try cache.load()?.dataset.date == day("2020-11-23"))
    }

    @Test func aFailedWriteKeepsTheOldFileAndLeavesNoTemporaryFile() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        // The cache path is a non-empty directory: the rename fails after the temporary file was written.
        let cache = DatasetCache(directory: directory)
        try FileManager.default.createDirectory(at: cache.fileURL, withIntermediateDirectories: true)
        try Data("x".utf8).write(to: cache.fileURL.appendingPathComponent("keep"))
        let error = #expect(throws: DataError.self) { try cache.save(BundledData.shared.snapshot()) }
        #expect(error?.reason == .io)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == [DatasetCache.fileName])
        #expect(try FileManager.default.contentsOfDirectory(atPath: cache.fileURL.path) == ["keep"])
    }

    @Test func aStateDirectoryThatCannotBeCreatedIsAnIOError() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("a-file")
        try Data("x".utf8).write(to: file)
        let cache = DatasetCache(directory: file.appendingPathComponent("state"))
        let error = #expect(throws: DataError.self) { try cache.save(BundledData.shared.snapshot()) }
        #expect(error?.reason == .io)
    }

    static let corrupt: [(String, DataError.Reason)] = [
        ("", .malformed),
        ("not json", .malformed),
        ("{\"format\": \"ampel-incidence-cache\", \"version\": 1", .malformed),
        ("{\"format\":\"something-else\",\"version\":1,\"savedAt\":\"2020-11-05T10:00:00Z\",\"date\":\"2020-11-05\",\"source\":\"rki\",\"districts\":[]}", .malformed),
        ("{\"format\":\"ampel-incidence-cache\",\"version\":2,\"savedAt\":\"2020-11-05T10:00:00Z\",\"date\":\"2020-11-05\",\"source\":\"rki\",\"districts\":[]}", .malformed),
        ("{\"format\":\"ampel-incidence-cache\",\"version\":1,\"savedAt\":\"2020-11-05T10:00:00Z\",\"date\":\"2020-11-05\",\"source\":\"rki\",\"districts\":[]}", .empty),
        ("{\"format\":\"ampel-incidence-cache\",\"version\":1,\"savedAt\":\"2020-11-05T10:00:00Z\",\"date\":\"2020-13-05\",\"source\":\"rki\",\"districts\":[]}", .malformed),
        (row(ags: "09162", incidence: "-1"), .invalidValue),
        (row(ags: "9162", incidence: "50"), .invalidValue),
        (row(ags: "09162", incidence: "50", twice: true), .duplicateDistrict),
    ]

    static func row(ags: String, incidence: String, twice: Bool = false) -> String {
        let one = "{\"ags\":\"\(ags)\",\"name\":\"SK München\",\"shortName\":\"München\",\"kind\":\"SK\",\"state\":\"Bayern\",\"population\":1484226,\"incidence\":\(incidence),\"stateIncidence\":null}"
        return "{\"format\":\"ampel-incidence-cache\",\"version\":1,\"savedAt\":\"2020-11-05T10:00:00Z\",\"date\":\"2020-11-05\",\"source\":\"rki\",\"districts\":[\(twice ? one + "," + one : one)]}"
    }

    @Test(arguments: corrupt)
    func aCorruptFileIsAnErrorNotACrash(text: String, reason: DataError.Reason) throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = DatasetCache(directory: directory)
        try Data(text.utf8).write(to: cache.fileURL)
        let error = #expect(throws: DataError.self) { try cache.load() }
        #expect(error?.reason == reason, "\(error?.message ?? "")")
    }

    @Test func aValidHandWrittenFileLoads() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = DatasetCache(directory: directory)
        try Data(Self.row(ags: "09162", incidence: "177.3").utf8).write(to: cache.fileURL)
        let entry = try #require(try cache.load())
        #expect(entry.dataset["09162"]?.incidence == 177.3)
        #expect(entry.dataset["09162"]?.district.kind == .city)
    }

    @Test func aTruncatedCacheFileIsMalformed() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = DatasetCache(directory: directory)
        try cache.save(BundledData.shared.snapshot())
        let whole = try Data(contentsOf: cache.fileURL)
        try whole.prefix(whole.count / 2).write(to: cache.fileURL)
        let error = #expect(throws: DataError.self) { try cache.load() }
        #expect(error?.reason == .malformed)
    }

    @Test func theDefaultDirectoryFollowsTheEnvironment() {
        #expect(DatasetCache.defaultDirectory(environment: ["AMPEL_STATE_DIR": "/srv/ampel", "HOME": "/home/x"]).path == "/srv/ampel")
        #expect(DatasetCache.defaultDirectory(environment: ["XDG_STATE_HOME": "/home/x/.st", "HOME": "/home/x"]).path == "/home/x/.st/ampel")
        #expect(DatasetCache.defaultDirectory(environment: ["HOME": "/home/x"]).path == "/home/x/.local/state/ampel")
    }
}
