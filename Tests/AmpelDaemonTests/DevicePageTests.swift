@testable import AmpelDaemon
import Testing

/// Paging of `/api/devices`: cursors name the last key of a page, so pages do not shift.
@Suite("Device pages")
struct DevicePageTests {
    let keys = ["alice/phone", "bob", "Carol", "dave", "éva", "zoe/car"].sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }

    @Test("pages follow each other without gaps or repeats; the last has no next")
    func pages() throws {
        var seen: [String] = []
        var after: String?
        repeat {
            let page = DevicePage.page(keys, after: after, matching: nil, limit: 4)
            #expect(page.total == keys.count)
            seen += page.keys
            after = page.next
        } while after != nil
        #expect(seen == keys)
    }

    @Test("a key added before the cursor moves no later device to another page")
    func stableUnderInsertion() throws {
        let first = DevicePage.page(keys, after: nil, matching: nil, limit: 3)
        let grown = (keys + ["aaron"]).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        let second = DevicePage.page(grown, after: first.next, matching: nil, limit: 3)
        #expect(second.keys == Array(keys[3...]))
    }

    @Test("q matches ASCII letters in any case; a page that ends the matches has no next")
    func search() {
        let page = DevicePage.page(keys, after: nil, matching: "O", limit: 2)
        #expect(page.keys == ["Carol", "alice/phone"].sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
        #expect(page.total == 4)
        let rest = DevicePage.page(keys, after: page.next, matching: "o", limit: 2)
        #expect(rest.keys == ["bob", "zoe/car"])
        #expect(rest.next == nil)
    }

    @Test("a cursor is URL-safe and names its key again; anything else is no cursor")
    func cursors() {
        for key in keys + ["a+b/c?d=e", "ü/ß"] {
            let cursor = DevicePage.cursor(for: key)
            #expect(cursor.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
            #expect(DevicePage.key(ofCursor: cursor) == key)
        }
        #expect(DevicePage.key(ofCursor: "%%") == nil)
        #expect(DevicePage.key(ofCursor: "a b") == nil)
    }
}
