// JSONValue without a server: kinds kept both ways, exact big integers, escapes, refusals, and a
// round trip through core's serde (classifyToolsCall hands back what Rust parsed and wrote).
import Foundation
import MCPTasks
import XCTest

final class JSONValueTests: XCTestCase {
    func testIntegersDoublesAndBooleansAreThreeKinds() throws {
        let parsed = try JSONValue(parsing: #"[1, 1.0, true, -0, 2.5e3, 1E2]"#)
        XCTAssertEqual(parsed, [.integer(1), .double(1.0), .bool(true), .double(-0.0), .double(2500), .double(100)])
        XCTAssertNotEqual(JSONValue.integer(1), JSONValue.double(1))
        XCTAssertNotEqual(JSONValue.integer(1), JSONValue.bool(true))
        XCTAssertEqual(JSONValue.double(1).jsonText, "1.0")
        XCTAssertEqual(JSONValue.integer(1).jsonText, "1")
        XCTAssertEqual(try JSONValue(parsing: JSONValue.double(1).jsonText), .double(1))
        XCTAssertEqual(JSONValue.double(1e20).jsonText, "1e+20")
        XCTAssertEqual(try JSONValue(parsing: "0.1").doubleValue, 0.1)
    }

    /// What a conforming peer may write, read as it means it (the 2026-12-02 regression: a
    /// `pollIntervalMs` written `500.0` was refused): floats where integers are expected, the
    /// sign of zero, integers past 2^53, each kept as written through core and back.
    func testNumbersAsAnyConformingPeerWritesThem() throws {
        let text = #"{"pollIntervalMs":500.0,"ttlMs":600000.0,"big":9007199254740993,"negZero":-0.0,"minus":-0}"#
        let parsed = try JSONValue(parsing: text)
        XCTAssertEqual(parsed["pollIntervalMs"], .double(500))
        XCTAssertEqual(parsed["big"], .integer(9_007_199_254_740_993))
        XCTAssertEqual(parsed["negZero"], .double(-0.0))
        XCTAssertEqual(parsed["minus"], .double(-0.0), "-0 is the double -0.0, as serde_json reads it")
        XCTAssertNotEqual(JSONValue.double(-0.0), JSONValue.double(0.0))
        XCTAssertNotEqual(Set([JSONValue.double(-0.0), .double(0.0)]).count, 1)
        XCTAssertEqual(JSONValue.double(-0.0).jsonText, "-0.0")
        // Core reads the creation with its float numbers and polls at 500 ms.
        let created: JSONValue = [
            "resultType": "task", "taskId": "f1", "status": "working", "createdAt": "2026-09-01T12:00:00.000Z",
            "lastUpdatedAt": "2026-09-01T12:00:00.000Z", "ttlMs": .double(600_000), "pollIntervalMs": .double(500),
        ]
        let driver = try TaskDriver(created: created, nowMs: 1_788_264_000_000)
        XCTAssertEqual(driver.pollTimeout(), 1_788_264_000_500)
        // And hands a result's numbers back as the server wrote them.
        let structured: JSONValue = ["one": 1, "onePointZero": 1.0, "big": parsed["big"]!, "negZero": .double(-0.0)]
        let classified = try classifyToolsCall(
            ["resultType": "complete", "content": [], "structuredContent": structured], declared: true)
        XCTAssertEqual(classified["result"]?["structuredContent"], structured, "\(classified)")
        XCTAssertEqual(classified["result"]?["structuredContent"]?["negZero"]?.doubleValue?.sign, .minus)
    }

    func testIntegersBeyondTwoToThe53StayExact() throws {
        let text = "[9007199254740993,-9223372036854775808,9223372036854775807]"
        let parsed = try JSONValue(parsing: text)
        XCTAssertEqual(parsed[0], .integer(9_007_199_254_740_993))
        XCTAssertEqual(parsed[1], .integer(Int64.min))
        XCTAssertEqual(parsed.jsonText, text)
        // Past 64 bits a number becomes the nearest double, as in most JSON libraries.
        XCTAssertEqual(try JSONValue(parsing: "18446744073709551616"), .double(18_446_744_073_709_551_616))
    }

    func testStringsEscapesAndUnicodeRoundTrip() throws {
        let value: JSONValue = ["quote\"back\\slash": "line\nfeed\ttab\u{01}é😀", "empty": ""]
        XCTAssertEqual(try JSONValue(parsing: value.jsonText), value)
        XCTAssertEqual(try JSONValue(parsing: #""\ud83d\ude00 \u00e9 \/""#), "😀 é /")
        XCTAssertEqual(try JSONValue(parsing: #""\ud800x""#), "\u{FFFD}x")
        XCTAssertEqual(JSONValue.string("\u{1F}").jsonText, #""\u001f""#)
        XCTAssertEqual(JSONValue.object(["b": 1, "a": 2]).jsonText, #"{"a":2,"b":1}"#)
    }

    func testMalformedTextIsRefusedWithItsOffset() {
        for text in ["", "01", "1.", "[1,]", #"{"a" 1}"#, "tru", #""\x""#, "[1] 2", "nul", #"{"a":1,}"#, "\"\u{01}\""] {
            XCTAssertThrowsError(try JSONValue(parsing: text), text) { error in
                XCTAssertTrue(error is JSONParseError, "\(text): \(error)")
            }
        }
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        XCTAssertThrowsError(try JSONValue(parsing: deep))
    }

    func testCodableAndLiterals() throws {
        struct Report: Codable, Equatable {
            let quarter: String
            let pages: Int
        }
        let value = try JSONValue(encoding: Report(quarter: "Q3", pages: 12))
        XCTAssertEqual(value, ["quarter": "Q3", "pages": 12])
        XCTAssertEqual(try value.decode(Report.self), Report(quarter: "Q3", pages: 12))
        let nested: JSONValue = ["list": [nil, false, 1, 1.5, "s"], "object": ["k": [:]]]
        let viaFoundation = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(nested))
        XCTAssertEqual(viaFoundation, nested)
        XCTAssertEqual(nested["list"]?[1]?.boolValue, false)
        XCTAssertNil(nested["missing"])
        XCTAssertTrue(nested["list"]?[0]?.isNull ?? false)
    }

    func testKindsSurviveARoundTripThroughCore() throws {
        let structured: JSONValue = [
            "integer": 1, "double": 1.0, "bool": true, "big": .integer(9_007_199_254_740_993),
            "negative": -2.5, "nested": ["list": [1, 1.0, false, nil]],
        ]
        let classified = try classifyToolsCall(
            ["resultType": "complete", "content": [], "structuredContent": structured], declared: true)
        XCTAssertEqual(classified["kind"], "complete")
        XCTAssertEqual(classified["result"]?["structuredContent"], structured, "\(classified)")
    }
}
