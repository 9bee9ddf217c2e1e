import Locking
import Logging

/// Collects every log record (level, label, message, metadata and error) of the loggers it makes, at
/// trace level: for tests that assert what reaches the log (no secret, a redacted value).
public final class CapturedLogs: Sendable {
    private let records = Locked<[String]>([])

    public init() {}

    /// The records so far, one line each, oldest first.
    public var lines: [String] { records.withLock { $0 } }
    /// The records joined by newlines.
    public var text: String { lines.joined(separator: "\n") }
    /// How many records so far.
    public var count: Int { records.withLock { $0.count } }

    /// A trace-level logger whose records land here.
    public func logger(_ label: String) -> Logger {
        var logger = Logger(label: label) { label in Handler(label: label, sink: self) }
        logger.logLevel = .trace
        return logger
    }

    /// The handler behind ``logger(_:)`` (wrap it to test another handler in front of it).
    public struct Handler: LogHandler {
        let label: String
        let sink: CapturedLogs
        public var metadata: Logger.Metadata = [:]
        public var logLevel: Logger.Level = .trace

        public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        public func log(event: LogEvent) {
            let all = self.metadata.merging(event.metadata ?? [:]) { _, new in new }
            let rendered = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            let error = event.error.map { " error=\($0)" } ?? ""
            sink.records.withLock { $0.append("\(event.level) \(label): \(event.message) \(rendered)\(error)") }
        }
    }
}
