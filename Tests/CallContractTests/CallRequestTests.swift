import Foundation
import Testing
@testable import CallContract

/// The ring event exactly as the contract documents it (docs/contract.md).
let documentedRing = """
{
  "type": "ring",
  "callId": "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b",
  "app": "rider",
  "device": {"token": "\(String(repeating: "ab", count: 32))", "environment": "production", "id": "backend-device-id"},
  "caller": {"handle": "driver-1234", "handleType": "generic", "displayName": "Driver Tanaka"},
  "hasVideo": false,
  "requestedAt": "2026-11-21T12:00:00.000Z",
  "ringDeadline": "2026-11-21T12:00:30.000Z",
  "maxDurationSeconds": 300,
  "attributes": {"rideId": "R-829"},
  "replay": 0
}
"""

/// Decodes `json` and returns the contract error's rendering, or nil when it decoded.
func decodeError(_ json: String) -> ContractError? {
    do {
        _ = try CallRequest.decode(Data(json.utf8))
        return nil
    } catch {
        return error
    }
}

/// The documented ring with one field replaced (or removed with `nil`), as JSON text.
func ring(replacing path: [String], with value: Any?) throws -> String {
    var object = try #require(try JSONSerialization.jsonObject(with: Data(documentedRing.utf8)) as? [String: Any])
    func set(_ dict: inout [String: Any], _ keys: ArraySlice<String>) {
        guard let first = keys.first else { return }
        if keys.count == 1 {
            dict[first] = value
        } else {
            var inner = dict[first] as? [String: Any] ?? [:]
            set(&inner, keys.dropFirst())
            dict[first] = inner
        }
    }
    set(&object, path[...])
    return String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
}

@Suite struct CallRequestDecoding {
    @Test func documentedRingDecodes() throws {
        let request = try CallRequest.decode(Data(documentedRing.utf8))
        guard case .ring(let ring) = request else { Issue.record("expected ring"); return }
        #expect(ring.callId == "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b")
        #expect(ring.app == "rider")
        #expect(ring.device.environment == .production)
        #expect(ring.device.id == "backend-device-id")
        #expect(ring.caller.displayName == "Driver Tanaka")
        #expect(ring.ringDeadline.timeIntervalSince(ring.requestedAt) == 30)
        #expect(ring.maxDurationSeconds == 300)
        #expect(ring.attributes == ["rideId": "R-829"])
        #expect(ring.replay == 0)
    }

    @Test func ringRoundTripsWithContractFieldNamesAndStableBytes() throws {
        let request = try CallRequest.decode(Data(documentedRing.utf8))
        let encoded = try request.encoded()
        let object = try #require(try JSONSerialization.jsonObject(with: encoded) as? [String: Any])
        #expect(Set(object.keys) == ["type", "callId", "app", "device", "caller", "hasVideo", "requestedAt",
                                     "ringDeadline", "maxDurationSeconds", "attributes", "replay"])
        #expect(Set((object["device"] as? [String: Any] ?? [:]).keys) == ["token", "environment", "id"])
        #expect(Set((object["caller"] as? [String: Any] ?? [:]).keys) == ["handle", "handleType", "displayName"])
        #expect(object["requestedAt"] as? String == "2026-11-21T12:00:00.000Z")
        #expect(object["type"] as? String == "ring")
        try expectRoundTrip(request, encoded)
    }

    @Test func cancelRoundTrips() throws {
        let json = #"{"type":"cancel","callId":"1B4E28BA-2FA1-4D3B-A3F5-EF19B5A7633B","requestedAt":"2026-11-21T12:00:05Z"}"#
        let request = try CallRequest.decode(Data(json.utf8))
        #expect(request.type == .cancel)
        #expect(request.callId == "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", "call ids are normalised to lower case")
        let encoded = String(decoding: try request.encoded(), as: UTF8.self)
        #expect(encoded == #"{"callId":"1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b","requestedAt":"2026-11-21T12:00:05.000Z","type":"cancel"}"#)
    }

    @Test func optionalFieldsTakeTheirDefaults() throws {
        var json = try ring(replacing: ["hasVideo"], with: nil)
        json = try ring(replacing: ["replay"], with: nil)
        let stripped = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        var object = stripped
        object["attributes"] = nil
        object["maxDurationSeconds"] = nil
        object["caller"] = ["handle": "driver-1"]
        let data = try JSONSerialization.data(withJSONObject: object)
        guard case .ring(let ring) = try CallRequest.decode(data) else { Issue.record("expected ring"); return }
        #expect(ring.hasVideo == false)
        #expect(ring.replay == 0)
        #expect(ring.attributes.isEmpty)
        #expect(ring.caller.handleType == .generic)
        #expect(ring.maxDurationSeconds == nil)
    }

    @Test func uppercaseTokensAreNormalised() throws {
        let json = try ring(replacing: ["device", "token"], with: String(repeating: "AB", count: 32))
        guard case .ring(let ring) = try CallRequest.decode(Data(json.utf8)) else { Issue.record("expected ring"); return }
        #expect(ring.device.token == String(repeating: "ab", count: 32))
    }
}

