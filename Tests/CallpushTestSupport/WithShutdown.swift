/// Runs `body` with `resource`, then `shutdown`, also when `body` throws: every test's
/// "start it, use it, always stop it" in one place.
public func withShutdown<Resource, T: Sendable>(
    _ resource: Resource,
    shutdown: (Resource) async -> Void,
    _ body: (Resource) async throws -> T
) async throws -> T {
    let result: T
    do {
        result = try await body(resource)
    } catch {
        await shutdown(resource)
        throw error
    }
    await shutdown(resource)
    return result
}
