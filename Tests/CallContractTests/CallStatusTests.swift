import Foundation
import Testing
@testable import CallContract

@Suite struct CallStatusContract {
    let status = CallStatus(
        callId: "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", deviceId: "backend-device-id",
        deviceKey: DeviceKey.make(token: String(repeating: "ab", count: 32)), app: "rider",
        state: .failed, attempt: 1, replay: 0, at: Date(timeIntervalSince1970: 1_795_262_400.012),
        apns: .init(id: "9c6a3e3e-1d0c-4a3c-9a55-5b9e8d3f1c11", status: 410, reason: "Unregistered",
                    timestamp: Date(timeIntervalSince1970: 1_795_262_000)),
        error: .init(code: "Unregistered", message: "the device token is no longer active"),
        worker: "push-worker-7f9c")

    @Test func roundTripsWithContractFieldNames() throws {
        let encoded = try status.encoded()
        let object = try #require(try JSONSerialization.jsonObject(with: encoded) as? [String: Any])
        #expect(Set(object.keys) == ["callId", "deviceId", "deviceKey", "app", "state", "attempt", "replay", "at", "apns", "error", "worker"])
        let apns = try #require(object["apns"] as? [String: Any])
        #expect(Set(apns.keys) == ["id", "uniqueId", "status", "reason", "timestamp"])
        #expect(apns["timestamp"] as? String == "2026-11-21T11:53:20.000Z")
        #expect(object["at"] as? String == "2026-11-21T12:00:00.012Z")
        try expectRoundTrip(status, encoded)
    }

    @Test func theTenantRoundTripsAndIsOptional() throws {
        var owned = status
        owned.tenant = "taxi"
        let encoded = try owned.encoded()
        let object = try #require(try JSONSerialization.jsonObject(with: encoded) as? [String: Any])
        #expect(object["tenant"] as? String == "taxi")
        #expect(try CallStatus.decode(encoded) == owned)
        #expect(try ContractCoding.encode(owned) == encoded, "the writer and the Codable encoder agree")
        #expect(try CallStatus.decode(try status.encoded()).tenant == nil, "statuses without a tenant keep working")
        let bad = String(decoding: encoded, as: UTF8.self).replacingOccurrences(of: #""tenant":"taxi""#, with: #""tenant":"a b""#)
        #expect(throws: ContractError.self) { try CallStatus.decode(Data(bad.utf8)) }
    }

    @Test func timestampsRoundTripAtMillisecondPrecision() throws {
        for millis in [0, 1, 12, 999, 1_795_262_400_012, 1_795_262_400_999, -1, -1001] as [Int64] {
            let date = Date(timeIntervalSince1970: Double(millis) / 1000)
            let text = ContractCoding.format(date)
            let parsed = try #require(ContractCoding.parseTimestamp(text))
            #expect(ContractCoding.format(parsed) == text)
        }
        #expect(ContractCoding.format(Date(timeIntervalSince1970: 1_795_262_400.0119999)) == "2026-11-21T12:00:00.012Z")
        #expect(ContractCoding.format(Date(timeIntervalSince1970: -0.5)) == "1969-12-31T23:59:59.500Z")
    }

    @Test func nullsAreExplicitForAbsentDetails() throws {
        let sent = CallStatus(callId: status.callId, state: .cancelled, at: status.at, worker: "w")
        let text = String(decoding: try sent.encoded(), as: UTF8.self)
        #expect(text.contains(#""apns":null"#))
        #expect(text.contains(#""error":null"#))
    }

    @Test func terminalStates() {
        #expect(CallStatus.State.retrying.isTerminal == false)
        for state in [CallStatus.State.sent, .failed, .expired, .cancelled, .duplicate, .rejected] {
            #expect(state.isTerminal)
            #expect(!state.isDeviceReport)
        }
        #expect(CallStatus.State.reported.isDeviceReport)
        #expect(CallStatus.State.suppressed.isDeviceReport)
    }

    @Test func unknownStateIsNamed() throws {
        let json = #"{"callId":"x","state":"ringing","at":"2026-11-21T12:00:00Z"}"#
        let error = #expect(throws: ContractError.self) { try CallStatus.decode(Data(json.utf8)) }
        #expect(error?.path == "state")
    }
}

@Suite struct AckContract {
    @Test func suppressedNeedsTheCallKitError() {
        let json = #"{"deviceKey":"k","ackToken":"t","outcome":"suppressed"}"#
        do {
            _ = try CallAck.decode(Data(json.utf8))
            Issue.record("decoded without error")
        } catch {
            #expect(error.description == #"error: required when outcome is "suppressed""#)
        }
    }

    @Test func suppressedWithErrorDecodes() throws {
        let json = #"{"deviceKey":"k","ackToken":"t","outcome":"suppressed","error":{"code":"filteredByDoNotDisturb","domain":"com.apple.CallKit.error.incomingcall"}}"#
        let ack = try CallAck.decode(Data(json.utf8))
        #expect(ack.outcome == .suppressed)
        #expect(ack.error?.code == "filteredByDoNotDisturb")
    }

    @Test func theErrorADeviceSendsIsBounded() throws {
        func decode(_ error: String, outcome: String = "suppressed") throws(ContractError) -> CallAck {
            try CallAck.decode(Data(#"{"deviceKey":"k","ackToken":"t","outcome":"\#(outcome)","error":\#(error)}"#.utf8))
        }
        for (error, field) in [
            (#"{"code":"\#(String(repeating: "A", count: 65))"}"#, "error.code"),
            (#"{"code":"a b"}"#, "error.code"),
            (#"{"code":"ok","domain":"x\u202Ey"}"#, "error.domain"),
            (#"{"code":"ok","message":"\#(String(repeating: "m", count: 257))"}"#, "error.message"),
            (#"{"code":"ok","message":"a\u2066b"}"#, "error.message"),
            (#"{"code":"ok","message":"a\u0007b"}"#, "error.message"),
        ] {
            do {
                _ = try decode(error)
                Issue.record("accepted \(error)")
            } catch {
                #expect(error.path == field)
                #expect(error.code == .invalidValue)
            }
        }
        #expect(try decode(#"{"code":"ok","message":"\#(String(repeating: "é", count: 128))"}"#).error?.message?.utf8.count == 256)
        #expect(try decode(#"{"code":"filteredByDoNotDisturb"}"#, outcome: "reported").error == nil, "a shown call carries no error")
    }
}
