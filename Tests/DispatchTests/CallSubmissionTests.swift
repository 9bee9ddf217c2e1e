import CallContract
import CallpushTestSupport
import CallpushCore
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
                // (payload-size refusals excepted: those decode, and only the push would be too big;
                // and the API's own stricter rules: spoofing characters in the caller, control
                // characters in attributes — the worker still takes such events from other producers).
                guard error.code != .payloadTooLarge, !CallSubmission.apiOnlyRule(error) else { continue }
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

    /// `check` encodes the VoIP payload only for events within `payloadOverheadBound` of Apple's
    /// limit: the bound must hold for any ring, and the answer must be the full check's.
    @Test func thePayloadSizeShortcutGivesTheFullChecksAnswer() throws {
        let now = ContractCoding.truncatedToMilliseconds(Date(timeIntervalSince1970: 1_795_262_400.0123))
        var refused = 0
        var accepted = 0
        for size in stride(from: 0, through: 5_200, by: 13) {
            for (handleType, displayName) in [(Caller.HandleType.generic, nil), (.phoneNumber, "\u{1}\"/漢😀"), (.emailAddress, String(repeating: "\"", count: 256))] {
                // `size` bytes of attribute values in chunks under the 1024-byte value limit; odd sizes
                // use a character JSON escapes (two bytes written per byte).
                let unit = size % 2 == 0 ? "v" : "\n"
                let count = size % 2 == 0 ? size : size / 2
                let attributes = Dictionary(uniqueKeysWithValues: stride(from: 0, to: count, by: 1000).enumerated().map { index, start in
                    ("k\(index)", String(repeating: unit, count: min(1000, count - start)))
                })
                let ring = RingRequest(callId: CallID.make(), app: "rider", device: Device(token: String(repeating: "ab", count: 32), environment: .sandbox),
                                       caller: Caller(handle: "h", handleType: handleType, displayName: displayName),
                                       requestedAt: now, ringDeadline: now.addingTimeInterval(30), maxDurationSeconds: 3600,
                                       attributes: attributes, replay: 0)
                let event = try CallRequest.ring(ring).encoded()
                let payload = VoIPPayload(ring: ring, deviceKey: DeviceKey.make(token: ring.device.token),
                                          ackToken: String(repeating: "A", count: AckTokenSigner.tokenLength))
                // The contract's encoder writes the same bytes as `VoIPPayload.encoded()`, without its size limit.
                let payloadBytes = try ContractCoding.encode(payload).count
                #expect(payloadBytes <= event.count + CallSubmission.payloadOverheadBound, "size \(size)")
                let fits = payloadBytes <= VoIPPayload.maxBytes && event.count <= ContractCoding.maxDocumentBytes
                let result = Result { () throws(DispatchProblem) in try CallSubmission.check(ring, deviceIndex: 0) }
                switch result {
                case .success: #expect(fits, "accepted a payload of \(payloadBytes) bytes"); accepted += 1
                case .failure(let error):
                    let detail: String = error.detail
                    #expect(!fits, "refused a payload of \(payloadBytes) bytes: \(detail)")
                    refused += 1
                }
            }
        }
        #expect(accepted > 100 && refused > 10, "both sides of the limit are exercised")
    }

    /// The fast body decoder in front of `JSONDecoder` accepts only what the decoder accepts, as
    /// the same value (request bodies and random mutations of them).
    @Test func theFastBodyDecoderAgreesWithTheDecoder() throws {
        var generator = SystemRandomNumberGenerator()
        let inserts = Array(#"{}[],:" \-0123456789.eEnulltruefalse"#.utf8) + [0x00, 0x7F, 0xC3]
        var fastCount = 0
        let plain = Self.submissions().map { submission -> CallSubmission in
            var submission = submission
            submission.caller = Caller(handle: "driver-1", displayName: "Driver")
            return submission
        }
        for submission in Self.submissions() + plain + [CallSubmission(callId: "1B4E28BA-2FA1-4D3B-A3F5-EF19B5A7633B", app: "rider",
                                                               devices: [Device(token: String(repeating: "cd", count: 40), environment: .production)],
                                                               caller: Caller(handle: "h", handleType: .phoneNumber), ringTimeoutSeconds: 45)] {
            let original = Array(try ContractCoding.encode(submission))
            for round in 0..<20 {
                var bytes = original
                if round > 0 { ByteMutation.mutate(&bytes, alphabet: inserts, using: &generator) }
                let data = Data(bytes)
                guard let value = FastJSON.parse(data), let fast = CallSubmission(fast: value) else { continue }
                fastCount += 1
                #expect((try? ContractCoding.decode(CallSubmission.self, from: data)) == fast, "\(String(decoding: data, as: UTF8.self))")
            }
        }
        #expect(fastCount > 50, "the fast path is exercised")
    }
}
