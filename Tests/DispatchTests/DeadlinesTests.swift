import Foundation
import Kafka
import Testing
@testable import DispatchService

/// `DispatchProducer.bounded`: a publish or webhook call gives up at its bound (the body may hang),
/// through the Kafka layer's shared deadline sweeper instead of a sleeping task per call.
@Suite struct DeadlinesTests {
    struct Failure: Error, Equatable {}

    @Test func aBodyThatFinishesGivesItsResultAndLeavesNoDeadlineBehind() async throws {
        let deadlines = DeadlineSweeper()
        let results = await withTaskGroup(of: Int?.self) { group in
            for index in 0..<200 {
                group.addTask {
                    let outcome = await DispatchProducer.bounded(.seconds(30), deadlines: deadlines) { index * 2 }
                    return try? outcome?.get()
                }
            }
            return await group.reduce(into: [Int?]()) { $0.append($1) }
        }
        #expect(results.compactMap { $0 }.sorted() == (0..<200).map { $0 * 2 })
        #expect(deadlines.pendingCount == 0)
        let thrown = await DispatchProducer.bounded(.seconds(30)) { () async throws -> Int in throw Failure() }
        #expect(throws: Failure.self) { try thrown?.get() }
    }

    @Test func aBodyThatHangsIsAbandonedAtItsBound() async throws {
        let deadlines = DeadlineSweeper()
        let (never, continuation) = AsyncStream<Int>.makeStream()
        let started = ContinuousClock.now
        let outcome = await DispatchProducer.bounded(.milliseconds(200), deadlines: deadlines) {
            for await value in never { return value }
            return -1
        }
        #expect(outcome == nil, "no result: the bound passed first")
        #expect(ContinuousClock.now - started >= .milliseconds(200), "not before the bound")
        #expect(deadlines.pendingCount == 0)
        continuation.finish()
    }

    @Test func aShortBoundQueuedAfterALongOneStillFiresFirst() async throws {
        let deadlines = DeadlineSweeper()
        let (never, continuation) = AsyncStream<Int>.makeStream()
        let (neverShort, shortContinuation) = AsyncStream<Int>.makeStream()
        async let long = DispatchProducer.bounded(.seconds(30), deadlines: deadlines) { for await value in never { return value }; return -1 }
        try await Task.sleep(for: .milliseconds(20))
        let started = ContinuousClock.now
        let short = await DispatchProducer.bounded(.milliseconds(100), deadlines: deadlines) { for await value in neverShort { return value }; return -1 }
        #expect(short == nil)
        #expect(ContinuousClock.now - started < .seconds(10), "the short bound did not wait for the long one")
        #expect(deadlines.pendingCount == 1, "the long one is still pending")
        continuation.finish()
        shortContinuation.finish()
        #expect(try await long?.get() == -1, "the long body finished first and gave its result")
    }
}
