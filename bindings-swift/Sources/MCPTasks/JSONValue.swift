// JSON as a value type that can cross actor boundaries: tool arguments, results, input requests
// and responses. Integers, doubles and booleans keep their kind both ways (`1`, `1.0` and `true`
// are three values), which Foundation's JSONSerialization (NSNumber) cannot promise, so the text
// crossing into Rust is parsed and written here, exactly.
import Foundation

/// A JSON value: `Sendable`, `Hashable` and `Codable`, with literals for every kind. Equality
/// keeps the kinds apart as the text does: `1`, `1.0` and `true` differ, and so do `0.0` and
/// `-0.0` (a peer that wrote `-0.0` meant it; core's serde keeps it too).
public enum JSONValue: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number written without a fraction or exponent that fits in 64 bits (exact beyond 2^53);
    /// `-0` is the double `-0.0`, as serde_json reads it.
    case integer(Int64)
    /// Any other number.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object (keys are written sorted, so the same value always gives the same text).
    case object([String: JSONValue])
}

/// JSON text that did not parse, with the byte offset where parsing stopped.
public struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was wrong.
    public let reason: String
    /// The offset in the text's UTF-8 bytes.
    public let offset: Int

    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

extension JSONValue {
    /// Parses JSON text; throws `JSONParseError` when it is not exactly one JSON value.
    public init(parsing text: String) throws {
        var parser = Parser(bytes: Array(text.utf8))
        self = try parser.document()
    }

    /// Parses JSON bytes (UTF-8).
    public init(parsing data: Data) throws {
        var parser = Parser(bytes: [UInt8](data))
        self = try parser.document()
    }

    /// The value converted from any `Encodable` (through `JSONEncoder`, so numbers get the kind
    /// the encoder writes: a `Double` with no fraction may come back as `.integer`).
    public init<T: Encodable>(encoding value: T, encoder: JSONEncoder = JSONEncoder()) throws {
        try self.init(parsing: encoder.encode(value))
    }

    /// This value as a `Decodable` type (through `JSONDecoder`).
    public func decode<T: Decodable>(_ type: T.Type, decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try decoder.decode(type, from: Data(jsonText.utf8))
    }

    /// Compact JSON text. Object keys are sorted; a non-finite double (which JSON cannot hold)
    /// is written as `null`.
    public var jsonText: String {
        var out = ""
        write(to: &out)
        return out
    }

    /// `self[key]` of an object, or `nil` for any other kind or a missing key.
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// `self[index]` of an array, or `nil` for any other kind or an index out of range.
    public subscript(index: Int) -> JSONValue? {
        if case .array(let items) = self, items.indices.contains(index) { return items[index] }
        return nil
    }

    /// The string, or `nil` for any other kind.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The boolean, or `nil` for any other kind.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The integer, or `nil` for any other kind (a double is not converted).
    public var integerValue: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }

    /// The number as a double (an integer converted), or `nil` for any other kind.
    public var doubleValue: Double? {
        switch self {
        case .double(let value): return value
        case .integer(let value): return Double(value)
        default: return nil
        }
    }

    /// The array, or `nil` for any other kind.
    public var arrayValue: [JSONValue]? {
        if case .array(let items) = self { return items }
        return nil
    }

    /// The object, or `nil` for any other kind.
    public var objectValue: [String: JSONValue]? {
        if case .object(let members) = self { return members }
        return nil
    }

    /// Whether this is `null`.
    public var isNull: Bool { self == .null }
}

extension JSONValue {
    /// Equal as JSON with the kinds kept: doubles compare by their bits, so `-0.0` is not `0.0`
    /// (and a NaN, which no JSON text holds, equals itself, so that `Hashable` stays lawful).
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.integer(let a), .integer(let b)): return a == b
        case (.double(let a), .double(let b)): return a.bitPattern == b.bitPattern || (a.isNaN && b.isNaN)
        case (.string(let a), .string(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)): return a == b
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let value): hasher.combine(1); hasher.combine(value)
        case .integer(let value): hasher.combine(2); hasher.combine(value)
        case .double(let value): hasher.combine(3); hasher.combine(value.isNaN ? Double.nan.bitPattern : value.bitPattern)
        case .string(let value): hasher.combine(4); hasher.combine(value)
        case .array(let value): hasher.combine(5); hasher.combine(value)
        case .object(let value): hasher.combine(6); hasher.combine(value)
        }
    }
}

