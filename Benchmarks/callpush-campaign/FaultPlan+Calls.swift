import CallContract
import Foundation
import ProcessStack

/// Faults carried by calls: devices the simulator refuses, cancels, and the DLQ replay.
extension FaultPlan {
    /// Rings the cycle's doomed calls (one production device each, refused with 400
    /// `BadDeviceToken` until ``cancelDoomed(cycle:)`` lifts it: they fail and are dead-lettered)
    /// and its mismatched calls (a production device, and a sandbox device refused with 403
    /// `BadEnvironmentKeyInToken` as APNs refuses a token whose environment the key is not valid
    /// for: the worker suspends the app's sandbox pushes, never its production ones).
    func ringDoomedAndMismatched(cycle: Int) async throws {
        let doomedTokens = (0..<Self.doomedPerCycle).map { _ in StackFiles.randomHex(32) }
        let sandboxTokens = (0..<Self.mismatchedPerCycle).map { _ in StackFiles.randomHex(32) }
        try await simulator.refuse(doomedTokens, status: 400, reason: "BadDeviceToken")
        try await simulator.refuse(sandboxTokens, status: 403, reason: "BadEnvironmentKeyInToken")
        var calls: [Doomed] = []
        for token in doomedTokens {
            // A short ring window, so the replay re-arms it (`--new-deadline`) whenever it runs.
            let call = await load.ring(.doomed, production: [token], ringTimeout: 15)
            if call.answer == .accepted { calls.append(Doomed(callId: call.callId, tokens: [token], cycle: cycle)) }
        }
        addDoomed(calls)
        for token in sandboxTokens {
            await load.ring(.mismatched, production: [StackFiles.randomHex(32)], sandbox: [token], ringTimeout: load.ringTimeoutSeconds)
        }
    }

    /// Once the cycle's doomed calls have failed, cancels half of them through dispatch and lets
    /// their devices be rung again (the replay must ring the others and never the cancelled ones).
    func cancelDoomed(cycle: Int) async throws {
        let calls = doomedCalls(cycle: cycle)
        let deadline = ContinuousClock.now + .seconds(20)
        func settled() -> Bool {
            calls.allSatisfy { call in
                call.tokens.allSatisfy { !Verdict.outcomes(collector.statuses(callId: call.callId, deviceKey: DeviceKey.make(token: $0)), replay: 0).isEmpty }
            }
        }
        while !settled(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(250)) }
        if !settled() { problem("cycle \(cycle): not every doomed call had its outcome within 20 s; cancelling anyway") }
        var cancelled = 0
        for call in calls.prefix(calls.count / 2) where await load.cancel(call.callId) { cancelled += 1 }
        try await simulator.clear(calls.flatMap(\.tokens))
        note("cancelled \(cancelled) of \(calls.count) doomed calls (dispatch answered 202); their devices are no longer refused")
    }

    /// `callpush replay --error-code BadDeviceToken --new-deadline 30s`: what an operator runs
    /// after fixing what failed. Every worker was restarted since the cancels, so only the
    /// cancelled statuses on `voip.call-status` can keep the cancelled calls from ringing.
    func replayDoomed(cycle: Int) async throws {
        let logPath = "\(stack.files.directory)/callpush-replay.log"
        let replay = try ChildProcess(
            name: "callpush-replay", executable: "\(stack.binDirectory)/callpush",
            arguments: ["replay", "--bootstrap", stack.cluster.bootstrapServers, "--error-code", "BadDeviceToken",
                        "--new-deadline", "30s", "--kafka-property", "fetch.wait.max.ms=10"],
            environment: [:], logPath: logPath)
        guard let exit = await replay.waitForExit(timeout: .seconds(90)) else {
            await replay.stop(timeout: .seconds(5))
            throw StackError("callpush replay did not end within 90 s (see \(logPath))")
        }
        guard exit == .status(0) else { throw StackError("callpush replay ended with \(exit) (see \(logPath))") }
        markReplayed(cycle: cycle)
        let log = String(decoding: FileManager.default.contents(atPath: logPath) ?? Data(), as: UTF8.self)
        if let summary = log.split(separator: "\n").last(where: { $0.hasPrefix("replayed ") }) { note("callpush replay: \(summary)") }
    }
}

extension FaultPlan {
    /// When the workers suspended the app's sandbox pushes (from their logs: the suspension is
    /// logged at `error` with its environment and end): the mismatched devices' fault took effect.
    func sandboxSuspensions() -> [ClosedRange<Date>] {
        let until = ISO8601DateFormatter()
        until.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return stack.workerLogLines(containing: "its pushes are suspended").compactMap { line in
            guard line.value("apns.environment") == "sandbox", let end = line.value("suspended.until").flatMap({ until.date(from: String($0)) }),
                  end >= line.at else { return nil }
            return line.at...end
        }
    }
}
