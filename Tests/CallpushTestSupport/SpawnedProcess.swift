import Foundation
import Locking
import Subprocess
import SystemPackage

/// A child process started through swift-subprocess, its stdout and stderr written to files.
///
/// Not Foundation's `Process`: on Linux, Swift 6.3.1's `Process.run()` finds the highest open
/// descriptor by copying whole `dirent` names out of `/proc/self/fd`, an over-read that crashes
/// (SIGSEGV in memcpy) when a record ends near an unmapped page — which a test process holding
/// hundreds of sockets hits now and then (swift-corelibs-foundation#5472, fixed after 6.3.1).
/// swift-subprocess closes the child's descriptors with `close_range` instead.
final class SpawnedProcess: Sendable {
    let pid: pid_t
    /// The exit code, or the signal that ended the process; one value, then the stream ends.
    let exit: AsyncStream<Int32>
    private let ended: Locked<Bool>

    private init(pid: pid_t, exit: AsyncStream<Int32>, ended: Locked<Bool>) {
        self.pid = pid
        self.exit = exit
        self.ended = ended
    }

    var isRunning: Bool { !ended.withLock { $0 } }

    /// Sends `signal` unless the process has ended (its pid may then belong to another process).
    func signal(_ signal: Int32) {
        if isRunning { kill(pid, signal) }
    }

    /// Starts `path` with `arguments`; `environment` nil inherits the test's environment.
    static func start(_ path: String, _ arguments: [String], environment: [String: String]?,
                      workingDirectory: String? = nil, stdout: String, stderr: String) async throws -> SpawnedProcess {
        let out = try FileDescriptor.open(FilePath(stdout), .writeOnly, options: [.create, .truncate, .closeOnExec],
                                          permissions: [.ownerReadWrite, .groupRead, .otherRead])
        let err: FileDescriptor
        do {
            err = try FileDescriptor.open(FilePath(stderr), .writeOnly, options: [.create, .truncate, .closeOnExec],
                                          permissions: [.ownerReadWrite, .groupRead, .otherRead])
        } catch {
            try? out.close()
            throw error
        }
        let env: Subprocess.Environment = environment.map { values in
            .custom(Dictionary(uniqueKeysWithValues: values.compactMap { key, value in
                Subprocess.Environment.Key(rawValue: key).map { ($0, value) }
            }))
        } ?? .inherit
        let (exit, exitContinuation) = AsyncStream<Int32>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let ended = Locked(false)
        let spawned = Locked(false)
        let pid: pid_t = try await withCheckedThrowingContinuation { continuation in
            Task.detached {
                do {
                    let result = try await Subprocess.run(
                        .path(FilePath(path)), arguments: Arguments(arguments), environment: env,
                        workingDirectory: workingDirectory.map { FilePath($0) },
                        input: .none,
                        output: .fileDescriptor(out, closeAfterSpawningProcess: true),
                        error: .fileDescriptor(err, closeAfterSpawningProcess: true)
                    ) { execution in
                        spawned.withLock { $0 = true }
                        continuation.resume(returning: execution.processIdentifier.value)
                    }
                    let code: Int32
                    switch result.terminationStatus {
                    case .exited(let status): code = status
                    case .signaled(let signal): code = signal
                    }
                    ended.withLock { $0 = true }
                    exitContinuation.yield(code)
                } catch {
                    ended.withLock { $0 = true }
                    if !spawned.withLock({ $0 }) { continuation.resume(throwing: error) }
                }
                exitContinuation.finish()
            }
        }
        return SpawnedProcess(pid: pid, exit: exit, ended: ended)
    }
}
