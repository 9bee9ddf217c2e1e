import Foundation
#if canImport(Locking)
// The fuzz build (scripts/fuzz) compiles this module's sources with Locking's RandomUUID.swift and Hex.swift as one module.
import Locking
#endif

/// Decoding helpers that validate as they read and name the failing field by JSON path.
extension KeyedDecodingContainer {
    func path(_ key: Key) -> String {
        ContractError.jsonPath(codingPath + [key])
    }

    func invalid(_ key: Key, _ problem: String) -> ContractError {
        ContractError(.invalidValue, path: path(key), problem)
    }

    /// A required string, trimmed of nothing, with a length bound in UTF-8 bytes.
    func requiredString(_ key: Key, maxBytes: Int, allowEmpty: Bool = false) throws -> String {
        guard contains(key), try !decodeNil(forKey: key) else {
            throw ContractError(.missingField, path: path(key), "missing")
        }
        let value = try decode(String.self, forKey: key)
        try checkString(value, key: key, maxBytes: maxBytes, allowEmpty: allowEmpty)
        return value
    }

    /// An optional string (absent or `null` → nil) with a length bound in UTF-8 bytes.
    func optionalString(_ key: Key, maxBytes: Int, allowEmpty: Bool = false) throws -> String? {
        guard let value = try decodeIfPresent(String.self, forKey: key) else { return nil }
        try checkString(value, key: key, maxBytes: maxBytes, allowEmpty: allowEmpty)
        return value
    }

    private func checkString(_ value: String, key: Key, maxBytes: Int, allowEmpty: Bool) throws {
        if !allowEmpty && value.isEmpty { throw invalid(key, "must not be empty") }
        if value.utf8.count > maxBytes { throw invalid(key, "longer than \(maxBytes) bytes") }
        if value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw invalid(key, "contains control characters")
        }
    }

    /// An optional tenant name (see ``TenantName``).
    func optionalTenant(_ key: Key) throws -> String? {
        guard let value = try decodeIfPresent(String.self, forKey: key) else { return nil }
        if let problem = TenantName.problem(value) { throw invalid(key, problem) }
        return value
    }

    /// A required RFC 3339 timestamp.
    func requiredTimestamp(_ key: Key) throws -> Date {
        guard contains(key), try !decodeNil(forKey: key) else {
            throw ContractError(.missingField, path: path(key), "missing")
        }
        let text = try decode(String.self, forKey: key)
        guard let date = ContractCoding.parseTimestamp(text) else {
            throw invalid(key, "not an RFC 3339 timestamp")
        }
        return date
    }

    /// An optional RFC 3339 timestamp.
    func optionalTimestamp(_ key: Key) throws -> Date? {
        guard let text = try decodeIfPresent(String.self, forKey: key) else { return nil }
        guard let date = ContractCoding.parseTimestamp(text) else {
            throw invalid(key, "not an RFC 3339 timestamp")
        }
        return date
    }

    /// A required call id: a UUID in canonical 8-4-4-4-12 form, normalised to lower case.
    func requiredCallID(_ key: Key) throws -> String {
        let text = try requiredString(key, maxBytes: ContractLimits.callIDBytes)
        guard let normalized = CallID.normalize(text) else {
            throw invalid(key, "not a UUID")
        }
        return normalized
    }

    /// An optional integer within a closed range.
    func optionalInt(_ key: Key, in range: ClosedRange<Int>) throws -> Int? {
        guard let value = try decodeIfPresent(Int.self, forKey: key) else { return nil }
        guard range.contains(value) else {
            throw invalid(key, "must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return value
    }

    /// A required enumeration value, with the allowed values named in the error.
    func requiredEnum<E: RawRepresentable & CaseIterable>(_ type: E.Type, _ key: Key) throws -> E where E.RawValue == String {
        let text = try requiredString(key, maxBytes: ContractLimits.enumValueBytes)
        guard let value = E(rawValue: text) else {
            let allowed = E.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
            throw invalid(key, "unknown value \"\(text.prefix(32))\" (expected one of \(allowed))")
        }
        return value
    }

    /// An optional enumeration value.
    func optionalEnum<E: RawRepresentable & CaseIterable>(_ type: E.Type, _ key: Key) throws -> E? where E.RawValue == String {
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        return try requiredEnum(type, key)
    }
}

/// Tenant names (dispatch's owners of calls): 1–64 of ASCII letters, digits, '.', '-', '_'.
public enum TenantName {
    /// Why `name` is not a tenant name, or nil.
    public static func problem(_ name: String) -> String? {
        if name.isEmpty || name.utf8.count > ContractLimits.tenantNameBytes || !name.utf8.allSatisfy(\.isAppNameCharacter) {
            return "1 to \(ContractLimits.tenantNameBytes) of letters, digits, '.', '-' and '_'"
        }
        return nil
    }
}

/// Call identifiers are UUIDs (CallKit identifies calls by UUID); the contract carries them lower-case.
public enum CallID {
    /// The canonical lower-case form of `text`, or nil when it is not a UUID in 8-4-4-4-12 form.
    ///
    /// Checked by `Hex.isUUIDText`, not `UUID(uuidString:)`, which parses with `sscanf` and formats
    /// with `snprintf`, both on dispatch's per-ring path.
    public static func normalize(_ text: String) -> String? {
        Hex.isUUIDText(text) ? text.lowercasedIfNeeded() : nil
    }

    /// A new random (version 4) call id (one `getrandom`, see `UUID.randomVersion4()`).
    public static func make() -> String {
        UUID.randomVersion4().lowercasedText
    }
}
