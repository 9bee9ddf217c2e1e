import Foundation
import Testing
import CallpushCore

/// Secret files are judged by what they point at: Kubernetes mounts every secret as a symlink.
@Suite struct SecretFileAuditTests {
    static func directory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("secret-audit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// `key -> ..data/key`, as a Kubernetes secret volume lays it out.
    static func kubernetesStyle(mode: Int) throws -> String {
        let dir = try directory()
        let data = dir.appendingPathComponent("..data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        let target = data.appendingPathComponent("ack-secret")
        try Data("s3cret".utf8).write(to: target)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: target.path)
        let link = dir.appendingPathComponent("ack-secret").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "..data/ack-secret")
        return link
    }

    @Test func aPrivateFileBehindASymlinkIsNotWarnedAbout() throws {
        #expect(SecretFileAudit.warning(path: try Self.kubernetesStyle(mode: 0o400), key: "K") == nil)
        #expect(SecretFileAudit.warning(path: try Self.kubernetesStyle(mode: 0o600), key: "K") == nil)
    }

    @Test func aWorldReadableFileBehindASymlinkIsWarnedAboutWithItsRealMode() throws {
        let warning = try #require(SecretFileAudit.warning(path: try Self.kubernetesStyle(mode: 0o644), key: "K"))
        #expect(warning.contains("644"))
        #expect(warning.hasPrefix("K:"))
    }

    @Test func groupReadIsFineForTheProcesssOwnGroup() throws {
        // defaultMode 0400 with an fsGroup gives 0440 owned by the pod's group.
        #expect(SecretFileAudit.warning(path: try Self.kubernetesStyle(mode: 0o440), key: "K") == nil)
        #expect(SecretFileAudit.warning(path: try Self.kubernetesStyle(mode: 0o460), key: "K") != nil, "group-writable")
    }

    @Test func aSecretFileWithCRLFIsReadWithoutItsLineEnd() throws {
        let file = try Self.directory().appendingPathComponent("secret")
        try Data("0123456789abcdef0123456789abcdef\r\n".utf8).write(to: file)
        let reader = EnvironmentReader(env: ["S_FILE": file.path])
        #expect(try reader.secret("S") == "0123456789abcdef0123456789abcdef")
    }
}
