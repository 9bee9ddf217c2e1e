import Foundation

/// Checks that a secret file (APNs key, certificate key, password, ack secret) is not readable
/// by other users. Kubernetes Secret volumes should use `defaultMode: 0400`.
public enum SecretFileAudit {
    /// A warning naming the setting and the file's mode when group or others can read or write
    /// it; nil when it is private (or cannot be inspected — reading it reports that).
    public static func warning(path: String, key: String) -> String? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
              let mode = (attributes[.posixPermissions] as? NSNumber)?.uint16Value else { return nil }
        guard mode & 0o077 != 0 else { return nil }
        return "\(key): secret file \(path) is accessible to other users (mode \(String(mode & 0o777, radix: 8))); "
            + "restrict it with chmod 600 (or defaultMode 0400 for a Kubernetes Secret volume)"
    }
}
