import APNsSimulator
import ArgumentParser
import CallContract
import Foundation
import Kafka
import Logging
import ServiceLifecycle
import Testing
@testable import CallpushCLI

@Suite struct DevMode {
    static let logger: Logger = {
        var logger = Logger(label: "dev-tests")
        logger.logLevel = .error
        return logger
    }()

    @Test func aRingPublishedToTheDevStackRingsTheSimulatedPhone() async throws {
        let stack = try await DevStack.start(.init(brokers: 3, partitions: 2, workers: 2), logger: Self.logger)
        let group = ServiceGroup(services: stack.services, logger: Self.logger)
        let running = Task { try await group.run() }

        #expect(stack.state.topics.requests == Topics.requests)
        #expect(FileManager.default.fileExists(atPath: stack.state.caPath), "the simulator's CA is written for clients")
        let now = Date()
        let ring = RingRequest(callId: CallID.make(), app: stack.state.app,
                               device: Device(token: String(repeating: "5e", count: 32), environment: .sandbox),
                               caller: Caller(handle: "driver-1"), requestedAt: now, ringDeadline: now.addingTimeInterval(30))
        let kafka = KafkaConfiguration(bootstrapServers: [stack.state.bootstrapServers], clientID: "dev-test")
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(kafka: kafka), logger: Self.logger)
        _ = try await producer.send(KafkaProducerRecord(topic: Topics.requests, key: Array(ring.callId.utf8),
                                                        value: Array(try CallRequest.ring(ring).encoded())))
        await producer.shutdown()

        let deadline = ContinuousClock.now + .seconds(30)
        while stack.simulator.pushes().isEmpty && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        let pushes = stack.simulator.pushes()
        try #require(pushes.count == 1, "the ring reached the simulated phone")
        #expect(pushes[0].deviceToken == ring.device.token)
        #expect(pushes[0].headers["apns-push-type"] == "voip")

        let status = try await firstStatus(kafka: kafka, partitions: 2, seconds: 30)
        #expect(status?.callId == ring.callId)
        #expect(status?.state == .sent)

        await group.triggerGracefulShutdown()
        _ = await running.result
    }

    func firstStatus(kafka: KafkaConfiguration, partitions: Int32, seconds: Double) async throws -> CallStatus? {
        let consumer = try KafkaConsumer(configuration: KafkaConsumerConfiguration(kafka: kafka, mode: .manual), logger: Self.logger)
        try await consumer.assign((0..<partitions).map { KafkaPartitionAssignment(topic: Topics.status, partition: $0, start: .beginning) })
        let timer = Task {
            try? await Task.sleep(for: .seconds(seconds))
            await consumer.shutdown()
        }
        defer { timer.cancel() }
        for try await message in consumer.messages {
            if let status = try? CallStatus.decode(Data(message.value)), status.state.isTerminal {
                await consumer.shutdown()
                return status
            }
        }
        return nil
    }

    @Test(arguments: [["--brokers", "0"], ["--workers", "99"], ["--partitions", "x"], ["--log-level", "loud"], ["--nope"]])
    func badFlagsAreRefusedWithAClearMessage(arguments: [String]) {
        do {
            _ = try CallpushCommand.parseAsRoot(["dev"] + arguments)
            Issue.record("accepted \(arguments)")
        } catch {
            let message = CallpushCommand.message(for: error)
            #expect(!message.isEmpty)
            #expect(CallpushCommand.exitCode(for: error) != .success)
        }
    }
}
