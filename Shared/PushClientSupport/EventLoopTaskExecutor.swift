import NIOCore

/// Runs the jobs of the tasks that prefer it (`withTaskExecutorPreference`, `Task(executorPreference:)`)
/// on one NIO event loop, so work that feeds that loop's connections runs on the thread that writes
/// their frames and reads their answers, without a hop between threads either way. The APNs client
/// sends a run's pushes this way; the push-worker runs its deliveries on the push connections' loops.
/// What such a task does between suspensions must be short: it holds up the loop's I/O meanwhile.
public final class EventLoopTaskExecutor: TaskExecutor {
    public let loop: any EventLoop

    public init(_ loop: any EventLoop) {
        self.loop = loop
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
