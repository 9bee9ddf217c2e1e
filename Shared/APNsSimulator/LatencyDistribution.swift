import Foundation

/// A per-request delay before the simulator answers.
public struct LatencyDistribution: Sendable, Codable, Equatable {
    /// The shape of the distribution.
    public enum Shape: String, Sendable, Codable {
        /// Always ``LatencyDistribution/minimumMilliseconds``.
        case fixed
        /// Uniform between minimum and maximum.
        case uniform
        /// Roughly normal: mean halfway between minimum and maximum, standard deviation a sixth of the range,
        /// clamped to the range.
        case normal
    }

    /// The shape.
    public var shape: Shape
    /// The smallest delay in milliseconds.
    public var minimumMilliseconds: Double
    /// The largest delay in milliseconds (ignored by `.fixed`).
    public var maximumMilliseconds: Double

    /// Creates a distribution.
    public init(shape: Shape, minimumMilliseconds: Double, maximumMilliseconds: Double) {
        self.shape = shape
        self.minimumMilliseconds = minimumMilliseconds
        self.maximumMilliseconds = maximumMilliseconds
    }

    /// Always `milliseconds`.
    public static func fixed(milliseconds: Double) -> LatencyDistribution {
        LatencyDistribution(shape: .fixed, minimumMilliseconds: milliseconds, maximumMilliseconds: milliseconds)
    }

    /// Uniform in `minimum...maximum` milliseconds.
    public static func uniform(minimumMilliseconds: Double, maximumMilliseconds: Double) -> LatencyDistribution {
        LatencyDistribution(shape: .uniform, minimumMilliseconds: minimumMilliseconds, maximumMilliseconds: maximumMilliseconds)
    }

    /// Roughly normal within `minimum...maximum` milliseconds.
    public static func normal(minimumMilliseconds: Double, maximumMilliseconds: Double) -> LatencyDistribution {
        LatencyDistribution(shape: .normal, minimumMilliseconds: minimumMilliseconds, maximumMilliseconds: maximumMilliseconds)
    }

    /// Draws one delay in nanoseconds.
    func sampleNanoseconds<R: RandomNumberGenerator>(using rng: inout R) -> Int64 {
        let low = minimumMilliseconds
        let high = max(minimumMilliseconds, maximumMilliseconds)
        let ms: Double
        switch shape {
        case .fixed:
            ms = low
        case .uniform:
            ms = high > low ? Double.random(in: low...high, using: &rng) : low
        case .normal:
            // Box–Muller; good enough for test latencies.
            let u1 = Double.random(in: Double.ulpOfOne..<1, using: &rng)
            let u2 = Double.random(in: 0..<1, using: &rng)
            let z = (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
            let mean = (low + high) / 2
            ms = min(high, max(low, mean + z * (high - low) / 6))
        }
        return Int64(ms * 1_000_000)
    }

    func validate() throws {
        guard minimumMilliseconds.isFinite, maximumMilliseconds.isFinite,
            minimumMilliseconds >= 0, maximumMilliseconds >= minimumMilliseconds || shape == .fixed,
            max(minimumMilliseconds, maximumMilliseconds) <= 600_000
        else {
            throw APNSSimulatorError.invalidFaults("latency must satisfy 0 <= minimum <= maximum <= 600000 ms")
        }
    }
}
