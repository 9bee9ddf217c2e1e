import CallContract
import Kafka

/// A request event as the worker receives it from `voip.call-requests`.
public struct InboundEvent: Sendable {
    public var partition: Int32
    public var offset: Int64
    public var key: [UInt8]?
    public var value: [UInt8]
    /// The record's headers (its `traceparent` is passed on to the outcome records).
    public var headers: [KafkaHeader]
    /// The trace of its processing, when tracing is on (`DeliveryTrace`).
    var trace: DeliveryTrace?

    public init(partition: Int32, offset: Int64, key: [UInt8]?, value: [UInt8], headers: [KafkaHeader] = []) {
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers
    }

    /// The record key as a call id, when it is short printable UTF-8 (the contract keys by callId).
    var keyAsCallID: String? {
        guard let key, !key.isEmpty, key.count <= 64,
              let text = String(validating: key, as: UTF8.self),
              text.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value < 0x7F }) else { return nil }
        return text
    }
}

/// How the processing of one event ended.
public enum DeliveryResult: Sendable, Hashable {
    /// The outcome is durable (status and, if any, DLQ record acknowledged): store the offset.
    /// The state is the status written (nil for events that write none, such as `cancel`).
    case finished(CallStatus.State?)
    /// Processing stopped before an outcome was durable (shutdown, partition revoked): do not
    /// store the offset; the next owner processes the event again.
    case handedBack
}
