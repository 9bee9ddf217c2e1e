// libFuzzer target: dispatch's request decoder (`CallSubmission.decode`, the body of
// `POST /v1/calls`) and the events it builds (`events(callId:limits:apps:now:)`).
// Any body must end in events or a `DispatchProblem` (400 with a code, and a field unless the
// JSON itself is malformed) — never a crash — and every event dispatch would publish must decode,
// on the worker's side, to the same ring (dispatch checks with `RingRequest.validate` instead of
// decoding its own output, so this is what keeps the two in step).
// Compiled with the contract sources into one module (scripts/fuzz, DispatchRequest.sources).
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDispatchRequest(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let body = Data(bytes: start, count: count)
    // The fast body decoder may only accept what JSONDecoder accepts, as the same value.
    if let value = FastJSON.parse(body), let fast = CallSubmission(fast: value) {
        guard let slow = try? ContractCoding.decode(CallSubmission.self, from: body), slow == fast else {
            fatalError("fast path accepted what the decoder refuses or reads differently: \(String(decoding: body, as: UTF8.self))")
        }
    }
    let submission: CallSubmission
    do {
        submission = try CallSubmission.decode(body)
    } catch {
        guard error.status == 400, !error.detail.isEmpty else { fatalError("refusal without a 400 and a detail: \(error)") }
        return 0
    }
    let now = Date(timeIntervalSince1970: 1_795_262_400.123)
    let callId = submission.callId ?? "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b"
    // The submission's own app is configured, so the contract rules (not "unknown app") decide.
    let outcome = Result { () throws(DispatchProblem) in
        try submission.events(callId: callId, limits: DispatchLimits(), apps: [submission.app], now: now)
    }
    switch outcome {
    case .success(let events):
        guard !events.isEmpty, events.count == submission.devices.count else { fatalError("one event per device") }
        for event in events {
            guard let decoded = try? CallRequest.decode(event.encoded), decoded == .ring(event.ring) else {
                fatalError("dispatch would publish an event the worker refuses or reads differently: \(String(decoding: event.encoded, as: UTF8.self))")
            }
            let payload = VoIPPayload(ring: event.ring, deviceKey: DeviceKey.make(token: event.ring.device.token),
                                      ackToken: String(repeating: "A", count: 43))
            guard let bytes = try? payload.encoded(), bytes.count <= VoIPPayload.maxBytes else {
                fatalError("accepted ring whose VoIP payload is refused")
            }
        }
    case .failure(let problem):
        guard problem.status == 400, problem.field != nil else { fatalError("refused events without a field: \(problem)") }
    }
    return 0
}
