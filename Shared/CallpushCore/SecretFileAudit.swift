import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Checks that a secret file (APNs key, certificate key, password, ack secret, API keys file) is
/// not readable by other users. The check follows symlinks (`stat`, not `lstat`): a Kubernetes
/// Secret volume exposes every key as a link (`key -> ..data/key`) whose own mode means nothing.
/// Mount secrets with `defaultMode: 0400` (0440 with an `fsGroup`).
public enum SecretFileAudit {
    /// A warning naming the setting and the file's real mode when others can access it, or its
    /// group can write it, or a group the process is not in can read it; nil when it is private
    /// (or cannot be inspected — reading it reports that).
    public static func warning(path: String, key: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        let mode = Int(info.st_mode) & 0o777
        let othersAccess = mode & 0o007 != 0
        let groupWrites = mode & 0o020 != 0
        let strangersRead = mode & 0o040 != 0 && !isOwnGroup(info.st_gid)
        guard othersAccess || groupWrites || strangersRead else { return nil }
        return "\(key): secret file \(path) is accessible to other users (mode \(String(mode, radix: 8))); "
            + "restrict it with chmod 600 (or defaultMode 0400 for a Kubernetes Secret volume)"
    }

    /// Whether `group` is the process's effective group or one of its supplementary groups
    /// (a Kubernetes `fsGroup` is one of them).
    static func isOwnGroup(_ group: gid_t) -> Bool {
        if group == getegid() { return true }
        let count = getgroups(0, nil)
        guard count > 0 else { return false }
        var groups = [gid_t](repeating: 0, count: Int(count))
        let filled = getgroups(count, &groups)
        return groups.prefix(Int(max(0, filled))).contains(group)
    }
}
