import CallContract
import Foundation

/// Renders statuses as fixed-width table rows (so `--follow` can print as they come) or JSON lines.
struct StatusTable: Sendable {
    var json: Bool

    private static let widths = [24, 20, 10, 7, 6, 24]

    var header: String {
        Self.render(["TIME", "DEVICE", "STATE", "ATTEMPT", "REPLAY", "APNS", "ERROR"])
    }

    func row(_ status: CallStatus) -> String {
        if json {
            return (try? status.encoded()).flatMap { String(data: $0, encoding: .utf8) } ?? "{}"
        }
        let device = status.deviceId ?? status.deviceKey.map { String($0.prefix(16)) } ?? "-"
        var apns = "-"
        if let details = status.apns {
            apns = [details.status.map(String.init), details.reason].compactMap { $0 }.joined(separator: " ")
            if apns.isEmpty { apns = "no answer" }
        } else if let details = status.fcm {
            // An Android device's FCM answer, in the same column.
            apns = (["fcm"] + [details.status.map(String.init), details.errorCode].compactMap { $0 }).joined(separator: " ")
            if details.status == nil && details.errorCode == nil { apns = "fcm no answer" }
        }
        let error = status.error.map { [$0.code, $0.message].compactMap { $0 }.joined(separator: ": ") } ?? "-"
        return Self.render([ContractCoding.format(status.at), device, status.state.rawValue, String(status.attempt),
                            String(status.replay), apns, error])
    }

    private static func render(_ columns: [String]) -> String {
        var line = ""
        for (index, column) in columns.enumerated() {
            guard index < widths.count else {
                line += column
                break
            }
            let width = widths[index]
            let text = column.count > width ? String(column.prefix(width - 1)) + "…" : column
            line += text + String(repeating: " ", count: width - text.count + 1)
        }
        return line
    }
}
