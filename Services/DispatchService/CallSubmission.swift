import CallContract
import Foundation

/// The body of `POST /v1/calls`: ring one or more devices of one callee for one call.
///
/// Decoding checks types and the per-field rules of the contract (device tokens, environments,
/// caller) and names the failing field by JSON path (`devices[1].token`). ``events(callId:limits:apps:now:)``
/// then applies dispatch's own limits and turns the submission into one contract `RingRequest`
/// per device, each checked with the contract's own rules (`RingRequest.validate`) and the 5120-byte payload limit.
public struct CallSubmission: Sendable, Hashable, Codable {
    /// The idempotency key; generated when absent.
    public var callId: String?
    /// The app to ring (an app of the apps file).
    public var app: String
    /// The callee's devices: one `ring` event each.
    public var devices: [Device]
    /// Who calls, as CallKit shows it.
    public var caller: Caller
    /// Whether the call is a video call.
    public var hasVideo: Bool
    /// How long the devices ring; default and bounds come from ``DispatchLimits``.
    public var ringTimeoutSeconds: Int?
    /// Passed to the app in the payload.
    public var maxDurationSeconds: Int?
    /// Opaque strings the app needs to connect the call.
    public var attributes: [String: String]

    /// Creates a submission (e.g. for a client or a test).
    public init(callId: String? = nil, app: String, devices: [Device], caller: Caller, hasVideo: Bool = false,
                ringTimeoutSeconds: Int? = nil, maxDurationSeconds: Int? = nil, attributes: [String: String] = [:]) {
        self.callId = callId
        self.app = app
        self.devices = devices
        self.caller = caller
        self.hasVideo = hasVideo
        self.ringTimeoutSeconds = ringTimeoutSeconds
        self.maxDurationSeconds = maxDurationSeconds
        self.attributes = attributes
    }

    enum CodingKeys: String, CodingKey {
        case callId, app, devices, caller, hasVideo, ringTimeoutSeconds, maxDurationSeconds, attributes
    }

