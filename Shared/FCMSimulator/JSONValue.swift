/// A parsed JSON value, so the simulator can tell a string from a number or a boolean the way FCM's
/// proto JSON parser does (`"data": {"n": 1}` is refused: data values must be strings).
enum JSONValue: Decodable, Equatable {
    case string(String)
    case number(Double)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        // Most likely first: each miss throws (and costs).
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([String: JSONValue].self) {
            self = .object(value)
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else {
            self = .array(try container.decode([JSONValue].self))
        }
    }

    var string: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    var object: [String: JSONValue]? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The JSON type name, as FCM's errors say it.
    var typeName: String {
        switch self {
        case .string: "TYPE_STRING"
        case .number: "TYPE_NUMBER"
        case .bool: "TYPE_BOOL"
        case .null: "NULL"
        case .array: "TYPE_LIST"
        case .object: "TYPE_MESSAGE"
        }
    }
}
