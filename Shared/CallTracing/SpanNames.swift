/// The names of callpush's spans (docs/tracing.md describes each).
public enum SpanName {
    /// dispatch: `POST /v1/calls` (server span, continuing the caller's `traceparent`).
    public static let ring = "POST /v1/calls"
    /// dispatch: `DELETE /v1/calls/{callId}`.
    public static let cancel = "DELETE /v1/calls/{callId}"
    /// dispatch: the ring or cancel events of one request sent to the requests topic (producer);
    /// its context is in every record's headers.
    public static let publishEvents = "publish call events"
    /// dispatch: a status written to SSE streams following the call.
    public static let streamStatus = "stream status"
    /// dispatch: one webhook POST attempt (client).
    public static let webhook = "POST webhook"
    /// push-worker: one event's processing (consumer), from the moment it is read.
    public static let processEvent = "process call event"
    public static let decode = "decode"
    public static let dedupe = "dedupe"
    /// push-worker: one APNs attempt (client).
    public static let apnsPush = "APNs push"
    /// push-worker: one FCM attempt (client), for an Android device.
    public static let fcmPush = "FCM push"
    public static let backoff = "retry back-off"
    /// push-worker: a status written to the status topic (producer); its context is in the record's headers.
    public static let writeStatus = "write status"
    /// push-worker: a record written to the DLQ (producer); its context is in the record's headers.
    public static let writeDeadLetter = "write dead letter"
    /// `callpush replay`: one dead-lettered event published again (producer).
    public static let replay = "replay dead letter"

    /// The header of a replayed event naming the `traceparent` of the delivery it replays: the
    /// worker links its processing span to that trace.
    public static let linkHeader = "callpush-trace-link"
}

/// The span attributes callpush sets, in one place (docs/tracing.md lists them). Values are
/// identifiers, states and Apple's answers — never a device token (`callpush.device.key` is its
/// SHA-256), a key or a secret.
public enum SpanAttributeName {
    public static let callID = "callpush.call.id"
    public static let app = "callpush.app"
    public static let tenant = "callpush.tenant"
    public static let deviceKey = "callpush.device.key"
    public static let replay = "callpush.replay"
    /// The call status a delivery or status write ended in (`sent`, `retrying`, …).
    public static let state = "callpush.state"
    /// Push attempt number (1, 2, …), as in the statuses' `attempt`.
    public static let attempt = "callpush.attempt"
    /// Whether dedupe found the delivery handled already.
    public static let duplicate = "callpush.duplicate"
    /// An error code (contract code, APNs reason, `app-suspended`, …).
    public static let errorCode = "callpush.error.code"
    /// Devices of a `POST /v1/calls`.
    public static let devices = "callpush.devices"
    public static let apnsReason = "callpush.apns.reason"
    /// FCM's error code (or the transport's) of an Android attempt.
    public static let fcmReason = "callpush.fcm.reason"
    /// `ios` or `android`.
    public static let platform = "callpush.platform"
    public static let apnsID = "callpush.apns.id"
    public static let apnsEnvironment = "callpush.apns.environment"
    /// Attempt number of a webhook POST.
    public static let webhookAttempt = "callpush.webhook.attempt"
    /// SSE streams a status was written to.
    public static let streams = "callpush.sse.streams"

    public static let httpMethod = "http.request.method"
    public static let httpRoute = "http.route"
    public static let httpStatus = "http.response.status_code"

    public static let messagingSystem = "messaging.system"
    public static let messagingOperation = "messaging.operation.type"
    public static let destination = "messaging.destination.name"
    public static let partition = "messaging.destination.partition.id"
    public static let offset = "messaging.kafka.offset"
    public static let batchSize = "messaging.batch.message_count"
}