extension JSONValue: CustomStringConvertible {
    public var description: String { jsonText }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

extension JSONValue: ExpressibleByStringInterpolation {
    /// An interpolated string literal is a `.string` (`["label": "run \(n)"]`).
    public init(stringInterpolation: DefaultStringInterpolation) {
        self = .string(String(stringInterpolation: stringInterpolation))
    }
}

extension JSONValue: Codable {
    /// Decodes from any decoder; the kinds are what that decoder reports (this file's own parser,
    /// `init(parsing:)`, is the exact one).
    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

// MARK: - Writing

extension JSONValue {
    fileprivate func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let value): out += value ? "true" : "false"
        case .integer(let value): out += String(value)
        case .double(let value): out += Self.format(value)
        case .string(let value): Self.quote(value, into: &out)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                item.write(to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (i, key) in members.keys.sorted().enumerated() {
                if i > 0 { out += "," }
                Self.quote(key, into: &out)
                out += ":"
                members[key]!.write(to: &out)
            }
            out += "}"
        }
    }

    /// The shortest text that reads back as the same double, always with a fraction or an
    /// exponent so that it reads back as a double, never as an integer.
    private static func format(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        let text = "\(value)"  // Swift prints the shortest round-trip form: 1.0, 1e-05, 1e+20
        return text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) ? text : text + ".0"
    }

    private static func quote(_ text: String, into out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }
}

// MARK: - Parsing

/// A recursive-descent parser over UTF-8 bytes (RFC 8259), nesting bounded so that hostile input
/// cannot exhaust the stack.
private struct Parser {
    static let maxDepth = 512
    let bytes: [UInt8]
    var at = 0
    var depth = 0

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    mutating func document() throws -> JSONValue {
        skipSpace()
        let value = try parseValue()
        skipSpace()
        guard at == bytes.count else { throw fail("trailing characters after the value") }
        return value
    }

    func fail(_ reason: String) -> JSONParseError { JSONParseError(reason: reason, offset: at) }

