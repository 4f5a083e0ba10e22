import Foundation

/// A JSON file Ampel writes for itself with a format name and a version: the dataset cache
/// and the publication history. Both are read the same way, with the same errors.
protocol VersionedJSONFile: Decodable {
    var format: String { get }
    var version: Int { get }
}

extension VersionedJSONFile {
    /// Reads and decodes the file at `url`; `nil` when there is none.
    ///
    /// - Parameters:
    ///   - what: the file's kind in errors (`cache`: "the cache file '…' is not a valid cache").
    ///   - format: the format name the file must carry.
    ///   - version: the version the file must carry.
    /// - Throws: ``DataError`` `io` when it cannot be read, `malformed` when it is not this
    ///   format or version.
    static func read(at url: URL, what: String, format: String, version: Int) throws(DataError) -> Self? {
        let path = url.path
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw DataError(.io, "cannot read the \(what) file '\(path)': \(error.localizedDescription)")
        }
        let file: Self
        do {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            file = try decoder.decode(Self.self, from: data)
        } catch {
            throw DataError(.malformed, "the \(what) file '\(path)' is not a valid \(what) (\(data.count) bytes): \(ArcGISDecoder.short(error))")
        }
        guard file.format == format, file.version == version else {
            throw DataError(.malformed, "the \(what) file '\(path)' has format '\(file.format)' version \(file.version), expected '\(format)' version \(version)")
        }
        return file
    }
}
