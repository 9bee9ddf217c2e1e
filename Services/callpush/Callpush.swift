import ArgumentParser
import CallpushCLI

/// The `callpush` program: everything lives in `CallpushCLI` so tests run the same commands.
@main
extension CallpushCommand {}
