import Foundation

/// JSON coding of the simulators' admin APIs: dates as ISO 8601 with milliseconds; dates read from ISO 8601
/// (with or without fractional seconds) or milliseconds since 1970.
public enum SimulatorJSON {
    /// Sorted keys, ISO 8601 dates with milliseconds.
    public static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
        }
        return encoder
    }()

    /// Dates as ISO 8601 text or milliseconds since 1970.
    public static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            if let ms = try? container.decode(Double.self) { return Date(timeIntervalSince1970: ms / 1000) }
            let text = try container.decode(String.self)
            guard let date = parseDate(text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an ISO 8601 date: \(text)")
            }
            return date
        }
        return decoder
    }()

    /// ISO 8601 (with or without fractional seconds) or milliseconds since 1970.
    public static func parseDate(_ text: String) -> Date? {
        if let ms = Double(text), ms.isFinite { return Date(timeIntervalSince1970: ms / 1000) }
        if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return date }
        return try? Date.ISO8601FormatStyle().parse(text)
    }
}