    /// Decodes and checks types and per-field rules, naming the failing field.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        func require(_ key: CodingKeys) throws {
            guard c.contains(key), try !c.decodeNil(forKey: key) else {
                throw ContractError(.missingField, path: key.stringValue, "missing")
            }
        }
        if let text = try c.decodeIfPresent(String.self, forKey: .callId) {
            guard let normalized = CallID.normalize(text) else {
                throw ContractError(.invalidValue, path: "callId", "not a UUID")
            }
            callId = normalized
        }
        try require(.app)
        app = try c.decode(String.self, forKey: .app)
        try require(.devices)
        devices = try c.decode([Device].self, forKey: .devices)
        try require(.caller)
        caller = try c.decode(Caller.self, forKey: .caller)
        hasVideo = try c.decodeIfPresent(Bool.self, forKey: .hasVideo) ?? false
        ringTimeoutSeconds = try c.decodeIfPresent(Int.self, forKey: .ringTimeoutSeconds)
        maxDurationSeconds = try c.decodeIfPresent(Int.self, forKey: .maxDurationSeconds)
        attributes = try c.decodeIfPresent([String: String].self, forKey: .attributes) ?? [:]
    }

    /// A body in ``FastJSON``'s subset that the decoder above would accept, decoded without
    /// `JSONDecoder`; nil hands the body to the decoder (which also names any error).
    /// `CallSubmissionTests` and the `DispatchRequest` fuzz target check the two agree.
    static let fastKeys: Set<String> = [
        "callId", "app", "devices", "caller", "hasVideo", "ringTimeoutSeconds", "maxDurationSeconds", "attributes",
    ]

    init?(fast value: FastJSON.Value) {
        guard value.onlyKeys(Self.fastKeys),
              let callIdText = value.text("callId"),
              case .string(let app)? = value["app"],
              case .array(let deviceValues)? = value["devices"],
              let callerValue = value["caller"], let caller = Caller(fast: callerValue),
              let hasVideo = value.flag("hasVideo"), let ringTimeout = value.integer("ringTimeoutSeconds"),
              let maxDuration = value.integer("maxDurationSeconds"), let attributes = value.stringMap("attributes")
        else { return nil }
        var callId: String?
        if let callIdText {
            guard let normalized = CallID.normalize(callIdText) else { return nil }
            callId = normalized
        }
        var devices: [Device] = []
        devices.reserveCapacity(deviceValues.count)
        for deviceValue in deviceValues {
            guard let device = Device(fast: deviceValue) else { return nil }
            devices.append(device)
        }
        self.init(callId: callId, app: app, devices: devices, caller: caller, hasVideo: hasVideo ?? false,
                  ringTimeoutSeconds: ringTimeout, maxDurationSeconds: maxDuration, attributes: attributes)
    }

    /// Decodes a request body; every failure is a 400 problem naming the field.
    public static func decode(_ body: Data) throws(DispatchProblem) -> CallSubmission {
        if let value = FastJSON.parse(body), let submission = CallSubmission(fast: value) { return submission }
        do {
            return try ContractCoding.decode(CallSubmission.self, from: body)
        } catch {
            throw DispatchProblem.contract(error)
        }
    }

    /// Checks dispatch's limits and builds the ring events (one per device, in request order),
    /// each with its encoded bytes (what gets published).
    ///
    /// - Parameters:
    ///   - callId: the call id to use (the submission's, or a generated one).
    ///   - tenant: the tenant of the key that rings (carried by every event).
    ///   - now: `requestedAt` of every event.
    public func events(callId: String, tenant: String? = nil, limits: DispatchLimits, apps: Set<String>,
                       now: Date) throws(DispatchProblem) -> [(ring: RingRequest, encoded: Data)] {
        guard !devices.isEmpty else { throw DispatchProblem.invalid("devices", "at least one device is required") }
        guard devices.count <= limits.maxDevices else {
            throw DispatchProblem.invalid("devices", "more than \(limits.maxDevices) devices", code: .tooManyDevices)
        }
        // Compared as the device key compares them (lower-cased): two tokens that differ only in case
        // would share a delivery key, and the second would end `duplicate` without ringing.
        var seen = Set<String>()
        for (index, device) in devices.enumerated()
        where !seen.insert(device.platform == .ios ? device.token : device.token.lowercased()).inserted {
            throw DispatchProblem.invalid("devices[\(index)].token", "the same token appears twice")
        }
        // What CallKit shows must not be spoofable: the contract refuses control characters, the
        // API also bidi controls and invisible characters (zero-width joiners stay: emoji use them).
        for (field, text) in [("caller.handle", caller.handle), ("caller.displayName", caller.displayName)] {
            if let text, text.unicodeScalars.contains(where: Self.isSpoofing) {
                throw DispatchProblem.invalid(field, Self.spoofingDetail)
            }
        }
        for (key, value) in attributes where Self.hasControl(key) || Self.hasControl(value) {
            throw DispatchProblem.invalid("attributes.\(key.prefix(64))", Self.controlDetail)
        }
        let timeout = ringTimeoutSeconds ?? limits.defaultRingTimeoutSeconds
        guard limits.ringTimeoutSeconds.contains(timeout) else {
            throw DispatchProblem.invalid("ringTimeoutSeconds",
                                          "must be between \(limits.ringTimeoutSeconds.lowerBound) and \(limits.ringTimeoutSeconds.upperBound)")
        }
        let requestedAt = ContractCoding.truncatedToMilliseconds(now)
        var rings: [(ring: RingRequest, encoded: Data)] = []
        for (index, device) in devices.enumerated() {
            let ring = RingRequest(callId: callId, app: app, device: device, caller: caller, hasVideo: hasVideo,
                                   requestedAt: requestedAt, ringDeadline: requestedAt.addingTimeInterval(Double(timeout)),
                                   maxDurationSeconds: maxDurationSeconds, attributes: attributes, tenant: tenant)
            rings.append((ring, try Self.check(ring, deviceIndex: index)))
        }
        // Known app last: a malformed name is reported as such by the contract check above.
        guard apps.contains(app) else {
            throw DispatchProblem.invalid("app", "unknown app \"\(app.prefix(64))\"", code: .unknownApp)
        }
        return rings
    }

    /// Whether `problem` comes from a rule of the API alone (stricter than the event contract).
    static func apiOnlyRule(_ problem: DispatchProblem) -> Bool {
        problem.detail.hasSuffix(spoofingDetail) || (problem.field?.hasPrefix("attributes.") == true && problem.detail.hasSuffix(controlDetail))
    }

    /// Whether `text` has a control character (general category Cc: U+0000–U+001F, U+007F–U+009F),
    /// without a Unicode property lookup for ASCII (nearly every attribute).
    static func hasControl(_ text: String) -> Bool {
        text.unicodeScalars.contains { $0.value < 0x80 ? $0.value < 0x20 || $0.value == 0x7F : $0.properties.generalCategory == .control }
    }

    static let spoofingDetail = "contains bidirectional or invisible formatting characters"
    static let controlDetail = "contains control characters"

    /// Bidi controls (which reorder what is shown) and invisible characters (zero-width space,
    /// word joiner, BOM, Mongolian vowel separator).
    static func isSpoofing(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x200B, 0x2060...0x2064, 0xFEFF, 0x180E: true
        default: false
        }
    }

    /// Runs the contract's rules over the event and the VoIP payload size check; returns the
    /// encoded event.
    /// How many bytes a VoIP payload can have beyond its ring event's encoding (see `check`).
    static let payloadOverheadBound = 512

    static func check(_ ring: RingRequest, deviceIndex: Int) throws(DispatchProblem) -> Data {
        func mapped(_ error: ContractError) -> DispatchProblem {
            var error = error
            if error.path == "device" || error.path.hasPrefix("device.") {
                error.path = "devices[\(deviceIndex)]" + error.path.dropFirst("device".count)
            }
            return DispatchProblem.contract(error)
        }
        // The event's own rules (device and caller passed their decoders when the request was
        // decoded); `CallSubmissionTests` checks that what passes decodes back equal.
        let data: Data
        do {
            try ring.validate()
            data = try CallRequest.ring(ring).encoded()
        } catch let error as ContractError {
            throw mapped(error)
        } catch {
            throw DispatchProblem.invalid("", "the request cannot be encoded")
        }
        guard data.count <= ContractCoding.maxDocumentBytes else {
            throw DispatchProblem.invalid("", "the event would be larger than \(ContractCoding.maxDocumentBytes) bytes")
        }
        // Every variable-length value of the VoIP payload is in the event too, written by the same
        // writer; what the payload adds (its keys, the device key, the ack token, defaults) is under
        // `payloadOverheadBound` bytes (`CallSubmissionTests` checks it on generated rings). So a
        // small event cannot make a payload over Apple's limit, and only a large one is encoded
        // as the worker will (SHA-256 of the token and the whole payload, per device).
        // An Android device's data message has FCM's smaller limit (4096 bytes of keys and values,
        // strings only: no JSON punctuation but the attributes' own), under the same bound.
        let limit = ring.device.platform == .android ? VoIPPayload.fcmMaxDataBytes : VoIPPayload.maxBytes
        if data.count + Self.payloadOverheadBound <= limit { return data }
        // The worker adds an ack token (base64url of a fixed length) and the device key.
        let payload = VoIPPayload(ring: ring, deviceKey: DeviceKey.make(token: ring.device.token),
                                  ackToken: String(repeating: "A", count: VoIPPayload.ackTokenLength))
        do {
            switch ring.device.platform {
            case .ios: _ = try payload.encoded()
            case .android: _ = try payload.fcmData()
            }
        } catch {
            throw mapped(error)
        }
        return data
    }
}