@Suite struct CallRequestRejections {
    @Test func malformedJSON() {
        let error = decodeError(#"{"type": "ring", "#)
        #expect(error?.code == .malformedJSON)
        #expect(error?.description == "malformed JSON")
    }

    @Test func notAnObject() {
        #expect(decodeError("[1,2,3]")?.code == .wrongType)
        #expect(decodeError("")?.code == .malformedJSON)
    }

    @Test func unknownType() {
        let error = decodeError(#"{"type":"hangup","callId":"1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b"}"#)
        #expect(error?.code == .unknownType)
        #expect(error?.path == "type")
        #expect(error?.description == #"type: unknown event type "hangup" (expected "ring" or "cancel")"#)
    }

    @Test func missingType() {
        #expect(decodeError(#"{"callId":"1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b"}"#)?.description == "type: missing")
    }

    @Test(arguments: [
        (["callId"], nil, "callId: missing"),
        (["callId"], "42", "callId: not a UUID"),
        (["callId"], 42, "callId: expected a string"),
        (["app"], "", "app: must not be empty"),
        (["app"], "rider app", "app: only letters, digits, '.', '-' and '_' are allowed"),
        (["device"], nil, "device: missing"),
        (["device", "token"], nil, "device.token: missing"),
        (["device", "token"], String(repeating: "zz", count: 32), "device.token: not hexadecimal"),
        (["device", "token"], "abcd", "device.token: wrong length (4 hex digits; expected an even number from 64 to 200)"),
        (["device", "environment"], "staging", #"device.environment: unknown value "staging" (expected one of "production", "sandbox")"#),
        (["caller", "handle"], nil, "caller.handle: missing"),
        (["caller", "handleType"], "sip", #"caller.handleType: unknown value "sip" (expected one of "generic", "phoneNumber", "emailAddress")"#),
        (["hasVideo"], "yes", "hasVideo: expected a boolean"),
        (["requestedAt"], "yesterday", "requestedAt: not an RFC 3339 timestamp"),
        (["ringDeadline"], "2026-11-21T11:59:00Z", "ringDeadline: must be later than requestedAt"),
        (["maxDurationSeconds"], 0, "maxDurationSeconds: must be between 1 and 86400"),
        (["replay"], -1, "replay: must be between 0 and 1000"),
        (["attributes", "rideId"], 829, "attributes.rideId: expected a string"),
    ] as [([String], (any Sendable)?, String)])
    func invalidFieldIsNamed(path: [String], value: (any Sendable)?, expected: String) throws {
        let json = try ring(replacing: path, with: value)
        let error = try #require(decodeError(json))
        #expect(error.description == expected)
    }

    @Test func oversizedDocumentIsRefusedBeforeParsing() {
        let huge = "{\"type\":\"ring\",\"pad\":\"" + String(repeating: "x", count: ContractCoding.maxDocumentBytes) + "\"}"
        #expect(decodeError(huge)?.code == .invalidValue)
    }
}

/// `CallID.normalize` checks the 8-4-4-4-12 form itself (no `sscanf`): it must accept exactly what
/// Foundation's UUID parser accepts in that form, and give the same lower-case text.
@Suite struct CallIDNormalizing {
    @Test func agreesWithFoundationsUUIDOnValidAndNearlyValidIDs() {
        var candidates = (0..<200).map { _ in UUID().uuidString }
        candidates += candidates.prefix(50).map { $0.lowercased() }
        candidates += ["1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633B", "00000000-0000-0000-0000-000000000000"]
        for id in candidates {
            #expect(CallID.normalize(id) == UUID(uuidString: id)?.uuidString.lowercased(), "\(id)")
            #expect(CallID.normalize(id) == id.lowercased())
        }
    }

    /// `CallID.make` (on `UUID.randomVersion4()`, which draws its own random bits instead of Foundation's
    /// `UUID()`): each id is a version-4, RFC 4122 UUID in the contract's lower-case form, and never repeats.
    @Test func madeIDsAreLowerCaseVersion4UUIDsThatDoNotRepeat() {
        let ids = (0..<20_000).map { _ in CallID.make() }
        #expect(Set(ids).count == ids.count)
        for id in ids.prefix(2_000) {
            #expect(CallID.normalize(id) == id, "\(id)")
            let bytes = Array(id.utf8)
            #expect(bytes[14] == UInt8(ascii: "4"), "version of \(id)")
            #expect("89ab".utf8.contains(bytes[19]), "variant of \(id)")
        }
        // Every random bit varies: across the ids, each hex digit outside version and variant takes many values.
        for position in Array(0..<36) where ![8, 13, 14, 18, 19, 23].contains(position) {
            #expect(Set(ids.prefix(2_000).map { Array($0.utf8)[position] }).count == 16, "position \(position)")
        }
    }

    @Test func refusesAnythingElse() {
        let valid = "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b"
        var bad = ["", valid + "0", String(valid.dropLast()), " " + String(valid.dropFirst()),
                   "1b4e28ba2fa1-4d3b-a3f5-ef19b5a7633b-", "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633g",
                   "+b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", "0x4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b",
                   "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a763é"]
        // Every position swapped for a character that does not belong there.
        for index in 0..<36 {
            var bytes = Array(valid.utf8)
            bytes[index] = [8, 13, 18, 23].contains(index) ? UInt8(ascii: "0") : UInt8(ascii: "-")
            bad.append(String(decoding: bytes, as: UTF8.self))
        }
        for id in bad {
            #expect(CallID.normalize(id) == nil, "\(id)")
        }
    }
}
