import APNs
import APNsSimulator
import ArgumentParser
import CallContract
import CallpushCore
import Foundation
import Kafka
import Logging
import NIOPosix
import PushWorker
import ServiceLifecycle
import Locking

/// End to end on the embedded cluster and the simulator: ring events produced → push at the
/// simulator → `sent` status consumed. Throughput and latency at saturation and at a fixed
/// offered rate, with 1 and 2 workers, and the bare APNs client rate in the same run.
struct WorkerBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker", abstract: "push-worker end to end vs the bare APNs client (prints figures).")

    @Option(help: "Events per saturation run.") var events = 20_000
    @Option(help: "Seconds of each fixed-rate run.") var seconds = 10
    @Option(help: "Offered rate (events/s) of the fixed-rate runs; 0 = half of the measured saturation rate.") var rate = 0
    @Option(help: "Partitions of the requests and status topics.") var partitions = 12
    @Option(parsing: .upToNextOption, help: "Worker counts to measure.") var workers: [Int] = [1, 2]
    @Flag(name: .customLong("without-apns"), help: "Also run each saturation with a sender that accepts every push at once, without APNs: the ceiling Kafka and the worker's own work set.")
    var withoutAPNS = false
    @Flag(name: .customLong("kafka-floor"), help: "Also run a saturation with a relay in place of the workers that only turns each event into a status (no decode, no push, batched sends): what Kafka alone costs end to end here.")
    var kafkaFloor = false
    @Flag(name: .customLong("steps-floor"), help: "Also run a saturation with the relay doing the worker's synchronous steps inline (decode, hashes, encoding): a worker with no per-event task or acknowledgement.")
    var stepsFloor = false

    func run() async throws {
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        let key = APNSSimulatorTestKey()
        var simulatorConfiguration = APNSSimulatorConfiguration()
        simulatorConfiguration.tokenKeys = [key.tokenKey]
        simulatorConfiguration.adminPort = nil
        // WORKER_BENCH_DEBUG=1: the fixed-rate runs also print where the latency goes (produced →
        // simulator receipt, receipt → status read), from the simulator's record of every push.
        simulatorConfiguration.maxRecordedPushes = Self.breakdown ? 200_000 : 1_000
        let simulator = APNSSimulator(configuration: simulatorConfiguration, logger: logger)
        try await simulator.start()
        let clientConfiguration = APNSClientConfiguration.localSimulator(port: simulator.port, caCertificatePEM: simulator.caCertificatePEM)
        let signingKey = try APNSSigningKey(privateKey: key.privateKey, keyID: key.keyID, teamID: key.teamID)
        let client = try APNSClient(configuration: clientConfiguration,
                                    apps: ["bench": APNSApp(bundleID: "com.example.bench", credentials: .token(signingKey))], logger: logger)

        print("callpush-bench worker: \(events) events per saturation run, \(ProcessInfo.processInfo.activeProcessorCount) cores")
        let simulatorAccepted = { simulator.stats().accepted }
        let bare = try await bareClientRate(client: client, total: events, simulatorAccepted: simulatorAccepted)
        print(String(format: "bare APNs client (2 connections, 500 in flight): %.0f pushes/s", bare))
        print("workers  mode                  events   events/s   p50 ms   p99 ms")
        for count in workers {
            let saturation = try await measure(workers: count, client: client, simulator: simulator, offeredRate: nil, logger: logger)
            print(saturation.line(workers: count, mode: "saturation"))
            if withoutAPNS {
                let ceiling = try await measure(workers: count, client: client, simulator: simulator, offeredRate: nil,
                                                logger: logger, sender: AcceptingSender())
                print(ceiling.line(workers: count, mode: "saturation, no APNs"))
            }
            if kafkaFloor, count == workers.first {
                let floor = try await measure(workers: 0, client: client, simulator: simulator, offeredRate: nil, logger: logger)
                print(floor.line(workers: 0, mode: "Kafka relay only"))
            }
            if stepsFloor, count == workers.first {
                let floor = try await measure(workers: 0, client: client, simulator: simulator, offeredRate: nil, logger: logger,
                                              relaySteps: true)
                print(floor.line(workers: 0, mode: "relay + steps"))
            }
            let offered = rate > 0 ? rate : max(1, Int(saturation.rate / 2))
            let fixed = try await measure(workers: count, client: client, simulator: simulator, offeredRate: offered, logger: logger)
            print(fixed.line(workers: count, mode: "fixed \(offered)/s"))
            print(String(format: "         ratio end-to-end/bare = %.2f (target ≥ 0.5); fixed-rate p99/p50 = %.1f (target ≤ 3)",
                         saturation.rate / bare, (fixed.p99 ?? 0) / max(fixed.p50 ?? 1, 0.001)))
        }
        let stats = simulator.stats()
        if !stats.rejected.isEmpty { print("simulator rejected: \(stats.rejected)") }
        await client.shutdown()
        await simulator.stop()
    }

    struct Result {
        var events: Int
        var seconds: Double
        var latencies: [Double]
        var rate: Double { Double(events) / seconds }
        func percentile(_ p: Double) -> Double? {
            guard !latencies.isEmpty else { return nil }
            let sorted = latencies.sorted()
            return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
        }
        var p50: Double? { percentile(0.5) }
        var p99: Double? { percentile(0.99) }
        func line(workers: Int, mode: String) -> String {
            String(format: "%7d  ", workers) + mode.padding(toLength: 19, withPad: " ", startingAt: 0)
                + String(format: " %8d %10.0f %8.1f %8.1f", events, rate, p50 ?? -1, p99 ?? -1)
        }
    }

    /// One run on a fresh cluster: start workers, wait for their assignment, produce, wait for every `sent`.
    static let breakdown = ProcessInfo.processInfo.environment["WORKER_BENCH_DEBUG"] == "1"

    func measure(workers count: Int, client: APNSClient, simulator: APNSSimulator, offeredRate: Int?,
                 logger: Logger, sender: (any VoIPPushSending)? = nil, relaySteps: Bool = false) async throws -> Result {
        simulator.resetPushes()
        let wallAtStart = Date()
        let clockAtStart = ContinuousClock.now
        let cluster = try EmbeddedKafkaCluster(brokers: 3, logger: logger)
        try cluster.createTopic(Topics.requests, partitions: partitions)
        try cluster.createTopic(Topics.status, partitions: partitions)
        try cluster.createTopic(Topics.deadLetter, partitions: 1)
        let kafka = KafkaConfiguration(bootstrapServers: [cluster.bootstrapServers], clientID: "bench",
                                       properties: ["fetch.wait.max.ms": "10", "topic.metadata.refresh.interval.ms": "1000"])
        let secret = try AckTokenSigner(secret: Array(repeating: 1, count: 32))
        var services: [PushWorkerService] = []
        for index in 0..<count {
            var configuration = PushWorkerConfiguration(kafka: kafka, workerID: "bench-\(index)")
            configuration.sessionTimeout = .seconds(6)
            configuration.heartbeatInterval = .milliseconds(500)
            // Where the push-worker program runs its work: on the push client's loops (NIO's shared group here).
            services.append(try PushWorkerService(configuration: configuration, sender: sender ?? APNSPushSender(client: client),
                                                  apps: ["bench"], ackTokens: secret, logger: logger,
                                                  executors: PushWorkerApp.taskExecutors(on: .singleton)))
        }
        // No workers: the Kafka relay (`--kafka-floor`, `--steps-floor`) in their place.
        let relay: [any Service] = count == 0 ? [try await KafkaRelay(kafka: kafka, partitions: partitions, steps: relaySteps, logger: logger)] : []
        let group = ServiceGroup(services: services + relay, logger: logger)
        let running = Task { try await group.run() }
        while relay.isEmpty && services.reduce(0, { $0 + $1.ownedPartitions.count }) < partitions {
            try await Task.sleep(for: .milliseconds(50))
        }

        let total = offeredRate.map { $0 * seconds } ?? events
        let producedAt = Timestamps(capacity: total)
        var noLatencies: [Double] = []
        noLatencies.reserveCapacity(total)
        let sentLatencies = Locked(noLatencies)
        let sentAt = Locked<[String: ContinuousClock.Instant]>([:])
        // Manual assignment: no group join delay before the first status can be read.
        let statusConsumer = try KafkaConsumer(configuration: KafkaConsumerConfiguration(kafka: kafka, mode: .manual), logger: logger)
        try await statusConsumer.assign((0..<Int32(partitions)).map {
            KafkaPartitionAssignment(topic: Topics.status, partition: $0, start: .beginning)
        })
        let collecting = Task {
            for try await message in statusConsumer.messages {
                let now = ContinuousClock.now
                // Statuses are keyed by call id; the contract's encoding is stable (sorted keys, no
                // spaces), so a byte search finds `sent` without decoding (the measuring side's own
                // cost stays small next to the worker's).
                guard let key = message.key, Self.isSent(message.value),
                      let start = producedAt.get(String(decoding: key, as: UTF8.self)) else { continue }
                if Self.breakdown { sentAt.withLock { $0[String(decoding: key, as: UTF8.self)] = now } }
                let done = sentLatencies.withLock { latencies -> Int in
                    latencies.append((now - start).inSeconds * 1000)
                    return latencies.count
                }
                if done >= total { break }
            }
        }
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(kafka: kafka, linger: .milliseconds(1)), logger: logger)
        let events = try makeEvents(total)
        let started = ContinuousClock.now
        if let offeredRate {
            // Each tick's batch is produced in its own task so acknowledgements never slow the ticker.
            let tick = Duration.milliseconds(10)
            let perTick = max(1, offeredRate / 100)
            try await withThrowingTaskGroup(of: Void.self) { group in
                var sent = 0
                var next = ContinuousClock.now
                while sent < total {
                    let batch = min(perTick, total - sent)
                    let slice = events[sent..<(sent + batch)]
                    group.addTask { try await self.produce(slice, producer: producer, producedAt: producedAt) }
                    sent += batch
                    next = next.advanced(by: tick)
                    try await Task.sleep(until: next)
                }
                try await group.waitForAll()
            }
        } else {
            // Four batches in flight: one batch at a time waits out each acknowledgement, and that
            // alone held the offered load near 44k events/s (a relay that does nothing reached no more).
            try await withThrowingTaskGroup(of: Void.self) { group in
                var sent = 0
                var inFlight = 0
                while sent < total {
                    if inFlight == 4 {
                        try await group.next()
                        inFlight -= 1
                    }
                    let slice = events[sent..<(sent + min(2_000, total - sent))]
                    group.addTask { try await self.produce(slice, producer: producer, producedAt: producedAt) }
                    sent += slice.count
                    inFlight += 1
                }
                try await group.waitForAll()
            }
        }
        let deadline = ContinuousClock.now + .seconds(120)
        while sentLatencies.withLock({ $0.count }) < total && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let elapsed = (ContinuousClock.now - started).inSeconds
        if sentLatencies.withLock({ $0.count }) < total { print("  (not every event reached sent within 120 s)") }
        collecting.cancel()
        await statusConsumer.shutdown()
        await producer.shutdown()
        await group.triggerGracefulShutdown()
        _ = await running.result
        await cluster.shutdown()
        let latencies = sentLatencies.withLock { $0 }
        if Self.breakdown, offeredRate == nil {
            // Saturation: when the pushes reached the simulator vs when their statuses were read, so a
            // measuring side that falls behind the worker shows.
            let received = simulator.pushes().map { (clockAtStart + .seconds($0.receivedAt.timeIntervalSince(wallAtStart)) - started).inSeconds }
            if let last = received.max(), let first = received.min() {
                print(String(format: "         saturation: pushes at the simulator %.3f–%.3f s after the first produce (%.0f/s); last status read at %.3f s",
                             first, last, Double(received.count) / max(last - first, 0.001), elapsed))
            }
        }
        if Self.breakdown, offeredRate != nil {
            var toPush: [Double] = []
            var pushToStatus: [Double] = []
            var windows: [Int: [Double]] = [:]
            let reads = sentAt.withLock { $0 }
            for push in simulator.pushes() {
                guard let payload = try? VoIPPayload.decode(Data(push.payload.utf8)),
                      let produced = producedAt.get(payload.callId), let read = reads[payload.callId] else { continue }
                let received = clockAtStart + .seconds(push.receivedAt.timeIntervalSince(wallAtStart))
                toPush.append((received - produced).inSeconds * 1000)
                pushToStatus.append((read - received).inSeconds * 1000)
                windows[Int((produced - started).inSeconds * 10), default: []].append((read - produced).inSeconds * 1000)
            }
            // Stalls: the 100 ms windows (by produce time) whose p99 is over 2.5 times the run's p50, so a
            // periodic pause (a timer, a table growing) shows with its time.
            let runP50 = Result(events: 0, seconds: 1, latencies: Array(windows.values.joined())).p50 ?? 0
            for window in windows.keys.sorted() {
                let part = Result(events: windows[window]!.count, seconds: 0.1, latencies: windows[window]!)
                guard let p99 = part.p99, p99 > 2.5 * runP50 else { continue }
                print(String(format: "         stall: events produced %.1f–%.1f s (%d): p50 %.1f ms, p99 %.1f ms",
                             Double(window) / 10, Double(window + 1) / 10, part.events, part.p50 ?? -1, p99))
            }
            for (name, values) in [("produced → simulator receipt", toPush), ("receipt → sent status read", pushToStatus)] {
                let part = Result(events: values.count, seconds: 1, latencies: values)
                print(String(format: "         %@: p50 %.1f ms, p99 %.1f ms (%d pushes)", name as NSString,
                             part.p50 ?? -1, part.p99 ?? -1, values.count))
            }
        }
        return Result(events: latencies.count, seconds: elapsed, latencies: latencies)
    }

    /// The ring events of a run, made before its clock starts (so the load generator's own work
    /// stays out of the measured window): call ids and records.
    private func makeEvents(_ count: Int) throws -> [(id: String, record: KafkaProducerRecord)] {
        let now = Date()
        var generator = SystemRandomNumberGenerator()
        return try (0..<count).map { _ in
            let callId = CallID.make()
            let token = Hex.random(bytes: 32, using: &generator)
            let ring = Self.ring(callId: callId, token: token, now: now)
            return (callId, KafkaProducerRecord(topic: Topics.requests, key: Array(callId.utf8), value: Array(try CallRequest.ring(ring).encoded())))
        }
    }

    private func produce(_ events: ArraySlice<(id: String, record: KafkaProducerRecord)>, producer: KafkaProducer,
                         producedAt: Timestamps) async throws {
        producedAt.set(events.map(\.id), ContinuousClock.now)
        for result in try await producer.send(events.map(\.record)) { _ = try result.get() }
    }

    /// The benchmarks' ring: app "bench", sandbox, a driver calling, 120 s to ring, one attribute.
    static func ring(callId: String, token: String, now: Date) -> RingRequest {
        RingRequest(callId: callId, app: "bench", device: Device(token: token, environment: .sandbox),
                    caller: Caller(handle: "driver-1234", displayName: "Driver Tanaka"),
                    requestedAt: now, ringDeadline: now.addingTimeInterval(120), attributes: ["rideId": "R-829"])
    }

    /// The `sent` status a worker writes for `ring` (what the relay writes and `steps` encodes).
    static func sentStatus(_ ring: RingRequest, deviceKey: String, apnsID: String, at now: Date) -> CallStatus {
        CallStatus(callId: ring.callId, deviceId: ring.device.id, deviceKey: deviceKey, app: ring.app, state: .sent,
                   attempt: 1, replay: ring.replay, at: now, apns: .init(id: apnsID, status: 200, timestamp: now), worker: "bench-0")
    }

    static let sentState = Array(#""state":"sent""#.utf8)

    /// Whether a status document says `sent` (a plain byte search: the generic `contains` is slow).
    static func isSent(_ value: [UInt8]) -> Bool {
        let needle = sentState
        guard value.count >= needle.count else { return false }
        outer: for start in 0...(value.count - needle.count) where value[start] == needle[0] {
            for offset in 1..<needle.count where value[start + offset] != needle[offset] { continue outer }
            return true
        }
        return false
    }

    /// When each call's event was produced.
    final class Timestamps: Sendable {
        private let map: Locked<[String: ContinuousClock.Instant]>
        /// Sized for the run up front: growing the table mid-run re-hashes every call id under the lock
        /// (a pause of the producer and the status reader at each doubling).
        init(capacity: Int) {
            var map: [String: ContinuousClock.Instant] = [:]
            map.reserveCapacity(capacity)
            self.map = Locked(map)
        }
        func set(_ ids: [String], _ instant: ContinuousClock.Instant) { map.withLock { for id in ids { $0[id] = instant } } }
        func get(_ id: String) -> ContinuousClock.Instant? { map.withLock { $0[id] } }
    }

    /// Pushes/s of the APNs client alone against the same simulator, with the push a worker sends for one
    /// of the benchmark's rings (the same VoIP payload, accepted and recorded by the simulator).
    func bareClientRate(client: APNSClient, total: Int, simulatorAccepted: () -> Int) async throws -> Double {
        let now = Date()
        let token = String(repeating: "ab", count: 32)
        let ring = Self.ring(callId: CallID.make(), token: token, now: now)
        let deviceKey = DeviceKey.make(token: token)
        let ackToken = try AckTokenSigner(secret: Array(repeating: 1, count: 32)).token(callId: ring.callId, deviceKey: deviceKey)
        let payload = try VoIPPayload(ring: ring, deviceKey: deviceKey, ackToken: ackToken).encoded()
        let push = APNSVoIPPush(app: "bench", deviceToken: token, environment: .sandbox, payload: payload,
                                expiration: .at(ring.ringDeadline))
        let accepted = simulatorAccepted()
        let next = SharedCounter()
        let started = ContinuousClock.now
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<500 {
                group.addTask {
                    var push = push
                    while next.next() < total {
                        push.apnsID = UUID.randomVersion4()
                        _ = await client.send(push)
                    }
                }
            }
        }
        let seconds = (ContinuousClock.now - started).inSeconds
        // A reference made of refused pushes would be no reference: every push must have been accepted.
        let refused = total - (simulatorAccepted() - accepted)
        if refused > 0 { throw SimulatorPeers.PeerError(description: "bare client: the simulator did not accept \(refused) of \(total) pushes") }
        return Double(total) / seconds
    }
}

/// `--without-apns`: accepts every push at once, so a run measures Kafka and the worker alone.
struct AcceptingSender: VoIPPushSending {
    func send(_ push: VoIPPush) async -> PushAttempt {
        PushAttempt(disposition: .sent, status: 200, apnsID: push.apnsID, timestamp: Date())
    }
}
