// libFuzzer target: the worker's event decoder (`CallRequest.decode`, its fast path checked
// against the JSONDecoder path) and status decoder
// (`CallStatus.decode`, its fast path checked likewise; used by dispatch's view and `callpush status`).
// Any input must end in a value or a `ContractError` — never a crash — and a decoded value
// must survive an encode/decode round trip unchanged (what the worker re-publishes on replay).
// Compiled into the CallContract module itself (scripts/fuzz), so no import of it.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEventDecoder(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let data = Data(bytes: start, count: count)
    // The fast ring decoder may only accept what JSONDecoder accepts, as the same value.
    if let fast = CallRequest.fastRing(data) {
        guard let slow = try? ContractCoding.decode(CallRequest.self, from: data), slow == .ring(fast) else {
            fatalError("fast path accepted what the decoder refuses or reads differently: \(String(decoding: data, as: UTF8.self))")
        }
    }
    if let request = try? CallRequest.decode(data) {
        guard let encoded = try? request.encoded() else { fatalError("a decoded request failed to encode") }
        guard let again = try? CallRequest.decode(encoded), again == request else {
            fatalError("round trip changed the request: \(String(decoding: encoded, as: UTF8.self))")
        }
    }
    // Likewise the fast status decoder (every status dispatch's view reads).
    if let fast = CallStatus.fastStatus(data) {
        guard let slow = try? ContractCoding.decode(CallStatus.self, from: data), slow == fast else {
            fatalError("fast status path accepted what the decoder refuses or reads differently: \(String(decoding: data, as: UTF8.self))")
        }
    }
    if let status = try? CallStatus.decode(data) {
        guard let encoded = try? status.encoded(), let again = try? CallStatus.decode(encoded), again == status else {
            fatalError("round trip changed the status")
        }
    }
    _ = try? CallAck.decode(data)
    return 0
}
