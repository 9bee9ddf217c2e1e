import Foundation
import Kafka
import Locking
import ProcessStack

/// Ring events as a producer outside callpush writes them, and the `kcat` run that writes them.
///
/// The format is Python's `json.dumps` of a dict built in the producer's own order: `", "` and
/// `": "` separators, `datetime.isoformat()` timestamps (microseconds, `+00:00`), non-ASCII
/// escaped as `\uXXXX` (`ensure_ascii`), `null` for absent optional fields. Every event is a valid
/// ring of the public contract (docs/contract.md) for `app`, with a fresh call id and device.
struct ThirdPartyBacklog {
    let app: String
    let events: Int
    /// The ring deadline of the first event; each later one is as far after its own `requestedAt`
    /// (far enough for the slowest drain of the run).
    let ringDeadline: Date
    /// `callId<TAB>json` lines, kcat's `-K '\t' -l` input.
    let path: String
    /// Bytes of the largest event (the mock cluster's per-partition bound is in bytes).
    private(set) var largestEvent = 0
    private(set) var totalBytes = 0

    init(app: String, events: Int, ringDeadline: Date, directory: String) throws {
        self.app = app
        self.events = events
        self.ringDeadline = ringDeadline
        path = directory + "/backlog-\(events).tsv"
        var lines: [UInt8] = []
        lines.reserveCapacity(events * 560)
        let start = Date()
        var generator = SystemRandomNumberGenerator()
        for index in 0..<events {
            // Each event carries its own instant, as events written over time do (one shared
            // timestamp would make every event take the same decoder path).
            let requestedDate = start.addingTimeInterval(Double(index) * 0.000_137)
            let requestedAt = Self.isoformat(requestedDate)
            let deadline = Self.isoformat(requestedDate.addingTimeInterval(ringDeadline.timeIntervalSince(start)))
            let callId = UUID.randomVersion4().lowercasedText
            let token = Hex.random(bytes: 32, using: &generator)
            // One caller in eight has a name outside ASCII, which json.dumps escapes.
            let displayName = index % 8 == 7 ? #"Zo\u00eb \u00c5ngstr\u00f6m"# : "Driver \(index % 1000)"
            let event = """
                {"type": "ring", "callId": "\(callId)", "requestedAt": "\(requestedAt)", "ringDeadline": "\(deadline)", \
                "app": "\(app)", "caller": {"handle": "driver-\(index % 1000)", "displayName": "\(displayName)", \
                "handleType": "generic"}, "device": {"environment": "sandbox", "token": "\(token)", "id": "device-\(index)"}, \
                "hasVideo": false, "maxDurationSeconds": 3600, "attributes": {"rideId": "R-\(index)", "zone": "north"}, \
                "replay": 0, "tenant": null}
                """
            largestEvent = max(largestEvent, event.utf8.count)
            totalBytes += event.utf8.count
            lines.append(contentsOf: callId.utf8)
            lines.append(UInt8(ascii: "\t"))
            lines.append(contentsOf: event.utf8)
            lines.append(UInt8(ascii: "\n"))
        }
        guard FileManager.default.createFile(atPath: path, contents: Data(lines)) else { throw StackError("cannot write \(path)") }
    }

    /// `datetime.isoformat()` of an aware UTC datetime: microseconds, `+00:00`.
    static func isoformat(_ date: Date) -> String {
        let micros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        let seconds = Date(timeIntervalSince1970: TimeInterval(micros / 1_000_000))
        let base = seconds.formatted(Date.ISO8601FormatStyle())  // 2026-11-25T19:05:41Z
        return String(base.dropLast()) + String(format: ".%06lld+00:00", micros % 1_000_000)
    }

    /// Writes the backlog to `topic` with kcat and checks the cluster kept every event.
    func write(to topic: String, partitions: Int, bootstrap: String, directory: String, consumer: KafkaConsumer) async throws {
        let kcat = try ChildProcess(
            name: "kcat", executable: try which("kcat"),
            arguments: ["-P", "-b", bootstrap, "-t", topic, "-K", "\t", "-l", "-X", "linger.ms=5", path],
            environment: [:], logPath: directory + "/kcat.log")
        guard let exit = await kcat.waitForExit(timeout: .seconds(300)), exit == .status(0) else {
            _ = await kcat.stop(timeout: .seconds(1))
            throw StackError("kcat failed writing \(topic) (see \(directory)/kcat.log)")
        }
        var stored: Int64 = 0
        var largest: Int64 = 0
        for partition in 0..<Int32(partitions) {
            let marks = try await consumer.queryWatermarks(topic: topic, partition: partition, timeout: .seconds(10))
            stored += marks.high - marks.low
            largest = max(largest, marks.high - marks.low)
        }
        guard stored == Int64(events) else {
            throw StackError("the embedded cluster kept \(stored) of \(events) events in \(topic) (it drops a partition's oldest "
                             + "messages beyond ~5 MB): use more partitions")
        }
    }
}
