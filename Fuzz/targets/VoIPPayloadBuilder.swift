// libFuzzer target: the VoIP payload builder. Whatever ring a valid event describes, building
// its payload either succeeds with at most 5,120 bytes that decode back to the same call, or
// fails with `payload-too-large` — never a crash, never an oversized payload sent to APNs.
// Compiled into the CallContract module itself (scripts/fuzz), so no import of it.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzVoIPPayloadBuilder(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let data = Data(bytes: start, count: count)
    guard case .ring(let ring)? = try? CallRequest.decode(data) else { return 0 }
    let deviceKey = DeviceKey.make(token: ring.device.token)
    let payload = VoIPPayload(ring: ring, deviceKey: deviceKey, ackToken: String(repeating: "A", count: 43))
    do {
        let bytes = try payload.encoded()
        guard bytes.count <= VoIPPayload.maxBytes else { fatalError("payload of \(bytes.count) bytes was accepted") }
        guard let decoded = try? VoIPPayload.decode(bytes), decoded.callId == ring.callId,
              decoded.handle == ring.caller.handle, decoded.attributes == ring.attributes else {
            fatalError("payload does not decode back to the ring")
        }
    } catch {
        guard error.code == .payloadTooLarge else { fatalError("unexpected error \(error)") }
    }
    return 0
}
