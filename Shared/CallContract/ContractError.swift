import Foundation

/// Why an event, status or payload does not satisfy the callpush event contract.
///
/// `path` names the first failing field by its JSON path (`device.token`, `caller.handle`,
/// `attributes.rideId`); it is empty when the document as a whole is at fault (malformed JSON).
/// `description` renders as `device.token: not hexadecimal`.
public struct ContractError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable machine-readable classification, used as the DLQ `callpush-error` header and in HTTP problems.
    public enum Code: String, Sendable, Hashable, Codable {
        /// The bytes are not a JSON document (or not UTF-8).
        case malformedJSON = "malformed-json"
        /// A required field is absent or `null`.
        case missingField = "missing-field"
        /// A field has the wrong JSON type (a number where a string is expected, …).
        case wrongType = "wrong-type"
        /// A field has the right type but a value the contract does not allow.
        case invalidValue = "invalid-value"
        /// The `type` discriminator names no known event type.
        case unknownType = "unknown-type"
        /// The encoded VoIP payload would exceed Apple's 5120-byte limit.
        case payloadTooLarge = "payload-too-large"
    }

    public var code: Code
    /// JSON path of the failing field, dot-separated; array elements as `devices[2]`.
    public var path: String
    /// Human-readable problem, without the path (`not hexadecimal`).
    public var problem: String

    public init(_ code: Code, path: String, _ problem: String) {
        self.code = code
        self.path = path
        self.problem = problem
    }

    public var description: String {
        path.isEmpty ? problem : "\(path): \(problem)"
    }
}

extension ContractError {
    /// Renders a coding path (as JSONDecoder reports it) as a JSON path: `device.token`, `devices[1].token`.
    static func jsonPath(_ codingPath: [any CodingKey]) -> String {
        var out = ""
        for key in codingPath {
            if let index = key.intValue, key.stringValue.hasPrefix("Index ") || Int(key.stringValue) == index {
                out += "[\(index)]"
            } else {
                if !out.isEmpty { out += "." }
                out += key.stringValue
            }
        }
        return out
    }

    /// Translates Foundation's `DecodingError` into a contract error with a JSON path.
    static func from(_ error: DecodingError) -> ContractError {
        switch error {
        case .keyNotFound(let key, let context):
            return ContractError(.missingField, path: jsonPath(context.codingPath + [key]), "missing")
        case .valueNotFound(_, let context):
            return ContractError(.missingField, path: jsonPath(context.codingPath), "missing")
        case .typeMismatch(let type, let context):
            return ContractError(.wrongType, path: jsonPath(context.codingPath), "expected \(jsonTypeName(type))")
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty {
                return ContractError(.malformedJSON, path: "", "malformed JSON")
            }
            return ContractError(.invalidValue, path: jsonPath(context.codingPath), context.debugDescription)
        @unknown default:
            return ContractError(.malformedJSON, path: "", "undecodable document")
        }
    }

    private static func jsonTypeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Bool.Type: return "a boolean"
        case is Int.Type, is Int64.Type, is Int32.Type, is UInt.Type, is Double.Type: return "a number"
        default:
            let name = String(describing: type)
            if name.hasPrefix("Dictionary") { return "an object" }
            if name.hasPrefix("Array") { return "an array" }
            return "an object"
        }
    }
}
