#if canImport(Glibc)
import Glibc
#endif

/// Gives the calling thread its name in the kernel (`top -H`, `perf`, `/proc/<pid>/task/*/comm`;
/// at most 15 bytes). On Linux, Foundation's `Thread.name` does not reach the kernel, so the poll
/// threads showed the name of whichever concurrency thread started them and their CPU could not be
/// told apart from the tasks'. (`pthread_setname_np` is not visible to Swift's Glibc module; the
/// thread's own `comm` file is the same call.)
func nameCurrentThreadForTheKernel(_ name: String) {
    #if os(Linux)
    guard let file = fopen("/proc/thread-self/comm", "w") else { return }
    _ = fputs(String(decoding: name.utf8.prefix(15), as: UTF8.self), file)
    fclose(file)
    #endif
}
