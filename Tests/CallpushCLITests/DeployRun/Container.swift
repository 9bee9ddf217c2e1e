import CallpushTestSupport
import Foundation

/// One container as a deploy file describes it, ready to run on this machine.
struct ContainerSpec {
    struct Mount {
        var containerPath: String
        var hostPath: String
        var readOnly: Bool
    }

    /// A name for logs and failure messages (the compose service or the pod).
    var name: String
    var hostname: String
    /// The container's own address (a loopback address of its own).
    var address: String
    /// The image target (`callpush/<target>`).
    var target: String
    /// Entrypoint and command, as the container runs them.
    var argv: [String]
    /// The environment, in order.
    var environment: [(String, String)]
    var mounts: [Mount] = []
    var uid = 0
    var gid = 0
    var supplementaryGroups: [Int] = []
    var readOnlyRootFilesystem = false
    var noNewPrivileges = false
    var dropAllCapabilities = false
    var workdir = "/"
    /// /etc/hosts lines: address -> names.
    var hosts: [(String, [String])] = []
    /// A CA certificate added to the system trust store (/etc/ssl/certs/ca-certificates.crt).
    var trustedCA: String?

    func value(_ name: String) -> String? { environment.last { $0.0 == name }?.1 }

    mutating func set(_ name: String, _ value: String) {
        if let index = environment.lastIndex(where: { $0.0 == name }) { environment[index].1 = value } else { environment.append((name, value)) }
    }
}

/// Runs a ``ContainerSpec`` as a container runtime would, with what this machine has: a private
/// mount and UTS namespace (`unshare`), a root file system of its own (a tmpfs holding the host's
/// /usr and /opt read-only, an overlay of /etc with the container's /etc/hosts, /app with the
/// built program where the Dockerfile puts it), the volumes bound at their mount paths (read-only
/// where the file says so), the host name, and the user, groups and privileges of the file
/// (`setpriv`); the environment is exactly the container's (`env -i`). Needs root.
enum ContainerRuntime {
    /// Whether containers can be run here (root: namespaces, mounts, other users).
    static var available: Bool { geteuid() == 0 }

    /// Starts `spec`; `directory` holds its scratch mount points and `products` the built programs.
    static func start(_ spec: ContainerSpec, dockerfile: DockerfileFacts, directory: URL, products: URL) async throws -> ServerProcess {
        guard available else { throw DeployRunFailure("running containers needs root (mount namespaces, chroot, setpriv)") }
        let scratch = directory.appendingPathComponent("containers/\(spec.name)")
        let root = scratch.appendingPathComponent("root"), upper = scratch.appendingPathComponent("etc-overlay")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: upper, withIntermediateDirectories: true)
        let hosts = (["127.0.0.1\tlocalhost"] + spec.hosts.map { "\($0.0)\t\($0.1.joined(separator: " "))" }).joined(separator: "\n") + "\n"
        try hosts.write(to: scratch.appendingPathComponent("hosts"), atomically: true, encoding: .utf8)

