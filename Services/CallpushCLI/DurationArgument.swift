import ArgumentParser
import CallContract
import Foundation
import Locking

/// A duration flag value: a whole number with a unit — `500ms`, `30s`, `5m`, `2h`, `7d`.
struct DurationArgument: ExpressibleByArgument, Sendable, Hashable {
    var duration: Duration

    init(_ duration: Duration) { self.duration = duration }

    init?(argument: String) {
        guard let duration = Self.parse(argument) else { return nil }
        self.duration = duration
    }

    static func parse(_ text: String) -> Duration? {
        let units: [(String, Int64)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)]
        for (unit, millis) in units where text.hasSuffix(unit) {
            let number = text.dropLast(unit.count)
            // Digits only before the unit, so "500ms" is never read as "500m" + "s".
            guard !number.isEmpty, number.allSatisfy({ $0.isASCII && $0.isNumber }),
                  let value = Int64(number), value <= 1_000_000_000
            else { continue }
            return .milliseconds(value * millis)
        }
        return nil
    }

    static var defaultCompletionKind: CompletionKind { .default }

    var defaultValueDescription: String { Self.format(duration) }

    /// `90s` → `1m30s`, `7d`, `500ms`.
    static func format(_ duration: Duration) -> String {
        let ms = duration.inWholeMilliseconds
        if ms % 1000 != 0 { return "\(ms)ms" }
        var seconds = ms / 1000
        if seconds == 0 { return "0s" }
        var text = ""
        for (unit, size) in [("d", Int64(86_400)), ("h", 3_600), ("m", 60), ("s", 1)] where seconds >= size {
            text += "\(seconds / size)\(unit)"
            seconds %= size
        }
        return text
    }
}

/// A point in time: RFC 3339 (`2026-11-21T12:00:00Z`) or a duration meaning "that long ago" (`2h`).
struct TimeArgument: ExpressibleByArgument, Sendable, Hashable {
    enum Value: Sendable, Hashable {
        case absolute(Date)
        case ago(Duration)
    }
    var value: Value

    init?(argument: String) {
        if let date = ContractCoding.parseTimestamp(argument) {
            value = .absolute(date)
        } else if let duration = DurationArgument.parse(argument) {
            value = .ago(duration)
        } else {
            return nil
        }
    }

    /// The instant, relative durations counted back from `now`.
    func resolve(now: Date) -> Date {
        switch value {
        case .absolute(let date): return date
        case .ago(let duration): return now.addingTimeInterval(-duration.inSeconds)
        }
    }
}

