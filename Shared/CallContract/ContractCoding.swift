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
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        appendTimestamp(date, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends ``format(_:)``'s text: computed from the Gregorian civil date for years 1600 to 9999
    /// (every date a call carries), otherwise through Foundation's ISO 8601 formatter — whose
    /// calendar is Julian before 1582, and the parser's, so that old dates still round-trip.
    static func appendTimestamp(_ date: Date, to bytes: inout [UInt8]) {
        let millis = milliseconds(date)
        let (days, msOfDay) = floorDivision(millis, 86_400_000)
        // Civil date from days since 1970-01-01 (H. Hinnant's days_from_civil, inverted).
        let z = days + 719_468
        let era = floorDivision(z, 146_097).quotient
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        guard (1600...9999).contains(year) else {
            bytes.append(contentsOf: foundationFormat(millis).utf8)
            return
        }
        // `YYYY-MM-DDTHH:MM:SS.mmmZ`, 24 bytes, written in place and appended at once.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 24) { text in
            var end = 0
            func put(_ value: Int64, digits count: Int, then separator: UInt8) {
                var value = value
                for position in stride(from: end + count - 1, through: end, by: -1) {
                    text[position] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
                text[end + count] = separator
                end += count + 1
            }
            put(year, digits: 4, then: UInt8(ascii: "-"))
            put(month, digits: 2, then: UInt8(ascii: "-"))
            put(day, digits: 2, then: UInt8(ascii: "T"))
            put(msOfDay / 3_600_000, digits: 2, then: UInt8(ascii: ":"))
            put(msOfDay / 60_000 % 60, digits: 2, then: UInt8(ascii: ":"))
            put(msOfDay / 1000 % 60, digits: 2, then: UInt8(ascii: "."))
            put(msOfDay % 1000, digits: 3, then: UInt8(ascii: "Z"))
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: text[0..<end]))
        }
    }

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
        let (quotient, remainder) = value.quotientAndRemainder(dividingBy: divisor)
        return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
    }

    /// The formatter-based form, for years outside 1600...9999.
    static func foundationFormat(_ millis: Int64) -> String {
        let (seconds, ms) = floorDivision(millis, 1000)
        let base = Date(timeIntervalSince1970: TimeInterval(seconds)).formatted(wholeSecondStyle)
        let digits = String(ms)
        return String(base.dropLast()) + "." + String(repeating: "0", count: 3 - digits.count) + digits + "Z"
    }

    /// Parses an RFC 3339 timestamp (`Z` or a numeric offset, with or without fractional seconds),
    /// rounded to the millisecond, the contract's precision.
    public static func parseTimestamp(_ text: String) -> Date? {
        guard text.utf8.count <= ContractLimits.timestampBytes else { return nil }
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
