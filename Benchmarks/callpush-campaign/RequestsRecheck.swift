import CallContract
import Foundation
import Kafka
import Logging

/// At the end of a campaign: reads `voip.call-requests` from its low watermark to its end with a
/// fresh consumer and checks that every accepted call's events are stored (dispatch answers 202
/// only after Kafka acknowledged them). For lost deliveries it says where their events are, or
/// that they are not there, with each partition's watermarks (to tell truncation by the mock
/// cluster's 5 MB bound from an event that was never stored).
enum RequestsRecheck {
    static func run(bootstrap: String, accepted callIDs: Set<String>, lost: Set<String>, logger: Logger) async -> [String] {
        var lines: [String] = []
        do {
            let kafka = KafkaConfiguration(bootstrapServers: [bootstrap], clientID: "campaign-recheck",
                                           properties: ["fetch.wait.max.ms": "10"])
            let consumer = try KafkaConsumer(configuration: KafkaConsumerConfiguration(kafka: kafka, mode: .manual), logger: logger)
            var ends: [Int32: Int64] = [:]
            var assignments: [KafkaPartitionAssignment] = []
            var marksLine: [String] = []
            for partition in 0..<Int32(Stack.partitions) {
                let marks = try await consumer.queryWatermarks(topic: Topics.requests, partition: partition, timeout: .seconds(10))
                marksLine.append("p\(partition) \(marks.low)..\(marks.high)")
                if marks.high > marks.low {
                    ends[partition] = marks.high
                    assignments.append(KafkaPartitionAssignment(topic: Topics.requests, partition: partition, start: .offset(marks.low)))
                }
            }
            let watermarks = "watermarks " + marksLine.joined(separator: ", ")
            var found: [String: [String]] = [:]
            if !assignments.isEmpty {
                try await consumer.assign(assignments)
                let toRead = ends
                let reading = Task { () -> (found: [String: [String]], unread: [Int32: Int64]) in
                    var found: [String: [String]] = [:]
                    var unread = toRead
                    do {
                        for try await message in consumer.messages {
                            if let key = message.keyString, callIDs.contains(key) {
                                found[key, default: []].append("p\(message.partition)@\(message.offset)")
                            }
                            if let end = unread[message.partition], message.offset + 1 >= end { unread[message.partition] = nil }
                            if unread.isEmpty { break }
                        }
                    } catch {}
                    return (found, unread)
                }
                let timer = Task {
                    try await Task.sleep(for: .seconds(30))
                    await consumer.shutdown()  // ends the reading loop
                }
                let result = await reading.value
                timer.cancel()
                found = result.found
                if !result.unread.isEmpty { lines.append("not read to the end within 30 s: partitions \(result.unread.keys.sorted())") }
            }
            await consumer.shutdown()
            let missing = callIDs.subtracting(found.keys)
            lines.append("\(callIDs.count - missing.count) of \(callIDs.count) accepted calls' events are stored"
                         + (missing.isEmpty ? "" : "; NOT stored: \(missing.sorted().prefix(10).joined(separator: " "))"))
            if !missing.isEmpty || !lost.isEmpty { lines.append(watermarks) }
            for id in lost.sorted() {
                lines.append("lost \(id): " + (found[id].map { "stored at \($0.joined(separator: ","))" } ?? "NOT in the topic"))
            }
        } catch {
            lines.append("failed: \(error)")
        }
        return lines
    }
}