        var script = ["set -eu", "R=\(quote(root.path))", "O=\(quote(upper.path))",
                      "mount -t tmpfs -o mode=0755 root \"$R\"", "mount -t tmpfs -o mode=0755 etc \"$O\"",
                      "mkdir \"$O/upper\" \"$O/work\"", "cd \"$R\""]
        // The host's system, read-only: merged-/usr links as they are, /usr and /opt (the Swift runtime).
        for entry in try FileManager.default.contentsOfDirectory(atPath: "/").sorted() {
            let path = "/" + entry
            if let link = try? FileManager.default.destinationOfSymbolicLink(atPath: path), ["bin", "sbin", "lib", "lib32", "lib64", "libx32"].contains(entry) {
                script.append("ln -s \(quote(link)) \(quote(entry))")
            } else if ["usr", "opt", "bin", "sbin", "lib", "lib64"].contains(entry) {
                script.append("mkdir \(entry) && mount --rbind /\(entry) \(entry) && mount -o remount,bind,ro \(entry)")
            }
        }
        script += ["mkdir proc dev sys etc tmp run app && chmod 1777 tmp",
                   "mount --rbind /proc proc && mount --rbind /dev dev && mount --rbind /sys sys",
                   "mount -t overlay overlay -o lowerdir=/etc,upperdir=\"$O/upper\",workdir=\"$O/work\" etc",
                   "cp \(quote(scratch.appendingPathComponent("hosts").path)) etc/hosts",
                   "echo \(quote(spec.hostname)) > etc/hostname"]
        if spec.uid != 0 {
            // The image's user (the Dockerfile's useradd), so the user and group have names.
            script.append("grep -q '^[^:]*:[^:]*:\(spec.uid):' etc/passwd || echo 'callpush:x:\(spec.uid):\(spec.gid)::/nonexistent:/usr/sbin/nologin' >> etc/passwd")
            script.append("grep -q '^[^:]*:[^:]*:\(spec.gid):' etc/group || echo 'callpush:x:\(spec.gid):' >> etc/group")
        }
        if let ca = spec.trustedCA {
            let caFile = scratch.appendingPathComponent("trusted-ca.pem")
            try ca.write(to: caFile, atomically: true, encoding: .utf8)
            script.append("cat \(quote(caFile.path)) >> etc/ssl/certs/ca-certificates.crt")
        }
        // The image's programs where the Dockerfile copies them.
        for (path, program) in dockerfile.programs(spec.target).sorted(by: { $0.key < $1.key }) {
            let built = products.appendingPathComponent(program).path
            guard FileManager.default.isExecutableFile(atPath: built) else { throw DeployRunFailure("\(program) is not built in \(products.path)") }
            script.append("mkdir -p \"$(dirname .\(quote(path)))\" && touch .\(quote(path)) && mount --bind \(quote(built)) .\(quote(path))")
        }
        for mount in spec.mounts {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: mount.hostPath, isDirectory: &isDirectory) else {
                throw DeployRunFailure("\(spec.name): nothing to mount at \(mount.containerPath) (\(mount.hostPath) does not exist)")
            }
            let target = "." + quote(mount.containerPath)
            script.append(isDirectory.boolValue ? "mkdir -p \(target)" : "mkdir -p \"$(dirname \(target))\" && touch \(target)")
            script.append("mount --bind \(quote(mount.hostPath)) \(target)")
            if mount.readOnly { script.append("mount -o remount,bind,ro \(target)") }
        }
        script.append("hostname \(quote(spec.hostname))")
        if spec.readOnlyRootFilesystem { script += ["mount -o remount,bind,ro etc", "mount -o remount,ro \"$R\""] }
        var privileges = ["/usr/bin/setpriv", "--reuid=\(spec.uid)", "--regid=\(spec.gid)"]
        privileges.append(spec.supplementaryGroups.isEmpty ? "--clear-groups" : "--groups=" + spec.supplementaryGroups.map(String.init).joined(separator: ","))
        if spec.noNewPrivileges { privileges.append("--no-new-privs") }
        if spec.dropAllCapabilities { privileges += ["--inh-caps=-all", "--bounding-set=-all"] }
        let environment = spec.environment.map { quote("\($0.0)=\($0.1)") }
        script.append("exec /usr/sbin/chroot \"$R\" " + (privileges + ["--", "/usr/bin/env", "-i", "-C", quote(spec.workdir)]).joined(separator: " ")
                      + " " + environment.joined(separator: " ") + " " + spec.argv.map(quote).joined(separator: " "))
        try script.joined(separator: "\n").write(to: scratch.appendingPathComponent("start.sh"), atomically: true, encoding: .utf8)
        return try await ServerProcess("/usr/bin/unshare", ["--mount", "--uts", "--propagation", "private", "/bin/sh", scratch.appendingPathComponent("start.sh").path],
                                 environment: ["PATH": DockerfileFacts.basePath])
    }

    /// `text` as one shell word.
    static func quote(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}
