import CallContract
import Foundation
import Testing
@testable import DispatchService

/// dispatch checks the events it builds with the contract's rules (`RingRequest.validate`) instead
/// of decoding its own output: whatever it accepts must decode, on the worker's side, to the
/// same event, and whatever the worker's decoder would refuse must be refused here.
@Suite struct CallSubmissionTests {
    static let apps: Set<String> = ["rider", "rider app", "", String(repeating: "a", count: 65), "r\u{7}"]

    /// Submissions with app names, durations and attributes on both sides of each rule.
    static func submissions() -> [CallSubmission] {
        let appNames = ["rider", "rider app", "", String(repeating: "a", count: 65), "r\u{7}"]
        let durations: [Int?] = [nil, 0, 1, 3600, 86_400, 86_401, -3]
        let attributeSets: [[String: String]] = [
            [:], ["rideId": "R-1", "url": "https://x/y?\"q\"\\\n"], ["": "v"], [String(repeating: "k", count: 65): "v"],
            ["room": String(repeating: "v", count: 1025)], Dictionary(uniqueKeysWithValues: (0..<33).map { ("k\($0)", "v") }),
            ["漢字": "😀\u{2028}"],
        ]
        var result: [CallSubmission] = []
        for app in appNames {
            for duration in durations {
                for attributes in attributeSets {
                    result.append(CallSubmission(
                        app: app, devices: [Device(token: String(repeating: "ab", count: 32), environment: .sandbox, id: "d/1")],
                        caller: Caller(handle: "driver \"1\"", displayName: "Dr. / Driver"), hasVideo: duration == nil,
                        maxDurationSeconds: duration, attributes: attributes))
                }
            }
        }
        return result
    }

    @Test func acceptedEventsDecodeEqualAndRefusedOnesWouldNotDecode() throws {
        var accepted = 0
        for submission in Self.submissions() {
            let now = Date(timeIntervalSince1970: 1_795_262_400.0123)
            let result = Result { () throws(DispatchProblem) in
                try submission.events(callId: CallID.make(), limits: DispatchLimits(), apps: Self.apps, now: now)
            }
            switch result {
            case .success(let events):
                for event in events {
                    #expect(try CallRequest.decode(event.encoded) == .ring(event.ring))
                    #expect(try event.encoded == ContractCoding.encode(CallRequest.ring(event.ring)))
                }
                let answer = APIModels.Accepted(rings: events.map(\.ring))
                #expect(answer.encoded() == APIModels.encode(answer), "the 202 body is the encoder's")
                accepted += 1
            case .failure(let error):
                // Refused: the same event, encoded anyway, is refused by the worker's decoder too
                // (payload-size refusals excepted: those decode, and only the push would be too big).
                guard error.code != .payloadTooLarge else { continue }
                let ring = RingRequest(callId: CallID.make(), app: submission.app, device: submission.devices[0], caller: submission.caller,
                                       requestedAt: ContractCoding.truncatedToMilliseconds(now),
                                       ringDeadline: ContractCoding.truncatedToMilliseconds(now).addingTimeInterval(30),
                                       maxDurationSeconds: submission.maxDurationSeconds, attributes: submission.attributes)
                #expect(throws: ContractError.self, "\(error.field ?? "") \(error.detail)") {
                    try CallRequest.decode(try ContractCoding.encode(CallRequest.ring(ring)))
                }
            }
        }
        #expect(accepted >= 6, "the valid combinations are accepted")
    }
}
