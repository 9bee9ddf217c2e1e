import CallContract
import Foundation
import ProcessStack

/// Faults carried by calls: devices the simulator refuses, cancels, and the DLQ replay.
extension FaultPlan {
    /// Rings the cycle's doomed calls (one device each: a production iPhone refused with 400
    /// `BadDeviceToken`, or an Android phone refused with 404 `UNREGISTERED`, until
    /// ``cancelDoomed(cycle:)`` lifts it: they fail and are dead-lettered) and its mismatched calls (a production device, and a sandbox device refused with 403
    /// `BadEnvironmentKeyInToken` as APNs refuses a token whose environment the key is not valid
    /// for: the worker suspends the app's sandbox pushes, never its production ones).
    func ringDoomedAndMismatched(cycle: Int) async throws {
        let doomedTokens = (0..<Self.doomedPerCycle).map { _ in StackFiles.randomHex(32) }
        let sandboxTokens = (0..<Self.mismatchedPerCycle).map { _ in StackFiles.randomHex(32) }
        try await simulator.refuse(doomedTokens, status: 400, reason: "BadDeviceToken")
        try await simulator.refuse(sandboxTokens, status: 403, reason: "BadEnvironmentKeyInToken")
        let doomedAndroid = (0..<Self.doomedAndroidPerCycle).map { _ in CallLoad.fcmToken() }
        try await fcm.refuse(doomedAndroid, errorCode: "UNREGISTERED")
        var calls: [Doomed] = []
        let doomed: [(CallLoad.Platform, String)] = doomedTokens.map { (.ios, $0) } + doomedAndroid.map { (.android, $0) }
        for (platform, token) in doomed {
            // A short ring window, so the replay re-arms it (`--new-deadline`) whenever it runs.
            let call: CallLoad.Call
            switch platform {
            case .ios: call = await load.ring(.doomed, production: [token], ringTimeout: 15)
            case .android: call = await load.ring(.doomed, android: [token], ringTimeout: 15)
            }
            if call.answer == .accepted { calls.append(Doomed(callId: call.callId, tokens: [token], cycle: cycle, platform: platform)) }
        }
        addDoomed(calls)
        for token in sandboxTokens {
            await load.ring(.mismatched, production: [StackFiles.randomHex(32)], sandbox: [token], ringTimeout: load.ringTimeoutSeconds)
        }
    }

    /// Once the cycle's doomed calls have failed, cancels half of each platform's through dispatch
    /// and lets their devices be rung again (the replay must ring the others and never the
    /// cancelled ones).
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
        var cancelled: [String] = []
        for platform in CallLoad.Platform.allCases {
            let ofPlatform = calls.filter { $0.platform == platform }
            var count = 0
            for call in ofPlatform.prefix(ofPlatform.count / 2) where await load.cancel(call.callId) { count += 1 }
            cancelled.append("\(count) of \(ofPlatform.count) \(platform.rawValue)")
        }
        try await simulator.clear(calls.filter { $0.platform == .ios }.flatMap(\.tokens))
        try await fcm.clear(calls.filter { $0.platform == .android }.flatMap(\.tokens))
        note("cancelled \(cancelled.joined(separator: ", ")) doomed calls (dispatch answered 202); their devices are no longer refused")
    }

    /// `callpush replay --error-code BadDeviceToken --new-deadline 30s`, then the same with
    /// `UNREGISTERED` (the Android doomed calls): what an operator runs after fixing what failed.
    /// Each error code has its own replay group: a run moves its group's position past every record
    /// it examined, matching or not. Every worker was restarted since the cancels, so only the
    /// cancelled statuses on `voip.call-status` can keep the cancelled calls from ringing.
    func replayDoomed(cycle: Int) async throws {
        for code in ["BadDeviceToken", "UNREGISTERED"] { try await replay(errorCode: code) }
        markReplayed(cycle: cycle)
    }

    private func replay(errorCode: String) async throws {
        let logPath = "\(stack.files.directory)/callpush-replay-\(errorCode).log"
        let replay = try ChildProcess(
            name: "callpush-replay", executable: "\(stack.binDirectory)/callpush",
            arguments: ["replay", "--bootstrap", stack.cluster.bootstrapServers, "--error-code", errorCode,
                        "--group", "callpush-replay-\(errorCode)",
                        "--new-deadline", "30s", "--kafka-property", "fetch.wait.max.ms=10"],
            environment: [:], logPath: logPath)
        guard let exit = await replay.waitForExit(timeout: .seconds(90)) else {
            await replay.stop(timeout: .seconds(5))
            throw StackError("callpush replay did not end within 90 s (see \(logPath))")
        }
        guard exit == .status(0) else { throw StackError("callpush replay ended with \(exit) (see \(logPath))") }
        let log = String(decoding: FileManager.default.contents(atPath: logPath) ?? Data(), as: UTF8.self)
        if let summary = log.split(separator: "\n").last(where: { $0.hasPrefix("replayed ") }) { note("callpush replay --error-code \(errorCode): \(summary)") }
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
