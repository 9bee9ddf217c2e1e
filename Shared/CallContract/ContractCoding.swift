import Foundation

/// The JSON encoding rules of the contract: field names as documented, RFC 3339 timestamps in UTC
/// with milliseconds (`2026-11-21T12:00:00.000Z`), keys sorted so equal values give equal bytes.
public enum ContractCoding {
    /// Maximum size of any event document callpush accepts (requests, statuses, acks).
    public static let maxDocumentBytes = 64 * 1024

    static let timestampStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    static let wholeSecondStyle = Date.ISO8601FormatStyle()

    /// Formats a timestamp the way every contract document carries it: UTC, milliseconds.
    /// Works from whole milliseconds so that parse → format gives back the same text
    /// (formatting a binary fraction such as .0119999 directly would print .011).
    public static func format(_ date: Date) -> String {
        let millis = milliseconds(date)
        let (seconds, fraction) = millis.quotientAndRemainder(dividingBy: 1000)
        let wholeSeconds = fraction < 0 ? seconds - 1 : seconds
        let ms = fraction < 0 ? fraction + 1000 : fraction
        let base = Date(timeIntervalSince1970: TimeInterval(wholeSeconds)).formatted(wholeSecondStyle)
        let digits = String(ms)
        return String(base.dropLast()) + "." + String(repeating: "0", count: 3 - digits.count) + digits + "Z"
    }

    /// Parses an RFC 3339 timestamp (`Z` or a numeric offset, with or without fractional seconds),
    /// rounded to the millisecond, the contract's precision.
    public static func parseTimestamp(_ text: String) -> Date? {
        guard text.utf8.count <= 64 else { return nil }
        guard let date = (try? timestampStyle.parse(text)) ?? (try? wholeSecondStyle.parse(text)) else { return nil }
        return truncatedToMilliseconds(date)
    }

    /// `date` rounded to the contract's precision (what a round trip through JSON gives back).
    public static func truncatedToMilliseconds(_ date: Date) -> Date {
        Date(timeIntervalSince1970: TimeInterval(milliseconds(date)) / 1000)
    }

    static func milliseconds(_ date: Date) -> Int64 {
        let value = (date.timeIntervalSince1970 * 1000).rounded()
        guard value.isFinite, abs(value) < 9e15 else { return 0 }
        return Int64(value)
    }

    /// A fresh encoder with the contract's rules (JSONEncoder is not Sendable; make one per use or per owner).
    public static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(format(date))
        }
        return encoder
    }

    /// A fresh decoder with the contract's rules.
    public static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = parseTimestamp(text) else {
                throw DecodingError.dataCorrupted(.init(
                    codingPath: decoder.codingPath,
                    debugDescription: "not an RFC 3339 timestamp"))
            }
            return date
        }
        return decoder
    }

    /// Decodes `T` from `data`, turning every failure into a `ContractError` that names the field.
    public static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws(ContractError) -> T {
        guard data.count <= maxDocumentBytes else {
            throw ContractError(.invalidValue, path: "", "document larger than \(maxDocumentBytes) bytes")
        }
        do {
            return try makeDecoder().decode(T.self, from: data)
        } catch let error as ContractError {
            throw error
        } catch let error as DecodingError {
            throw ContractError.from(error)
        } catch {
            throw ContractError(.malformedJSON, path: "", "malformed JSON")
        }
    }

    /// Encodes a contract value. Contract types contain only strings, numbers, booleans and
    /// string maps, so encoding cannot fail for them; a failure is reported, never trapped.
    public static func encode<T: Encodable>(_ value: T) throws -> Data {
        try makeEncoder().encode(value)
    }
}