    mutating func skipSpace() {
        while at < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[at]) { at += 1 }
    }

    mutating func literal(_ word: String, _ value: JSONValue) throws -> JSONValue {
        let expected = Array(word.utf8)
        guard bytes.count - at >= expected.count, Array(bytes[at..<at + expected.count]) == expected else {
            throw fail("expected \(word)")
        }
        at += expected.count
        return value
    }

    mutating func parseValue() throws -> JSONValue {
        guard at < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[at] {
        case UInt8(ascii: "n"): return try literal("null", .null)
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "["): return try nested { try $0.parseArray() }
        case UInt8(ascii: "{"): return try nested { try $0.parseObject() }
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character")
        }
    }

    mutating func nested(_ body: (inout Parser) throws -> JSONValue) throws -> JSONValue {
        depth += 1
        defer { depth -= 1 }
        guard depth <= Self.maxDepth else { throw fail("nested deeper than \(Self.maxDepth) levels") }
        return try body(&self)
    }

    mutating func parseArray() throws -> JSONValue {
        at += 1  // [
        var items: [JSONValue] = []
        skipSpace()
        if at < bytes.count, bytes[at] == UInt8(ascii: "]") {
            at += 1
            return .array(items)
        }
        while true {
            skipSpace()
            items.append(try parseValue())
            skipSpace()
            guard at < bytes.count else { throw fail("unterminated array") }
            if bytes[at] == UInt8(ascii: ",") {
                at += 1
            } else if bytes[at] == UInt8(ascii: "]") {
                at += 1
                return .array(items)
            } else {
                throw fail("expected , or ] in an array")
            }
        }
    }

    mutating func parseObject() throws -> JSONValue {
        at += 1  // {
        var members: [String: JSONValue] = [:]
        skipSpace()
        if at < bytes.count, bytes[at] == UInt8(ascii: "}") {
            at += 1
            return .object(members)
        }
        while true {
            skipSpace()
            guard at < bytes.count, bytes[at] == UInt8(ascii: "\"") else { throw fail("expected a key string") }
            let key = try parseString()
            skipSpace()
            guard at < bytes.count, bytes[at] == UInt8(ascii: ":") else { throw fail("expected : after a key") }
            at += 1
            skipSpace()
            members[key] = try parseValue()  // a repeated key keeps the last value, as serde_json does
            skipSpace()
            guard at < bytes.count else { throw fail("unterminated object") }
            if bytes[at] == UInt8(ascii: ",") {
                at += 1
            } else if bytes[at] == UInt8(ascii: "}") {
                at += 1
                return .object(members)
            } else {
                throw fail("expected , or } in an object")
            }
        }
    }

    mutating func parseNumber() throws -> JSONValue {
        let start = at
        var isInteger = true
        if bytes[at] == UInt8(ascii: "-") { at += 1 }
        guard at < bytes.count, isDigit(bytes[at]) else { throw fail("expected a digit") }
        if bytes[at] == UInt8(ascii: "0") {
            at += 1
        } else {
            while at < bytes.count, isDigit(bytes[at]) { at += 1 }
        }
        if at < bytes.count, bytes[at] == UInt8(ascii: ".") {
            isInteger = false
            at += 1
            guard at < bytes.count, isDigit(bytes[at]) else { throw fail("expected a digit after .") }
            while at < bytes.count, isDigit(bytes[at]) { at += 1 }
        }
        if at < bytes.count, bytes[at] == UInt8(ascii: "e") || bytes[at] == UInt8(ascii: "E") {
            isInteger = false
            at += 1
            if at < bytes.count, bytes[at] == UInt8(ascii: "+") || bytes[at] == UInt8(ascii: "-") { at += 1 }
            guard at < bytes.count, isDigit(bytes[at]) else { throw fail("expected a digit in the exponent") }
            while at < bytes.count, isDigit(bytes[at]) { at += 1 }
        }
        let text = String(decoding: bytes[start..<at], as: UTF8.self)
        // `-0` is the double -0.0 (an integer zero has no sign), as serde_json reads it, so the
        // sign survives a round trip through core. An integer beyond 64 bits becomes the nearest
        // double, as in most JSON libraries.
        if isInteger, text == "-0" { return .double(-0.0) }
        if isInteger, let value = Int64(text) { return .integer(value) }
        guard let value = Double(text) else { throw JSONParseError(reason: "number out of range", offset: start) }
        return .double(value)
    }

    func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    mutating func parseString() throws -> String {
        at += 1  // "
        var scalars = String.UnicodeScalarView()
        var runStart = at
        func flush(_ parser: Parser, upTo end: Int) throws {
            guard let run = String(validating: parser.bytes[runStart..<end], as: UTF8.self) else {
                throw parser.fail("invalid UTF-8 in a string")
            }
            scalars.append(contentsOf: run.unicodeScalars)
        }
        while true {
            guard at < bytes.count else { throw fail("unterminated string") }
            let byte = bytes[at]
            if byte == UInt8(ascii: "\"") {
                try flush(self, upTo: at)
                at += 1
                return String(scalars)
            }
            if byte < 0x20 { throw fail("unescaped control character in a string") }
            if byte != UInt8(ascii: "\\") {
                at += 1
                continue
            }
            try flush(self, upTo: at)
            at += 1
            guard at < bytes.count else { throw fail("unterminated escape") }
            let escape = bytes[at]
            at += 1
            switch escape {
            case UInt8(ascii: "\""): scalars.append("\"")
            case UInt8(ascii: "\\"): scalars.append("\\")
            case UInt8(ascii: "/"): scalars.append("/")
            case UInt8(ascii: "b"): scalars.append("\u{08}")
            case UInt8(ascii: "f"): scalars.append("\u{0C}")
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "t"): scalars.append("\t")
            case UInt8(ascii: "u"):
                let unit = try hex4()
                if (0xD800..<0xDC00).contains(unit), bytes.count - at >= 6, bytes[at] == UInt8(ascii: "\\"),
                    bytes[at + 1] == UInt8(ascii: "u")
                {
                    let saved = at
                    at += 2
                    let low = try hex4()
                    if (0xDC00..<0xE000).contains(low) {
                        scalars.append(Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))!)
                    } else {
                        at = saved  // not a pair: the high half stands alone, the next escape is read again
                        scalars.append("\u{FFFD}")
                    }
                } else {
                    // A lone surrogate is no Unicode scalar, so no Swift (or Rust) string holds it: U+FFFD.
                    scalars.append(Unicode.Scalar(unit) ?? "\u{FFFD}")
                }
            default: throw fail("unknown escape")
            }
            runStart = at
        }
    }

    mutating func hex4() throws -> UInt32 {
        guard bytes.count - at >= 4 else { throw fail("short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[at]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw fail("bad hex digit in a \\u escape")
            }
            value = value * 16 + digit
            at += 1
        }
        return value
    }
}
