import Foundation

/// Runs `body` with a new empty directory `<temporary directory>/<prefix>-<UUID>` and removes the
/// directory and everything in it afterwards, also when `body` throws: the scratch space of a test
/// (key files, CA files, a child's output) in one place.
public func withTemporaryDirectory<T>(_ prefix: String, _ body: (URL) async throws -> T) async throws -> T {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}
