// The shared error classes: one `TasksError` case per row of core's ERROR_CLASSES, named as in
// Python and TypeScript. Core chooses the class; this file only converts the generated error.
import Foundation
internal import MCPTasksFFI

/// What every `TasksError` carries: the class, the JSON-RPC code, the message, the error's data
/// and the messages of the errors that caused it.
public struct ErrorDetail: Sendable, Hashable {
    /// The class name (the case's own name).
    public var className: String
    /// The JSON-RPC code, when there is one (task outcomes have none).
    public var code: Int?
    /// What went wrong.
    public var message: String
    /// The error's `data`, if any.
    public var data: JSONValue?
    /// The messages of the errors that caused it, outermost first (a transport failure keeps
    /// the OS error).
    public var causes: [String]

    /// A detail (for errors a host raises itself, and for tests).
    public init(className: String, code: Int?, message: String, data: JSONValue? = nil, causes: [String] = []) {
        self.className = className
        self.code = code
        self.message = message
        self.data = data
        self.causes = causes
    }

    init(_ ffi: MCPTasksFFI.ErrorDetail) {
        className = ffi.className
        code = ffi.code.map { Int($0) }
        message = ffi.message
        data = ffi.dataJson.flatMap(parsedJSON)
        causes = ffi.causes
    }
}

/// An error from a tasks server or from this library; the case is its class (see "One client
/// face" in the README for when each is thrown). Match a class and its subclasses with
/// `isKind(of:)`: a `TaskGoneError` is also a `TaskNotFoundError` and an `InvalidParamsError`.
public enum TasksError: Error, Sendable, Hashable {
    case McpTaskError(ErrorDetail)
    case ParseError(ErrorDetail)
    case InvalidRequestError(ErrorDetail)
    case RequestTooLargeError(ErrorDetail)
    case MethodNotFoundError(ErrorDetail)
    case InvalidParamsError(ErrorDetail)
    case TaskNotFoundError(ErrorDetail)
    case HeaderMismatchError(ErrorDetail)
    case MissingCapabilityError(ErrorDetail)
    case UnsupportedVersionError(ErrorDetail)
    case InternalError(ErrorDetail)
    case QuotaExceededError(ErrorDetail)
    case TransportError(ErrorDetail)
    case TaskCancelledError(ErrorDetail)
    case TaskGoneError(ErrorDetail)
    case TaskExpiredError(ErrorDetail)

    /// The class, code, message, data and causes every case carries.
    public var detail: ErrorDetail {
        switch self {
        case .McpTaskError(let d), .ParseError(let d), .InvalidRequestError(let d), .RequestTooLargeError(let d),
            .MethodNotFoundError(let d), .InvalidParamsError(let d), .TaskNotFoundError(let d),
            .HeaderMismatchError(let d), .MissingCapabilityError(let d), .UnsupportedVersionError(let d),
            .InternalError(let d), .QuotaExceededError(let d), .TransportError(let d), .TaskCancelledError(let d),
            .TaskGoneError(let d), .TaskExpiredError(let d):
            return d
        }
    }

    /// The class name, as in every other language.
    public var className: String { detail.className }

    /// The JSON-RPC code, or `nil` for a task outcome (cancelled, expired), which has none.
    public var code: Int? { detail.code }

    /// What went wrong.
    public var message: String { detail.message }

    /// Whether this error's class is `name` or a subclass of it, by core's class table.
    public func isKind(of name: String) -> Bool {
        var current: String? = className
        while let name_ = current {
            if name_ == name { return true }
            current = ErrorClass.table.first { $0.name == name_ }?.parent
        }
        return false
    }

    init(_ ffi: MCPTasksFFI.TasksError) {
        switch ffi {
        case .McpTaskError(let d): self = .McpTaskError(ErrorDetail(d))
        case .ParseError(let d): self = .ParseError(ErrorDetail(d))
        case .InvalidRequestError(let d): self = .InvalidRequestError(ErrorDetail(d))
        case .RequestTooLargeError(let d): self = .RequestTooLargeError(ErrorDetail(d))
        case .MethodNotFoundError(let d): self = .MethodNotFoundError(ErrorDetail(d))
        case .InvalidParamsError(let d): self = .InvalidParamsError(ErrorDetail(d))
        case .TaskNotFoundError(let d): self = .TaskNotFoundError(ErrorDetail(d))
        case .HeaderMismatchError(let d): self = .HeaderMismatchError(ErrorDetail(d))
        case .MissingCapabilityError(let d): self = .MissingCapabilityError(ErrorDetail(d))
        case .UnsupportedVersionError(let d): self = .UnsupportedVersionError(ErrorDetail(d))
        case .InternalError(let d): self = .InternalError(ErrorDetail(d))
        case .QuotaExceededError(let d): self = .QuotaExceededError(ErrorDetail(d))
        case .TransportError(let d): self = .TransportError(ErrorDetail(d))
        case .TaskCancelledError(let d): self = .TaskCancelledError(ErrorDetail(d))
        case .TaskGoneError(let d): self = .TaskGoneError(ErrorDetail(d))
        case .TaskExpiredError(let d): self = .TaskExpiredError(ErrorDetail(d))
        }
    }
}

extension TasksError: LocalizedError, CustomStringConvertible {
    public var description: String {
        let code = detail.code.map { " (\($0))" } ?? ""
        let causes = detail.causes.isEmpty ? "" : ": " + detail.causes.joined(separator: ": ")
        return "\(className)\(code): \(detail.message)\(causes)"
    }

    public var errorDescription: String? { description }
}

/// One row of core's error-class table (`ERROR_CLASSES`).
public struct ErrorClass: Sendable, Hashable, Decodable {
    /// The class name.
    public var name: String
    /// The class it extends, or `nil` for the root `McpTaskError`.
    public var parent: String?
    /// The JSON-RPC code it stands for, if one.
    public var code: Int?
    /// When it is thrown.
    public var doc: String

    /// Core's table, in its order.
    public static let table: [ErrorClass] = {
        // Core serializes its own constant table; a failure here is a build mismatch, not input.
        (try? JSONDecoder().decode([ErrorClass].self, from: Data(MCPTasksFFI.errorClassesJson().utf8))) ?? []
    }()
}

/// Runs a call into the generated bindings, turning their error into the public one.
func bridged<T>(_ body: () throws -> T) throws(TasksError) -> T {
    do {
        return try body()
    } catch let error as MCPTasksFFI.TasksError {
        throw TasksError(error)
    } catch {
        throw TasksError.InternalError(internalDetail("\(error)"))
    }
}

/// `bridged` for async calls.
func bridged<T>(_ body: () async throws -> T) async throws(TasksError) -> T {
    do {
        return try await body()
    } catch let error as MCPTasksFFI.TasksError {
        throw TasksError(error)
    } catch {
        throw TasksError.InternalError(internalDetail("\(error)"))
    }
}

/// The detail of an error raised by the Swift layer itself (a misuse, or an FFI fault).
func internalDetail(_ message: String, className: String = "InternalError", code: Int = -32603) -> ErrorDetail {
    ErrorDetail(className: className, code: code, message: message)
}
