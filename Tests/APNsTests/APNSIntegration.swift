import Testing

/// Everything that runs the client against an in-process simulator. Serialized: the 10,000-push test
/// saturates a small machine's event loops, and deadline-bound tests next to it would measure contention.
@Suite(.serialized) enum APNSIntegration {}
