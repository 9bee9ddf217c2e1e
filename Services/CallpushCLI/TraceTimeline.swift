import CallTracing
import Foundation

/// Renders spans as one timeline per trace: each span's start (from the trace's first), its
/// duration, service and name (indented under its parent), a bar placing it on the trace's time
/// axis, and the attributes that say what happened (call, APNs answer, state, error).
enum TraceTimeline {
    static let barWidth = 32
    /// Attributes shown after a span, in this order, with short names.
    static let shown: [(key: String, label: String)] = [
        (SpanAttributeName.callID, "call"), (SpanAttributeName.app, "app"), (SpanAttributeName.tenant, "tenant"),
        (SpanAttributeName.deviceKey, "device"), (SpanAttributeName.replay, "replay"),
        (SpanAttributeName.partition, "partition"), (SpanAttributeName.offset, "offset"),
        (SpanAttributeName.attempt, "attempt"), (SpanAttributeName.httpStatus, "status"),
        (SpanAttributeName.apnsReason, "reason"), (SpanAttributeName.duplicate, "duplicate"),
        (SpanAttributeName.state, "state"), (SpanAttributeName.errorCode, "error"),
        (SpanAttributeName.streams, "streams"), (SpanAttributeName.webhookAttempt, "attempt"),
    ]

    static func render(_ spans: [CollectedSpan]) -> [String] {
        let traces = Dictionary(grouping: spans, by: \.traceID)
            .sorted { ($0.value.map(\.startNanoseconds).min() ?? 0) < ($1.value.map(\.startNanoseconds).min() ?? 0) }
        var lines: [String] = []
        for (traceID, spans) in traces {
            if !lines.isEmpty { lines.append("") }
            lines += render(trace: traceID, spans)
        }
        return lines
    }

    private static func render(trace traceID: String, _ spans: [CollectedSpan]) -> [String] {
        let start = spans.map(\.startNanoseconds).min() ?? 0
        let end = max(start + 1, spans.map(\.endNanoseconds).max() ?? start)
        let total = Double(end - start)
        let links = Set(spans.flatMap(\.links).map(\.traceID)).subtracting([traceID]).sorted()
        var lines = ["trace \(traceID)  \(spans.count) spans, \(milliseconds(end - start))"
                     + (links.isEmpty ? "" : "  (linked to trace \(links.joined(separator: ", ")))")]
        lines.append(pad("START", 11) + pad("DURATION", 11) + pad("SERVICE", 13) + pad("SPAN", 40) + pad("", barWidth + 3) + "DETAILS")

        let ids = Set(spans.map(\.spanID))
        let children = Dictionary(grouping: spans.filter { $0.parentSpanID.map(ids.contains) ?? false }, by: { $0.parentSpanID ?? "" })
        let roots = spans.filter { !($0.parentSpanID.map(ids.contains) ?? false) }
        func visit(_ span: CollectedSpan, depth: Int) {
            let from = Double(span.startNanoseconds - start) / total
            let to = Double(max(span.endNanoseconds, span.startNanoseconds) - start) / total
            let first = min(barWidth - 1, Int(from * Double(barWidth)))
            let last = max(first, min(barWidth - 1, Int((to * Double(barWidth)).rounded(.up)) - 1))
            let bar = String(repeating: " ", count: first) + String(repeating: "█", count: last - first + 1)
                + String(repeating: " ", count: barWidth - last - 1)
            var details = shown.compactMap { key, label in span.attributes[key].map { "\(label)=\(short($0, key: key))" } }
            if let error = span.error { details.append("ERROR \(error)") }
            lines.append(pad("+" + milliseconds(span.startNanoseconds - start), 11) + pad(milliseconds(span.endNanoseconds &- span.startNanoseconds), 11)
                         + pad(span.service, 13) + pad(String(repeating: "  ", count: depth) + span.name, 40)
                         + "|" + bar + "|  " + details.joined(separator: " "))
            for child in (children[span.spanID] ?? []).sorted(by: { $0.startNanoseconds < $1.startNanoseconds }) {
                visit(child, depth: depth + 1)
            }
        }
        for root in roots.sorted(by: { $0.startNanoseconds < $1.startNanoseconds }) { visit(root, depth: 0) }
        return lines
    }

    static func milliseconds(_ nanoseconds: UInt64) -> String {
        let value = Double(nanoseconds) / 1e6
        return value < 10 ? String(format: "%.2f ms", value) : String(format: "%.1f ms", value)
    }

    /// Long ids cut to a readable prefix (the full ones are in the collector's JSON).
    private static func short(_ value: String, key: String) -> String {
        key == SpanAttributeName.deviceKey && value.count > 12 ? String(value.prefix(12)) : value
    }

    private static func pad(_ text: String, _ width: Int) -> String {
        let cut = text.count > width - 1 ? String(text.prefix(width - 2)) + "…" : text
        return cut + String(repeating: " ", count: max(1, width - cut.count))
    }
}
